"""What the hand-off routes read and answer: the customer's and the staff's models.

The request bodies (asking for a person, a staff message, a check's decision, a
proposal, a hand-back) and the answers (where the customer stands, a hand-off, the
queue, a check with the lines the customer said yes to), and the functions that build
the answers from the desk's records (``conversations.desk``). The routes are in
``server.handoff``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictBool, field_validator

from assistants.approvals import PendingAction
from conversations.desk import NOTE_CHARS, REASON_CHARS, Check, Handoff
from conversations.desk_rows import Staff
from server.schemas import (
    REASON_PATTERN,
    MessageIn,
    Text,
    _Body,
    well_formed,
)

# --- what the API shows ---------------------------------------------------------------------


class PersonIn(_Body):
    """The customer's request for a person."""

    reason: Text = Field(
        default="",
        max_length=REASON_CHARS,
        pattern=REASON_PATTERN,
        description="Why, in the customer's words (optional). Kept as their message.",
    )


class PersonOut(BaseModel):
    """Whether a person has, or will have, the conversation: what the customer is told."""

    status: Literal["assistant", "waiting", "with_person"] = Field(
        description="assistant: the assistant answers; waiting: in the queue for a person; "
        "with_person: a person has it and the assistant does not answer."
    )
    place: int | None = Field(description="The place in the queue while waiting (1 is next).")
    agent: str | None = Field(
        description="The person's name while they have it (the name they go by, never their login)."
    )
    text: str = Field(description="What the customer is told, in a sentence or two.")
    messages: int = Field(
        description="Messages written since the hand-off: it changes when either side "
        "writes, so a reader polls this and reads the history only when it moved."
    )


class HandoffOut(BaseModel):
    """One conversation handed to a person, as the staff see it."""

    conversation_id: str
    passenger_id: str
    status: Literal["waiting", "held", "returned", "closed"]
    requested_by: Literal["customer", "assistant"]
    reason: str
    summary: str = Field(
        description="What the assistant told the person (empty if the customer asked themselves)."
    )
    requested_at: datetime
    agent: str = Field(
        description="Who holds or held it, by the name the customer sees (empty while waiting)."
    )
    agent_login: str = Field(
        default="",
        description="Their login, which the desk compares (empty while waiting); never shown "
        "to the customer.",
    )
    taken_at: datetime | None
    ended_at: datetime | None
    note: str = Field(description="The note left for the assistant when it was handed back.")
    place: int | None = Field(description="Its place in the queue while waiting.")
    messages: int


class StaffCheckOut(BaseModel):
    """An action a customer approved that waits for a member of staff's yes or no."""

    check_id: int
    conversation_id: str
    passenger_id: str
    tool_call_id: str = Field(default="", description="The action's id (a pending action's).")
    title: str = Field(examples=["Book hotel"])
    amount: str = Field(examples=["To pay: EUR 1,240.00"])
    lines: list[str] = Field(
        default_factory=list,
        examples=[["Hotel: Hilton Basel (Luxury)", "23 Apr -> 26 Apr", "To pay: EUR 1,240.00"]],
        description="What the customer said yes to, as they were shown it: the item, the "
        "dates, before -> after, prices and fees, and last the amount (the terminal's "
        "lines, word for word). Empty once the action is no longer waiting.",
    )
    asked_at: datetime = Field(description="When the customer approved it (and staff were asked).")
    proposed_by: str | None = Field(
        default=None,
        description="Who proposed it: the member of staff's name, or null for the assistant.",
    )
    proposed_by_login: str | None = Field(
        default=None, description="Their login (null for the assistant)."
    )
    customer_approved: bool = Field(
        default=True,
        description="The customer said yes to it (every check is asked after their yes).",
    )
    yours: bool = Field(
        default=False,
        description="You proposed it: another supervisor decides (four eyes), so it is shown "
        "as waiting for another supervisor and not offered to you.",
    )
    tool: str | None = Field(
        default=None,
        examples=["book_hotel"],
        description="The action (its tool), while it waits: what an edit keeps.",
    )
    args: dict[str, Any] | None = Field(
        default=None,
        description="Its arguments, while it waits: what an edit changes.",
    )
    status: Literal["waiting", "approved", "refused", "used", "withdrawn"]
    staff: str = Field(description="Who decided it, by the name the customer is told.")
    staff_login: str = Field(
        default="", description="Their login (empty while it waits); never shown to the customer."
    )
    decided_at: datetime | None
    reason: str


class CheckList(BaseModel):
    """The checks waiting for staff, the oldest first."""

    checks: list[StaffCheckOut]


class CheckDecisionIn(_Body):
    """A member of staff's yes or no on a check."""

    approved: StrictBool
    reason: Text = Field(
        default="",
        max_length=NOTE_CHARS,
        pattern=REASON_PATTERN,
        description="Why not (for a no): the customer and the assistant are told.",
    )


class ProposalIn(_Body):
    """An action a person puts to the customer for their yes or no."""

    action: Text = Field(
        min_length=1,
        max_length=100,
        pattern=REASON_PATTERN,
        examples=["update_ticket_to_new_flight"],
        description="A sensitive tool of the crew (the 409 names them all).",
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        examples=[{"ticket_no": "7240005432906569", "new_flight_id": 1234}],
        description="Its arguments, as the assistant would give them.",
    )

    @field_validator("args")
    @classmethod
    def _storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        _check_text(value)
        return value


def _check_text(value: Any) -> None:
    """Refuse text no store keeps (NUL, lone surrogates) anywhere in ``value``."""
    if isinstance(value, str):
        well_formed(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key)
            _check_text(item)
    elif isinstance(value, list):
        for item in value:
            _check_text(item)


def staff_check_out(
    check: Check,
    lines: Sequence[str] = (),
    proposer: Staff | None = None,
    viewer: Staff | None = None,
    call: PendingAction | None = None,
) -> StaffCheckOut:
    """Return a check as ``viewer`` sees it, with the ``lines`` of its action's preview.

    ``proposer``: the member of staff who proposed the action (``None``: the assistant).
    ``call``: the pending call it checks, whose tool and arguments it shows.
    """
    return StaffCheckOut(
        check_id=check.id,
        conversation_id=check.thread_id,
        passenger_id=check.passenger_id,
        tool_call_id=check.tool_call_id,
        title=check.title,
        amount=check.amount,
        lines=list(lines),
        asked_at=check.asked_at,
        proposed_by=proposer.name if proposer is not None else None,
        proposed_by_login=proposer.login if proposer is not None else None,
        yours=proposer is not None and viewer is not None and proposer.login == viewer.login,
        tool=call.name if call is not None else None,
        args=dict(call.args) if call is not None else None,
        status=check.status,
        staff=check.staff,
        staff_login=check.staff_login,
        decided_at=check.decided_at,
        reason=check.reason,
    )


class QueueOut(BaseModel):
    """The conversations waiting for a person (oldest first) and those you hold."""

    waiting: list[HandoffOut]
    yours: list[HandoffOut]


class StaffMessageIn(MessageIn):
    """What a person writes to the customer (shown with their name)."""


class HandBackIn(_Body):
    """How a person gives a conversation back."""

    note: Text = Field(
        default="",
        max_length=NOTE_CHARS,
        pattern=REASON_PATTERN,
        description="For the assistant, not shown to the customer: what was done and "
        "agreed. The model reads it before the customer's next message.",
    )
    close: StrictBool = Field(
        default=False,
        description="The person settled the matter (recorded as closed rather than "
        "returned); the assistant answers the next message either way.",
    )
    end_pending: StrictBool = Field(
        default=False,
        description="Go on although an action is pending: it ends as not done, on record. "
        "Without it a hand-back over a pending action is refused (409), naming what it "
        "would end: the person is told before it happens.",
    )


def handoff_out(handoff: Handoff, place: int | None = None) -> HandoffOut:
    """Return a desk row as the API shows it."""
    return HandoffOut(
        conversation_id=handoff.thread_id,
        passenger_id=handoff.passenger_id,
        status=handoff.status,
        requested_by=handoff.requested_by,
        reason=handoff.reason,
        summary=handoff.summary,
        requested_at=handoff.requested_at,
        agent=handoff.agent,
        agent_login=handoff.agent_login,
        taken_at=handoff.taken_at,
        ended_at=handoff.ended_at,
        note=handoff.note,
        place=place,
        messages=handoff.messages,
    )


# --- what the routes do ---------------------------------------------------------------------


# --- the supervisor page's forms: actions, a proposal's preview, bookings, a check's edit -----


class ActionOut(BaseModel):
    """An action staff can put to a customer: a sensitive tool, and the arguments it takes."""

    name: str = Field(examples=["cancel_hotel"])
    title: str = Field(examples=["Cancel hotel"], description="What the customer's card says.")
    assistant_label: str = Field(description="The specialist whose action it is.")
    description: str = Field(description="The tool's own description, as the model reads it.")
    arguments: dict[str, Any] = Field(
        description="The JSON schema of its arguments (the tool's ``tool_call_schema``, "
        "without what is injected): a client builds its form from it. Arguments are checked "
        "strictly, as the model's are (no true for an id)."
    )


class ActionList(BaseModel):
    """Every action staff can propose, by name."""

    actions: list[ActionOut]


class BookingOut(BaseModel):
    """One of the customer's tickets or reservations, to fill an action's id with."""

    kind: str = Field(examples=["hotel"], description="ticket, or the reservation's kind.")
    argument: Literal["ticket_no", "booking_id"] = Field(
        description="The argument it fills: a ticket's number or a reservation's id."
    )
    value: str | int = Field(examples=[3], description="What goes into that argument.")
    label: str = Field(
        examples=["Hotel booking 3: Hilton Basel, Basel, 2026-04-23 -> 2026-04-26, EUR 1,240.00"]
    )
    status: str
    actions: list[str] = Field(description="The actions that take it (by name).")


class BookingList(BaseModel):
    """The customer's bookings whose description contains the words searched for."""

    bookings: list[BookingOut]


class CheckEditIn(ProposalIn):
    """Agent Inbox's "edit": the checked action with new arguments (the same action)."""


class CheckRespondIn(MessageIn):
    """Agent Inbox's "respond": a message to the customer; the check stays waiting."""
