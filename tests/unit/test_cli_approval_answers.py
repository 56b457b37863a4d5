"""The answers to ``Approve this action? [y/N]``: only an explicit yes approves.

The README promises that Enter (an empty answer) declines, like ``n``, Ctrl-D or
anything that is not ``y``/``yes``. Driven through ``cli.main([...])`` with piped input
and a scripted model, as in ``test_cli.py`` (``tests.support.cli.chat``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from sqlalchemy import select

from db.engine import Database
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_TICKET_NO
from db.models import Flight, Payment, TicketFlight
from tests.support.cli import chat, chat_args
from tests.support.scripted import ScriptedChatModel, call, say

APPROVAL_PROMPT = "Approve this action? [y/N] "
REASON_PROMPT = "Why not?"


def run_chat(db_path: Path, home: Path, model: ScriptedChatModel, lines: list[str]) -> str:
    """Run ``travel-assistant chat`` on piped ``lines``; return stderr (exit code 0)."""
    result = chat(chat_args(db_path), lines, model, home)
    assert result.code == 0, result.err
    assert "Approval needed" in result.out
    return result.err


def ticket_state(db_path: Path) -> tuple[list[int], int]:
    """The fixture ticket's flights and how many payments exist."""
    database = Database.from_url(str(db_path))
    try:
        with database.session() as session:
            flight_ids = list(
                session.scalars(
                    select(TicketFlight.flight_id).where(
                        TicketFlight.ticket_no == FIXTURE_TICKET_NO
                    )
                )
            )
            payments = len(list(session.scalars(select(Payment.id))))
    finally:
        database.dispose()
    return flight_ids, payments


def next_day_flight(db_path: Path) -> int:
    """The LX0112 one day after the fixture ticket's flight."""
    database = Database.from_url(str(db_path))
    try:
        with database.session() as session:
            current = session.scalars(
                select(Flight)
                .join(TicketFlight, TicketFlight.flight_id == Flight.flight_id)
                .where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
            ).one()
            flight_id: int = session.scalars(
                select(Flight.flight_id).where(
                    Flight.flight_no == FIXTURE_FLIGHT_NO,
                    Flight.scheduled_departure == current.scheduled_departure + timedelta(days=1),
                )
            ).one()
    finally:
        database.dispose()
    return flight_id


def scripted_change(db_path: Path) -> tuple[ScriptedChatModel, dict[str, Any]]:
    """A model that hands over, asks to move the fixture ticket, then answers."""
    change = call(
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": next_day_flight(db_path)},
    )
    model = ScriptedChatModel()
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("Moving you to tomorrow's flight.", change),
        say("All right."),
    )
    return model, dict(change)


def answer_to(model: ScriptedChatModel, call_id: str) -> ToolMessage:
    """The tool answer the model was shown for ``call_id`` on its last call."""
    answers = [
        m for m in model.received[-1] if isinstance(m, ToolMessage) and m.tool_call_id == call_id
    ]
    assert len(answers) == 1, answers
    return answers[0]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("", id="enter"),
        pytest.param("   ", id="blanks"),
        pytest.param("sure", id="sure"),
        pytest.param("n", id="n"),
        pytest.param("yep", id="yep"),
    ],
)
def test_cli_approval_declines_enter_and_anything_but_yes(
    db_path: Path, tmp_path: Path, answer: str
) -> None:
    model, change = scripted_change(db_path)
    before = ticket_state(db_path)
    # The answer, then Enter at "Why not?", then leave.
    err = run_chat(db_path, tmp_path / "app", model, ["move my flight", answer, "", "exit"])
    assert ticket_state(db_path) == before
    told = answer_to(model, change["id"])
    assert told.status == "error"
    assert str(told.content).startswith("The customer declined this action")
    assert "They gave no reason." in str(told.content)
    assert "Resume it with" in err


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("y", id="y"),
        pytest.param("Y", id="Y"),
        pytest.param("yes", id="yes"),
        pytest.param("YES", id="YES"),
        pytest.param(" yes ", id="padded-yes"),
    ],
)
def test_cli_approval_accepts_y_and_yes_in_any_case(
    db_path: Path, tmp_path: Path, answer: str
) -> None:
    model, change = scripted_change(db_path)
    _, payments_before = ticket_state(db_path)
    run_chat(db_path, tmp_path / "app", model, ["move my flight", answer, "exit"])
    flight_ids, payments_after = ticket_state(db_path)
    assert flight_ids == [change["args"]["new_flight_id"]]
    assert payments_after == payments_before + 1
    told = answer_to(model, change["id"])
    assert told.status != "error"
    assert "declined" not in str(told.content)
