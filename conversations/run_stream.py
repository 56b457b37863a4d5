"""A run's stream as a turn's events: the reply's tokens as they come, messages once done.

``TravelAssistant`` reads the graph's ``messages`` and ``updates`` streams through
``Streaming`` and ``message_events``; ``Streaming`` also keeps what the customer saw of
a reply that never finished, so a cut turn can save it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage

from conversations.events import CUT_REPLY_KEY, MessageEvent, TokenEvent


def message_events(payload: Any) -> Iterator[MessageEvent]:
    """Return the complete messages of one ``updates`` event, with the node that added them."""
    for node, update in (payload or {}).items():
        if type(update) is not dict and not isinstance(update, Mapping):  # dict: no ABC check
            continue
        for message in update.get("messages", []) or []:
            if isinstance(message, _SHOWN):
                yield MessageEvent(message, node)


# The messages a turn shows as they come: a tuple, not a union built at every check.
_SHOWN = (AIMessage, ToolMessage)


@dataclass
class Streaming:
    """The replies of a run as they streamed: their text so far and node, by message id."""

    texts: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def token(self, payload: Any) -> TokenEvent | None:
        """Return a ``messages`` event as a token of a reply, or ``None`` for anything else."""
        chunk, metadata = payload
        if type(chunk) is not AIMessageChunk or not isinstance(chunk.content, str):
            return None
        if not chunk.content:
            return None
        node = str((metadata or {}).get("langgraph_node", ""))
        if chunk.id:
            self.texts[chunk.id] = self.texts.get(chunk.id, "") + chunk.content
            self.nodes[chunk.id] = node
        return TokenEvent(chunk.content, node, chunk.id)

    def finish(self, event: MessageEvent) -> TokenEvent | None:
        """Mark ``event``'s message finished; return what its tokens did not carry, if any.

        A reply cut at the output limit ends with a note the node adds after the stream
        (``assistants.assistant``): the customer sees it stream like the rest.
        """
        message = event.message
        key = message.id or ""
        self.done.add(key)
        sent = self.texts.get(key)
        if not sent or not isinstance(message, AIMessage) or not isinstance(message.content, str):
            return None
        if len(message.content) <= len(sent) or not message.content.startswith(sent):
            return None
        self.texts[key] = message.content
        return TokenEvent(message.content[len(sent) :], event.node, message.id)

    def cut(self) -> list[AIMessage]:
        """Return the reply the customer saw part of that never finished, as said.

        Only the last one: a model call that failed and was retried streamed its reply
        again from the start, so an earlier attempt's part is superseded.
        """
        unfinished = [
            (key, text) for key, text in self.texts.items() if key not in self.done and text.strip()
        ]
        if not unfinished:
            return []
        key, text = unfinished[-1]
        return [
            AIMessage(
                content=text,
                id=key,
                name=self.nodes[key],
                response_metadata={CUT_REPLY_KEY: True},
            )
        ]
