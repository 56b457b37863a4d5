"""Tool-level tests of the hotel tools, run through a ToolNode with hand-built calls."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from sqlalchemy import select

from db.engine import Database
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_PASSENGER_ID,
    FULL_HOTEL_CHECKIN_IN_DAYS,
    FULL_HOTEL_NAME,
    FULL_HOTEL_NIGHTS,
)
from db.models import Hotel, HotelBooking
from db.rules import MAX_HOTEL_NIGHTS
from tests.support.databases import FIXED_NOW
from tests.support.tools import call, dump, error_text, payload, run_calls, run_one
from tools.hotels import make_hotel_tools


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


@pytest.fixture
def tools(travel_db: Database) -> list[BaseTool]:
    hotel_tools = make_hotel_tools(travel_db)
    return [*hotel_tools.safe, *hotel_tools.sensitive]


def _hotel(db: Database, name: str | None = None) -> Hotel:
    with db.session() as session:
        query = select(Hotel).where(Hotel.location == "Basel")
        if name:
            query = query.where(Hotel.name == name)
        return session.scalars(query.order_by(Hotel.rooms.desc()).limit(1)).one()


def _book(tools: list[BaseTool], hotel_id: int, checkin: str, checkout: str) -> dict[str, Any]:
    return payload(
        run_one(
            tools,
            "book_hotel",
            {"hotel_id": hotel_id, "checkin_date": checkin, "checkout_date": checkout},
            BUSINESS_PASSENGER_ID,
        )
    )


def test_search_hotels_prices_a_stay(travel_db: Database, tools: list[BaseTool]) -> None:
    hotel = _hotel(travel_db)
    data = payload(
        run_one(
            tools,
            "search_hotels",
            {"location": "basel", "checkin_date": day(20), "checkout_date": day(22)},
            None,
        )
    )
    view = next(h for h in data["hotels"] if h["hotel_id"] == hotel.id)
    assert view["total_cents"] == 2 * hotel.nightly_rate_cents
    assert view["rooms_left"] == hotel.rooms


def test_search_hotels_says_when_nothing_matches(tools: list[BaseTool]) -> None:
    data = payload(run_one(tools, "search_hotels", {"location": "Atlantis"}, None))
    assert data["hotels"] == [] and "No hotel matches" in data["message"]


def test_book_hotel_books_and_charges(travel_db: Database, tools: list[BaseTool]) -> None:
    hotel = _hotel(travel_db)
    data = _book(tools, hotel.id, day(20), day(23))
    assert data["status"] == "booked"
    assert data["charged_cents"] == 3 * hotel.nightly_rate_cents
    assert (
        data["charged"]
        == f"EUR {3 * hotel.nightly_rate_cents // 100:,}.{3 * hotel.nightly_rate_cents % 100:02d}"
    )
    with travel_db.session() as session:
        booking = session.get(HotelBooking, data["booking_id"])
        assert booking is not None and booking.passenger_id == BUSINESS_PASSENGER_ID


def test_book_hotel_repeated_call_books_once(travel_db: Database, tools: list[BaseTool]) -> None:
    args = {"hotel_id": _hotel(travel_db).id, "checkin_date": day(20), "checkout_date": day(21)}
    first = run_one(tools, "book_hotel", args, BUSINESS_PASSENGER_ID, "book-1")
    after = dump(travel_db)
    second = run_one(tools, "book_hotel", args, BUSINESS_PASSENGER_ID, "book-1")
    assert payload(first) == payload(second)
    assert dump(travel_db) == after


def test_update_hotel_moves_the_stay(travel_db: Database, tools: list[BaseTool]) -> None:
    hotel = _hotel(travel_db)
    booking_id = _book(tools, hotel.id, day(20), day(23))["booking_id"]
    data = payload(
        run_one(
            tools,
            "update_hotel",
            {"booking_id": booking_id, "checkin_date": day(21), "checkout_date": day(24)},
            BUSINESS_PASSENGER_ID,
        )
    )
    assert data["status"] == "changed"
    assert data["after"] == {"checkin_date": day(21), "checkout_date": day(24)}
    assert data["charged_cents"] == data["refunded_cents"] == 0


def test_cancel_hotel_refunds(travel_db: Database, tools: list[BaseTool]) -> None:
    hotel = _hotel(travel_db)
    booking_id = _book(tools, hotel.id, day(20), day(22))["booking_id"]
    data = payload(
        run_one(tools, "cancel_hotel", {"booking_id": booking_id}, BUSINESS_PASSENGER_ID)
    )
    assert data["refunded_cents"] == 2 * hotel.nightly_rate_cents
    info_status = None
    with travel_db.session() as session:
        booking = session.get(HotelBooking, booking_id)
        assert booking is not None
        info_status = booking.status
    assert info_status == "cancelled"


def _refusals(db: Database) -> list[tuple[str, str, dict[str, Any], str | None, str]]:
    basel = _hotel(db).id
    full = _hotel(db, FULL_HOTEL_NAME).id
    return [
        (
            "book",
            "book_hotel",
            {"hotel_id": basel, "checkin_date": day(-2), "checkout_date": day(1)},
            BUSINESS_PASSENGER_ID,
            "in the past",
        ),
        (
            "book reversed",
            "book_hotel",
            {"hotel_id": basel, "checkin_date": day(9), "checkout_date": day(7)},
            BUSINESS_PASSENGER_ID,
            "must be after checkin_date",
        ),
        (
            "book full",
            "book_hotel",
            {
                "hotel_id": full,
                "checkin_date": day(FULL_HOTEL_CHECKIN_IN_DAYS),
                "checkout_date": day(FULL_HOTEL_CHECKIN_IN_DAYS + FULL_HOTEL_NIGHTS),
            },
            BUSINESS_PASSENGER_ID,
            "has no room left",
        ),
        (
            "book too long",
            "book_hotel",
            {"hotel_id": basel, "checkin_date": day(1), "checkout_date": day(2 + MAX_HOTEL_NIGHTS)},
            BUSINESS_PASSENGER_ID,
            f"at most {MAX_HOTEL_NIGHTS} nights",
        ),
        (
            "book unknown",
            "book_hotel",
            {"hotel_id": 777_777, "checkin_date": day(3), "checkout_date": day(4)},
            BUSINESS_PASSENGER_ID,
            "No hotel with id 777777",
        ),
        (
            "book malformed",
            "book_hotel",
            {"hotel_id": basel, "checkin_date": "next Friday", "checkout_date": day(4)},
            BUSINESS_PASSENGER_ID,
            "YYYY-MM-DD",
        ),
        (
            "book no passenger",
            "book_hotel",
            {"hotel_id": basel, "checkin_date": day(3), "checkout_date": day(4)},
            None,
            "No passenger id is configured",
        ),
        (
            "update other",
            "update_hotel",
            {"booking_id": FIXTURE_HOTEL_BOOKING_ID, "checkout_date": day(9)},
            BUSINESS_PASSENGER_ID,
            "does not belong to passenger",
        ),
        (
            "update nothing",
            "update_hotel",
            {"booking_id": FIXTURE_HOTEL_BOOKING_ID},
            FIXTURE_PASSENGER_ID,
            "Give a new checkin_date",
        ),
        (
            "update unknown",
            "update_hotel",
            {"booking_id": 555_555, "checkout_date": day(9)},
            FIXTURE_PASSENGER_ID,
            "No hotel reservation with id 555555",
        ),
        (
            "cancel other",
            "cancel_hotel",
            {"booking_id": FIXTURE_HOTEL_BOOKING_ID},
            BUSINESS_PASSENGER_ID,
            "does not belong to passenger",
        ),
        (
            "cancel no passenger",
            "cancel_hotel",
            {"booking_id": FIXTURE_HOTEL_BOOKING_ID},
            None,
            "No passenger id is configured",
        ),
        ("cancel missing id", "cancel_hotel", {}, FIXTURE_PASSENGER_ID, "booking_id"),
    ]


REFUSALS = [
    "book",
    "book reversed",
    "book full",
    "book too long",
    "book unknown",
    "book malformed",
    "book no passenger",
    "update other",
    "update nothing",
    "update unknown",
    "cancel other",
    "cancel no passenger",
    "cancel missing id",
]


@pytest.mark.parametrize("case", REFUSALS)
def test_hotel_writes_refuse_and_change_nothing(
    travel_db: Database, tools: list[BaseTool], case: str
) -> None:
    cases = {
        label: (name, args, who, text) for label, name, args, who, text in _refusals(travel_db)
    }
    name, args, passenger, expected = cases[case]
    before = dump(travel_db)
    message = run_one(tools, name, args, passenger)
    assert expected in error_text(message)
    assert dump(travel_db) == before


def test_hotel_batch_answers_every_call(travel_db: Database, tools: list[BaseTool]) -> None:
    hotel = _hotel(travel_db).id
    messages = run_calls(
        tools,
        [
            call("search_hotels", {"location": "Basel"}, "1"),
            call(
                "book_hotel",
                {"hotel_id": hotel, "checkin_date": day(30), "checkout_date": day(31)},
                "2",
            ),
            call("cancel_hotel", {"booking_id": 424_242}, "3"),
        ],
        FIXTURE_PASSENGER_ID,
    )
    assert {m.tool_call_id: m.status for m in messages} == {
        "1": "success",
        "2": "success",
        "3": "error",
    }
