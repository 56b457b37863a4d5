"""Query-level tests of db.car_rentals: search, fleet availability, dates, fees and refunds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from db import reservations
from db.car_rentals import CAR_RENTAL
from db.engine import Database
from db.errors import (
    InvalidInputError,
    NotFoundError,
    OwnershipError,
    RuleViolationError,
    UnavailableError,
)
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_CAR_RENTAL_BOOKING_ID, FIXTURE_PASSENGER_ID
from db.models import CarRental, CarRentalBooking, Payment
from db.rules import MAX_CAR_RENTAL_DAYS
from tests.support.databases import FIXED_NOW
from tests.support.tools import dump

NOW = FIXED_NOW
TODAY = NOW.date()


def day(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def basel_offer(db: Database) -> CarRental:
    with db.session() as session:
        return session.scalars(
            select(CarRental).where(CarRental.location == "Basel").order_by(CarRental.id).limit(1)
        ).one()


def set_fleet(db: Database, rental_id: int, size: int) -> None:
    with db.transaction() as session:
        session.execute(update(CarRental).where(CarRental.id == rental_id).values(fleet_size=size))


def book(db: Database, passenger_id: str, rental_id: int, start: str, end: str) -> int:
    with db.transaction() as session:
        result = reservations.book(session, CAR_RENTAL, passenger_id, rental_id, (start, end), NOW)
    booking_id: int = result["booking_id"]
    return booking_id


def test_search_car_rentals_prices_a_period_with_both_days_included(travel_db: Database) -> None:
    offer = basel_offer(travel_db)
    with travel_db.session() as session:
        result = reservations.search(
            session, CAR_RENTAL, NOW, location="basel", start_date=day(20), end_date=day(22)
        )
    view = next(v for v in result["car_rentals"] if v["rental_id"] == offer.id)
    assert view["days"] == 3
    assert view["total_cents"] == 3 * offer.daily_rate_cents
    assert view["cars_left"] == offer.fleet_size
    assert {v["location"] for v in result["car_rentals"]} == {"Basel"}


def test_search_car_rentals_filters_by_tier(travel_db: Database) -> None:
    with travel_db.session() as session:
        result = reservations.search(session, CAR_RENTAL, NOW, price_tier="PREMIUM")
    assert result["car_rentals"]
    assert {v["price_tier"] for v in result["car_rentals"]} == {"Premium"}


def test_search_car_rentals_counts_cars_left(travel_db: Database) -> None:
    offer = basel_offer(travel_db)
    set_fleet(travel_db, offer.id, 1)
    book(travel_db, BUSINESS_PASSENGER_ID, offer.id, day(20), day(21))
    with travel_db.session() as session:
        result = reservations.search(
            session, CAR_RENTAL, NOW, name=offer.name, start_date=day(21), end_date=day(23)
        )
    view = next(v for v in result["car_rentals"] if v["rental_id"] == offer.id)
    assert view["cars_left"] == 0 and view["available"] is False


def test_book_car_rental_charges_every_day(travel_db: Database) -> None:
    offer = basel_offer(travel_db)
    with travel_db.transaction() as session:
        result = reservations.book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(20), day(20)), NOW
        )
    assert result["charged_cents"] == offer.daily_rate_cents
    assert result["after"] == {"start_date": day(20), "end_date": day(20)}
    with travel_db.session() as session:
        payment = session.scalars(
            select(Payment).where(Payment.reference == f"car-{result['booking_id']}")
        ).one()
    assert payment.amount_cents == offer.daily_rate_cents


def test_book_car_rental_refuses_when_the_fleet_is_out(travel_db: Database) -> None:
    offer = basel_offer(travel_db)
    set_fleet(travel_db, offer.id, 1)
    book(travel_db, BUSINESS_PASSENGER_ID, offer.id, day(20), day(25))
    before = dump(travel_db)
    with pytest.raises(UnavailableError, match=day(25)), travel_db.transaction() as session:
        reservations.book(
            session, CAR_RENTAL, FIXTURE_PASSENGER_ID, offer.id, (day(25), day(27)), NOW
        )
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("start", "end", "error", "fragment"),
    [
        (day(-1), day(2), InvalidInputError, "in the past"),
        (day(5), day(4), InvalidInputError, "on or after start_date"),
        ("tomorrow", day(4), InvalidInputError, "YYYY-MM-DD"),
        (day(1), day(1 + MAX_CAR_RENTAL_DAYS), RuleViolationError, "too long"),
        (day(400), day(401), RuleViolationError, "too far ahead"),
    ],
)
def test_book_car_rental_rejects_bad_dates(
    travel_db: Database, start: str, end: str, error: type[Exception], fragment: str
) -> None:
    with travel_db.session() as session, pytest.raises(error, match=fragment):
        reservations.quote_book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, basel_offer(travel_db).id, (start, end), NOW
        )


def test_book_car_rental_rejects_unknown_offer(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(NotFoundError, match="search_car_rentals"):
        reservations.quote_book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, 424_242, (day(3), day(4)), NOW
        )


def test_update_car_rental_reprices_in_the_free_window(travel_db: Database) -> None:
    offer = basel_offer(travel_db)
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, offer.id, day(20), day(22))
    with travel_db.transaction() as session:
        result = reservations.update(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, booking_id, (None, day(20)), NOW
        )
    assert result["fee_cents"] == 0
    assert result["refunded_cents"] == 2 * offer.daily_rate_cents
    assert result["after"] == {"start_date": day(20), "end_date": day(20)}


def test_update_car_rental_late_change_charges_one_day(travel_db: Database) -> None:
    with travel_db.session() as session:
        booking = session.get(CarRentalBooking, FIXTURE_CAR_RENTAL_BOOKING_ID)
        assert booking is not None
        one_day = booking.total_cents // ((booking.end_date - booking.start_date).days + 1)
        quote = reservations.quote_update(
            session,
            CAR_RENTAL,
            FIXTURE_PASSENGER_ID,
            FIXTURE_CAR_RENTAL_BOOKING_ID,
            (None, (booking.end_date + timedelta(days=1)).isoformat()),
            NOW,
        )
    assert quote.fee_cents == one_day


def test_update_car_rental_rejects_reversed_dates(travel_db: Database) -> None:
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, basel_offer(travel_db).id, day(20), day(22))
    with travel_db.session() as session, pytest.raises(InvalidInputError, match="on or after"):
        reservations.quote_update(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, booking_id, (day(25), None), NOW
        )


def test_update_car_rental_rejects_someone_elses_reservation(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(OwnershipError, match="does not belong"):
        reservations.quote_update(
            session,
            CAR_RENTAL,
            BUSINESS_PASSENGER_ID,
            FIXTURE_CAR_RENTAL_BOOKING_ID,
            (day(10), day(11)),
            NOW,
        )


def test_cancel_car_rental_late_keeps_one_day(travel_db: Database) -> None:
    with travel_db.session() as session:
        booking = session.get(CarRentalBooking, FIXTURE_CAR_RENTAL_BOOKING_ID)
        assert booking is not None
        total = booking.total_cents
        one_day = total // ((booking.end_date - booking.start_date).days + 1)
    with travel_db.transaction() as session:
        result = reservations.cancel(
            session, CAR_RENTAL, FIXTURE_PASSENGER_ID, FIXTURE_CAR_RENTAL_BOOKING_ID, NOW
        )
    assert result["fee_cents"] == one_day
    assert result["refunded_cents"] == total - one_day
    with travel_db.session() as session:
        booking = session.get(CarRentalBooking, FIXTURE_CAR_RENTAL_BOOKING_ID)
        assert booking is not None and booking.status == "cancelled"


def test_cancel_car_rental_in_the_free_window_refunds_everything(travel_db: Database) -> None:
    offer = basel_offer(travel_db)
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, offer.id, day(20), day(21))
    with travel_db.transaction() as session:
        result = reservations.cancel(session, CAR_RENTAL, BUSINESS_PASSENGER_ID, booking_id, NOW)
    assert result["refunded_cents"] == 2 * offer.daily_rate_cents
    assert result["fee_cents"] == 0


def test_cancel_car_rental_rejects_a_started_rental(travel_db: Database) -> None:
    later = NOW + timedelta(days=2)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="already started"):
        reservations.quote_cancel(
            session, CAR_RENTAL, FIXTURE_PASSENGER_ID, FIXTURE_CAR_RENTAL_BOOKING_ID, later
        )
