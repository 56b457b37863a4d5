"""What an approval is about and what it says: the preview, the amount and the decision.

The values both ways of approving share: the project's own callers build a ``Decision``
from an ``ActionPreview`` and put it in the run's config, and a LangGraph client's
answers to the requests of ``assistants.inbox`` are read into the same ``Decision``.
``assistants.approvals`` (the sensitive-tools node, ``describe_action``) and
``assistants.inbox`` both build on this module, which imports neither; callers take
these names from ``assistants.approvals``, which hands them on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from db.values import AmountKind

__all__ = ["ActionPreview", "Amount", "Decision", "Refusal", "amount_data"]

# Why a preview's quote refused the call, by the kind of ``TravelError`` it raised.
Refusal = Literal["not_found", "not_yours", "rules", "unavailable", "invalid", "other"]


@dataclass(frozen=True)
class Amount:
    """The money a sensitive call moves, as its preview states it in its last line.

    Taken from the quote's own numbers, so callers never read it back from the words.

    Attributes:
        kind: ``"pay"`` when the customer is charged, ``"refund"`` when they get money
            back.
        cents: How much, never negative; 0 when nothing is paid or refunded (the
            preview still says so, e.g. "To pay: EUR 0.00").
    """

    kind: AmountKind
    cents: int

    @property
    def free(self) -> bool:
        """Tell whether the call moves no money at all."""
        return self.cents == 0

    def as_data(self) -> dict[str, Any]:
        """Return the amount as plain data, as it travels in configs and artifacts."""
        return {"kind": self.kind, "cents": self.cents}

    @classmethod
    def from_data(cls, data: Any) -> Amount | None:
        """Read ``as_data``'s output back; anything else (absent, malformed) is ``None``."""
        if not isinstance(data, Mapping):
            return None
        kind, cents = data.get("kind"), data.get("cents")
        if kind not in ("pay", "refund") or type(cents) is not int or cents < 0:
            return None
        return cls(cast(AmountKind, kind), cents)


def text_or_none(value: Any) -> str | None:
    """Return ``value`` if it is non-empty text, else ``None`` (a fact read from data)."""
    return value if isinstance(value, str) and value else None


def amount_data(amount: Amount | None) -> dict[str, Any] | None:
    """Return ``amount`` as plain data (``Amount.as_data``), or ``None`` without one."""
    return amount.as_data() if amount is not None else None


# The answer that leaves a pending call undecided: it is not run, and the model is told
# no one decided it (the project's own key beside Agent Inbox's shape).
NO_DECISION: dict[str, Any] = {"type": "ignore", "args": None, "no_decision": True}


@dataclass(frozen=True)
class Decision:
    """The customer's answer to one pending sensitive call."""

    approved: bool
    reason: str | None = None
    # The preview lines the customer decided on: kept on the answer for the record
    # (``AnswerFacts.shown``), never sent to the model.
    shown: tuple[str, ...] = ()
    # Not the customer's no: the preview showed the call cannot succeed, so the caller
    # told the customer why and did not ask; ``reason`` is the refusal, for the model.
    refused: bool = False
    # The amount the shown preview stated (``ActionPreview.amount``), kept on the answer
    # with ``shown`` for callers that show it apart (``AnswerFacts.amount``).
    amount: Amount | None = None
    # The member of staff who checked the customer's yes (a second approval above an
    # amount), kept on the answer for the record (``AnswerFacts.checked_by``).
    checked_by: str | None = None

    def as_resume(self) -> dict[str, Any]:
        """Return the decision as the answer to its request in ``Command(resume=...)``.

        The answer has Agent Inbox's shape (``assistants.inbox``): ``accept``, or
        ``response`` with the reason, or ``ignore`` without one; the record's facts
        (``shown``, ``amount``, ``checked_by``, ``refused``) ride beside it.
        """
        approved = self.approved and not self.refused
        kind = "accept" if approved else "response" if self.reason else "ignore"
        answer: dict[str, Any] = {"type": kind}
        if kind == "response":
            answer["args"] = self.reason
        # Only what differs from an answer without them: LangGraph keeps the resume in
        # the conversation's saved writes.
        if self.shown:
            answer["shown"] = list(self.shown)
        if self.amount is not None:
            answer["amount"] = self.amount.as_data()
        if self.checked_by:
            answer["checked_by"] = self.checked_by
        if self.refused:
            answer["refused"] = True
        return answer


@dataclass(frozen=True)
class ActionPreview:
    """What a pending sensitive tool call would do, for the customer to approve.

    Attributes:
        tool_name: The tool called.
        title: A short title, e.g. ``"Change flight"``.
        lines: Human-readable lines: before -> after, prices, fees, and last the amount
            to pay or refund.
        error: Why the call would be refused, when its quote already fails.
        refusal: What kind of refusal ``error`` is, for callers that explain it in their
            own words.
        amount: The amount of the last line, from the quote's numbers; ``None`` when the
            preview states none (a refused call, a tool without a preview).
    """

    tool_name: str
    title: str
    lines: list[str] = field(default_factory=list)
    error: str | None = None
    refusal: Refusal | None = None
    amount: Amount | None = None

    @property
    def amount_line(self) -> str | None:
        """Return the line that states ``amount`` (the last), or ``None`` without one."""
        return self.lines[-1] if self.amount is not None and self.lines else None
