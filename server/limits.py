"""How the service holds up against slow and numerous clients: deadlines and a cap.

uvicorn bounds the idle time between two requests of a connection (``timeout_keep_alive``)
and answers 503 beyond ``limit_concurrency`` connections, but it waits for a request's
headers without a deadline: a socket that connects and sends nothing, or a byte now and
then, is held for as long as the client likes. ``header_deadline`` (uvicorn's h11 protocol
with a timer) closes a connection whose request headers are not complete within
``header_timeout`` seconds; ``server.middleware.BodyLimit`` bounds the body the same
way. So a few hundred slow sockets are dropped on time, and a worker never holds more
than ``max_connections`` requests at once. The answers uvicorn would write itself, a 400 for
a request it cannot parse and the 503 beyond the cap, are written by that protocol too,
as JSON with ``nosniff`` like every other answer of the service. A reverse proxy in
front (see docs/postgresql.md, Deployment) does this better still, for every worker at once.

Importing this module imports neither uvicorn nor h11: the command line reads its
defaults.
"""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable

    import uvicorn

    # Any ASGI application: the app, or what ``serve`` listens with while it starts
    # (``server.startup``, which imports this module).
    AsgiApp = Callable[[Any, Any, Any], Awaitable[None]]

# A browser or an HTTP library sends its headers in one write; ten seconds is an age.
HEADER_TIMEOUT = 10.0
# Requests one worker works on at once. A connection that only streams a turn's events
# while the turn waits for the model does no work and is not counted (``STREAMS``).
MAX_CONNECTIONS = 128
# File descriptors kept free for the databases, the model's connections and logs when
# the open connections are bounded by the process's limit of descriptors.
RESERVED_DESCRIPTORS = 64
# Idle seconds between two requests of one connection (uvicorn's default).
KEEP_ALIVE = 5

# A request body that small comes in well under a second; one still arriving after this
# is a client holding the worker, not a slow network.
BODY_TIMEOUT = 20.0

# The headers of the answers the protocol writes itself (the service's own middleware
# never sees them).
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
    (b"connection", b"close"),
]
_LATE = b'{"detail": "The request headers did not arrive in time."}'
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    + b"".join(name + b": " + value + b"\r\n" for name, value in _HEADERS)
    + b"content-length: "
    + str(len(_LATE)).encode()
    + b"\r\n\r\n"
    + _LATE
)
_BUSY = b'{"detail": "The service is busy with other requests; try again in a moment."}'
# How soon a client refused for being one request too many may try again (seconds).
BUSY_RETRY_AFTER = 1


class StreamsWaiting:
    """How many connections of this process only stream a turn's events right now.

    ``server.customer_api`` counts a turn's event stream from its first byte to its last;
    the cap leaves them out. Read and written on the event loop only.
    """

    def __init__(self) -> None:
        """Count none."""
        self.count = 0


STREAMS = StreamsWaiting()


@functools.cache
def open_connections_cap() -> int:
    """Return how many connections a worker may hold open: its descriptors allow that many.

    The soft limit of open files is raised to the hard one first (a waiting customer
    costs a socket, and 1,024, a common soft limit, is few).
    """
    try:
        import resource
    except ImportError:  # not POSIX: no such limit to read
        return 10_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(int(soft) - RESERVED_DESCRIPTORS, 1)


@dataclass(frozen=True)
class ServerLimits:
    """What one worker allows its clients (``travel-assistant serve`` options).

    Attributes:
        max_connections: Requests worked on at once; a request beyond them answers 503.
            Connections that only stream the events of a turn waiting for the model do
            not count; all the open connections together are bounded by the process's
            file descriptors (``open_connections_cap``).
        header_timeout: Seconds for a request's headers to arrive, from the connection
            (or the end of the previous answer) on; then the connection is closed.
        body_timeout: Seconds for the request body to arrive once its headers have;
            then it answers 408.
        keep_alive: Seconds an idle connection is kept open between requests.
    """

    max_connections: int = MAX_CONNECTIONS
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    keep_alive: int = KEEP_ALIVE


def uvicorn_options(limits: ServerLimits) -> dict[str, Any]:
    """Return the options of ``uvicorn.run`` (or ``uvicorn.Config``) that set ``limits``."""
    return {
        "http": header_deadline(limits.header_timeout),
        "limit_concurrency": limits.max_connections,
        "timeout_keep_alive": limits.keep_alive,
    }


def uvicorn_config(
    app: AsgiApp, limits: ServerLimits = ServerLimits(), **options: Any
) -> uvicorn.Config:
    """Return uvicorn's configuration of ``app`` under ``limits`` (``options`` pass on).

    ``app`` is the application, or what ``serve`` listens with while it starts.
    """
    import uvicorn

    return uvicorn.Config(app, **uvicorn_options(limits), **options)


def header_deadline(header_timeout: float) -> type[asyncio.Protocol]:
    """Return uvicorn's h11 protocol, closing a connection whose headers are late.

    The deadline, ``header_timeout`` seconds, runs from the moment the connection is
    ready for a request (when it is made, or when the previous answer is complete) until
    the request's headers are read; bytes trickling in do not extend it. The protocol
    also answers a request it cannot parse (400) and a request beyond
    ``limit_concurrency`` (503) itself, with the service's headers. (uvicorn is imported
    here, so that the command line reads these limits without it.)
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadline(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # uvicorn's own check would answer beyond the cap with a text/plain 503 of
            # its own, and count every connection, idle ones too; the cap is applied here
            # instead: requests running, this one included, less those that only stream
            # a waiting turn's events.
            cap, self.limit_concurrency = self.limit_concurrency, None
            if cap is not None:
                self.app = _capped(self.app, cap, self.connections, self.tasks)

        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"detail": msg}).encode()
            headers = [*_HEADERS, (b"content-length", str(len(body)).encode())]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._watch_headers()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch_headers()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_clock()
            super().connection_lost(exc)

        def _watch_headers(self) -> None:
            waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
            if not waiting:
                self._stop_clock()
            elif self._deadline is None:
                self._deadline = self.loop.call_later(header_timeout, self._headers_late)

        def _stop_clock(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _headers_late(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self.conn.our_state is h11.IDLE:  # no answer begun on this connection
                self.transport.write(_TIMED_OUT)
            self.transport.close()

    return HeaderDeadline


def _capped(app: Any, cap: int, connections: Any, tasks: Any) -> Any:
    """Return ``app`` answering 503 while more than ``cap`` requests are worked on.

    The requests counted are those in flight, this one included: an idle connection
    kept alive between two requests (a page that asks every second or two) does no
    work, nor does one streaming a waiting turn's events (``STREAMS``). Every open
    connection still counts against the descriptors' bound.
    """
    most = max(open_connections_cap(), cap)

    async def capped(scope: Any, receive: Any, send: Any) -> None:
        working = len(tasks) - STREAMS.count
        if scope["type"] == "http" and (working > cap or len(connections) > most):
            headers = [
                *_HEADERS,
                (b"retry-after", str(BUSY_RETRY_AFTER).encode()),
                (b"content-length", str(len(_BUSY)).encode()),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": _BUSY})
            return
        await app(scope, receive, send)

    return capped
