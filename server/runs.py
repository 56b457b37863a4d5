"""Turns as tasks of the event loop, and the journals of their events that clients follow.

``TurnRunner`` runs the service's turns, one per conversation at a time: it claims a
conversation in this process and, through the protocol's turn lock, beyond it, runs the
turn as a task of the event loop (waiting for the model holds no thread) and keeps its
events in a ``Journal``. Any number of clients read a journal, each from where it left
off (``Last-Event-ID``), while the turn runs and for ``JOURNAL_SECONDS`` after its end.
A turn belongs to the service, not to a client: it runs to its end or to its cancel
whatever its clients do.

What a turn does and what its events say is the caller's (``server.service``): here a
turn is a conversation id and a source of events, and a source that breaks ends with the
error a customer is told of a bug (``server.records_out.unexpected_event``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from conversations.events import Cancel
from conversations.protocol import Turn, TurnRefusedError
from server.errors import ConflictError, UnavailableError
from server.records_out import unexpected_event
from server.schemas import StreamEvent

log = logging.getLogger(__name__)

# Seconds without an event after which a turn's stream says it is alive (a comment), so
# that proxies and browsers do not take a long silence of the model for a dead stream.
KEEPALIVE_SECONDS = 15.0
# How long the events of a finished turn are kept for a client that comes back.
JOURNAL_SECONDS = 300.0
STILL_ANSWERING = (
    "The assistant is still answering in this conversation; wait for the reply to finish."
)
STOPPING = "The service is stopping; try again in a moment."
# Seconds a turn cancelled as the service stops is given to close (its note saved).
CANCEL_WAIT = 30.0


@dataclass
class _Running:
    cancel: Cancel = field(default_factory=Cancel)
    turn: Turn | None = None
    stopped: bool = False


class TurnRunner:
    """Run turns as tasks of the event loop, one per conversation at a time.

    ``claim`` reserves a conversation in this process and, through ``take``, beyond it
    (or refuses: a turn is running); ``start`` runs the claimed turn as a task and keeps
    its events in a journal that any number of clients read (``follow``). A turn belongs
    to the service, not to a client: it runs to its end or to its cancel whatever its
    clients do, and waiting for the model holds no thread.
    """

    def __init__(self) -> None:
        """Run no turn yet."""
        self._running: dict[str, _Running] = {}
        self._journals: dict[str, Journal] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._closed = False

    def busy(self, thread_id: str) -> bool:
        """Tell whether a turn of ``thread_id`` is running in this process."""
        with self._lock:
            return thread_id in self._running

    def claim(self, thread_id: str, take: Callable[[], Turn] | None = None) -> threading.Event:
        """Reserve ``thread_id`` for a turn; return the event that cancels it.

        ``take`` takes the conversation beyond this process (``Conversation.claim``),
        which may wait on the network (PostgreSQL): call it in a worker thread, not on
        the event loop.

        Raises:
            ConflictError: A turn of this conversation is already running (in this
                service or elsewhere).
            UnavailableError: Where the turn locks live cannot be reached, or the
                service is stopping (another worker can take the turn).
        """
        with self._lock:
            if self._closed:
                raise UnavailableError(STOPPING)
            if thread_id in self._running:
                raise ConflictError(STILL_ANSWERING)
            running = self._running[thread_id] = _Running()
        try:
            running.turn = take() if take is not None else None
        except TurnRefusedError as error:
            self._forget(thread_id)
            kind = UnavailableError if error.failure.kind == "unavailable" else ConflictError
            raise kind(error.failure.text) from error
        except BaseException:
            self._forget(thread_id)
            raise
        return running.cancel

    def turn(self, thread_id: str) -> Turn:
        """Return the turn ``claim`` took for ``thread_id``."""
        with self._lock:
            turn = self._running[thread_id].turn
        assert turn is not None, "claimed without taking the conversation"
        return turn

    def _forget(self, thread_id: str) -> _Running | None:
        with self._lock:
            return self._running.pop(thread_id, None)

    def release(self, thread_id: str) -> None:
        """Free ``thread_id`` (after its turn, or when the request is refused)."""
        running = self._forget(thread_id)
        if running is not None and running.turn is not None:
            try:
                running.turn.release()
            except Exception:  # the lock dies with its connection anyway
                log.exception("Releasing the turn lock of %s failed", thread_id)

    def stopped(self, thread_id: str) -> bool:
        """Tell whether the customer asked the running turn of ``thread_id`` to stop."""
        with self._lock:
            running = self._running.get(thread_id)
            return running is not None and running.stopped

    def stop(self, thread_id: str) -> bool:
        """Cancel the turn of ``thread_id`` running here, as Ctrl-C does in the terminal.

        Returns whether one was running in this process.
        """
        with self._lock:
            running = self._running.get(thread_id)
            if running is None:
                return False
            running.stopped = True
            running.cancel.set_by("cancelled")  # recorded as the customer's cancel
            return True

    def start(self, thread_id: str, work: Callable[[], AsyncIterator[StreamEvent]]) -> Journal:
        """Run ``work`` for the claimed ``thread_id`` as a task; return its journal.

        Call it on the event loop. The conversation is released when ``work`` ends; the
        journal keeps the turn's events, for clients that come back (``follow``), until
        the next turn of the conversation or ``JOURNAL_SECONDS`` after its end.

        Raises:
            UnavailableError: The service is stopping.
        """
        loop = asyncio.get_running_loop()
        if self._closed:
            self.release(thread_id)
            raise UnavailableError(STOPPING)
        self._loop = loop
        now = time.monotonic()
        for old in [k for k, j in self._journals.items() if j.expired(now)]:
            del self._journals[old]
        journal = self._journals[thread_id] = Journal(secrets.token_hex(4))

        async def produce() -> None:
            try:
                async for event in work():
                    journal.add(event)
            except Exception:  # work() reports its own errors; this is a bug
                reference = secrets.token_hex(4)
                log.exception("A turn of %s failed [reference %s]", thread_id, reference)
                journal.add(unexpected_event(reference))
            finally:
                # Freeing a lock held in PostgreSQL is a round trip: off the loop.
                await asyncio.to_thread(self.release, thread_id)
                journal.finish()

        task = loop.create_task(produce(), name=f"turn {thread_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return journal

    def stream(
        self, thread_id: str, work: Callable[[], AsyncIterator[StreamEvent]]
    ) -> AsyncIterator[StreamEvent]:
        """Run ``work`` as ``start`` does; yield its events (call it on the event loop)."""
        return _events(self.start(thread_id, work).read())

    def follow(self, thread_id: str, last_event_id: str | None = None) -> Journal | None:
        """Return the journal of the turn of ``thread_id`` run here (running or just over).

        ``None`` when this process ran none lately: the turn may run in another worker.
        Call it on the event loop.
        """
        journal = self._journals.get(thread_id)
        if journal is None or journal.expired(time.monotonic()):
            return None
        return journal

    def close(self, finish_by: float | None = None, wait: float = CANCEL_WAIT) -> None:
        """Take no new turn; let the running ones end until ``finish_by``, then cancel them.

        ``finish_by`` is a ``time.monotonic`` moment (``None``: cancel at once). A turn
        cancelled here closes as stopped by the service (its note saved); it is given
        ``wait`` seconds for that. Call it off the loop.
        """
        with self._lock:
            self._closed = True
        loop, tasks = self._loop, list(self._tasks)
        if loop is None or not tasks or loop.is_closed() or not loop.is_running():
            self._cancel_all()
            return
        left = 0.0 if finish_by is None else max(finish_by - time.monotonic(), 0.0)

        async def finished() -> None:
            if left > 0:
                _, pending = await asyncio.wait(tasks, timeout=left)
                if not pending:
                    return
                log.warning(
                    "Cancelling %d turn(s) still running after the graceful time", len(pending)
                )
            self._cancel_all()
            await asyncio.wait(tasks, timeout=wait)

        with contextlib.suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(finished(), loop).result(left + wait + 1)

    def _cancel_all(self) -> None:
        with self._lock:
            cancels = [running.cancel for running in self._running.values()]
        for cancel in cancels:
            cancel.set()


# A turn's events with their ids, in batches (``Journal.read``); an empty batch: the turn
# is still running, nothing came for a while.
Journaled = AsyncIterator[list[tuple[str, StreamEvent]]]


class Journal:
    """The events of one turn in order, kept so a client can read them from where it left off.

    Each event's id is ``<turn>.<n>`` (n from 1), sent as the server-sent event's id; a
    client that lost the stream reads on after the last id it saw (``Last-Event-ID``).
    Everything here runs on the event loop.
    """

    def __init__(self, turn: str) -> None:
        """Start the journal of the turn named ``turn``."""
        self.turn = turn
        self.events: list[StreamEvent] = []
        self.finished_at: float | None = None
        self._wakers: list[asyncio.Event] = []

    def add(self, event: StreamEvent) -> None:
        """Append ``event`` and wake the readers."""
        self.events.append(event)
        self._wake()

    def finish(self) -> None:
        """Mark the turn over and wake the readers."""
        self.finished_at = time.monotonic()
        self._wake()

    def _wake(self) -> None:
        for waker in self._wakers:
            waker.set()

    def expired(self, now: float) -> bool:
        """Tell whether the turn ended more than ``JOURNAL_SECONDS`` before ``now``."""
        return self.finished_at is not None and now - self.finished_at > JOURNAL_SECONDS

    def position(self, last_event_id: str | None) -> int:
        """Return how many events a client that saw ``last_event_id`` has read."""
        turn, _, number = (last_event_id or "").partition(".")
        if turn != self.turn or not number.isdigit():
            return 0
        return min(int(number), len(self.events))

    async def read(self, after: int = 0, pause: float | None = None) -> Journaled:
        """Yield ``(id, event)`` from the one after the ``after``-th until the turn is over.

        The events come in batches: all those that arrived since the last batch, so that
        a stream can send them in one write. With ``pause``, an empty batch also comes
        whenever that many seconds pass without an event, so that the stream can say it
        is alive (``KEEPALIVE_SECONDS``).
        """
        waker = asyncio.Event()
        self._wakers.append(waker)
        loop = asyncio.get_running_loop()
        try:
            position = after
            while True:
                if position < len(self.events):
                    first, position = position, len(self.events)
                    yield [
                        (f"{self.turn}.{number}", self.events[number - 1])
                        for number in range(first + 1, position + 1)
                    ]
                    continue  # more may have come while the batch was sent
                if self.finished_at is not None:
                    return
                waker.clear()
                if pause is None:
                    await waker.wait()
                    continue
                timer = loop.call_later(pause, waker.set)
                try:
                    await waker.wait()
                finally:
                    timer.cancel()
                if position == len(self.events) and self.finished_at is None:
                    yield []  # nothing came for ``pause`` seconds
        finally:
            self._wakers.remove(waker)


async def _events(read: Journaled) -> AsyncIterator[StreamEvent]:
    async for batch in read:
        for _, event in batch:
            yield event
