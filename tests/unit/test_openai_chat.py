"""The chat model over a real HTTP server: the reply limit it sends, and how a call ends.

Every call is made as a turn makes it: ``ChatOpenAI.ainvoke`` awaited through
``assistants.calls.bounded``, on an event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from assistants.call_limits import ModelDeadlineError, TurnCancelledError
from assistants.calls import bounded, cancelling
from assistants.models import ModelSettings, build_chat_models, max_tokens_of
from assistants.openai_chat import BoundedChatOpenAI
from assistants.providers import diagnose
from conversations.events import Cancel
from tests.support.fake_openai import FakeOpenAI, Reply, Silent


def _model(base_url: str, **settings: float) -> BoundedChatOpenAI:
    model = build_chat_models(
        ModelSettings(model="scripted", base_url=base_url, api_key="sk-test", **settings)  # type: ignore[arg-type]
    )["primary_assistant"]
    assert isinstance(model, BoundedChatOpenAI)
    return model


def _ask(model: BoundedChatOpenAI, cancel: threading.Event | None = None) -> AIMessage:
    async def call() -> AIMessage:
        request = [SystemMessage("You help passengers."), HumanMessage("Which flights today?")]
        if cancel is None:
            return await bounded(model.ainvoke(request), model.reply_seconds)
        with cancelling(cancel):
            return await bounded(model.ainvoke(request), model.reply_seconds)

    return asyncio.run(call())


def test_a_local_server_gets_the_reply_limit_as_max_tokens() -> None:
    with FakeOpenAI([Reply(text="LX0112 leaves at 09:00.")]) as fake:
        model = _model(fake.base_url, max_tokens=321)
        answer = _ask(model)
        body = fake.requests[0]
    assert answer.content == "LX0112 leaves at 09:00."
    assert body["max_tokens"] == 321 and "max_completion_tokens" not in body
    assert body["stream"] is True
    assert max_tokens_of(model) == 321  # what the prompt is sized with


def test_openais_own_api_gets_the_reply_limit_under_its_new_name() -> None:
    model = _model("https://api.openai.com/v1", max_tokens=321)
    # ChatOpenAI sends its max_tokens as max_completion_tokens; nothing in the body.
    assert model.max_tokens == 321 and not model.extra_body
    assert max_tokens_of(model) == 321


def test_a_cancel_ends_a_silent_call_at_once_and_closes_its_connection() -> None:
    cancel = Cancel()
    with FakeOpenAI([Silent(Reply(text="late"), seconds=30)]) as fake:
        model = _model(fake.base_url)
        threading.Timer(0.3, cancel.set).start()
        started = time.monotonic()
        with pytest.raises(TurnCancelledError):
            _ask(model, cancel)
        ended = time.monotonic() - started
        deadline = time.monotonic() + 5
        while not fake.closed_while_silent and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.closed_while_silent, "the server never saw the connection close"
    assert ended < 1.3


def test_a_plain_event_cancels_too() -> None:
    cancel = threading.Event()  # no callbacks: looked at every 50 ms
    with FakeOpenAI([Silent(Reply(text="late"), seconds=30)]) as fake:
        model = _model(fake.base_url)
        threading.Timer(0.2, cancel.set).start()
        started = time.monotonic()
        with pytest.raises(TurnCancelledError):
            _ask(model, cancel)
    assert time.monotonic() - started < 1.2


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
    with pytest.raises(Exception) as raised:
        _ask(_model(base_url, timeout=timeout))
    return diagnose(raised.value).what


def test_a_turn_that_cannot_connect_says_the_server_cannot_be_reached() -> None:
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
    # The client's timeout bounds each wait for bytes, and bytes keep coming: the reply's
    # own limit ends it.
    with _listener(_keepalives_only) as base_url:
        model = _model(base_url, timeout=30, reply_seconds=0.5)
        started = time.monotonic()
        with pytest.raises(ModelDeadlineError):
            _ask(model)
        assert time.monotonic() - started < 3
