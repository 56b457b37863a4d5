"""What the HTTP service does, without HTTP: conversations, turns and their events.

``ConversationService`` serves the conversation protocol (``conversations.protocol``) to
many passengers at once. It checks that a conversation belongs to the passenger asking
(one that does not is reported exactly like one that does not exist), runs each turn as a
task of the event loop (waiting for the model holds no thread: ``server.runs``) and keeps
the turn's outcomes, as the API's models (``server.records_out``), for every client that
follows it. It decides nothing about a turn and phrases nothing: the protocol does both,
for the terminal too. What it refuses, it refuses with the errors of ``server.errors``.

A turn keeps running when the client goes away: its reply is saved and the history
shows it. When the service stops, running turns are cancelled the terminal's way (the
conversation is closed as cancelled and can go on).

Nothing here knows the storage engine: the checkpoints go through the assistant's
checkpointer, the conversation list through a ``SessionRegistry`` and the turn locks
through ``TurnLocks`` (``conversations.locks``). With the store's locks, one turn at a
time holds across every worker process over the same store, on this machine or others:
a conversation whose turn runs in another worker (or in a terminal) answers 409.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from langgraph.checkpoint.base import BaseCheckpointSaver

from conversations import words
from conversations.audit import AuditLog
from conversations.events import Thread
from conversations.loop import turn_loop
from conversations.protocol import Answer, Conversations, DecisionsError, TurnRefusedError
from conversations.records import ActionRecord, Outcome, TurnEnd, TurnFailure
from conversations.sessions import SessionRecord, SessionRegistry
from server.errors import ConflictError, ForbiddenError, NotFoundError, UnavailableError
from server.metrics import ServiceMetrics
from server.records_out import (
    UNEXPECTED_ERROR,
    approval_out,
    conversation_out,
    failure_event,
    history_item,
    stream_events,
    unexpected_event,
)
from server.runs import KEEPALIVE_SECONDS, Journal, Journaled, TurnRunner
from server.schemas import (
    ConversationOut,
    CustomerItem,
    DecisionIn,
    HistoryItem,
    PendingActionOut,
    RecordEvent,
    StreamEvent,
    Suggestions,
    WithdrawOut,
)

if TYPE_CHECKING:
    from conversations.assistant import TravelAssistant
    from conversations.desk import Desk
    from conversations.locks import TurnLocks
    from conversations.store import ConversationStore

log = logging.getLogger(__name__)

LIST_LIMIT = 50
# How often a worker looks for checks staff decided that nobody went on with (their
# decider stopped before it could).
SWEEP_SECONDS = 30.0


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


# --- the service ---------------------------------------------------------------------------


class ConversationService:
    """Conversations of many passengers over one ``TravelAssistant``."""

    def __init__(
        self,
        assistant: TravelAssistant,
        sessions: SessionRegistry,
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
        self.sessions = sessions
        self.conversations = Conversations(
            assistant, self.sessions, locks, desk, check_above=check_above
        )
        self.metrics = ServiceMetrics()
        self.metrics.watch_desk(self.conversations.desk)
        self.runner = runner or TurnRunner()
        self.audit: AuditLog = audit if audit is not None else AuditLog.in_memory()
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

    def suggestions(self, passenger_id: str) -> Suggestions:
        """Return what a new conversation of ``passenger_id`` offers to ask first."""
        return Suggestions(
            greeting=words.WELCOME,
            questions=self.conversations.first_questions(passenger_id),
        )

    def passenger_conversations(self, passenger_id: str) -> list[ConversationOut]:
        """Return the passenger's conversations, most recently used first."""
        return [self.summary(r) for r in self.sessions.list(passenger_id, LIST_LIMIT)]

    def summary(self, record: SessionRecord) -> ConversationOut:
        """Return the API's view of one conversation."""
        conversation = self.conversations.get(Thread(record.thread_id, record.passenger_id))
        summary = conversation.summary()
        busy = self.runner.busy(record.thread_id) or conversation.busy()
        return conversation_out(record, summary, busy)

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
            started = time.perf_counter()
            ended = "unexpected"
            try:
                async with aclosing(run()) as outcomes:
                    async for outcome in outcomes:
                        ended = _counted(self.metrics, outcome, ended)
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
                ended = "unexpected"
                reference = secrets.token_hex(4)
                log.exception("A turn of %s failed [reference %s]", thread_id, reference)
                self.failures.add(thread_id, "unexpected", UNEXPECTED_ERROR, repr(error))
                yield unexpected_event(reference)
            finally:
                seconds = time.perf_counter() - started
                self.metrics.turns.labels(ended).inc()
                self.metrics.turn_seconds.observe(seconds)
                facts = {
                    "outcome": ended,
                    "conversation_id": thread_id,
                    "seconds": round(seconds, 3),
                }
                log.info("turn ended: %s", ended, extra=facts)

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

    def use_metrics(self, metrics: ServiceMetrics) -> None:
        """Count into ``metrics`` (the application's, built before this service) from now on."""
        metrics.watch_desk(self.conversations.desk)
        self.metrics = metrics

    def withdraw(self, thread: Thread) -> WithdrawOut:
        """Withdraw the pending actions of ``thread`` at the customer's word (off the loop).

        What they approved and staff still check included: its check ends, and staff can
        no longer approve it.

        Raises:
            ConflictError: Nothing is pending, or a turn of it is running.
            UnavailableError: The conversations database cannot be reached.
        """
        try:
            notice = self.conversations.get(thread).withdraw_actions()
        except DecisionsError as error:
            raise ConflictError(error.text) from error
        except TurnRefusedError as error:
            if error.failure.kind == "unavailable":
                raise UnavailableError(error.failure.text) from error
            raise ConflictError(error.failure.text) from error
        return WithdrawOut(text=notice.text)

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

    def close(self, finish_by: float | None = None) -> None:
        """Take no new turn; let those running finish until ``finish_by``, then cancel them.

        ``finish_by`` is a ``time.monotonic`` moment (``None``: cancel at once); either
        way the turns are waited for (the service is stopping).
        """
        if self._sweeper is not None:
            self._sweeper.cancel()
        self.runner.close(finish_by)


def _counted(metrics: ServiceMetrics, outcome: Outcome, ended: str) -> str:
    """Count an action's end in ``metrics``; return how the turn stands after ``outcome``."""
    if isinstance(outcome, ActionRecord):
        metrics.actions.labels(outcome.outcome).inc()
    if isinstance(outcome, TurnFailure):
        return outcome.kind
    if isinstance(outcome, TurnEnd):
        return "done"
    return ended
