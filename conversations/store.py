"""Where conversations live: LangGraph's checkpoints, the session registry and turn locks.

``ConversationStore.open`` takes a SQLite file path (the default is
``<home>/sessions.sqlite``), a ``sqlite:///`` URL or a PostgreSQL URL
(``postgresql+psycopg://user@host:5432/name``) and gives the three things the terminal
program and the HTTP service share:

- ``saver``: the checkpointer (``SqliteSaver``, or ``PostgresSaver`` over a psycopg
  connection pool), set up on first use;
- ``registry``: who owns which conversation, and its title and times
  (``conversations.sessions``), in the same file or database;
- ``locks``: one turn at a time per conversation, across processes and machines
  (``conversations.locks``);
- ``audit``: who among the supervisors looked at which conversation, when
  (``conversations.audit``), in the same file or database;
- ``desk``: the conversations handed to a person and who holds each
  (``conversations.desk``), in the same file or database.

The registry, the audit log and the desk share one SQLAlchemy engine
(``conversations.tables``).

The location is what the user gave (``--conversations`` or its environment variable),
read by ``locations.Location``.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from conversations.audit import AuditLog
from conversations.desk import Desk, DeskStoreError
from conversations.locks import (
    POLL_SECONDS,
    ConversationBusyError,
    ConversationStoreError,
    FileTurnLocks,
    LocalTurnLocks,
    PostgresTurnLocks,
    TurnLease,
    TurnLocks,
)
from conversations.sessions import SessionRegistry
from conversations.tables import open_engine
from locations import (
    CONNECT_TIMEOUT_SECONDS,
    INSTALL_POSTGRES,
    Location,
    LocationError,
    describe_connect_error,
    first_line,
)

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "ConversationBusyError",
    "ConversationStore",
    "ConversationStoreError",
    "LocalTurnLocks",
    "TurnLease",
    "TurnLocks",
]

# Connections of the PostgreSQL pool (checkpoints; turn locks have their own, and the
# registry, the audit log and the desk share one engine). The checkpointer serialises its
# own calls, so a few are plenty.
POOL_MAX_SIZE = 8
# Schema set-up by several processes at once is serialised with this advisory lock.
SETUP_LOCK_KEY = 0x7472_6176_656C_5353  # "travelSS"
SETUP_WAIT_SECONDS = 60.0


class ConversationStore:
    """The checkpointer, the session registry, the turn locks and the audit log of one location."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        registry: SessionRegistry,
        locks: TurnLocks,
        *,
        location: str,
        closers: tuple[Callable[[], None], ...] = (),
        audit: AuditLog | None = None,
        desk: Desk | None = None,
    ) -> None:
        """Bundle the parts; ``closers`` run on ``close`` (use ``open`` rather than this)."""
        self.saver = saver
        self.registry = registry
        self.locks = locks
        self.audit = audit if audit is not None else AuditLog.in_memory()
        self.desk = desk if desk is not None else Desk.in_memory()
        self.location = location
        self._closers = closers
        self._closed = False

    @classmethod
    def open(
        cls, where: str | Path | Location, *, pool_timeout: float | None = None
    ) -> ConversationStore:
        """Open (and set up on first use) the store at a path or URL.

        ``pool_timeout`` bounds the seconds a caller waits for a PostgreSQL connection
        when every pooled one is in use (the pools' own 30 s without it); then the pool
        raises its timeout error (``PoolTimeout``, SQLAlchemy's ``TimeoutError``).

        Raises:
            LocationError: The location cannot be read, or its driver is missing.
            ConversationStoreError: The file or database cannot be opened or set up.
        """
        location = where if isinstance(where, Location) else Location.parse(where)
        if location.path is not None:
            return _open_sqlite(location.path)
        if location.backend == "postgresql":
            return _open_postgres(location, pool_timeout)
        raise LocationError(
            f"Conversations can be kept in a SQLite file or in PostgreSQL, not in "
            f"{location.backend} ({location.shown()})."
        )

    @classmethod
    def in_memory(cls) -> ConversationStore:
        """Return a store that keeps nothing after the process (for tests and tools)."""
        from langgraph.checkpoint.memory import InMemorySaver

        registry = SessionRegistry.in_memory()
        return cls(
            InMemorySaver(),
            registry,
            LocalTurnLocks(),
            location=":memory:",
            closers=(registry.close,),
        )

    def acquire(self, thread_id: str, wait: float = 0.0) -> TurnLease:
        """Take the turn lock of ``thread_id`` (see ``TurnLocks.acquire``)."""
        return self.locks.acquire(thread_id, wait)

    def busy(self, thread_id: str) -> bool:
        """Tell whether a turn of ``thread_id`` runs anywhere."""
        return self.locks.busy(thread_id)

    @contextmanager
    def turn_lock(self, thread_id: str, wait: float = 0.0) -> Iterator[None]:
        """Hold the turn lock of ``thread_id`` for the ``with`` block.

        Raises:
            ConversationBusyError: Someone else holds it (after ``wait`` seconds).
        """
        lease = self.locks.acquire(thread_id, wait)
        try:
            yield
        finally:
            lease.release()

    def close(self) -> None:
        """Close the connections (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        for close in self._closers:
            with suppress(Exception):
                close()

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def lock_file_of(path: Path) -> Path:
    """Return the turn-lock file beside the SQLite sessions file ``path``."""
    return path.with_name(path.name + ".lock")


def sqlite_checkpointer(connection: sqlite3.Connection) -> Any:
    """Return a set-up ``SqliteSaver`` on ``connection``, tuned for a turn's many steps.

    The saver puts the file in WAL mode; ``synchronous=NORMAL`` then syncs at WAL
    checkpoints instead of on every commit (a turn commits twice per graph step). A
    killed process loses nothing this way; a power cut can lose the last steps saved,
    never corrupt the file, and that is the case the program already recovers from: a
    write committed in the travel database with no checkpoint after it is reported as
    done from its stored record (``assistants.approvals``). Values are stored compressed
    (``CompressingSerializer``). The saver remembers the state each run of this process
    ends with, so the next run of the thread starts without reading it back
    (``conversations.remembered_state``). Measured by ``scripts/bench_conversation.py``
    (BENCHMARKS.md). A claimed turn's writes are fenced (``conversations.fences``).
    """
    from conversations.checkpoint_serde import CompressingSerializer
    from conversations.fences import SqliteFence
    from conversations.loop_saver import SyncSaverOnLoop
    from conversations.remembered_state import RememberingSqliteSaver

    class ConversationSqliteSaver(SyncSaverOnLoop, SqliteFence, RememberingSqliteSaver):
        """LangGraph's ``SqliteSaver``, fenced, remembering its runs' last states."""

    saver = ConversationSqliteSaver(connection, serde=CompressingSerializer())
    saver.setup()
    connection.execute("PRAGMA synchronous=NORMAL")
    return saver


def _open_sqlite(path: Path) -> ConversationStore:

    if path.is_dir():
        raise ConversationStoreError(
            f"{path} is a folder, not a sessions file: give a file path or a URL."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        # The customers' words are in it: readable by its owner only. SQLite gives its
        # -wal and -shm files the same permissions. An existing file keeps its own.
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    closers: list[Callable[[], None]] = []
    try:
        checkpoints = sqlite3.connect(path, check_same_thread=False)
        closers.append(checkpoints.close)
        saver = sqlite_checkpointer(checkpoints)
        engine = open_engine(f"sqlite:///{path}")
        desk = Desk(engine)
        closers.append(desk.close)
        # The desk, the registry and the audit log take connections from one engine: the
        # service uses them from many threads while a turn writes checkpoints.
        registry, audit = SessionRegistry(engine), AuditLog(engine)
    except (sqlite3.DatabaseError, sa.exc.SQLAlchemyError, DeskStoreError) as error:
        for close in closers:
            close()
        raise ConversationStoreError(
            f"The session store {path} cannot be read ({error}). Move it aside to start afresh."
        ) from error
    from conversations.fences import FencedTurnLocks, SqliteClaims

    locks = FileTurnLocks(lock_file_of(path))
    return ConversationStore(
        saver,
        registry,
        FencedTurnLocks(locks, SqliteClaims(checkpoints, saver.lock), saver),
        location=str(path),
        closers=(locks.close, desk.close, checkpoints.close),
        audit=audit,
        desk=desk,
    )


def _open_postgres(location: Location, pool_timeout: float | None) -> ConversationStore:
    location.check_driver()
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from conversations.fences import (
            FencedTurnLocks,
            PostgresClaims,
            PostgresFence,
            fenced_pool,
        )
        from conversations.loop_saver import SyncSaverOnLoop
        from conversations.remembered_state import RemembersLastState
    except ImportError as error:
        raise LocationError(
            f"PostgreSQL conversations need {error.name or 'a module'} that is not installed; "
            f"install the extra: {INSTALL_POSTGRES}"
        ) from error

    conninfo = location.libpq()
    try:
        connection = psycopg.connect(
            conninfo, autocommit=True, row_factory=dict_row, connect_timeout=CONNECT_TIMEOUT_SECONDS
        )
    except psycopg.Error as error:
        raise ConversationStoreError(describe_connect_error(location, error)) from error
    try:
        with connection:
            # The desk, the registry and the audit log share one engine (it pings a
            # connection before handing it out); their tables are set up with the rest.
            engine = open_engine(location.sqlalchemy_url(), pool_timeout=pool_timeout)
            desk = Desk(engine)
            try:
                registry, audit = _setup_postgres(connection, engine)
            except BaseException:
                desk.close()
                raise
    except (psycopg.Error, sa.exc.SQLAlchemyError, DeskStoreError) as error:
        raise ConversationStoreError(
            f"The conversations database {location.shown()} cannot be set up: {first_line(error)}"
        ) from error

    pool = fenced_pool(
        conninfo,
        min_size=1,
        max_size=POOL_MAX_SIZE,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=ConnectionPool.check_connection,
        name="travel-assistant-conversations",
        open=True,
        **({} if pool_timeout is None else {"timeout": pool_timeout}),
    )

    def probe(key: int) -> bool:
        with pool.connection() as connection:
            row = connection.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1 "
                "AND granted) AS held",
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
            ).fetchone()
        return bool(row and row["held"])

    class ConversationPostgresSaver(
        SyncSaverOnLoop, PostgresFence, RemembersLastState, PostgresSaver
    ):
        """LangGraph's ``PostgresSaver``, fenced, remembering its runs' last states."""

    saver = ConversationPostgresSaver(pool)
    return ConversationStore(
        saver,
        registry,
        FencedTurnLocks(
            PostgresTurnLocks(location.sqlalchemy_url(), probe), PostgresClaims(pool), saver
        ),
        location=location.shown(),
        closers=(desk.close, pool.close),
        audit=audit,
        desk=desk,
    )


def _setup_postgres(connection: Any, engine: sa.Engine) -> tuple[SessionRegistry, AuditLog]:
    """Create the checkpoint tables, the registry and the audit log, one process at a time.

    Returns the registry and the audit log on ``engine``.

    The lock is polled rather than waited for: LangGraph's migrations build indexes
    ``CONCURRENTLY``, which wait for every open transaction, and a session blocked in
    ``pg_advisory_lock`` is one, so waiting there would deadlock.
    """
    from langgraph.checkpoint.postgres import PostgresSaver

    from conversations.fences import POSTGRES_CLAIMS_TABLE

    deadline = time.monotonic() + SETUP_WAIT_SECONDS
    while not connection.execute(
        "SELECT pg_try_advisory_lock(%s) AS taken", (SETUP_LOCK_KEY,)
    ).fetchone()["taken"]:
        if time.monotonic() > deadline:
            raise ConversationStoreError(
                "Another process has been setting up the conversations database for "
                f"{SETUP_WAIT_SECONDS:g} s; try again."
            )
        time.sleep(POLL_SECONDS)
    try:
        PostgresSaver(connection).setup()
        connection.execute(POSTGRES_CLAIMS_TABLE)
        return SessionRegistry(engine), AuditLog(engine)
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))
