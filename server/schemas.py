"""The shapes of the HTTP API: requests, responses and the events of a streamed turn.

Pydantic models, so FastAPI validates every body against them and the OpenAPI document
is generated from them. Bodies refuse unknown fields; a customer message is at most
``MAX_MESSAGE_CHARS`` characters, as in the terminal.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from conversations.sessions import TITLE_CHARS
from conversations.words import MAX_MESSAGE_CHARS
from db.values import AmountKind

__all__ = [
    "MAX_MESSAGE_CHARS",
    "ActionItem",
    "AssistantItem",
    "ConversationList",
    "ConversationOut",
    "CustomerItem",
    "DecisionIn",
    "DecisionsIn",
    "DoneEvent",
    "ErrorEvent",
    "History",
    "HistoryItem",
    "Me",
    "MessageEvent",
    "MessageIn",
    "NoticeItem",
    "PendingActionOut",
    "PendingEvent",
    "PendingList",
    "PreviewOut",
    "Problem",
    "RecordEvent",
    "StatusEvent",
    "StopOut",
    "StreamEvent",
    "Suggestions",
    "TitleIn",
    "TokenEvent",
]

MAX_REASON_CHARS = 500
MAX_DECISIONS = 20
# Conversation ids are the terminal's UUIDs; anything else that is safe in a path is kept
# for threads made by other tools.
CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$"


# A message: no NUL character (no storage engine keeps one in text) and at least one
# character that is not a space, a tab or a line break. Documented in the OpenAPI
# document and checked by the validators below, with messages for people.
MESSAGE_PATTERN = r"^[^\x00]*[^\x00 \t\n\r][^\x00]*$"
REASON_PATTERN = r"^[^\x00]*$"
BLANKS = " \t\n\r"
_BLANK_RUNS = re.compile(f"[{re.escape(BLANKS)}]+")


def well_formed(value: str) -> str:
    r"""Return ``value`` if it can be stored and sent back: UTF-8 text without NUL.

    JSON may carry a lone surrogate (``"\ud800"``), which no UTF-8 encoder accepts, and
    NUL, which no storage engine keeps in text; refused here, such text never reaches
    the conversation. The message does not quote the text, which may not be printable.
    """
    if "\x00" in value:
        raise ValueError("The text contains a NUL character.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("The text is not valid Unicode (it has a lone surrogate).") from None
    return value


# Every string of a request body: checked before any other rule of its field.
Text = Annotated[str, AfterValidator(well_formed)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Problem(BaseModel):
    """Why a request was refused, in words for the person or program that sent it."""

    detail: str


class Me(BaseModel):
    """Who the token says the caller is."""

    passenger_id: str
    expires_at: datetime


class Suggestions(BaseModel):
    """What a new conversation offers: what the assistant does, and questions to start with."""

    greeting: str = Field(
        description="What the assistant can do for the customer, in a sentence or two."
    )
    questions: list[str] = Field(
        description="Three or four questions drawn from the passenger's next flight (its "
        "number, where it lands, where the trip goes), or general ones when no flight is "
        "ahead. The web chat sends the one clicked as the customer's message.",
        examples=[
            [
                "What time does my flight LX0112 to Basel leave?",
                "Change my flight LX0112",
                "Book a hotel in Basel",
                "Rent a car in Basel",
            ]
        ],
    )


# --- conversations --------------------------------------------------------------------------


class ConversationOut(BaseModel):
    """One of the passenger's conversations."""

    conversation_id: str
    title: str = Field(description="The first customer message (empty until there is one).")
    created_at: datetime
    updated_at: datetime
    assistant: str = Field(description="The assistant that answers the next message.")
    assistant_label: str = Field(description="How the chat names it (empty for the primary).")
    pending_actions: int = Field(description="Actions waiting for the customer's decision.")
    checks_waiting: int = Field(
        0,
        description="Of those, the ones the customer approved that wait for a member of "
        "staff's check (a second approval): nothing is for the customer to decide there.",
    )
    busy: bool = Field(description="A turn is running right now.")
    checked: str | None = Field(
        None,
        description="What a member of staff's check decided since your last message, as "
        "the history says it (approved and done, or not): for a page that was not open "
        "then. null when nothing was.",
    )
    messages: int = Field(
        0,
        description="How many messages the conversation has saved: it grows with every "
        "message, reply and decision, wherever they happen (another tab, the terminal, a "
        "person), so a client sees that something changed.",
    )


class TitleIn(_Body):
    """A conversation's new title."""

    title: Text = Field(
        description=f"At most {TITLE_CHARS} characters, not all blank. Outer blanks are dropped.",
        examples=["Basel trip"],
        json_schema_extra={"minLength": 1, "maxLength": TITLE_CHARS, "pattern": MESSAGE_PATTERN},
    )

    @field_validator("title")
    @classmethod
    def _fits(cls, value: str) -> str:
        # Blank means what the schema's pattern says (BLANKS), as for messages: a title of
        # other invisible characters is odd but allowed, and runs of blanks become one.
        title = _BLANK_RUNS.sub(" ", value).strip(" ")
        if not title:
            raise ValueError("The title is empty.")
        if len(value) > TITLE_CHARS:
            raise ValueError(
                f"The title is {len(value)} characters long; the limit is {TITLE_CHARS}."
            )
        return title


class StopOut(BaseModel):
    """The answer to Stop: the running turn was asked to stop."""

    stopping: bool = Field(
        description="True: the turn stops and its stream ends with error (kind stopped)."
    )


class WithdrawOut(BaseModel):
    """The answer to Withdraw: the pending actions were withdrawn, none done."""

    text: str = Field(description="What the customer is told, naming what was withdrawn.")


class ConversationList(BaseModel):
    """The passenger's conversations, most recently used first."""

    conversations: list[ConversationOut]


class MessageIn(_Body):
    """A customer message."""

    text: Text = Field(
        description=f"What the customer says: at most {MAX_MESSAGE_CHARS} characters, not "
        "all blank, without NUL characters. Outer blanks are dropped.",
        examples=["I'd like to fly to Basel tomorrow instead of today."],
        json_schema_extra={
            "minLength": 1,
            "maxLength": MAX_MESSAGE_CHARS,
            "pattern": MESSAGE_PATTERN,
        },
    )

    @field_validator("text")
    @classmethod
    def _fits(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("The message contains a NUL character.")
        if not value.strip(BLANKS):
            raise ValueError("The message is empty.")
        if len(value) > MAX_MESSAGE_CHARS:
            raise ValueError(
                f"The message is {len(value)} characters long; the limit is {MAX_MESSAGE_CHARS}."
            )
        return value.strip(BLANKS)


# --- approvals -----------------------------------------------------------------------------


class PreviewOut(BaseModel):
    """What a pending action would do, as the terminal shows it before asking."""

    title: str = Field(examples=["Change flight"])
    lines: list[str] = Field(
        description="Before -> after, prices and fees, and last the amount to pay or refund "
        "(the terminal's lines, word for word). Empty when the action cannot be done."
    )
    amount: str | None = Field(
        description="The last line again when it is the amount to pay or refund "
        '("To pay: EUR 75.00", "Refund: EUR 40.00"), so a client can make it stand out.'
    )
    amount_kind: AmountKind | None
    error: str | None = Field(
        description="Why the action cannot be done, in the customer's words. Such an action "
        "is never run: whatever the decision, the assistant is told why."
    )


class CheckOut(BaseModel):
    """A member of staff's check of an action the customer approved (a second approval)."""

    check_id: int
    status: Literal["waiting", "approved", "refused"] = Field(
        description="waiting: staff have not decided; approved or refused: decided, and "
        "the conversation goes on with it at POST .../resume."
    )
    staff: str = Field(description="Who decided (empty while waiting).")
    reason: str = Field(description="Why staff refused it (empty otherwise).")
    text: str = Field(description="What the customer is told about it.")


class PendingActionOut(BaseModel):
    """A sensitive action waiting for the customer's decision."""

    tool_call_id: str
    tool: str = Field(examples=["update_ticket_to_new_flight"])
    assistant: str
    assistant_label: str
    preview: PreviewOut
    check: CheckOut | None = Field(
        default=None,
        description="Set when the customer said yes and the amount needs a member of "
        "staff's yes too: the action is not asked again, it waits for them.",
    )
    proposed_by: str | None = Field(
        default=None,
        description="The name of the person from customer service who proposed the action "
        "(null: the assistant did). A reason given with a decline goes to whoever proposed it.",
    )


class PendingList(BaseModel):
    """Every action waiting for a decision, in the assistant's order."""

    actions: list[PendingActionOut]


class DecisionIn(_Body):
    """The customer's decision on one pending action."""

    tool_call_id: Text = Field(
        min_length=1, max_length=200, json_schema_extra={"pattern": REASON_PATTERN}
    )
    approved: StrictBool
    reason: Text | None = Field(
        default=None,
        max_length=MAX_REASON_CHARS,
        pattern=REASON_PATTERN,
        description="Why not (optional, for a decline): passed to whoever proposed the "
        "action (the assistant, or the person named by its proposed_by). "
        "Outer blanks are dropped; a blank reason is no reason.",
    )

    @field_validator("reason")
    @classmethod
    def _clean_reason(cls, value: str | None) -> str | None:
        return (value or "").strip(BLANKS) or None


class DecisionsIn(_Body):
    """One decision for every pending action of the conversation."""

    decisions: list[DecisionIn] = Field(min_length=1, max_length=MAX_DECISIONS)

    @model_validator(mode="after")
    def _one_each(self) -> DecisionsIn:
        ids = [d.tool_call_id for d in self.decisions]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            # Ids are quoted only when they are printable (the 422 body never carries
            # what it cannot show, nor a long quote): the message says what is wrong either way.
            named = ", ".join(repeated)
            if named.isprintable() and named.isascii() and len(named) <= 120:
                raise ValueError(f"More than one decision for {named}.")
            raise ValueError("More than one decision for the same tool_call_id.")
        return self


# --- history -------------------------------------------------------------------------------


class CustomerItem(BaseModel):
    """A message the customer sent."""

    type: Literal["customer"] = "customer"
    id: str | None
    text: str


class AssistantItem(BaseModel):
    """A message an assistant wrote."""

    type: Literal["assistant"] = "assistant"
    id: str | None
    assistant: str
    label: str
    text: str
    html: str = Field(description="The text (Markdown) as sanitized HTML, safe to show as is.")
    person: str = Field(
        default="",
        description="The name of the person from customer service who wrote it (empty: "
        "an assistant did).",
    )


class ActionItem(BaseModel):
    """What became of a sensitive action: approved, declined, refused or not done."""

    type: Literal["action"] = "action"
    tool_call_id: str
    tool: str
    title: str
    outcome: Literal["approved", "failed", "declined", "refused", "not_done"] = Field(
        description="approved: it ran; failed: approved but refused by the rules when it ran; "
        "declined: the customer said no; refused: it could not be done, so it was not asked; "
        "not_done: never decided (a new message came first, the turn was cancelled, ...)."
    )
    reason: str | None = Field(
        description="The customer's reason for a decline; why it was not done otherwise."
    )
    lines: list[str] = Field(description="The preview the customer decided on.")
    amount: str | None
    result: str | None = Field(description="What the action did, in the customer's words.")
    text: str = Field(
        description="The whole record in one sentence, as the terminal's history shows it.",
        examples=["Declined: Book hotel (To pay: EUR 1,040.00). Reason: Too expensive."],
    )


class NoticeItem(BaseModel):
    """A note in the conversation that no one wrote (a turn cancelled or cut short)."""

    type: Literal["notice"] = "notice"
    text: str


HistoryItem = Annotated[
    CustomerItem | AssistantItem | ActionItem | NoticeItem, Field(discriminator="type")
]


class History(BaseModel):
    """The conversation as the customer saw it; tool calls and their raw results left out."""

    conversation_id: str
    items: list[HistoryItem]


# --- events of a streamed turn -------------------------------------------------------------


class TokenEvent(BaseModel):
    """A piece of an assistant's reply as the model writes it."""

    type: Literal["token"] = "token"
    text: str
    assistant: str
    label: str
    message_id: str | None = Field(description="The same for every piece of one reply.")


class StatusEvent(BaseModel):
    """What the assistant is doing, in the customer's words."""

    type: Literal["status"] = "status"
    text: str = Field(examples=["Searching flights…"])
    tool: str | None


class MessageEvent(BaseModel):
    """An assistant's complete message (replaces the pieces streamed with its id)."""

    type: Literal["message"] = "message"
    id: str | None
    assistant: str
    label: str
    text: str
    html: str = Field(description="The text (Markdown) as sanitized HTML, safe to show as is.")


class RecordEvent(BaseModel):
    """A line of the history as it happens.

    The customer's message (first, as the turn starts), what became of an action, or a
    notice; ``item`` is exactly what the history endpoint shows for it afterwards (the
    same id).
    """

    type: Literal["record"] = "record"
    item: Annotated[CustomerItem | ActionItem | NoticeItem, Field(discriminator="type")]


class PendingEvent(BaseModel):
    """The turn stopped: these actions wait for the customer's decision."""

    type: Literal["pending"] = "pending"
    actions: list[PendingActionOut]


class DoneEvent(BaseModel):
    """The turn is over (the last event, unless ``error``)."""

    type: Literal["done"] = "done"
    pending_actions: int
    assistant: str
    label: str


class ErrorEvent(BaseModel):
    """The turn failed or was stopped; the conversation is saved (the last event)."""

    type: Literal["error"] = "error"
    detail: str = Field(description="What the customer is told.")
    kind: str | None = Field(
        default=None,
        description="stopped (the customer pressed Stop), cancelled (the service stopped), "
        "model (the model server failed), time_limit (it ran past its time limit), "
        "lost_claim (another window or worker took the conversation over), unexpected, "
        "or another failure of the protocol.",
    )
    reference: str | None = Field(
        default=None,
        description="An id the customer can quote; the service's log has the details under it.",
    )


StreamEvent = Annotated[
    TokenEvent | StatusEvent | MessageEvent | RecordEvent | PendingEvent | DoneEvent | ErrorEvent,
    Field(discriminator="type"),
]
STREAM_EVENT_NAMES = ("token", "status", "message", "record", "pending", "done", "error")
