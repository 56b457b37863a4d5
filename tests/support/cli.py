"""The terminal program in tests: its arguments, and ``cli.main([...])`` on piped input.

``chat`` runs the program with prompt_toolkit's pipe input (the end of the script is
Ctrl-D) and a scripted model; ``run`` runs any other command; ``chat_args`` are the
arguments of ``chat``, for ``main`` here or for the installed program in a terminal
(``tests/support/terminal.py``). ``leave_pending_approval`` saves a conversation stopped
at an approval, as a killed terminal leaves it; ``resume_line`` and ``thread_of`` read
what the program printed on leaving.
"""

from __future__ import annotations

import io
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from cli import Console, Overrides, main
from conversations.assistant import Thread
from conversations.sessions import SessionRegistry
from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.assistants import build_assistant
from tests.support.databases import FIXED_NOW
from tests.support.fake_openai import customer_text
from tests.support.flights import change_call
from tests.support.scripted import ScriptedChatModel, call, say


@dataclass
class Result:
    code: int
    out: str
    err: str


def chat(
    argv: Sequence[str],
    keys: Sequence[str],
    model: ScriptedChatModel | None,
    home: Path | None,
    *,
    raw: str = "",
) -> Result:
    """Run ``travel-assistant [--home HOME] ARGV`` typing ``keys`` (each ended by Enter).

    ``raw`` is typed first, as is (control keys included).
    """
    out, err = io.StringIO(), io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text(raw + "".join(line + "\n" for line in keys))
        pipe.close()  # the end of the script is the end of input (Ctrl-D)
        overrides = Overrides(
            model_factory=(lambda _name: model) if model is not None else None,
            pt_input=pipe,
            pt_output=DummyOutput(),
            console=Console(out=out, err=err),
            clock=fixed_clock(FIXED_NOW),
        )
        prefix = ["--home", str(home)] if home is not None else []
        code = main([*prefix, *argv], overrides)
    return Result(code, out.getvalue(), err.getvalue())


def pasted(text: str) -> str:
    """Return ``text`` as a terminal pastes it (bracketed paste), for ``chat``'s ``keys``.

    The prompt inserts a paste at once; typed key by key, a message of thousands of
    characters takes the prompt tens of seconds (every key is a redraw).
    """
    return f"\x1b[200~{text}\x1b[201~"


def run(argv: Sequence[str]) -> Result:
    """Run a command that reads no input."""
    out, err = io.StringIO(), io.StringIO()
    code = main(
        list(argv), Overrides(console=Console(out=out, err=err), clock=fixed_clock(FIXED_NOW))
    )
    return Result(code, out.getvalue(), err.getvalue())


def chat_args(
    db_path: Path, passenger: str = FIXTURE_PASSENGER_ID, *extra: str, home: Path | None = None
) -> list[str]:
    """Return the arguments of ``chat`` over ``db_path``, then ``extra``.

    With ``home``, ``--home`` comes after the command: a global option may be given there.
    """
    at_home = ["--home", str(home)] if home is not None else []
    return ["chat", "--passenger-id", passenger, *at_home, "--db", str(db_path), *extra]


def resume_line(err: str) -> str:
    """Return the command the program printed to resume the conversation."""
    lines = [line for line in err.splitlines() if "Resume it with: " in line]
    assert len(lines) == 1, err
    return lines[0].split("Resume it with: ", 1)[1]


def customer_messages(model: ScriptedChatModel) -> list[str]:
    """Return the customer's messages in the model's last request, without their times."""
    return [customer_text(str(m.content)) for m in model.received[-1] if m.type == "human"]


def thread_of(err: str) -> str:
    """Return the conversation id in the resume line the program printed."""
    return resume_line(err).split("--thread-id ")[1].split()[0]


def leave_pending_approval(home: Path, db: Database, text: str) -> str:
    """Save a conversation stopped at an approval, as a killed terminal leaves it."""
    home.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(home / "sessions.sqlite", check_same_thread=False)
    saver = SqliteSaver(connection)
    saver.setup()
    thread = Thread(str(uuid.uuid4()), FIXTURE_PASSENGER_ID)
    SessionRegistry(connection).touch(thread.thread_id, thread.passenger_id, FIXED_NOW, text)
    model = ScriptedChatModel(
        script=[
            say("", call("ToFlightBookingAssistant", {"request": "m"})),
            say("", change_call(db)),
        ]
    )
    api = build_assistant(db, model, saver)
    list(api.send(thread, text))
    assert api.pending_actions(thread)
    connection.close()
    return thread.thread_id
