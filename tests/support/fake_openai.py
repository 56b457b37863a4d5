"""A small OpenAI-compatible chat server on 127.0.0.1 that replays scripted replies.

It serves ``GET /v1/models`` and ``POST /v1/chat/completions``, streamed (server-sent
events, text in several chunks, tool calls as argument fragments) or not, so the real
``langchain-openai`` client path is exercised without any network.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: text and/or tool calls (name, arguments)."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


ReplyItem = Reply | Callable[[dict[str, Any]], Reply]


class FakeOpenAI:
    """The server; ``script`` is consumed one reply per chat request."""

    def __init__(self, script: list[ReplyItem] | None = None) -> None:
        self.script: list[ReplyItem] = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        with self._lock:
            self.requests.append(body)
            if not self.script:
                return None
            item = self.script.pop(0)
            self._counter += 1
        return item(body) if callable(item) else item

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(
                        200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
                    )
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = fake._next_reply(body)
                if reply is None:
                    self._json(
                        500, {"error": {"message": "script exhausted", "type": "server_error"}}
                    )
                    return
                if body.get("stream"):
                    self._stream(reply, body)
                else:
                    self._json(200, _completion(reply, body))

            def _stream(self, reply: Reply, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in _chunks(reply, body):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{index}_{name}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for index, (name, args) in enumerate(reply.tool_calls)
    ]


def _completion(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _chunks(reply: Reply, body: dict[str, Any]) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    words = reply.text.split(" ") if reply.text else []
    for index, word in enumerate(words):
        chunks.append(chunk({"content": word if index == len(words) - 1 else word + " "}))
    for index, call in enumerate(_tool_calls(reply)):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {
                                "name": call["function"]["name"],
                                "arguments": arguments[:half],
                            },
                        }
                    ]
                }
            )
        )
        chunks.append(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]})
        )
    chunks.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    usage = chunk({})
    usage["choices"] = []
    usage["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    chunks.append(usage)
    return chunks
