"""Where conversations live: LangGraph's checkpoints, the session registry and turn locks.

``ConversationStore.open`` takes a SQLite file path (the default is
``<home>/sessions.sqlite``), a ``sqlite:///`` URL or a PostgreSQL URL
(``postgresql+psycopg://user@host:5432/name``) and gives the three things the terminal
program and the HTTP service share:

- ``saver``: the checkpointer (``SqliteSaver``, or ``PostgresSaver`` over a psycopg
  connection pool), set up on first use;
- ``registry``: who owns which conversation, and its title and times
  (``db.sessions``), in the same file or database;
- ``turn_lock(thread_id)``: one turn at a time per conversation, across processes and
  machines. On SQLite it is an ``fcntl`` lock on one byte of a lock file beside the
  sessions file (``sessions.sqlite.lock``, one byte per conversation); on PostgreSQL it
  is ``pg_try_advisory_lock`` on a key derived from the thread id, held on a connection
  of its own for the turn. Either way the operating system or the database server
  releases it when the holder dies, even by SIGKILL, so there is no lease to renew and
  no stale lock to clean up. A second taker is told ``ConversationBusyError``.

``Location`` reads what the user gave (``--db``, ``--conversations`` or their
environment variables): a path or a SQLAlchemy URL, with the driver checked and the
password kept out of everything shown.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from db.sessions import PostgresSessionRegistry, SessionRegistry, SessionStore

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from sqlalchemy.engine import URL

__all__ = [
    "INSTALL_POSTGRES",
    "ConversationBusyError",
    "ConversationStore",
    "ConversationStoreError",
    "LocalTurnLocks",
    "Location",
    "LocationError",
    "TurnLease",
    "TurnLocks",
]

INSTALL_POSTGRES = 'pip install -e ".[postgres]"'
# How often a waiting taker tries the lock again (seconds).
POLL_SECONDS = 0.1
# Connections of the PostgreSQL pool (checkpoints and the registry; turn locks have
# their own). The checkpointer serialises its own calls, so a few are plenty.
POOL_MAX_SIZE = 8
CONNECT_TIMEOUT_SECONDS = 10
# Turn locks on PostgreSQL: the server probes the holder's connection, so a machine that
# vanished without closing it (power lost, network cut) frees its locks within a minute.
LOCK_KEEPALIVE_SETTINGS = (
    ("tcp_keepalives_idle", "20"),
    ("tcp_keepalives_interval", "10"),
    ("tcp_keepalives_count", "3"),
)
# Schema set-up by several processes at once is serialised with this advisory lock.
SETUP_LOCK_KEY = 0x7472_6176_656C_5353  # "travelSS"
SETUP_WAIT_SECONDS = 60.0


class LocationError(Exception):
    """A path or URL that cannot be used; the message names the fix."""


class ConversationStoreError(Exception):
    """The conversation store cannot be opened; the message names the fix."""


class ConversationBusyError(Exception):
    """Another window, terminal or worker is running a turn of this conversation."""

    def __init__(self, thread_id: str) -> None:
        """Name the conversation."""
        super().__init__(
            f"Conversation {thread_id} is busy: the assistant is answering in another "
            "window, terminal or server. Try again when it has answered."
        )
        self.thread_id = thread_id


# --- locations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """A database named by the user: a SQLite file, or a server URL.

    Attributes:
        given: The text as given (a path or a URL); it may hold a password.
        backend: ``sqlite``, ``postgresql`` or another SQLAlchemy backend name.
        path: The file of a SQLite database (``None`` for a server).
        url: The SQLAlchemy URL of a server database, its driver made explicit
            (``postgresql://`` means psycopg 3, the driver the extra installs).
    """

    given: str
    backend: str
    path: Path | None = None
    url: URL | None = None
    display: str = ""

    @classmethod
    def parse(cls, text: str | Path) -> Location:
        """Read a path or a SQLAlchemy URL.

        Raises:
            LocationError: An empty value, a URL that cannot be read, or a SQLite URL
                without a file.
        """
        given = str(text).strip()
        if not given:
            raise LocationError("The database location is empty: give a file path or a URL.")
        if "://" not in given:
            return cls(given, "sqlite", path=Path(given).expanduser())
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(given)
        except (ArgumentError, ValueError) as error:
            raise LocationError(
                f"{_mask(given)} is not a database URL; write it as "
                "postgresql+psycopg://USER@HOST:5432/NAME, sqlite:///PATH, or give a file path."
            ) from error
        backend = url.get_backend_name()
        if backend == "sqlite":
            if not url.database or url.database == ":memory:":
                raise LocationError(
                    f"{given} names no file: write sqlite:///PATH (four slashes for an "
                    "absolute path), or give the path itself."
                )
            return cls(given, "sqlite", path=Path(url.database).expanduser())
        shown = _hide_password(url)
        if backend in ("postgresql", "postgres"):
            driver = url.get_driver_name() if "+" in url.drivername else "psycopg"
            url = url.set(drivername=f"postgresql+{driver}")
            backend = "postgresql"
        return cls(given, backend, url=url, display=shown)

    @property
    def is_file(self) -> bool:
        """Tell whether this is a SQLite file."""
        return self.path is not None

    @property
    def has_password(self) -> bool:
        """Tell whether the URL carries a password (in its user part or its query)."""
        return self.url is not None and bool(self.url.password or self.url.query.get("password"))

    def sqlalchemy_url(self) -> str:
        """Return what ``db.engine.Database.from_url`` takes: the path, or the full URL."""
        if self.path is not None:
            return str(self.path)
        assert self.url is not None
        return self.url.render_as_string(hide_password=False)

    def libpq(self) -> str:
        """Return the URL as libpq (psycopg) takes it: ``postgresql://…``."""
        assert self.url is not None
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    def shown(self) -> str:
        """Return the location as it may be printed: the path, or the URL without password."""
        if self.path is not None:
            return str(self.path)
        return self.display or _mask(self.given)

    def for_command(self) -> str:
        """Return the location for a command line to repeat: an absolute path, or the URL.

        The URL keeps its form, with any password shown as ``***``.
        """
        if self.path is not None:
            if "://" in self.given:
                return f"sqlite:///{self.path.absolute()}"
            return str(self.path.absolute())
        return self.shown()

    def check_driver(self) -> None:
        """Check that the driver of a server URL can be imported.

        Raises:
            LocationError: The SQLAlchemy dialect is unknown, or its driver is not
                installed (for PostgreSQL the message names the extra to install).
        """
        if self.url is None:
            return
        from sqlalchemy.exc import NoSuchModuleError

        try:
            self.url.get_dialect().import_dbapi()
        except NoSuchModuleError as error:
            raise LocationError(
                f"{self.shown()}: SQLAlchemy has no database type {self.url.drivername!r}; "
                "use a SQLite file or postgresql+psycopg://USER@HOST:5432/NAME."
            ) from error
        except ImportError as error:
            if self.backend == "postgresql":
                raise LocationError(
                    f"PostgreSQL support is not installed (no {error.name or 'driver'} "
                    f"module); install the extra: {INSTALL_POSTGRES}"
                ) from error
            raise LocationError(
                f"The driver of {self.url.drivername} is not installed ({error})."
            ) from error


def _hide_password(url: URL) -> str:
    """Return ``url`` as text with its password, wherever it is, shown as ``***``."""
    if url.query.get("password"):
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)


def _mask(text: str) -> str:
    """Return ``text`` with the password of a URL in it replaced by ``***``."""
    if "://" not in text:
        return text
    scheme, _, rest = text.partition("://")
    authority, slash, tail = rest.partition("/")
    credentials, at, host = authority.rpartition("@")
    if not at or ":" not in credentials:
        return text
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}{slash}{tail}"


# --- turn locks ----------------------------------------------------------------------------


class TurnLease(Protocol):
    """A turn lock held; ``release`` frees it (a second call does nothing)."""

    def release(self) -> None:
        """Free the lock."""


class TurnLocks(Protocol):
    """One turn at a time per conversation."""

    def acquire(self, thread_id: str, wait: float = 0.0) -> TurnLease:
        """Take the lock of ``thread_id``, trying for up to ``wait`` seconds.

        Raises:
            ConversationBusyError: Someone else holds it.
            ConversationStoreError: Where the locks live cannot be reached.
        """

    def busy(self, thread_id: str) -> bool:
        """Tell whether someone holds the lock of ``thread_id`` (a hint: it can change)."""


@dataclass
class _Lease:
    free: Callable[[], None]
    released: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        with self._lock:
            if self.released:
                return
            self.released = True
        self.free()


class LocalTurnLocks:
    """Turn locks inside this process only (a store in memory, the tests' services).

    The cross-process locks below use it too: a lock file or a database session would
    not keep two threads of one process apart.
    """

    def __init__(self) -> None:
        """Start with no conversation held."""
        self._held: set[str] = set()
        self._mutex = threading.Lock()

    def take(self, thread_id: str) -> bool:
        """Mark ``thread_id`` held unless it is; return whether this call took it."""
        with self._mutex:
            if thread_id in self._held:
                return False
            self._held.add(thread_id)
            return True

    def drop(self, thread_id: str) -> None:
        """Mark ``thread_id`` free."""
        with self._mutex:
            self._held.discard(thread_id)

    def acquire(self, thread_id: str, wait: float = 0.0) -> TurnLease:
        """Take ``thread_id`` in this process (see ``TurnLocks.acquire``)."""
        _retry(lambda: self.take(thread_id), thread_id, wait)
        return _Lease(lambda: self.drop(thread_id))

    def busy(self, thread_id: str) -> bool:
        """Tell whether a turn of ``thread_id`` runs in this process."""
        with self._mutex:
            return thread_id in self._held

    def idle(self) -> bool:
        """Tell whether no conversation is held."""
        with self._mutex:
            return not self._held


def _retry(attempt: Callable[[], bool], thread_id: str, wait: float) -> None:
    deadline = time.monotonic() + max(0.0, wait)
    while not attempt():
        if time.monotonic() >= deadline:
            raise ConversationBusyError(thread_id)
        time.sleep(POLL_SECONDS)


def _lock_key(thread_id: str) -> int:
    """Return the signed 64-bit key of ``thread_id``'s lock (advisory key, byte offset)."""
    digest = hashlib.blake2b(thread_id.encode("utf-8"), digest_size=8, person=b"ta-turn")
    return int.from_bytes(digest.digest(), "big", signed=True)


class _LockFile:
    """The lock file of one sessions file, shared by every store of this process.

    POSIX record locks belong to the process, not to a file descriptor: closing any
    descriptor of the file drops all of the process's locks on it, and two descriptors
    of one process never exclude each other. So each process keeps one descriptor per
    lock file, here, and exclusion between its own threads comes from ``LocalTurnLocks``.
    """

    _open: dict[str, _LockFile] = {}  # noqa: RUF012 (one table per process, on purpose)
    _table_lock = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.users = 0
        self.local = LocalTurnLocks()

    @classmethod
    def attach(cls, path: Path) -> _LockFile:
        key = str(path.absolute())
        with cls._table_lock:
            table = cls._open.get(key)
            if table is None:
                table = cls._open[key] = _LockFile(path)
            table.users += 1
            return table

    def detach(self) -> None:
        with self._table_lock:
            self.users -= 1
            self._close_if_unused()

    def _close_if_unused(self) -> None:
        # Called with the table lock held. Closing drops every lock of this process on
        # the file, so only when no store uses it and no turn holds it.
        if self.users <= 0 and self.local.idle():
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            self._open.pop(str(self.path.absolute()), None)

    def _descriptor(self) -> int:
        if self.fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        return self.fd

    def try_lock(self, thread_id: str) -> bool:
        if not self.local.take(thread_id):
            return False
        try:
            import fcntl
        except ImportError:  # no POSIX record locks (Windows): this process only
            return True
        try:
            with self._table_lock:
                descriptor = self._descriptor()
            # One byte per conversation, at an offset from its key (far beyond the end of
            # the empty file, which POSIX allows).
            fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _offset(thread_id))
        except OSError:
            self.local.drop(thread_id)
            return False
        return True

    def unlock(self, thread_id: str) -> None:
        with self._table_lock:
            if self.fd is not None:
                import fcntl

                with suppress(OSError):
                    fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, _offset(thread_id))
            self.local.drop(thread_id)
            self._close_if_unused()

    def busy(self, thread_id: str) -> bool:
        if self.local.busy(thread_id):
            return True
        if not self.path.exists():
            return False
        if not self.try_lock(thread_id):
            return True
        self.unlock(thread_id)
        return False


def _offset(thread_id: str) -> int:
    # A non-negative offset below 2**62 keeps clear of off_t overflow.
    return _lock_key(thread_id) & ((1 << 62) - 1)


class FileTurnLocks:
    """Turn locks in a lock file beside the SQLite sessions file (see ``_LockFile``)."""

    def __init__(self, path: Path) -> None:
        """Lock in the file at ``path`` (made on the first turn, readable by the user only)."""
        self.path = path
        self._file = _LockFile.attach(path)
        self._closed = False

    def acquire(self, thread_id: str, wait: float = 0.0) -> TurnLease:
        """Take the lock of ``thread_id`` (see ``TurnLocks.acquire``)."""
        _retry(lambda: self._file.try_lock(thread_id), thread_id, wait)
        return _Lease(lambda: self._file.unlock(thread_id))

    def busy(self, thread_id: str) -> bool:
        """Tell whether any process holds the lock of ``thread_id``."""
        return self._file.busy(thread_id)

    def close(self) -> None:
        """Stop using the lock file (locks still held stay held until released)."""
        if not self._closed:
            self._closed = True
            self._file.detach()


class PostgresTurnLocks:
    """Turn locks as PostgreSQL session-level advisory locks, one connection per turn.

    The connection is opened for the turn and closed after it; when the holder dies its
    connection closes and the server drops the lock at once.
    """

    def __init__(self, conninfo: str, probe: Callable[[int], bool]) -> None:
        """Connect with ``conninfo``; ``probe(key)`` tells whether a key is locked."""
        self.conninfo = conninfo
        self.local = LocalTurnLocks()
        self._probe = probe

    def _connect(self) -> Any:
        import psycopg

        try:
            connection = psycopg.connect(
                self.conninfo,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                application_name=f"travel-assistant turn ({socket.gethostname()} "
                f"pid {os.getpid()})"[:63],
            )
            for name, value in LOCK_KEEPALIVE_SETTINGS:
                connection.execute("SELECT set_config(%s, %s, false)", (name, value))
        except psycopg.Error as error:
            raise ConversationStoreError(
                "The conversations database cannot be reached to start this turn "
                f"({_first_line(error).removeprefix('connection failed: ')}); try again."
            ) from error
        return connection

    def acquire(self, thread_id: str, wait: float = 0.0) -> TurnLease:
        """Take the lock of ``thread_id`` (see ``TurnLocks.acquire``).

        One connection is opened for the attempt and, when it succeeds, kept for the
        turn; a busy lock is asked again on it until ``wait`` runs out.

        Raises:
            ConversationBusyError: Someone else holds it.
            ConversationStoreError: The database cannot be reached.
        """
        import psycopg

        deadline = time.monotonic() + max(0.0, wait)
        _retry(lambda: self.local.take(thread_id), thread_id, wait)
        key = _lock_key(thread_id)
        try:
            connection = self._connect()
            try:
                while not connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[
                    0
                ]:
                    if time.monotonic() >= deadline:
                        raise ConversationBusyError(thread_id)
                    time.sleep(POLL_SECONDS)
            except BaseException:
                connection.close()
                raise
        except psycopg.Error as error:
            self.local.drop(thread_id)
            raise ConversationStoreError(
                f"The conversations database failed while starting this turn "
                f"({_first_line(error)}); try again."
            ) from error
        except BaseException:
            self.local.drop(thread_id)
            raise

        def free() -> None:
            try:
                with suppress(Exception):
                    connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
                connection.close()  # closing alone would free it too
            finally:
                self.local.drop(thread_id)

        return _Lease(free)

    def busy(self, thread_id: str) -> bool:
        """Tell whether any session holds the lock of ``thread_id``."""
        return self.local.busy(thread_id) or self._probe(_lock_key(thread_id))


# --- the store -----------------------------------------------------------------------------


class ConversationStore:
    """The checkpointer, the session registry and the turn locks of one location."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        registry: SessionStore,
        locks: TurnLocks,
        *,
        location: str,
        closers: tuple[Callable[[], None], ...] = (),
    ) -> None:
        """Bundle the parts; ``closers`` run on ``close`` (use ``open`` rather than this)."""
        self.saver = saver
        self.registry = registry
        self.locks = locks
        self.location = location
        self._closers = closers
        self._closed = False

    @classmethod
    def open(cls, where: str | Path | Location) -> ConversationStore:
        """Open (and set up on first use) the store at a path or URL.

        Raises:
            LocationError: The location cannot be read, or its driver is missing.
            ConversationStoreError: The file or database cannot be opened or set up.
        """
        location = where if isinstance(where, Location) else Location.parse(where)
        if location.path is not None:
            return _open_sqlite(location.path)
        if location.backend == "postgresql":
            return _open_postgres(location)
        raise LocationError(
            f"Conversations can be kept in a SQLite file or in PostgreSQL, not in "
            f"{location.backend} ({location.shown()})."
        )

    @classmethod
    def in_memory(cls) -> ConversationStore:
        """Return a store that keeps nothing after the process (for tests and tools)."""
        from langgraph.checkpoint.memory import InMemorySaver

        connection = sqlite3.connect(":memory:", check_same_thread=False)
        return cls(
            InMemorySaver(),
            SessionRegistry(connection),
            LocalTurnLocks(),
            location=":memory:",
            closers=(connection.close,),
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
    (``db.remembered_state``). Measured by ``scripts/bench_conversation.py``
    (BENCHMARKS.md).
    """
    from db.checkpoint_serde import CompressingSerializer
    from db.remembered_state import RememberingSqliteSaver

    saver = RememberingSqliteSaver(connection, serde=CompressingSerializer())
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
    connections: list[sqlite3.Connection] = []
    try:
        checkpoints = sqlite3.connect(path, check_same_thread=False)
        connections.append(checkpoints)
        saver = sqlite_checkpointer(checkpoints)
        # The registry has a connection of its own: the service uses it from many threads
        # while a turn writes checkpoints.
        registry_connection = sqlite3.connect(path, check_same_thread=False)
        connections.append(registry_connection)
        registry = SessionRegistry(registry_connection)
    except sqlite3.DatabaseError as error:
        for connection in connections:
            connection.close()
        raise ConversationStoreError(
            f"The session store {path} cannot be read ({error}). Move it aside to start afresh."
        ) from error
    locks = FileTurnLocks(lock_file_of(path))
    return ConversationStore(
        saver,
        registry,
        locks,
        location=str(path),
        closers=(locks.close, registry.close, checkpoints.close),
    )


def _open_postgres(location: Location) -> ConversationStore:
    location.check_driver()
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver  # noqa: F401 (is it installed?)
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from db.remembered_state import remembering_postgres_saver
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
            _setup_postgres(connection)
    except psycopg.Error as error:
        raise ConversationStoreError(
            f"The conversations database {location.shown()} cannot be set up: {_first_line(error)}"
        ) from error

    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        conninfo,
        min_size=1,
        max_size=POOL_MAX_SIZE,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=ConnectionPool.check_connection,
        name="travel-assistant-conversations",
        open=True,
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

    return ConversationStore(
        remembering_postgres_saver(pool),
        PostgresSessionRegistry(pool),
        PostgresTurnLocks(conninfo, probe),
        location=location.shown(),
        closers=(pool.close,),
    )


def _setup_postgres(connection: Any) -> None:
    """Create the checkpoint tables and the registry, one process at a time.

    The lock is polled rather than waited for: LangGraph's migrations build indexes
    ``CONCURRENTLY``, which wait for every open transaction, and a session blocked in
    ``pg_advisory_lock`` is one, so waiting there would deadlock.
    """
    from langgraph.checkpoint.postgres import PostgresSaver

    from db.sessions import create_postgres_schema

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
        create_postgres_schema(connection)
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK_KEY,))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def database_missing(error: BaseException) -> bool:
    """Tell whether a connection failed because the PostgreSQL database does not exist."""
    if getattr(error, "sqlstate", None) == "3D000":
        return True
    return bool(re.search(r'database "[^"]*" does not exist', str(error)))


def describe_connect_error(location: Location, error: BaseException) -> str:
    """Say why a server database cannot be reached, and what to do."""
    reason = _first_line(error).removeprefix("connection failed: ")
    if database_missing(error):
        name = location.url.database if location.url is not None else "?"
        return (
            f"The PostgreSQL database {name!r} at {location.shown()} does not exist. "
            f"Create it first, for example: createdb {name}"
        )
    return f"Cannot connect to PostgreSQL at {location.shown()}: {reason}"


def create_postgres_database(location: Location) -> None:
    """Create the database a PostgreSQL URL names, connecting to the server's ``postgres``.

    Raises:
        ConversationStoreError: The server refused (no right to create databases, or
            it cannot be reached); the message says what to do.
    """
    import psycopg
    from psycopg import sql

    assert location.url is not None and location.url.database
    name = location.url.database
    maintenance = location.url.set(drivername="postgresql", database="postgres")
    try:
        with psycopg.connect(
            maintenance.render_as_string(hide_password=False),
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
        ) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.errors.DuplicateDatabase:
        return  # made in the meantime: fine
    except psycopg.Error as error:
        raise ConversationStoreError(
            f"Cannot create the PostgreSQL database {name!r} at {location.shown()}: "
            f"{_first_line(error).removeprefix('connection failed: ')}. "
            f"Create it yourself (for example: createdb {name}) and run the command again."
        ) from error
