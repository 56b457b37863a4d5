"""A small OpenAI-compatible chat server on 127.0.0.1 that behaves like real ones.

It serves ``GET /v1/models`` and ``POST /v1/chat/completions``, streamed (server-sent
events over HTTP/1.1 chunked transfer, as llama.cpp, vLLM and Ollama send them) or not,
so the real ``langchain-openai`` client path is exercised without any network. Each chat
request takes the next item of the script:

- ``Reply``: text and/or tool calls, streamed in pieces: text word by word, tool-call
  arguments split across several chunks; the last choice chunk carries extra fields as
  llama.cpp's (``timings``), and a usage chunk with empty ``choices`` follows. A
  ``finish_reason`` of ``"length"`` with ``cut_arguments`` plays a reply stopped by the
  output limit in the middle of a tool call's arguments.
- ``Fail``: an HTTP error with a JSON body and headers (a 429 with ``Retry-After``, a 5xx,
  a 404 for an unknown model, a 400 with llama.cpp's multi-line template error).
- ``Drop``: a stream whose connection is closed after a few chunks, without the end of
  the chunked body.
- ``Endless``: a stream that never finishes (a model that loops); it stops by itself
  after ``limit`` seconds, or when the client goes away.

Like a llama.cpp server with a strict chat template (Gemma, Llama, Mistral), it refuses
by default, with a 400, a request whose messages a strict template rejects
(``tests.support.strict_chat``), without taking a script item; ``strict=False`` accepts
anything. ``chunk_delay`` makes every streamed chunk wait, as a slow server does, and
``models_gate`` holds every answer of ``GET /v1/models`` until it is set, as a server
still loading its model holds its first requests.

``tools`` says what the server does with a request's tool definitions, as the start's
check (``assistants.tool_support``) finds out: ``"honoured"`` (a model whose template
knows tools), ``"dropped"`` (llama.cpp with a template that does not: the tools vanish
from the prompt without an error and ``tool_choice: "required"`` is ignored) or
``"refused"`` (llama.cpp started without Jinja: a 400 for any request with tools).
``apply_template`` serves llama.cpp's ``POST /apply-template`` (the prompt the template
makes, no model run); without it that path is a 404, as on OpenAI's API or vLLM. A chat
request with ``tool_choice: "required"`` (the check's) is answered outside the script,
as the server's model would: with a call of its first tool where tools are honoured, in
words where they are dropped; it is kept in ``tool_probes``, not ``requests``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.support.strict_chat import problems

# What llama.cpp adds to the last chunk of a reply (fields the OpenAI API does not have).
LLAMA_CPP_FIELDS: dict[str, Any] = {
    "timings": {"prompt_n": 10, "prompt_ms": 12.5, "predicted_n": 5, "predicted_ms": 40.1},
    "system_fingerprint": "b5000-fake",
}
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
# What llama.cpp started without Jinja answers to a request with tools.
NO_JINJA_ERROR = "tools param requires --jinja flag"
# What a model that never saw the tools says when asked to use one.
TOOLLESS_ANSWER = "I am sorry, I cannot look up bookings, but it is surely confirmed."
# The message llama.cpp gives when a template raises: the reason comes lines after the
# first line (a client that shows only the first line shows nothing useful).
TEMPLATE_ERROR = (
    "Unable to generate parser for this template. Automatic parser generation failed: \n"
    "------------\n"
    "While executing CallExpression at line 1, column 1204 in source:\n"
    "...%}{{ raise_exception('Conversation roles must alternate user/assistant/user/...\n"
    "                                          ^\n"
    "Error: Jinja Exception: {reason}"
)


@dataclass
class Reply:
    """One scripted answer: text and/or tool calls (name, arguments).

    Attributes:
        finish_reason: Overrides ``"tool_calls"``/``"stop"``; ``"length"`` is a reply
            stopped by the output limit.
        cut_arguments: Keep only this many characters of each call's arguments JSON (a
            reply cut mid-call).
        argument_pieces: How many chunks each call's arguments are split across.
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    finish_reason: str | None = None
    cut_arguments: int | None = None
    argument_pieces: int = 3


@dataclass
class Fail:
    """An HTTP error answer with the JSON body ``{"error": {...}}`` (or ``body``)."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None


@dataclass
class Drop:
    """A streamed reply whose connection is closed after ``after`` chunks."""

    reply: Reply = field(default_factory=lambda: Reply(text="This reply is going to be"))
    after: int = 2


@dataclass
class Endless:
    """A stream that never ends: ``word`` every ``interval`` seconds, for ``limit`` at most."""

    word: str = "again"
    interval: float = 0.02
    limit: float = 30.0


@dataclass
class Silent:
    """A server that takes the request and sends nothing for ``seconds`` (not even the
    response headers), as llama.cpp does while it processes a long prompt; then ``reply``.
    """

    reply: Reply
    seconds: float = 60.0


ReplyItem = Reply | Fail | Drop | Endless | Silent | Callable[[dict[str, Any]], "Reply | Fail"]

# How the assistant marks a customer message with the time it was received.
_SENT_AT = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d UTC, \w+\] ", re.MULTILINE)


# How the assistant puts the passenger's bookings before a customer message.
_BOOKINGS = re.compile(r"<bookings( changed)?>\n.*?\n</bookings>\n", re.DOTALL)


def customer_text(content: str) -> str:
    """Return a request's customer message without what the assistant put before it.

    That is the time it was received and, where they changed, the passenger's bookings.
    """
    return _SENT_AT.sub("", _BOOKINGS.sub("", content))


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that closes its connection (a cancelled stream, the end of a test) is
        # normal here, not an error to print.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class FakeOpenAI:
    """The server; ``script`` is consumed one item per accepted chat request."""

    def __init__(
        self,
        script: list[ReplyItem] | None = None,
        *,
        chunk_delay: float = 0.0,
        strict: bool = True,
        responder: Callable[[dict[str, Any]], ReplyItem] | None = None,
        models_gate: threading.Event | None = None,
        tools: Literal["honoured", "dropped", "refused"] = "honoured",
        apply_template: bool = False,
    ) -> None:
        self.script: list[ReplyItem] = list(script or [])
        self.tools = tools
        self.apply_template = apply_template
        # The check's requests: ``/apply-template`` bodies, and chat requests that required
        # a tool call (answered outside the script).
        self.template_requests: list[dict[str, Any]] = []
        self.tool_probes: list[dict[str, Any]] = []
        self.models_gate = models_gate
        # Requests for the model list received so far (held ones included).
        self.models_asked = 0
        # Answers every request once the script is used up (a model for load runs: it
        # decides from the request's messages, so any number of conversations can talk
        # to it at once).
        self.responder = responder
        # Seconds to wait before each streamed chunk: a slow server, for Ctrl-C tests.
        self.chunk_delay = chunk_delay
        self.strict = strict
        self.requests: list[dict[str, Any]] = []
        # The headers of every chat request, in the order of ``requests``.
        self.request_headers: list[dict[str, str]] = []
        # Requests refused for their roles, with the problems found.
        self.rejected: list[tuple[dict[str, Any], list[str]]] = []
        # Streams the client closed before their end (Endless, a cancelled turn).
        self.abandoned = 0
        # When (time.monotonic) the client was seen closing a request still Silent.
        self.closed_while_silent: list[float] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def wait_for_requests(self, count: int = 1, timeout: float = 30.0) -> None:
        """Wait until ``count`` chat requests have arrived; fail after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the model server got {len(self.requests)} requests in {timeout:g} s, "
                    f"not {count}: did the client start?"
                )
            time.sleep(0.05)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_item(self, body: dict[str, Any]) -> ReplyItem | Fail | None:
        with self._lock:
            self.requests.append(body)
            found = problems(body.get("messages", [])) if self.strict else []
            if found:
                self.rejected.append((body, found))
                reason = found[0].split(": ", 1)[-1]
                return Fail(400, TEMPLATE_ERROR.replace("{reason}", reason))
            if not self.script:
                if self.responder is None:
                    return None
                item = self.responder(body)
                return item(body) if callable(item) else item
            item = self.script.pop(0)
        return item(body) if callable(item) else item

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # As servers made for this do (uvicorn, nginx): each small write leaves at
            # once. With Nagle's algorithm the body's first write waited for the
            # client's delayed ACK of the headers, about 40 ms per reply on a kept-alive
            # connection, which the program's timings then showed as its own.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _json(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    with fake._lock:
                        fake.models_asked += 1
                    if fake.models_gate is not None:
                        fake.models_gate.wait(timeout=120)
                    self._json(
                        200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
                    )
                else:
                    self._json(404, {"error": {"message": "File Not Found", "code": 404}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/apply-template"):
                    self._apply_template(body)
                    return
                if body.get("tools") and fake.tools == "refused":
                    self._json(400, _error(400, NO_JINJA_ERROR))
                    return
                if body.get("tool_choice") not in (None, "auto", "none"):
                    self._tool_probe(body)
                    return
                with fake._lock:
                    fake.request_headers.append(dict(self.headers.items()))
                item = fake._next_item(body)
                if item is None:
                    item = Fail(500, "script exhausted")
                if isinstance(item, Fail):
                    payload = item.body or _error(item.status, item.message)
                    self._json(item.status, payload, item.headers)
                elif isinstance(item, Endless):
                    self._endless(item, body)
                elif isinstance(item, Silent):
                    self._silent(item, body)
                elif isinstance(item, Drop):
                    self._stream(item.reply, body, drop_after=item.after)
                elif body.get("stream"):
                    self._stream(item, body)
                else:
                    self._json(200, _completion(item, body))

            def _apply_template(self, body: dict[str, Any]) -> None:
                if not fake.apply_template:
                    self._json(404, {"error": {"message": "File Not Found", "code": 404}})
                    return
                with fake._lock:
                    fake.template_requests.append(body)
                if body.get("tools") and fake.tools == "refused":
                    self._json(400, _error(400, NO_JINJA_ERROR))
                    return
                self._json(200, {"prompt": _template_prompt(body, fake.tools == "honoured")})

            def _tool_probe(self, body: dict[str, Any]) -> None:
                with fake._lock:
                    fake.tool_probes.append(body)
                tools = body.get("tools") or []
                if fake.tools == "honoured" and tools:
                    function = tools[0]["function"]
                    required = function.get("parameters", {}).get("required", [])
                    reply = Reply(tool_calls=[(function["name"], dict.fromkeys(required, "x"))])
                else:
                    reply = Reply(text=TOOLLESS_ANSWER)
                if body.get("stream"):
                    self._stream(reply, body)
                else:
                    self._json(200, _completion(reply, body))

            def _start_stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

            def _send(self, data: bytes) -> None:
                time.sleep(fake.chunk_delay)
                self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _event(self, payload: dict[str, Any] | str) -> None:
                text = payload if isinstance(payload, str) else json.dumps(payload)
                self._send(f"data: {text}\n\n".encode())

            def _end_stream(self) -> None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _stream(
                self, reply: Reply, body: dict[str, Any], drop_after: int | None = None
            ) -> None:
                self._start_stream()
                try:
                    for index, chunk in enumerate(_chunks(reply, body)):
                        if drop_after is not None and index >= drop_after:
                            # The connection goes away mid-reply: no end of the chunked body.
                            self.close_connection = True
                            return
                        self._event(chunk)
                    self._event("[DONE]")
                    self._end_stream()
                except (BrokenPipeError, ConnectionResetError):
                    fake.abandoned += 1
                    self.close_connection = True

            def _silent(self, item: Silent, body: dict[str, Any]) -> None:
                stop = time.monotonic() + item.seconds
                while time.monotonic() < stop:
                    time.sleep(0.05)
                    if _client_left(self.connection):
                        fake.closed_while_silent.append(time.monotonic())
                        fake.abandoned += 1
                        self.close_connection = True
                        return
                self._stream(item.reply, body)

            def _endless(self, item: Endless, body: dict[str, Any]) -> None:
                self._start_stream()
                stop = time.monotonic() + item.limit
                try:
                    self._event(_chunk(body, {"role": "assistant", "content": ""}))
                    while time.monotonic() < stop:
                        self._event(_chunk(body, {"content": item.word + " "}))
                        time.sleep(item.interval)
                    self._event(_chunk(body, {}, "stop"))
                    self._event("[DONE]")
                    self._end_stream()
                except (BrokenPipeError, ConnectionResetError):
                    fake.abandoned += 1
                    self.close_connection = True

        return Handler


def _error(status: int, message: str) -> dict[str, Any]:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"code": status, "message": message, "type": kind}}


def _template_prompt(body: dict[str, Any], with_tools: bool) -> str:
    """Return a ChatML prompt of ``body``'s messages; its tools only ``with_tools``."""
    parts = []
    if with_tools and body.get("tools"):
        listed = "\n".join(json.dumps(tool["function"]) for tool in body["tools"])
        parts.append(f"<|im_start|>system\n# Tools\n<tools>\n{listed}\n</tools><|im_end|>")
    for message in body.get("messages", []):
        parts.append(f"<|im_start|>{message.get('role')}\n{message.get('content')}<|im_end|>")
    parts.append("<|im_start|>assistant\n")
    return "\n".join(parts)


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    calls = []
    for index, (name, args) in enumerate(reply.tool_calls):
        arguments = json.dumps(args)
        if reply.cut_arguments is not None:
            arguments = arguments[: reply.cut_arguments]
        calls.append(
            {
                "id": f"call_{index}_{name}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        )
    return calls


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _completion(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": USAGE,
        **LLAMA_CPP_FIELDS,
    }


def _chunk(
    body: dict[str, Any], delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _pieces(text: str, count: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, count)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _chunks(reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = [_chunk(body, {"role": "assistant", "content": ""})]
    words = reply.text.split(" ") if reply.text else []
    for index, word in enumerate(words):
        chunks.append(_chunk(body, {"content": word if index == len(words) - 1 else word + " "}))
    for index, call in enumerate(_tool_calls(reply)):
        for number, piece in enumerate(
            _pieces(call["function"]["arguments"], reply.argument_pieces)
        ):
            delta: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
            if number == 0:
                delta.update(id=call["id"], type="function")
                delta["function"]["name"] = call["function"]["name"]
            chunks.append(_chunk(body, {"tool_calls": [delta]}))
    chunks.append({**_chunk(body, {}, _finish(reply)), **LLAMA_CPP_FIELDS})
    usage = _chunk(body, {})
    usage["choices"] = []
    usage["usage"] = USAGE
    chunks.append(usage)
    return chunks


def _client_left(connection: Any) -> bool:
    """Tell whether the client closed its side of ``connection`` (a read would see EOF)."""
    import select
    import socket

    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
