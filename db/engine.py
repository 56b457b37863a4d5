"""Engines, sessions and where files live.

``Database`` bundles an engine and the clock every query reads "now" from. SQLite
connections get foreign keys enforced and a busy timeout so that a second process (a
resumed chat, the eval runner) waits instead of failing with "database is locked".
A database built by an older version is upgraded in place before the first write
(``Database.upgrade_schema``, see ``db.upgrade``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from db.clock import Clock, system_clock
from db.errors import DatabaseMissingError

SQLITE_BUSY_TIMEOUT_MS = 10_000


def packaged_data_dir() -> Path:
    """Return the folder of the installed ``data`` package.

    It holds the reference files, the company policy and the evaluation scenarios, and
    is found through the import system, so the answer is right for a checkout, an
    editable install and a wheel (where ``data`` sits in ``site-packages``) alike.
    """
    folder = files("data")
    if not isinstance(folder, Path):
        # Only a package imported from an archive (a zip) has no folder on disk.
        raise RuntimeError(f"The data package is not a folder on disk: {folder}")
    return folder


def reference_data_dir(folder: Path | None = None) -> Path:
    """Return the folder of reference files: ``folder`` when given, else the packaged one.

    The edge (``settings.Settings.data_dir``, from ``TRAVEL_ASSISTANT_DATA``) names
    another folder through ``Database.data_dir``; nothing here reads the environment.
    """
    return folder if folder is not None else packaged_data_dir()


def url_for(db: str | Path) -> str:
    """Turn a path or URL into a SQLAlchemy URL (a bare path means a SQLite file)."""
    text = str(db)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser()}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def make_engine(url: str) -> Engine:
    """Create an engine; SQLite connections enforce foreign keys and wait when busy.

    A server's pooled connections are pinged when taken from the pool, and one the
    server has closed (a restart, a fail-over, ``pg_terminate_backend``, an idle
    timeout) is replaced there: the next query works instead of failing once. A SQLite
    file has no server to lose, and its checkouts stay free of the extra round trip.
    """
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


@dataclass
class Database:
    """An engine plus the clock that defines "now" for every rule."""

    engine: Engine
    clock: Clock = system_clock
    # The reference files (catalogues, the company policy) that go with this database.
    data_dir: Path = field(default_factory=packaged_data_dir)
    _sessions: sessionmaker[Session] = field(init=False, repr=False)
    _upgraded: bool = field(default=False, init=False, repr=False)
    _upgrade_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _tables_seen: set[str] = field(default_factory=set, init=False, repr=False)
    # Moves with every transaction this process commits: what was read before a write
    # (a preview kept for reuse) is known to be older than it.
    _generation: itertools.count[int] = field(
        default_factory=itertools.count, init=False, repr=False
    )
    generation: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def from_url(
        cls, url: str, clock: Clock = system_clock, data_dir: Path | None = None
    ) -> Database:
        """Open the database at ``url`` (a SQLAlchemy URL or a SQLite path).

        ``data_dir`` is the folder of its reference files (the packaged ones by default).
        """
        return cls(make_engine(url_for(url)), clock, reference_data_dir(data_dir))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Yield a session for reads; nothing is committed."""
        with self._sessions() as session:
            yield session

    @contextmanager
    def rows(self) -> Iterator[Connection]:
        """Yield a connection for reads that return rows, not ORM objects; nothing is committed.

        A statement costs about half as much as through a session (no unit of work, no
        identity map): for the reads of every turn (``fetch_user_info``).
        """
        with self.engine.connect() as connection:
            yield connection

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """Yield a session inside one transaction: committed on success, rolled back on error.

        ``generation`` moves once the transaction ends, whichever way.
        """
        try:
            with self._sessions.begin() as session:
                yield session
        finally:
            self.generation = next(self._generation) + 1

    def has_schema(self) -> bool:
        """Tell whether the tables exist (a fresh SQLite file has none)."""
        return inspect(self.engine).has_table("flights")

    def has_table(self, name: str) -> bool:
        """Tell whether table ``name`` exists.

        A table found once is not looked up again: once there it stays (an upgrade or a
        rebuild of the database makes it again under the same name). The look-up, through
        SQLAlchemy's inspector, was a fifth of ``db.writes.find_stored_result``, which
        runs for every pending approval.
        """
        if name in self._tables_seen:
            return True
        if not inspect(self.engine).has_table(name):
            return False
        self._tables_seen.add(name)
        return True

    def require_schema(self) -> None:
        """Raise ``DatabaseMissingError`` naming the fix when the tables are missing."""
        if not self.has_schema():
            raise DatabaseMissingError(
                f"The travel database at {self.engine.url.render_as_string()} has no tables. "
                "Build it with: travel-assistant db init"
            )

    def upgrade_schema(self) -> None:
        """Bring tables built by an older version to the current layout, once per object.

        Cheap when the schema is current (one look at a table's columns); the writes call
        it first, so an existing database keeps working after an upgrade of the program.
        """
        if self._upgraded:
            return
        with self._upgrade_lock:
            if not self._upgraded:
                from db.upgrade import upgrade

                upgrade(self.engine)
                self._upgraded = True

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
