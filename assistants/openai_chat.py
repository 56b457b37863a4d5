"""``ChatOpenAI`` carrying the limits the assistants size and bound their calls with.

Nothing here changes how LangChain talks to the server: the model is ``ChatOpenAI`` with
three more fields, read by the assistant node (``assistants.assistant``):

- ``context_tokens``, the server's context window, and ``reply_tokens``, the most one
  reply may take, size the prompt (``assistants.models.max_tokens_of``). The reply limit
  itself is sent as ChatOpenAI's ``max_tokens`` or, for servers that read the older
  name, in ``extra_body`` (``assistants.models.build_chat_models``).
- ``reply_seconds`` bounds one reply in total: the client's own timeout only bounds the
  wait between two chunks, so a model that loops and streams steadily would never trip
  it. The node awaits each call with ``assistants.calls.bounded``, which also ends it at
  once when the turn is cancelled; a cancelled request closes its HTTP connection.

A reply the server stopped at the output limit (``finish_reason == "length"``) is kept
with a note, and its tool calls dropped, by the node (``assistants.context.mark_cut_off``).
"""

from __future__ import annotations

from langchain_openai import ChatOpenAI


class BoundedChatOpenAI(ChatOpenAI):
    """An OpenAI-compatible chat model whose every reply is bounded in tokens and time."""

    context_tokens: int
    """The server's context window: the prompt and the reply must fit in it."""
    reply_seconds: float | None
    """The total time one reply may take (``None``: no limit beyond the run's)."""
    reply_tokens: int | None = None
    """The most tokens one reply may take, however the limit is sent."""
