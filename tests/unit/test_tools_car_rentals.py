"""Tool-level tests of the car-rental tools, run through a ToolNode with hand-built calls."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from sqlalchemy import select, update

from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_CAR_RENTAL_BOOKING_ID, FIXTURE_PASSENGER_ID
from db.models import CarRental, CarRentalBooking
from db.rules import MAX_CAR_RENTAL_DAYS
from tests.support.databases import FIXED_NOW
from tests.support.tools import dump, error_text, payload, run_one
from tools.car_rentals import make_car_rental_tools


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


@pytest.fixture
def tools(travel_db: Database) -> list[BaseTool]:
    car_tools = make_car_rental_tools(travel_db)
    return [*car_tools.safe, *car_tools.sensitive]


def _offer(db: Database) -> CarRental:
    with db.session() as session:
        return session.scalars(
            select(CarRental).where(CarRental.location == "Basel").order_by(CarRental.id).limit(1)
        ).one()


def _book(tools: list[BaseTool], rental_id: int, start: str, end: str) -> dict[str, Any]:
    return payload(
        run_one(
            tools,
            "book_car_rental",
            {"rental_id": rental_id, "start_date": start, "end_date": end},
            BUSINESS_PASSENGER_ID,
        )
    )


def test_search_car_rentals_prices_the_days(travel_db: Database, tools: list[BaseTool]) -> None:
    offer = _offer(travel_db)
    data = payload(
        run_one(
            tools,
            "search_car_rentals",
            {"location": "BASEL", "start_date": day(10), "end_date": day(13)},
            None,
        )
    )
    view = next(v for v in data["car_rentals"] if v["rental_id"] == offer.id)
    assert view["days"] == 4 and view["total_cents"] == 4 * offer.daily_rate_cents


def test_book_car_rental_books_and_charges(travel_db: Database, tools: list[BaseTool]) -> None:
    offer = _offer(travel_db)
    data = _book(tools, offer.id, day(10), day(11))
    assert data["charged_cents"] == 2 * offer.daily_rate_cents
    with travel_db.session() as session:
        booking = session.get(CarRentalBooking, data["booking_id"])
        assert booking is not None and booking.status == "confirmed"


def test_book_car_rental_repeated_call_books_once(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    args = {"rental_id": _offer(travel_db).id, "start_date": day(10), "end_date": day(12)}
    first = run_one(tools, "book_car_rental", args, BUSINESS_PASSENGER_ID, "car-1")
    after = dump(travel_db)
    second = run_one(tools, "book_car_rental", args, BUSINESS_PASSENGER_ID, "car-1")
    assert payload(first) == payload(second)
    assert dump(travel_db) == after


def test_update_car_rental_extends_and_charges(travel_db: Database, tools: list[BaseTool]) -> None:
    offer = _offer(travel_db)
    booking_id = _book(tools, offer.id, day(10), day(11))["booking_id"]
    data = payload(
        run_one(
            tools,
            "update_car_rental",
            {"booking_id": booking_id, "end_date": day(12)},
            BUSINESS_PASSENGER_ID,
        )
    )
    assert data["charged_cents"] == offer.daily_rate_cents
    assert data["after"] == {"start_date": day(10), "end_date": day(12)}


def test_cancel_car_rental_refunds(travel_db: Database, tools: list[BaseTool]) -> None:
    offer = _offer(travel_db)
    booking_id = _book(tools, offer.id, day(10), day(10))["booking_id"]
    data = payload(
        run_one(tools, "cancel_car_rental", {"booking_id": booking_id}, BUSINESS_PASSENGER_ID)
    )
    assert data["refunded_cents"] == offer.daily_rate_cents


def test_book_car_rental_refuses_an_exhausted_fleet(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    offer = _offer(travel_db)
    with travel_db.transaction() as session:
        session.execute(update(CarRental).where(CarRental.id == offer.id).values(fleet_size=1))
    _book(tools, offer.id, day(10), day(12))
    before = dump(travel_db)
    message = run_one(
        tools,
        "book_car_rental",
        {"rental_id": offer.id, "start_date": day(12), "end_date": day(14)},
        FIXTURE_PASSENGER_ID,
    )
    assert f"has no car left on {day(12)}" in error_text(message)
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("name", "args", "passenger", "expected"),
    [
        (
            "book_car_rental",
            {"rental_id": 1, "start_date": day(-1), "end_date": day(2)},
            BUSINESS_PASSENGER_ID,
            "in the past",
        ),
        (
            "book_car_rental",
            {"rental_id": 1, "start_date": day(5), "end_date": day(3)},
            BUSINESS_PASSENGER_ID,
            "on or after start_date",
        ),
        (
            "book_car_rental",
            {"rental_id": 1, "start_date": day(1), "end_date": day(1 + MAX_CAR_RENTAL_DAYS)},
            BUSINESS_PASSENGER_ID,
            "too long",
        ),
        (
            "book_car_rental",
            {"rental_id": 313_131, "start_date": day(1), "end_date": day(2)},
            BUSINESS_PASSENGER_ID,
            "No car-rental offer with id 313131",
        ),
        (
            "book_car_rental",
            {"rental_id": 1, "start_date": day(1), "end_date": day(2)},
            None,
            "No passenger id is configured",
        ),
        (
            "update_car_rental",
            {"booking_id": FIXTURE_CAR_RENTAL_BOOKING_ID, "end_date": day(9)},
            BUSINESS_PASSENGER_ID,
            "does not belong to passenger",
        ),
        (
            "update_car_rental",
            {"booking_id": FIXTURE_CAR_RENTAL_BOOKING_ID},
            FIXTURE_PASSENGER_ID,
            "Give a new start_date",
        ),
        (
            "cancel_car_rental",
            {"booking_id": FIXTURE_CAR_RENTAL_BOOKING_ID},
            BUSINESS_PASSENGER_ID,
            "does not belong to passenger",
        ),
        (
            "cancel_car_rental",
            {"booking_id": 999_001},
            FIXTURE_PASSENGER_ID,
            "No car rental reservation with id 999001",
        ),
    ],
)
def test_car_rental_writes_refuse_and_change_nothing(
    travel_db: Database,
    tools: list[BaseTool],
    name: str,
    args: dict[str, Any],
    passenger: str | None,
    expected: str,
) -> None:
    before = dump(travel_db)
    message = run_one(tools, name, args, passenger)
    assert expected in error_text(message)
    assert dump(travel_db) == before
