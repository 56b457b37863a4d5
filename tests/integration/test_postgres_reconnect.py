"""PostgreSQL connections the server cut are replaced: the next request works as usual.

The program's stores are opened on scratch PostgreSQL databases as ``chat`` and ``serve``
open them (``Database.from_url`` for the travel data, ``ConversationStore.open`` for the
conversations), used once, and then every connection of their databases is cut on the
server (``pg_terminate_backend``, as a restart, a fail-over or a proxy's idle timeout
would). What comes next must work at the first attempt: a tool's read of the travel
database, the session registry, the audit log, the checkpoints and the turn locks (the
store's connection pool checks a connection before handing it out), the desk (its
engine pings first) and its listener (it listens again on a new connection), and a
whole turn through ``Conversations``, with a scripted model.

The travel database is a copy of a template built once per module (the run's own with
``--engine postgresql``). Skipped, saying why, when the PostgreSQL server cannot be
reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from conversations.assistant import Thread
from conversations.desk import CHANNEL
from conversations.protocol import Conversations
from conversations.records import AssistantLine, TurnEnd
from conversations.store import ConversationStore
from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_PASSENGER_ID
from db.passengers import passenger_exists, passenger_summary
from terminal.live import Watch
from tests.support import postgres
from tests.support.assistants import build_assistant
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.tools import payload, run_one
from tools.flights import make_flight_tools

THREAD = Thread("t-reconnect", FIXTURE_PASSENGER_ID)

CUT = (
    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE datname = %s AND pid <> pg_backend_pid()"
)
GONE_WITHIN_SECONDS = 10.0


@pytest.fixture
def travel_url(postgres_template: str) -> Iterator[str]:
    """The URL of a private copy of the travel database (``--db``)."""
    with postgres.scratch_database(template=postgres_template) as url:
        yield url


@pytest.fixture
def conversations_url(postgres_template: str) -> Iterator[str]:
    """The URL of an empty conversations database (``--conversations``)."""
    with postgres.scratch_database() as url:
        yield url


@pytest.fixture
def travel(travel_url: str) -> Iterator[Database]:
    """The travel database as the commands open it, its clock at ``FIXED_NOW``."""
    database = Database.from_url(travel_url, clock=fixed_clock(FIXED_NOW))
    yield database
    database.dispose()


@pytest.fixture
def store(conversations_url: str) -> Iterator[ConversationStore]:
    """The conversations' store as the commands open it."""
    with ConversationStore.open(conversations_url) as opened:
        yield opened


def cut_connections(url: str) -> int:
    """Terminate every connection to the database of ``url``; return how many there were.

    Returns once the server has ended them all, so that what the test does next meets
    connections that are gone, not ones still on their way out.
    """
    import psycopg

    name = postgres.database_name(url)
    with psycopg.connect(postgres._libpq(postgres.server_url()), autocommit=True) as admin:
        pids = [row[0] for row in admin.execute(CUT, (name,)).fetchall()]
        deadline = time.monotonic() + GONE_WITHIN_SECONDS
        while admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, f"connections {pids} of {name} still there"
            time.sleep(0.05)
    return len(pids)


def wait_until_listening(url: str) -> None:
    """Return once a connection to the database of ``url`` listens for the desk's changes."""
    import psycopg

    name = postgres.database_name(url)
    deadline = time.monotonic() + GONE_WITHIN_SECONDS
    with psycopg.connect(postgres._libpq(postgres.server_url()), autocommit=True) as admin:
        while admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND query = %s",
            (name, f"LISTEN {CHANNEL}"),
        ).fetchone() == (0,):
            assert time.monotonic() < deadline, f"nothing listens on {name}"
            time.sleep(0.05)


# --- the travel database ----------------------------------------------------------------


def test_travel_reads_work_at_once_after_the_connections_were_cut(
    travel: Database, travel_url: str
) -> None:
    tools = list(make_flight_tools(travel).safe)
    with travel.session() as session:
        assert passenger_exists(session, FIXTURE_PASSENGER_ID)
    assert cut_connections(travel_url) >= 1

    # A tool's read, the first request after the cut: the engine replaces the dead
    # connection it takes from its pool instead of failing with it.
    data = payload(run_one(tools, "fetch_user_flight_information", {}, FIXTURE_PASSENGER_ID))
    assert data["passenger_id"] == FIXTURE_PASSENGER_ID
    assert cut_connections(travel_url) >= 1
    with travel.session() as session:
        assert passenger_exists(session, FIXTURE_PASSENGER_ID)
    assert cut_connections(travel_url) >= 1
    with travel.rows() as connection:  # the read that starts every turn
        assert passenger_summary(connection, FIXTURE_PASSENGER_ID, travel.clock())["tickets"]


# --- the conversations' store -----------------------------------------------------------


def _checkpoint(store: ConversationStore) -> Any:
    config: Any = {"configurable": {"thread_id": THREAD.thread_id, "checkpoint_ns": ""}}
    return store.saver.get_tuple(config)


def test_registry_audit_checkpoints_and_turn_locks_work_after_the_connections_were_cut(
    store: ConversationStore, conversations_url: str
) -> None:
    store.registry.touch(THREAD.thread_id, THREAD.passenger_id, FIXED_NOW, "first")
    assert store.audit.record("Ana", "conversation", FIXED_NOW, conversation_id="t-1")
    store.acquire(THREAD.thread_id).release()
    assert _checkpoint(store) is None
    assert cut_connections(conversations_url) >= 1

    # The first call takes the pool's connection from before the cut: checked, replaced.
    record = store.registry.get(THREAD.thread_id)
    assert record is not None and record.title == "first"
    assert [r.thread_id for r in store.registry.list(THREAD.passenger_id)] == [THREAD.thread_id]
    assert store.audit.record("Ana", "conversation", FIXED_NOW, conversation_id="t-2")
    assert [e.conversation_id for e in store.audit.entries(supervisor="Ana")] == ["t-2", "t-1"]
    assert cut_connections(conversations_url) >= 1
    lease = store.acquire(THREAD.thread_id)  # a new lock connection, a claim from the pool
    try:
        assert store.busy(THREAD.thread_id)
    finally:
        lease.release()
    assert cut_connections(conversations_url) >= 1
    assert _checkpoint(store) is None


def test_the_desk_works_after_the_connections_were_cut(
    store: ConversationStore, conversations_url: str
) -> None:
    store.desk.request(
        "t-1", THREAD.passenger_id, by="customer", reason="a person", summary="", now=FIXED_NOW
    )
    assert [h.thread_id for h in store.desk.queue()] == ["t-1"]
    assert cut_connections(conversations_url) >= 1

    assert [h.thread_id for h in store.desk.queue()] == ["t-1"]
    assert store.desk.take("t-1", "Ana", FIXED_NOW).agent == "Ana"
    assert [h.thread_id for h in store.desk.held_by("Ana")] == ["t-1"]


def test_the_desk_listener_listens_again_after_its_connection_was_cut(
    store: ConversationStore, conversations_url: str
) -> None:
    listener = store.desk.listener()
    try:
        assert listener.wait(0.2) is False  # nothing happened
        assert cut_connections(conversations_url) >= 1
        # The cut is noticed at the next wait: a new connection listens, and the answer
        # is "look now", since a change may have come while nobody listened.
        assert listener.wait(5.0) is True
        while listener.wait(0.05):
            pass
        store.desk.request(
            "t-1", THREAD.passenger_id, by="customer", reason="why", summary="", now=FIXED_NOW
        )
        assert listener.wait(10.0)  # woken by the change, on the new connection
    finally:
        listener.close()


def test_a_chat_watching_the_desk_goes_on_watching_after_the_connections_were_cut(
    store: ConversationStore, conversations_url: str
) -> None:
    # What ``chat`` and ``desk`` run above the prompt (terminal.live.Watch): it sleeps on
    # the desk's listener and looks when woken. It must see a change made after the cut
    # sooner than its fallback look (LISTEN_FALLBACK_SECONDS) would.
    seen = threading.Event()
    looks = threading.Event()

    def look() -> bool:
        looks.set()
        if store.desk.current("t-1") is not None:
            seen.set()
        return True

    watch = Watch(look, store.desk)
    try:
        assert store.desk.queue() == []  # the desk's engine has a connection to lose too
        wait_until_listening(conversations_url)
        assert cut_connections(conversations_url) >= 1
        assert looks.wait(5.0), "the watch did not look after its connection was cut"
        store.desk.request(
            "t-1", THREAD.passenger_id, by="customer", reason="why", summary="", now=FIXED_NOW
        )
        assert seen.wait(5.0), "the watch did not see the change made after the cut"
        assert watch.watching
    finally:
        watch.stop()


# --- a whole turn -------------------------------------------------------------------------


def test_a_turn_after_the_connections_were_cut_works_as_usual(
    travel: Database,
    travel_url: str,
    store: ConversationStore,
    conversations_url: str,
) -> None:
    tool_results: list[str] = []

    def answer_from_the_tool(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        assert isinstance(last, ToolMessage)
        tool_results.append(str(last.content))
        return say(f"You are on {FIXTURE_FLIGHT_NO}.")

    model = ScriptedChatModel(
        script=[
            say("", call("fetch_user_flight_information")),
            answer_from_the_tool,
            say("", call("fetch_user_flight_information")),
            answer_from_the_tool,
        ]
    )
    # As ``chat`` builds it (commands.chat._conversations), over the two opened stores.
    conversations = Conversations(
        build_assistant(travel, model=model, checkpointer=store.saver),
        store.registry,
        store.locks,
        store.desk,
    )
    assert conversations.check_passenger(FIXTURE_PASSENGER_ID)
    conversation = conversations.get(THREAD)
    with conversation.claim() as turn:
        first = list(turn.send("Which flight am I on?"))
    assert isinstance(first[-1], TurnEnd), first
    assert cut_connections(travel_url) >= 1
    assert cut_connections(conversations_url) >= 1

    with conversation.claim() as turn:
        outcomes = list(turn.send("And which one again?"))
    assert isinstance(outcomes[-1], TurnEnd), outcomes
    lines = [o.text for o in outcomes if isinstance(o, AssistantLine)]
    assert lines == [f"You are on {FIXTURE_FLIGHT_NO}."]
    assert len(tool_results) == 2 and FIXTURE_FLIGHT_NO in tool_results[1]
    texts = [getattr(r, "text", None) for r in conversations.get(THREAD).history()]
    assert texts.count("And which one again?") == 1
