"""Telling the other side of a change at the desk: PostgreSQL's LISTEN/NOTIFY, or polling.

Every change (a request, a take, a message written, a hand-back, a check asked or
decided) is signalled to the other side: on PostgreSQL with ``NOTIFY travel_desk`` in the
same transaction, which a ``Listener`` (``LISTEN``, on a connection of its own) wakes on;
on SQLite a listener polls briefly (``POLL_SECONDS``). Either way a reader sees a change
within a second, and PostgreSQL readers ask the database nothing while nothing happens.
"""

from __future__ import annotations

import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

if TYPE_CHECKING:
    from collections.abc import Callable

CHANNEL = "travel_desk"
# How often a SQLite reader looks for changes; on PostgreSQL, how often a listener looks
# anyway (a notification lost while its connection was being replaced).
POLL_SECONDS = 0.5
LISTEN_FALLBACK_SECONDS = 10.0


class DeskSignals:
    """A part of the desk, on the desk's engine, that signals its changes to the other side."""

    engine: sa.Engine

    @property
    def notifies(self) -> bool:
        """Tell whether changes are signalled (PostgreSQL), not only found by polling."""
        return self.engine.dialect.name == "postgresql"

    def _changed(self, connection: sa.Connection, thread_id: str) -> None:
        """Signal a change of ``thread_id`` when the transaction of ``connection`` commits."""
        if self.notifies:
            connection.execute(
                sa.text("SELECT pg_notify(:channel, :thread)"),
                {"channel": CHANNEL, "thread": thread_id},
            )

    def listener(self) -> Listener:
        """Return a way to wait for the next change (close it when done).

        On PostgreSQL it listens on a connection of its own, which it opens again if the
        server closes it (``Listener.wait``).
        """
        if not self.notifies:
            return Listener(None)
        return Listener(self._listen(), reconnect=self._listen)

    def _listen(self) -> sa.Connection:
        """Return a connection of its own (autocommit) that listens on ``CHANNEL``.

        The engine's, taken out of its pool: closed, not pooled again, when the listener is
        done with it.
        """
        connection = self.engine.connect()
        try:
            connection.execution_options(isolation_level="AUTOCOMMIT")
            connection.detach()
            connection.exec_driver_sql(f"LISTEN {CHANNEL}")
        except BaseException:
            connection.close()
            raise
        return connection


class Listener:
    """Waits for the desk's next change: a PostgreSQL ``LISTEN``, or a short sleep."""

    def __init__(
        self,
        connection: sa.Connection | None,
        reconnect: Callable[[], sa.Connection] | None = None,
    ) -> None:
        """Listen on ``connection`` (autocommit, LISTENing), or poll without one.

        ``reconnect`` returns a new such connection, for when the server closes this one.
        """
        self.connection = connection
        self._reconnect = reconnect

    def wait(self, timeout: float) -> bool:
        """Wait until a change is signalled or ``timeout`` passes; return whether one was.

        Without notifications (SQLite) it sleeps ``POLL_SECONDS`` at most and answers
        ``False``: the caller looks anyway. The notifications are read from the driver's
        connection (psycopg's ``notifies``), whose errors are the driver's own. A
        listening connection the server closed (a restart, ``pg_terminate_backend``) is
        replaced once, through ``reconnect``, and the answer is ``True``: a change may
        have come while nobody listened. When the new connection cannot be made either,
        its error is raised.
        """
        if self.connection is None:
            time.sleep(min(timeout, POLL_SECONDS))
            return False
        driver: Any = self.connection.connection.dbapi_connection
        try:
            for _ in driver.notifies(timeout=timeout, stop_after=1):
                return True
        except self.connection.dialect.loaded_dbapi.OperationalError:
            if self._reconnect is None:
                raise
            lost, self.connection = self.connection, None
            with suppress(Exception):
                lost.close()
            self.connection = self._reconnect()
            return True
        return False

    def close(self) -> None:
        """Stop listening."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None
