"""One exception family for every business failure.

Messages are written for the customer and the model: they say what is wrong and, where
possible, what to do instead. Tools turn these into error ToolMessages; anything else
that is raised is a bug and propagates.

They are ``ValueError``s: a LangGraph server shows a client the message of the errors it
knows (``ValueError`` among them) and hides any other behind "An internal error occurred".
"""


class TravelError(ValueError):
    """Base class of every expected, user-facing failure."""


class MissingPassengerError(TravelError):
    """The run's config carries no passenger id."""


class NotFoundError(TravelError):
    """A ticket, flight, reservation or catalogue entry does not exist."""


class OwnershipError(TravelError):
    """The ticket or reservation belongs to another passenger."""


class RuleViolationError(TravelError):
    """A company rule forbids the requested change (time limits, route, status)."""


class UnavailableError(TravelError):
    """No seat, room, car or place is left for the requested dates."""


class InvalidInputError(TravelError):
    """An argument is malformed: a bad date, reversed dates, an empty query."""


class DatabaseMissingError(TravelError):
    """The database file does not exist or has no schema."""
