"""The events a run of the graph yields, and what names a conversation.

Kept apart from ``conversations.assistant`` so that the records built from them
(``conversations.records``) need not import the graph's driver.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import AIMessage, AnyMessage

# ``response_metadata`` key marking the note that closes a cancelled turn.
CANCELLED_KEY = "turn_cancelled"


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
    """Tell whether ``message`` is the note that closes a cancelled or interrupted turn."""
    return isinstance(message, AIMessage) and bool(message.response_metadata.get(CANCELLED_KEY))
