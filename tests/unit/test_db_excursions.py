"""Query-level tests of db.excursions: search, places per day, dates, fees and refunds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from db import reservations
from db.engine import Database
from db.errors import (
    InvalidInputError,
    NotFoundError,
    OwnershipError,
    RuleViolationError,
    UnavailableError,
)
from db.excursions import EXCURSION
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_EXCURSION_BOOKING_ID, FIXTURE_PASSENGER_ID
from db.models import ExcursionBooking, TripRecommendation
from tests.support.databases import FIXED_NOW
from tests.support.tools import dump

NOW = FIXED_NOW
TODAY = NOW.date()


def day(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def basel_excursion(db: Database) -> TripRecommendation:
    with db.session() as session:
        return session.scalars(
            select(TripRecommendation)
            .where(TripRecommendation.location == "Basel")
            .order_by(TripRecommendation.id)
            .limit(1)
        ).one()


def book(db: Database, passenger_id: str, recommendation_id: int, when: str) -> int:
    with db.transaction() as session:
        result = reservations.book(
            session, EXCURSION, passenger_id, recommendation_id, (when,), NOW
        )
    booking_id: int = result["booking_id"]
    return booking_id


def test_search_trip_recommendations_matches_any_keyword(travel_db: Database) -> None:
    with travel_db.session() as session:
        art = reservations.search(session, EXCURSION, NOW, keywords="museum")
        both = reservations.search(session, EXCURSION, NOW, keywords="museum, RIVER")
        none = reservations.search(session, EXCURSION, NOW, keywords="zzzz, qqqq")
    assert art["trip_recommendations"]
    assert all("museum" in e["keywords"].lower() for e in art["trip_recommendations"])
    art_ids = {e["recommendation_id"] for e in art["trip_recommendations"]}
    both_ids = {e["recommendation_id"] for e in both["trip_recommendations"]}
    assert art_ids < both_ids or both["matches"] > art["matches"]
    assert none["trip_recommendations"] == []


def test_search_trip_recommendations_filters_location_and_name(travel_db: Database) -> None:
    excursion = basel_excursion(travel_db)
    with travel_db.session() as session:
        result = reservations.search(
            session, EXCURSION, NOW, location="BASEL", name=excursion.name[:8].lower()
        )
    assert excursion.id in [e["recommendation_id"] for e in result["trip_recommendations"]]
    view = next(e for e in result["trip_recommendations"] if e["recommendation_id"] == excursion.id)
    assert view["price_cents"] == excursion.price_cents
    assert view["places_per_day"] == excursion.capacity_per_day


def test_book_excursion_charges_the_price(travel_db: Database) -> None:
    excursion = basel_excursion(travel_db)
    with travel_db.transaction() as session:
        result = reservations.book(
            session, EXCURSION, BUSINESS_PASSENGER_ID, excursion.id, (day(15),), NOW
        )
    assert result["charged_cents"] == excursion.price_cents
    assert result["after"] == {"date": day(15)}


def test_book_excursion_refuses_a_full_day(travel_db: Database) -> None:
    excursion = basel_excursion(travel_db)
    with travel_db.transaction() as session:
        session.execute(
            update(TripRecommendation)
            .where(TripRecommendation.id == excursion.id)
            .values(capacity_per_day=1)
        )
    book(travel_db, BUSINESS_PASSENGER_ID, excursion.id, day(15))
    before = dump(travel_db)
    with pytest.raises(UnavailableError, match=day(15)), travel_db.transaction() as session:
        reservations.book(session, EXCURSION, FIXTURE_PASSENGER_ID, excursion.id, (day(15),), NOW)
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("when", "error", "fragment"),
    [
        (day(-3), InvalidInputError, "in the past"),
        ("15 May", InvalidInputError, "YYYY-MM-DD"),
        (day(366), RuleViolationError, "too far ahead"),
    ],
)
def test_book_excursion_rejects_bad_dates(
    travel_db: Database, when: str, error: type[Exception], fragment: str
) -> None:
    with travel_db.session() as session, pytest.raises(error, match=fragment):
        reservations.quote_book(
            session, EXCURSION, BUSINESS_PASSENGER_ID, basel_excursion(travel_db).id, (when,), NOW
        )


def test_book_excursion_rejects_unknown_excursion(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(NotFoundError, match="No excursion"):
        reservations.quote_book(session, EXCURSION, BUSINESS_PASSENGER_ID, 515_151, (day(3),), NOW)


def test_update_excursion_is_free_in_the_window(travel_db: Database) -> None:
    excursion = basel_excursion(travel_db)
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, excursion.id, day(15))
    with travel_db.transaction() as session:
        result = reservations.update(
            session, EXCURSION, BUSINESS_PASSENGER_ID, booking_id, (day(16),), NOW
        )
    assert result["fee_cents"] == 0
    assert result["charged_cents"] == 0 and result["refunded_cents"] == 0
    assert result["before"] == {"date": day(15)} and result["after"] == {"date": day(16)}


def test_update_excursion_late_pays_the_new_day_in_full(travel_db: Database) -> None:
    with travel_db.session() as session:
        booking = session.get(ExcursionBooking, FIXTURE_EXCURSION_BOOKING_ID)
        assert booking is not None
        excursion = session.get(TripRecommendation, booking.recommendation_id)
        assert excursion is not None
        quote = reservations.quote_update(
            session, EXCURSION, FIXTURE_PASSENGER_ID, FIXTURE_EXCURSION_BOOKING_ID, (day(20),), NOW
        )
    assert quote.fee_cents == booking.total_cents
    assert quote.net_cents == excursion.price_cents


def test_update_excursion_rejects_the_same_date(travel_db: Database) -> None:
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, basel_excursion(travel_db).id, day(15))
    with travel_db.session() as session, pytest.raises(InvalidInputError, match="already on"):
        reservations.quote_update(
            session, EXCURSION, BUSINESS_PASSENGER_ID, booking_id, (day(15),), NOW
        )


def test_update_excursion_rejects_someone_elses_reservation(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(OwnershipError, match="does not belong"):
        reservations.quote_update(
            session, EXCURSION, BUSINESS_PASSENGER_ID, FIXTURE_EXCURSION_BOOKING_ID, (day(20),), NOW
        )


def test_cancel_excursion_late_refunds_nothing(travel_db: Database) -> None:
    with travel_db.transaction() as session:
        result = reservations.cancel(
            session, EXCURSION, FIXTURE_PASSENGER_ID, FIXTURE_EXCURSION_BOOKING_ID, NOW
        )
    assert result["refunded_cents"] == 0
    assert result["fee_cents"] > 0
    with travel_db.session() as session:
        booking = session.get(ExcursionBooking, FIXTURE_EXCURSION_BOOKING_ID)
        assert booking is not None and booking.status == "cancelled"


def test_cancel_excursion_in_the_free_window_refunds_everything(travel_db: Database) -> None:
    excursion = basel_excursion(travel_db)
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, excursion.id, day(15))
    with travel_db.transaction() as session:
        result = reservations.cancel(session, EXCURSION, BUSINESS_PASSENGER_ID, booking_id, NOW)
    assert result["refunded_cents"] == excursion.price_cents


def test_cancel_excursion_rejects_a_past_excursion(travel_db: Database) -> None:
    later = NOW + timedelta(days=5)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="already started"):
        reservations.quote_cancel(
            session, EXCURSION, FIXTURE_PASSENGER_ID, FIXTURE_EXCURSION_BOOKING_ID, later
        )
