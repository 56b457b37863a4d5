"""A conversation step by step, for the people behind the desk.

``timeline_of`` lists every customer message and reply, every tool call with its
arguments and raw answer, every hand-over from one assistant to another, and what became
of each sensitive action with the preview the customer was shown and its amount;
``details_of`` the tool calls of the last turn. ``Conversation.timeline`` and
``Conversation.details`` read them; the terminal desk and the supervisor's page show
them.
"""

from __future__ import annotations

from collections.abc import (
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from assistants.approvals import (
    Amount,
    facts_of,
)
from conversations import words
from conversations.events import (
    is_cancel_note,
)
from conversations.records import (
    PRIMARY,
    ActionRecord,
    AssistantLine,
    CustomerLine,
    Describer,
    Notice,
    message_text,
)

if TYPE_CHECKING:
    from conversations.assistant import Thread, TravelAssistant


class Shown(Protocol):
    """What the timeline reads of a conversation (``conversations.protocol.Conversation``)."""

    @property
    def assistant(self) -> TravelAssistant:
        """The assistant that runs its graph."""

    @property
    def thread(self) -> Thread:
        """Its thread."""

    @property
    def describer(self) -> Describer:
        """How its records are worded."""


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


def details_of(conversation: Shown) -> list[ToolCallDetail]:
    """Return the tool calls of the last turn with their raw answers."""
    describer = conversation.describer
    messages = conversation.assistant.messages(conversation.thread)
    turn = messages[last_customer_message(messages) or 0 :]
    answers = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    found: list[ToolCallDetail] = []
    for message in turn:
        if isinstance(message, AIMessage):
            name = message.name or PRIMARY
            found.extend(_call(describer, c, answers, name) for c in message.tool_calls)
    return found


def timeline_of(conversation: Shown) -> list[Step]:
    """Return the whole conversation step by step, for the people behind the desk.

    Every customer message and reply, every tool call with its arguments and raw
    answer, every hand-over from one assistant to another, and what became of each
    sensitive action with the preview the customer was shown and its amount.
    """
    messages = conversation.assistant.messages(conversation.thread)
    answers = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    describer = conversation.describer
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
            steps.extend(_call(describer, c, answers, name) for c in message.tool_calls)
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
    describer: Describer,
    call: Mapping[str, Any],
    answers: Mapping[str, ToolMessage],
    assistant: str,
) -> ToolCallDetail:
    """Return one tool call with its answer (``None`` while it waits for approval)."""
    call_id = str(call["id"])
    label = describer.label(assistant)
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


def last_customer_message(messages: Sequence[AnyMessage]) -> int | None:
    """Return the index of the last customer message, where the last turn starts."""
    return max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
