"""The terminal program through ``main([...])`` with piped input and a scripted model."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from cli import Console, Overrides, main
from conversations.assistant import Thread
from conversations.sessions import SessionRegistry
from conversations.words import MAX_MESSAGE_CHARS
from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FLOWN_PASSENGER_ID
from tests.support.assistants import build_assistant
from tests.support.cli import chat, chat_args, customer_messages, pasted
from tests.support.databases import FIXED_NOW
from tests.support.flights import change_call, ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say


def test_cli_full_conversation_approve_and_deny(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    first = change_call(fixed_db, 1)
    second = change_call(fixed_db, 3)
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("Moving you to tomorrow's LX0112.", first),
        say("Your flight is changed."),
        say("Shall I move it again?", second),
        say("Fine, I left it as it is."),
    )
    result = chat(
        chat_args(db_path),
        [
            "I want to fly tomorrow instead",
            "y",
            "and move it once more",
            "n",
            "too late in the week",
            "exit",
        ],
        model,
        home,
    )
    assert result.code == 0, result.err
    assert "Your flight is changed." in result.out
    assert "Approval needed" in result.out
    assert "assistant (flights)> " in result.out
    assert ticket_flight(db_path) == first["args"]["new_flight_id"]
    denial = [m for m in model.received[-1] if getattr(m, "tool_call_id", None) == second["id"]]
    assert denial and "too late in the week" in str(denial[0].content)
    assert "--thread-id" in result.err


def test_cli_eof_at_approval_denies(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    change = change_call(fixed_db)
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move"})),
        say("", change),
        say("Nothing was changed."),
    )
    before = ticket_flight(db_path)
    result = chat(chat_args(db_path), ["move my flight"], model, home)
    assert result.code == 0
    assert ticket_flight(db_path) == before
    assert "declined" in result.err


def test_cli_resume_asks_pending_approval_again(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    # A first process stopped while the approval was on screen (killed, say).
    sessions = home / "sessions.sqlite"
    home.mkdir(parents=True)
    connection = sqlite3.connect(sessions, check_same_thread=False)
    saver = SqliteSaver(connection)
    saver.setup()
    SessionRegistry(connection).touch("t-9", FIXTURE_PASSENGER_ID, FIXED_NOW, "move my flight")
    change = change_call(fixed_db)
    first = ScriptedChatModel(
        script=[say("", call("ToFlightBookingAssistant", {"request": "m"})), say("", change)]
    )
    api = build_assistant(fixed_db, first, saver)
    list(api.send(Thread("t-9", FIXTURE_PASSENGER_ID), "move my flight"))
    connection.close()

    model.extend(say("Done, you fly tomorrow."))
    result = chat(
        chat_args(db_path, FIXTURE_PASSENGER_ID, "--thread-id", "t-9"), ["y", "q"], model, home
    )
    assert result.code == 0, result.err
    assert "you> move my flight" in result.out  # the last exchange is shown
    assert "Approval needed" in result.out
    assert ticket_flight(db_path) == change["args"]["new_flight_id"]
    assert "Done, you fly tomorrow." in result.out


def test_cli_unknown_passenger(db_path: Path, home: Path, model: ScriptedChatModel) -> None:
    result = chat(chat_args(db_path, "0000 000000"), [], model, home)
    assert result.code == 2
    assert "No passenger with id '0000 000000'" in result.err


def test_cli_unknown_thread(db_path: Path, home: Path, model: ScriptedChatModel) -> None:
    result = chat(chat_args(db_path, FIXTURE_PASSENGER_ID, "--thread-id", "nope"), [], model, home)
    assert result.code == 2
    assert "No saved session 'nope'" in result.err


def test_cli_thread_of_other_passenger(db_path: Path, home: Path, model: ScriptedChatModel) -> None:
    model.extend(say("Hello!"))
    first = chat(chat_args(db_path), ["hi", "exit"], model, home)
    thread_id = first.err.split("--thread-id ")[1].split()[0]
    result = chat(chat_args(db_path, FLOWN_PASSENGER_ID, "--thread-id", thread_id), [], model, home)
    assert result.code == 2
    assert "belongs to another passenger" in result.err


def test_cli_without_endpoint_names_what_to_set(db_path: Path, home: Path) -> None:
    result = chat(chat_args(db_path), ["hi"], None, home)
    assert result.code == 2
    assert "OPENAI_API_KEY" in result.err and "OPENAI_BASE_URL" in result.err
    assert "you>" not in result.out


def test_cli_empty_and_long_messages_are_not_sent(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Short answer."))
    result = chat(
        chat_args(db_path), ["", "   ", pasted("x" * 5000), "short question", "quit"], model, home
    )
    assert result.code == 0
    assert "the limit is 4000" in result.err
    assert len(model.received) == 1  # only the short question reached the model


def test_cli_message_of_exactly_the_limit_is_sent_and_one_more_is_not(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    at_limit = "a" * (MAX_MESSAGE_CHARS - 1) + "z"  # its last character is kept too
    one_more = "b" * (MAX_MESSAGE_CHARS + 1)
    model.extend(say("Got your long message."))
    keys = [pasted(one_more), pasted(at_limit), "quit"]  # as a long message arrives: pasted
    result = chat(chat_args(db_path), keys, model, home)
    assert result.code == 0, result.err
    assert (
        f"Your message is {MAX_MESSAGE_CHARS + 1} characters long; "
        f"the limit is {MAX_MESSAGE_CHARS}."
    ) in result.err
    assert f"Your message is {MAX_MESSAGE_CHARS} characters" not in result.err
    assert len(model.received) == 1
    assert customer_messages(model) == [at_limit]
    assert "Got your long message." in result.out


def test_cli_slash_commands(db_path: Path, home: Path, model: ScriptedChatModel) -> None:
    model.extend(say("Hello there."))
    result = chat(
        chat_args(db_path), ["/help", "hi", "/history", "/sessions", "/bogus", "/exit"], model, home
    )
    assert result.code == 0
    assert "/new" in result.err
    assert result.out.count("Hello there.") == 2  # once live, once from /history
    assert "Unknown command /bogus" in result.err


def test_cli_sessions_lists_pending_flag(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "m"})),
        say("", change_call(fixed_db)),
        say("OK."),
    )
    chat(chat_args(db_path), ["move my flight"], model, home)
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["--home", str(home), "sessions", "--db", str(db_path)],
        Overrides(console=Console(out=out, err=err), clock=fixed_clock(FIXED_NOW)),
    )
    assert code == 0
    assert FIXTURE_PASSENGER_ID in out.getvalue()


@pytest.mark.e2e  # builds a whole travel database
def test_cli_db_init_refuses_to_overwrite_then_forces(tmp_path: Path, home: Path) -> None:
    target = tmp_path / "fresh.sqlite"
    err = io.StringIO()
    console = Console(out=io.StringIO(), err=err)
    assert (
        main(["--home", str(home), "db", "init", "--db", str(target)], Overrides(console=console))
        == 0
    )
    assert target.exists()
    assert (
        main(["--home", str(home), "db", "init", "--db", str(target)], Overrides(console=console))
        == 2
    )
    assert "--force" in err.getvalue()
    assert (
        main(
            ["--home", str(home), "db", "init", "--db", str(target), "--scale", "0"],
            Overrides(console=console),
        )
        == 2
    )


def test_cli_unreadable_database(tmp_path: Path, home: Path, model: ScriptedChatModel) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    result = chat(chat_args(garbage), [], model, home)
    assert result.code == 1
    assert "cannot be read" in result.err


def test_cli_bad_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["chat", "--passenger"])
    assert raised.value.code == 2


def test_cli_graph_prints_mermaid(home: Path) -> None:
    out = io.StringIO()
    assert (
        main(["--home", str(home), "graph"], Overrides(console=Console(out=out, err=io.StringIO())))
        == 0
    )
    assert "update_flight_sensitive_tools" in out.getvalue()


def test_cli_provider_error_prints_one_line_and_goes_on(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    import httpx
    import openai

    response = httpx.Response(400, request=httpx.Request("POST", "http://127.0.0.1/v1/chat"))
    model.extend(
        openai.BadRequestError("context length exceeded", response=response, body=None),
        say("Now it works."),
    )
    result = chat(chat_args(db_path), ["first try", "second try", "q"], model, home)
    assert result.code == 0
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    # The server's own reason, said in words, with advice that can work.
    assert "context length exceeded" in errors[0]
    assert "Sending it again will not help" in errors[0]
    assert "Now it works." in result.out


@pytest.mark.e2e  # builds a whole travel database
def test_cli_first_use_builds_the_database_in_a_new_home(
    tmp_path: Path, model: ScriptedChatModel
) -> None:
    home = tmp_path / "new" / "home"
    model.extend(say("Welcome!"))
    result = chat(["chat", "--passenger-id", FIXTURE_PASSENGER_ID], ["hello", "exit"], model, home)
    assert result.code == 0, result.err
    assert (home / "travel.sqlite").exists()
    assert "Building the travel database" in result.err
    assert "Welcome!" in result.out
