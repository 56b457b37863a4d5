"""What the HTTP service does, without HTTP: conversations, turns and their events.

``ConversationService`` serves the conversation protocol (``conversations.protocol``) to
many passengers at once. It checks that a conversation belongs to the passenger asking
(one that does not is reported exactly like one that does not exist), runs each turn as a
task of the event loop (waiting for the model holds no thread) and keeps the turn's
outcomes, as the API's models, for every client that follows it. It decides nothing
about a turn and phrases nothing: the protocol does both, for the terminal too.

A turn keeps running when the client goes away: its reply is saved and the history
shows it. When the service stops, running turns are cancelled the terminal's way (the
conversation is closed as cancelled and can go on).

Nothing here knows the storage engine: the checkpoints go through the assistant's
checkpointer, the conversation list through a ``SessionStore`` and the turn locks
through ``TurnLocks`` (``conversations.locks``). With the store's locks, one turn at a
time holds across every worker process over the same store, on this machine or others:
a conversation whose turn runs in another worker (or in a terminal) answers 409.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, cast

from langgraph.checkpoint.base import BaseCheckpointSaver

from conversations import words
from conversations.audit import AuditLog, SqliteAuditLog
from conversations.desk import Check
from conversations.events import Cancel, Thread
from conversations.loop import turn_loop
from conversations.protocol import (
    Answer,
    Conversations,
    DecisionsError,
    Turn,
    TurnRefusedError,
)
from conversations.records import (
    ActionRecord,
    Activity,
    Approval,
    AssistantLine,
    CustomerLine,
    HandOver,
    Notice,
    Outcome,
    Record,
    ReplyPiece,
    TurnEnd,
    TurnFailure,
)
from conversations.sessions import SessionRecord, SessionStore
from server.markdown import reply_html
from server.schemas import (
    ActionItem,
    AssistantItem,
    CheckOut,
    ConversationOut,
    CustomerItem,
    DecisionIn,
    DoneEvent,
    ErrorEvent,
    HistoryItem,
    NoticeItem,
    PendingActionOut,
    PendingEvent,
    PreviewOut,
    RecordEvent,
    StatusEvent,
    StreamEvent,
)
from server.schemas import MessageEvent as MessageOut
from server.schemas import TokenEvent as TokenOut

if TYPE_CHECKING:
    from conversations.assistant import TravelAssistant
    from conversations.desk import Desk
    from conversations.locks import TurnLocks
    from conversations.store import ConversationStore

log = logging.getLogger(__name__)

# Seconds without an event after which a turn's stream says it is alive (a comment), so
# that proxies and browsers do not take a long silence of the model for a dead stream.
KEEPALIVE_SECONDS = 15.0
LIST_LIMIT = 50
# How long the events of a finished turn are kept for a client that comes back.
JOURNAL_SECONDS = 300.0
UNEXPECTED_ERROR = words.SERVICE_FAILED
STILL_ANSWERING = (
    "The assistant is still answering in this conversation; wait for the reply to finish."
)
STOPPING = "The service is stopping; try again in a moment."
# How often a worker looks for checks staff decided that nobody went on with (their
# decider stopped before it could).
SWEEP_SECONDS = 30.0


class ServiceError(Exception):
    """A request the service refuses; ``status`` is the HTTP status that says so."""

    status = 400

    def __init__(self, detail: str) -> None:
        """Carry ``detail``, written for the caller."""
        super().__init__(detail)
        self.detail = detail


class NotFoundError(ServiceError):
    """No such conversation for this passenger (it may belong to another)."""

    status = 404


class ConflictError(ServiceError):
    """The request does not fit the conversation's state (a turn running, no approval)."""

    status = 409


class UnavailableError(ServiceError):
    """The conversations database cannot be reached; the request changed nothing."""

    status = 503


class ForbiddenError(ServiceError):
    """The token names a passenger the travel database does not know."""

    status = 403


class LockedSessions:
    """A ``SessionStore`` used from many threads: one call at a time."""

    def __init__(self, store: SessionStore) -> None:
        """Guard ``store`` (a SQLite connection must not interleave transactions)."""
        self._store = store
        self._lock = threading.Lock()

    def delete(self, thread_id: str) -> bool:
        """Forget ``thread_id``; return whether it was there."""
        with self._lock:
            return self._store.delete(thread_id)

    def rename(self, thread_id: str, title: str) -> bool:
        """Set the title of ``thread_id``; return whether it was there."""
        with self._lock:
            return self._store.rename(thread_id, title)

    def get(self, thread_id: str) -> SessionRecord | None:
        """Return the record of ``thread_id``, or ``None``."""
        with self._lock:
            return self._store.get(thread_id)

    def touch(self, thread_id: str, passenger_id: str, now: datetime, title: str = "") -> None:
        """Create the record or mark it used at ``now``."""
        with self._lock:
            self._store.touch(thread_id, passenger_id, now, title)

    def list(self, passenger_id: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Return the most recently used records first."""
        with self._lock:
            return self._store.list(passenger_id, limit)


# --- turns ---------------------------------------------------------------------------------


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
                service or elsewhere), or the service is stopping.
            UnavailableError: Where the turn locks live cannot be reached.
        """
        with self._lock:
            if self._closed:
                raise ConflictError(STOPPING)
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
            ConflictError: The service is stopping.
        """
        loop = asyncio.get_running_loop()
        if self._closed:
            self.release(thread_id)
            raise ConflictError(STOPPING)
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
                journal.add(
                    ErrorEvent(
                        detail=words.with_reference(UNEXPECTED_ERROR, reference),
                        kind="unexpected",
                        reference=reference,
                    )
                )
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

    def close(self, wait: float = 30.0) -> None:
        """Cancel the running turns and wait for them to close (call it off the loop)."""
        with self._lock:
            self._closed = True
            cancels = [running.cancel for running in self._running.values()]
        for cancel in cancels:
            cancel.set()
        loop, tasks = self._loop, list(self._tasks)
        if loop is None or not tasks or loop.is_closed() or not loop.is_running():
            return

        async def finished() -> None:
            await asyncio.wait(tasks, timeout=wait)

        with contextlib.suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(finished(), loop).result(wait + 1)


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


@dataclass(frozen=True)
class FailedTurn:
    """A turn that failed or was cancelled, as a supervisor sees it (``detail``: the operator's)."""

    at: datetime
    kind: str
    text: str
    detail: str | None


class RecentFailures:
    """The last failed turns of each conversation served by this process, for supervisors.

    Kept in memory: a model-server failure leaves nothing in the conversation itself.
    """

    KEEP = 20

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._by_thread: dict[str, deque[FailedTurn]] = {}

    def add(self, thread_id: str, kind: str, text: str, detail: str | None) -> None:
        """Remember that a turn of ``thread_id`` failed just now."""
        entry = FailedTurn(datetime.now(UTC), kind, text, detail)
        with self._lock:
            self._by_thread.setdefault(thread_id, deque(maxlen=self.KEEP)).append(entry)

    def of(self, thread_id: str) -> list[FailedTurn]:
        """Return the failures of ``thread_id``, oldest first."""
        with self._lock:
            return list(self._by_thread.get(thread_id, ()))


# --- outcomes as the API's models ----------------------------------------------------------


def approval_out(approval: Approval) -> PendingActionOut:
    """Return a pending action as the API shows it: the terminal's lines, the amount apart."""
    return PendingActionOut(
        tool_call_id=approval.tool_call_id,
        tool=approval.tool,
        assistant=approval.assistant,
        assistant_label=approval.label,
        preview=PreviewOut(
            title=approval.title,
            lines=list(approval.lines),
            amount=approval.amount,
            amount_kind=approval.amount_kind,
            error=approval.refusal,
        ),
        check=check_out(approval.check) if approval.check is not None else None,
    )


def check_out(check: Check) -> CheckOut:
    """Return a second approval's check as the customer's API shows it."""
    status = cast('Literal["waiting", "approved", "refused"]', check.status)
    if check.decided:
        text = words.check_decided(check.staff, check.title, check.approved, check.reason)
    else:
        text = words.CHECK_WAITING
    return CheckOut(
        check_id=check.id, status=status, staff=check.staff, reason=check.reason, text=text
    )


def history_item(record: Record) -> HistoryItem:
    """Return one record of the history as the API's item."""
    if isinstance(record, CustomerLine):
        return CustomerItem(id=record.id, text=record.text)
    if isinstance(record, AssistantLine):
        return AssistantItem(
            id=record.id,
            assistant=record.assistant,
            label=record.label,
            text=record.text,
            html=reply_html(record.text),
            person=record.person,
        )
    if isinstance(record, ActionRecord):
        return ActionItem(
            tool_call_id=record.tool_call_id,
            tool=record.tool,
            title=record.title,
            outcome=record.outcome,
            reason=record.reason,
            lines=list(record.lines),
            amount=record.amount,
            result=record.result,
            text=record.line,
        )
    return NoticeItem(text=record.text)


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def stream_events(outcome: Outcome) -> Iterator[StreamEvent]:
    """Return what a live turn's ``outcome`` sends to the client (often nothing)."""
    if isinstance(outcome, ReplyPiece):
        yield TokenOut(
            text=outcome.text,
            assistant=outcome.assistant,
            label=outcome.label,
            message_id=outcome.message_id,
        )
    elif isinstance(outcome, AssistantLine):
        yield MessageOut(
            id=outcome.id,
            assistant=outcome.assistant,
            label=outcome.label,
            text=outcome.text,
            html=reply_html(outcome.text),
        )
    elif isinstance(outcome, Activity):
        yield StatusEvent(text=f"{_capitalized(outcome.text)}…", tool=outcome.tool)
    elif isinstance(outcome, HandOver) and outcome.text:
        yield StatusEvent(text=f"{_capitalized(outcome.text)}.", tool=outcome.tool)
    elif isinstance(outcome, ActionRecord | Notice):
        # The status line says it at once; the record is what the history shows for it.
        status = outcome.status if isinstance(outcome, ActionRecord) else outcome.text
        yield StatusEvent(text=status, tool=getattr(outcome, "tool", None))
        item = history_item(outcome)
        assert isinstance(item, ActionItem | NoticeItem)
        yield RecordEvent(item=item)
    elif isinstance(outcome, TurnEnd):
        if outcome.approvals:
            yield PendingEvent(actions=[approval_out(a) for a in outcome.approvals])
        yield DoneEvent(
            pending_actions=len(outcome.approvals),
            assistant=outcome.assistant,
            label=outcome.label,
        )
    elif isinstance(outcome, TurnFailure):
        yield failure_event(outcome)


def failure_event(failure: TurnFailure, stopped: bool = False) -> ErrorEvent:
    """Return what the customer is told of ``failure``: never the operator's detail.

    A model-server failure is logged with a reference the customer can quote; a cancel
    the customer asked for (Stop, ``stopped``) says so.
    """
    if failure.kind == "cancelled" and stopped:
        return ErrorEvent(detail=words.CANCELLED["customer"], kind="stopped")
    if failure.kind in ("model", "time_limit"):  # its text is written for an operator
        reference = secrets.token_hex(4)
        log.warning("The model server failed [reference %s]: %s", reference, failure.detail)
        return ErrorEvent(
            detail=words.with_reference(words.MODEL_UNAVAILABLE, reference),
            kind=failure.kind,
            reference=reference,
        )
    return ErrorEvent(detail=failure.text, kind=failure.kind)


# --- the service ---------------------------------------------------------------------------


class ConversationService:
    """Conversations of many passengers over one ``TravelAssistant``."""

    def __init__(
        self,
        assistant: TravelAssistant,
        sessions: SessionStore,
        *,
        runner: TurnRunner | None = None,
        locks: TurnLocks | None = None,
        audit: AuditLog | None = None,
        desk: Desk | None = None,
        check_above: int | None = None,
    ) -> None:
        """Drive ``assistant``; ``sessions`` records who owns which conversation.

        ``locks`` keep one turn at a time per conversation beyond this process (the
        store's); without them, within this process only. ``audit`` records the
        supervisors' looks (the store's; without it, in memory only).
        """
        self.assistant = assistant
        self.sessions = LockedSessions(sessions)
        self.conversations = Conversations(
            assistant, self.sessions, locks, desk, check_above=check_above
        )
        self.runner = runner or TurnRunner()
        self.audit: AuditLog = audit if audit is not None else SqliteAuditLog.in_memory()
        self.failures = RecentFailures()
        self._sweeper: concurrent.futures.Future[None] | None = None

    @classmethod
    def over_store(
        cls, assistant: TravelAssistant, store: ConversationStore, *, check_above: int | None = None
    ) -> ConversationService:
        """Return the service over ``store``: its registry and its turn locks.

        ``assistant`` must save its checkpoints in ``store.saver``; ``check_above`` is
        the second approval's amount (``Conversations``).
        """
        return cls(
            assistant,
            store.registry,
            locks=store.locks,
            audit=store.audit,
            desk=store.desk,
            check_above=check_above,
        )

    # Conversations ------------------------------------------------------------------------

    def owned(self, passenger_id: str, conversation_id: str) -> Thread:
        """Return the conversation ``conversation_id`` of ``passenger_id``.

        Raises:
            NotFoundError: There is none, or it belongs to another passenger (the
                answer is the same, so ids reveal nothing).
        """
        conversation = self.conversations.owned(passenger_id, conversation_id)
        if conversation is None:
            raise NotFoundError(f"No conversation {conversation_id}.")
        return conversation.thread

    def create(self, passenger_id: str, conversation_id: str) -> ConversationOut:
        """Start a conversation for ``passenger_id``.

        Raises:
            ForbiddenError: The travel database has no such passenger.
        """
        if not self.conversations.check_passenger(passenger_id):
            raise ForbiddenError(
                f"Passenger {passenger_id} is not in the travel database; ask for a token "
                "for your own passenger id."
            )
        self.conversations.register(Thread(conversation_id, passenger_id))
        record = self.sessions.get(conversation_id)
        assert record is not None
        return self.summary(record)

    def passenger_conversations(self, passenger_id: str) -> list[ConversationOut]:
        """Return the passenger's conversations, most recently used first."""
        return [self.summary(r) for r in self.sessions.list(passenger_id, LIST_LIMIT)]

    def summary(self, record: SessionRecord) -> ConversationOut:
        """Return the API's view of one conversation."""
        conversation = self.conversations.get(Thread(record.thread_id, record.passenger_id))
        summary = conversation.summary()
        return ConversationOut(
            conversation_id=record.thread_id,
            title=record.title,
            created_at=record.created_at,
            updated_at=record.updated_at,
            assistant=summary.assistant,
            assistant_label=summary.label,
            pending_actions=summary.pending_actions,
            busy=self.runner.busy(record.thread_id) or conversation.busy(),
        )

    # Reading ------------------------------------------------------------------------------

    def history(self, thread: Thread) -> list[HistoryItem]:
        """Return the conversation as the customer saw it."""
        return [history_item(r) for r in self.conversations.get(thread).history()]

    def pending(self, thread: Thread) -> list[PendingActionOut]:
        """Return the actions waiting for a decision, each with its preview."""
        return [approval_out(a) for a in self.conversations.get(thread).approvals()]

    # Turns ---------------------------------------------------------------------------------

    def claim(self, thread: Thread) -> threading.Event:
        """Reserve ``thread`` for a turn (see ``TurnRunner.claim``); call it off the loop."""
        conversation = self.conversations.get(thread)
        return self.runner.claim(thread.thread_id, conversation.claim)

    def release(self, thread: Thread) -> None:
        """Free ``thread`` when a claimed request is refused."""
        self.runner.release(thread.thread_id)

    def start_message(
        self, thread: Thread, text: str, cancel: threading.Event | None = None
    ) -> Journaled:
        """Send the customer's ``text`` and stream the turn (call on the event loop).

        ``cancel`` is the event of a claim already made (``claim``); without it the
        conversation is claimed here. Actions still pending are dropped by the new
        message (answered as not done), as the API documents.

        Raises:
            ConflictError: A turn of this conversation is running.
        """
        if cancel is None:
            cancel = self.claim(thread)
        turn = self.runner.turn(thread.thread_id)
        # The message comes first in the stream, under the id the history gives it: a
        # client that follows the turn after a reload shows it before it is saved.
        message_id = str(uuid.uuid4())
        return self._stream(
            thread,
            lambda: turn.asend(
                text,
                cancel=cancel,
                cancelled_by="service",
                if_pending="supersede",
                message_id=message_id,
            ),
            first=[RecordEvent(item=CustomerItem(id=message_id, text=text))],
        )

    def check_decisions(self, thread: Thread, given: Sequence[DecisionIn]) -> None:
        """Check that the claimed ``thread``'s ``given`` decisions decide every pending action.

        Raises:
            ConflictError: Nothing is pending, a decision names an action that is not
                pending, or a pending action has no decision.
        """
        try:
            self.runner.turn(thread.thread_id).check([d.tool_call_id for d in given])
        except DecisionsError as error:
            raise ConflictError(error.text) from error

    def start_decisions(
        self, thread: Thread, cancel: threading.Event, given: Sequence[DecisionIn]
    ) -> Journaled:
        """Resolve the claimed ``thread``'s pending actions and stream the rest of the turn."""
        answers = {d.tool_call_id: Answer(d.approved, d.reason) for d in given}
        turn = self.runner.turn(thread.thread_id)
        return self._stream(
            thread, lambda: turn.aresolve(answers, cancel=cancel, cancelled_by="service")
        )

    def check_resume(self, thread: Thread) -> None:
        """Check that staff decided every check of the claimed ``thread``.

        Raises:
            ConflictError: Nothing waits for a check, or a check is still waiting.
        """
        try:
            self.runner.turn(thread.thread_id).check_checked()
        except DecisionsError as error:
            raise ConflictError(error.text) from error

    def start_resume(self, thread: Thread, cancel: threading.Event) -> Journaled:
        """Go on with the customer's kept answers once staff decided; stream the turn."""
        return self._start_resume(thread, cancel).read(pause=KEEPALIVE_SECONDS)

    def _start_resume(self, thread: Thread, cancel: threading.Event) -> Journal:
        turn = self.runner.turn(thread.thread_id)
        return self._start(
            thread, lambda: turn.aresume_checked(cancel=cancel, cancelled_by="service")
        )

    async def apply_checked(self, thread: Thread) -> bool:
        """Go on with ``thread``'s actions now that staff decided every check of them.

        Called when the last decision arrives, so that an approved action runs then,
        whether or not the customer's window is open: as a turn of this service, which
        the customer's page follows (``follow``) and whose end is in the history. Exactly
        once, whoever else tries too (the customer's window, another worker): under the
        conversation's claim, and only while decided checks are left.

        Returns whether it started; not when a turn of the conversation runs already (it
        is the one that goes on, or the sweep does later) or nothing is left to apply.
        """
        try:
            cancel = await asyncio.to_thread(self.claim, thread)
        except (ConflictError, UnavailableError) as error:
            log.info("The checked actions of %s wait: %s", thread.thread_id, error.detail)
            return False
        try:
            await asyncio.to_thread(self.check_resume, thread)
            self._start_resume(thread, cancel)
        except ConflictError:  # applied meanwhile, or a check still waits
            self.release(thread)
            return False
        except BaseException:
            self.release(thread)
            raise
        return True

    def start_background(self) -> None:
        """Start the sweep of decided checks on the turn loop (``serve`` does, once).

        The sweep goes on with what staff decided when its decider could not (it
        stopped in between): at once, then every ``SWEEP_SECONDS``.
        """
        if self._sweeper is None:
            self._sweeper = asyncio.run_coroutine_threadsafe(self._sweep(), turn_loop())

    async def _sweep(self) -> None:
        while True:
            try:
                decided = await asyncio.to_thread(self.conversations.desk.checks_to_apply)
                for thread in dict.fromkeys(Thread(c.thread_id, c.passenger_id) for c in decided):
                    await self.apply_checked(thread)
            except Exception:  # the store is away for now: the next sweep tries again
                log.exception("Looking for decided checks failed")
            await asyncio.sleep(SWEEP_SECONDS)

    def _stream(
        self,
        thread: Thread,
        run: Callable[[], AsyncGenerator[Outcome, None]],
        first: Sequence[StreamEvent] = (),
    ) -> Journaled:
        return self._start(thread, run, first).read(pause=KEEPALIVE_SECONDS)

    def _start(
        self,
        thread: Thread,
        run: Callable[[], AsyncGenerator[Outcome, None]],
        first: Sequence[StreamEvent] = (),
    ) -> Journal:
        thread_id = thread.thread_id

        async def work() -> AsyncIterator[StreamEvent]:
            for event in first:
                yield event
            try:
                async with aclosing(run()) as outcomes:
                    async for outcome in outcomes:
                        if isinstance(outcome, TurnFailure):
                            stopped = self.runner.stopped(thread_id)
                            if not (outcome.kind == "cancelled" and stopped):  # Stop: no error
                                self.failures.add(
                                    thread_id, outcome.kind, outcome.text, outcome.detail
                                )
                            if outcome.detail and outcome.kind not in ("model", "time_limit"):
                                log.warning("A turn of %s failed: %s", thread_id, outcome.detail)
                            yield failure_event(outcome, stopped)
                        else:
                            for event in stream_events(outcome):
                                yield event
            except Exception as error:
                reference = secrets.token_hex(4)
                log.exception("A turn of %s failed [reference %s]", thread_id, reference)
                self.failures.add(thread_id, "unexpected", UNEXPECTED_ERROR, repr(error))
                yield ErrorEvent(
                    detail=words.with_reference(UNEXPECTED_ERROR, reference),
                    kind="unexpected",
                    reference=reference,
                )

        return self.runner.start(thread_id, work)

    def follow(self, thread: Thread, last_event_id: str | None) -> Journaled | None:
        """Return the events of the turn this process runs (or just ran) for ``thread``.

        From the one after ``last_event_id`` when it names this turn, else from the
        start; ``None`` when no turn of it ran here lately (it may run in another
        worker: ``summary`` says whether it is busy). Call it on the event loop.
        """
        journal = self.runner.follow(thread.thread_id)
        if journal is None:
            return None
        return journal.read(journal.position(last_event_id), pause=KEEPALIVE_SECONDS)

    def stop(self, thread: Thread) -> None:
        """Cancel the running turn of ``thread`` as Ctrl-C does in the terminal.

        Raises:
            ConflictError: No turn of it runs here (none at all, or one elsewhere).
        """
        if self.runner.stop(thread.thread_id):
            return
        if self.conversations.get(thread).busy():
            raise ConflictError(words.STOP_ELSEWHERE)
        raise ConflictError(words.NOTHING_RUNNING)

    def rename(self, thread: Thread, title: str) -> ConversationOut:
        """Give ``thread`` a new title; return its summary."""
        if not self.sessions.rename(thread.thread_id, title):
            raise NotFoundError(f"No conversation {thread.thread_id}.")
        record = self.sessions.get(thread.thread_id)
        if record is None:  # deleted in between
            raise NotFoundError(f"No conversation {thread.thread_id}.")
        return self.summary(record)

    def delete(self, thread: Thread) -> None:
        """Delete ``thread``: its checkpoints and its record (call it off the event loop).

        Raises:
            ConflictError: A turn of it is running (here or elsewhere).
        """
        try:
            self.claim(thread)
        except ConflictError as error:
            raise ConflictError(words.DELETE_WHILE_BUSY) from error
        try:
            saver = self.assistant.graph.checkpointer
            if isinstance(saver, BaseCheckpointSaver):
                saver.delete_thread(thread.thread_id)
            self.sessions.delete(thread.thread_id)
            # No check may wait for an action that can no longer run.
            self.conversations.desk.end_checks(thread.thread_id, "withdrawn")
        finally:
            self.release(thread)

    def close(self) -> None:
        """Cancel running turns and wait for them (the service is stopping)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        self.runner.close()
