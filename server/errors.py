"""The requests the HTTP service refuses, each with the HTTP status that says so.

``ConversationService`` (``server.service``), the turns it runs (``server.runs``) and
the hand-offs (``server.handoff``) raise them; the application (``server.app``) answers
each with its ``status`` and its ``detail``, which is written for the caller. They live
apart so that the service and the runner of its turns, which the service drives, both
raise them without importing each other.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A request the service refuses; ``status`` is the HTTP status that says so."""

    status = 400

    def __init__(self, detail: str) -> None:
        """Carry ``detail``, written for the caller."""
        super().__init__(detail)
        self.detail = detail


class NotFoundError(ServiceError):
    """No such conversation for this passenger (it may belong to another)."""

    status = 404


class ConflictError(ServiceError):
    """The request does not fit the conversation's state (a turn running, no approval)."""

    status = 409


class UnavailableError(ServiceError):
    """The conversations database cannot be reached; the request changed nothing."""

    status = 503


class ForbiddenError(ServiceError):
    """The token names a passenger the travel database does not know."""

    status = 403
