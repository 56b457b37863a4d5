"""The process that dies: approve one write and SIGKILL this process at a chosen moment.

``tests/integration/test_crash_consistency.py`` runs ``run(case)`` in a child process
(``multiprocessing``'s fork server, with the program imported once beforehand, so each
case costs a fork rather than an interpreter start). The child builds the real graph
over the case's travel database, with a scripted model and a checkpointer on the case's
conversation store (``SqliteSaver`` on a file, or ``PostgresSaver`` on a PostgreSQL
database), sends the customer's message, lets the primary assistant hand over to the
specialist, which makes the write call, approves it as the terminal does, and resumes.
A patch applied here, and only here, kills the process with SIGKILL at ``case.point``:

* ``before_commit``: the write ran and its record is flushed, inside its still open
  transaction;
* ``after_commit``: the write's transaction committed; the node has not returned;
* ``after_task_writes``: LangGraph saved the node's answers as pending writes; the
  checkpoint of the step is not saved yet;
* ``after_checkpoint``: the checkpoint holding the node's answer is saved.

The test then resumes the conversation in its own process. A child that reaches the end
without dying exits with ``NOT_KILLED`` and says why on stderr.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

CRASH_POINTS = ("before_commit", "after_commit", "after_task_writes", "after_checkpoint")
# The exit code of a child that was not killed (the crash point was never reached).
NOT_KILLED = 3
# How long the model's reply after the write waits for a background checkpoint write to
# kill the process before the child gives up.
KILL_WAIT_S = 30.0


@dataclass(frozen=True)
class Case:
    """One crash to stage.

    Attributes:
        db_url: The travel database (a SQLite path or a SQLAlchemy URL).
        store: The conversation store: a SQLite file, or a ``postgresql://`` URL.
        thread_id: The conversation.
        passenger_id: The passenger it acts for.
        text: What the customer asks.
        hand_over: The primary assistant's routing call (name, args, id).
        call: The specialist's write call (name, args, id).
        point: Where to die, one of ``CRASH_POINTS``.
        now: The database clock's fixed now.
        register: Also record the conversation in the terminal's session list (the
            ``travel_sessions`` table of the SQLite store), so ``chat --thread-id``
            resumes it.
        log: A file that gets the child's stderr (the test shows it when a case fails).
    """

    db_url: str
    store: str
    thread_id: str
    passenger_id: str
    text: str
    hand_over: dict[str, Any]
    call: dict[str, Any]
    point: str
    now: datetime
    register: bool = False
    log: str = ""


def die() -> None:
    """Kill this process at once: no cleanup, no flush, no atexit, as a power cut would."""
    os.kill(os.getpid(), signal.SIGKILL)


def _answers(value: Any, call_id: str) -> bool:
    """Tell whether a written value holds the answer to ``call_id``."""
    items = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    return any(isinstance(m, ToolMessage) and m.tool_call_id == call_id for m in items)


def _arm(point: str, saver: BaseCheckpointSaver[Any], call_id: str) -> None:
    """Patch the program so that it dies at ``point`` while answering ``call_id``."""
    import db.writes
    import tools.common

    if point == "before_commit":
        run_once = db.writes.run_once

        def run_once_then_die(session: Any, **kwargs: Any) -> dict[str, Any]:
            run_once(session, **kwargs)
            session.flush()
            die()
            raise AssertionError("unreachable")

        setattr(db.writes, "run_once", run_once_then_die)  # noqa: B010 - a patch
    elif point == "after_commit":
        in_transaction = db.writes.run_once_in_transaction  # what tools.common calls

        def commit_then_die(*args: Any, **kwargs: Any) -> dict[str, Any]:
            in_transaction(*args, **kwargs)
            die()
            raise AssertionError("unreachable")

        for module in (db.writes, tools.common):  # wherever the tools look it up
            setattr(module, "run_once_in_transaction", commit_then_die)  # noqa: B010
    elif point == "after_task_writes":
        put_writes = saver.put_writes

        def put_writes_then_die(config: Any, writes: Any, task_id: str, *args: Any) -> None:
            put_writes(config, writes, task_id, *args)
            if any(channel == "messages" and _answers(v, call_id) for channel, v in writes):
                die()

        setattr(saver, "put_writes", put_writes_then_die)  # noqa: B010
    elif point == "after_checkpoint":
        # A checkpoint stores the messages as the writes of the step before it (they are a
        # delta channel), so the first checkpoint saved after the answer's writes is the
        # one that holds the answer.
        put, put_writes = saver.put, saver.put_writes
        answered: list[bool] = []

        def note_answer(config: Any, writes: Any, task_id: str, *args: Any) -> None:
            put_writes(config, writes, task_id, *args)
            if any(channel == "messages" and _answers(v, call_id) for channel, v in writes):
                answered.append(True)

        def put_then_die(config: Any, checkpoint: Any, *args: Any) -> Any:
            saved = put(config, checkpoint, *args)
            if answered:
                die()
            return saved

        setattr(saver, "put_writes", note_answer)  # noqa: B010
        setattr(saver, "put", put_then_die)  # noqa: B010
    else:
        raise ValueError(f"unknown crash point {point!r}; expected one of {CRASH_POINTS}")


@contextmanager
def _store(case: Case) -> Iterator[BaseCheckpointSaver[Any]]:
    """Open the case's conversation store the way the program does."""
    if case.store.startswith("postgresql"):
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(case.store) as saver:
            saver.setup()
            yield saver
        return
    from conversations.sessions import SessionRegistry
    from conversations.store import sqlite_checkpointer

    connection = sqlite3.connect(case.store, check_same_thread=False)
    sqlite_saver = sqlite_checkpointer(connection)  # as the program stores conversations
    if case.register:
        SessionRegistry(connection).touch(case.thread_id, case.passenger_id, case.now, case.text)
    yield sqlite_saver


def _wait_to_be_killed(_messages: list[BaseMessage]) -> AIMessage:
    # The checkpoint is written in the background while the next step (this reply)
    # starts; the write that holds the answer kills the process.
    time.sleep(KILL_WAIT_S)
    raise AssertionError(f"still alive {KILL_WAIT_S:.0f} s after the write's checkpoint")


def run(case: Case) -> None:
    """Stage ``case``: approve its write call and die at ``case.point``."""
    if case.log:
        log = os.open(case.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 2)
        os.close(log)
    from conversations.assistant import Decision, Thread
    from db.clock import fixed_clock
    from db.engine import Database
    from tests.support.assistants import build_assistant
    from tests.support.scripted import ScriptedChatModel

    calls: list[Callable[[list[BaseMessage]], AIMessage] | AIMessage] = [
        AIMessage(content="", tool_calls=[{**case.hand_over, "type": "tool_call"}]),
        AIMessage(content="", tool_calls=[{**case.call, "type": "tool_call"}]),
        _wait_to_be_killed,
    ]
    model = ScriptedChatModel(script=list(calls))
    database = Database.from_url(case.db_url, clock=fixed_clock(case.now))
    with _store(case) as saver:
        assistant = build_assistant(database, model, saver, retry_policy=None)
        thread = Thread(case.thread_id, case.passenger_id)
        list(assistant.send(thread, case.text))
        pending = assistant.pending_actions(thread)
        if [a.tool_call_id for a in pending] != [case.call["id"]]:
            sys.stderr.write(f"expected one pending action {case.call['id']}, got {pending}\n")
            sys.exit(NOT_KILLED)
        shown = tuple(assistant.preview(thread, pending[0]).lines)
        _arm(case.point, saver, case.call["id"])
        list(assistant.resolve(thread, {case.call["id"]: Decision(True, None, shown)}))
        answers = [m for m in assistant.messages(thread) if isinstance(m, ToolMessage)]
        sys.stderr.write(f"not killed at {case.point}; the answers: {answers}\n")
    sys.exit(NOT_KILLED)
