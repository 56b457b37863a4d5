"""What ``serve`` writes to its console: one line per event, as text or JSON.

Every line has its time, level and logger, and, when it happened within a request, the
request's id (the client's ``X-Request-ID`` when it sent a usable one, else a new one,
sent back in the answer) and the conversation's id. A request is a line of its own:
at INFO when it changed something or was refused, at DEBUG when it only read (the web
chat's page asks every second or two; a console of those buries what matters). A turn's
end is a line with its outcome. ``--log-format json`` writes each line as one JSON object
(``python-json-logger``), for a log collector.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from typing import Any, Literal

LogFormat = Literal["text", "json"]

REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="")
CONVERSATION_ID: ContextVar[str] = ContextVar("conversation_id", default="")
# An id a client may choose: printable, short, nothing a log line could be forged with.
_USABLE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_READS = frozenset({"GET", "HEAD", "OPTIONS"})

log = logging.getLogger("travel_assistant.requests")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class _Context(logging.Filter):
    """Put the request's and the conversation's ids on every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = getattr(record, "request_id", "") or REQUEST_ID.get()
        record.conversation_id = getattr(record, "conversation_id", "") or CONVERSATION_ID.get()
        return True


class _Text(logging.Formatter):
    """``TIME LEVEL LOGGER: MESSAGE`` and the ids and facts that go with it."""

    FACTS = ("request_id", "conversation_id", "outcome", "status", "seconds")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        facts = [f"{k}={getattr(record, k)}" for k in self.FACTS if getattr(record, k, "")]
        return f"{line} [{' '.join(facts)}]" if facts else line


def log_config(fmt: LogFormat, level: str = "INFO") -> dict[str, Any]:
    """Return the ``logging.config.dictConfig`` of ``serve``: its loggers and uvicorn's.

    uvicorn's own access log is off: requests are logged here, with their ids.
    """
    if fmt == "json":
        formatter: dict[str, Any] = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            "timestamp": False,
        }
    else:
        formatter = {"()": _Text, "fmt": "%(asctime)s %(levelname)s %(name)s: %(message)s"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": _Context}},
        "formatters": {"console": formatter},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "console",
                "filters": ["context"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "uvicorn": {"level": level},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"level": "WARNING", "propagate": False},
        },
    }


def logged_requests(app: App) -> App:
    """Return ``app`` logging each request once it is answered, with its id."""

    async def logging_app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        request_id = _request_id(scope)
        started = time.perf_counter()
        status = [500]

        async def sending(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await app(scope, receive, sending)
        finally:
            params = scope.get("path_params") or {}
            conversation = str(params.get("conversation_id", ""))
            if conversation:
                CONVERSATION_ID.set(conversation)
            method = str(scope.get("method", ""))
            only_read = method in _READS and status[0] < 400
            level = (
                logging.ERROR if status[0] >= 500 else logging.DEBUG if only_read else logging.INFO
            )
            if log.isEnabledFor(level):
                route = getattr(scope.get("route"), "path", "") or "unmatched"
                log.log(
                    level,
                    "%s %s %s",
                    method,
                    route,
                    status[0],
                    extra={
                        "status": status[0],
                        "seconds": round(time.perf_counter() - started, 3),
                        "conversation_id": conversation,
                    },
                )
            REQUEST_ID.reset(token)

    return logging_app


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            given = str(value.decode("latin-1"))
            if _USABLE_ID.fullmatch(given):
                return given
    return secrets.token_hex(8)
