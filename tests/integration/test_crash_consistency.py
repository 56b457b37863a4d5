"""A crash at any point of an approved write leaves one truth (issue 15).

For every write tool (each sensitive tool of the crew) and each moment a process can die
while it carries out an approved call, a child process (``tests.support.crash_child``)
drives the real graph with a scripted model up to the approval, approves, and SIGKILLs
itself at that moment. The conversation is then resumed in this process, over the same
files, the way the terminal resumes it, and the customer answers yes or no if asked:

* ``before_commit`` (the write's transaction is open): nothing was written, the approval
  is asked again, and yes writes once while no writes nothing;
* ``after_commit`` (committed, the node had not returned), ``after_task_writes`` (the
  node's answer saved apart, the step not) and ``after_checkpoint``: the write is done;
  it is never offered for approval again, and the customer and the model are told it was
  done, with the stored result, whatever answer comes.

In every case the database and the conversation agree: the call has exactly one answer,
it says done exactly when the write's record exists and then carries the stored result,
the money moved at most once (the ``payments`` table), and the conversation goes on.

Every tool meets the three moments of the issue; ``after_task_writes`` (LangGraph's own,
the same for every tool) runs for one tool of each domain. Where the answer decides
(``before_commit``), yes and no each resume a copy of the same crash; elsewhere the
answer alternates over the matrix. Beside the matrix: a new message instead of an
answer, the terminal itself (``travel-assistant chat --thread-id``), and conversations
saved by ``PostgresSaver``. With ``--engine postgresql`` the travel database is on
PostgreSQL too. The default run takes a representative part of each matrix (every moment,
every domain, both answers); the rest is marked ``exhaustive`` and runs in CI's stage of
its own (``pytest -m exhaustive``, see docs/testing.md). A case costs about a second or two:
the children fork from a server that imported the program once.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from assistants.approvals import describe_action, facts_of
from assistants.specialists import build_crew
from conversations.assistant import Decision, MessageEvent, Thread, TravelAssistant, TurnEvent
from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    BUSINESS_TICKET_NO,
    FIXTURE_CAR_RENTAL_BOOKING_ID,
    FIXTURE_EXCURSION_BOOKING_ID,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_LOCATION,
    FIXTURE_PASSENGER_ID,
    FIXTURE_TICKET_NO,
)
from db.models import (
    CarRental,
    ExcursionBooking,
    Hotel,
    Payment,
    ToolCallRecord,
    TripRecommendation,
)
from db.writes import key_part
from tests.support import crash_child, exhaustive, forkserver, postgres
from tests.support.assistants import build_assistant
from tests.support.cli import chat
from tests.support.conversation_stores import postgres_unreachable
from tests.support.crash_child import CRASH_POINTS, NOT_KILLED, Case
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, say
from tests.support.tools import WRITE_TABLES, lx0112

CALL_ID = "call-write-1"
REPLY = "Here is where things stand."
FOLLOW_UP = "Thanks. Anything else I should know?"
ANSWERS = ("yes", "no")
# How long a child may take to reach its crash point.
CHILD_TIMEOUT_S = 120.0


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


# The write calls -------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One write tool's call, valid for its passenger in the test database, moving money."""

    tool: str
    passenger_id: str
    args: dict[str, Any]
    hand_over: dict[str, Any]


def _first_id(database: Database, column: Any, *where: Any) -> int:
    with database.session() as session:
        value = session.scalar(select(column).where(*where).order_by(column).limit(1))
    assert value is not None
    return int(value)


def _hotels(request: str, start: int = 20) -> dict[str, Any]:
    return {
        "name": "ToHotelBookingAssistant",
        "args": {
            "location": FIXTURE_LOCATION,
            "checkin_date": day(start),
            "checkout_date": day(start + 2),
            "request": request,
        },
    }


def _cars(request: str) -> dict[str, Any]:
    return {
        "name": "ToBookCarRental",
        "args": {
            "location": FIXTURE_LOCATION,
            "start_date": day(20),
            "end_date": day(22),
            "request": request,
        },
    }


def _excursions(request: str) -> dict[str, Any]:
    return {"name": "ToBookExcursion", "args": {"location": FIXTURE_LOCATION, "request": request}}


def _flights(request: str) -> dict[str, Any]:
    return {"name": "ToFlightBookingAssistant", "args": {"request": request}}


def _cancellable_excursion(database: Database) -> tuple[str, int]:
    """Return a passenger and a confirmed excursion of theirs, far enough ahead to refund."""
    with database.session() as session:
        booking = session.scalars(
            select(ExcursionBooking)
            .where(
                ExcursionBooking.status == "confirmed",
                ExcursionBooking.date >= (FIXED_NOW + timedelta(days=10)).date(),
            )
            .order_by(ExcursionBooking.id)
            .limit(1)
        ).one()
        return booking.passenger_id, booking.id


WRITES: dict[str, Callable[[Database], Write]] = {
    "update_ticket_to_new_flight": lambda d: Write(
        "update_ticket_to_new_flight",
        FIXTURE_PASSENGER_ID,
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": lx0112(d, 1).flight_id},
        _flights("Move me to tomorrow's flight."),
    ),
    "cancel_ticket": lambda d: Write(
        "cancel_ticket",
        BUSINESS_PASSENGER_ID,
        {"ticket_no": BUSINESS_TICKET_NO},
        _flights("Cancel my ticket."),
    ),
    "book_car_rental": lambda d: Write(
        "book_car_rental",
        FIXTURE_PASSENGER_ID,
        {
            "rental_id": _first_id(d, CarRental.id, CarRental.location == FIXTURE_LOCATION),
            "start_date": day(20),
            "end_date": day(22),
        },
        _cars("Any car."),
    ),
    # Arguments left out are filled with the tool's defaults before the digest is compared.
    "update_car_rental": lambda d: Write(
        "update_car_rental",
        FIXTURE_PASSENGER_ID,
        {"booking_id": FIXTURE_CAR_RENTAL_BOOKING_ID, "end_date": day(5)},
        _cars("Keep my car a day longer."),
    ),
    "cancel_car_rental": lambda d: Write(
        "cancel_car_rental",
        FIXTURE_PASSENGER_ID,
        {"booking_id": FIXTURE_CAR_RENTAL_BOOKING_ID},
        _cars("Cancel my car."),
    ),
    "book_hotel": lambda d: Write(
        "book_hotel",
        FIXTURE_PASSENGER_ID,
        {
            "hotel_id": _first_id(d, Hotel.id, Hotel.location == FIXTURE_LOCATION),
            "checkin_date": day(20),
            "checkout_date": day(22),
        },
        _hotels("Any hotel."),
    ),
    "update_hotel": lambda d: Write(
        "update_hotel",
        FIXTURE_PASSENGER_ID,
        {"booking_id": FIXTURE_HOTEL_BOOKING_ID, "checkout_date": day(5)},
        _hotels("One more night, please.", start=1),
    ),
    "cancel_hotel": lambda d: Write(
        "cancel_hotel",
        FIXTURE_PASSENGER_ID,
        {"booking_id": FIXTURE_HOTEL_BOOKING_ID},
        _hotels("Cancel my hotel.", start=1),
    ),
    "book_excursion": lambda d: Write(
        "book_excursion",
        FIXTURE_PASSENGER_ID,
        {
            "recommendation_id": _first_id(
                d, TripRecommendation.id, TripRecommendation.location == FIXTURE_LOCATION
            ),
            "date": day(20),
        },
        _excursions("A city walk."),
    ),
    "update_excursion": lambda d: Write(
        "update_excursion",
        FIXTURE_PASSENGER_ID,
        {"booking_id": FIXTURE_EXCURSION_BOOKING_ID, "date": day(6)},
        _excursions("Move my excursion to later in the week."),
    ),
    "cancel_excursion": lambda d: Write(
        "cancel_excursion",
        *((lambda found: (found[0], {"booking_id": found[1]}))(_cancellable_excursion(d))),
        _excursions("Cancel my excursion."),
    ),
}


def test_every_write_tool_is_covered(template_db_path: Path) -> None:
    database = Database.from_url(str(template_db_path), clock=fixed_clock(FIXED_NOW))
    try:
        assert set(WRITES) == set(build_crew(database).sensitive_names)
    finally:
        database.dispose()


# Staging a crash -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def children() -> Any:
    """Start crash children from a fork server that imported the program once."""
    return forkserver.context()  # shared with test_races.py: one server per process


@dataclass(frozen=True)
class Staged:
    """A conversation whose process was killed while it carried out an approved write."""

    db_url: str
    store: str
    thread: Thread
    write: Write
    point: str
    shown: tuple[str, ...]
    payments: int
    counts: dict[str, int]


def _counts(database: Database) -> dict[str, int]:
    with database.session() as session:
        return {
            table: int(session.scalar(text(f"SELECT count(*) FROM {table}")) or 0)
            for table in WRITE_TABLES
        }


def _payments(database: Database, passenger_id: str) -> int:
    with database.session() as session:
        count = session.scalar(
            select(func.count()).select_from(Payment).where(Payment.passenger_id == passenger_id)
        )
    return int(count or 0)


def stage(
    children: Any,
    tool: str,
    point: str,
    db_url: str,
    store: str,
    log: Path,
    *,
    register: bool = False,
) -> Staged:
    """Run a child that approves ``tool``'s call and dies at ``point``; check it was killed."""
    database = Database.from_url(db_url, clock=fixed_clock(FIXED_NOW))
    try:
        write = WRITES[tool](database)
        crew = build_crew(database)
        preview = describe_action(database, write.passenger_id, tool, write.args, crew.previews)
        assert preview.error is None, preview.error
        assert preview.lines and "EUR 0.00" not in preview.lines[-1], preview.lines  # money moves
        payments = _payments(database, write.passenger_id)
        counts = _counts(database)
    finally:
        database.dispose()
    thread = Thread(f"crash-{uuid.uuid4().hex[:10]}", write.passenger_id)
    case = Case(
        db_url=db_url,
        store=store,
        thread_id=thread.thread_id,
        passenger_id=thread.passenger_id,
        text=str(write.hand_over["args"]["request"]),
        hand_over={**write.hand_over, "id": "call-hand-over-1"},
        call={"name": tool, "args": write.args, "id": CALL_ID},
        point=point,
        now=FIXED_NOW,
        register=register,
        log=str(log),
    )
    child = children.Process(target=crash_child.run, args=(case,))
    child.start()
    child.join(CHILD_TIMEOUT_S)
    if child.is_alive():
        child.kill()
        child.join()
    said = log.read_text() if log.exists() else ""
    assert child.exitcode != NOT_KILLED, f"the crash point was never reached:\n{said}"
    assert child.exitcode == -signal.SIGKILL, f"exit code {child.exitcode}:\n{said}"
    return Staged(db_url, store, thread, write, point, tuple(preview.lines), payments, counts)


def copy_sqlite(staged: Staged, folder: Path) -> Staged:
    """Return a copy of a staged crash whose travel database and store are SQLite files."""
    folder.mkdir()
    db_copy, store_copy = folder / "travel.sqlite", folder / "sessions.sqlite"
    for source, target in ((staged.db_url, db_copy), (staged.store, store_copy)):
        # A killed writer may leave a journal beside its file; it belongs to the copy too.
        for suffix in ("", "-journal", "-wal", "-shm"):
            if Path(source + suffix).exists():
                shutil.copyfile(source + suffix, str(target) + suffix)
    return replace(staged, db_url=str(db_copy), store=str(store_copy))


# Resuming, as the terminal does ----------------------------------------------------------


@contextmanager
def opened(staged: Staged) -> Iterator[tuple[TravelAssistant, ScriptedChatModel]]:
    """Open the staged conversation in this process with a scripted model."""
    model = ScriptedChatModel(script=[say(REPLY), say("You are welcome.")])
    database = Database.from_url(staged.db_url, clock=fixed_clock(FIXED_NOW))
    with ExitStack() as stack:
        stack.callback(database.dispose)
        saver = stack.enter_context(_saver(staged.store))
        yield build_assistant(database, model, saver, retry_policy=None), model


def _saver(store: str) -> AbstractContextManager[BaseCheckpointSaver[Any]]:
    if store.startswith("postgresql"):
        from langgraph.checkpoint.postgres import PostgresSaver

        return PostgresSaver.from_conn_string(store)

    @contextmanager
    def sqlite_saver() -> Iterator[BaseCheckpointSaver[Any]]:
        from conversations.store import sqlite_checkpointer

        connection = sqlite3.connect(store, check_same_thread=False)
        try:
            yield sqlite_checkpointer(connection)  # reads what the terminal stored
        finally:
            connection.close()

    return sqlite_saver()


@dataclass
class Resumed:
    """What the customer was asked on resuming, and what the run reported."""

    asked: list[str]
    events: list[TurnEvent]


def resume(assistant: TravelAssistant, thread: Thread, answer: str) -> Resumed:
    """Resume like ``travel-assistant chat --thread-id``, answering every approval asked.

    The write call gets ``answer`` even when it is not asked, as a client that decided
    before the crash would send it: a call already done must stay done.
    """
    resumed = Resumed([], [])
    if assistant.interrupted(thread):
        assistant.cancel_turn(thread)
    for _ in range(3):
        pending = assistant.pending_actions(thread)
        if not pending and not assistant.recovered_actions(thread):
            return resumed
        resumed.asked += [a.tool_call_id for a in pending]
        yes = answer == "yes"
        decisions = {CALL_ID: Decision(yes, None if yes else "I changed my mind.")}
        resumed.events += list(assistant.resolve(thread, decisions))
    raise AssertionError("the conversation still waits after three resumes")


# The one truth ---------------------------------------------------------------------------


def check_one_truth(
    staged: Staged, assistant: TravelAssistant, model: ScriptedChatModel
) -> ToolMessage:
    """Check that database and conversation agree on the write; return its answer."""
    messages = assistant.messages(staged.thread)
    _every_call_answered_once(messages)
    (answer,) = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == CALL_ID]
    facts = facts_of(answer)
    database = assistant.db
    with database.session() as session:
        record = session.get(ToolCallRecord, (key_part(staged.thread.thread_id), key_part(CALL_ID)))
        stored = json.loads(record.result_json) if record is not None else None
    moved = _payments(database, staged.write.passenger_id) - staged.payments
    if stored is None:
        assert not facts.ran and answer.status == "error", answer
        assert moved == 0
        assert _counts(database) == staged.counts
        # The call would still do exactly what the customer was shown before the crash.
        assert _preview(assistant, staged) == staged.shown
    else:
        assert facts.ran and facts.approved and answer.status == "success", answer
        assert json.loads(str(answer.content)) == stored
        assert moved == 1, f"money moved {moved} times"
    # Whatever the model was sent after the resume tells it the same.
    for request in model.received:
        told = [m for m in request if isinstance(m, ToolMessage) and m.tool_call_id == CALL_ID]
        assert [str(m.content) for m in told] == [str(answer.content)]
    assert assistant.pending_actions(staged.thread) == []
    assert assistant.recovered_actions(staged.thread) == []
    assert not assistant.interrupted(staged.thread)
    return answer


def _preview(assistant: TravelAssistant, staged: Staged) -> tuple[str, ...]:
    preview = describe_action(
        assistant.db,
        staged.write.passenger_id,
        staged.write.tool,
        staged.write.args,
        assistant.crew.previews,
    )
    assert preview.error is None, preview.error
    return tuple(preview.lines)


def _every_call_answered_once(messages: list[AnyMessage]) -> None:
    calls = [str(c["id"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(answered) == sorted(calls), (calls, answered)


def check_goes_on(staged: Staged, assistant: TravelAssistant, answer: ToolMessage) -> None:
    """The conversation takes another message, keeps the write's answer, writes nothing."""
    payments = _payments(assistant.db, staged.write.passenger_id)
    counts = _counts(assistant.db)
    list(assistant.send(staged.thread, FOLLOW_UP))
    messages = assistant.messages(staged.thread)
    _every_call_answered_once(messages)
    (kept,) = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == CALL_ID]
    assert (kept.content, kept.status, facts_of(kept)) == (
        answer.content,
        answer.status,
        facts_of(answer),
    )
    assert _payments(assistant.db, staged.write.passenger_id) == payments
    assert _counts(assistant.db) == counts


def _recovered_events(events: list[TurnEvent]) -> list[ToolMessage]:
    """Return the answers reported as recovered (the terminal says "already done")."""
    return [
        e.message
        for e in events
        if isinstance(e, MessageEvent)
        and isinstance(e.message, ToolMessage)
        and facts_of(e.message).recovered
    ]


def check_outcome(staged: Staged, answer: str) -> None:
    """Resume a staged crash with ``answer`` and check the one truth."""
    with opened(staged) as (assistant, model):
        resumed = resume(assistant, staged.thread, answer)
        done = check_one_truth(staged, assistant, model)
        facts = facts_of(done)
        if staged.point == "before_commit":
            # Nothing was written: the approval is asked again, and the answer decides.
            assert resumed.asked == [CALL_ID]
            assert facts.ran is (answer == "yes")
            assert not facts.recovered
            if answer == "no":
                assert facts.declined
        else:
            # The write is done: never asked again, reported as done whatever the answer.
            assert resumed.asked == []
            assert facts.ran
        if staged.point == "after_commit":
            # The answer was lost with the process: it comes from the stored record, and
            # the run reports it, so the terminal says it was already done.
            assert facts.recovered
            assert [m.tool_call_id for m in _recovered_events(resumed.events)] == [CALL_ID]
            assert len(model.received) == 1  # the assistant goes on from the stored result
        check_goes_on(staged, assistant, done)


def _alternate(tool: str, point: str) -> str:
    """Return yes or no, so that every tool and every point meets both over the matrix."""
    return ANSWERS[(sorted(WRITES).index(tool) + CRASH_POINTS.index(point)) % 2]


# Every tool at the three moments of the issue; the fourth moment (the node's answer saved
# apart, its step not) is LangGraph's, the same for every tool: one tool of each domain.
MATRIX = [
    *(
        (tool, point)
        for tool in sorted(WRITES)
        for point in ("before_commit", "after_commit", "after_checkpoint")
    ),
    *(
        (tool, "after_task_writes")
        for tool in ("book_hotel", "cancel_car_rental", "update_excursion", "cancel_ticket")
    ),
]


# The default run takes one case per moment, each of another domain and kind of write, with
# both answers among them; the rest of the matrix is exhaustive (tests/support/exhaustive.py).
REPRESENTATIVE = {
    ("book_hotel", "before_commit"),  # yes and no, each on a copy of the crash
    ("cancel_ticket", "after_commit"),  # answered no
    ("update_excursion", "after_task_writes"),  # answered yes
    ("update_car_rental", "after_checkpoint"),  # answered yes
}


@pytest.mark.parametrize(("tool", "point"), exhaustive.params(MATRIX, REPRESENTATIVE))
def test_a_crash_leaves_one_truth(
    children: Any, tool: str, point: str, db_url: str, tmp_path: Path, engine_name: str
) -> None:
    store = str(tmp_path / "sessions.sqlite")
    staged = stage(children, tool, point, db_url, store, tmp_path / "child.log")
    if point == "before_commit" and engine_name == "sqlite":
        # Nothing was written, so the answer decides: both, each on a copy of the files.
        for answer in ANSWERS:
            check_outcome(copy_sqlite(staged, tmp_path / answer), answer)
    else:
        # The answer only matters when the customer is asked: one per case, alternating.
        check_outcome(staged, _alternate(tool, point))


@pytest.mark.parametrize(
    "point", exhaustive.params(CRASH_POINTS, {"before_commit", "after_commit"})
)
def test_a_new_message_after_a_crash_keeps_a_done_write_done(
    children: Any, point: str, db_path: Path, tmp_path: Path
) -> None:
    # The customer writes instead of resuming the approval (as the web chat allows): a
    # write that committed stays done in the conversation; one that did not is not run.
    staged = stage(
        children, "book_hotel", point, str(db_path), str(tmp_path / "s.sqlite"), tmp_path / "log"
    )
    with opened(staged) as (assistant, model):
        if assistant.interrupted(staged.thread):
            assistant.cancel_turn(staged.thread)
        events = list(assistant.send(staged.thread, FOLLOW_UP))
        answer = check_one_truth(staged, assistant, model)
        facts = facts_of(answer)
        assert facts.ran is (point != "before_commit")
        if point == "before_commit":
            assert facts.not_run == "superseded"
        if point == "after_commit":
            assert facts.recovered
            assert [m.tool_call_id for m in _recovered_events(events)] == [CALL_ID]


# The terminal ----------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_the_terminal_reports_a_write_done_before_the_crash(
    children: Any, point: str, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAVEL_ASSISTANT_CONVERSATIONS", raising=False)
    home = tmp_path / "terminal-home"
    home.mkdir()
    staged = stage(
        children,
        "book_hotel",
        point,
        str(db_path),
        str(home / "sessions.sqlite"),
        tmp_path / "child.log",
        register=True,
    )
    model = ScriptedChatModel(script=[say(REPLY)])
    argv = [
        "chat",
        "--passenger-id",
        staged.thread.passenger_id,
        "--db",
        str(db_path),
        "--thread-id",
        staged.thread.thread_id,
    ]
    result = chat(argv, ["y"] if point == "before_commit" else [], model, home)
    assert result.code == 0, result.err
    with opened(staged) as (assistant, _):
        answer = check_one_truth(staged, assistant, ScriptedChatModel())
    assert REPLY in result.out
    if point == "before_commit":
        assert "Approval needed: Book hotel" in result.out  # asked again: nothing was done
        assert "✓ Book hotel: done." in result.err
        assert "already done" not in result.err
    else:
        assert "Approval needed" not in result.out  # never asked again
        summary = json.loads(str(answer.content))["summary"]
        assert (
            f"✓ Book hotel: this was already done before the interruption. {summary}"
            in " ".join(result.err.split())
        )


# Conversations on PostgreSQL -------------------------------------------------------------


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def postgres_store() -> Iterator[str]:
    """A scratch PostgreSQL database for the checkpoints, shared by the module's cases."""
    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(reason)
    from langgraph.checkpoint.postgres import PostgresSaver

    with postgres.scratch_database() as url:
        store = _libpq(url)
        with PostgresSaver.from_conn_string(store) as saver:
            saver.setup()
        yield store


@pytest.mark.parametrize(
    ("tool", "point", "answer"),
    exhaustive.params(
        [
            ("book_hotel", "before_commit", "yes"),
            ("cancel_car_rental", "before_commit", "no"),
            ("update_ticket_to_new_flight", "after_commit", "no"),
            ("book_excursion", "after_commit", "yes"),
            ("cancel_ticket", "after_task_writes", "no"),
            ("update_hotel", "after_checkpoint", "yes"),
        ],
        {("cancel_car_rental", "before_commit", "no"), ("update_hotel", "after_checkpoint", "yes")},
    ),
)
def test_a_crash_leaves_one_truth_with_conversations_on_postgresql(
    children: Any,
    postgres_store: str,
    tool: str,
    point: str,
    answer: str,
    db_url: str,
    tmp_path: Path,
) -> None:
    staged = stage(children, tool, point, db_url, postgres_store, tmp_path / "child.log")
    check_outcome(staged, answer)
