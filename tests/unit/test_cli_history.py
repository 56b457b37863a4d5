"""Input history, ``/history`` and ``/details`` (issue 11, findings 2, 5 and 7).

The input history is one private file per passenger holding only what was typed at
``you>``; ``/history`` shows each approval with its amount and the reason of a no;
``/details`` shows the last turn's tool calls and results; Ctrl-C with a half-typed
line clears it. Through ``cli.main([...])`` with prompt_toolkit's pipe input.
"""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

from langchain_core.messages import ToolMessage

from assistants.approvals import facts_of
from conversations.assistant import Thread
from conversations.store import sqlite_checkpointer
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FLOWN_PASSENGER_ID
from tests.support.assistants import build_assistant
from tests.support.cli import chat, chat_args, customer_messages, thread_of
from tests.support.flights import change_call
from tests.support.scripted import ScriptedChatModel, call, say


def history_files(home: Path) -> dict[str, str]:
    """Every file under ``home`` that is not a database, with its text."""
    return {
        str(path.relative_to(home)): path.read_text(errors="replace")
        for path in home.rglob("*")
        if path.is_file() and not path.name.startswith(("sessions.sqlite", "travel.sqlite"))
    }


def test_cli_input_history_is_per_passenger_private_and_only_messages(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("", change_call(fixed_db, 1)),
        say("Fine, nothing changed."),
        say("Hello, second customer."),
    )
    first = chat(
        chat_args(db_path),
        ["please move my flight to tomorrow", "n", "my divorce lawyer said no"],
        model,
        home,
    )
    assert first.code == 0, first.err
    second = chat(chat_args(db_path, FLOWN_PASSENGER_ID), ["hello there"], model, home)
    assert second.code == 0, second.err

    files = history_files(home)
    mine = [name for name, text in files.items() if "please move my flight" in text]
    theirs = [name for name, text in files.items() if "hello there" in text]
    assert len(mine) == 1 and len(theirs) == 1 and mine != theirs  # one file per passenger
    for text in files.values():
        assert "divorce lawyer" not in text  # a reason for a no is never kept
        assert "\n+n\n" not in text  # nor an approval answer
    path = home / mine[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "please move my flight" not in files[theirs[0]]


def test_cli_input_history_comes_back_for_the_same_passenger_only(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Noted."), say("Again."), say("Hello."))
    chat(chat_args(db_path), ["my private question"], model, home)
    # Up, then Enter: the last message of this passenger comes back.
    again = chat(chat_args(db_path), [], model, home, raw="\x1b[A\n")
    assert customer_messages(model) == ["my private question"]
    assert again.code == 0
    other = chat(chat_args(db_path, FLOWN_PASSENGER_ID), [], model, home, raw="\x1b[A\nhi\n")
    assert other.code == 0
    sent = customer_messages(model)
    assert sent == ["hi"]  # Up found nothing of the other passenger's


def test_cli_ctrl_c_clears_a_half_typed_line(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello!"))
    result = chat(chat_args(db_path), ["hello", "exit"], model, home, raw="cancel my tick\x03")
    assert result.code == 0, result.err
    assert customer_messages(model) == ["hello"]
    assert "Hello!" in result.out


def test_cli_ctrl_c_at_an_empty_prompt_leaves_with_the_resume_line(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello!"))
    result = chat(chat_args(db_path), [], model, home, raw="hi\n\x03")
    assert result.code == 0, result.err
    assert "Hello!" in result.out
    assert "Resume it with" in result.err


def test_cli_history_shows_each_approval_with_amount_and_reason(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("Moving you to tomorrow.", change_call(fixed_db, 1)),
        say("Done, you fly tomorrow."),
        say("Shall I move it once more?", change_call(fixed_db, 3)),
        say("Fine, it stays."),
    )
    result = chat(
        chat_args(db_path),
        ["move my flight", "y", "and again", "n", "too late in the week", "/history", "exit"],
        model,
        home,
    )
    assert result.code == 0, result.err
    history = result.out[result.out.index("you> move my flight") :]  # /history's output
    approved = [line for line in history.splitlines() if "Approved: Change flight" in line]
    declined = [line for line in history.splitlines() if "Declined: Change flight" in line]
    assert len(approved) == 1 and len(declined) == 1
    assert "To pay: EUR" in approved[0] and "Charged EUR" in approved[0]
    assert "To pay: EUR" in declined[0] and "Reason: too late in the week" in declined[0]
    assert history.index("Approved") < history.index("Done, you fly tomorrow.")
    # What was decided is saved with the numbers, not only the words: the amount the
    # customer saw, as the HTTP API's history reads it.
    connection = sqlite3.connect(home / "sessions.sqlite", check_same_thread=False)
    try:
        reader = build_assistant(
            fixed_db, ScriptedChatModel(script=[]), sqlite_checkpointer(connection)
        )
        thread = Thread(thread_of(result.err), FIXTURE_PASSENGER_ID)
        decided = [
            facts_of(m)
            for m in reader.messages(thread)
            if isinstance(m, ToolMessage) and facts_of(m).shown
        ]
    finally:
        connection.close()
    assert [(f.approved, f.declined) for f in decided] == [(True, False), (False, True)]
    for facts in decided:
        assert facts.amount is not None and facts.amount.kind == "pay"
        assert facts.amount_line == facts.shown[-1]
        assert f"{facts.amount.cents // 100}.{facts.amount.cents % 100:02d}" in facts.shown[-1]


def test_cli_details_show_the_last_turn_tool_calls_and_results(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    search = call("search_flights", {"departure_airport": "CDG", "arrival_airport": "BSL"})
    model.extend(say("", search), say("There are flights every day."), say("Hi."))
    result = chat(
        chat_args(db_path), ["flights to Basel?", "/details", "hi", "/details"], model, home
    )
    assert result.code == 0, result.err
    details = result.err.split("Tool calls of the last turn (1):", 1)[1]
    assert '→ search_flights {"departure_airport": "CDG", "arrival_airport": "BSL"}' in details
    assert "← [ok]" in details and "LX0112" in details
    assert "The last turn made no tool calls." in result.err  # after "hi"
