"""The registry of saved conversations, kept beside LangGraph's checkpoints.

The checkpoints hold each conversation's state; this small table adds what the terminal
program and the service need to list and guard them: which passenger a thread belongs
to, when it was started and last used, and its first message as a title.

Two implementations of one protocol (``SessionStore``): ``SessionRegistry`` in a SQLite
file (the table and its text timestamps are those of every existing home) and
``PostgresSessionRegistry`` in a PostgreSQL database, through a psycopg connection pool.
Both may be used from many threads at once.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import DictRow
    from psycopg_pool import ConnectionPool

TITLE_CHARS = 200

_SCHEMA = """
CREATE TABLE IF NOT EXISTS travel_sessions (
    thread_id TEXT PRIMARY KEY,
    passenger_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ix_travel_sessions_updated ON travel_sessions (updated_at);
"""

# The same table on PostgreSQL, with real timestamps; the index serves "a passenger's
# conversations, most recent first", which is what every list asks.
POSTGRES_SCHEMA = (
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
)


@dataclass(frozen=True)
class SessionRecord:
    """One saved conversation."""

    thread_id: str
    passenger_id: str
    created_at: datetime
    updated_at: datetime
    title: str


class SessionStore(Protocol):
    """The list of conversations and their owners, wherever it is kept."""

    def get(self, thread_id: str) -> SessionRecord | None:
        """Return the record of ``thread_id``, or ``None``."""

    def touch(self, thread_id: str, passenger_id: str, now: datetime, title: str = "") -> None:
        """Create the record or mark it used at ``now``; the first title sticks."""

    def delete(self, thread_id: str) -> bool:
        """Forget ``thread_id``; return whether it was there."""

    def rename(self, thread_id: str, title: str) -> bool:
        """Set the title of ``thread_id``; return whether it was there."""

    def list(self, passenger_id: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Return the most recently used records first, optionally of one passenger."""


class SessionRegistry:
    """Read and write the ``travel_sessions`` table of a SQLite file."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        """Use ``connection`` (it may be shared with the checkpointer) and create the table."""
        self.connection = connection
        # One statement at a time on the connection: the service calls from many threads.
        self._lock = threading.RLock()
        with self._lock, self.connection:
            self.connection.executescript(_SCHEMA)

    @classmethod
    def open(cls, path: Path) -> SessionRegistry:
        """Open (and create) the registry in the SQLite file at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(sqlite3.connect(path, check_same_thread=False))

    def get(self, thread_id: str) -> SessionRecord | None:
        """Return the record of ``thread_id``, or ``None``."""
        with self._lock:
            row = self.connection.execute(
                "SELECT thread_id, passenger_id, created_at, updated_at, title "
                "FROM travel_sessions WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
        return _record(row) if row else None

    def touch(self, thread_id: str, passenger_id: str, now: datetime, title: str = "") -> None:
        """Create the record or mark it used at ``now``; the first title sticks."""
        stamp = now.astimezone(UTC).isoformat()
        with self._lock, self.connection:
            self.connection.execute(
                "INSERT INTO travel_sessions "
                "(thread_id, passenger_id, created_at, updated_at, title) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(thread_id) DO UPDATE SET updated_at = excluded.updated_at, "
                "title = CASE WHEN travel_sessions.title = '' THEN excluded.title "
                "ELSE travel_sessions.title END",
                (thread_id, passenger_id, stamp, stamp, title[:TITLE_CHARS]),
            )

    def rename(self, thread_id: str, title: str) -> bool:
        """Set the title of ``thread_id``; return whether it was there."""
        with self._lock, self.connection:
            cursor = self.connection.execute(
                "UPDATE travel_sessions SET title = ? WHERE thread_id = ?",
                (title[:TITLE_CHARS], thread_id),
            )
        return cursor.rowcount > 0

    def delete(self, thread_id: str) -> bool:
        """Forget ``thread_id``; return whether it was there (its checkpoints are separate)."""
        with self._lock, self.connection:
            cursor = self.connection.execute(
                "DELETE FROM travel_sessions WHERE thread_id = ?", (thread_id,)
            )
        return cursor.rowcount > 0

    def list(self, passenger_id: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Return the most recently used sessions first, optionally of one passenger."""
        query = "SELECT thread_id, passenger_id, created_at, updated_at, title FROM travel_sessions"
        params: tuple[object, ...] = ()
        if passenger_id is not None:
            query += " WHERE passenger_id = ?"
            params = (passenger_id,)
        query += " ORDER BY updated_at DESC LIMIT ?"
        with self._lock:
            rows = self.connection.execute(query, (*params, limit)).fetchall()
        return [_record(row) for row in rows]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self.connection.close()


def _record(row: tuple[str, str, str, str, str]) -> SessionRecord:
    return SessionRecord(
        thread_id=row[0],
        passenger_id=row[1],
        created_at=datetime.fromisoformat(row[2]),
        updated_at=datetime.fromisoformat(row[3]),
        title=row[4],
    )


class PostgresSessionRegistry:
    """The ``travel_sessions`` table of a PostgreSQL database, over a connection pool.

    The pool's connections are in autocommit mode with dictionary rows (as LangGraph's
    ``PostgresSaver`` needs them); each call is one statement, so one transaction.
    """

    def __init__(self, pool: ConnectionPool[Connection[DictRow]]) -> None:
        """Use ``pool``; the table must exist (``create_postgres_schema``)."""
        self.pool = pool

    def get(self, thread_id: str) -> SessionRecord | None:
        """Return the record of ``thread_id``, or ``None``."""
        with self.pool.connection() as connection:
            row = connection.execute(
                "SELECT thread_id, passenger_id, created_at, updated_at, title "
                "FROM travel_sessions WHERE thread_id = %s",
                (thread_id,),
            ).fetchone()
        return _pg_record(row) if row else None

    def touch(self, thread_id: str, passenger_id: str, now: datetime, title: str = "") -> None:
        """Create the record or mark it used at ``now``; the first title sticks."""
        stamp = now.astimezone(UTC)
        with self.pool.connection() as connection:
            connection.execute(
                "INSERT INTO travel_sessions "
                "(thread_id, passenger_id, created_at, updated_at, title) "
                "VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (thread_id) DO UPDATE SET updated_at = EXCLUDED.updated_at, "
                "title = CASE WHEN travel_sessions.title = '' THEN EXCLUDED.title "
                "ELSE travel_sessions.title END",
                (thread_id, passenger_id, stamp, stamp, _no_nul(title[:TITLE_CHARS])),
            )

    def rename(self, thread_id: str, title: str) -> bool:
        """Set the title of ``thread_id``; return whether it was there."""
        with self.pool.connection() as connection:
            cursor = connection.execute(
                "UPDATE travel_sessions SET title = %s WHERE thread_id = %s",
                (_no_nul(title[:TITLE_CHARS]), thread_id),
            )
            return cursor.rowcount > 0

    def delete(self, thread_id: str) -> bool:
        """Forget ``thread_id``; return whether it was there (its checkpoints are separate)."""
        with self.pool.connection() as connection:
            cursor = connection.execute(
                "DELETE FROM travel_sessions WHERE thread_id = %s", (thread_id,)
            )
            return cursor.rowcount > 0

    def list(self, passenger_id: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Return the most recently used sessions first, optionally of one passenger."""
        query = "SELECT thread_id, passenger_id, created_at, updated_at, title FROM travel_sessions"
        params: tuple[object, ...] = ()
        if passenger_id is not None:
            query += " WHERE passenger_id = %s"
            params = (passenger_id,)
        query += " ORDER BY updated_at DESC LIMIT %s"
        with self.pool.connection() as connection:
            rows = connection.execute(query, (*params, limit)).fetchall()  # type: ignore[arg-type]
        return [_pg_record(row) for row in rows]


def create_postgres_schema(connection: Connection[Any]) -> None:
    """Create the ``travel_sessions`` table and its indexes when they are missing."""
    for statement in POSTGRES_SCHEMA:
        connection.execute(statement)  # type: ignore[arg-type]


def _no_nul(text: str) -> str:
    # PostgreSQL text cannot hold NUL characters (SQLite can); a title is only a label.
    return text.replace("\x00", "")


def _pg_record(row: DictRow) -> SessionRecord:
    return SessionRecord(
        thread_id=row["thread_id"],
        passenger_id=row["passenger_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        title=row["title"],
    )
