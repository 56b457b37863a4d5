"""The session registry and the audit log on both engines, and the homes made before.

One implementation of each serves SQLite and PostgreSQL (``conversations.sessions``,
``conversations.audit``). A new store gets the tables every existing home has (the
columns, SQLite's text timestamps, PostgreSQL's ``TIMESTAMPTZ`` and each engine's
indexes); a home whose tables were made by the earlier ``sqlite3`` and ``psycopg`` code,
rows included, is read and written as before; both may be used from many threads at
once. The PostgreSQL cases skip, saying why, when the server cannot be reached.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from conversations.sessions import SessionRecord, SessionRegistry
from conversations.store import ConversationStore
from tests.support import postgres
from tests.support.conversation_stores import scratch_conversations
from tests.support.databases import FIXED_NOW

# The tables as the code before SQLAlchemy made them, on each engine: what existing homes
# have (copied from conversations/sessions.py and conversations/audit.py of that time).
OLD_SQLITE = """
CREATE TABLE IF NOT EXISTS travel_sessions (
    thread_id TEXT PRIMARY KEY,
    passenger_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ix_travel_sessions_updated ON travel_sessions (updated_at);
CREATE TABLE IF NOT EXISTS travel_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    supervisor TEXT NOT NULL,
    looked_at TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    passenger_id TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ix_travel_audit_who ON travel_audit
    (supervisor, looked_at, conversation_id, at);
CREATE INDEX IF NOT EXISTS ix_travel_audit_at ON travel_audit (at);
"""
OLD_POSTGRES = (
    """CREATE TABLE IF NOT EXISTS travel_sessions (
    thread_id TEXT PRIMARY KEY,
    passenger_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    title TEXT NOT NULL DEFAULT ''
)""",
    "CREATE INDEX IF NOT EXISTS ix_travel_sessions_passenger_updated "
    "ON travel_sessions (passenger_id, updated_at DESC)",
    "CREATE INDEX IF NOT EXISTS ix_travel_sessions_updated ON travel_sessions (updated_at DESC)",
    """CREATE TABLE IF NOT EXISTS travel_audit (
    id BIGSERIAL PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL,
    supervisor TEXT NOT NULL,
    looked_at TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    passenger_id TEXT NOT NULL DEFAULT ''
)""",
    "CREATE INDEX IF NOT EXISTS ix_travel_audit_who ON travel_audit "
    "(supervisor, looked_at, conversation_id, at)",
    "CREATE INDEX IF NOT EXISTS ix_travel_audit_at ON travel_audit (at DESC)",
)
TABLES = ("travel_sessions", "travel_audit")
# A session zone far from UTC: a moment read or compared in it shows as a failure.
FAR_ZONE = "America/New_York"


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def where(engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty conversation store on ``engine``; PostgreSQL's sessions far from UTC."""
    monkeypatch.setenv("PGTZ", FAR_ZONE)
    with scratch_conversations(engine, tmp_path) as found:
        yield found


@contextmanager
def driver(where: str) -> Iterator[Any]:
    """Yield a plain ``sqlite3`` or ``psycopg`` connection (autocommit) to ``where``."""
    if where.startswith("postgresql"):
        import psycopg

        with psycopg.connect(postgres._libpq(where), autocommit=True) as server:
            yield server
        return
    Path(where).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(where, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def make_old_tables(connection: Any, *, schema: str | None = None) -> None:
    """Create the tables as the earlier code did (on PostgreSQL, in ``schema`` if given)."""
    if isinstance(connection, sqlite3.Connection):
        connection.executescript(OLD_SQLITE)
        return
    if schema is not None:
        connection.execute(f"CREATE SCHEMA {schema}")
        connection.execute(f"SET search_path TO {schema}")
    for statement in OLD_POSTGRES:
        connection.execute(statement)
    connection.execute("SET search_path TO public")


def sqlite_layout(connection: sqlite3.Connection) -> dict[str, Any]:
    """Return each table's columns (name, type, default, key) and indexes, with order."""
    layout: dict[str, Any] = {}
    for table in TABLES:
        columns = connection.execute(f"PRAGMA table_info({table})").fetchall()
        layout[table] = [(name, kind, default, key) for _, name, kind, _, default, key in columns]
        names = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
            "AND sql IS NOT NULL ORDER BY name",
            (table,),
        ).fetchall()
        for (name,) in names:
            keys = connection.execute(f"PRAGMA index_xinfo({name})").fetchall()
            layout[name] = [
                (column, descending) for _, _, column, descending, _, key in keys if key
            ]
    return layout


def postgres_layout(connection: Any, schema: str) -> dict[str, Any]:
    """Return each table's columns (name, type, default, nullable) and index definitions.

    The names of the schema are left out, so that two schemas' tables compare.
    """
    columns = connection.execute(
        "SELECT table_name, column_name, data_type, column_default, is_nullable "
        "FROM information_schema.columns WHERE table_schema = %s AND table_name = ANY(%s) "
        "ORDER BY table_name, ordinal_position",
        (schema, list(TABLES)),
    ).fetchall()
    indexes = connection.execute(
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = %s AND tablename = ANY(%s) ORDER BY indexname",
        (schema, list(TABLES)),
    ).fetchall()
    return {
        "columns": [_unqualified(row, schema) for row in columns],
        "indexes": [_unqualified(row, schema) for row in indexes],
    }


def _unqualified(row: tuple[Any, ...], schema: str) -> tuple[Any, ...]:
    return tuple(v.replace(f"{schema}.", "") if isinstance(v, str) else v for v in row)


# --- the tables ----------------------------------------------------------------------


def test_a_new_store_has_the_tables_of_every_existing_home(where: str, tmp_path: Path) -> None:
    ConversationStore.open(where).close()
    with driver(where) as connection:
        if isinstance(connection, sqlite3.Connection):
            made = sqlite_layout(connection)
            with driver(str(tmp_path / "old.sqlite")) as old:
                make_old_tables(old)
                expected = sqlite_layout(old)
        else:
            made = postgres_layout(connection, "public")
            make_old_tables(connection, schema="old")
            expected = postgres_layout(connection, "old")
    assert made == expected
    # Opened again, nothing is added or changed.
    ConversationStore.open(where).close()
    with driver(where) as connection:
        if isinstance(connection, sqlite3.Connection):
            assert sqlite_layout(connection) == made
        else:
            assert postgres_layout(connection, "public") == made


# --- a home made before ------------------------------------------------------------------


def test_a_home_made_before_is_read_and_written_as_before(where: str) -> None:
    earlier = FIXED_NOW - timedelta(days=1)
    with driver(where) as connection:
        make_old_tables(connection)
        sqlite = isinstance(connection, sqlite3.Connection)
        mark = "?" if sqlite else "%s"

        def moment(at: datetime, timespec: str = "auto") -> Any:
            return at.isoformat(timespec=timespec) if sqlite else at

        sessions = [
            ("t-old", "3442 587242", earlier, earlier, "move my flight"),
            ("t-half", "3442 587242", earlier, earlier + timedelta(microseconds=500_000), ""),
        ]
        for thread, passenger, created, updated, title in sessions:
            connection.execute(
                f"INSERT INTO travel_sessions VALUES ({', '.join([mark] * 5)})",
                (thread, passenger, moment(created), moment(updated), title),
            )
        connection.execute(
            "INSERT INTO travel_audit (at, supervisor, looked_at, conversation_id, passenger_id) "
            f"VALUES ({', '.join([mark] * 5)})",
            (moment(FIXED_NOW, "microseconds"), "Ana", "conversation", "t-old", "3442 587242"),
        )

    with ConversationStore.open(where) as store:
        registry, audit = store.registry, store.audit
        # Read as they were written, in UTC, the most recent first.
        assert [(r.thread_id, r.updated_at) for r in registry.list("3442 587242")] == [
            ("t-half", earlier + timedelta(microseconds=500_000)),
            ("t-old", earlier),
        ]
        old = registry.get("t-old")
        assert old is not None and old.created_at.utcoffset() == timedelta(0)
        assert (old.title, old.created_at) == ("move my flight", earlier)
        # Written beside them, in their order and with the first title kept.
        tokyo = FIXED_NOW.astimezone(ZoneInfo("Asia/Tokyo"))
        registry.touch("t-old", "3442 587242", tokyo, "another title")
        registry.touch("t-new", "8149 604011", FIXED_NOW - timedelta(hours=1), "new")
        assert [r.thread_id for r in registry.list()] == ["t-old", "t-new", "t-half"]
        assert registry.get("t-old") == SessionRecord(
            "t-old", "3442 587242", earlier, FIXED_NOW, "move my flight"
        )
        # The look of before counts: one a minute later is not a new entry; five later is.
        assert not audit.record(
            "Ana", "conversation", FIXED_NOW + timedelta(minutes=1), conversation_id="t-old"
        )
        assert audit.record(
            "Ana",
            "conversation",
            FIXED_NOW + timedelta(minutes=5, seconds=1),
            conversation_id="t-old",
            passenger_id="3442 587242",
        )
        assert [e.at for e in audit.entries(conversation_id="t-old")] == [
            FIXED_NOW + timedelta(minutes=5, seconds=1),
            FIXED_NOW,
        ]

    with driver(where) as connection:
        if isinstance(connection, sqlite3.Connection):
            # SQLite keeps its text: each table's own format, in UTC.
            updated = connection.execute(
                "SELECT updated_at FROM travel_sessions WHERE thread_id = 't-old'"
            ).fetchone()
            assert updated == (FIXED_NOW.isoformat(),)
            stamps = connection.execute("SELECT at FROM travel_audit ORDER BY id").fetchall()
            assert stamps == [
                (FIXED_NOW.isoformat(timespec="microseconds"),),
                ((FIXED_NOW + timedelta(minutes=5, seconds=1)).isoformat(timespec="microseconds"),),
            ]
        else:
            kind = connection.execute(
                "SELECT pg_typeof(updated_at)::text AS kind FROM travel_sessions LIMIT 1"
            ).fetchone()
            assert kind == ("timestamp with time zone",)


# --- the registry and the audit log, both engines ----------------------------------------


def test_the_audit_log_coalesces_looks_and_keeps_every_action(where: str) -> None:
    with ConversationStore.open(where) as store:
        audit = store.audit
        assert audit.entries() == []
        assert audit.record("Ana", "conversations", FIXED_NOW)
        assert not audit.record("Ana", "conversations", FIXED_NOW + timedelta(minutes=4))
        assert audit.record("Ben", "conversations", FIXED_NOW + timedelta(minutes=4))
        assert audit.record("Ana", "conversations", FIXED_NOW + timedelta(minutes=6))
        # Actions (``within`` zero) are all kept, at the same moment too.
        for _ in range(2):
            assert audit.record(
                "Ana",
                "took",
                FIXED_NOW,
                conversation_id="t-1",
                passenger_id="p\x00-1",
                within=timedelta(0),
            )
        looks = audit.entries(supervisor="Ana")
        assert [(e.looked_at, e.at) for e in looks] == [
            ("conversations", FIXED_NOW + timedelta(minutes=6)),
            ("took", FIXED_NOW),
            ("took", FIXED_NOW),
            ("conversations", FIXED_NOW),
        ]
        assert all(e.at.utcoffset() == timedelta(0) for e in looks)
        assert [e.passenger_id for e in audit.entries(conversation_id="t-1")] == ["p-1", "p-1"]
        assert len(audit.entries(limit=2)) == 2
        assert audit.entries(supervisor="Ana", conversation_id="t-2") == []


def test_the_registry_keeps_the_first_title_and_lists_the_latest_first(where: str) -> None:
    with ConversationStore.open(where) as store:
        registry = store.registry
        registry.touch("t-1", "3442 587242", FIXED_NOW, "move my flight")
        registry.touch("t-2", "8149 604011", FIXED_NOW + timedelta(minutes=5), "")
        registry.touch("t-2", "8149 604011", FIXED_NOW + timedelta(minutes=6), "hotel")
        assert [(r.thread_id, r.title) for r in registry.list()] == [
            ("t-2", "hotel"),
            ("t-1", "move my flight"),
        ]
        assert registry.rename("t-1", "x" * 300 + "\x00") and not registry.rename("t-9", "x")
        assert registry.get("t-1").title == "x" * 200  # type: ignore[union-attr]
        assert registry.delete("t-2") and not registry.delete("t-2")
        assert [r.thread_id for r in registry.list("3442 587242", limit=1)] == ["t-1"]


# --- many threads ------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConversationStore]:
    if request.param == "memory":
        with ConversationStore.in_memory() as opened:
            yield opened
        return
    with (
        scratch_conversations(request.param, tmp_path) as found,
        ConversationStore.open(found) as opened,
    ):
        yield opened


def test_the_registry_and_the_audit_log_from_many_threads(store: ConversationStore) -> None:
    threads, each = 8, 25
    start = threading.Barrier(threads)

    def work(n: int) -> None:
        start.wait()
        for i in range(each):
            thread_id = f"t-{n}-{i}"
            store.registry.touch(thread_id, f"p-{n}", FIXED_NOW + timedelta(seconds=i), "hello")
            assert store.audit.record(
                f"s-{n}", "conversation", FIXED_NOW, conversation_id=thread_id
            )
            assert store.registry.get(thread_id) is not None
            assert store.registry.rename(thread_id, f"title {i}")
            assert len(store.registry.list(f"p-{n}", limit=1000)) == i + 1

    with ThreadPoolExecutor(threads) as pool:
        for done in [pool.submit(work, n) for n in range(threads)]:
            done.result()
    assert len(store.registry.list(limit=1000)) == threads * each
    assert len(store.audit.entries(limit=1000)) == threads * each


# --- a connection given --------------------------------------------------------------------


def test_a_registry_on_a_connection_given_shares_its_database_and_closes_it() -> None:
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    registry = SessionRegistry(connection)
    registry.touch("t-1", "3442 587242", datetime(2026, 5, 4, 11, 0, tzinfo=UTC), "hi")
    row = connection.execute("SELECT created_at, title FROM travel_sessions").fetchone()
    assert row == ("2026-05-04T11:00:00+00:00", "hi")
    with connection:
        connection.execute("UPDATE travel_sessions SET title = 'from the owner'")
    assert registry.get("t-1").title == "from the owner"  # type: ignore[union-attr]
    registry.close()
    with pytest.raises(sqlite3.ProgrammingError):
        connection.execute("SELECT 1")
