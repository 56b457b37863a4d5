"""Query-level tests of what only hotels have: the fixtures' full hotel, and a stay's dates.

The rules hotels share with car rentals and excursions are in ``test_db_reservations.py``.
"""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy import select

from db import reservations
from db.engine import Database
from db.errors import UnavailableError
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    FIXTURE_PASSENGER_ID,
    FULL_HOTEL_CHECKIN_IN_DAYS,
    FULL_HOTEL_NAME,
    FULL_HOTEL_ROOMS,
)
from db.hotels import HOTEL
from db.models import Hotel
from tests.support.reservation_domains import NOW, day
from tests.support.tools import dump


def hotel_named(db: Database, name: str) -> Hotel:
    with db.session() as session:
        return session.scalars(select(Hotel).where(Hotel.name == name)).one()


def book(db: Database, passenger_id: str, hotel_id: int, checkin: str, checkout: str) -> int:
    with db.transaction() as session:
        result = reservations.book(session, HOTEL, passenger_id, hotel_id, (checkin, checkout), NOW)
    booking_id: int = result["booking_id"]
    return booking_id


def test_update_hotel_does_not_count_the_reservation_itself(travel_db: Database) -> None:
    full = hotel_named(travel_db, FULL_HOTEL_NAME)
    ours = book(travel_db, BUSINESS_PASSENGER_ID, full.id, day(40), day(42))
    for _ in range(FULL_HOTEL_ROOMS - 1):
        book(travel_db, FIXTURE_PASSENGER_ID, full.id, day(40), day(42))
    with travel_db.transaction() as session:
        result = reservations.update(
            session, HOTEL, BUSINESS_PASSENGER_ID, ours, (day(41), day(43)), NOW
        )
    assert result["status"] == "changed"


def test_update_hotel_refuses_full_nights(travel_db: Database) -> None:
    full = hotel_named(travel_db, FULL_HOTEL_NAME)
    ours = book(travel_db, BUSINESS_PASSENGER_ID, full.id, day(30), day(31))
    before = dump(travel_db)
    with pytest.raises(UnavailableError), travel_db.transaction() as session:
        reservations.update(
            session,
            HOTEL,
            BUSINESS_PASSENGER_ID,
            ours,
            (day(FULL_HOTEL_CHECKIN_IN_DAYS), day(FULL_HOTEL_CHECKIN_IN_DAYS + 1)),
            NOW,
        )
    assert dump(travel_db) == before


def test_cancel_hotel_frees_the_room(travel_db: Database) -> None:
    full = hotel_named(travel_db, FULL_HOTEL_NAME)
    ids = [book(travel_db, BUSINESS_PASSENGER_ID, full.id, day(50), day(51)) for _ in range(2)]
    with travel_db.session() as session, pytest.raises(UnavailableError):
        reservations.quote_book(
            session, HOTEL, FIXTURE_PASSENGER_ID, full.id, (day(50), day(51)), NOW
        )
    with travel_db.transaction() as session:
        reservations.cancel(session, HOTEL, BUSINESS_PASSENGER_ID, ids[0], NOW)
    assert book(travel_db, FIXTURE_PASSENGER_ID, full.id, day(50), day(51)) > 0


def test_validate_stay_returns_dates(travel_db: Database) -> None:
    assert HOTEL.period.parse((day(1), day(3)), NOW) == (
        date.fromisoformat(day(1)),
        date.fromisoformat(day(3)),
    )
