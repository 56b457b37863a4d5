"""The events a run of the graph yields, and what names a conversation.

Kept apart from ``conversations.assistant`` so that the records built from them
(``conversations.records``) need not import the graph's driver.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal, cast, get_args

from langchain_core.messages import AIMessage, AnyMessage

from assistants.calls import Flag

# ``response_metadata`` key marking the note that closes a turn cut short (the name is
# older than the causes: every closing note carries it).
CANCELLED_KEY = "turn_cancelled"
# ``response_metadata`` key of that note (and ``artifact`` key of the calls it left
# unanswered) naming why the turn was cut short: a ``CutCause``.
CUT_KEY = "cut_cause"
# ``response_metadata`` key of a reply cut mid-stream, kept as far as the customer read it.
CUT_REPLY_KEY = "cut_mid_reply"

# ``response_metadata`` keys of what a person from the customer-service team wrote into a
# conversation (``conversations.desk``): their name on a message to the customer, and the
# mark of a note to the assistant that the customer never sees.
PERSON_KEY = "person"
STAFF_NOTE_KEY = "staff_note"
# ``additional_kwargs`` key of the customer's request for a person, kept in the history as
# their message so that everything after it reads in order (for the model too).
ASKED_FOR_PERSON_KEY = "asked_for_person"

CutCause = Literal["cancelled", "service", "model", "time_limit", "crash", "lost_claim"]
"""Why a turn ended before its reply: the customer cancelled it, the service stopped, the
model server failed, a time limit ran out, the program answering it died (or failed on
a bug), or it lost its hold on the conversation to another window."""


class Cancel(Flag):
    """A turn's cancel that can say who set it, read when the turn is closed.

    The service starts every turn ready to record a cancel as its own stop
    (``service``); the customer's Stop sets the cancel with ``cancelled``, so the
    history says the customer cancelled.
    """

    cause: CutCause | None = None

    def set_by(self, cause: CutCause) -> None:
        """Set the cancel, recording ``cause``."""
        self.cause = cause
        self.set()


def cancel_cause(cancel: threading.Event, default: CutCause) -> CutCause:
    """Return why ``cancel`` was set: its recorded cause, else ``default``."""
    cause = getattr(cancel, "cause", None)
    return cause if cause is not None else default


CUT_CAUSES: tuple[CutCause, ...] = get_args(CutCause)


@dataclass(frozen=True)
class TokenEvent:
    """A piece of an assistant's reply, as the model streams it."""

    text: str
    assistant: str
    message_id: str | None


@dataclass(frozen=True)
class MessageEvent:
    """A complete message added by a node (an assistant's reply or a tool result)."""

    message: AnyMessage
    node: str


TurnEvent = TokenEvent | MessageEvent


@dataclass(frozen=True)
class Thread:
    """One conversation: its id and the passenger it acts for."""

    thread_id: str
    passenger_id: str


def is_cancel_note(message: AnyMessage) -> bool:
    """Tell whether ``message`` is the note that closes a turn cut short (any cause)."""
    return isinstance(message, AIMessage) and bool(message.response_metadata.get(CANCELLED_KEY))


def cut_cause(message: AnyMessage) -> CutCause | None:
    """Return why the turn ``message`` closes was cut short, or ``None`` for any other.

    Notes saved before the causes were recorded were all written for a cancel.
    """
    if not is_cancel_note(message):
        return None
    cause = message.response_metadata.get(CUT_KEY, "cancelled")
    return cast(CutCause, cause) if cause in CUT_CAUSES else "cancelled"
