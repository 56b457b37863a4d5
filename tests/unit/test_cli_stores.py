"""Where the terminal keeps things: ``--db`` and ``--conversations`` as paths or URLs.

Through ``cli.main([...])`` with piped input and a scripted model. Conversations in
PostgreSQL (``--conversations URL`` or ``$TRAVEL_ASSISTANT_CONVERSATIONS``): a chat with
an approved change, the resume line (which keeps the URL and never a password), resuming,
``--continue``, ``sessions`` and ``sessions delete``. URLs that cannot work fail with one
line naming the fix (the missing extra, an unreachable server, a missing database) and
leave nothing behind: no stray folder named after the URL, no database made by
``chat``. A conversation whose turn runs elsewhere is refused, and nothing is lost.
The PostgreSQL cases skip, saying why, when the server cannot be reached.
"""

from __future__ import annotations

import io
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from cli import Console
from conversations.assistant import Thread
from conversations.protocol import Conversations
from conversations.store import ConversationBusyError, ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from locations import INSTALL_POSTGRES
from terminal.chat import ChatSession
from terminal.prompter import Prompter
from tests.support import postgres
from tests.support.assistants import build_assistant
from tests.support.cli import chat, chat_args, customer_messages, resume_line, run, thread_of
from tests.support.conversation_stores import require_postgres
from tests.support.databases import FIXED_NOW
from tests.support.flights import change_call, ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say


@pytest.fixture
def pg_conversations() -> Iterator[str]:
    require_postgres()
    with postgres.scratch_database() as url:
        yield url


# --- conversations in PostgreSQL ---------------------------------------------------------


def test_cli_conversations_in_postgres_chat_resume_continue_sessions(
    db_path: Path,
    home: Path,
    model: ScriptedChatModel,
    fixed_db: Database,
    pg_conversations: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    change = change_call(fixed_db)
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("Moving you to tomorrow's LX0112.", change),
        say("Your flight is changed."),
        say("You are welcome."),
    )
    argv = [*chat_args(db_path), "--conversations", pg_conversations]
    first = chat(argv, ["I want to fly tomorrow instead", "y", "exit"], model, home)
    assert first.code == 0, first.err
    assert "Your flight is changed." in first.out
    assert ticket_flight(db_path) == change["args"]["new_flight_id"]
    command = shlex.split(resume_line(first.err))
    assert command[command.index("--conversations") + 1] == pg_conversations
    thread = thread_of(first.err)

    again = chat(command[1:], ["thanks", "exit"], model, None)
    assert again.code == 0, again.err
    assert f"Resuming session {thread}" in again.err
    assert "you> I want to fly tomorrow instead" in again.out
    assert "You are welcome." in again.out

    # The environment variable names the same store; --continue finds the conversation.
    monkeypatch.setenv("TRAVEL_ASSISTANT_CONVERSATIONS", pg_conversations)
    latest = chat([*chat_args(db_path, FIXTURE_PASSENGER_ID, "--continue")], [], model, home)
    assert latest.code == 0, latest.err
    assert f"Resuming session {thread}" in latest.err

    listed = run(["--home", str(home), "sessions", "--passenger-id", FIXTURE_PASSENGER_ID])
    assert listed.code == 0, listed.err
    (row,) = [line for line in listed.out.splitlines() if thread in line]
    assert " 2 " in row and "I want to fly tomorrow" in row  # two customer messages
    assert not (home / "sessions.sqlite").exists()  # nothing went to the home's file

    deleted = run(["--home", str(home), "sessions", "delete", thread])
    assert deleted.code == 0, deleted.err
    assert run(["--home", str(home), "sessions"]).out.strip() == "No saved sessions."
    with ConversationStore.open(pg_conversations) as store:
        assert store.registry.get(thread) is None
        assert store.saver.get_tuple({"configurable": {"thread_id": thread}}) is None


def test_cli_password_in_a_url_is_never_shown(
    db_path: Path, home: Path, model: ScriptedChatModel, pg_conversations: str
) -> None:
    # The test server trusts local connections, so any password is accepted.
    with_password = (
        make_url(pg_conversations).set(password="s3cret").render_as_string(hide_password=False)
    )
    model.extend(say("Hello."))
    result = chat(
        [*chat_args(db_path), "--conversations", with_password], ["hi", "exit"], model, home
    )
    assert result.code == 0, result.err
    command = shlex.split(resume_line(result.err))
    shown = command[command.index("--conversations") + 1]
    assert shown == make_url(with_password).render_as_string(hide_password=True)
    assert ":***@" in shown
    assert "$TRAVEL_ASSISTANT_CONVERSATIONS" in result.err and "PGPASSWORD" in result.err
    assert "s3cret" not in result.err + result.out


# --- URLs that cannot work -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "--passenger-id", FIXTURE_PASSENGER_ID, "--db", "postgresql+psycopg://a@h/x"],
        ["chat", "--passenger-id", FIXTURE_PASSENGER_ID, "--conversations", "postgresql://a@h/x"],
        ["db", "init", "--db", "postgresql://a@h/x"],
        ["sessions", "--conversations", "postgresql://a@h/x"],
    ],
)
def test_cli_postgres_without_the_driver_names_the_extra(
    argv: list[str],
    home: Path,
    model: ScriptedChatModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the extra were not installed
    result = chat(argv, [], model, home)
    assert result.code == 2
    assert INSTALL_POSTGRES in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("postgres*"))


def test_cli_db_init_on_an_unreachable_server_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    url = "postgresql+psycopg://postgres:s3cret@127.0.0.1:1/travel"
    result = run(["--home", str(tmp_path / "app"), "db", "init", "--db", url])
    assert result.code == 2
    assert "Cannot connect to PostgreSQL at postgresql+psycopg://postgres:***@" in result.err
    assert "s3cret" not in result.err
    # The bug: a SQLite file in a folder named "postgresql+psycopg:".
    assert not list(tmp_path.glob("postgres*"))


def test_cli_chat_refuses_a_missing_server_database_and_does_not_create_it(
    home: Path, model: ScriptedChatModel
) -> None:
    require_postgres()
    import psycopg

    url = make_url(postgres.server_url()).set(database="ta_test_never_made")
    result = chat(chat_args(url.render_as_string(hide_password=False)), ["hi"], model, home)  # type: ignore[arg-type]
    assert result.code == 2
    assert "No travel database at postgresql+psycopg://" in result.err
    assert "travel-assistant db init --db" in result.err and "--create-db" in result.err
    with psycopg.connect(postgres._libpq(postgres.server_url())) as connection:
        found = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = 'ta_test_never_made'"
        ).fetchone()
    assert found is None


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("postgresql://a@h:port/x", "--db: postgresql://a@h:port/x is not a database URL"),
        ("sqlite://", "--db: sqlite:// names no file"),
        ("http://example.com/x", "no database type 'http'"),
    ],
)
def test_cli_db_value_that_is_not_a_database(
    value: str, words: str, home: Path, model: ScriptedChatModel
) -> None:
    result = chat(["chat", "--passenger-id", FIXTURE_PASSENGER_ID, "--db", value], [], model, home)
    assert result.code == 2
    assert words in result.err


def test_cli_db_as_a_sqlite_url(db_path: Path, home: Path, model: ScriptedChatModel) -> None:
    model.extend(say("Hello."))
    url = f"sqlite:///{db_path}"
    result = chat(
        ["chat", "--passenger-id", FIXTURE_PASSENGER_ID, "--db", url], ["hi"], model, home
    )
    assert result.code == 0, result.err
    command = shlex.split(resume_line(result.err))
    assert command[command.index("--db") + 1] == url


# --- one turn at a time ----------------------------------------------------------------------


@pytest.mark.e2e  # runs the program in processes of its own
def test_cli_turn_running_elsewhere_is_refused_and_nothing_is_lost(
    db_path: Path, home: Path, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello."), say("Now I can answer."))
    first = chat(chat_args(db_path), ["hello", "exit"], model, home)
    thread = thread_of(first.err)
    resume = [*chat_args(db_path), "--thread-id", thread]
    # Another window runs a turn of this conversation: it holds the lock.
    with ConversationStore.open(home / "sessions.sqlite") as other:
        lease = other.acquire(thread)
        try:
            refused = chat(resume, ["are you there?", "exit"], model, home)
            deleted = run(["--home", str(home), "sessions", "delete", thread])
        finally:
            lease.release()
    assert refused.code == 0, refused.err
    assert "busy in another window, terminal or server" in refused.err
    assert "Your message was not sent" in refused.err
    assert len(model.received) == 1  # the model was not asked
    assert deleted.code == 1 and "is busy" in deleted.err

    again = chat(resume, ["are you there?", "exit"], model, home)
    assert "busy" not in again.err
    assert "Now I can answer." in again.out
    humans = customer_messages(model)
    assert humans == ["hello", "are you there?"]


class RefuseFirst:
    """Turn locks that answer "busy" the first ``refusals`` times, then let every turn in."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.taken: list[str] = []

    def acquire(self, thread_id: str, wait: float = 0.0) -> Any:
        if self.refusals:
            self.refusals -= 1
            raise ConversationBusyError(thread_id)
        self.taken.append(thread_id)
        return ConversationStore.in_memory().acquire(thread_id)

    def busy(self, thread_id: str) -> bool:
        return False


def test_cli_a_window_opened_on_a_busy_conversation_asks_its_pending_action_first(
    model: ScriptedChatModel, fixed_db: Database
) -> None:
    """Opened while another window ran a turn that stopped at an approval: the customer's
    next message waits, the approval is put to them first, then the message is theirs."""
    store = ConversationStore.in_memory()
    thread = Thread("t-busy", FIXTURE_PASSENGER_ID)
    store.registry.touch(thread.thread_id, thread.passenger_id, FIXED_NOW, "move my flight")
    change = change_call(fixed_db)
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move"})),
        say("Moving you.", change),
        say("Fine, I left your flight as it is."),
    )
    assistant = build_assistant(fixed_db, model, store.saver, retry_policy=None)
    list(assistant.send(thread, "move my flight"))  # the other window's turn
    assert assistant.pending_actions(thread)
    typed = iter(["what about tomorrow?", "exit"])
    answers = iter(["n", "too expensive"])
    out, err = io.StringIO(), io.StringIO()
    locks = RefuseFirst(1)
    session = ChatSession(
        Conversations(assistant, store.registry, locks),
        thread,
        Console(out=out, err=err),
        Prompter(lambda _: next(typed), lambda _: next(answers), lambda: False, lambda f: f()),
    )
    assert session.run(resumed=True) == 0
    shown = err.getvalue() + out.getvalue()
    assert "busy in another window, terminal or server" in shown  # on opening: nothing asked
    assert shown.index("busy in another") < shown.index("Approval needed")
    assert "First, an action in this conversation is waiting for your decision" in shown
    assert "Fine, I left your flight as it is." in out.getvalue()
    assert not assistant.pending_actions(thread)
    # The message that found the action waiting was not sent: the model saw the decline.
    assert customer_messages(model) == ["move my flight"]
    assert "too expensive" in str(model.received[-1][-1].content)
    assert locks.taken == [thread.thread_id, thread.thread_id]
