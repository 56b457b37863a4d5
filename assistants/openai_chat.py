"""``ChatOpenAI`` with the limits a real model server needs.

- The reply limit is sent under the name the server reads (see
  ``ModelSettings.sends_legacy_max_tokens``).
- A reply has a total time limit, checked on every streamed chunk and while waiting for
  one: the client's own timeout only bounds the wait between two chunks, so a model that
  loops and streams steadily would never trip it. Leaving the stream closes the HTTP
  response.
- A cancelled turn stops the reply within a tenth of a second and closes its HTTP
  connection at once, even while the server sends nothing, not even the response headers
  (a long prompt still being processed, a stalled server), so a server such as llama.cpp
  stops working on it: the request is made with the async OpenAI client, as a task on
  one event loop of the process (``_model_loop``), and the node's thread waits for its
  chunks while watching the caller's cancel event
  (``conversations.TravelAssistant.send(cancel=…)``). On a cancel, or a time limit, the
  task is cancelled, and a cancelled request closes its connection.
- A request's body goes to the server as LangChain wrote it. The OpenAI SDK's
  ``chat.completions.create`` first walks every message and tool schema of the body
  against its type annotations, to rename and reformat fields; no field of a chat
  completion request has another name or format on the wire, so for chat completions the
  walk changes nothing, yet it was half of the client's CPU per request and grows with the
  conversation (``_LeanCompletions``). The streamed chunks reach LangChain as the dicts
  they came as, not through the SDK's models of them (``_ChunkDict``). BENCHMARKS.md.
- The requests made on ``_model_loop`` go over the SDK's aiohttp client
  (``openai.DefaultAioHttpClient``), one for the process (``model_http_client``). The
  SDK's default, HTTPX2, parses HTTP in Python, and its pool probes the socket of every
  idle connection (two system calls each) whenever a request starts or ends: with twenty
  customers at once that was a quarter of the model requests' CPU. Its errors are read
  as the default client's (``assistants.providers``). Requests made on any other event
  loop (a caller's own ``ainvoke``) keep the SDK's default client.
- A reply the server stopped at the output limit (``finish_reason == "length"``) ends with
  a note the customer sees as it streams (``assistants.context.cut_off_note``); the
  assistant node then drops the tool calls of such a reply, whose arguments are cut.

The assistants read ``context_tokens`` and ``max_tokens`` from the model to size the
prompt they send (``assistants.assistant``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import inspect
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from typing import Any, Self, TypeVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from openai import AsyncStream, Stream
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletion
from pydantic import model_validator

from assistants.context import CUT_OFF_KEY, cut_off_note
from assistants.providers import ReplyTimer, TurnCancelledError

try:  # the SDK's own helper for a request's options, which create uses too
    from openai._base_client import make_request_options
except ImportError:  # another SDK layout: requests go through create, as LangChain sends them
    make_request_options = None  # type: ignore[assignment]


class BoundedChatOpenAI(ChatOpenAI):
    """An OpenAI-compatible chat model whose every reply is bounded in tokens and time."""

    context_tokens: int
    """The server's context window: the prompt and the reply must fit in it."""
    reply_seconds: float | None
    """The total time one reply may take (``None``: no limit beyond the run's)."""
    legacy_max_tokens: bool = False
    """Send the reply limit as ``max_tokens`` (servers other than OpenAI's own)."""

    @model_validator(mode="after")
    def _send_bodies_as_written(self) -> Self:
        # Named apart from ChatOpenAI's validators, which pydantic would otherwise replace.
        if _LeanCompletions.fits(self.client):
            self.client = _LeanCompletions(self.client)
        if _LeanCompletions.fits(self.async_client):
            root = self.root_async_client
            self.async_client = _LeanCompletions(
                self.async_client, partial(_on_model_loop, root) if root is not None else None
            )
        return self

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
        chunks: Iterator[ChatGenerationChunk]
        if cancel is None:
            chunks = super()._stream(messages, stop=stop, run_manager=run_manager, **kwargs)
        else:
            source = super()._astream(messages, stop=stop, **kwargs)
            chunks = _watched(source, cancel, timer, run_manager)
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
# How long a cancelled request may take to close its connection before the turn goes on.
_CLOSE_SECONDS = 2.0

T = TypeVar("T")

_loop_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None


def _this_process(made: tuple[int, T] | None) -> T | None:
    """Return what ``made`` holds if this process made it (a forked child makes its own)."""
    return made[1] if made is not None and made[0] == os.getpid() else None


def _model_loop() -> asyncio.AbstractEventLoop:
    """Return the event loop that runs the model requests of this process.

    One loop, in a daemon thread, for the process (a forked child makes its own): the
    async HTTP client keeps its pooled connections on the loop that opened them.
    """
    global _loop
    with _loop_lock:
        loop = _this_process(_loop)
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="model-requests", daemon=True).start()
            _loop = (os.getpid(), loop)
        return loop


_http_lock = threading.Lock()
_http: tuple[int, Any] | None = None


def model_http_client() -> Any | None:
    """Return the HTTP client of the requests made on ``_model_loop`` (``None``: the SDK's).

    The OpenAI SDK's aiohttp client, shared by every model of the process (a forked child
    makes its own). Its connections belong to the event loop that opened them: it is
    used on ``_model_loop`` alone, and closed there when the process exits. ``None``
    where the SDK has no aiohttp client or aiohttp is missing: the SDK's default then.
    """
    global _http
    with _http_lock:
        client = _this_process(_http)
        if client is None:
            try:
                from openai import DefaultAioHttpClient

                client = DefaultAioHttpClient()
            except (ImportError, RuntimeError):  # no such client, or no aiohttp
                return None
            if _http is None:
                atexit.register(_close_http_client)
            _http = (os.getpid(), client)
        return client


def _running_model_loop() -> bool:
    """Tell whether the running event loop (if any) is this process's ``_model_loop``."""
    with _loop_lock:
        ours = _this_process(_loop)
    try:
        return ours is not None and asyncio.get_running_loop() is ours
    except RuntimeError:
        return False


def _on_model_loop(root: Any) -> Any | None:
    """Return ``chat.completions`` of a copy of ``root`` over ``model_http_client``.

    ``None`` when there is no such client: the requests stay on ``root``'s own.
    """
    client = model_http_client()
    return None if client is None else root.with_options(http_client=client).chat.completions


def _close_http_client() -> None:
    """Close the shared client on the model loop, where its connections live (at exit)."""
    with _loop_lock, _http_lock:
        loop, client = _this_process(_loop), _this_process(_http)
    if loop is None or client is None or loop.is_closed() or not loop.is_running():
        return
    closing = asyncio.run_coroutine_threadsafe(client.aclose(), loop)
    with contextlib.suppress(Exception):  # leaving anyway: a close that fails is no loss
        closing.result(_CLOSE_SECONDS)


def _watched(
    source: AsyncIterator[ChatGenerationChunk],
    cancel: threading.Event,
    timer: ReplyTimer,
    run_manager: CallbackManagerForLLMRun | None,
) -> Iterator[ChatGenerationChunk]:
    """Yield the chunks of ``source``, run on ``_model_loop``, until ``cancel`` is set.

    Leaving early (a cancel, a time limit, the caller gone) cancels the request's task,
    which closes its HTTP connection whether or not the response has begun.

    Raises:
        TurnCancelledError: ``cancel`` was set before the reply ended.
        ModelDeadlineError: The reply took longer than its time limit.
    """
    handed: queue.Queue[Any] = queue.Queue()

    async def pump() -> None:
        try:
            async for chunk in source:
                handed.put(chunk)
            handed.put(_END)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # handed to the node's thread, raised there
            handed.put(error)

    loop = _model_loop()
    finished = threading.Event()
    tasks: list[asyncio.Task[None]] = []

    def start() -> None:
        task = loop.create_task(pump())
        task.add_done_callback(lambda _task: finished.set())
        tasks.append(task)

    def stop() -> None:
        for task in tasks:
            task.cancel()

    loop.call_soon_threadsafe(start)
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
            if run_manager:
                logprobs = (item.generation_info or {}).get("logprobs")
                run_manager.on_llm_new_token(item.text, chunk=item, logprobs=logprobs)
            yield item
    finally:
        if not finished.is_set():
            loop.call_soon_threadsafe(stop)  # after ``start``: the loop keeps their order
            # The connection is closed as the task unwinds, on the loop: wait for it, so
            # the server is free before the next request of the conversation.
            finished.wait(_CLOSE_SECONDS)


# What ``create`` takes beside the body: they become the request's options.
_REQUEST_OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")
# Newer SDKs name the authentication a request needs; older ones always send the key.
_SDK_HAS_SECURITY = make_request_options is not None and "security" in (
    inspect.signature(make_request_options).parameters
)


class _LeanCompletions:
    """``chat.completions`` of an OpenAI client whose ``create`` sends the body as given.

    It makes the request ``create`` makes (the same path, options and authentication)
    from the body without the SDK's walk of it (``openai._utils._transform``):
    LangChain's payload is already in the API's own form. A streamed reply's chunks come
    as dicts (``_ChunkDict``), a whole reply as the SDK's ``ChatCompletion``.
    ``tests/unit/test_openai_chat.py`` checks that the server receives the same request
    both ways and that LangChain reads the same reply. Everything else is the wrapped
    resource's.
    """

    def __init__(
        self, completions: Any, on_model_loop: Callable[[], Any | None] | None = None
    ) -> None:
        """Wrap ``completions`` (``client.chat.completions``, sync or async).

        ``on_model_loop`` makes, on first use, the async completions that the requests
        made on ``_model_loop`` go through instead (``None`` from it: these ones).
        """
        self._completions = completions
        self._async = isinstance(completions, AsyncCompletions)
        self._on_model_loop = on_model_loop
        self._model_loop_completions: Any | None = None

    @staticmethod
    def fits(completions: Any) -> bool:
        """Tell whether the installed SDK has what ``create`` here relies on.

        Where it does not (another major version), requests go through the SDK's own
        ``create``: slower, never wrong.
        """
        return (
            completions is not None
            and make_request_options is not None
            and hasattr(completions, "_post")
        )

    def create(self, **payload: Any) -> Any:
        """Post ``payload`` to ``/chat/completions``, as ``create(**payload)`` would."""
        assert make_request_options is not None  # fits() said so
        given = {k: payload.pop(k) for k in _REQUEST_OPTIONS if k in payload}
        if _SDK_HAS_SECURITY:
            given["security"] = {"bearer_auth": True}  # as create asks for the API key
        stream = bool(payload.get("stream"))
        return self._target()._post(
            "/chat/completions",
            body=payload,
            options=make_request_options(**given),
            cast_to=ChatCompletion,
            stream=stream,
            stream_cls=(AsyncStream if self._async else Stream)[_ChunkDict],
        )

    def _target(self) -> Any:
        """Return the completions this request goes through (see ``__init__``)."""
        if self._on_model_loop is None or not _running_model_loop():
            return self._completions
        if self._model_loop_completions is None:  # made once, on the model loop's thread
            self._model_loop_completions = self._on_model_loop() or self._completions
        return self._model_loop_completions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)


class _ChunkDict:
    """A streamed chunk as the JSON object it came as, for LangChain, which reads dicts.

    The SDK would build its model of each chunk, which LangChain turns back into a dict
    (``model_dump``): most of the client's remaining CPU per chunk. The fields LangChain
    reads by key are set to ``None`` where the server left them out, as ``model_dump``
    would have them, so a server that omits one is read as before. The SDK calls
    ``build`` (its ``ModelBuilderProtocol``) for every chunk.
    """

    @classmethod
    def build(cls, *, response: Any, data: object) -> Any:
        """Return ``data``, the chunk, with the fields LangChain reads by key present."""
        choices = data.get("choices") if isinstance(data, dict) else None
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            delta = choice.setdefault("delta", None)
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict):
                    call.setdefault("index", None)
                    call.setdefault("id", None)
                    function = call.setdefault("function", None)
                    if isinstance(function, dict):
                        function.setdefault("name", None)
                        function.setdefault("arguments", None)
        return data
