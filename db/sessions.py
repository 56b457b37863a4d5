"""The registry of saved conversations, kept beside LangGraph's checkpoints.

The checkpoints hold each conversation's state; this small table adds what the terminal
program needs to list and guard them: which passenger a thread belongs to, when it was
started and last used, and its first message as a title.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

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


@dataclass(frozen=True)
class SessionRecord:
    """One saved conversation."""

    thread_id: str
    passenger_id: str
    created_at: datetime
    updated_at: datetime
    title: str


class SessionRegistry:
    """Read and write the ``travel_sessions`` table of a SQLite file."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        """Use ``connection`` (shared with the checkpointer) and create the table."""
        self.connection = connection
        with self.connection:
            self.connection.executescript(_SCHEMA)

    @classmethod
    def open(cls, path: Path) -> SessionRegistry:
        """Open (and create) the registry in the SQLite file at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(sqlite3.connect(path, check_same_thread=False))

    def get(self, thread_id: str) -> SessionRecord | None:
        """Return the record of ``thread_id``, or ``None``."""
        row = self.connection.execute(
            "SELECT thread_id, passenger_id, created_at, updated_at, title "
            "FROM travel_sessions WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        return _record(row) if row else None

    def touch(self, thread_id: str, passenger_id: str, now: datetime, title: str = "") -> None:
        """Create the record or mark it used at ``now``; the first title sticks."""
        stamp = now.astimezone(UTC).isoformat()
        with self.connection:
            self.connection.execute(
                "INSERT INTO travel_sessions "
                "(thread_id, passenger_id, created_at, updated_at, title) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(thread_id) DO UPDATE SET updated_at = excluded.updated_at, "
                "title = CASE WHEN travel_sessions.title = '' THEN excluded.title "
                "ELSE travel_sessions.title END",
                (thread_id, passenger_id, stamp, stamp, title[:200]),
            )

    def delete(self, thread_id: str) -> bool:
        """Forget ``thread_id``; return whether it was there (its checkpoints are separate)."""
        with self.connection:
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
        rows = self.connection.execute(query, (*params, limit)).fetchall()
        return [_record(row) for row in rows]


def _record(row: tuple[str, str, str, str, str]) -> SessionRecord:
    return SessionRecord(
        thread_id=row[0],
        passenger_id=row[1],
        created_at=datetime.fromisoformat(row[2]),
        updated_at=datetime.fromisoformat(row[3]),
        title=row[4],
    )
