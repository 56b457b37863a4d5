"""The chat model sends each request as the OpenAI SDK's own ``create`` would."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from assistants.models import ModelSettings, build_chat_models
from assistants.openai_chat import BoundedChatOpenAI, _ChunkDict, model_http_client
from assistants.providers import ModelDeadlineError, diagnose
from tests.support.fake_openai import FakeOpenAI, Reply


@tool
def search_flights(departure_airport: str, limit: int = 20) -> str:
    """Search flights from an airport."""
    return departure_airport * limit


CONVERSATION = [
    SystemMessage("You help the passengers of Swiss Airlines."),
    HumanMessage("Which flights leave Zurich today? Prices in €, please."),
    AIMessage(
        "",
        tool_calls=[{"name": "search_flights", "args": {"departure_airport": "ZRH"}, "id": "c1"}],
    ),
    ToolMessage('[{"flight_no": "LX0112", "price": null}]', tool_call_id="c1"),
    AIMessage("LX0112 leaves at 09:00."),
    HumanMessage('Thanks\n\n"quoted" and ünïcode'),
]
# Headers that differ between any two requests, whoever makes them.
VARYING = {"content-length"}


def _model(base_url: str) -> BoundedChatOpenAI:
    settings = ModelSettings(model="scripted", base_url=base_url, api_key="sk-test")
    model = build_chat_models(settings)["primary_assistant"]
    assert isinstance(model, BoundedChatOpenAI)
    return model


def _payload(model: BoundedChatOpenAI) -> dict[str, Any]:
    bound = model.bind_tools([search_flights])
    kwargs = dict(bound.kwargs)  # type: ignore[attr-defined]
    return model._get_request_payload(CONVERSATION, **kwargs)


def _sent(fake: FakeOpenAI, index: int) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {k.lower(): v for k, v in fake.request_headers[index].items()}
    return fake.requests[index], {k: v for k, v in headers.items() if k not in VARYING}


def test_a_streamed_request_reaches_the_server_as_the_sdk_sends_it() -> None:
    with FakeOpenAI([Reply(text="one"), Reply(text="two")]) as fake:
        model = _model(fake.base_url)
        lean, stock = model.client, model.client._completions
        assert lean is not stock
        for completions in (lean, stock):
            chunks = list(completions.create(**_payload(model)))
            assert chunks  # the response streamed back through the SDK's own types
        assert _sent(fake, 0) == _sent(fake, 1)
        body, headers = _sent(fake, 0)
    assert body["tools"][0]["function"]["name"] == "search_flights"
    assert headers["authorization"] == "Bearer sk-test"


def test_the_async_client_sends_the_same_request_too() -> None:
    async def consume(model: BoundedChatOpenAI) -> list[int]:
        # One loop for both: the client keeps its connections on the loop that opened them.
        lean, stock = model.async_client, model.async_client._completions
        assert lean is not stock
        return [
            len([chunk async for chunk in await completions.create(**_payload(model))])
            for completions in (lean, stock)
        ]

    with FakeOpenAI([Reply(text="one"), Reply(text="two")]) as fake:
        assert 0 not in asyncio.run(consume(_model(fake.base_url)))
        assert _sent(fake, 0) == _sent(fake, 1)


def test_request_options_are_options_not_body() -> None:
    with FakeOpenAI([Reply(text="one")]) as fake:
        model = _model(fake.base_url)
        payload = {
            **_payload(model),
            "extra_body": {"cache_prompt": True},
            "extra_headers": {"X-Trace": "abc"},
        }
        list(model.client.create(**payload))
        body, headers = _sent(fake, 0)
    assert body["cache_prompt"] is True
    assert "extra_body" not in body and "extra_headers" not in body
    assert headers["x-trace"] == "abc"


@pytest.mark.parametrize("stream", [True, False])
def test_the_model_answers_through_the_lean_path(stream: bool) -> None:
    with FakeOpenAI([Reply(text="Here you are.")]) as fake:
        model = _model(fake.base_url).model_copy(update={"streaming": stream})
        reply = model.invoke(CONVERSATION)
        assert fake.requests[0].get("stream", False) is stream
    assert reply.content == "Here you are."


REPLIES = [
    Reply(text="LX0112 leaves at 09:00 from Zurich."),
    Reply(text="Let me look.", tool_calls=[("search_flights", {"departure_airport": "ZRH"})]),
    Reply(
        tool_calls=[
            ("search_flights", {"departure_airport": "ZRH", "limit": 3}),
            ("search_flights", {"departure_airport": "BSL"}),
        ],
        argument_pieces=5,
    ),
    Reply(text="A reply cut off by the output limit", finish_reason="length"),
    Reply(tool_calls=[("search_flights", {"departure_airport": "GVA"})], cut_arguments=12),
]


@pytest.mark.parametrize("reply", REPLIES, ids=["text", "text+call", "calls", "length", "cut"])
def test_the_model_reads_a_reply_as_it_did_through_the_sdk(reply: Reply) -> None:
    with FakeOpenAI([reply, reply]) as fake:
        lean = _model(fake.base_url).bind_tools([search_flights])
        model = _model(fake.base_url)
        model.client = model.client._completions  # the SDK's own create and chunk models
        stock = model.bind_tools([search_flights])
        ours, theirs = lean.invoke(CONVERSATION), stock.invoke(CONVERSATION)
    assert isinstance(ours, AIMessage) and isinstance(theirs, AIMessage)
    for name in ("content", "tool_calls", "invalid_tool_calls", "usage_metadata"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.response_metadata == theirs.response_metadata
    assert ours.content or ours.tool_calls or ours.invalid_tool_calls


# Chunks as some servers send them: fields missing that the SDK's models would fill in.
SPARSE_CHUNKS = [
    {"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]},
    {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [{"function": {}}]}}]},
    {"id": "x", "choices": [{"delta": {"tool_calls": [{"index": 0}]}}]},
    {"id": "x", "choices": [{"index": 0, "delta": {"content": "hi"}}], "usage": None},
    {"id": "x", "choices": []},
]


@pytest.mark.parametrize("raw", SPARSE_CHUNKS)
def test_a_sparse_chunk_reads_as_the_sdks_model_of_it(raw: dict[str, Any]) -> None:
    stock = construct_type(type_=ChatCompletionChunk, value=copy.deepcopy(raw)).model_dump()
    ours = _ChunkDict.build(response=None, data=copy.deepcopy(raw))
    # What LangChain reads by key, each as the SDK's dump has it.
    for mine, theirs in zip(ours["choices"], stock["choices"], strict=True):
        assert (mine["delta"] is None) == (theirs["delta"] is None)
        if mine["delta"] is None:
            continue
        assert mine["delta"].get("content") == theirs["delta"]["content"]
        calls = mine["delta"].get("tool_calls") or []
        their_calls = theirs["delta"]["tool_calls"] or []
        for call, their_call in zip(calls, their_calls, strict=True):
            for key in ("index", "id"):
                assert call[key] == their_call[key]
            function, their_function = call["function"], their_call["function"]
            assert (function is None) == (their_function is None)
            for key in ("name", "arguments") if function is not None else ():
                assert function[key] == their_function[key]


def test_another_sdk_layout_falls_back_to_the_sdks_create(monkeypatch: pytest.MonkeyPatch) -> None:
    import assistants.openai_chat as openai_chat

    monkeypatch.setattr(openai_chat, "make_request_options", None)
    with FakeOpenAI([Reply(text="Still here.")]) as fake:
        model = _model(fake.base_url)
        assert not isinstance(model.client, openai_chat._LeanCompletions)
        assert not isinstance(model.async_client, openai_chat._LeanCompletions)
        assert model.invoke(CONVERSATION).content == "Still here."


class _Cancellable(BaseCallbackHandler):
    """What ``conversations`` passes with every turn: a handler carrying its cancel event."""

    def __init__(self) -> None:
        self.cancel = threading.Event()


def _on_the_model_loop(model: BoundedChatOpenAI) -> AIMessage:
    """Call ``model`` as a turn does: with a cancel event, so on ``_model_loop``."""
    reply = model.invoke(CONVERSATION, config={"callbacks": [_Cancellable()]})
    assert isinstance(reply, AIMessage)
    return reply


def test_a_turns_request_goes_over_the_shared_aiohttp_client() -> None:
    with FakeOpenAI([Reply(text="Over aiohttp."), Reply(text="Over aiohttp.")]) as fake:
        model, other = _model(fake.base_url), _model(fake.base_url)
        assert _on_the_model_loop(model).content == "Over aiohttp."
        assert _on_the_model_loop(other).content == "Over aiohttp."
    shared = model_http_client()
    assert shared is not None and type(shared).__name__ != "AsyncHttpxClientWrapper"
    for built in (model, other):  # one client for the process, whatever the model
        used = built.async_client._model_loop_completions
        assert used is not None and used._client._client is shared
    # The same request as the SDK's default client sends from another loop.
    first, _ = _sent(fake, 0)
    assert first["messages"][-1]["content"] == CONVERSATION[-1].content
    assert first["stream"] is True


def test_a_request_on_another_loop_keeps_the_sdks_client() -> None:
    async def ask(model: BoundedChatOpenAI) -> object:
        return await model.ainvoke(CONVERSATION)

    with FakeOpenAI([Reply(text="Over HTTPX.")]) as fake:
        model = _model(fake.base_url)
        assert getattr(asyncio.run(ask(model)), "content", None) == "Over HTTPX."
    # A loop that closes with the call would leave a shared client's connections dead.
    assert model.async_client._model_loop_completions is None


def test_both_clients_send_the_same_headers_and_body() -> None:
    async def stock(model: BoundedChatOpenAI) -> None:
        async for _chunk in model.astream(CONVERSATION):
            pass

    with FakeOpenAI([Reply(text="one"), Reply(text="two")]) as fake:
        _on_the_model_loop(_model(fake.base_url))
        asyncio.run(stock(_model(fake.base_url)))
        (aio_body, aio_headers), (httpx_body, httpx_headers) = _sent(fake, 0), _sent(fake, 1)
    assert (aio_body, aio_headers) == (httpx_body, httpx_headers)


@contextmanager
def _listener(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that does ``answer`` with each connection; its base URL."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(65536)
                answer(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _failure(base_url: str, timeout: float = 30.0) -> str:
    settings = ModelSettings(model="scripted", base_url=base_url, api_key="k", timeout=timeout)
    model = build_chat_models(settings)["primary_assistant"]
    assert isinstance(model, BoundedChatOpenAI)
    with pytest.raises(Exception) as raised:
        _on_the_model_loop(model)
    return diagnose(raised.value).what


def test_a_turn_that_cannot_connect_says_the_server_cannot_be_reached() -> None:
    # The aiohttp client calls a refused connection a "ConnectTimeout".
    assert _failure(f"http://127.0.0.1:{_free_port()}/v1") == "Cannot reach the model server"


def test_a_server_that_hangs_up_is_a_broken_connection_not_a_timeout() -> None:
    with _listener(lambda connection: None) as base_url:
        what = _failure(base_url)
    assert what == "The connection to the model server broke off during the reply"


def test_a_server_that_says_nothing_is_a_timeout() -> None:
    with _listener(lambda connection: time.sleep(1.5)) as base_url:
        what = _failure(base_url, timeout=0.3)
    assert what == "The model server did not answer in time"


def _keepalives_only(connection: socket.socket) -> None:
    """Answer 200 and a stream that says it is alive, and nothing else, for five seconds."""
    connection.sendall(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    ping = b": keepalive\n\n"
    deadline = time.monotonic() + 5
    with contextlib.suppress(OSError):  # the client hung up: what the test wants
        while time.monotonic() < deadline:
            connection.sendall(b"%x\r\n%s\r\n" % (len(ping), ping))
            time.sleep(0.05)


def test_a_stream_of_keepalives_without_content_ends_at_the_reply_limit() -> None:
    # LangChain's own per-chunk timeout is off (a task per chunk); the reply's limit
    # still ends a stream that never says anything, though its bytes keep coming.
    with _listener(_keepalives_only) as base_url:
        settings = ModelSettings(
            model="scripted", base_url=base_url, api_key="k", timeout=30, reply_seconds=0.5
        )
        model = build_chat_models(settings)["primary_assistant"]
        assert isinstance(model, BoundedChatOpenAI) and model.stream_chunk_timeout is None
        started = time.monotonic()
        with pytest.raises(ModelDeadlineError):
            _on_the_model_loop(model)
        assert time.monotonic() - started < 3
