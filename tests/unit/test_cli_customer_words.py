"""What the customer reads is written for the customer (issue 11, finding 4).

Never text meant for the model, raw arguments or raw tool names; an action that would be
refused is explained and not put to the customer, while the model still gets the refusal.
Driven through ``cli.main([...])`` with piped input and a scripted model.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from langchain_core.messages import ToolMessage
from sqlalchemy import select

from db.engine import Database
from db.fixtures import FIXTURE_TICKET_NO, FULL_FLIGHT_DAY_OFFSET
from db.models import Flight
from tests.support.cli import chat, chat_args
from tests.support.databases import FIXED_NOW
from tests.support.flights import change_call, fixture_segment, ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say

MODEL_WORDS = (
    "search_flights",
    "update_ticket_to_new_flight",
    "ToBookCarRental",
    "ToHotelBookingAssistant",
    "new_flight_id",
    "flight_id",
    "ticket_no:",
    "Not started",
    "Error:",
    "probably be refused",
)


def answer_for(model: ScriptedChatModel, call_id: str) -> ToolMessage:
    answers = [
        m for m in model.received[-1] if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    assert len(answers) == 1, answers
    return answers[0]


def test_cli_refused_action_is_explained_not_asked(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    full = change_call(fixed_db, FULL_FLIGHT_DAY_OFFSET)  # every Economy seat is sold
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("Moving you.", full),
        say("That flight is full; shall I look at other days?"),
    )
    before = ticket_flight(db_path)
    result = chat(chat_args(db_path), ["move me to that flight", "exit"], model, home)
    assert result.code == 0, result.err
    shown = result.out + result.err
    assert "Approve this action?" not in shown  # nothing that cannot succeed is put to a vote
    assert "This cannot be done: there is no availability for it." in result.out
    assert "no Economy seat left" in result.out  # the reason, in plain words
    for words in MODEL_WORDS:
        assert words not in shown, words
    assert ticket_flight(db_path) == before
    told = answer_for(model, full["id"])
    assert told.status == "error"
    assert "was not asked to approve it" in str(told.content)
    assert "no Economy seat left" in str(told.content)  # the model gets the refusal itself
    assert "That flight is full" in result.out


def test_cli_refusal_for_a_flight_on_another_route_shows_no_internal_id(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    current = fixture_segment(fixed_db).flight_id
    with fixed_db.session() as session:
        flown = session.get(Flight, current)
        assert flown is not None
        elsewhere = session.scalars(
            select(Flight)
            .where(
                Flight.departure_airport != flown.departure_airport,
                Flight.scheduled_departure > FIXED_NOW + timedelta(days=2),
                Flight.status == "Scheduled",
            )
            .order_by(Flight.flight_id)
            .limit(1)
        ).one()
    move = call(
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": elsewhere.flight_id},
    )
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("Moving you.", move),
        say("That flight goes elsewhere; shall I search your route?"),
    )
    result = chat(chat_args(db_path), ["move me to that flight", "exit"], model, home)
    assert result.code == 0, result.err
    shown = result.out + result.err
    assert "Approve this action?" not in shown
    assert f"Flight {elsewhere.flight_no} flies" in result.out  # why, in plain words
    for words in MODEL_WORDS:
        assert words not in shown, words
    told = answer_for(model, move["id"])
    assert f"flight_id {elsewhere.flight_id}" in str(told.content)  # the model gets the id


def test_cli_no_model_text_for_parallel_hand_overs_and_tool_errors(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(
        say(
            "",
            call("search_flights", {"departure_airport": "XXX"}),  # fails: unknown airport
            call(
                "ToHotelBookingAssistant",
                {
                    "location": "Basel",
                    "checkin_date": "2026-05-10",
                    "checkout_date": "2026-05-12",
                    "request": "a hotel",
                },
            ),
            call(
                "ToBookCarRental",
                {
                    "location": "Basel",
                    "start_date": "2026-05-10",
                    "end_date": "2026-05-12",
                    "request": "a car",
                },
            ),
        ),
        say("Let us start with the hotel."),
    )
    result = chat(chat_args(db_path), ["a hotel and a car in Basel please", "exit"], model, home)
    assert result.code == 0, result.err
    shown = result.out + result.err
    for words in MODEL_WORDS:
        assert words not in shown, words
    assert "… searching flights" in result.err
    assert "… the hotel specialist takes over" in result.err
    assert "Let us start with the hotel." in result.out


def test_cli_approved_action_that_fails_is_reported_in_customer_words(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    # Two parallel calls moving the ticket to the same flight: both previews are fine,
    # the second write fails because the first one already moved the ticket.
    first = change_call(fixed_db, 1)
    second = call("update_ticket_to_new_flight", dict(first["args"]))
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("", first, second),
        say("You are on tomorrow's flight."),
    )
    result = chat(chat_args(db_path), ["move me", "y", "y", "exit"], model, home)
    assert result.code == 0, result.err
    assert "Approval needed (2 of 2)" in result.out
    assert "✓ Change flight: done." in result.err
    assert "! Change flight: it did not go through; the assistant will explain." in result.err
    shown = result.out + result.err
    for words in MODEL_WORDS:
        assert words not in shown, words
    assert ticket_flight(db_path) == first["args"]["new_flight_id"]
