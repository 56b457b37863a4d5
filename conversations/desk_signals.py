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

    def _listen(self) -> Any:
        """Return a new psycopg connection (autocommit) that listens on ``CHANNEL``."""
        import psycopg

        url = self.engine.url.set(drivername="postgresql")
        connection = psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)
        try:
            connection.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            connection.close()
            raise
        return connection


class Listener:
    """Waits for the desk's next change: a PostgreSQL ``LISTEN``, or a short sleep."""

    def __init__(self, connection: Any, reconnect: Callable[[], Any] | None = None) -> None:
        """Listen on ``connection`` (psycopg, autocommit, LISTENing), or poll without one.

        ``reconnect`` returns a new such connection, for when the server closes this one.
        """
        self.connection = connection
        self._reconnect = reconnect

    def wait(self, timeout: float) -> bool:
        """Wait until a change is signalled or ``timeout`` passes; return whether one was.

        Without notifications (SQLite) it sleeps ``POLL_SECONDS`` at most and answers
        ``False``: the caller looks anyway. A listening connection the server closed (a
        restart, ``pg_terminate_backend``) is replaced once, through ``reconnect``, and
        the answer is ``True``: a change may have come while nobody listened. When the
        new connection cannot be made either, its error is raised.
        """
        if self.connection is None:
            time.sleep(min(timeout, POLL_SECONDS))
            return False
        import psycopg

        try:
            for _ in self.connection.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.OperationalError:
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
