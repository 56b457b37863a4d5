"""``ChatOpenAI`` with the limits a real model server needs.

- The reply limit is sent under the name the server reads (see
  ``ModelSettings.sends_legacy_max_tokens``).
- A reply has a total time limit, checked on every streamed chunk and while waiting for
  one: the client's own timeout only bounds the wait between two chunks, so a model that
  loops and streams steadily would never trip it. Leaving the stream closes the HTTP
  response.
- A cancelled turn stops the reply within a tenth of a second, even while the server
  sends nothing (a long prompt still being processed, a stalled server): the HTTP
  response is read by a helper thread, and the node's thread waits for its chunks while
  watching the caller's cancel event (``conversations.TravelAssistant.send(cancel=…)``).
  The helper closes the response at its next chunk, or gives up at the client's timeout.
- A reply the server stopped at the output limit (``finish_reason == "length"``) ends with
  a note the customer sees as it streams (``assistants.context.cut_off_note``); the
  assistant node then drops the tool calls of such a reply, whose arguments are cut.

The assistants read ``context_tokens`` and ``max_tokens`` from the model to size the
prompt they send (``assistants.assistant``).
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI

from assistants.context import CUT_OFF_KEY, cut_off_note
from assistants.providers import ReplyTimer, TurnCancelledError


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

    def invoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        """Call the model; a cancel event among the run's callbacks can stop the reply."""
        token = _CANCEL.set(_cancel_event(config))
        try:
            return super().invoke(input, config, stop=stop, **kwargs)
        finally:
            _CANCEL.reset(token)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        timer = ReplyTimer(self.reply_seconds)
        timer.check()
        cancel = _CANCEL.get()
        chunks = super()._stream(messages, stop=stop, run_manager=run_manager, **kwargs)
        if cancel is not None:
            chunks = _watched(chunks, cancel, timer)
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


def _cancel_event(config: RunnableConfig | None) -> threading.Event | None:
    """Return the cancel event of the run, if one of its callbacks carries one.

    ``conversations`` passes a callback handler with a ``cancel`` event for every turn.
    """
    callbacks = (config or {}).get("callbacks")
    handlers = getattr(callbacks, "handlers", callbacks)
    for handler in handlers if isinstance(handlers, list) else ():
        event = getattr(handler, "cancel", None)
        if isinstance(event, threading.Event):
            return event
    return None


# The cancel event of the reply being produced in this context (set by ``invoke``).
_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "travel_assistant_cancel", default=None
)
_END = object()
# How often the node's thread looks at the cancel event while no chunk comes.
_WATCH_SECONDS = 0.1


def _watched(
    source: Iterator[ChatGenerationChunk], cancel: threading.Event, timer: ReplyTimer
) -> Iterator[ChatGenerationChunk]:
    """Yield the chunks of ``source``, read by a helper thread, until ``cancel`` is set.

    Raises:
        TurnCancelledError: ``cancel`` was set before the reply ended.
        ModelDeadlineError: The reply took longer than its time limit.
    """
    handed: queue.Queue[Any] = queue.Queue()
    abandoned = threading.Event()

    def pump() -> None:
        try:
            for chunk in source:
                if abandoned.is_set():
                    break  # leaving the generator closes the HTTP response
                handed.put(chunk)
            handed.put(_END)
        except BaseException as error:  # handed to the node's thread, raised there
            handed.put(error)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(pump,), name="model-stream", daemon=True).start()
    try:
        while True:
            try:
                item = handed.get(timeout=_WATCH_SECONDS)
            except queue.Empty:
                if cancel.is_set():
                    raise TurnCancelledError("The turn was cancelled.") from None
                timer.check()
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        abandoned.set()
