"""Tool-level tests of the hotel, car-rental and excursion tools, once per domain.

Run through a ToolNode with hand-built calls; ``tests/support/reservation_domains.py``
says what differs between the domains, ``test_tools_<domain>.py`` tests what only one has.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool

from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID
from db.rules import MAX_CAR_RENTAL_DAYS, MAX_HOTEL_NIGHTS
from tests.support.reservation_domains import (
    CARS,
    DOMAINS,
    EXCURSIONS,
    HOTELS,
    Dates,
    Domain,
    after_change,
    day,
)
from tests.support.tools import call, dump, error_text, payload, run_calls, run_one


@pytest.fixture
def tools(travel_db: Database, domain: Domain) -> list[BaseTool]:
    return domain.tools(travel_db)


def book_args(domain: Domain, item_id: int, dates: Dates) -> dict[str, Any]:
    return {domain.id_arg: item_id, **domain.dated(dates)}


def book(tools: list[BaseTool], domain: Domain, item_id: int, dates: Dates) -> dict[str, Any]:
    args = book_args(domain, item_id, dates)
    return payload(run_one(tools, f"book_{domain.name}", args, BUSINESS_PASSENGER_ID))


@pytest.mark.parametrize(
    ("domain", "location", "dates", "unit", "units"),
    [
        pytest.param(HOTELS, "basel", (day(20), day(22)), "nights", 2, id="hotel"),
        pytest.param(CARS, "BASEL", (day(10), day(13)), "days", 4, id="car"),
    ],
)
def test_search_prices_the_dates(
    travel_db: Database,
    tools: list[BaseTool],
    domain: Domain,
    location: str,
    dates: Dates,
    unit: str,
    units: int,
) -> None:
    item = domain.vacant(travel_db)
    args = {"location": location, **domain.dated(dates)}
    data = payload(run_one(tools, domain.search, args, None))
    view = next(v for v in data[domain.results] if v[domain.id_arg] == item.id)
    assert view[unit] == units
    assert view["total_cents"] == units * getattr(item, domain.rate)
    assert view[domain.left] == getattr(item, domain.capacity)


@pytest.mark.parametrize(
    ("domain", "filters", "message"),
    [
        pytest.param(HOTELS, {"location": "Atlantis"}, "No hotel matches", id="hotel"),
        pytest.param(CARS, {"location": "Atlantis"}, "No car rental matches", id="car"),
        pytest.param(EXCURSIONS, {"keywords": "xyzzy"}, "No excursion matches", id="excursion"),
    ],
)
def test_search_says_when_nothing_matches(
    tools: list[BaseTool], domain: Domain, filters: dict[str, str], message: str
) -> None:
    data = payload(run_one(tools, domain.search, filters, None))
    assert data[domain.results] == [] and message in data["message"]


@pytest.mark.parametrize(
    ("domain", "dates", "units"),
    [
        pytest.param(HOTELS, (day(20), day(23)), 3, id="hotel"),
        pytest.param(CARS, (day(10), day(11)), 2, id="car"),
        pytest.param(EXCURSIONS, (day(12),), 1, id="excursion"),
    ],
)
def test_book_books_and_charges(
    travel_db: Database,
    tools: list[BaseTool],
    domain: Domain,
    dates: Dates,
    units: int,
) -> None:
    item = domain.offer(travel_db)
    price = units * getattr(item, domain.rate)
    data = book(tools, domain, item.id, dates)
    assert data["status"] == "booked"
    assert data["charged_cents"] == price
    assert data["charged"] == f"EUR {price // 100:,}.{price % 100:02d}"
    with travel_db.session() as session:
        booking = session.get(domain.bookings, data["booking_id"])
        assert booking is not None
        assert (booking.passenger_id, booking.status) == (BUSINESS_PASSENGER_ID, "confirmed")


@pytest.mark.parametrize("domain", DOMAINS)
def test_book_repeated_call_books_once(
    travel_db: Database, tools: list[BaseTool], domain: Domain
) -> None:
    args = book_args(domain, domain.offer(travel_db).id, domain.shortest(20))
    first = run_one(tools, f"book_{domain.name}", args, BUSINESS_PASSENGER_ID, "book-1")
    after = dump(travel_db)
    second = run_one(tools, f"book_{domain.name}", args, BUSINESS_PASSENGER_ID, "book-1")
    assert payload(first) == payload(second)
    assert dump(travel_db) == after


@pytest.mark.parametrize(
    ("domain", "booked", "change", "charged"),
    [
        pytest.param(HOTELS, (day(20), day(23)), (day(21), day(24)), 0, id="hotel-moved"),
        pytest.param(CARS, (day(10), day(11)), (None, day(12)), 1, id="car-longer"),
        pytest.param(EXCURSIONS, (day(12),), (day(14),), 0, id="excursion-moved"),
    ],
)
def test_update_changes_the_dates(
    travel_db: Database,
    tools: list[BaseTool],
    domain: Domain,
    booked: Dates,
    change: tuple[str | None, ...],
    charged: int,
) -> None:
    """``charged`` counts units of the rate; a date given as ``None`` is left out (kept)."""
    item = domain.offer(travel_db)
    booking_id = book(tools, domain, item.id, booked)["booking_id"]
    args = {"booking_id": booking_id}
    args |= {field: new for field, new in zip(domain.fields, change, strict=True) if new}
    data = payload(run_one(tools, f"update_{domain.name}", args, BUSINESS_PASSENGER_ID))
    assert data["status"] == "changed"
    assert data["after"] == domain.dated(after_change(booked, change))
    assert data["fee_cents"] == data["refunded_cents"] == 0
    assert data["charged_cents"] == charged * getattr(item, domain.rate)


@pytest.mark.parametrize(
    ("domain", "dates", "units"),
    [
        pytest.param(HOTELS, (day(20), day(22)), 2, id="hotel"),
        pytest.param(CARS, (day(10), day(10)), 1, id="car"),
        pytest.param(EXCURSIONS, (day(12),), 1, id="excursion"),
    ],
)
def test_cancel_refunds(
    travel_db: Database,
    tools: list[BaseTool],
    domain: Domain,
    dates: Dates,
    units: int,
) -> None:
    item = domain.offer(travel_db)
    booking_id = book(tools, domain, item.id, dates)["booking_id"]
    args = {"booking_id": booking_id}
    data = payload(run_one(tools, f"cancel_{domain.name}", args, BUSINESS_PASSENGER_ID))
    assert data["refunded_cents"] == units * getattr(item, domain.rate)
    with travel_db.session() as session:
        booking = session.get(domain.bookings, booking_id)
        assert booking is not None and booking.status == "cancelled"


@pytest.mark.parametrize(
    ("domain", "held", "wanted", "expected"),
    [
        pytest.param(
            HOTELS,
            (day(20), day(22)),
            (day(21), day(23)),
            f"has no room left for the night of {day(21)}",
            id="hotel",
        ),
        pytest.param(
            CARS, (day(10), day(12)), (day(12), day(14)), f"has no car left on {day(12)}", id="car"
        ),
        pytest.param(
            EXCURSIONS, (day(12),), (day(12),), f"has no place left on {day(12)}", id="excursion"
        ),
    ],
)
def test_book_refuses_when_no_unit_is_left_and_writes_nothing(
    travel_db: Database,
    tools: list[BaseTool],
    domain: Domain,
    held: Dates,
    wanted: Dates,
    expected: str,
) -> None:
    item = domain.vacant(travel_db, units=1)
    book(tools, domain, item.id, held)
    before = dump(travel_db)
    args = book_args(domain, item.id, wanted)
    message = run_one(tools, f"book_{domain.name}", args, FIXTURE_PASSENGER_ID)
    assert expected in error_text(message)
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("domain", "dates", "expected"),
    [
        pytest.param(HOTELS, (day(-2), day(1)), "in the past", id="hotel-past"),
        pytest.param(CARS, (day(-1), day(2)), "in the past", id="car-past"),
        pytest.param(EXCURSIONS, (day(-1),), "in the past", id="excursion-past"),
        pytest.param(HOTELS, (day(9), day(7)), "must be after checkin_date", id="hotel-reversed"),
        pytest.param(CARS, (day(5), day(3)), "on or after start_date", id="car-reversed"),
        pytest.param(
            HOTELS,
            (day(1), day(2 + MAX_HOTEL_NIGHTS)),
            f"at most {MAX_HOTEL_NIGHTS} nights",
            id="hotel-too-long",
        ),
        pytest.param(CARS, (day(1), day(1 + MAX_CAR_RENTAL_DAYS)), "too long", id="car-too-long"),
        pytest.param(HOTELS, ("next Friday", day(4)), "YYYY-MM-DD", id="hotel-malformed"),
        pytest.param(EXCURSIONS, ("2026/06/01",), "YYYY-MM-DD", id="excursion-malformed"),
    ],
)
def test_book_refuses_bad_dates_and_writes_nothing(
    travel_db: Database,
    tools: list[BaseTool],
    domain: Domain,
    dates: Dates,
    expected: str,
) -> None:
    args = book_args(domain, domain.offer(travel_db).id, dates)
    before = dump(travel_db)
    message = run_one(tools, f"book_{domain.name}", args, BUSINESS_PASSENGER_ID)
    assert expected in error_text(message)
    assert dump(travel_db) == before


@pytest.mark.parametrize("domain", DOMAINS)
def test_book_refuses_an_unknown_entry_and_writes_nothing(
    travel_db: Database, tools: list[BaseTool], domain: Domain
) -> None:
    args = book_args(domain, 777_777, domain.shortest(3))
    before = dump(travel_db)
    message = run_one(tools, f"book_{domain.name}", args, BUSINESS_PASSENGER_ID)
    assert f"{domain.missing} 777777" in error_text(message)
    assert dump(travel_db) == before


@pytest.mark.parametrize("domain", DOMAINS)
def test_writes_without_a_passenger_are_refused_and_write_nothing(
    travel_db: Database, tools: list[BaseTool], domain: Domain
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        (f"book_{domain.name}", book_args(domain, domain.offer(travel_db).id, domain.shortest(3))),
        (f"cancel_{domain.name}", {"booking_id": domain.fixture_booking}),
    ]
    before = dump(travel_db)
    for name, args in calls:
        assert "No passenger id is configured" in error_text(run_one(tools, name, args, None))
    assert dump(travel_db) == before


@pytest.mark.parametrize("domain", DOMAINS)
def test_update_and_cancel_refuse_someone_elses_reservation_and_write_nothing(
    travel_db: Database, tools: list[BaseTool], domain: Domain
) -> None:
    theirs = domain.fixture_booking
    calls: list[tuple[str, dict[str, Any]]] = [
        (f"update_{domain.name}", {"booking_id": theirs, domain.fields[-1]: day(9)}),
        (f"cancel_{domain.name}", {"booking_id": theirs}),
    ]
    before = dump(travel_db)
    for name, args in calls:
        message = run_one(tools, name, args, BUSINESS_PASSENGER_ID)
        assert "does not belong to passenger" in error_text(message)
    assert dump(travel_db) == before


@pytest.mark.parametrize("domain", DOMAINS)
def test_update_and_cancel_refuse_an_unknown_reservation_and_write_nothing(
    travel_db: Database, tools: list[BaseTool], domain: Domain
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        (f"update_{domain.name}", {"booking_id": 555_555, domain.fields[-1]: day(9)}),
        (f"cancel_{domain.name}", {"booking_id": 555_555}),
    ]
    before = dump(travel_db)
    for name, args in calls:
        message = run_one(tools, name, args, FIXTURE_PASSENGER_ID)
        assert f"No {domain.label.lower()} with id 555555" in error_text(message)
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("domain", "no_dates"),
    [
        pytest.param(HOTELS, "Give a new checkin_date", id="hotel"),
        pytest.param(CARS, "Give a new start_date", id="car"),
        pytest.param(EXCURSIONS, "date", id="excursion"),  # its one date is required
    ],
)
def test_update_and_cancel_refuse_missing_arguments_and_write_nothing(
    travel_db: Database, tools: list[BaseTool], domain: Domain, no_dates: str
) -> None:
    before = dump(travel_db)
    args = {"booking_id": domain.fixture_booking}
    update = run_one(tools, f"update_{domain.name}", args, FIXTURE_PASSENGER_ID)
    cancel = run_one(tools, f"cancel_{domain.name}", {}, FIXTURE_PASSENGER_ID)
    assert no_dates in error_text(update)
    assert "booking_id" in error_text(cancel)
    assert dump(travel_db) == before


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_batch_answers_every_call(
    travel_db: Database, tools: list[BaseTool], domain: Domain
) -> None:
    args = book_args(domain, domain.offer(travel_db).id, domain.shortest(30))
    calls = [
        call(domain.search, {"location": "Basel"}, "1"),
        call(f"book_{domain.name}", args, "2"),
        call(f"cancel_{domain.name}", {"booking_id": 424_242}, "3"),
    ]
    messages = run_calls(tools, calls, FIXTURE_PASSENGER_ID)
    assert {m.tool_call_id: m.status for m in messages} == {
        "1": "success",
        "2": "success",
        "3": "error",
    }
