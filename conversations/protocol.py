"""The conversation protocol: one turn from start to end, for every front end.

``Conversations`` holds the assistant, the session registry and the turn locks.
``Conversation`` is one thread of one passenger: its history, the actions waiting for a
decision (``Approval``), a summary, the tool calls of its last turn, and for supervisors the whole
conversation step by step (``timeline``). ``Conversation.claim``
takes the conversation for one turn (one at a time, across processes) and returns a
``Turn``, which sends a message or resolves the pending actions and yields what happened
as ``conversations.records`` outcomes, ending with ``TurnEnd`` or ``TurnFailure``.

The protocol decides everything the terminal and the service used to decide each on its
own: closing a turn that was cut short, putting a waiting action first, turning answers
into decisions (an action whose preview shows it cannot be done is refused, whatever the
answer), recovered writes, cancels and model-server failures, the registry's record. A
front end reads input and renders outcomes.
"""

from __future__ import annotations

import json
import threading
from collections.abc import (
    AsyncGenerator,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ValidationError

from assistants.approvals import (
    ActionPreview,
    Amount,
    Decision,
    PendingAction,
    describe_action,
    facts_of,
)
from assistants.providers import ModelDeadlineError, ModelProviderError, TurnCancelledError
from conversations import words
from conversations.assistant import Thread, TravelAssistant, TurnEvent
from conversations.desk import Check, Desk, DeskError, Handoff, RequestedBy
from conversations.events import (
    ASKED_FOR_PERSON_KEY,
    PERSON_KEY,
    STAFF_NOTE_KEY,
    Cancel,
    CutCause,
    is_cancel_note,
)
from conversations.locks import (
    ConversationBusyError,
    ConversationStoreError,
    LocalTurnLocks,
    TurnLease,
    TurnLocks,
    TurnLostError,
)
from conversations.loop import iterate
from conversations.records import (
    PRIMARY,
    ActionRecord,
    Approval,
    AssistantLine,
    CustomerLine,
    Describer,
    Narrator,
    Notice,
    Outcome,
    Record,
    TurnEnd,
    TurnFailure,
    approval_of,
    message_text,
)
from db.passengers import next_flight
from db.values import fmt_money

if TYPE_CHECKING:
    from assistants.specialists import Crew
    from conversations.sessions import SessionRecord, SessionStore

__all__ = [
    "ActionStep",
    "Answer",
    "Conversation",
    "Conversations",
    "DecisionsError",
    "DeskError",
    "HandOverStep",
    "Step",
    "Summary",
    "ToolCallDetail",
    "Turn",
    "TurnRefusedError",
]

CancelledBy = Literal["customer", "service"]
# How a cancel is recorded, by who cancelled.
_CUT_BY: dict[CancelledBy, CutCause] = {"customer": "cancelled", "service": "service"}
PendingPolicy = Literal["refuse", "supersede"]


class TurnRefusedError(Exception):
    """The conversation cannot be taken for a turn now; ``failure`` says why."""

    def __init__(self, failure: TurnFailure) -> None:
        """Carry ``failure`` (kind ``busy`` or ``unavailable``)."""
        super().__init__(failure.text)
        self.failure = failure


class DecisionsError(Exception):
    """The decisions given are not one for each pending action (nothing was run)."""

    def __init__(self, text: str) -> None:
        """Carry ``text``, written for whoever sent the decisions."""
        super().__init__(text)
        self.text = text


@dataclass(frozen=True)
class Answer:
    """The customer's answer to one pending action: yes, or no with an optional reason."""

    approved: bool
    reason: str | None = None


@dataclass(frozen=True)
class Summary:
    """What a list of conversations shows of one."""

    assistant: str
    label: str
    pending_actions: int
    turns: int
    title: str
    checks_waiting: int = 0
    messages: int = 0


@dataclass(frozen=True)
class ToolCallDetail:
    """One tool call of the last turn with its raw answer, for the people behind the desk.

    ``outcome`` is ``ok``, ``error``, ``not run: <why>``, or ``None`` while the call
    waits for approval (``answer`` is then ``None`` too).
    """

    tool: str
    arguments: Mapping[str, object]
    outcome: str | None
    answer: str | None
    tool_call_id: str = ""
    assistant: str = ""
    label: str = ""


@dataclass(frozen=True)
class HandOverStep:
    """One assistant hands the conversation to another (a specialist enters or leaves)."""

    from_assistant: str
    from_label: str
    to_assistant: str
    to_label: str
    tool: str


@dataclass(frozen=True)
class ActionStep:
    """What became of a sensitive action, with the money it moved or would have moved.

    ``amount`` is the amount of the preview the customer decided on, from its numbers;
    ``moved`` tells whether it was charged or refunded (the action ran).
    """

    record: ActionRecord
    amount: Amount | None

    @property
    def moved(self) -> bool:
        """Tell whether the amount was charged or refunded: the action ran."""
        return self.amount is not None and self.record.outcome == "approved"


Step = CustomerLine | AssistantLine | Notice | ToolCallDetail | HandOverStep | ActionStep


class Conversations:
    """Every conversation over one ``TravelAssistant``, its registry and its turn locks."""

    def __init__(
        self,
        assistant: TravelAssistant,
        registry: SessionStore,
        locks: TurnLocks | None = None,
        desk: Desk | None = None,
        *,
        check_above: int | None = None,
    ) -> None:
        """Drive ``assistant``; ``registry`` records who owns which conversation.

        ``locks`` keep one turn at a time per conversation beyond this process (the
        store's, ``ConversationStore.locks``); without them, within this process only.
        ``desk`` is the queue of conversations handed to a person (the store's,
        ``ConversationStore.desk``); without it, one in memory. ``check_above`` (cents):
        an approved action that moves more needs a member of staff's yes too (a second
        approval, ``TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE``); ``None``, never.
        """
        self.assistant = assistant
        self.registry = registry
        self.locks: TurnLocks = locks if locks is not None else LocalTurnLocks()
        self.desk = desk if desk is not None else Desk.in_memory()
        self.check_above = check_above
        self.describer = Describer(assistant.crew)

    def now(self) -> datetime:
        """Return "now" as the travel database's clock says."""
        return self.assistant.db.clock()

    def check_passenger(self, passenger_id: str) -> bool:
        """Tell whether ``passenger_id`` is a known passenger."""
        return self.assistant.check_passenger(passenger_id)

    def first_questions(self, passenger_id: str) -> list[str]:
        """Return what a new conversation offers to ask, from the passenger's next flight.

        General questions when no flight is ahead (or the passenger is not known).
        """
        db = self.assistant.db
        with db.rows() as rows:
            flight = next_flight(rows, passenger_id, db.clock())
        if flight is None:
            return list(words.GENERAL_QUESTIONS)
        return words.first_questions(flight.flight_no, flight.arrival_city, flight.destination_city)

    def get(self, thread: Thread) -> Conversation:
        """Return the conversation ``thread`` (it need not be saved yet)."""
        return Conversation(self, thread)

    def owned(self, passenger_id: str, thread_id: str) -> Conversation | None:
        """Return the registered conversation ``thread_id`` if it is ``passenger_id``'s."""
        record = self.registry.get(thread_id)
        if record is None or record.passenger_id != passenger_id:
            return None
        return self.get(Thread(record.thread_id, record.passenger_id))

    def register(self, thread: Thread, title: str = "") -> None:
        """Record ``thread`` in the registry, or mark it used now."""
        self.registry.touch(thread.thread_id, thread.passenger_id, self.now(), title)

    def records(self, passenger_id: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Return the registry's records, most recently used first."""
        return self.registry.list(passenger_id, limit)


class Conversation:
    """One conversation of one passenger."""

    def __init__(self, owner: Conversations, thread: Thread) -> None:
        """Read and run ``thread`` through ``owner``."""
        self.owner = owner
        self.thread = thread
        self.assistant = owner.assistant
        self.describer = owner.describer

    @property
    def thread_id(self) -> str:
        """Return the conversation's id."""
        return self.thread.thread_id

    # Reading ----------------------------------------------------------------------------

    def has_messages(self) -> bool:
        """Tell whether the conversation has anything saved."""
        return bool(self.assistant.messages(self.thread))

    def history(self) -> list[Record]:
        """Return the conversation as the customer saw it."""
        return self.describer.records(self.assistant.messages(self.thread))

    def last_exchange(self) -> list[Record]:
        """Return the last customer message and what followed it."""
        messages = self.assistant.messages(self.thread)
        last = _last_customer_message(messages)
        return [] if last is None else self.describer.records(messages[last:])

    def assistant_name(self) -> str:
        """Return the assistant that answers the next message."""
        return self.assistant.active_assistant(self.thread)

    def summary(self) -> Summary:
        """Return what a list of conversations shows of this one."""
        messages = self.assistant.messages(self.thread)
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        name = self.assistant_name()
        return Summary(
            assistant=name,
            label=self.describer.label(name),
            pending_actions=len(self.assistant.pending_actions(self.thread)),
            turns=len(humans),
            title=message_text(humans[0]) if humans else "",
            checks_waiting=sum(1 for c in self.checks() if not c.decided),
            messages=len(messages),
        )

    def approvals(self) -> list[Approval]:
        """Return the actions waiting for a decision, each with what it would do.

        An action the customer approved that waits for a member of staff's check (or
        whose check is decided and not yet applied) carries it: it is not asked again.
        One a person from customer service proposed names them (``proposed_by``).
        """
        label = self.describer.label
        previews = list(self.previews())
        if not previews:  # most turns end so: no query of the desk for checks
            return []
        checks = {c.tool_call_id: c for c in self.checks()}
        messages = self.assistant.messages(self.thread)
        return [
            replace(
                approval_of(
                    preview, action.tool_call_id, action.assistant, label(action.assistant)
                ),
                check=checks.get(action.tool_call_id),
                proposed_by=_proposer(messages, action.tool_call_id),
            )
            for action, preview in previews
        ]

    def checks(self) -> list[Check]:
        """Return the open second-approval checks of this conversation's pending actions."""
        return self.owner.desk.checks_of(self.thread_id)

    def checks_decided(self) -> bool:
        """Tell whether staff decided every check the pending actions wait for."""
        checks = self.checks()
        return bool(checks) and all(c.decided for c in checks)

    def decide_check(self, staff: str, check_id: int, *, approved: bool, reason: str = "") -> Check:
        """Record ``staff``'s yes or no on a check of this conversation.

        The customer's side applies it (``Turn.resume_checked``): the action runs, or
        the assistant is told staff refused it.

        Four eyes: the member of staff who proposed the action cannot give its second
        approval (nor refuse it in the check's place); another one decides.

        Raises:
            DeskError: No such check here, it was decided already, or ``staff`` proposed
                the action.
        """
        found = self.owner.desk.check(check_id)
        if found is None or found.thread_id != self.thread_id:
            raise DeskError(f"There is no check {check_id} in conversation {self.thread_id}.")
        pending = {a.tool_call_id for a in self.assistant.pending_actions(self.thread)}
        if found.tool_call_id not in pending:
            self.owner.desk.end_checks(self.thread_id, "withdrawn")
            raise DeskError(f"Check {check_id} is not waiting any more: the action was dropped.")
        proposer = _proposer(self.assistant.messages(self.thread), found.tool_call_id)
        if proposer and proposer == " ".join(staff.split()):
            raise DeskError(
                f"You proposed this action, so another member of staff must decide check "
                f"{check_id}: a second approval needs a second person."
            )
        decided = self.owner.desk.decide_check(
            check_id, staff, self.owner.now(), approved=approved, reason=reason
        )
        self.owner.desk.bump(self.thread_id)
        return decided

    def apply_checked(self, wait: float = 5.0) -> list[Outcome]:
        """Go on with the actions staff decided, here and now; return what it did.

        Whoever gives the last decision calls it (the desk, the service), so that an
        approved action runs then, whether or not the customer's window is open. Exactly
        once: under the conversation's claim, and only while decided checks are left.

        Raises:
            TurnRefusedError: A turn of the conversation still ran after ``wait``
                seconds (it goes on with them; the service's sweep does otherwise).
            DecisionsError: Nothing is left to apply, or a check still waits.
        """
        with self.claim(wait) as turn:
            return list(turn.resume_checked(cancelled_by="service"))

    def waiting(self) -> bool:
        """Tell whether the run must be resumed: actions to decide, or writes to report.

        A write that committed before an interruption needs no decision, but the run
        must go on to report it (``resolve`` with no answers does).
        """
        return bool(
            self.assistant.pending_actions(self.thread)
            or self.assistant.recovered_actions(self.thread)
        )

    def details(self) -> list[ToolCallDetail]:
        """Return the tool calls of the last turn with their raw answers."""
        messages = self.assistant.messages(self.thread)
        turn = messages[_last_customer_message(messages) or 0 :]
        answers = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
        found: list[ToolCallDetail] = []
        for message in turn:
            if isinstance(message, AIMessage):
                name = message.name or PRIMARY
                found.extend(self._call(c, answers, name) for c in message.tool_calls)
        return found

    def timeline(self) -> list[Step]:
        """Return the whole conversation step by step, for the people behind the desk.

        Every customer message and reply, every tool call with its arguments and raw
        answer, every hand-over from one assistant to another, and what became of each
        sensitive action with the preview the customer was shown and its amount.
        """
        messages = self.assistant.messages(self.thread)
        answers = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
        describer = self.describer
        current = PRIMARY
        steps: list[Step] = []
        for message in messages:
            if isinstance(message, HumanMessage):
                steps.append(CustomerLine(message_text(message), message.id))
            elif isinstance(message, AIMessage):
                if is_cancel_note(message):
                    steps.append(Notice(words.TURN_CANCELLED_NOTICE))
                    continue
                if message_text(message):
                    steps.append(describer.assistant_line(message, current))
                name = message.name or current
                steps.extend(self._call(c, answers, name) for c in message.tool_calls)
            elif isinstance(message, ToolMessage):
                facts = facts_of(message)
                entered = facts.specialist if facts.hand_over == "enter" else None
                if entered or facts.hand_over == "leave":
                    after = entered or PRIMARY
                    steps.append(
                        HandOverStep(
                            current,
                            describer.label(current),
                            after,
                            describer.label(after),
                            message.name or "",
                        )
                    )
                    current = after
                action = describer.action(message)
                if action is not None:
                    steps.append(ActionStep(action, facts.amount))
        return steps

    def _call(
        self, call: Mapping[str, Any], answers: Mapping[str, ToolMessage], assistant: str
    ) -> ToolCallDetail:
        """Return one tool call with its answer (``None`` while it waits for approval)."""
        call_id = str(call["id"])
        label = self.describer.label(assistant)
        answer = answers.get(call_id)
        if answer is None:
            return ToolCallDetail(call["name"], call["args"], None, None, call_id, assistant, label)
        facts = facts_of(answer)
        outcome = "error" if answer.status == "error" else "ok"
        if facts.not_run:
            outcome = f"not run: {facts.not_run}"
        return ToolCallDetail(
            call["name"], call["args"], outcome, str(answer.content), call_id, assistant, label
        )

    # Turns ------------------------------------------------------------------------------

    def claim(self, wait: float = 0.0) -> Turn:
        """Take the conversation for one turn, trying for up to ``wait`` seconds.

        Taking it may wait on the network (PostgreSQL locks): not on an event loop.

        Raises:
            TurnRefusedError: A turn of it runs elsewhere (``busy``), or where the locks
                live cannot be reached (``unavailable``).
        """
        try:
            lease = self.owner.locks.acquire(self.thread_id, wait)
        except ConversationBusyError as error:
            raise TurnRefusedError(TurnFailure("busy", words.BUSY_ELSEWHERE)) from error
        except ConversationStoreError as error:
            raise TurnRefusedError(TurnFailure("unavailable", str(error))) from error
        return Turn(self, lease)

    def busy(self) -> bool:
        """Tell whether a turn of this conversation runs anywhere (a hint: it can change)."""
        return self.owner.locks.busy(self.thread_id)

    # A person from the customer-service team ------------------------------------------------

    def handoff(self) -> Handoff | None:
        """Return the open hand-off to a person (waiting or held), if any."""
        return self.owner.desk.current(self.thread_id)

    def person_notice(self, handoff: Handoff | None = None) -> Notice | None:
        """Return what the customer is told about the person who has or will have this."""
        handoff = handoff if handoff is not None else self.handoff()
        if handoff is None:
            return None
        if handoff.status == "held":
            return Notice(words.with_person(handoff.agent))
        return Notice(words.waiting_for_person(self.owner.desk.position(self.thread_id)))

    def ask_for_person(
        self, reason: str = "", summary: str = "", *, by: RequestedBy = "customer"
    ) -> Notice:
        """Put the conversation in the queue for a person; return what the customer is told.

        The customer may ask at any time. An action still waiting for their decision
        ends then as not done (in their history, and for the model), as a new message
        would end it, and its checks are withdrawn: the person can propose it again.

        Raises:
            TurnRefusedError: A turn of the conversation runs (it cannot be written now).
        """
        asked_text = words.asked_for_person(reason)
        # A conversation that starts with the request is named after it.
        self.owner.register(self.thread, asked_text if by == "customer" else "")
        if by == "customer":
            # Kept as their message: what the person and the customer write next then
            # follows a customer message, as every chat template wants.
            asked = HumanMessage(content=asked_text, additional_kwargs={ASKED_FOR_PERSON_KEY: True})
            if self.handoff() is None:
                pending = self.assistant.pending_actions(self.thread)
                with self.claim(5.0):
                    self.assistant.append(self.thread, [asked], drop_pending="asked_for_person")
                if pending:
                    self.owner.desk.end_checks(self.thread_id, "withdrawn")
        handoff = self.owner.desk.request(
            self.thread_id,
            self.thread.passenger_id,
            by=by,
            reason=reason or ("The customer asked for a person." if by == "customer" else ""),
            summary=summary,
            now=self.owner.now(),
        )
        notice = self.person_notice(handoff)
        assert notice is not None
        return notice

    def withdraw_person_request(self) -> Notice:
        """Take the conversation out of the queue for a person: the assistant answers again.

        The model is told (the customer's request is in what it reads); the customer is
        told the assistant answers their next message.

        Raises:
            DeskError: Nobody was asked for, or a person has the conversation already.
        """
        handoff = self.handoff()
        if handoff is not None and handoff.status == "held":
            raise DeskError(words.held_cannot_withdraw(handoff.agent))
        if handoff is None or not self.owner.desk.cancel(self.thread_id, self.owner.now()):
            raise DeskError(words.NOT_IN_QUEUE)
        note = AIMessage(content=words.WITHDRAWN_NOTE, response_metadata={STAFF_NOTE_KEY: True})
        with self.claim(5.0):
            self.assistant.append(self.thread, [note])
        return Notice(words.LEFT_QUEUE)

    def take(self, agent: str) -> Handoff:
        """Give the waiting conversation to ``agent`` and tell the customer.

        Raises:
            DeskError: It does not wait for a person, or someone else holds it.
        """
        handoff = self.owner.desk.take(self.thread_id, agent, self.owner.now())
        self.owner.desk.bump(self.thread_id)
        return handoff

    def person_says(self, agent: str, text: str, *, wait: float = 5.0) -> None:
        """Write ``agent``'s message to the customer into the conversation.

        Raises:
            DeskError: ``agent`` does not hold the conversation.
            TurnRefusedError: A turn of it is running (it cannot be written now).
        """
        self._held_by(agent)
        reply = AIMessage(content=text, response_metadata={PERSON_KEY: agent})
        with self.claim(wait):
            self.assistant.append(self.thread, [reply])
        self.owner.desk.bump(self.thread_id)

    def hand_back(self, agent: str, note: str = "", *, close: bool = False) -> Handoff:
        """End ``agent``'s hold: the primary assistant answers again, having read ``note``.

        ``close`` records that the person finished the matter rather than handing it
        back; the assistant answers the next message either way.

        Raises:
            DeskError: ``agent`` does not hold the conversation.
        """
        self._held_by(agent)
        said: list[AnyMessage] = []
        if note.strip():
            said.append(
                AIMessage(
                    content=words.staff_note(agent, note.strip()),
                    response_metadata={PERSON_KEY: agent, STAFF_NOTE_KEY: True},
                )
            )
        # The primary assistant goes on, having read the note: whichever specialist was
        # active before the hand-off knew nothing of what the person did since. An
        # action still waiting for the customer ends as not done, its checks withdrawn.
        pending = self.assistant.pending_actions(self.thread)
        if said or pending or self.assistant.active_assistant(self.thread) != PRIMARY:
            with self.claim(5.0):
                self.assistant.append(
                    self.thread, said, to_primary=True, drop_pending="handed_back"
                )
        if pending:
            self.owner.desk.end_checks(self.thread_id, "withdrawn")
        self.owner.desk.bump(self.thread_id)
        return self.owner.desk.end(self.thread_id, agent, self.owner.now(), note=note, close=close)

    def person_proposes(self, agent: str, name: str, args: Mapping[str, Any]) -> Approval:
        """Put ``agent``'s proposal of an action before the customer, for their ``y/n``.

        The action goes through the same preview and approval as the assistant's (a
        second approval too, when its amount needs one); decided, it runs without the
        assistant answering, since the person still holds the conversation.

        Raises:
            DeskError: ``agent`` does not hold it, ``name`` is not an action, an action
                already waits for the customer, or the preview says it cannot be done.
            TurnRefusedError: A turn of it is running.
        """
        self._held_by(agent)
        crew = self.assistant.crew
        if name not in crew.sensitive_names:
            actions = ", ".join(sorted(crew.sensitive_names))
            raise DeskError(f"{name} is not an action the customer can approve; one of: {actions}.")
        _check_arguments(crew, name, args)
        if self.assistant.pending_actions(self.thread):
            raise DeskError("An action already waits for the customer's decision.")
        preview = describe_action(
            self.assistant.db, self.thread.passenger_id, name, args, crew.previews
        )
        if preview.error:  # staff read the rule's own words, which name what is wrong
            raise DeskError(f"Not possible: {preview.error}")
        message = AIMessage(
            content=words.person_proposes(preview.title),
            response_metadata={PERSON_KEY: " ".join(agent.split())},
        )
        with self.claim(5.0):
            self.assistant.propose(self.thread, name, args, message)
        self.owner.desk.bump(self.thread_id)
        (approval,) = self.approvals()
        return approval

    def _held_by(self, agent: str) -> Handoff:
        handoff = self.handoff()
        if handoff is None or handoff.status != "held":
            raise DeskError(f"Nobody holds conversation {self.thread_id}: take it first.")
        if handoff.agent != " ".join(agent.split()):
            raise DeskError(f"{handoff.agent} holds conversation {self.thread_id}, not {agent}.")
        return handoff

    def previews(self) -> Iterator[tuple[PendingAction, ActionPreview]]:
        """Yield each action waiting for a decision with what it would do now."""
        for action in self.assistant.pending_actions(self.thread):
            yield action, self.assistant.preview(self.thread, action)


class Turn:
    """One turn of a conversation, holding its lock until ``release`` (or ``with``'s end)."""

    def __init__(self, conversation: Conversation, lease: TurnLease) -> None:
        """Run turns of ``conversation`` while ``lease`` holds it."""
        self.conversation = conversation
        self.lease = lease

    def __enter__(self) -> Turn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Free the conversation (a second call does nothing)."""
        self.lease.release()

    @property
    def _assistant(self) -> TravelAssistant:
        return self.conversation.assistant

    @property
    def _thread(self) -> Thread:
        return self.conversation.thread

    def close_cut_turn(self) -> Notice | None:
        """Close a turn that stopped part-way (its process died, or lost its terminal).

        Holding the lock proves no one else still runs it. A turn that failed or was
        cancelled in a live process was closed there, with its cause; one left open was
        cut short by the death of the program running it (``crash``). Returns what the
        customer is told, or ``None`` when there was nothing to close.
        """
        if not self._assistant.interrupted(self._thread):
            return None
        self._assistant.cancel_turn(self._thread, "crash")
        return Notice(words.CUT_TURN_CLOSED)

    def send(
        self,
        text: str,
        *,
        cancel: threading.Event | None = None,
        cancelled_by: CancelledBy = "customer",
        if_pending: PendingPolicy = "refuse",
        message_id: str | None = None,
    ) -> Iterator[Outcome]:
        """Send the customer's ``text`` and yield the turn's outcomes.

        A turn cut short before is closed first. An action still waiting for a decision
        (left by another window) is put first: with ``if_pending="refuse"`` the message
        is not sent (``TurnFailure`` ``pending_first``); with ``"supersede"`` it is
        sent and the action is answered as not done. ``message_id`` is the id the
        history gives the message (a caller that showed it already under that id).
        The turn runs on the process's turn loop (``conversations.loop``); ``asend``
        is the same turn for a caller on that loop.
        """
        return iterate(
            lambda: self.asend(
                text,
                cancel=cancel,
                cancelled_by=cancelled_by,
                if_pending=if_pending,
                message_id=message_id,
            )
        )

    async def asend(
        self,
        text: str,
        *,
        cancel: threading.Event | None = None,
        cancelled_by: CancelledBy = "customer",
        if_pending: PendingPolicy = "refuse",
        message_id: str | None = None,
    ) -> AsyncGenerator[Outcome, None]:
        """``send``, awaited on the turn loop."""
        notice = self.close_cut_turn()
        if notice is not None:
            yield notice
        if if_pending == "refuse" and self._assistant.pending_actions(self._thread):
            checked = self.conversation.checks()
            waiting = checked and not all(c.decided for c in checked)
            yield TurnFailure(
                "pending_first", words.WAITING_FOR_CHECK if waiting else words.ANSWER_FIRST
            )
            return
        # A new message drops what is pending (answered as not done): so are its checks.
        if self._assistant.pending_actions(self._thread):
            self.conversation.owner.desk.end_checks(self._thread.thread_id, "withdrawn")
        self.conversation.owner.register(self._thread, text)
        handoff = self.conversation.handoff()
        if handoff is not None:
            # A person has it, or will: the message is kept for them, nobody else answers.
            self._assistant.append(self._thread, [HumanMessage(content=text, id=message_id)])
            self.conversation.owner.desk.bump(self._thread.thread_id)
            for outcome in self._held(handoff):
                yield outcome
            return
        async with aclosing(
            self._run(
                lambda stop: self._assistant.asend(
                    self._thread,
                    text,
                    cancel=stop,
                    cancelled=_CUT_BY[cancelled_by],
                    message_id=message_id,
                ),
                cancel,
                cancelled_by,
            )
        ) as outcomes:
            async for outcome in outcomes:
                yield outcome

    def _held(self, handoff: Handoff) -> Iterator[Outcome]:
        notice = self.conversation.person_notice(handoff)
        if notice is not None:
            yield notice
        name = self.conversation.assistant_name()
        yield TurnEnd(name, self.conversation.describer.label(name), ())

    def check(self, decided: Collection[str]) -> None:
        """Check that ``decided`` names every pending action and nothing else.

        Raises:
            DecisionsError: Nothing is pending, an id is not pending, or one is missing.
        """
        pending = [a.tool_call_id for a in self._assistant.pending_actions(self._thread)]
        if not pending:
            raise DecisionsError(words.NOTHING_PENDING)
        unknown = [i for i in decided if i not in pending]
        if unknown:
            raise DecisionsError(
                f"{', '.join(unknown)} is not waiting for a decision; "
                f"the pending actions are: {', '.join(pending)}."
            )
        missing = [i for i in pending if i not in decided]
        if missing:
            raise DecisionsError(
                "Decide every pending action at once; no decision was given for "
                f"{', '.join(missing)}."
            )

    def resolve(
        self,
        answers: Mapping[str, Answer],
        *,
        cancel: threading.Event | None = None,
        cancelled_by: CancelledBy = "customer",
    ) -> Iterator[Outcome]:
        """Decide the pending actions with ``answers`` and yield the rest of the turn.

        Each decision records the preview it was made on, computed now. An action whose
        preview shows it cannot be done is refused whatever the answer (the assistant is
        told why); one without an answer is declined. Writes that committed before an
        interruption are reported, whatever the answers.
        """
        return iterate(lambda: self.aresolve(answers, cancel=cancel, cancelled_by=cancelled_by))

    async def aresolve(
        self,
        answers: Mapping[str, Answer],
        *,
        cancel: threading.Event | None = None,
        cancelled_by: CancelledBy = "customer",
    ) -> AsyncGenerator[Outcome, None]:
        """``resolve``, awaited on the turn loop."""
        previews = list(self.conversation.previews())
        owner = self.conversation.owner
        checked = {c.tool_call_id: c for c in self.conversation.checks()}
        # The customer's no needs no check: an open check of an action they now decline
        # ends as withdrawn, and staff can no longer approve it.
        declined = [
            key
            for key, check in checked.items()
            if not check.decided and not (key in answers and answers[key].approved)
        ]
        if declined:
            owner.desk.end_checks(self._thread.thread_id, "withdrawn", only=declined)
            checked = {key: check for key, check in checked.items() if key not in declined}
        # What the conversation moved since staff last checked counts too: splitting an
        # amount into smaller actions does not avoid the check.
        moved = _moved_since_check(self._assistant.messages(self._thread))
        needed = []
        for action, preview in previews:
            answer = answers.get(action.tool_call_id)
            if action.tool_call_id in checked or _needs_check(
                preview, answer, owner.check_above, moved
            ):
                needed.append((action, preview))
            elif answer is not None and answer.approved and not preview.error:
                moved += _cents(preview.amount)
        undecided = [
            (a, p)
            for a, p in needed
            if a.tool_call_id not in checked or not checked[a.tool_call_id].decided
        ]
        if undecided:
            for outcome in self._ask_checks(undecided, answers):
                yield outcome
            return
        decisions = {
            action.tool_call_id: _decision(
                preview, answers.get(action.tool_call_id), checked.get(action.tool_call_id)
            )
            for action, preview in previews
        }
        owner.register(self._thread)
        # While a person holds the conversation the actions run, and the assistant stays
        # silent: the run stops after them and a note for the model closes the step.
        held = self.conversation.handoff()
        run = self._run(
            lambda stop: self._assistant.aresolve(
                self._thread,
                decisions,
                cancel=stop,
                cancelled=_CUT_BY[cancelled_by],
                only_actions=held is not None,
            ),
            cancel,
            cancelled_by,
        )
        async with aclosing(run):
            async for outcome in run:
                yield outcome
        if held is not None and self._assistant.between_steps(self._thread):
            note = AIMessage(
                content=words.person_action_note(held.agent or "A person"),
                response_metadata={PERSON_KEY: held.agent, STAFF_NOTE_KEY: True},
            )
            self._assistant.append(self._thread, [note])
            owner.desk.bump(self._thread.thread_id)
        if checked:
            # The checked actions are answered now (a new action may be pending already).
            still = {a.tool_call_id for a in self._assistant.pending_actions(self._thread)}
            done = [key for key in checked if key not in still]
            owner.desk.end_checks(self._thread.thread_id, "used", only=done)

    def _ask_checks(
        self,
        undecided: Sequence[tuple[PendingAction, ActionPreview]],
        answers: Mapping[str, Answer],
    ) -> Iterator[Outcome]:
        """Keep the customer's answers and ask staff to check ``undecided``; end the turn."""
        owner = self.conversation.owner
        kept = json.dumps(
            {key: {"approved": a.approved, "reason": a.reason} for key, a in answers.items()}
        )
        owner.desk.ask_checks(
            self._thread.thread_id,
            self._thread.passenger_id,
            [
                (a.tool_call_id, p.title, p.amount_line or "", _cents(p.amount))
                for a, p in undecided
            ],
            kept,
            owner.now(),
        )
        owner.register(self._thread)
        above = fmt_money(owner.check_above or 0)
        yield Notice(words.waits_for_check(", ".join(p.title for _, p in undecided), above))
        name = self.conversation.assistant_name()
        yield TurnEnd(
            name, self.conversation.describer.label(name), tuple(self.conversation.approvals())
        )

    def check_checked(self) -> list[Check]:
        """Return the checks to go on with, once staff decided every one of them.

        Raises:
            DecisionsError: Nothing waits for a check here, or a check is still waiting.
        """
        checks = self.conversation.checks()
        if not checks:
            raise DecisionsError(words.NOTHING_CHECKED)
        if not all(c.decided for c in checks):
            raise DecisionsError(words.CHECK_WAITING)
        return checks

    def resume_checked(
        self,
        *,
        cancel: threading.Event | None = None,
        cancelled_by: CancelledBy = "customer",
    ) -> Iterator[Outcome]:
        """Go on with the customer's kept answers once staff decided every check.

        Raises:
            DecisionsError: As ``check_checked`` says.
        """
        return iterate(lambda: self.aresume_checked(cancel=cancel, cancelled_by=cancelled_by))

    async def aresume_checked(
        self,
        *,
        cancel: threading.Event | None = None,
        cancelled_by: CancelledBy = "customer",
    ) -> AsyncGenerator[Outcome, None]:
        """``resume_checked``, awaited on the turn loop."""
        checks = self.check_checked()
        kept = json.loads(checks[0].answers or "{}")
        answers = {
            key: Answer(bool(v.get("approved")), v.get("reason"))
            for key, v in kept.items()
            if isinstance(v, dict)
        }
        for check in checks:
            yield Notice(
                words.check_decided(check.staff, check.title, check.approved, check.reason)
            )
        rest = self.aresolve(answers, cancel=cancel, cancelled_by=cancelled_by)
        async with aclosing(rest):
            async for outcome in rest:
                yield outcome

    async def _run(
        self,
        start: Callable[[threading.Event], AsyncGenerator[TurnEvent, None]],
        cancel: threading.Event | None,
        cancelled_by: CancelledBy,
    ) -> AsyncGenerator[Outcome, None]:
        conversation = self.conversation
        narrator = Narrator(conversation.describer, conversation.assistant_name())
        yield narrator.working()
        events = start(cancel if cancel is not None else Cancel())
        try:
            async with aclosing(events):
                async for event in events:
                    for outcome in narrator.outcomes(event):
                        yield outcome
        except TurnCancelledError:
            yield TurnFailure("cancelled", words.CANCELLED[cancelled_by])
            return
        except ModelProviderError as error:
            text = words.model_failure(str(error))
            if isinstance(error.__cause__, ModelDeadlineError):
                yield TurnFailure("time_limit", text, str(error))
            else:
                yield TurnFailure("model", text, str(error))
            return
        except TurnLostError as error:
            yield TurnFailure("lost_claim", words.LOST_CLAIM, str(error) or None)
            return
        handed = _handoff_call(conversation.assistant.messages(conversation.thread))
        if handed is not None:
            args = handed["args"] if isinstance(handed.get("args"), dict) else {}
            yield conversation.ask_for_person(
                str(args.get("reason", "")), str(args.get("summary", "")), by="assistant"
            )
        name = conversation.assistant_name()
        yield TurnEnd(name, conversation.describer.label(name), tuple(conversation.approvals()))


def _decision(
    preview: ActionPreview, answer: Answer | None, check: Check | None = None
) -> Decision:
    """Return the decision on an action from its preview and the customer's answer.

    ``check`` is a member of staff's check of the customer's yes (a second approval),
    when one was needed: their no declines the action, with their reason.
    """
    if preview.error:
        return Decision(False, preview.error, (words.refusal_text(preview),), refused=True)
    shown = tuple(preview.lines)
    if check is not None and check.status == "refused":
        reason = check.reason or None
        return Decision(False, reason, shown, amount=preview.amount, checked_by=check.staff)
    if answer is not None and answer.approved:
        staff = check.staff if check is not None and check.status == "approved" else None
        return Decision(True, None, shown, amount=preview.amount, checked_by=staff)
    reason = answer.reason if answer is not None else None
    return Decision(False, reason, shown, amount=preview.amount)


def _check_arguments(crew: Crew, name: str, args: Mapping[str, Any]) -> None:
    """Refuse arguments ``name`` does not take, or lacks, naming each and why.

    Raises:
        DeskError: An argument is unknown, missing, or not of its kind.
    """
    (tool,) = [t for t in crew.all_tools() if t.name == name]
    schema = tool.tool_call_schema
    if not isinstance(schema, type) or not issubclass(schema, BaseModel):
        return
    takes = ", ".join(schema.model_fields)
    unknown = [key for key in args if key not in schema.model_fields]
    if unknown:
        raise DeskError(f"{name} takes {takes}; {', '.join(unknown)} is not one of its arguments.")
    try:
        schema.model_validate(dict(args))
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or name}: {e['msg']}" for e in error.errors()
        )
        raise DeskError(f"{name} takes {takes}. {problems}.") from None


def _needs_check(
    preview: ActionPreview, answer: Answer | None, above: int | None, moved: int = 0
) -> bool:
    """Tell whether the customer's yes to ``preview`` needs a member of staff's too.

    ``moved``: the cents the conversation moved since staff last checked an action; an
    action that moves money and takes the sum over ``above`` is checked.
    """
    if above is None or preview.error or answer is None or not answer.approved:
        return False
    cents = _cents(preview.amount)
    return cents > 0 and moved + cents > above


def _moved_since_check(messages: Sequence[AnyMessage]) -> int:
    """Return the cents the actions that ran moved since the last one staff checked."""
    moved = 0
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        facts = facts_of(message)
        if facts.checked_by:
            moved = 0
        elif facts.ran and facts.approved and message.status != "error":
            moved += _cents(facts.amount)
    return moved


def _cents(amount: Amount | None) -> int:
    return amount.cents if amount is not None else 0


def _proposer(messages: Sequence[AnyMessage], call_id: str) -> str | None:
    """Return the member of staff who proposed the call ``call_id``, if a person did."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            person = message.response_metadata.get(PERSON_KEY)
            return str(person) if person else None
    return None


def _handoff_call(messages: Sequence[AnyMessage]) -> Mapping[str, Any] | None:
    """Return the last turn's answered ``request_human_agent`` call, if it made one."""
    from tools.handoff import HANDOFF_TOOL

    turn = messages[_last_customer_message(messages) or 0 :]
    answered = {m.tool_call_id for m in turn if isinstance(m, ToolMessage) and m.status != "error"}
    for message in reversed(turn):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == HANDOFF_TOOL and call["id"] in answered:
                    return call
    return None


def _last_customer_message(messages: Sequence[AnyMessage]) -> int | None:
    """Return the index of the last customer message, where the last turn starts."""
    return max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
