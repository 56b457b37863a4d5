"""Saved conversations from the terminal (issue 11, findings 1 and 8).

The resume line repeats ``--home`` and ``--db`` and works; nothing is offered for a
conversation without a message; ``sessions`` prints a table (local time, the first
customer message as title, turns, pending approval); ``chat --continue``, ``/sessions``
with ``/switch N`` and ``sessions delete ID``. Through ``cli.main([...])``.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FLOWN_PASSENGER_ID
from tests.support.cli import (
    chat,
    chat_args,
    customer_messages,
    leave_pending_approval,
    resume_line,
    run,
    thread_of,
)
from tests.support.scripted import ScriptedChatModel, say


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run in a local time zone nine hours ahead of UTC."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_cli_resume_line_repeats_home_and_db_and_works(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello! How can I help?"), say("Welcome back."))
    # The global options after the command, as a customer would add them.
    argv = [*chat_args(db_path), "--home", str(home)]
    first = chat(argv, ["hello", "exit"], model, None)
    assert first.code == 0, first.err
    command = shlex.split(resume_line(first.err))
    assert command[0] == "travel-assistant"
    assert command[command.index("--home") + 1] == str(home.absolute())
    assert command[command.index("--db") + 1] == str(db_path.absolute())

    again = chat(command[1:], ["and now?", "exit"], model, None)
    assert again.code == 0, again.err
    assert "Resuming session" in again.err
    assert "you> hello" in again.out  # the same conversation, from the same files
    assert "Welcome back." in again.out


def test_cli_resume_line_writes_out_a_database_chosen_by_the_environment(
    db_path: Path, home: Path, model: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.extend(say("Hello!"), say("Welcome back."))
    monkeypatch.setenv("TRAVEL_ASSISTANT_DB", str(db_path))
    first = chat(["chat", "--passenger-id", FIXTURE_PASSENGER_ID], ["hello"], model, home)
    assert first.code == 0, first.err
    command = shlex.split(resume_line(first.err))
    assert command[command.index("--db") + 1] == str(db_path.absolute())
    # From another shell, where the variable is not set, the line finds the same files.
    monkeypatch.delenv("TRAVEL_ASSISTANT_DB")
    again = chat(command[1:], ["and now?"], model, None)
    assert again.code == 0, again.err
    assert "Resuming session" in again.err and "Welcome back." in again.out


def test_cli_nothing_to_resume_without_a_message(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    left = chat(chat_args(db_path), ["exit"], model, home)
    assert left.code == 0
    assert "Resume it with" not in left.err
    assert "Nothing to resume" in left.err

    model.extend(say("Hello!"))
    renewed = chat(chat_args(db_path), ["hi", "/new", "exit"], model, home)
    assert "Resume it with" not in renewed.err  # the new conversation has no message
    assert "Nothing to resume" in renewed.err
    # The hint lists the conversations of this home, not of the default one.
    hint = renewed.err.split("are listed by: ", 1)[1].splitlines()[0]
    listing = run(shlex.split(hint)[1:])
    assert listing.code == 0, listing.err
    assert " hi " in listing.out  # the conversation of this home


def test_cli_unknown_session_names_how_to_list_the_ones_of_this_home(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello!"))
    assert chat(chat_args(db_path), ["hi", "exit"], model, home).code == 0
    for argv in (
        [*chat_args(db_path), "--thread-id", "no-such-thread"],
        ["sessions", "delete", "no-such-thread"],
    ):
        refused = chat(argv, [], model, home)
        assert refused.code == 2
        assert "No saved session 'no-such-thread'" in refused.err
        hint = refused.err.split("List them with: ", 1)[1].splitlines()[0]
        assert shlex.split(hint)[2:4] == ["--home", str(home.absolute())]
        listing = run(shlex.split(hint)[1:])
        assert "hi" in listing.out, (hint, listing)


def test_cli_sessions_table(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database, tokyo: None
) -> None:
    model.extend(
        say("Hello there."),
        say("Anything else?"),
        say("Sorry, I could not put together an answer just now."),
    )
    first = chat(chat_args(db_path), ["What is my booking?", "thanks", "one more"], model, home)
    assert first.code == 0, first.err
    # A second conversation whose terminal went away at the approval prompt.
    pending = leave_pending_approval(home, fixed_db, "Move my flight please")

    result = run(["--home", str(home), "sessions"])
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = lines[0]
    for column in ("Last used", "Passenger", "Turns", "Approval", "Title", "Session"):
        assert column in header
    rows = [line for line in lines[1:] if FIXTURE_PASSENGER_ID in line]
    assert len(rows) == 2
    newest, oldest = rows
    assert "Move my flight please" in newest and "pending" in newest
    assert "What is my booking?" in oldest and "pending" not in oldest
    assert " 3 " in oldest  # three customer messages
    assert "Sorry" not in result.out  # the title is the customer's, not the last reply
    assert "2026-05-04 18:00" in newest  # 09:00 UTC, shown in local time
    assert "UTC" not in result.out
    assert pending in newest and thread_of(first.err) in oldest


def test_cli_sessions_filters_by_passenger_id_without_space(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello."), say("Hi."))
    chat(chat_args(db_path), ["hello"], model, home)
    chat(chat_args(db_path, FLOWN_PASSENGER_ID), ["hi"], model, home)
    compact = FIXTURE_PASSENGER_ID.replace(" ", "")
    result = run(["sessions", "--passenger-id", compact, "--home", str(home)])
    assert result.code == 0, result.err
    assert "hello" in result.out and "hi " not in result.out
    assert "Passenger" not in result.out  # one passenger: no column for it


def test_cli_continue_resumes_the_latest_conversation(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("First."), say("Second."), say("Third."))
    chat(chat_args(db_path), ["first conversation"], model, home)
    latest = chat(chat_args(db_path), ["second conversation"], model, home)
    result = chat(chat_args(db_path, FIXTURE_PASSENGER_ID, "--continue"), ["more"], model, home)
    assert result.code == 0, result.err
    assert f"Resuming session {thread_of(latest.err)}" in result.err
    assert "you> second conversation" in result.out
    assert "you> first conversation" not in result.out
    assert thread_of(result.err) == thread_of(latest.err)


def test_cli_continue_without_a_saved_conversation_starts_one(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello."))
    result = chat(chat_args(db_path, FIXTURE_PASSENGER_ID, "--continue"), ["hi"], model, home)
    assert result.code == 0, result.err
    assert "No saved conversation to continue" in result.err
    assert "Hello." in result.out


def test_cli_switch_to_another_saved_conversation(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("First."), say("Second."), say("Back in the first one."))
    first = chat(chat_args(db_path), ["first conversation"], model, home)
    chat(chat_args(db_path), ["second conversation"], model, home)
    result = chat(
        chat_args(db_path),
        ["/sessions", "/switch", "/switch 9", "/switch 2", "/sessions", "still there?", "exit"],
        model,
        home,
    )
    assert result.code == 0, result.err
    assert "first conversation" in result.err and "second conversation" in result.err
    assert "No conversation 9 to switch to" in result.err
    assert "Which one? type /sessions" in result.err and "none given" not in result.err
    assert "* marks this conversation" in result.err  # /sessions marks the current one
    assert f"Resuming session {thread_of(first.err)}" in result.err
    assert thread_of(result.err) == thread_of(first.err)
    assert "Back in the first one." in result.out
    sent = customer_messages(model)
    assert sent == ["first conversation", "still there?"]


def test_cli_sessions_delete(db_path: Path, home: Path, model: ScriptedChatModel) -> None:
    model.extend(say("Hello."))
    first = chat(chat_args(db_path), ["hello"], model, home)
    thread_id = thread_of(first.err)

    # Filtered to another passenger, the id is not theirs: nothing is deleted.
    other = run(
        ["--home", str(home), "sessions", "--passenger-id", FLOWN_PASSENGER_ID, "delete", thread_id]
    )
    assert other.code == 2 and "nothing was deleted" in other.err, other.err
    assert thread_id in run(["--home", str(home), "sessions"]).out

    deleted = run(["--home", str(home), "sessions", "delete", thread_id])
    assert deleted.code == 0, deleted.err
    assert f"Deleted session {thread_id}" in deleted.err
    assert thread_id not in run(["--home", str(home), "sessions"]).out
    gone = chat(chat_args(db_path, FIXTURE_PASSENGER_ID, "--thread-id", thread_id), [], model, home)
    assert gone.code == 2 and "No saved session" in gone.err

    unknown = run(["--home", str(home), "sessions", "delete", "no-such-id"])
    assert unknown.code == 2
    assert "No saved session 'no-such-id'" in unknown.err


def test_cli_continue_needs_no_passenger_id(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("First."), say("Again."))
    first = chat(chat_args(db_path), ["first conversation"], model, home)
    result = chat(["chat", "--db", str(db_path), "--continue"], ["more"], model, home)
    assert result.code == 0, result.err
    assert f"Resuming session {thread_of(first.err)}" in result.err
    assert "Again." in result.out


def test_cli_passenger_comes_from_the_environment(
    db_path: Path, home: Path, model: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.extend(say("Hello."))
    monkeypatch.setenv("TRAVEL_ASSISTANT_PASSENGER", "3442587242")
    result = chat(["chat", "--db", str(db_path)], ["hi"], model, home)
    assert result.code == 0, result.err
    assert f"for passenger {FIXTURE_PASSENGER_ID}" in result.err


def test_cli_without_a_passenger_says_the_three_ways_to_give_one(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    result = chat(["chat", "--db", str(db_path)], [], model, home)
    assert result.code == 2
    for way in ("--passenger-id", "TRAVEL_ASSISTANT_PASSENGER", "--continue"):
        assert way in result.err
    empty_home = chat(["chat", "--db", str(db_path), "--continue"], [], model, home)
    assert empty_home.code == 2
    assert "No saved conversation to continue here" in empty_home.err


def test_cli_short_flags_resume_and_continue(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello."), say("Still here."), say("And again."))
    first = chat(["chat", "-p", "3442587242", "--db", str(db_path)], ["hello"], model, home)
    assert first.code == 0, first.err
    assert f"for passenger {FIXTURE_PASSENGER_ID}" in first.err
    thread_id = thread_of(first.err)
    by_id = chat(
        ["chat", "-p", FIXTURE_PASSENGER_ID, "-t", thread_id, "--db", str(db_path)],
        ["more"],
        model,
        home,
    )
    assert by_id.code == 0, by_id.err
    assert f"Resuming session {thread_id}" in by_id.err
    latest = chat(["chat", "-c", "--db", str(db_path)], ["again"], model, home)
    assert latest.code == 0, latest.err
    assert f"Resuming session {thread_id}" in latest.err
    listed = run(["--home", str(home), "sessions", "-p", FIXTURE_PASSENGER_ID])
    assert thread_id in listed.out


def test_cli_thread_id_alone_resumes_for_the_conversations_own_passenger(
    db_path: Path, home: Path, model: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.extend(say("Hello."), say("Welcome back."))
    first = chat(chat_args(db_path), ["hello"], model, home)
    thread_id = thread_of(first.err)
    # A default passenger from the environment does not stand in the way.
    monkeypatch.setenv("TRAVEL_ASSISTANT_PASSENGER", FLOWN_PASSENGER_ID)
    resumed = chat(["chat", "--thread-id", thread_id, "--db", str(db_path)], ["more"], model, home)
    assert resumed.code == 0, resumed.err
    assert f"Resuming session {thread_id}" in resumed.err
    assert "Welcome back." in resumed.out
    assert customer_messages(model) == ["hello", "more"]
    assert f"--passenger-id '{FIXTURE_PASSENGER_ID}'" in resume_line(resumed.err)
    unknown = chat(["chat", "-t", "no-such-id", "--db", str(db_path)], [], model, home)
    assert unknown.code == 2
    assert "No saved session 'no-such-id'" in unknown.err
    # Given with another passenger, it is still refused.
    theirs = chat(chat_args(db_path, FLOWN_PASSENGER_ID, "-t", thread_id), [], model, home)
    assert theirs.code == 2 and "belongs to another passenger" in theirs.err


def test_cli_sessions_show_prints_the_conversation_as_the_customer_saw_it(
    db_path: Path, home: Path, model: ScriptedChatModel, fixed_db: Database
) -> None:
    thread_id = leave_pending_approval(home, fixed_db, "move my flight")
    model.extend(say("Fine, I have not changed it."))
    declined = chat(
        chat_args(db_path, FIXTURE_PASSENGER_ID, "--thread-id", thread_id),
        ["n", "too early", "exit"],
        model,
        home,
    )
    assert declined.code == 0, declined.err
    shown = run(["--home", str(home), "sessions", "show", thread_id])
    assert shown.code == 0, shown.err
    assert "you> move my flight" in shown.out
    assert "Fine, I have not changed it." in shown.out
    assert "too early" in shown.out  # the action, declined, with the reason
    assert shown.out.index("move my flight") < shown.out.index("Fine, I have not")

    import json

    as_json = run(["--home", str(home), "sessions", "show", thread_id, "--json"])
    assert as_json.code == 0, as_json.err
    data = json.loads(as_json.out)
    assert data["thread_id"] == thread_id and data["passenger_id"] == FIXTURE_PASSENGER_ID
    types = [record["type"] for record in data["records"]]
    assert types[0] == "customer" and "action" in types and types[-1] == "assistant"
    action = next(r for r in data["records"] if r["type"] == "action")
    assert action["outcome"] == "declined" and action["reason"] == "too early"

    for argv, said in (
        (["sessions", "show", "no-such-id"], "No saved session 'no-such-id'"),
        (
            ["sessions", "-p", FLOWN_PASSENGER_ID, "show", thread_id],
            "nothing was shown",
        ),
    ):
        refused = run(["--home", str(home), *argv])
        assert refused.code == 2 and said in refused.err, refused.err
        assert refused.out == ""


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["chat", "--pasenger-id", "x"],
            "No option '--pasenger-id' for 'chat'. Did you mean '--passenger-id'?",
        ),
        (["chat", "--contineu"], "Did you mean '--continue'?"),
        (["sessions", "delete", "x", "--hoem", "y"], "Did you mean '--home'?"),
        (["audit", "--limt", "3"], "No option '--limt' for 'audit'. Did you mean '--limit'?"),
        (["chat", "--zzz"], "No option '--zzz' for 'chat'. See: travel-assistant chat --help"),
    ],
)
def test_cli_mistyped_option_names_the_nearest_one(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli import main

    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err
