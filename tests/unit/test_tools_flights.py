"""Tool-level tests of the flight tools, run through a ToolNode with hand-built calls."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from sqlalchemy import select

from db.engine import Database
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    BUSINESS_TICKET_NO,
    CHECKED_IN_TICKET_NO,
    FIXTURE_PASSENGER_ID,
    FIXTURE_TICKET_NO,
    FLOWN_PASSENGER_ID,
    FLOWN_TICKET_NO,
    MULTI_SEGMENT_PASSENGER_ID,
    MULTI_SEGMENT_TICKET_NO,
)
from db.models import Flight, Payment, TicketFlight
from db.rules import FARE_RULES
from tests.support.databases import FIXED_NOW
from tests.support.tools import (
    add_flight,
    call,
    dump,
    error_text,
    full_flight,
    in_free_window,
    lx0112,
    payload,
    run_calls,
    run_one,
)
from tools.flights import make_flight_tools


@pytest.fixture
def tools(travel_db: Database) -> list[BaseTool]:
    flight_tools = make_flight_tools(travel_db)
    return [*flight_tools.safe, *flight_tools.sensitive]


def _route_flight(db: Database, departure: str, arrival: str) -> int:
    with db.session() as session:
        found = session.scalar(
            select(Flight.flight_id)
            .where(
                Flight.departure_airport == departure,
                Flight.arrival_airport == arrival,
                Flight.scheduled_departure >= FIXED_NOW + timedelta(days=1),
                Flight.status == "Scheduled",
            )
            .limit(1)
        )
    if found is not None:
        return found
    return add_flight(
        db, departure_airport=departure, arrival_airport=arrival, departs_in=timedelta(days=1)
    )


def _second_leg_before_the_first_lands(db: Database) -> int:
    """Add a flight on the connection's second route leaving before its first leg lands."""
    with db.session() as session:
        first_leg = session.scalars(
            select(Flight)
            .join(TicketFlight, TicketFlight.flight_id == Flight.flight_id)
            .where(TicketFlight.ticket_no == MULTI_SEGMENT_TICKET_NO)
            .order_by(Flight.scheduled_departure)
            .limit(1)
        ).one()
        lands_in = first_leg.scheduled_arrival - FIXED_NOW
    return add_flight(
        db,
        departure_airport="FRA",
        arrival_airport="JFK",
        departs_in=lands_in - timedelta(minutes=30),
    )


# Safe tools ---------------------------------------------------------------------------------


def test_fetch_user_flight_information_returns_the_configured_passenger(
    tools: list[BaseTool],
) -> None:
    data = payload(run_one(tools, "fetch_user_flight_information", {}, FIXTURE_PASSENGER_ID))
    assert data["passenger_id"] == FIXTURE_PASSENGER_ID
    assert [t["ticket_no"] for t in data["tickets"]] == [FIXTURE_TICKET_NO]


def test_fetch_user_flight_information_needs_a_passenger(tools: list[BaseTool]) -> None:
    text = error_text(run_one(tools, "fetch_user_flight_information", {}, None))
    assert "No passenger id is configured" in text


def test_fetch_user_flight_information_ignores_a_passenger_argument(
    tools: list[BaseTool],
) -> None:
    message = run_one(
        tools,
        "fetch_user_flight_information",
        {"passenger_id": FLOWN_PASSENGER_ID},
        FIXTURE_PASSENGER_ID,
    )
    assert payload(message)["passenger_id"] == FIXTURE_PASSENGER_ID


def test_search_flights_returns_prices_and_seats(tools: list[BaseTool]) -> None:
    data = payload(
        run_one(
            tools,
            "search_flights",
            {"departure_airport": "cdg", "arrival_airport": "bsl", "limit": 3},
            FIXTURE_PASSENGER_ID,
        )
    )
    assert data["count"] == len(data["flights"]) <= 3
    first = data["flights"][0]
    assert set(first["fares"][0]) == {"fare_conditions", "price", "seats_left"}
    # Lean rows: the route names the airports, the amounts are shown once.
    assert "CDG" in first["route"] and "departure_airport" not in first
    assert "aircraft" not in first


def test_search_flights_says_when_nothing_matches(tools: list[BaseTool]) -> None:
    data = payload(
        run_one(
            tools,
            "search_flights",
            {"departure_airport": "CDG", "arrival_airport": "CDG"},
            FIXTURE_PASSENGER_ID,
        )
    )
    assert data["flights"] == [] and "No flight matches" in data["message"]


def test_search_flights_reports_bad_airport(tools: list[BaseTool]) -> None:
    text = error_text(
        run_one(tools, "search_flights", {"departure_airport": "Paris"}, FIXTURE_PASSENGER_ID)
    )
    assert "3-letter IATA" in text and "CDG" in text


def test_search_flights_reports_a_wrongly_typed_argument(tools: list[BaseTool]) -> None:
    text = error_text(run_one(tools, "search_flights", {"limit": "many"}, FIXTURE_PASSENGER_ID))
    assert "limit" in text


# Update -------------------------------------------------------------------------------------


def test_update_ticket_to_new_flight_changes_the_ticket(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    target = lx0112(travel_db, 1)
    fee = (
        0
        if in_free_window(travel_db, FIXTURE_TICKET_NO)
        else FARE_RULES["Economy"].change_fee_cents
    )
    data = payload(
        run_one(
            tools,
            "update_ticket_to_new_flight",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": target.flight_id},
            FIXTURE_PASSENGER_ID,
        )
    )
    assert data["status"] == "changed"
    assert data["new_flight"]["flight_id"] == target.flight_id
    assert data["change_fee_cents"] == fee
    assert data["charged_cents"] == fee + data["fare_difference_cents"]
    with travel_db.session() as session:
        moved = session.scalars(
            select(TicketFlight).where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
        ).one()
    assert moved.flight_id == target.flight_id
    info = payload(run_one(tools, "fetch_user_flight_information", {}, FIXTURE_PASSENGER_ID))
    assert info["tickets"][0]["segments"][0]["flight_id"] == target.flight_id


def test_update_ticket_to_new_flight_accepts_an_id_given_as_text(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    target = lx0112(travel_db, 1)
    message = run_one(
        tools,
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": str(target.flight_id)},
        FIXTURE_PASSENGER_ID,
    )
    assert payload(message)["status"] == "changed"


def _update_cases(db: Database) -> list[tuple[str, dict[str, Any], str | None, str]]:
    return [
        (
            "someone else's ticket",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": lx0112(db, 1).flight_id},
            FLOWN_PASSENGER_ID,
            f"Ticket {FIXTURE_TICKET_NO} does not belong to passenger {FLOWN_PASSENGER_ID}.",
        ),
        (
            "a different route",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": _route_flight(db, "ZRH", "LHR")},
            FIXTURE_PASSENGER_ID,
            "same departure and arrival airports",
        ),
        (
            "under three hours",
            {
                "ticket_no": BUSINESS_TICKET_NO,
                "new_flight_id": add_flight(
                    db,
                    departure_airport="ZRH",
                    arrival_airport="LHR",
                    departs_in=timedelta(hours=2, minutes=30),
                ),
            },
            BUSINESS_PASSENGER_ID,
            "at least 3 hours from now",
        ),
        (
            "a full flight",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": full_flight(db).flight_id},
            FIXTURE_PASSENGER_ID,
            "has no Economy seat left",
        ),
        (
            "a flown segment",
            {"ticket_no": FLOWN_TICKET_NO, "new_flight_id": _route_flight(db, "AMS", "BCN")},
            FLOWN_PASSENGER_ID,
            "has already departed",
        ),
        (
            "a checked-in segment",
            {"ticket_no": CHECKED_IN_TICKET_NO, "new_flight_id": _route_flight(db, "BCN", "AMS")},
            FLOWN_PASSENGER_ID,
            "already checked in",
        ),
        (
            "an unknown ticket",
            {"ticket_no": "7240009999999999", "new_flight_id": lx0112(db, 1).flight_id},
            FIXTURE_PASSENGER_ID,
            "No ticket 7240009999999999 exists",
        ),
        (
            "an unknown flight",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": 98_765_432},
            FIXTURE_PASSENGER_ID,
            "No flight with flight_id 98765432",
        ),
        (
            "the same flight",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": lx0112(db, 0).flight_id},
            FIXTURE_PASSENGER_ID,
            "already on flight",
        ),
        (
            "a second leg leaving before the first lands",
            {
                "ticket_no": MULTI_SEGMENT_TICKET_NO,
                "new_flight_id": _second_leg_before_the_first_lands(db),
            },
            MULTI_SEGMENT_PASSENGER_ID,
            "leaves before the ticket's previous segment",
        ),
        (
            "no passenger id",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": lx0112(db, 1).flight_id},
            None,
            "No passenger id is configured",
        ),
        (
            "a missing argument",
            {"ticket_no": FIXTURE_TICKET_NO},
            FIXTURE_PASSENGER_ID,
            "new_flight_id",
        ),
    ]


UPDATE_CASE_NAMES = [
    "someone else's ticket",
    "a different route",
    "under three hours",
    "a full flight",
    "a flown segment",
    "a checked-in segment",
    "an unknown ticket",
    "an unknown flight",
    "the same flight",
    "a second leg leaving before the first lands",
    "no passenger id",
    "a missing argument",
]


@pytest.mark.parametrize("case", UPDATE_CASE_NAMES)
def test_update_ticket_to_new_flight_refuses_and_changes_nothing(
    travel_db: Database, tools: list[BaseTool], case: str
) -> None:
    cases = {
        name: (args, passenger, text) for name, args, passenger, text in _update_cases(travel_db)
    }
    args, passenger, expected = cases[case]
    before = dump(travel_db)
    message = run_one(tools, "update_ticket_to_new_flight", args, passenger)
    assert expected in error_text(message)
    assert message.tool_call_id.startswith("call-update_ticket_to_new_flight")
    assert dump(travel_db) == before


def test_update_ticket_to_new_flight_repeated_call_takes_effect_once(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    args = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": lx0112(travel_db, 1).flight_id}
    first = run_one(tools, "update_ticket_to_new_flight", args, FIXTURE_PASSENGER_ID, "same-id")
    after_first = dump(travel_db)
    second = run_one(tools, "update_ticket_to_new_flight", args, FIXTURE_PASSENGER_ID, "same-id")
    assert payload(second) == payload(first)
    assert dump(travel_db) == after_first
    other = run_one(tools, "update_ticket_to_new_flight", args, FIXTURE_PASSENGER_ID, "new-id")
    assert "already on flight" in error_text(other)


# Cancel -------------------------------------------------------------------------------------


def test_cancel_ticket_refunds_and_keeps_the_ticket_listed(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    free = in_free_window(travel_db, FIXTURE_TICKET_NO)
    with travel_db.session() as session:
        paid = session.scalars(
            select(TicketFlight.amount_cents).where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
        ).one()
    data = payload(
        run_one(tools, "cancel_ticket", {"ticket_no": FIXTURE_TICKET_NO}, FIXTURE_PASSENGER_ID)
    )
    fee = 0 if free else min(FARE_RULES["Economy"].cancel_fee_cents, paid)
    assert data["status"] == "cancelled"
    assert data["cancel_fee_cents"] == fee
    assert data["refunded_cents"] == paid - fee
    info = payload(run_one(tools, "fetch_user_flight_information", {}, FIXTURE_PASSENGER_ID))
    assert info["tickets"][0]["status"] == "cancelled"


@pytest.mark.parametrize(
    ("ticket_no", "passenger", "expected"),
    [
        (FIXTURE_TICKET_NO, BUSINESS_PASSENGER_ID, "does not belong to passenger"),
        (FLOWN_TICKET_NO, FLOWN_PASSENGER_ID, "has already departed"),
        (CHECKED_IN_TICKET_NO, FLOWN_PASSENGER_ID, "already checked in"),
        ("1234", FIXTURE_PASSENGER_ID, "No ticket 1234 exists"),
        (FIXTURE_TICKET_NO, None, "No passenger id is configured"),
    ],
)
def test_cancel_ticket_refuses_and_changes_nothing(
    travel_db: Database,
    tools: list[BaseTool],
    ticket_no: str,
    passenger: str | None,
    expected: str,
) -> None:
    before = dump(travel_db)
    message = run_one(tools, "cancel_ticket", {"ticket_no": ticket_no}, passenger)
    assert expected in error_text(message)
    assert dump(travel_db) == before


def test_cancel_ticket_repeated_call_refunds_once(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    args = {"ticket_no": FIXTURE_TICKET_NO}
    first = payload(run_one(tools, "cancel_ticket", args, FIXTURE_PASSENGER_ID, "cancel-1"))
    second = payload(run_one(tools, "cancel_ticket", args, FIXTURE_PASSENGER_ID, "cancel-1"))
    assert first == second
    with travel_db.session() as session:
        refunds = list(
            session.scalars(select(Payment).where(Payment.reference == FIXTURE_TICKET_NO))
        )
    assert len(refunds) == (1 if first["refunded_cents"] else 0)


# Batches ------------------------------------------------------------------------------------


def test_parallel_calls_get_one_answer_each(travel_db: Database, tools: list[BaseTool]) -> None:
    calls = [
        call("fetch_user_flight_information", {}, "a"),
        call("search_flights", {"departure_airport": "CDG", "limit": 2}, "b"),
        call("cancel_ticket", {"ticket_no": FLOWN_TICKET_NO}, "c"),
        call(
            "update_ticket_to_new_flight",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": lx0112(travel_db, 1).flight_id},
            "d",
        ),
    ]
    messages = run_calls(tools, calls, FIXTURE_PASSENGER_ID)
    assert sorted(m.tool_call_id for m in messages) == ["a", "b", "c", "d"]
    status = {m.tool_call_id: m.status for m in messages}
    assert status == {"a": "success", "b": "success", "c": "error", "d": "success"}


def test_search_flights_treats_null_arguments_as_left_out(tools: list[BaseTool]) -> None:
    args = {
        "departure_airport": "CDG",
        "arrival_airport": None,
        "start_time": None,
        "end_time": None,
        "limit": None,
    }
    data = payload(run_one(tools, "search_flights", args, FIXTURE_PASSENGER_ID))
    assert 0 < data["count"] <= 20
