"""What the tables kept beside the conversations share: one engine, moments, a base.

The session registry (``conversations.sessions``), the audit log (``conversations.audit``)
and the desk (``conversations.desk``) keep their tables in the conversations' SQLite file
or PostgreSQL database, through SQLAlchemy Core, on one engine: ``open_engine`` builds it
for a location, ``memory_engine`` for a database that lasts as long as the process.
``Moment`` is a moment in UTC on either engine, ``StoredTable`` a table created on first
use, ``without_nul`` text PostgreSQL can hold.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Self

import sqlalchemy as sa

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import Dialect


def open_engine(url: str, pool_timeout: float | None = None) -> sa.Engine:
    """Return the engine of a SQLAlchemy URL (``sqlite:///path`` or a PostgreSQL URL).

    ``pool_timeout``: the seconds to wait for a pooled PostgreSQL connection (30 without).
    """
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 30})
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    else:
        waits = {} if pool_timeout is None else {"pool_timeout": pool_timeout}
        engine = sa.create_engine(url, pool_size=4, max_overflow=6, pool_pre_ping=True, **waits)
    return engine


def memory_engine() -> sa.Engine:
    """Return the engine of a SQLite database in memory, one connection for every thread."""
    return sa.create_engine(
        "sqlite://", connect_args={"check_same_thread": False}, poolclass=sa.pool.StaticPool
    )


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


class Moment(sa.types.TypeDecorator[datetime]):
    """An aware moment: ``TIMESTAMPTZ`` on PostgreSQL, text on SQLite.

    The text is ``datetime.isoformat`` in UTC with ``timespec``, as the existing SQLite
    homes have it; with one format per column, text order is time order. Moments are
    read back in UTC on either engine.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def __init__(self, timespec: str = "auto") -> None:
        """Write SQLite's text with ``timespec`` (see ``datetime.isoformat``)."""
        super().__init__()
        self.timespec = timespec

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        """Return text on SQLite, the timestamp with its zone elsewhere."""
        return dialect.type_descriptor(sa.Text() if dialect.name == "sqlite" else self.impl)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        """Turn ``value`` into UTC, and into text on SQLite."""
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.isoformat(timespec=self.timespec) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """Read SQLite's text, or the driver's timestamp, as a moment in UTC."""
        if value is None:
            return None
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
        return moment.astimezone(UTC)


class StoredTable:
    """A table kept beside the conversations, on an engine, usable from many threads.

    A subclass names its ``table`` and the ``indexes`` of each engine (by dialect name);
    both are created when they are missing, as the existing homes have them.
    """

    table: ClassVar[sa.Table]
    indexes: ClassVar[dict[str, tuple[sa.Index, ...]]]

    def __init__(self, engine: sa.Engine) -> None:
        """Use ``engine`` (SQLite or PostgreSQL) and create the table if it is missing.

        On PostgreSQL, processes setting up one database at once must take turns (the
        store does: ``conversations.store``).
        """
        self.engine = engine
        # Calls that share one connection (a SQLite database in memory, or a connection
        # given) take turns, since their transactions would mix; a pool gives each call
        # a connection of its own.
        self._lock: AbstractContextManager[Any] = (
            threading.RLock() if isinstance(engine.pool, sa.pool.StaticPool) else nullcontext()
        )
        with self._lock, engine.begin() as connection:
            connection.execute(sa.schema.CreateTable(self.table, if_not_exists=True))
            for index in self.indexes[engine.dialect.name]:
                connection.execute(sa.schema.CreateIndex(index, if_not_exists=True))

    @classmethod
    def in_memory(cls) -> Self:
        """Return one that keeps nothing after the process."""
        return cls(memory_engine())

    def close(self) -> None:
        """Close the engine's connections."""
        with self._lock:
            self.engine.dispose()


def without_nul(text: str) -> str:
    """Drop NUL characters, which PostgreSQL text cannot hold (names and labels only)."""
    return text.replace("\x00", "")
