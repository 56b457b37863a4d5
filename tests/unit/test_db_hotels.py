"""Query-level tests of db.hotels: search, availability, dates, fees and refunds."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from sqlalchemy import select

from db import reservations
from db.engine import Database
from db.errors import (
    InvalidInputError,
    NotFoundError,
    OwnershipError,
    RuleViolationError,
    UnavailableError,
)
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_PASSENGER_ID,
    FULL_HOTEL_CHECKIN_IN_DAYS,
    FULL_HOTEL_NAME,
    FULL_HOTEL_NIGHTS,
    FULL_HOTEL_ROOMS,
)
from db.hotels import HOTEL
from db.models import Hotel, HotelBooking, Payment
from db.rules import MAX_DAYS_AHEAD, MAX_HOTEL_NIGHTS
from tests.support.databases import FIXED_NOW
from tests.support.tools import dump

NOW = FIXED_NOW
TODAY = NOW.date()


def day(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def hotel_named(db: Database, name: str) -> Hotel:
    with db.session() as session:
        return session.scalars(select(Hotel).where(Hotel.name == name)).one()


def basel_hotel(db: Database) -> Hotel:
    """A Basel hotel with plenty of rooms."""
    with db.session() as session:
        return session.scalars(
            select(Hotel).where(Hotel.location == "Basel").order_by(Hotel.rooms.desc()).limit(1)
        ).one()


def book(db: Database, passenger_id: str, hotel_id: int, checkin: str, checkout: str) -> int:
    with db.transaction() as session:
        result = reservations.book(session, HOTEL, passenger_id, hotel_id, (checkin, checkout), NOW)
    booking_id: int = result["booking_id"]
    return booking_id


# Search -------------------------------------------------------------------------------------


def test_search_hotels_matches_location_case_insensitively(travel_db: Database) -> None:
    with travel_db.session() as session:
        result = reservations.search(session, HOTEL, NOW, location="bAs")
    names = {h["name"] for h in result["hotels"]}
    assert FULL_HOTEL_NAME in names
    assert {h["location"] for h in result["hotels"]} == {"Basel"}
    assert result["matches"] == len(result["hotels"])


def test_search_hotels_filters_by_price_tier_and_name(travel_db: Database) -> None:
    with travel_db.session() as session:
        luxury = reservations.search(session, HOTEL, NOW, price_tier="luxury")
        named = reservations.search(session, HOTEL, NOW, name="rheinblick")
    assert luxury["hotels"] and {h["price_tier"] for h in luxury["hotels"]} == {"Luxury"}
    assert [h["name"] for h in named["hotels"]] == [FULL_HOTEL_NAME]


def test_search_hotels_prices_a_stay_and_counts_rooms_left(travel_db: Database) -> None:
    full = hotel_named(travel_db, FULL_HOTEL_NAME)
    checkin = FULL_HOTEL_CHECKIN_IN_DAYS
    with travel_db.session() as session:
        busy = reservations.search(
            session,
            HOTEL,
            NOW,
            name=FULL_HOTEL_NAME,
            checkin_date=day(checkin),
            checkout_date=day(checkin + FULL_HOTEL_NIGHTS),
        )
        free = reservations.search(
            session,
            HOTEL,
            NOW,
            name=FULL_HOTEL_NAME,
            checkin_date=day(checkin + 20),
            checkout_date=day(checkin + 23),
        )
    (busy_view,) = busy["hotels"]
    (free_view,) = free["hotels"]
    assert busy_view["rooms_left"] == 0 and busy_view["available"] is False
    assert free_view["rooms_left"] == FULL_HOTEL_ROOMS
    assert free_view["nights"] == 3
    assert free_view["total_cents"] == 3 * full.nightly_rate_cents


def test_search_hotels_needs_both_dates(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(InvalidInputError, match="both"):
        reservations.search(session, HOTEL, NOW, location="Basel", checkin_date=day(3))


def test_search_hotels_rejects_past_dates(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(InvalidInputError, match="in the past"):
        reservations.search(session, HOTEL, NOW, checkin_date=day(-2), checkout_date=day(1))


def test_search_hotels_escapes_wildcards(travel_db: Database) -> None:
    with travel_db.session() as session:
        result = reservations.search(session, HOTEL, NOW, name="%")
    assert result["hotels"] == []


# Book ---------------------------------------------------------------------------------------


def test_book_hotel_charges_the_stay(travel_db: Database) -> None:
    hotel = basel_hotel(travel_db)
    with travel_db.transaction() as session:
        result = reservations.book(
            session, HOTEL, BUSINESS_PASSENGER_ID, hotel.id, (day(30), day(33)), NOW
        )
    assert result["status"] == "booked"
    assert result["charged_cents"] == 3 * hotel.nightly_rate_cents
    assert result["refunded_cents"] == 0
    assert result["after"] == {"checkin_date": day(30), "checkout_date": day(33)}
    with travel_db.session() as session:
        booking = session.get(HotelBooking, result["booking_id"])
        assert booking is not None
        assert (booking.passenger_id, booking.status) == (BUSINESS_PASSENGER_ID, "confirmed")
        assert booking.total_cents == 3 * hotel.nightly_rate_cents
        payment = session.scalars(
            select(Payment).where(Payment.reference == f"hotel-{booking.id}")
        ).one()
        assert payment.amount_cents == booking.total_cents


def test_book_hotel_accepts_a_stay_starting_today(travel_db: Database) -> None:
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, basel_hotel(travel_db).id, day(0), day(1))
    assert booking_id > 0


def test_book_hotel_refuses_a_full_hotel(travel_db: Database) -> None:
    full = hotel_named(travel_db, FULL_HOTEL_NAME)
    first_full = day(FULL_HOTEL_CHECKIN_IN_DAYS)
    before = dump(travel_db)
    with pytest.raises(UnavailableError, match=first_full), travel_db.transaction() as session:
        reservations.book(
            session,
            HOTEL,
            BUSINESS_PASSENGER_ID,
            full.id,
            (day(FULL_HOTEL_CHECKIN_IN_DAYS - 1), day(FULL_HOTEL_CHECKIN_IN_DAYS + 1)),
            NOW,
        )
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("checkin", "checkout", "error", "fragment"),
    [
        (day(-1), day(2), InvalidInputError, "in the past"),
        (day(5), day(3), InvalidInputError, "must be after checkin_date"),
        (day(5), day(5), InvalidInputError, "must be after checkin_date"),
        ("05/20/2026", day(3), InvalidInputError, "YYYY-MM-DD"),
        ("2026-02-30", "2026-03-02", InvalidInputError, "YYYY-MM-DD"),
        (day(1), day(2 + MAX_HOTEL_NIGHTS), RuleViolationError, f"at most {MAX_HOTEL_NIGHTS}"),
        (day(MAX_DAYS_AHEAD + 1), day(MAX_DAYS_AHEAD + 2), RuleViolationError, "too far ahead"),
    ],
)
def test_book_hotel_rejects_bad_dates(
    travel_db: Database, checkin: str, checkout: str, error: type[Exception], fragment: str
) -> None:
    with travel_db.session() as session, pytest.raises(error, match=fragment):
        reservations.quote_book(
            session,
            HOTEL,
            BUSINESS_PASSENGER_ID,
            basel_hotel(travel_db).id,
            (checkin, checkout),
            NOW,
        )


def test_book_hotel_rejects_unknown_hotel_and_passenger(travel_db: Database) -> None:
    with travel_db.session() as session:
        with pytest.raises(NotFoundError, match="No hotel with id 999999"):
            reservations.quote_book(
                session, HOTEL, BUSINESS_PASSENGER_ID, 999_999, (day(3), day(4)), NOW
            )
        with pytest.raises(NotFoundError, match="No passenger"):
            reservations.quote_book(session, HOTEL, "0000 000000", 1, (day(3), day(4)), NOW)


# Update -------------------------------------------------------------------------------------


def test_update_hotel_charges_an_extra_night_in_the_free_window(travel_db: Database) -> None:
    hotel = basel_hotel(travel_db)
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, hotel.id, day(30), day(33))
    with travel_db.transaction() as session:
        result = reservations.update(
            session, HOTEL, BUSINESS_PASSENGER_ID, booking_id, (None, day(34)), NOW
        )
    assert result["fee_cents"] == 0
    assert result["charged_cents"] == hotel.nightly_rate_cents
    assert result["before"] == {"checkin_date": day(30), "checkout_date": day(33)}
    assert result["after"] == {"checkin_date": day(30), "checkout_date": day(34)}
    assert result["total_cents"] == 4 * hotel.nightly_rate_cents


def test_update_hotel_refunds_a_shorter_stay(travel_db: Database) -> None:
    hotel = basel_hotel(travel_db)
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, hotel.id, day(30), day(33))
    with travel_db.transaction() as session:
        result = reservations.update(
            session, HOTEL, BUSINESS_PASSENGER_ID, booking_id, (day(31), None), NOW
        )
    assert result["refunded_cents"] == hotel.nightly_rate_cents
    assert result["charged_cents"] == 0


def test_update_hotel_late_change_charges_the_first_night(travel_db: Database) -> None:
    with travel_db.session() as session:
        booking = session.get(HotelBooking, FIXTURE_HOTEL_BOOKING_ID)
        assert booking is not None
        nights = (booking.checkout_date - booking.checkin_date).days
        first_night = booking.total_cents // nights
        new_checkout = (booking.checkout_date + timedelta(days=1)).isoformat()
        quote = reservations.quote_update(
            session,
            HOTEL,
            FIXTURE_PASSENGER_ID,
            FIXTURE_HOTEL_BOOKING_ID,
            (None, new_checkout),
            NOW,
        )
    assert quote.fee_cents == first_night
    assert "first night" in (quote.fee_note or "")


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


def test_update_hotel_rejects_someone_elses_reservation(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(OwnershipError) as raised:
        reservations.quote_update(
            session, HOTEL, BUSINESS_PASSENGER_ID, FIXTURE_HOTEL_BOOKING_ID, (None, day(9)), NOW
        )
    assert str(raised.value) == (
        f"Hotel reservation {FIXTURE_HOTEL_BOOKING_ID} does not belong to passenger "
        f"{BUSINESS_PASSENGER_ID}."
    )


def test_update_hotel_needs_a_change(travel_db: Database) -> None:
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, basel_hotel(travel_db).id, day(30), day(33))
    with travel_db.session() as session:
        with pytest.raises(InvalidInputError, match="Give a new"):
            reservations.quote_update(
                session, HOTEL, BUSINESS_PASSENGER_ID, booking_id, (None, None), NOW
            )
        with pytest.raises(InvalidInputError, match="nothing to change"):
            reservations.quote_update(
                session, HOTEL, BUSINESS_PASSENGER_ID, booking_id, (day(30), day(33)), NOW
            )


def test_update_hotel_rejects_a_started_stay(travel_db: Database) -> None:
    with travel_db.session() as session:
        booking = session.get(HotelBooking, FIXTURE_HOTEL_BOOKING_ID)
        assert booking is not None
        during = NOW + timedelta(days=2)
        with pytest.raises(RuleViolationError, match="already started"):
            reservations.quote_update(
                session,
                HOTEL,
                FIXTURE_PASSENGER_ID,
                FIXTURE_HOTEL_BOOKING_ID,
                (None, (booking.checkout_date + timedelta(days=1)).isoformat()),
                during,
            )


# Cancel -------------------------------------------------------------------------------------


def test_cancel_hotel_late_keeps_the_first_night(travel_db: Database) -> None:
    with travel_db.session() as session:
        booking = session.get(HotelBooking, FIXTURE_HOTEL_BOOKING_ID)
        assert booking is not None
        total = booking.total_cents
        first_night = total // (booking.checkout_date - booking.checkin_date).days
    with travel_db.transaction() as session:
        result = reservations.cancel(
            session, HOTEL, FIXTURE_PASSENGER_ID, FIXTURE_HOTEL_BOOKING_ID, NOW
        )
    assert result["status"] == "cancelled"
    assert result["fee_cents"] == first_night
    assert result["refunded_cents"] == total - first_night
    with travel_db.session() as session:
        booking = session.get(HotelBooking, FIXTURE_HOTEL_BOOKING_ID)
        assert booking is not None and booking.status == "cancelled"


def test_cancel_hotel_in_the_free_window_refunds_everything(travel_db: Database) -> None:
    hotel = basel_hotel(travel_db)
    booking_id = book(travel_db, BUSINESS_PASSENGER_ID, hotel.id, day(30), day(32))
    with travel_db.transaction() as session:
        result = reservations.cancel(session, HOTEL, BUSINESS_PASSENGER_ID, booking_id, NOW)
    assert result["fee_cents"] == 0
    assert result["refunded_cents"] == 2 * hotel.nightly_rate_cents


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


def test_cancel_hotel_twice_is_refused(travel_db: Database) -> None:
    with travel_db.transaction() as session:
        reservations.cancel(session, HOTEL, FIXTURE_PASSENGER_ID, FIXTURE_HOTEL_BOOKING_ID, NOW)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="already"):
        reservations.quote_cancel(
            session, HOTEL, FIXTURE_PASSENGER_ID, FIXTURE_HOTEL_BOOKING_ID, NOW
        )


def test_cancel_hotel_rejects_unknown_reservation(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(NotFoundError, match="No hotel reservation"):
        reservations.quote_cancel(session, HOTEL, FIXTURE_PASSENGER_ID, 987_654, NOW)


def test_validate_stay_returns_dates(travel_db: Database) -> None:
    assert HOTEL.period.parse((day(1), day(3)), NOW) == (
        date.fromisoformat(day(1)),
        date.fromisoformat(day(3)),
    )
