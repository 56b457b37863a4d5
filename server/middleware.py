"""The layers around the application: the request body within bounds, safe headers, faults.

``BodyLimit`` reads a request's whole body before the application sees a byte of it (413
beyond ``MAX_BODY_BYTES``, 408 when it trickles in too slowly); ``SecurityHeaders`` adds
``nosniff`` to every answer and ``PAGE_HEADERS`` to the pages. Both are plain ASGI
layers: ``server.app`` puts them outside everything else, Starlette's own error answers
included. uvicorn bounds the request headers the same way (``server.limits``).
``DatabaseFaults``, inside Starlette's error layer, turns a database connection lost
or a pool with no connection free into a 503 with ``Retry-After``, after trying a read
once more on a fresh connection.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

import anyio
import sqlalchemy.exc
from starlette.datastructures import MutableHeaders

from server.limits import BODY_TIMEOUT, BUSY_RETRY_AFTER

log = logging.getLogger(__name__)

# The largest request body read: a 4,000-character message is at most 48 kB as JSON
# (every character a \\u escaped surrogate pair); anything bigger is refused unread.
MAX_BODY_BYTES = 64 * 1024
# How much of a refused body is still read (and dropped) before the answer, and for how
# long: a connection closed with bytes unread is reset, and a reset can reach the client
# before it reads the 413, which it then never sees.
DRAIN_BYTES = 1024 * 1024
DRAIN_SECONDS = 2.0
PAGE_HEADERS = {
    # The page runs only its own script and style, talks only to this service, and is
    # never framed; its URL (which may carry a token in its fragment) is never sent on.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]

Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


async def _answer(send: Send, status: int, detail: str) -> None:
    """Send a JSON problem straight from middleware (nothing behind it has answered)."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _drain(receive: Receive) -> None:
    """Read and drop the rest of a refused body: up to ``DRAIN_BYTES``, ``DRAIN_SECONDS``."""
    left = DRAIN_BYTES
    with anyio.move_on_after(DRAIN_SECONDS):
        while left > 0:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                return
            left -= len(message.get("body", b""))


class BodyLimit:
    """Read the whole request body first: at most ``max_bytes``, within ``timeout`` seconds.

    A body over the limit answers 413 whether it announces its length or comes in chunks,
    and one that trickles in too slowly answers 408; either way before the application
    sees a byte of it, so nothing is parsed or stored. The rest of a refused body is read
    and dropped (within bounds) before the answer, so that the client gets to read it.
    The body read is then replayed to the application; after it, ``receive`` is the
    server's again (a stream learns of a client that disconnects).
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES, timeout: float = BODY_TIMEOUT
    ) -> None:
        """Wrap ``app``."""
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Read the body, then pass the request on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            if int(declared) <= self.max_bytes + DRAIN_BYTES:
                await _drain(receive)
            await _answer(send, 413, self._too_large())
            return
        chunks: list[bytes] = []
        received = 0
        more = True
        with anyio.move_on_after(self.timeout) as deadline:
            while more:
                message = await receive()
                if message["type"] != "http.request":  # the client left: nobody to answer
                    return
                chunk = message.get("body", b"")
                received += len(chunk)
                if received > self.max_bytes:
                    if message.get("more_body", False):
                        await _drain(receive)
                    await _answer(send, 413, self._too_large())
                    return
                chunks.append(chunk)
                more = message.get("more_body", False)
        if deadline.cancelled_caught:
            await _answer(
                send, 408, f"The request body did not arrive within {self.timeout:g} seconds."
            )
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"The request body is larger than {self.max_bytes} bytes."


class SecurityHeaders:
    """Add the headers every answer needs: ``nosniff`` always, a page policy on HTML.

    A browser must never take a JSON answer (which may carry a customer's words) for a
    page or a script; a page gets ``PAGE_HEADERS`` unless its route set its own policy.
    """

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Pass the request on, adding headers to the answer."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                if headers.get("content-type", "").startswith("text/html"):
                    for name, value in PAGE_HEADERS.items():
                        headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


# Why a request failed on its database: the connection is gone, or none was free in time.
Fault = Literal["lost", "busy"]
FAULT_DETAIL: dict[Fault, str] = {
    "lost": "The service could not reach the database, or lost its connection to it, while "
    "answering; try again in a moment.",
    "busy": "Every connection of the service to the database stayed in use for as long as "
    "a request may wait for one (serve --pool-timeout); try again in a moment.",
}
# Read-only methods: tried once more when their connection was lost.
SAFE_METHODS = frozenset({"GET", "HEAD"})


def database_fault(error: BaseException) -> Fault | None:
    """Tell whether ``error`` (or what caused it) is a database connection fault, and which.

    ``lost``: the server closed the connection or cannot be reached (psycopg's
    ``OperationalError``, SQLAlchemy's for it, a SQLite file that is locked or gone);
    ``busy``: no pooled connection was free within the pool's timeout (SQLAlchemy's
    ``TimeoutError``, psycopg_pool's ``PoolTimeout``). A query the database refused (a
    bad statement, a constraint) is neither: a bug, answered 500.
    """
    # Only a driver that was imported can have raised: psycopg is an optional extra.
    psycopg = sys.modules.get("psycopg")
    pool = sys.modules.get("psycopg_pool")
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlalchemy.exc.TimeoutError):
            return "busy"
        if pool is not None and isinstance(current, pool.PoolTimeout):
            return "busy"
        if isinstance(current, sqlalchemy.exc.DBAPIError) and current.connection_invalidated:
            return "lost"
        if psycopg is not None and isinstance(
            current, psycopg.OperationalError | psycopg.InterfaceError
        ):
            return "lost"
        if isinstance(current, sqlite3.OperationalError):
            return "lost"
        current = current.__cause__ or current.__context__
    return None


class DatabaseFaults:
    """Answer a request whose database connection failed with 503, never 500.

    A read (``GET``, ``HEAD``) whose connection was lost is tried once more: the pools
    hand out a fresh connection after one failed (SQLAlchemy's drops every connection of
    a pool whose server went away and pings the next; the store's psycopg pool checks
    one before lending it). A read that fails again, a write, and a request that waited
    its pool's timeout for a connection answer 503 with ``Retry-After`` and a sentence
    saying which. A write's transaction is rolled back with its connection, so nothing
    of it is half-written. An answer already begun (a turn's event stream) cannot be
    taken back: its fault goes on to the server, which closes the connection.
    """

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        """Pass the request on; answer 503 (or try a read again) on a database fault."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        tries = 2 if scope.get("method") in SAFE_METHODS else 1
        for attempt in range(1, tries + 1):
            try:
                await self.app(scope, receive, send_tracked)
                return
            except Exception as error:
                fault = database_fault(error)
                if fault is None or started:
                    raise
                log.warning(
                    "%s %s: database %s (%s: %s)%s",
                    scope.get("method"),
                    scope.get("path"),
                    fault,
                    type(error).__name__,
                    str(error).splitlines()[0] if str(error) else "",
                    ", trying once more" if fault == "lost" and attempt < tries else "",
                )
                if fault == "busy" or attempt == tries:
                    await _unavailable(send, FAULT_DETAIL[fault])
                    return


async def _unavailable(send: Send, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(BUSY_RETRY_AFTER).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
