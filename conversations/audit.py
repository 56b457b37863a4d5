"""Who looked at what, when: the supervisors' audit log, kept beside the conversations.

A supervisor reads every passenger's conversations (``server.supervisor``); each look is
recorded here, durably, in the same file or database as the conversations, so that it
outlives the process and every worker of a deployment writes to one log. Looks are
coalesced: a page that refreshes every few seconds records one entry per supervisor and
thing looked at per ``within`` (a few minutes), not one per refresh.

Two implementations of one protocol (``AuditLog``): ``SqliteAuditLog`` (a table in the
SQLite sessions file) and ``PostgresAuditLog`` (a table in the PostgreSQL database, over
the store's connection pool). Both may be used from many threads at once.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import DictRow
    from psycopg_pool import ConnectionPool

# What a supervisor looked at (the list of every conversation, or one conversation), or
# what they did as a person at the desk (``server.handoff``) to a conversation.
Looked = Literal[
    "conversations",
    "conversation",
    "took",
    "handed back",
    "closed",
    "approved",
    "refused",
    "proposed",
]
LOOKS: tuple[Looked, ...] = get_args(Looked)
# One entry per supervisor and thing looked at within this time.
COALESCE = timedelta(minutes=5)

_SQLITE_SCHEMA = """
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

POSTGRES_SCHEMA = (
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


@dataclass(frozen=True)
class AuditEntry:
    """One look: who, at what (a conversation, and whose, or the list of them), when."""

    at: datetime
    supervisor: str
    looked_at: Looked
    conversation_id: str
    passenger_id: str


def record_action(
    audit: AuditLog, staff: str, what: Looked, thread_id: str, passenger_id: str
) -> None:
    """Record what ``staff`` did to a conversation at the desk, now.

    Every action is kept, however close to the last (looks are coalesced, actions not).
    """
    audit.record(
        staff,
        what,
        datetime.now(UTC),
        conversation_id=thread_id,
        passenger_id=passenger_id,
        within=timedelta(0),
    )


class AuditLog(Protocol):
    """The supervisors' audit log, wherever it is kept."""

    def record(
        self,
        supervisor: str,
        looked_at: Looked,
        at: datetime,
        *,
        conversation_id: str = "",
        passenger_id: str = "",
        within: timedelta = COALESCE,
    ) -> bool:
        """Record a look at ``at``, unless the same one was recorded ``within`` before it.

        Returns whether an entry was added.
        """

    def entries(
        self, *, supervisor: str | None = None, conversation_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """Return the entries, newest first, optionally of one supervisor or conversation."""


def _stamp(at: datetime) -> str:
    # One fixed format, so that text order is time order.
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _no_nul(text: str) -> str:
    # PostgreSQL text cannot hold NUL; the names come from signed tokens, ids from paths.
    return text.replace("\x00", "")


class SqliteAuditLog:
    """The ``travel_audit`` table of a SQLite file, on a connection of its own."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        """Use ``connection`` and create the table when it is missing."""
        self.connection = connection
        self._lock = threading.Lock()
        with self._lock, self.connection:
            self.connection.executescript(_SQLITE_SCHEMA)

    @classmethod
    def in_memory(cls) -> SqliteAuditLog:
        """Return a log that keeps nothing after the process (a service built without a store)."""
        return cls(sqlite3.connect(":memory:", check_same_thread=False))

    def record(
        self,
        supervisor: str,
        looked_at: Looked,
        at: datetime,
        *,
        conversation_id: str = "",
        passenger_id: str = "",
        within: timedelta = COALESCE,
    ) -> bool:
        """Record a look (see ``AuditLog.record``) in one statement."""
        with self._lock, self.connection:
            cursor = self.connection.execute(
                "INSERT INTO travel_audit (at, supervisor, looked_at, conversation_id, "
                "passenger_id) SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM "
                "travel_audit WHERE supervisor = ? AND looked_at = ? AND conversation_id = ? "
                "AND at > ?)",
                (
                    _stamp(at),
                    supervisor,
                    looked_at,
                    conversation_id,
                    passenger_id,
                    supervisor,
                    looked_at,
                    conversation_id,
                    _stamp(at - within),
                ),
            )
        return cursor.rowcount > 0

    def entries(
        self, *, supervisor: str | None = None, conversation_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """Return the entries, newest first."""
        query = "SELECT at, supervisor, looked_at, conversation_id, passenger_id FROM travel_audit"
        where, params = _filters(supervisor, conversation_id, "?")
        query += where + " ORDER BY at DESC, id DESC LIMIT ?"
        with self._lock:
            rows = self.connection.execute(query, (*params, limit)).fetchall()
        return [
            AuditEntry(datetime.fromisoformat(r[0]), r[1], cast(Looked, r[2]), r[3], r[4])
            for r in rows
        ]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self.connection.close()


def _filters(
    supervisor: str | None, conversation_id: str | None, mark: str
) -> tuple[str, tuple[str, ...]]:
    clauses, params = [], []
    if supervisor is not None:
        clauses.append(f"supervisor = {mark}")
        params.append(supervisor)
    if conversation_id is not None:
        clauses.append(f"conversation_id = {mark}")
        params.append(conversation_id)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), tuple(params)


class PostgresAuditLog:
    """The ``travel_audit`` table of a PostgreSQL database, over a connection pool.

    The pool's connections are in autocommit mode with dictionary rows (the store's); the
    table must exist (``create_postgres_schema``).
    """

    def __init__(self, pool: ConnectionPool[Connection[DictRow]]) -> None:
        """Use ``pool``."""
        self.pool = pool

    def record(
        self,
        supervisor: str,
        looked_at: Looked,
        at: datetime,
        *,
        conversation_id: str = "",
        passenger_id: str = "",
        within: timedelta = COALESCE,
    ) -> bool:
        """Record a look (see ``AuditLog.record``) in one statement."""
        stamp = at.astimezone(UTC)
        values = (_no_nul(supervisor), looked_at, _no_nul(conversation_id))
        with self.pool.connection() as connection:
            cursor = connection.execute(
                "INSERT INTO travel_audit (at, supervisor, looked_at, conversation_id, "
                "passenger_id) SELECT %s, %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM "
                "travel_audit WHERE supervisor = %s AND looked_at = %s AND conversation_id = %s "
                "AND at > %s)",
                (stamp, *values, _no_nul(passenger_id), *values, stamp - within),
            )
            return cursor.rowcount > 0

    def entries(
        self, *, supervisor: str | None = None, conversation_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """Return the entries, newest first."""
        where, params = _filters(supervisor, conversation_id, "%s")
        query = (
            "SELECT at, supervisor, looked_at, conversation_id, passenger_id FROM travel_audit"
            + where
            + " ORDER BY at DESC, id DESC LIMIT %s"
        )
        with self.pool.connection() as connection:
            rows = connection.execute(query, (*params, limit)).fetchall()  # type: ignore[arg-type]
        return [
            AuditEntry(
                r["at"], r["supervisor"], r["looked_at"], r["conversation_id"], r["passenger_id"]
            )
            for r in rows
        ]


def create_postgres_schema(connection: Connection[Any]) -> None:
    """Create the ``travel_audit`` table and its indexes when they are missing."""
    for statement in POSTGRES_SCHEMA:
        connection.execute(statement)  # type: ignore[arg-type]
