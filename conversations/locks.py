"""One turn at a time per conversation: in this process, across processes, across machines.

On SQLite it is an ``fcntl`` lock on one byte of a lock file beside the sessions file
(``sessions.sqlite.lock``, one byte per conversation); on PostgreSQL it is
``pg_try_advisory_lock`` on a key derived from the thread id, held on a connection of its
own for the turn. Either way the operating system or the database server releases it
when the holder dies, even by SIGKILL, so there is no lease to renew and no stale lock to
clean up. A second taker is told ``ConversationBusyError``.

A lock can be lost while its holder still runs (its connection cut, its file removed);
``conversations.fences`` makes sure such a turn can no longer save anything.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from locations import CONNECT_TIMEOUT_SECONDS, first_line

if TYPE_CHECKING:
    import sqlalchemy as sa

__all__ = [
    "ConversationBusyError",
    "ConversationStoreError",
    "FileTurnLocks",
    "LocalTurnLocks",
    "PostgresTurnLocks",
    "TurnLease",
    "TurnLocks",
    "new_lease",
]

# How often a waiting taker tries the lock again (seconds).
POLL_SECONDS = 0.1
# Turn locks on PostgreSQL: the server probes the holder's connection, so a machine that
# vanished without closing it (power lost, network cut) frees its locks within a minute.
LOCK_KEEPALIVE_SETTINGS = (
    ("tcp_keepalives_idle", "20"),
    ("tcp_keepalives_interval", "10"),
    ("tcp_keepalives_count", "3"),
)


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


class TurnLostError(Exception):
    """A running turn lost its lock (another holder took the conversation): it must stop.

    Raised by whatever notices the loss (the fenced checkpoint saver); the protocol
    reports the turn as ``TurnFailure`` ``lost_claim``.
    """


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


def new_lease(free: Callable[[], None]) -> TurnLease:
    """Return a lease that calls ``free`` on its first ``release``."""
    return _Lease(free)


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

    The connection is opened for the turn and closed after it (an engine without a pool,
    in autocommit); when the holder dies its connection closes and the server drops the
    lock at once.
    """

    def __init__(self, url: str, probe: Callable[[int], bool]) -> None:
        """Connect to the SQLAlchemy ``url``; ``probe(key)`` tells whether a key is locked."""
        import sqlalchemy as sa

        self.engine = sa.create_engine(
            url,
            poolclass=sa.pool.NullPool,
            isolation_level="AUTOCOMMIT",
            connect_args={
                "connect_timeout": CONNECT_TIMEOUT_SECONDS,
                "application_name": f"travel-assistant turn ({socket.gethostname()} "
                f"pid {os.getpid()})"[:63],
            },
        )
        self.local = LocalTurnLocks()
        self._probe = probe

    def _connect(self) -> sa.Connection:
        import sqlalchemy as sa

        try:
            connection = self.engine.connect()
        except sa.exc.DBAPIError as error:
            reason = first_line(error.orig or error).removeprefix("connection failed: ")
            raise ConversationStoreError(
                f"The conversations database cannot be reached to start this turn ({reason}); "
                "try again."
            ) from error
        try:
            for name, value in LOCK_KEEPALIVE_SETTINGS:
                connection.execute(
                    sa.text("SELECT set_config(:name, :value, false)"),
                    {"name": name, "value": value},
                )
        except BaseException:
            connection.close()
            raise
        return connection

    def acquire(self, thread_id: str, wait: float = 0.0) -> TurnLease:
        """Take the lock of ``thread_id`` (see ``TurnLocks.acquire``).

        One connection is opened for the attempt and, when it succeeds, kept for the
        turn; a busy lock is asked again on it until ``wait`` runs out.

        Raises:
            ConversationBusyError: Someone else holds it.
            ConversationStoreError: The database cannot be reached.
        """
        import sqlalchemy as sa

        deadline = time.monotonic() + max(0.0, wait)
        _retry(lambda: self.local.take(thread_id), thread_id, wait)
        key = _lock_key(thread_id)
        try:
            connection = self._connect()
            try:
                while not connection.execute(
                    sa.text("SELECT pg_try_advisory_lock(:key)"), {"key": key}
                ).scalar():
                    if time.monotonic() >= deadline:
                        raise ConversationBusyError(thread_id)
                    time.sleep(POLL_SECONDS)
            except BaseException:
                connection.close()
                raise
        except sa.exc.DBAPIError as error:
            self.local.drop(thread_id)
            raise ConversationStoreError(
                f"The conversations database failed while starting this turn "
                f"({first_line(error.orig or error)}); try again."
            ) from error
        except BaseException:
            self.local.drop(thread_id)
            raise

        def free() -> None:
            try:
                with suppress(Exception):
                    connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                with suppress(Exception):
                    connection.close()  # closing alone would free it too
            finally:
                self.local.drop(thread_id)

        return _Lease(free)

    def busy(self, thread_id: str) -> bool:
        """Tell whether any session holds the lock of ``thread_id``."""
        return self.local.busy(thread_id) or self._probe(_lock_key(thread_id))
