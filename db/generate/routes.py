"""The route type, and the fixture routes of ``db.fixtures`` as routes of the schedule.

``db.fixtures`` states every fixture route (flight number, airports, aircraft, departure
time); this module only turns them into ``_Route`` objects, which ``db.generate.schedule``
adds random routes to. The fixture tickets of ``db.generate.fixture_bookings`` find their
flights by the flight numbers of ``db.fixtures``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time, timedelta

from db import fixtures as fx


@dataclass(frozen=True)
class _Route:
    """One daily flight number: where, when (local time at the origin) and on what.

    ``local_departure`` of ``None`` means the time follows "now": the flight departs
    ``departs_in`` after it (fixtures only, see ``db.fixtures.FixtureRoute``).
    """

    flight_no: str
    origin: str
    destination: str
    aircraft_code: str
    local_departure: time | None
    fixture: bool = False
    departs_in: timedelta | None = None


def _schedule_route(route: fx.FixtureRoute) -> _Route:
    """Return the schedule's route for a fixture route, marked so it is never disrupted."""
    return _Route(
        route.flight_no,
        route.origin,
        route.destination,
        route.aircraft_code,
        route.local_departure,
        fixture=True,
        departs_in=route.departs_in,
    )


# The fixture routes, in the order of db.fixtures.FIXTURE_ROUTES.
_FIXTURE_ROUTES: tuple[_Route, ...] = tuple(_schedule_route(r) for r in fx.FIXTURE_ROUTES)
