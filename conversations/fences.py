"""Fenced turns: a turn that has lost its hold on a conversation can no longer write it.

A turn lock (``conversations.locks``) keeps one turn at a time only while it holds, and
it can be lost without its holder noticing: the connection that holds a PostgreSQL
advisory lock is killed (a server restart or failover, a network cut,
``idle_session_timeout``, a pooler, ``pg_terminate_backend``), or the lock file beside a
SQLite store is removed while a turn runs. A second worker then takes the lock and both
turns run; without a fence both would commit checkpoints to the conversation and each
customer would be shown a reply the history then lacks.

So each conversation has a claim number, in the table ``turn_claims`` of the database
that holds its checkpoints. Taking the turn lock raises the number and the turn keeps
the value it got (``FencedTurnLocks``). Every checkpoint and pending write the turn
saves is written in one transaction with a check that the number is still its own
(``FencedSaver``): on PostgreSQL the row is read ``FOR SHARE``, so a new claim waits
for a write in flight and every write after it sees the new number; on SQLite the
transaction takes the write lock (``BEGIN IMMEDIATE``) before it reads the number. A
turn whose conversation was claimed since is stopped at its next write with
``TurnClaimLostError``: nothing of it is saved from then on, so exactly one of two
overlapping turns commits, and the stopped one says so. Saves made outside a claimed
turn (the tests' savers, ``sessions delete``) are not checked.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from conversations.locks import (
    ConversationStoreError,
    TurnLease,
    TurnLocks,
    TurnLostError,
    new_lease,
)
from locations import first_line

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = [
    "SQLITE_CLAIMS_TABLE",
    "FencedSaver",
    "FencedTurnLocks",
    "PostgresClaims",
    "SqliteClaims",
    "TurnClaimLostError",
    "fenced_pool",
]

SQLITE_CLAIMS_TABLE = (
    "CREATE TABLE IF NOT EXISTS turn_claims (thread_id TEXT PRIMARY KEY, claim INTEGER NOT NULL)"
)
POSTGRES_CLAIMS_TABLE = (
    "CREATE TABLE IF NOT EXISTS turn_claims (thread_id TEXT PRIMARY KEY, claim BIGINT NOT NULL)"
)


class TurnClaimLostError(TurnLostError):
    """This turn's hold on the conversation was lost and another turn has claimed it."""

    def __init__(self, thread_id: str) -> None:
        """Name the conversation."""
        super().__init__(
            f"The turn of conversation {thread_id} lost its claim: another turn took the "
            "conversation, so nothing more of this one is saved."
        )
        self.thread_id = thread_id


class SqliteClaims:
    """Claim numbers in the SQLite file of the checkpoints, on the saver's connection."""

    def __init__(self, connection: sqlite3.Connection, lock: Any) -> None:
        """Use ``connection`` under ``lock`` (the saver's, which made the table)."""
        self.connection = connection
        self.lock = lock

    def __call__(self, thread_id: str) -> int:
        """Raise the claim number of ``thread_id`` and return it."""
        with self.lock:
            try:
                self.connection.execute("BEGIN IMMEDIATE")
                try:
                    self.connection.execute(
                        "INSERT INTO turn_claims (thread_id, claim) VALUES (?, 1) "
                        "ON CONFLICT (thread_id) DO UPDATE SET claim = claim + 1",
                        (thread_id,),
                    )
                    (claim,) = self.connection.execute(
                        "SELECT claim FROM turn_claims WHERE thread_id = ?", (thread_id,)
                    ).fetchone()
                except BaseException:
                    self.connection.rollback()
                    raise
                self.connection.commit()
            except sqlite3.Error as error:
                raise ConversationStoreError(
                    f"The session store failed while starting this turn ({error}); try again."
                ) from error
        return int(claim)


class PostgresClaims:
    """Claim numbers in the PostgreSQL database of the checkpoints."""

    def __init__(self, pool: Any) -> None:
        """Use connections of ``pool`` (the table is made by the store's set-up)."""
        self.pool = pool

    def __call__(self, thread_id: str) -> int:
        """Raise the claim number of ``thread_id`` and return it.

        A write of the previous holder still in flight holds the row ``FOR SHARE``; the
        update waits for it, so the new turn reads the conversation after that write.
        """
        import psycopg

        try:
            with self.pool.connection() as connection:
                row = connection.execute(
                    "INSERT INTO turn_claims (thread_id, claim) VALUES (%s, 1) "
                    "ON CONFLICT (thread_id) DO UPDATE SET claim = turn_claims.claim + 1 "
                    "RETURNING claim",
                    (thread_id,),
                ).fetchone()
        except psycopg.Error as error:
            raise ConversationStoreError(
                "The conversations database failed while starting this turn "
                f"({first_line(error)}); try again."
            ) from error
        return int(row["claim"] if isinstance(row, dict) else row[0])


class FencedSaver:
    """A checkpoint saver mixin that writes a claimed thread only while the claim stands.

    Use it through ``SqliteFence`` or ``PostgresFence``, put before the saver's class.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._claims: dict[str, int] = {}
        self._claims_lock = threading.Lock()
        self._writing = threading.local()

    def hold(self, thread_id: str, claim: int) -> None:
        """Check every write of ``thread_id`` from now on against ``claim``."""
        with self._claims_lock:
            self._claims[thread_id] = claim

    def let_go(self, thread_id: str, claim: int) -> None:
        """Stop checking the writes of ``thread_id`` (if ``claim`` is still the one held)."""
        with self._claims_lock:
            if self._claims.get(thread_id) == claim:
                del self._claims[thread_id]

    def _claim_of(self, config: RunnableConfig) -> tuple[str, int] | None:
        """The claim a write of ``config``'s thread must check, if any."""
        thread_id = str(config["configurable"]["thread_id"])
        with self._claims_lock:
            claim = self._claims.get(thread_id)
        return None if claim is None else (thread_id, claim)

    def _write_claim(self) -> tuple[str, int] | None:
        """The claim the write on this thread must check, if any."""
        claim: tuple[str, int] | None = getattr(self._writing, "claim", None)
        return claim

    # ``put`` and ``put_writes`` run for every step of every turn: the claim is set and
    # cleared around the saver's call directly, not through a context manager.
    def put(self, config: RunnableConfig, *args: Any, **kwargs: Any) -> RunnableConfig:
        """Save a checkpoint, in one transaction with the claim's check."""
        self._writing.claim = self._claim_of(config)
        try:
            return super().put(config, *args, **kwargs)  # type: ignore[misc, no-any-return]
        finally:
            self._writing.claim = None

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], *args: Any, **kwargs: Any
    ) -> None:
        """Save pending writes, in one transaction with the claim's check."""
        self._writing.claim = self._claim_of(config)
        try:
            super().put_writes(config, writes, *args, **kwargs)  # type: ignore[misc]
        finally:
            self._writing.claim = None


class SqliteFence(FencedSaver):
    """``FencedSaver`` for LangGraph's ``SqliteSaver`` (which writes through ``cursor``)."""

    conn: sqlite3.Connection
    lock: Any

    def setup(self) -> None:
        """Set up the saver's tables and the claim numbers'."""
        if getattr(self, "is_setup", False):
            return
        super().setup()  # type: ignore[misc]
        self.conn.execute(SQLITE_CLAIMS_TABLE)
        self.conn.commit()

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """The saver's cursor; a claimed write runs in a checked transaction."""
        claim = self._write_claim()
        if claim is None or not transaction:
            with super().cursor(transaction) as cursor:  # type: ignore[misc]
                yield cursor
            return
        with self._checked_cursor(claim) as cursor:
            yield cursor

    @contextmanager
    def _checked_cursor(self, claim: tuple[str, int]) -> Iterator[sqlite3.Cursor]:
        with self.lock:
            self.setup()
            cursor = self.conn.cursor()
            try:
                cursor.execute("BEGIN IMMEDIATE")  # the write lock first, then the check
                try:
                    row = cursor.execute(
                        "SELECT claim FROM turn_claims WHERE thread_id = ?", (claim[0],)
                    ).fetchone()
                    if row is None or int(row[0]) != claim[1]:
                        raise TurnClaimLostError(claim[0])
                    yield cursor
                except BaseException:
                    self.conn.rollback()
                    raise
                self.conn.commit()
            finally:
                cursor.close()


class PostgresFence(FencedSaver):
    """``FencedSaver`` for LangGraph's ``PostgresSaver`` over a pool from ``fenced_pool``.

    The saver takes a connection from its pool for every write; the pool checks the
    claim on it, in the transaction the write then runs in.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pool = getattr(self, "conn", None)
        if pool is not None and hasattr(pool, "claim_of"):  # a pool from ``fenced_pool``
            pool.claim_of = self._write_claim


def fenced_pool(conninfo: str, **options: Any) -> ConnectionPool[Any]:
    """Return a psycopg pool (``ConnectionPool`` with ``options``) that fences claimed writes.

    The class is made here, when a PostgreSQL store opens, so that SQLite stores never
    import psycopg.
    """
    from psycopg_pool import ConnectionPool

    class FencedPool(ConnectionPool):  # type: ignore[type-arg]
        """A pool whose connection, lent for a claimed write, checks the claim first.

        ``claim_of`` tells the claim that the write being made in this thread must check
        (``PostgresFence`` sets it to its saver's). With one, the connection is lent
        inside a transaction that first reads the conversation's claim number ``FOR
        SHARE``: a new claim waits for the write, every write after it sees the new
        number, and the check and the write commit together or not at all. LangGraph's
        ``PostgresSaver`` takes a connection from its pool for every write, so the fence
        needs nothing of the saver but its public constructor.
        """

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.claim_of: Callable[[], tuple[str, int] | None] = lambda: None

        @contextmanager
        def connection(self, timeout: float | None = None) -> Iterator[Any]:
            """Lend a connection; for a claimed write, in a transaction that checked it."""
            claim = self.claim_of()
            with super().connection(timeout) as connection:
                if claim is None:
                    yield connection
                    return
                with connection.transaction():
                    row = connection.execute(
                        "SELECT claim FROM turn_claims WHERE thread_id = %s FOR SHARE", (claim[0],)
                    ).fetchone()
                    found = row["claim"] if isinstance(row, dict) else (row[0] if row else None)
                    if found is None or int(found) != claim[1]:
                        raise TurnClaimLostError(claim[0])
                    yield connection

    return FencedPool(conninfo, **options)


class FencedTurnLocks:
    """Turn locks whose every lease is a claim the saver checks at each write."""

    def __init__(self, locks: TurnLocks, claims: Callable[[str], int], saver: FencedSaver) -> None:
        """Take ``locks``, then a claim number from ``claims(thread_id)`` for ``saver``."""
        self.locks = locks
        self.claims = claims
        self.saver = saver

    def acquire(self, thread_id: str, wait: float = 0.0) -> TurnLease:
        """Take the lock of ``thread_id`` and claim it (see ``TurnLocks.acquire``)."""
        lease = self.locks.acquire(thread_id, wait)
        try:
            claim = self.claims(thread_id)
        except BaseException:
            lease.release()
            raise
        self.saver.hold(thread_id, claim)

        def free() -> None:
            self.saver.let_go(thread_id, claim)
            lease.release()

        return new_lease(free)

    def busy(self, thread_id: str) -> bool:
        """Tell whether any process holds the lock of ``thread_id``."""
        return self.locks.busy(thread_id)
