"""Query-level tests of the rules hotels, car rentals and excursions share, once per domain.

``tests/support/reservation_domains.py`` says what differs between the domains; what only
one domain has is tested in ``test_db_<domain>.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

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
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID
from db.models import Payment
from db.rules import MAX_CAR_RENTAL_DAYS, MAX_DAYS_AHEAD, MAX_HOTEL_NIGHTS
from tests.support.reservation_domains import (
    CARS,
    DOMAINS,
    EXCURSIONS,
    HOTELS,
    NOW,
    PERIODS,
    Dates,
    Domain,
    after_change,
    day,
)
from tests.support.tools import dump


def book(
    db: Database, domain: Domain, passenger_id: str, item_id: int, dates: Dates
) -> dict[str, Any]:
    with db.transaction() as session:
        return reservations.book(session, domain.kind, passenger_id, item_id, dates, NOW)


def search(db: Database, domain: Domain, **filters: Any) -> dict[str, Any]:
    with db.session() as session:
        return reservations.search(session, domain.kind, NOW, **filters)


def view_of(result: dict[str, Any], domain: Domain, item: Any) -> dict[str, Any]:
    """Return ``item`` as a search ``result`` shows it."""
    return next(v for v in result[domain.results] if v[domain.id_arg] == item.id)


def a_day_later(domain: Domain, booking: Any) -> tuple[str | None, ...]:
    """Return a change of ``booking``'s last date to the day after: a night or a day more,
    the excursion on the next day."""
    last = getattr(booking, domain.fields[-1]) + timedelta(days=1)
    return (None,) * (len(domain.fields) - 1) + (last.isoformat(),)


# Search -------------------------------------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAINS)
def test_search_matches_any_part_of_the_location_in_any_case(
    travel_db: Database, domain: Domain
) -> None:
    table = domain.catalogue
    with travel_db.session() as session:
        basel = set(session.scalars(select(table.id).where(table.location == "Basel")))
    for location in ("bAs", "basel", "BASEL"):
        result = search(travel_db, domain, location=location)
        found = result[domain.results]
        assert {v[domain.id_arg] for v in found} == basel, location
        assert {v["location"] for v in found} == {"Basel"}
        assert result["matches"] == len(found)


@pytest.mark.parametrize(
    ("domain", "part"),
    [
        pytest.param(HOTELS, "rheinblick", id="hotel"),  # Hotel Rheinblick Basel
        pytest.param(CARS, "heintal", id="car"),  # Rheintal Auto
        pytest.param(EXCURSIONS, "rhine fe", id="excursion"),  # Rhine Ferry and Old Town Walk
    ],
)
def test_search_filters_by_part_of_the_name(travel_db: Database, domain: Domain, part: str) -> None:
    with travel_db.session() as session:
        named = [
            row for row in session.scalars(select(domain.catalogue)) if part in row.name.lower()
        ]
    in_basel = {row.id for row in named if row.location == "Basel"}
    assert in_basel
    for filters, expected in (
        ({"name": part}, {row.id for row in named}),
        ({"name": part, "location": "BASEL"}, in_basel),
    ):
        found = search(travel_db, domain, **filters)[domain.results]
        assert {v[domain.id_arg] for v in found} == expected, filters


@pytest.mark.parametrize(
    ("domain", "units_key"),
    [
        pytest.param(HOTELS, "rooms", id="hotel"),
        pytest.param(CARS, "fleet_size", id="car"),
        pytest.param(EXCURSIONS, "places_per_day", id="excursion"),
    ],
)
def test_search_shows_the_rate_and_the_units_per_day(
    travel_db: Database, domain: Domain, units_key: str
) -> None:
    item = domain.offer(travel_db)
    view = view_of(search(travel_db, domain, name=item.name), domain, item)
    assert view[domain.rate] == getattr(item, domain.rate)
    assert view[units_key] == getattr(item, domain.capacity)


@pytest.mark.parametrize(
    ("domain", "asked", "tier"),
    [
        pytest.param(HOTELS, "luxury", "Luxury", id="hotel"),
        pytest.param(CARS, "PREMIUM", "Premium", id="car"),
    ],
)
def test_search_filters_by_price_tier_in_any_case(
    travel_db: Database, domain: Domain, asked: str, tier: str
) -> None:
    found = search(travel_db, domain, price_tier=asked)[domain.results]
    assert found and {v["price_tier"] for v in found} == {tier}


@pytest.mark.parametrize(
    ("domain", "dates", "unit", "units"),
    [
        pytest.param(HOTELS, (day(30), day(33)), "nights", 3, id="hotel"),  # not the check-out day
        pytest.param(CARS, (day(20), day(22)), "days", 3, id="car"),  # both days included
    ],
)
def test_search_prices_the_dates_and_counts_the_units_free(
    travel_db: Database, domain: Domain, dates: Dates, unit: str, units: int
) -> None:
    item = domain.vacant(travel_db)
    view = view_of(search(travel_db, domain, name=item.name, **domain.dated(dates)), domain, item)
    assert view[unit] == units
    assert view["total_cents"] == units * getattr(item, domain.rate)
    assert (view[domain.left], view["available"]) == (getattr(item, domain.capacity), True)


@pytest.mark.parametrize(
    ("domain", "held", "searched"),
    [
        pytest.param(HOTELS, (day(20), day(22)), (day(21), day(23)), id="hotel"),  # night of 21
        pytest.param(CARS, (day(20), day(21)), (day(21), day(23)), id="car"),  # the return day
    ],
)
def test_search_counts_the_units_left(
    travel_db: Database, domain: Domain, held: Dates, searched: Dates
) -> None:
    item = domain.vacant(travel_db, units=2)
    for passenger_id, left in ((BUSINESS_PASSENGER_ID, 1), (FIXTURE_PASSENGER_ID, 0)):
        book(travel_db, domain, passenger_id, item.id, held)
        result = search(travel_db, domain, name=item.name, **domain.dated(searched))
        view = view_of(result, domain, item)
        assert (view[domain.left], view["available"]) == (left, left > 0)


@pytest.mark.parametrize("domain", PERIODS)
def test_search_needs_both_dates_and_none_past(travel_db: Database, domain: Domain) -> None:
    first, last = domain.fields
    with pytest.raises(InvalidInputError, match="both"):
        search(travel_db, domain, location="Basel", **{first: day(3)})
    with pytest.raises(InvalidInputError, match="in the past"):
        search(travel_db, domain, **{first: day(-2), last: day(1)})


@pytest.mark.parametrize("domain", DOMAINS)
def test_search_escapes_wildcards(travel_db: Database, domain: Domain) -> None:
    assert search(travel_db, domain, name="%")[domain.results] == []


# Book ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("domain", "dates", "units"),
    [
        pytest.param(HOTELS, (day(30), day(33)), 3, id="hotel"),
        pytest.param(CARS, (day(20), day(20)), 1, id="car"),  # returned the day it is picked up
        pytest.param(EXCURSIONS, (day(15),), 1, id="excursion"),
    ],
)
def test_book_charges_every_unit_and_records_the_payment(
    travel_db: Database, domain: Domain, dates: Dates, units: int
) -> None:
    item = domain.offer(travel_db)
    price = units * getattr(item, domain.rate)
    result = book(travel_db, domain, BUSINESS_PASSENGER_ID, item.id, dates)
    assert result["status"] == "booked"
    assert (result["charged_cents"], result["refunded_cents"]) == (price, 0)
    assert result["after"] == domain.dated(dates)
    with travel_db.session() as session:
        booking = session.get(domain.bookings, result["booking_id"])
        assert booking is not None
        assert (booking.passenger_id, booking.status) == (BUSINESS_PASSENGER_ID, "confirmed")
        assert booking.total_cents == price
        reference = f"{domain.payment_prefix}-{booking.id}"
        payment = session.scalars(select(Payment).where(Payment.reference == reference)).one()
        assert payment.amount_cents == price


@pytest.mark.parametrize("domain", DOMAINS)
def test_book_accepts_a_reservation_starting_today(travel_db: Database, domain: Domain) -> None:
    item = domain.offer(travel_db)
    result = book(travel_db, domain, BUSINESS_PASSENGER_ID, item.id, domain.shortest(0))
    assert result["booking_id"] > 0


@pytest.mark.parametrize(
    ("domain", "held", "wanted", "full_day"),
    [
        # The first night is free, the second is taken.
        pytest.param(HOTELS, (day(31), day(32)), (day(30), day(32)), day(31), id="hotel"),
        # The cars are still taken on their return day.
        pytest.param(CARS, (day(20), day(25)), (day(25), day(27)), day(25), id="car"),
        pytest.param(EXCURSIONS, (day(15),), (day(15),), day(15), id="excursion"),
    ],
)
def test_book_refuses_a_day_with_no_unit_left_and_writes_nothing(
    travel_db: Database,
    domain: Domain,
    held: Dates,
    wanted: Dates,
    full_day: str,
) -> None:
    item = domain.vacant(travel_db, units=2)
    for _ in range(2):
        book(travel_db, domain, BUSINESS_PASSENGER_ID, item.id, held)
    before = dump(travel_db)
    with pytest.raises(UnavailableError, match=full_day), travel_db.transaction() as session:
        reservations.book(session, domain.kind, FIXTURE_PASSENGER_ID, item.id, wanted, NOW)
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("domain", "dates", "fragment"),
    [
        pytest.param(HOTELS, (day(-1), day(2)), "in the past", id="hotel-past"),
        pytest.param(CARS, (day(-1), day(2)), "in the past", id="car-past"),
        pytest.param(EXCURSIONS, (day(-3),), "in the past", id="excursion-past"),
        pytest.param(HOTELS, (day(5), day(3)), "must be after checkin_date", id="hotel-reversed"),
        pytest.param(HOTELS, (day(5), day(5)), "must be after checkin_date", id="hotel-no-night"),
        pytest.param(CARS, (day(5), day(4)), "on or after start_date", id="car-reversed"),
        pytest.param(HOTELS, ("05/20/2026", day(3)), "YYYY-MM-DD", id="hotel-malformed"),
        pytest.param(HOTELS, ("2026-02-30", "2026-03-02"), "YYYY-MM-DD", id="hotel-no-such-day"),
        pytest.param(CARS, ("tomorrow", day(4)), "YYYY-MM-DD", id="car-malformed"),
        pytest.param(EXCURSIONS, ("15 May",), "YYYY-MM-DD", id="excursion-malformed"),
    ],
)
def test_book_rejects_invalid_dates(
    travel_db: Database, domain: Domain, dates: Dates, fragment: str
) -> None:
    item = domain.offer(travel_db)
    with travel_db.session() as session, pytest.raises(InvalidInputError, match=fragment):
        reservations.quote_book(session, domain.kind, BUSINESS_PASSENGER_ID, item.id, dates, NOW)


@pytest.mark.parametrize(
    ("domain", "dates", "fragment"),
    [
        pytest.param(
            HOTELS,
            (day(1), day(2 + MAX_HOTEL_NIGHTS)),
            f"at most {MAX_HOTEL_NIGHTS}",
            id="hotel-too-long",
        ),
        pytest.param(CARS, (day(1), day(1 + MAX_CAR_RENTAL_DAYS)), "too long", id="car-too-long"),
        pytest.param(
            HOTELS,
            (day(MAX_DAYS_AHEAD + 1), day(MAX_DAYS_AHEAD + 2)),
            "too far ahead",
            id="hotel-too-far-ahead",
        ),
        pytest.param(CARS, (day(400), day(401)), "too far ahead", id="car-too-far-ahead"),
        pytest.param(EXCURSIONS, (day(366),), "too far ahead", id="excursion-too-far-ahead"),
    ],
)
def test_book_rejects_dates_breaking_a_rule(
    travel_db: Database, domain: Domain, dates: Dates, fragment: str
) -> None:
    item = domain.offer(travel_db)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match=fragment):
        reservations.quote_book(session, domain.kind, BUSINESS_PASSENGER_ID, item.id, dates, NOW)


@pytest.mark.parametrize("domain", DOMAINS)
def test_book_needs_a_known_catalogue_entry_and_passenger(
    travel_db: Database, domain: Domain
) -> None:
    item, dates = domain.offer(travel_db), domain.shortest(3)
    with travel_db.session() as session:
        with pytest.raises(NotFoundError) as unknown:
            reservations.quote_book(
                session, domain.kind, BUSINESS_PASSENGER_ID, 999_999, dates, NOW
            )
        with pytest.raises(NotFoundError, match="No passenger"):
            reservations.quote_book(session, domain.kind, "0000 000000", item.id, dates, NOW)
    assert str(unknown.value).startswith(f"{domain.missing} 999999")
    assert domain.search in str(unknown.value)  # the tool that finds the id


# Update -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("domain", "booked", "change", "charged", "refunded", "units"),
    [
        pytest.param(HOTELS, (day(30), day(33)), (None, day(34)), 1, 0, 4, id="hotel-longer"),
        pytest.param(HOTELS, (day(30), day(33)), (day(31), None), 0, 1, 2, id="hotel-shorter"),
        pytest.param(CARS, (day(20), day(22)), (None, day(20)), 0, 2, 1, id="car-shorter"),
        pytest.param(EXCURSIONS, (day(15),), (day(16),), 0, 0, 1, id="excursion-moved"),
    ],
)
def test_update_in_the_free_window_reprices_without_a_fee(
    travel_db: Database,
    domain: Domain,
    booked: Dates,
    change: tuple[str | None, ...],
    charged: int,
    refunded: int,
    units: int,
) -> None:
    """``charged``, ``refunded`` and the new total's ``units`` count units of the rate."""
    item = domain.offer(travel_db)
    rate = getattr(item, domain.rate)
    booking_id = book(travel_db, domain, BUSINESS_PASSENGER_ID, item.id, booked)["booking_id"]
    with travel_db.transaction() as session:
        result = reservations.update(
            session, domain.kind, BUSINESS_PASSENGER_ID, booking_id, change, NOW
        )
    assert result["fee_cents"] == 0
    assert (result["charged_cents"], result["refunded_cents"]) == (charged * rate, refunded * rate)
    assert result["before"] == domain.dated(booked)
    assert result["after"] == domain.dated(after_change(booked, change))
    assert result["total_cents"] == units * rate


@pytest.mark.parametrize(
    ("domain", "extra_units", "note"),
    [
        pytest.param(HOTELS, 1, "the first night is charged", id="hotel"),
        pytest.param(CARS, 1, "one day's rate is charged", id="car"),
        pytest.param(EXCURSIONS, 0, "the price paid is not refunded", id="excursion"),
    ],
)
def test_update_late_pays_the_late_fee_on_top(
    travel_db: Database, domain: Domain, extra_units: int, note: str
) -> None:
    with travel_db.session() as session:
        booking = session.get(domain.bookings, domain.fixture_booking)
        item = session.get(domain.catalogue, getattr(booking, domain.id_arg))
        quote = reservations.quote_update(
            session,
            domain.kind,
            FIXTURE_PASSENGER_ID,
            domain.fixture_booking,
            a_day_later(domain, booking),
            NOW,
        )
        late_fee = domain.late_fee(booking)
    assert quote.fee_cents == late_fee > 0
    assert quote.net_cents == late_fee + extra_units * getattr(item, domain.rate)
    assert (quote.fee_note or "").startswith(note)


@pytest.mark.parametrize("domain", DOMAINS)
def test_update_and_cancel_reject_someone_elses_reservation(
    travel_db: Database, domain: Domain
) -> None:
    theirs = domain.fixture_booking
    with travel_db.session() as session:
        with pytest.raises(OwnershipError) as update:
            reservations.quote_update(
                session, domain.kind, BUSINESS_PASSENGER_ID, theirs, domain.shortest(10), NOW
            )
        with pytest.raises(OwnershipError) as cancel:
            reservations.quote_cancel(session, domain.kind, BUSINESS_PASSENGER_ID, theirs, NOW)
    expected = f"{domain.label} {theirs} does not belong to passenger {BUSINESS_PASSENGER_ID}."
    assert str(update.value) == str(cancel.value) == expected


@pytest.mark.parametrize(
    ("domain", "unchanged"),
    [
        pytest.param(HOTELS, "already has these dates", id="hotel"),
        pytest.param(CARS, "already runs", id="car"),
        pytest.param(EXCURSIONS, "is already on", id="excursion"),
    ],
)
def test_update_needs_new_dates(travel_db: Database, domain: Domain, unchanged: str) -> None:
    dates = domain.shortest(30)
    booking_id = book(travel_db, domain, BUSINESS_PASSENGER_ID, domain.offer(travel_db).id, dates)[
        "booking_id"
    ]
    none = (None,) * len(domain.fields)
    with travel_db.session() as session:
        with pytest.raises(InvalidInputError, match="Give a new"):
            reservations.quote_update(
                session, domain.kind, BUSINESS_PASSENGER_ID, booking_id, none, NOW
            )
        with pytest.raises(InvalidInputError, match=f"{unchanged} .*; nothing to change"):
            reservations.quote_update(
                session, domain.kind, BUSINESS_PASSENGER_ID, booking_id, dates, NOW
            )


@pytest.mark.parametrize(
    ("domain", "fragment"),
    [
        pytest.param(HOTELS, "must be after checkin_date", id="hotel"),
        pytest.param(CARS, "on or after start_date", id="car"),
    ],
)
def test_update_rejects_reversed_dates(travel_db: Database, domain: Domain, fragment: str) -> None:
    item = domain.offer(travel_db)
    booking_id = book(travel_db, domain, BUSINESS_PASSENGER_ID, item.id, (day(20), day(22)))[
        "booking_id"
    ]
    with travel_db.session() as session, pytest.raises(InvalidInputError, match=fragment):
        reservations.quote_update(
            session, domain.kind, BUSINESS_PASSENGER_ID, booking_id, (day(25), None), NOW
        )


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_started_reservation_cannot_be_changed_or_cancelled(
    travel_db: Database, domain: Domain
) -> None:
    ours, the_day_after = domain.fixture_booking, NOW + timedelta(days=domain.fixture_start + 1)
    with travel_db.session() as session:
        booking = session.get(domain.bookings, ours)
        with pytest.raises(RuleViolationError, match="already started"):
            reservations.quote_update(
                session,
                domain.kind,
                FIXTURE_PASSENGER_ID,
                ours,
                a_day_later(domain, booking),
                the_day_after,
            )
        with pytest.raises(RuleViolationError, match="already started"):
            reservations.quote_cancel(
                session, domain.kind, FIXTURE_PASSENGER_ID, ours, the_day_after
            )


# Cancel -------------------------------------------------------------------------------------


@pytest.mark.parametrize("domain", DOMAINS)
def test_cancel_late_keeps_the_late_fee(travel_db: Database, domain: Domain) -> None:
    ours = domain.fixture_booking
    with travel_db.session() as session:
        booking = session.get(domain.bookings, ours)
        assert booking is not None
        total, late_fee = booking.total_cents, domain.late_fee(booking)
    with travel_db.transaction() as session:
        result = reservations.cancel(session, domain.kind, FIXTURE_PASSENGER_ID, ours, NOW)
    assert result["status"] == "cancelled"
    assert (result["fee_cents"], result["refunded_cents"]) == (late_fee, total - late_fee)
    assert late_fee > 0
    with travel_db.session() as session:
        cancelled = session.get(domain.bookings, ours)
        assert cancelled is not None and cancelled.status == "cancelled"


@pytest.mark.parametrize(
    ("domain", "dates", "units"),
    [
        pytest.param(HOTELS, (day(30), day(32)), 2, id="hotel"),
        pytest.param(CARS, (day(20), day(21)), 2, id="car"),
        pytest.param(EXCURSIONS, (day(15),), 1, id="excursion"),
    ],
)
def test_cancel_in_the_free_window_refunds_everything(
    travel_db: Database, domain: Domain, dates: Dates, units: int
) -> None:
    item = domain.offer(travel_db)
    booking_id = book(travel_db, domain, BUSINESS_PASSENGER_ID, item.id, dates)["booking_id"]
    with travel_db.transaction() as session:
        result = reservations.cancel(session, domain.kind, BUSINESS_PASSENGER_ID, booking_id, NOW)
    assert result["fee_cents"] == 0
    assert result["refunded_cents"] == units * getattr(item, domain.rate)


@pytest.mark.parametrize("domain", DOMAINS)
def test_cancel_twice_is_refused(travel_db: Database, domain: Domain) -> None:
    ours = domain.fixture_booking
    with travel_db.transaction() as session:
        reservations.cancel(session, domain.kind, FIXTURE_PASSENGER_ID, ours, NOW)
    with (
        travel_db.session() as session,
        pytest.raises(RuleViolationError, match=f"{domain.label} {ours} is already cancelled"),
    ):
        reservations.quote_cancel(session, domain.kind, FIXTURE_PASSENGER_ID, ours, NOW)


@pytest.mark.parametrize("domain", DOMAINS)
def test_cancel_rejects_an_unknown_reservation(travel_db: Database, domain: Domain) -> None:
    missing = f"No {domain.label.lower()} with id 987654"
    with travel_db.session() as session, pytest.raises(NotFoundError, match=missing):
        reservations.quote_cancel(session, domain.kind, FIXTURE_PASSENGER_ID, 987_654, NOW)
