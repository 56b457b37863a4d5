"""What happened in a conversation, as data: the outcomes a turn yields and the history.

A front end renders these and nothing else: it never reads a LangGraph message, a tool
answer's facts or a preview itself, and it never phrases a fact. The live view of a turn
and the reopened history are built from the same records (``records_of`` and
``Narrator``), so a decline reads the same in both and in every front end.

History records: ``CustomerLine``, ``AssistantLine``, ``ActionRecord``, ``Notice``.
Turn outcomes: those, plus ``ReplyPiece`` (a streamed piece of a reply), ``Activity`` (a
search under way), ``HandOver``, ``Working`` (the assistant goes on), and the last one,
``TurnEnd`` (with the actions waiting for a decision, as ``Approval``) or
``TurnFailure``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from assistants.approvals import facts_of
from conversations import words
from conversations.events import (
    CUT_KEY,
    PERSON_KEY,
    STAFF_NOTE_KEY,
    TokenEvent,
    TurnEvent,
    cut_cause,
    is_cancel_note,
)

if TYPE_CHECKING:
    from assistants.approvals import ActionPreview
    from assistants.specialists import Crew
    from conversations.desk import Check
    from db.values import AmountKind

PRIMARY = "primary_assistant"

ActionOutcome = Literal["approved", "failed", "declined", "refused", "not_done"]
FailureKind = Literal[
    "cancelled",
    "model",
    "time_limit",
    "lost_claim",
    "busy",
    "unavailable",
    "changed",
    "pending_first",
]


def message_text(message: AnyMessage) -> str:
    """Return the text of ``message`` (text blocks joined), without outer blanks."""
    content = message.content
    if isinstance(content, str):
        return content.strip()
    return "".join(
        str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content
    ).strip()


# --- records of the history ------------------------------------------------------------------


@dataclass(frozen=True)
class CustomerLine:
    """A message the customer sent."""

    text: str
    id: str | None = None


@dataclass(frozen=True)
class AssistantLine:
    """A message an assistant wrote (``label`` is empty for the primary assistant).

    ``streamed`` is true, in a live turn, when its pieces were yielded before it
    (``ReplyPiece``): a front end that showed them has shown the message.
    """

    text: str
    assistant: str
    label: str
    id: str | None = None
    streamed: bool = False
    # The name of the person from the customer-service team who wrote it, if one did.
    person: str = ""


@dataclass(frozen=True)
class ActionRecord:
    """What became of a sensitive action, and the words for it.

    Attributes:
        tool_call_id: The call's id.
        tool: The tool called.
        title: The action's title ("Change flight").
        outcome: approved (it ran), failed (approved, refused by the rules when it
            ran), declined (the customer said no), refused (it could not be done, so it
            was not asked), not_done (never decided).
        reason: The customer's reason for a decline; why it was not done otherwise.
        lines: The preview the customer decided on (empty for a refused action).
        amount: The line of ``lines`` that states the amount, when one was recorded.
        result: What the action did, for one that ran.
        recovered: It had run before an interruption and was reported, not asked again.
        status: The sentence a live turn shows when the action is answered.
        line: The sentence the history shows for it.
    """

    tool_call_id: str
    tool: str
    title: str
    outcome: ActionOutcome
    reason: str | None
    lines: tuple[str, ...]
    amount: str | None
    result: str | None
    recovered: bool
    status: str
    line: str
    # The member of staff whose check (a second approval) decided it with the customer.
    checked_by: str | None = None


@dataclass(frozen=True)
class Notice:
    """A note in the conversation that no one wrote (a turn cancelled or cut short)."""

    text: str


Record = CustomerLine | AssistantLine | ActionRecord | Notice


# --- outcomes of a live turn -----------------------------------------------------------------


@dataclass(frozen=True)
class ReplyPiece:
    """A piece of an assistant's reply as the model writes it (one ``message_id`` a reply)."""

    text: str
    assistant: str
    label: str
    message_id: str | None


@dataclass(frozen=True)
class Activity:
    """A search the assistant started, in the customer's words ("searching flights")."""

    text: str
    tool: str


@dataclass(frozen=True)
class HandOver:
    """Another assistant takes over; ``text`` says so when a specialist enters."""

    assistant: str
    label: str
    tool: str | None
    text: str | None


@dataclass(frozen=True)
class Working:
    """The assistant goes on working (after a tool call or a tool answer)."""

    assistant: str
    label: str


@dataclass(frozen=True)
class Approval:
    """A sensitive action waiting for the customer's decision, with what it would do.

    Attributes:
        tool_call_id: The key of its decision.
        tool: The tool called.
        assistant: The specialist that asks.
        label: How the chat names that specialist.
        title: The action's title ("Change flight").
        lines: Before -> after, prices and fees, and last the amount (empty when refused).
        amount: That last line again, when it states the amount to pay or refund.
        amount_kind: ``pay`` or ``refund`` for ``amount``.
        refusal: Why it cannot be done, in the customer's words; such an action is not
            put to the customer and never runs.
        check: The customer said yes and a member of staff checks it too (a second
            approval above an amount): waiting, or decided and about to be applied.
        proposed_by: The member of staff who proposed it, when a person from customer
            service did (``None``: the assistant did); a decline's reason goes to them.
    """

    tool_call_id: str
    tool: str
    assistant: str
    label: str
    title: str
    lines: tuple[str, ...]
    amount: str | None
    amount_kind: AmountKind | None
    refusal: str | None
    check: Check | None = None
    proposed_by: str | None = None


@dataclass(frozen=True)
class TurnEnd:
    """The turn is over; ``approvals`` wait for a decision before anything else runs."""

    assistant: str
    label: str
    approvals: tuple[Approval, ...] = ()


@dataclass(frozen=True)
class TurnFailure:
    """The turn did not run or did not finish; the conversation is saved.

    Attributes:
        kind: cancelled (by the customer, or by the service stopping: ``text`` says
            which), model (the model server failed), time_limit (a reply or the run
            ran past its time limit), lost_claim (another window took the
            conversation over while the turn ran), busy (a turn runs elsewhere),
            unavailable (the conversations database cannot be reached), changed (the
            actions decided are no longer the ones pending), pending_first (an action
            waits for a decision, so the message was not sent).
        text: What the customer is told.
        detail: What an operator needs (the model server's error), when it differs.
    """

    kind: FailureKind
    text: str
    detail: str | None = None


Outcome = (
    CustomerLine
    | AssistantLine
    | ActionRecord
    | Notice
    | ReplyPiece
    | Activity
    | HandOver
    | Working
    | TurnEnd
    | TurnFailure
)


# --- building them ---------------------------------------------------------------------------


def approval_of(preview: ActionPreview, tool_call_id: str, assistant: str, label: str) -> Approval:
    """Return a pending action as the customer is asked about it, from its preview.

    The amount comes from the preview's numbers, never read back from its words; a
    refused action shows why instead of lines.
    """
    refused = bool(preview.error)
    amount = None if refused else preview.amount_line
    return Approval(
        tool_call_id=tool_call_id,
        tool=preview.tool_name,
        assistant=assistant,
        label=label,
        title=preview.title,
        lines=() if refused else tuple(preview.lines),
        amount=amount,
        amount_kind=preview.amount.kind if preview.amount is not None and amount else None,
        refusal=words.refusal_text(preview) if refused else None,
    )


def _result_summary(message: ToolMessage) -> str | None:
    """Return the customer-facing summary a write tool put in its result, if any."""
    try:
        result = json.loads(str(message.content))
    except ValueError:
        return None
    summary = result.get("summary") if isinstance(result, dict) else None
    return str(summary) if summary else None


@dataclass
class Describer:
    """Turn the graph's messages into records, knowing the crew's tools and labels."""

    crew: Crew

    def label(self, assistant: str) -> str:
        """Return how the chat names ``assistant`` (empty for the primary assistant)."""
        return self.crew.label(assistant)

    def title(self, tool: str) -> str:
        """Return the title of a sensitive action ("Change flight")."""
        preview = self.crew.previews.get(tool)
        return str(preview.title) if preview is not None else "The action"

    def assistant_line(
        self, message: AIMessage, node: str, streamed: bool = False
    ) -> AssistantLine:
        """Return an assistant's message as a record (named by ``node`` when unnamed)."""
        name = message.name or node
        person = str(message.response_metadata.get(PERSON_KEY) or "")
        return AssistantLine(
            message_text(message), name, self.label(name), message.id, streamed, person
        )

    def action(self, message: ToolMessage) -> ActionRecord | None:
        """Return what became of a sensitive call, from its answer's facts."""
        tool = message.name or ""
        if self.crew.call_kind(tool) != "sensitive":
            return None
        facts = facts_of(message)
        title = self.title(tool)
        result: str | None = None
        reason: str | None = None
        outcome: ActionOutcome
        if facts.ran:
            outcome = "failed" if message.status == "error" else "approved"
            summary = _result_summary(message)
            result = words.FAILED_RESULT if outcome == "failed" else summary or words.DONE_RESULT
        elif facts.declined:
            outcome, reason = "declined", facts.reason
        elif facts.not_run == "refused":
            outcome = "refused"
            reason = facts.shown[0] if facts.shown else None
        else:
            outcome = "not_done"
            artifact = message.artifact if isinstance(message.artifact, dict) else {}
            reason = words.not_done_reason(facts.not_run, artifact.get(CUT_KEY))
        lines = () if outcome == "refused" else facts.shown
        return ActionRecord(
            tool_call_id=message.tool_call_id,
            tool=tool,
            title=title,
            outcome=outcome,
            reason=reason,
            lines=lines,
            amount=facts.amount_line,
            result=result,
            recovered=facts.recovered,
            status=words.action_status(title, outcome, facts.recovered, result, reason),
            line=words.action_line(title, outcome, lines, result, reason, facts.checked_by),
            checked_by=facts.checked_by,
        )

    def records(self, messages: Sequence[AnyMessage]) -> list[Record]:
        """Return the conversation as the customer saw it (tool calls and raw results out)."""
        found: list[Record] = []
        for message in messages:
            if isinstance(message, HumanMessage):
                found.append(CustomerLine(message_text(message), message.id))
            elif isinstance(message, AIMessage) and (cause := cut_cause(message)):
                found.append(Notice(words.CUT_NOTICES[cause]))
            elif isinstance(message, AIMessage) and message.response_metadata.get(STAFF_NOTE_KEY):
                continue  # a person's note for the model, never shown to the customer
            elif isinstance(message, AIMessage) and message_text(message):
                found.append(self.assistant_line(message, PRIMARY))
            elif isinstance(message, ToolMessage):
                action = self.action(message)
                if action is not None:
                    found.append(action)
        return found


@dataclass
class Narrator:
    """Turn one run's events (``conversations.events.TurnEvent``) into outcomes."""

    describer: Describer
    assistant: str
    streamed: set[str] = field(default_factory=set)

    def working(self) -> Working:
        """Return that the current assistant goes on."""
        return Working(self.assistant, self.describer.label(self.assistant))

    def outcomes(self, event: TurnEvent) -> Iterator[Outcome]:
        """Yield what ``event`` shows the customer."""
        describer = self.describer
        if isinstance(event, TokenEvent):
            if event.message_id:
                self.streamed.add(event.message_id)
            yield ReplyPiece(
                event.text, event.assistant, describer.label(event.assistant), event.message_id
            )
            return
        message = event.message
        if isinstance(message, AIMessage):
            if message_text(message) and not is_cancel_note(message):
                yield describer.assistant_line(message, event.node, message.id in self.streamed)
            for call in message.tool_calls:
                if describer.crew.call_kind(call["name"]) == "safe":
                    yield Activity(words.tool_activity(call["name"]), call["name"])
            if message.tool_calls:
                yield self.working()
        elif isinstance(message, ToolMessage):
            facts = facts_of(message)
            if facts.hand_over == "enter" and facts.specialist:
                self.assistant = facts.specialist
                member = describer.crew.member(facts.specialist)
                title = member.specialist.title if member is not None else "specialist"
                yield HandOver(
                    self.assistant,
                    describer.label(self.assistant),
                    message.name,
                    words.takes_over(title),
                )
            elif facts.hand_over == "leave":
                self.assistant = PRIMARY
                yield HandOver(PRIMARY, describer.label(PRIMARY), message.name, None)
            action = describer.action(message)
            if action is not None:
                yield action
            yield self.working()
