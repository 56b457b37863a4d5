"""What the HTTP service does, without HTTP: conversations, turns and their events.

``ConversationService`` drives a ``conversations.TravelAssistant`` for many passengers at
once. It checks that a conversation belongs to the passenger asking (one that does not
is reported exactly like one that does not exist), runs each turn in a worker thread
(the graph's ``stream`` is synchronous) and hands the turn's events to the event loop,
one conversation turn at a time, and turns the assistant's messages into the API's
models: customer and assistant messages, approvals as structured items, never raw tool
text.

A turn keeps running when the client goes away: its reply is saved and the history
shows it. When the service stops, running turns are cancelled the terminal's way (the
conversation is closed as cancelled and can go on).

Nothing here knows the storage engine: the checkpoints go through the assistant's
checkpointer, the conversation list through a ``SessionStore`` and the turn locks
through ``TurnLocks`` (``conversations.store``). With the store's locks, one turn at a
time holds across every worker process over the same store, on this machine or others:
a conversation whose turn runs in another worker (or in a terminal) answers 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from assistants.approvals import ActionPreview, Decision, PendingAction, facts_of
from conversations.assistant import (
    MessageEvent,
    ModelProviderError,
    Thread,
    TokenEvent,
    TravelAssistant,
    TurnCancelledError,
    TurnEvent,
    is_cancel_note,
)
from conversations.sessions import SessionRecord, SessionStore
from conversations.store import (
    ConversationBusyError,
    ConversationStore,
    ConversationStoreError,
    LocalTurnLocks,
    TurnLease,
    TurnLocks,
)
from conversations.words import NOT_DONE_WORDS, TOOL_ACTIVITY, refusal_text
from server.schemas import (
    ActionItem,
    AssistantItem,
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
    StatusEvent,
    StreamEvent,
)
from server.schemas import MessageEvent as MessageOut
from server.schemas import TokenEvent as TokenOut

log = logging.getLogger(__name__)

PRIMARY = "primary_assistant"
# Turns that run at once; more wait for a free worker (their stream stays open).
TURN_WORKERS = 16
LIST_LIMIT = 50
Outcome = Literal["approved", "failed", "declined", "refused", "not_done"]


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


BUSY_ELSEWHERE = (
    "This conversation is busy in another window or on another server: the assistant is "
    "answering there. Try again when it has answered."
)


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


# --- words ---------------------------------------------------------------------------------


def message_text(message: AnyMessage) -> str:
    """Return the text of ``message`` (text blocks joined), without outer blanks."""
    content = message.content
    if isinstance(content, str):
        return content.strip()
    return "".join(
        str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content
    ).strip()


def preview_out(preview: ActionPreview) -> PreviewOut:
    """Return ``preview`` as the API shows it: the terminal's lines, the amount apart."""
    if preview.error:
        return PreviewOut(
            title=preview.title,
            lines=[],
            amount=None,
            amount_kind=None,
            error=refusal_text(preview),
        )
    return PreviewOut(
        title=preview.title,
        lines=list(preview.lines),
        amount=preview.amount_line,
        amount_kind=preview.amount.kind if preview.amount is not None else None,
        error=None,
    )


def _result_summary(message: ToolMessage) -> str | None:
    """Return the customer-facing summary a write tool put in its result, if any."""
    import json

    try:
        result = json.loads(str(message.content))
    except ValueError:
        return None
    summary = result.get("summary") if isinstance(result, dict) else None
    return str(summary) if summary else None


# --- turns ---------------------------------------------------------------------------------


@dataclass
class _Running:
    cancel: threading.Event = field(default_factory=threading.Event)
    lease: TurnLease | None = None


class TurnRunner:
    """Run turns in worker threads, one per conversation at a time.

    ``claim`` reserves a conversation (or refuses: a turn is running, here or, through
    ``locks``, in another process); ``stream`` runs the claimed turn in a worker and
    yields its events on the event loop. The worker never waits for the client: events
    are queued, and a turn whose client left runs to its end.
    """

    def __init__(self, workers: int = TURN_WORKERS, locks: TurnLocks | None = None) -> None:
        """Run at most ``workers`` turns at once; ``locks`` reach beyond this process."""
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="turn")
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.locks: TurnLocks = locks if locks is not None else LocalTurnLocks()

    def busy(self, thread_id: str) -> bool:
        """Tell whether a turn of ``thread_id`` is running (here, or where ``locks`` see)."""
        with self._lock:
            if thread_id in self._running:
                return True
        return self.locks.busy(thread_id)

    def claim(self, thread_id: str) -> threading.Event:
        """Reserve ``thread_id`` for a turn; return the event that cancels it.

        Taking the cross-process lock may wait on the network (PostgreSQL): call it in a
        worker thread, not on the event loop.

        Raises:
            ConflictError: A turn of this conversation is already running (in this
                service or elsewhere), or the service is stopping.
        """
        with self._lock:
            if self._closed:
                raise ConflictError("The service is stopping; try again in a moment.")
            if thread_id in self._running:
                raise ConflictError(
                    "The assistant is still answering in this conversation; wait for the "
                    "reply to finish."
                )
            running = self._running[thread_id] = _Running()
        try:
            running.lease = self.locks.acquire(thread_id)
        except ConversationBusyError as error:
            self._forget(thread_id)
            raise ConflictError(BUSY_ELSEWHERE) from error
        except ConversationStoreError as error:
            self._forget(thread_id)
            raise UnavailableError(str(error)) from error
        except BaseException:
            self._forget(thread_id)
            raise
        return running.cancel

    def _forget(self, thread_id: str) -> _Running | None:
        with self._lock:
            return self._running.pop(thread_id, None)

    def release(self, thread_id: str) -> None:
        """Free ``thread_id`` (after its turn, or when the request is refused)."""
        running = self._forget(thread_id)
        if running is not None and running.lease is not None:
            try:
                running.lease.release()
            except Exception:  # the lock dies with its connection anyway
                log.exception("Releasing the turn lock of %s failed", thread_id)

    def stream(
        self, thread_id: str, work: Callable[[], Iterator[StreamEvent]]
    ) -> AsyncIterator[StreamEvent]:
        """Run ``work`` for the claimed ``thread_id`` in a worker; yield its events.

        Call it on the event loop. The conversation is released when ``work`` ends.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()

        def hand_over(item: StreamEvent | None) -> None:
            # A closed loop raises RuntimeError: no one is listening any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def produce() -> None:
            try:
                for event in work():
                    hand_over(event)
            except BaseException:  # work() reports its own errors; this is a bug
                log.exception("A turn of %s failed", thread_id)
                hand_over(ErrorEvent(detail=UNEXPECTED_ERROR))
            finally:
                self.release(thread_id)
                hand_over(None)

        try:
            self._executor.submit(produce)
        except RuntimeError as error:  # shut down between claim and submit
            self.release(thread_id)
            raise ConflictError("The service is stopping; try again in a moment.") from error
        return _drain(queue)

    def close(self) -> None:
        """Cancel the running turns, wait for them to close, and stop the workers."""
        with self._lock:
            self._closed = True
            for running in self._running.values():
                running.cancel.set()
        self._executor.shutdown(wait=True)


async def _drain(queue: asyncio.Queue[StreamEvent | None]) -> AsyncIterator[StreamEvent]:
    while (item := await queue.get()) is not None:
        yield item


UNEXPECTED_ERROR = "Something went wrong on our side. Your conversation is saved; please try again."


class _Translator:
    """Turn one run's ``TurnEvent``s into the API's stream events."""

    def __init__(self, service: ConversationService) -> None:
        self.service = service

    def events(self, event: TurnEvent) -> Iterator[StreamEvent]:
        label = self.service.assistant.label
        if isinstance(event, TokenEvent):
            yield TokenOut(
                text=event.text,
                assistant=event.assistant,
                label=label(event.assistant),
                message_id=event.message_id,
            )
            return
        assert isinstance(event, MessageEvent)
        message = event.message
        if isinstance(message, AIMessage):
            text = message_text(message)
            if text and not is_cancel_note(message):
                name = message.name or event.node
                yield MessageOut(id=message.id, assistant=name, label=label(name), text=text)
            for call in message.tool_calls:
                if self.service.assistant.call_kind(call["name"]) == "safe":
                    activity = TOOL_ACTIVITY.get(call["name"], "working on it")
                    yield StatusEvent(text=f"{activity.capitalize()}…", tool=call["name"])
        elif isinstance(message, ToolMessage):
            status = self.service.answer_status(message)
            if status:
                yield StatusEvent(text=status, tool=message.name)


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
    ) -> None:
        """Drive ``assistant``; ``sessions`` records who owns which conversation.

        ``locks`` keep one turn at a time per conversation beyond this process (the
        store's); without them, within this process only.
        """
        self.assistant = assistant
        self.sessions = LockedSessions(sessions)
        self.runner = runner or TurnRunner(locks=locks)

    @classmethod
    def over_store(
        cls, assistant: TravelAssistant, store: ConversationStore
    ) -> ConversationService:
        """Return the service over ``store``: its registry and its turn locks.

        ``assistant`` must save its checkpoints in ``store.saver``.
        """
        return cls(assistant, store.registry, locks=store.locks)

    def now(self) -> datetime:
        """Return "now" as the travel database's clock says."""
        return self.assistant.db.clock()

    # Conversations ------------------------------------------------------------------------

    def owned(self, passenger_id: str, conversation_id: str) -> Thread:
        """Return the conversation ``conversation_id`` of ``passenger_id``.

        Raises:
            NotFoundError: There is none, or it belongs to another passenger (the
                answer is the same, so ids reveal nothing).
        """
        record = self.sessions.get(conversation_id)
        if record is None or record.passenger_id != passenger_id:
            raise NotFoundError(f"No conversation {conversation_id}.")
        return Thread(record.thread_id, record.passenger_id)

    def create(self, passenger_id: str, conversation_id: str) -> ConversationOut:
        """Start a conversation for ``passenger_id``.

        Raises:
            ForbiddenError: The travel database has no such passenger.
        """
        if not self.assistant.check_passenger(passenger_id):
            raise ForbiddenError(
                f"Passenger {passenger_id} is not in the travel database; ask for a token "
                "for your own passenger id."
            )
        self.sessions.touch(conversation_id, passenger_id, self.now())
        record = self.sessions.get(conversation_id)
        assert record is not None
        return self.summary(record)

    def conversations(self, passenger_id: str) -> list[ConversationOut]:
        """Return the passenger's conversations, most recently used first."""
        return [self.summary(r) for r in self.sessions.list(passenger_id, LIST_LIMIT)]

    def summary(self, record: SessionRecord) -> ConversationOut:
        """Return the API's view of one conversation."""
        thread = Thread(record.thread_id, record.passenger_id)
        assistant = self.assistant.active_assistant(thread)
        return ConversationOut(
            conversation_id=record.thread_id,
            title=record.title,
            created_at=record.created_at,
            updated_at=record.updated_at,
            assistant=assistant,
            assistant_label=self.assistant.label(assistant),
            pending_actions=len(self.assistant.pending_actions(thread)),
            busy=self.runner.busy(record.thread_id),
        )

    # Reading ------------------------------------------------------------------------------

    def history(self, thread: Thread) -> list[HistoryItem]:
        """Return the conversation as the customer saw it."""
        items: list[HistoryItem] = []
        for message in self.assistant.messages(thread):
            if isinstance(message, HumanMessage):
                items.append(CustomerItem(id=message.id, text=message_text(message)))
            elif isinstance(message, AIMessage) and is_cancel_note(message):
                items.append(NoticeItem(text="This turn was cancelled; nothing more was done."))
            elif isinstance(message, AIMessage) and message_text(message):
                name = message.name or PRIMARY
                items.append(
                    AssistantItem(
                        id=message.id,
                        assistant=name,
                        label=self.assistant.label(name),
                        text=message_text(message),
                    )
                )
            elif isinstance(message, ToolMessage):
                action = self.action_item(message)
                if action is not None:
                    items.append(action)
        return items

    def action_item(self, message: ToolMessage) -> ActionItem | None:
        """Return what became of a sensitive call, from its answer's facts."""
        name = message.name or ""
        if self.assistant.call_kind(name) != "sensitive":
            return None
        facts = facts_of(message)
        result: str | None = None
        reason: str | None = None
        outcome: Outcome
        if facts.ran:
            outcome = "failed" if message.status == "error" else "approved"
            result = (
                "It did not go through: our rules did not allow it when it ran."
                if outcome == "failed"
                else _result_summary(message) or "Done."
            )
        elif facts.declined:
            outcome, reason = "declined", facts.reason
        elif facts.not_run == "refused":
            outcome = "refused"
            reason = facts.shown[0] if facts.shown else None
        else:
            outcome = "not_done"
            reason = NOT_DONE_WORDS.get(facts.not_run or "", "it was not run")
        return ActionItem(
            tool_call_id=message.tool_call_id,
            tool=name,
            title=self.action_title(name),
            outcome=outcome,
            reason=reason,
            lines=[] if outcome == "refused" else list(facts.shown),
            amount=facts.amount_line,
            result=result,
        )

    def pending(self, thread: Thread) -> list[PendingActionOut]:
        """Return the actions waiting for a decision, each with its preview."""
        return [self._pending_out(thread, a) for a in self.assistant.pending_actions(thread)]

    def _pending_out(self, thread: Thread, action: PendingAction) -> PendingActionOut:
        return PendingActionOut(
            tool_call_id=action.tool_call_id,
            tool=action.name,
            assistant=action.assistant,
            assistant_label=self.assistant.label(action.assistant),
            preview=preview_out(self.assistant.preview(thread, action)),
        )

    # Words ---------------------------------------------------------------------------------

    def action_title(self, tool_name: str) -> str:
        """Return the title of a sensitive action ("Change flight")."""
        preview = self.assistant.crew.previews.get(tool_name)
        return str(preview.title) if preview is not None else "The action"

    def answer_status(self, message: ToolMessage) -> str | None:
        """Return the status line of a tool answer, when the customer should see one."""
        facts = facts_of(message)
        if facts.hand_over == "enter" and facts.specialist:
            member = self.assistant.crew.member(facts.specialist)
            title = member.specialist.title if member is not None else "specialist"
            return f"The {title} takes over."
        if self.assistant.call_kind(message.name or "") != "sensitive":
            return None
        title = self.action_title(message.name or "")
        if facts.ran:
            if message.status == "error":
                return f"{title}: it did not go through; the assistant will explain."
            return f"{title}: done."
        if facts.declined:
            return f"{title}: declined."
        if facts.not_run == "refused":
            return f"{title}: not possible; the assistant is told why."
        return f"{title}: not done ({NOT_DONE_WORDS.get(facts.not_run or '', 'not run')})."

    # Turns ---------------------------------------------------------------------------------

    def start_message(
        self, thread: Thread, text: str, cancel: threading.Event | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Send the customer's ``text`` and stream the turn (call on the event loop).

        ``cancel`` is the event of a claim already made (``claim``); without it the
        conversation is claimed here.

        Raises:
            ConflictError: A turn of this conversation is running.
        """
        if cancel is None:
            cancel = self.runner.claim(thread.thread_id)

        def work() -> Iterator[StreamEvent]:
            if self.assistant.interrupted(thread):
                # The last turn was cut short (a crash, a stop): close it, as the terminal
                # does when it resumes, so the new message starts a well-formed turn.
                self.assistant.cancel_turn(thread)
            self.sessions.touch(thread.thread_id, thread.passenger_id, self.now(), text)
            yield from self._turn(thread, lambda: self.assistant.send(thread, text, cancel=cancel))

        return self.runner.stream(thread.thread_id, work)

    def claim(self, thread: Thread) -> threading.Event:
        """Reserve ``thread`` for a turn (see ``TurnRunner.claim``)."""
        return self.runner.claim(thread.thread_id)

    def release(self, thread: Thread) -> None:
        """Free ``thread`` when a claimed request is refused."""
        self.runner.release(thread.thread_id)

    def check_decisions(self, thread: Thread, given: Sequence[DecisionIn]) -> None:
        """Check that ``given`` decides every pending action and nothing else.

        Raises:
            ConflictError: Nothing is pending, a decision names an action that is not
                pending, or a pending action has no decision.
        """
        pending = [a.tool_call_id for a in self.assistant.pending_actions(thread)]
        if not pending:
            raise ConflictError("Nothing in this conversation is waiting for your decision.")
        named = [d.tool_call_id for d in given]
        unknown = [i for i in named if i not in pending]
        if unknown:
            raise ConflictError(
                f"{', '.join(unknown)} is not waiting for a decision; "
                f"the pending actions are: {', '.join(pending)}."
            )
        missing = [i for i in pending if i not in named]
        if missing:
            raise ConflictError(
                "Decide every pending action at once; no decision was given for "
                f"{', '.join(missing)}."
            )

    def start_decisions(
        self, thread: Thread, cancel: threading.Event, given: Sequence[DecisionIn]
    ) -> AsyncIterator[StreamEvent]:
        """Resolve the claimed ``thread``'s pending actions and stream the rest of the turn.

        Each decision records the preview the customer decided on. An action whose
        preview now shows it cannot be done is not run, whatever the decision: the
        assistant is told why, as in the terminal.
        """
        by_id = {d.tool_call_id: d for d in given}

        def work() -> Iterator[StreamEvent]:
            decisions: dict[str, Decision] = {}
            for action in self.assistant.pending_actions(thread):
                decisions[action.tool_call_id] = self._decision(
                    thread, action, by_id.get(action.tool_call_id)
                )
            self.sessions.touch(thread.thread_id, thread.passenger_id, self.now())
            yield from self._turn(
                thread, lambda: self.assistant.resolve(thread, decisions, cancel=cancel)
            )

        return self.runner.stream(thread.thread_id, work)

    def _decision(
        self, thread: Thread, action: PendingAction, given: DecisionIn | None
    ) -> Decision:
        preview = self.assistant.preview(thread, action)
        if preview.error:
            explanation = refusal_text(preview)
            return Decision(False, preview.error, (explanation,), refused=True)
        shown = tuple(preview.lines)
        if given is not None and given.approved:
            return Decision(True, None, shown, amount=preview.amount)
        reason = given.reason if given is not None else None
        return Decision(False, reason, shown, amount=preview.amount)

    def _turn(
        self, thread: Thread, run: Callable[[], Iterator[TurnEvent]]
    ) -> Iterator[StreamEvent]:
        translator = _Translator(self)
        try:
            for event in run():
                yield from translator.events(event)
        except TurnCancelledError:
            yield ErrorEvent(
                detail="The service stopped while the assistant was answering; the turn "
                "was cancelled and nothing more was done. Send your message again."
            )
            return
        except ModelProviderError as error:
            yield ErrorEvent(detail=f"{error} Your conversation is saved; send your message again.")
            return
        except Exception:
            log.exception("A turn of conversation %s failed", thread.thread_id)
            yield ErrorEvent(detail=UNEXPECTED_ERROR)
            return
        pending = self.pending(thread)
        if pending:
            yield PendingEvent(actions=pending)
        assistant = self.assistant.active_assistant(thread)
        yield DoneEvent(
            pending_actions=len(pending),
            assistant=assistant,
            label=self.assistant.label(assistant),
        )

    def close(self) -> None:
        """Cancel running turns and wait for them (the service is stopping)."""
        self.runner.close()
