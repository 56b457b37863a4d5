"""A scripted tool-calling chat model for tests (LangChain's fakes lack ``bind_tools``).

Each call to the model takes the next item of its script: an ``AIMessage`` to answer
with, a callable that builds one from the messages the model received, or an exception
to raise. Replies are streamed word by word when the caller streams, so the token path
of the terminal program is exercised too.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

ScriptItem = AIMessage | Callable[[list[BaseMessage]], AIMessage] | BaseException

_ids = itertools.count(1)


def call(name: str, args: dict[str, Any] | None = None, call_id: str | None = None) -> ToolCall:
    """Return a tool call as a model would make it."""
    return ToolCall(
        name=name, args=args or {}, id=call_id or f"call_{next(_ids)}", type="tool_call"
    )


def say(text: str = "", *calls: ToolCall) -> AIMessage:
    """Return a model reply with ``text`` and the tool ``calls``."""
    return AIMessage(content=text, tool_calls=list(calls))


class ScriptExhaustedError(AssertionError):
    """The model was called more often than the script foresaw."""


class ScriptedChatModel(BaseChatModel):
    """A chat model that replays a script and records what it was sent."""

    script: list[Any] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        names = []
        for tool in tools:
            names.append(getattr(tool, "name", None) or getattr(tool, "__name__", str(tool)))
        self.bound_tools.append(names)
        return self

    def extend(self, *items: ScriptItem) -> None:
        self.script.extend(items)

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.received.append(list(messages))
        if not self.script:
            raise ScriptExhaustedError(
                f"model called {len(self.received)} times; last message: {messages[-1]!r}"
            )
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        reply = item(list(messages)) if callable(item) else item
        return reply.model_copy(deep=True)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._next(messages)
        text = reply.content if isinstance(reply.content, str) else ""
        words = text.split(" ")
        for index, word in enumerate(words):
            piece = word if index == len(words) - 1 else word + " "
            if not piece:
                continue
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
        tool_chunks = [
            {
                "name": c["name"],
                "args": _json(c["args"]),
                "id": c["id"],
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(reply.tool_calls)
        ]
        # Malformed calls stream as raw argument text, as a provider would send them.
        tool_chunks += [
            {
                "name": c.get("name"),
                "args": c.get("args"),
                "id": c.get("id"),
                "index": len(tool_chunks) + i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(reply.invalid_tool_calls)
        ]
        # The reply's metadata (a finish_reason of "length", say) comes with the last chunk,
        # as a provider sends it.
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=tool_chunks,  # type: ignore[arg-type]
                response_metadata=dict(reply.response_metadata),
            )
        )

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # The same chunks, made in a worker thread once per call (a script item may wait,
        # as a model server does, without holding up the event loop), then streamed on the
        # loop as an async client streams them. LangChain's default would hand every chunk
        # of ``_stream`` over from a worker thread.
        chunks = await asyncio.to_thread(lambda: list(self._stream(messages, stop, None, **kwargs)))
        for chunk in chunks:
            if run_manager and chunk.text:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
