"""The fixture passenger's flight in tests: where the ticket is now, and a move to a later one.

``ticket_flight`` and ``tomorrow_flight`` take the ``Database`` itself, or the path or URL
of one (a test that only looks once, such as after a program in another process wrote
to it); ``change_call`` is the scripted model's call moving the fixture ticket.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import select

from db.engine import Database
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_TICKET_NO
from db.models import Flight, TicketFlight
from tests.support.scripted import call

DatabaseLike = Database | Path | str

_T = TypeVar("_T")


def _with_database(db: DatabaseLike, read: Callable[[Database], _T]) -> _T:
    """Run ``read`` on ``db``, opening (and closing) it when given its path or URL."""
    if isinstance(db, Database):
        return read(db)
    database = Database.from_url(str(db))
    try:
        return read(database)
    finally:
        database.dispose()


def fixture_segment(db: Database) -> TicketFlight:
    """Return the fixture ticket's (only) segment."""
    with db.session() as session:
        return session.scalars(
            select(TicketFlight).where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
        ).one()


def ticket_flight(db: DatabaseLike) -> int:
    """Return the flight the fixture ticket is on now."""

    def read(database: Database) -> int:
        with database.session() as session:
            flight_id: int = session.scalars(
                select(TicketFlight.flight_id).where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
            ).one()
            return flight_id

    return _with_database(db, read)


def payments(db: DatabaseLike) -> int:
    """Return how many payments the fixture passenger has made (each charge is one)."""
    from sqlalchemy import func

    from db.fixtures import FIXTURE_PASSENGER_ID
    from db.models import Payment

    def read(database: Database) -> int:
        with database.session() as session:
            count: int = (
                session.scalar(
                    select(func.count())
                    .select_from(Payment)
                    .where(Payment.passenger_id == FIXTURE_PASSENGER_ID)
                )
                or 0
            )
            return count

    return _with_database(db, read)


def tomorrow_flight(db: DatabaseLike) -> int:
    """Return the next LX0112 at least 12 hours after the fixture ticket's flight.

    It keeps its local time, so it is not always 24 hours later in UTC.
    """

    def read(database: Database) -> int:
        current_id = ticket_flight(database)
        with database.session() as session:
            current = session.get(Flight, current_id)
            assert current is not None
            flight_id: int = session.scalars(
                select(Flight.flight_id)
                .where(
                    Flight.flight_no == FIXTURE_FLIGHT_NO,
                    Flight.scheduled_departure >= current.scheduled_departure + timedelta(hours=12),
                )
                .order_by(Flight.scheduled_departure)
            ).first()
            return flight_id

    return _with_database(db, read)


def later_fixture_flight(db: Database, days: int = 1) -> Flight:
    """The LX0112 flight ``days`` days after the fixture passenger's flight."""
    segment = fixture_segment(db)
    with db.session() as session:
        current = session.get(Flight, segment.flight_id)
        assert current is not None
        return session.scalars(
            select(Flight).where(
                Flight.flight_no == FIXTURE_FLIGHT_NO,
                Flight.scheduled_departure == current.scheduled_departure + timedelta(days=days),
            )
        ).one()


def change_call(db: Database, days: int = 1) -> dict[str, Any]:
    """A call moving the fixture ticket to the LX0112 ``days`` days later."""
    flight = later_fixture_flight(db, days)
    return call(
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": flight.flight_id},
    )
