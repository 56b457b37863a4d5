"""One turn of a conversation, from start to end: a message, or the decisions on its actions.

``Conversation.claim`` takes the conversation for one turn (one at a time, across
processes) and returns a ``Turn``, which sends a message or resolves the pending actions
and yields what happened as ``conversations.records`` outcomes, ending with ``TurnEnd``
or ``TurnFailure``. The turn decides what the front ends would each decide on their
own: closing a turn that was cut short, putting a waiting action first, turning answers
into decisions (an action whose preview shows it cannot be done is refused, whatever the
answer), asking for a member of staff's check above the second approval's amount,
recovered writes, cancels and model-server failures.
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
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from assistants.approvals import (
    ActionPreview,
    Amount,
    Decision,
    PendingAction,
    facts_of,
)
from assistants.call_limits import ModelDeadlineError, TurnCancelledError
from assistants.providers import ModelProviderError
from conversations import words
from conversations.assistant import Thread, TravelAssistant, TurnEvent
from conversations.desk import Check, Handoff
from conversations.events import (
    PERSON_KEY,
    STAFF_NOTE_KEY,
    Cancel,
    CutCause,
)
from conversations.locks import (
    TurnLease,
    TurnLostError,
)
from conversations.loop import iterate
from conversations.records import (
    Narrator,
    Notice,
    Outcome,
    TurnEnd,
    TurnFailure,
)
from conversations.timeline import last_customer_message
from db.values import fmt_money

if TYPE_CHECKING:
    from assistants.approvals import ActionPreview, PendingAction
    from conversations.desk import Desk, RequestedBy
    from conversations.records import Approval, Describer


class _Owner(Protocol):
    """What a turn uses of the conversations (``conversations.protocol.Conversations``)."""

    @property
    def desk(self) -> Desk:
        """The desk's queue and checks."""

    @property
    def check_above(self) -> int | None:
        """The second approval's amount, in cents."""

    def now(self) -> datetime:
        """Return now, as the travel database's clock says."""

    def register(self, thread: Thread, title: str = "") -> None:
        """Record the thread in the registry."""


class TurnConversation(Protocol):
    """What a turn uses of its conversation (``conversations.protocol.Conversation``)."""

    @property
    def owner(self) -> _Owner:
        """The conversations it belongs to."""

    @property
    def assistant(self) -> TravelAssistant:
        """The assistant that runs its graph."""

    @property
    def thread(self) -> Thread:
        """Its thread."""

    @property
    def describer(self) -> Describer:
        """How its records are worded."""

    def approvals(self) -> list[Approval]:
        """Return the actions waiting for a decision."""

    def assistant_name(self) -> str:
        """Return the assistant that answers next."""

    def checks(self) -> list[Check]:
        """Return the open checks of its pending actions."""

    def handoff(self) -> Handoff | None:
        """Return its open hand-off to a person, if any."""

    def person_notice(self, handoff: Handoff | None = None) -> Notice | None:
        """Return what the customer is told about the person."""

    def previews(self, *, deciding: bool = False) -> Iterator[tuple[PendingAction, ActionPreview]]:
        """Yield the pending actions with their previews (``deciding``: for a decision)."""

    def ask_for_person(
        self, reason: str = "", summary: str = "", *, by: RequestedBy = "customer"
    ) -> Notice:
        """Put it in the queue for a person."""


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


class Turn:
    """One turn of a conversation, holding its lock until ``release`` (or ``with``'s end)."""

    def __init__(self, conversation: TurnConversation, lease: TurnLease) -> None:
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
        pending = self._assistant.pending_actions(self._thread)
        calls = {a.tool_call_id for a in pending}
        # The desk is asked only when something is pending: most messages leave nothing.
        checks = self.conversation.checks() if pending else []
        checked = [c for c in checks if c.tool_call_id in calls]
        if pending and not checked and if_pending == "refuse":
            yield TurnFailure("pending_first", words.ANSWER_FIRST)
            return
        # A new message drops what still waits for the customer (answered as not done).
        # What they approved and staff check is not theirs to drop by talking: it stays,
        # and the message goes before it (withdrawing it is an act of its own).
        self.conversation.owner.register(self._thread, text)
        handoff = self.conversation.handoff()
        if handoff is not None or checked:
            # A person has it, or will, or staff check what the customer approved: the
            # message is kept (for the person, and for the assistant once the check is
            # decided); the assistant does not answer meanwhile.
            self._assistant.append(self._thread, [HumanMessage(content=text, id=message_id)])
            self.conversation.owner.desk.bump(self._thread.thread_id)
            for outcome in self._held(handoff, bool(checked), bool(pending)):
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

    def _held(self, handoff: Handoff | None, checked: bool, pending: bool) -> Iterator[Outcome]:
        notice = self.conversation.person_notice(handoff) if handoff is not None else None
        if notice is not None:
            yield notice
        elif checked:
            yield Notice(words.KEPT_WHILE_CHECKED)
        name = self.conversation.assistant_name()
        # What still waits is said, as every turn's end says it.
        approvals = tuple(self.conversation.approvals()) if pending else ()
        yield TurnEnd(name, self.conversation.describer.label(name), approvals)

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

        Each decision records the preview it was made on (``previews``). An action whose
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
        # What the decision is made on: what the customer was shown, if the saved state
        # is the one it was shown for (and recent); worked out now otherwise.
        previews = list(self.conversation.previews(deciding=True))
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
        # The amount as the desk keeps it now, for every process alike.
        above = owner.check_above
        needed = []
        for action, preview in previews:
            answer = answers.get(action.tool_call_id)
            if action.tool_call_id in checked or _needs_check(preview, answer, above, moved):
                needed.append((action, preview))
            elif answer is not None and answer.approved and not preview.error:
                moved += _cents(preview.amount)
        undecided = [
            (a, p)
            for a, p in needed
            if a.tool_call_id not in checked or not checked[a.tool_call_id].decided
        ]
        if undecided:
            for outcome in self._ask_checks(undecided, answers, above):
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
        above: int | None,
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
        titles = ", ".join(p.title for _, p in undecided)
        yield Notice(words.waits_for_check(titles, fmt_money(above or 0)))
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
    """Return the cents the actions that ran moved since staff last approved one.

    Only a member of staff's yes to an action that then ran covers what came before it:
    a refusal covers nothing (the customer's next action counts on from the same sum),
    and neither does a yes whose write failed. A write that failed moved nothing, so it
    does not count either.
    """
    moved = 0
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        facts = facts_of(message)
        if not (facts.ran and facts.approved and message.status != "error"):
            continue
        moved = 0 if facts.checked_by else moved + _cents(facts.amount)
    return moved


def _cents(amount: Amount | None) -> int:
    return amount.cents if amount is not None else 0


def _handoff_call(messages: Sequence[AnyMessage]) -> Mapping[str, Any] | None:
    """Return the last turn's answered ``request_human_agent`` call, if it made one."""
    from tools.handoff import HANDOFF_TOOL

    turn = messages[last_customer_message(messages) or 0 :]
    answered = {m.tool_call_id for m in turn if isinstance(m, ToolMessage) and m.status != "error"}
    for message in reversed(turn):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["name"] == HANDOFF_TOOL and call["id"] in answered:
                    return call
    return None
