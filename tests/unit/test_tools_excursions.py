"""Tool-level tests of the excursion tools, run through a ToolNode with hand-built calls."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from sqlalchemy import select, update

from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_EXCURSION_BOOKING_ID, FIXTURE_PASSENGER_ID
from db.models import ExcursionBooking, TripRecommendation
from tests.support.databases import FIXED_NOW
from tests.support.tools import dump, error_text, payload, run_one
from tools.excursions import make_excursion_tools


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


@pytest.fixture
def tools(travel_db: Database) -> list[BaseTool]:
    excursion_tools = make_excursion_tools(travel_db)
    return [*excursion_tools.safe, *excursion_tools.sensitive]


def _excursion(db: Database) -> TripRecommendation:
    with db.session() as session:
        return session.scalars(
            select(TripRecommendation)
            .where(TripRecommendation.location == "Basel")
            .order_by(TripRecommendation.id)
            .limit(1)
        ).one()


def _book(tools: list[BaseTool], recommendation_id: int, when: str) -> dict[str, Any]:
    return payload(
        run_one(
            tools,
            "book_excursion",
            {"recommendation_id": recommendation_id, "date": when},
            BUSINESS_PASSENGER_ID,
        )
    )


def test_search_trip_recommendations_by_keywords(tools: list[BaseTool]) -> None:
    data = payload(
        run_one(
            tools,
            "search_trip_recommendations",
            {"location": "basel", "keywords": "art,river"},
            None,
        )
    )
    assert data["trip_recommendations"]
    for item in data["trip_recommendations"]:
        assert item["location"] == "Basel"
        assert "art" in item["keywords"].lower() or "river" in item["keywords"].lower()


def test_search_trip_recommendations_says_when_nothing_matches(tools: list[BaseTool]) -> None:
    data = payload(run_one(tools, "search_trip_recommendations", {"keywords": "xyzzy"}, None))
    assert data["trip_recommendations"] == [] and "No excursion matches" in data["message"]


def test_book_excursion_books_and_charges(travel_db: Database, tools: list[BaseTool]) -> None:
    excursion = _excursion(travel_db)
    data = _book(tools, excursion.id, day(12))
    assert data["charged_cents"] == excursion.price_cents
    with travel_db.session() as session:
        booking = session.get(ExcursionBooking, data["booking_id"])
        assert booking is not None and booking.passenger_id == BUSINESS_PASSENGER_ID


def test_book_excursion_repeated_call_books_once(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    args = {"recommendation_id": _excursion(travel_db).id, "date": day(12)}
    first = run_one(tools, "book_excursion", args, BUSINESS_PASSENGER_ID, "exc-1")
    after = dump(travel_db)
    second = run_one(tools, "book_excursion", args, BUSINESS_PASSENGER_ID, "exc-1")
    assert payload(first) == payload(second)
    assert dump(travel_db) == after


def test_update_excursion_moves_the_day(travel_db: Database, tools: list[BaseTool]) -> None:
    booking_id = _book(tools, _excursion(travel_db).id, day(12))["booking_id"]
    data = payload(
        run_one(
            tools,
            "update_excursion",
            {"booking_id": booking_id, "date": day(14)},
            BUSINESS_PASSENGER_ID,
        )
    )
    assert data["after"] == {"date": day(14)} and data["fee_cents"] == 0


def test_cancel_excursion_refunds(travel_db: Database, tools: list[BaseTool]) -> None:
    excursion = _excursion(travel_db)
    booking_id = _book(tools, excursion.id, day(12))["booking_id"]
    data = payload(
        run_one(tools, "cancel_excursion", {"booking_id": booking_id}, BUSINESS_PASSENGER_ID)
    )
    assert data["refunded_cents"] == excursion.price_cents


def test_book_excursion_refuses_a_full_day(travel_db: Database, tools: list[BaseTool]) -> None:
    excursion = _excursion(travel_db)
    with travel_db.transaction() as session:
        session.execute(
            update(TripRecommendation)
            .where(TripRecommendation.id == excursion.id)
            .values(capacity_per_day=1)
        )
    _book(tools, excursion.id, day(12))
    before = dump(travel_db)
    message = run_one(
        tools,
        "book_excursion",
        {"recommendation_id": excursion.id, "date": day(12)},
        FIXTURE_PASSENGER_ID,
    )
    assert "has no place left" in error_text(message)
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("name", "args", "passenger", "expected"),
    [
        (
            "book_excursion",
            {"recommendation_id": 1, "date": day(-1)},
            BUSINESS_PASSENGER_ID,
            "in the past",
        ),
        (
            "book_excursion",
            {"recommendation_id": 1, "date": "2026/06/01"},
            BUSINESS_PASSENGER_ID,
            "YYYY-MM-DD",
        ),
        (
            "book_excursion",
            {"recommendation_id": 626_262, "date": day(3)},
            BUSINESS_PASSENGER_ID,
            "No excursion with id 626262",
        ),
        (
            "book_excursion",
            {"recommendation_id": 1, "date": day(3)},
            None,
            "No passenger id is configured",
        ),
        (
            "update_excursion",
            {"booking_id": FIXTURE_EXCURSION_BOOKING_ID, "date": day(9)},
            BUSINESS_PASSENGER_ID,
            "does not belong to passenger",
        ),
        (
            "update_excursion",
            {"booking_id": FIXTURE_EXCURSION_BOOKING_ID},
            FIXTURE_PASSENGER_ID,
            "date",
        ),
        (
            "cancel_excursion",
            {"booking_id": FIXTURE_EXCURSION_BOOKING_ID},
            BUSINESS_PASSENGER_ID,
            "does not belong to passenger",
        ),
        (
            "cancel_excursion",
            {"booking_id": 818_181},
            FIXTURE_PASSENGER_ID,
            "No excursion reservation with id 818181",
        ),
    ],
)
def test_excursion_writes_refuse_and_change_nothing(
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
