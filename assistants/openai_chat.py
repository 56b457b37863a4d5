"""``ChatOpenAI`` with the limits a real model server needs.

- The reply limit is sent under the name the server reads (see
  ``ModelSettings.sends_legacy_max_tokens``).
- A reply has a total time limit, checked on every streamed chunk: the client's own
  timeout only bounds the wait between two chunks, so a model that loops and streams
  steadily would never trip it. Leaving the stream closes the HTTP response.
- A reply the server stopped at the output limit (``finish_reason == "length"``) ends with
  a note the customer sees as it streams (``assistants.context.cut_off_note``); the
  assistant node then drops the tool calls of such a reply, whose arguments are cut.

The assistants read ``context_tokens`` and ``max_tokens`` from the model to size the
prompt they send (``assistants.assistant``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI

from assistants.context import CUT_OFF_KEY, cut_off_note
from assistants.providers import ReplyTimer


class BoundedChatOpenAI(ChatOpenAI):
    """An OpenAI-compatible chat model whose every reply is bounded in tokens and time."""

    context_tokens: int
    """The server's context window: the prompt and the reply must fit in it."""
    reply_seconds: float | None
    """The total time one reply may take (``None``: no limit beyond the run's)."""
    legacy_max_tokens: bool = False
    """Send the reply limit as ``max_tokens`` (servers other than OpenAI's own)."""

    def _get_request_payload(
        self,
        input_: LanguageModelInput,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        if self.legacy_max_tokens and "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        return payload

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        timer = ReplyTimer(self.reply_seconds)
        timer.check()
        chunks = super()._stream(messages, stop=stop, run_manager=run_manager, **kwargs)
        finish: str | None = None
        texts = calls = False
        try:
            for chunk in chunks:
                timer.check()
                finish = (chunk.generation_info or {}).get("finish_reason") or finish
                message = chunk.message
                texts = texts or bool(chunk.text)
                calls = calls or bool(
                    isinstance(message, AIMessageChunk) and message.tool_call_chunks
                )
                yield chunk
        finally:
            # Leaving early (a time limit, a cancelled turn) closes the HTTP response now.
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        if finish == "length":
            note = cut_off_note(calls)
            cut = ChatGenerationChunk(
                message=AIMessageChunk(
                    content=("\n\n" if texts else "") + note,
                    response_metadata={CUT_OFF_KEY: True},
                )
            )
            if run_manager:
                run_manager.on_llm_new_token(cut.text, chunk=cut)
            yield cut
