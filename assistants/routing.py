"""Routing tools and the pure functions that decide where a batch of tool calls goes.

The routing tools are pydantic models bound as tools and never executed: the primary
assistant calls ``To...`` to hand the conversation to a specialist, and a specialist
calls ``CompleteOrEscalate`` to hand it back.

A model may answer with several tool calls at once (OpenAI-style models do by default).
Every call must be answered exactly once, so a batch is processed in a fixed order:

1. safe calls, and calls naming a tool this assistant does not have (answered with an
   error), run without asking;
2. sensitive calls stop for the customer's approval, each approved or denied on its own;
3. routing calls run last: the first ``To...`` call enters its specialist and any other
   routing call in the batch is answered as not started; ``CompleteOrEscalate`` leaves.

After each group the same router looks at what is still unanswered and picks the next
group, or returns to the assistant once everything is answered.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from pydantic import BaseModel, ConfigDict, Field


class ToFlightBookingAssistant(BaseModel):
    """Hand the conversation to the flights specialist to change or cancel a ticket."""

    request: str = Field(
        description="What the customer wants changed or cancelled, with any ticket number, "
        "flight or dates they gave."
    )


class ToBookCarRental(BaseModel):
    """Hand the conversation to the car-rental specialist to book, change or cancel a car."""

    location: str = Field(description="The city where the customer wants to pick up the car.")
    start_date: str = Field(description="The first day of the rental, YYYY-MM-DD.")
    end_date: str = Field(description="The last day of the rental, YYYY-MM-DD.")
    request: str = Field(description="Anything else the customer asked for (car class, budget).")


class ToHotelBookingAssistant(BaseModel):
    """Hand the conversation to the hotel specialist to book, change or cancel a stay."""

    location: str = Field(description="The city where the customer wants to stay.")
    checkin_date: str = Field(description="The check-in date, YYYY-MM-DD.")
    checkout_date: str = Field(description="The check-out date, YYYY-MM-DD.")
    request: str = Field(description="Anything else the customer asked for (budget, area).")


class ToBookExcursion(BaseModel):
    """Hand the conversation to the excursions specialist to book, change or cancel a trip."""

    location: str = Field(description="The city where the customer wants an excursion.")
    request: str = Field(description="What kind of excursion, and on which date if given.")


class CompleteOrEscalate(BaseModel):
    """Give control back to the primary assistant.

    Call this when the task is done, when the customer changes their mind, or when they
    need something this specialist cannot do.
    """

    cancel: bool = Field(
        default=True,
        description="True when the task is finished or abandoned; False when it is handed "
        "back unfinished because another assistant is needed.",
    )
    reason: str = Field(description="Why control is handed back, in one sentence.")

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"cancel": True, "reason": "The customer changed their mind about the car."},
                {"cancel": True, "reason": "The hotel is booked; nothing else was asked."},
                {"cancel": False, "reason": "The customer also wants to change their flight."},
            ]
        }
    )


COMPLETE_OR_ESCALATE = CompleteOrEscalate.__name__

Step = Literal["end", "assistant", "safe_tools", "sensitive_tools", "enter", "leave"]


def last_tool_batch(messages: Sequence[AnyMessage]) -> tuple[AIMessage | None, list[ToolCall]]:
    """Return the latest AI message and those of its tool calls not yet answered.

    Args:
        messages: The conversation.

    Returns:
        The last ``AIMessage`` (or ``None`` when there is none) and its unanswered tool
        calls, in the order the model made them.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
            return message, [c for c in message.tool_calls if c["id"] not in answered]
    return None, []


@dataclass(frozen=True)
class ToolGroups:
    """The names one assistant's calls are sorted by."""

    sensitive: frozenset[str]
    routing: frozenset[str]

    def is_sensitive(self, call: ToolCall) -> bool:
        """Tell whether the call needs the customer's approval."""
        return call["name"] in self.sensitive

    def is_routing(self, call: ToolCall) -> bool:
        """Tell whether the call hands the conversation to another assistant."""
        return call["name"] in self.routing

    def is_safe(self, call: ToolCall) -> bool:
        """Tell whether the call runs without asking (unknown names included)."""
        return not self.is_sensitive(call) and not self.is_routing(call)

    def select(self, calls: Iterable[ToolCall], step: Step) -> list[ToolCall]:
        """Return the calls of ``calls`` that the node of ``step`` answers."""
        if step == "safe_tools":
            return [c for c in calls if self.is_safe(c)]
        if step == "sensitive_tools":
            return [c for c in calls if self.is_sensitive(c)]
        if step in ("enter", "leave"):
            return [c for c in calls if self.is_routing(c)]
        return []


def next_step(messages: Sequence[AnyMessage], groups: ToolGroups) -> Step:
    """Decide what runs after an assistant, or after one of its tool nodes.

    Args:
        messages: The conversation.
        groups: How the current assistant's tool names are sorted.

    Returns:
        ``"end"`` when the assistant answered without tool calls; the node group of the
        first unanswered group in the fixed order (safe, sensitive, routing); or
        ``"assistant"`` when every call of the batch is answered.
    """
    ai, pending = last_tool_batch(messages)
    if ai is None or not ai.tool_calls:
        return "end"
    if not pending:
        return "assistant"
    if any(groups.is_safe(c) for c in pending):
        return "safe_tools"
    if any(groups.is_sensitive(c) for c in pending):
        return "sensitive_tools"
    if any(c["name"] == COMPLETE_OR_ESCALATE for c in pending):
        return "leave"
    return "enter"


def first_routing_call(calls: Iterable[ToolCall], hand_overs: Collection[str]) -> ToolCall | None:
    """Return the first call that hands the conversation to a specialist, if any.

    Args:
        calls: Tool calls in the model's order.
        hand_overs: The names of the routing tools that enter a specialist.
    """
    return next((c for c in calls if c["name"] in hand_overs), None)
