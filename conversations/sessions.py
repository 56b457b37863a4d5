"""The registry of saved conversations, kept beside LangGraph's checkpoints.

The checkpoints hold each conversation's state; this small table adds what the terminal
program and the service need to list and guard them: which passenger a thread belongs
to, when it was started and last used, and its first message as a title.

One implementation, through SQLAlchemy Core, serves a SQLite file and a PostgreSQL
database alike (``SessionRegistry``). The table is the one every existing home has: on
SQLite its timestamps are ISO 8601 text in UTC, on PostgreSQL ``TIMESTAMPTZ``, and each
engine keeps the indexes it always had (``conversations.tables``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from conversations.tables import Moment, StoredTable, without_nul

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import DBAPIConnection

TITLE_CHARS = 200

_metadata = sa.MetaData()
SESSIONS = sa.Table(
    "travel_sessions",
    _metadata,
    sa.Column("thread_id", sa.Text, primary_key=True),
    sa.Column("passenger_id", sa.Text, nullable=False),
    sa.Column("created_at", Moment(), nullable=False),
    sa.Column("updated_at", Moment(), nullable=False),
    sa.Column("title", sa.Text, nullable=False, server_default=""),
)


@dataclass(frozen=True)
class SessionRecord:
    """One saved conversation."""

    thread_id: str
    passenger_id: str
    created_at: datetime
    updated_at: datetime
    title: str


class OpenConnection(Protocol):
    """What a DB-API connection (``sqlite3``'s) has, given in place of an engine."""

    def cursor(self) -> Any:
        """Return a new cursor."""

    def commit(self) -> None:
        """Commit the transaction."""

    def rollback(self) -> None:
        """Roll the transaction back."""

    def close(self) -> None:
        """Close the connection."""


class SessionRegistry(StoredTable):
    """The ``travel_sessions`` table of a SQLite file or a PostgreSQL database."""

    table = SESSIONS
    # What every list asks for: the most recently used first, of one passenger or all.
    indexes: ClassVar[dict[str, tuple[sa.Index, ...]]] = {
        "sqlite": (sa.Index("ix_travel_sessions_updated", SESSIONS.c.updated_at),),
        "postgresql": (
            sa.Index(
                "ix_travel_sessions_passenger_updated",
                SESSIONS.c.passenger_id,
                SESSIONS.c.updated_at.desc(),
            ),
            sa.Index("ix_travel_sessions_updated", SESSIONS.c.updated_at.desc()),
        ),
    }

    def __init__(self, engine: sa.Engine | OpenConnection) -> None:
        """Use ``engine``, or one open SQLite connection, and create the table if missing.

        The connection may be shared with a checkpointer that commits before the registry
        is used (each call here ends its own transaction); ``close`` closes it.
        """
        if not isinstance(engine, sa.Engine):
            given = cast("DBAPIConnection", engine)
            engine = sa.create_engine(
                "sqlite://", creator=lambda: given, poolclass=sa.pool.StaticPool
            )
        super().__init__(engine)
        # Every turn touches its record: the statement is built once (building one
        # costs several times what running it does).
        insert = (postgresql if engine.dialect.name == "postgresql" else sqlite).insert(SESSIONS)
        self._touch = insert.values(
            thread_id=sa.bindparam("thread_id"),
            passenger_id=sa.bindparam("passenger_id"),
            created_at=sa.bindparam("now"),
            updated_at=sa.bindparam("now"),
            title=sa.bindparam("title"),
        ).on_conflict_do_update(
            index_elements=[SESSIONS.c.thread_id],
            set_={
                "updated_at": insert.excluded.updated_at,
                "title": sa.case(
                    (SESSIONS.c.title == "", insert.excluded.title), else_=SESSIONS.c.title
                ),
            },
        )

    @classmethod
    def open(cls, path: Path) -> SessionRegistry:
        """Open (and create) the registry in the SQLite file at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(sa.create_engine(f"sqlite:///{path}"))

    def get(self, thread_id: str) -> SessionRecord | None:
        """Return the record of ``thread_id``, or ``None``."""
        query = SESSIONS.select().where(SESSIONS.c.thread_id == thread_id)
        with self._lock, self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        return SessionRecord(**row) if row else None

    def touch(self, thread_id: str, passenger_id: str, now: datetime, title: str = "") -> None:
        """Create the record or mark it used at ``now``; the first title sticks."""
        values = {
            "thread_id": thread_id,
            "passenger_id": passenger_id,
            "now": now,
            "title": without_nul(title[:TITLE_CHARS]),
        }
        with self._lock, self.engine.begin() as connection:
            connection.execute(self._touch, values)

    def rename(self, thread_id: str, title: str) -> bool:
        """Set the title of ``thread_id``; return whether it was there."""
        update = (
            SESSIONS.update()
            .where(SESSIONS.c.thread_id == thread_id)
            .values(title=without_nul(title[:TITLE_CHARS]))
        )
        with self._lock, self.engine.begin() as connection:
            return connection.execute(update).rowcount > 0

    def delete(self, thread_id: str) -> bool:
        """Forget ``thread_id``; return whether it was there (its checkpoints are separate)."""
        delete = SESSIONS.delete().where(SESSIONS.c.thread_id == thread_id)
        with self._lock, self.engine.begin() as connection:
            return connection.execute(delete).rowcount > 0

    def list(self, passenger_id: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Return the most recently used sessions first, optionally of one passenger."""
        query = SESSIONS.select().order_by(SESSIONS.c.updated_at.desc()).limit(limit)
        if passenger_id is not None:
            query = query.where(SESSIONS.c.passenger_id == passenger_id)
        with self._lock, self.engine.connect() as connection:
            return [SessionRecord(**row) for row in connection.execute(query).mappings()]
