"""How the service holds up against slow and numerous clients: deadlines and a cap.

uvicorn bounds the idle time between two requests of a connection (``timeout_keep_alive``)
and answers 503 beyond ``limit_concurrency`` connections, but it waits for a request's
headers without a deadline: a socket that connects and sends nothing, or a byte now and
then, is held for as long as the client likes. ``header_deadline`` (uvicorn's h11 protocol
with a timer) closes a connection whose request headers are not complete within
``header_timeout`` seconds; ``server.middleware.BodyLimit`` bounds the body the same
way. So a few hundred slow sockets are dropped on time, and a worker never works on more
than ``max_connections`` requests at once (``Admission``): a burst beyond them waits its
turn for at most ``queue_timeout`` seconds, a place that frees going to the client address
with the fewest requests in flight, and only what is left answers 503 with
``Retry-After``. The answers uvicorn would write itself, a 400 for a request it cannot
parse and the 503 beyond the cap, are written by that protocol too, as JSON with
``nosniff`` like every other answer of the service. A reverse proxy in front (see
docs/postgresql.md, Deployment) does this better still, for every worker at once.

Importing this module imports neither uvicorn nor h11: the command line reads its
defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import json
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import uvicorn

    # Any ASGI application: the app, or what ``serve`` listens with while it starts
    # (``server.startup``, which imports this module).
    AsgiApp = Callable[[Any, Any, Any], Awaitable[None]]

# A browser or an HTTP library sends its headers in one write; ten seconds is an age.
HEADER_TIMEOUT = 10.0
# Requests one worker works on at once. A connection that only streams a turn's events
# while the turn waits for the model does no work and is not counted (``leave_the_cap``).
MAX_CONNECTIONS = 128
# Seconds a request beyond the cap waits for a place before its 503: a reconnect storm
# (every open tab at once after a restart) is served in this time rather than refused.
QUEUE_TIMEOUT = 2.0
# Requests that may wait for a place, per place: beyond them a request is refused at once.
QUEUE_PER_PLACE = 8
# Seconds a stop (SIGTERM, Ctrl-C) gives the requests and the turns in flight to finish;
# then the turns still running are cancelled (closed as stopped by the service).
GRACEFUL_TIMEOUT = 30.0
# Where the moment the server began to stop (``time.monotonic``) is kept, in the state the
# server shares with the application's lifespan (uvicorn's ``app_state``).
STOPPING_SINCE = "travel_assistant.stopping_since"
# Seconds a request waits for a connection of the conversations' PostgreSQL pools when
# every one is in use, before its 503 (``serve --pool-timeout``; the pools' own is 30).
POOL_TIMEOUT = 5.0
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


class Place:
    """One request's place under the cap, held from its admission until ``release``."""

    def __init__(self, admission: Admission, peer: str) -> None:
        """Hold a place of ``admission`` for a request of ``peer``."""
        self._admission = admission
        self._peer = peer
        self._held = True

    def release(self) -> None:
        """Give the place back (once): to a request waiting for one, if any."""
        if self._held:
            self._held = False
            self._admission.release(self._peer)


@dataclass(eq=False)
class _Waiter:
    arrival: int
    future: asyncio.Future[bool]
    timer: asyncio.TimerHandle | None = field(default=None)


class Admission:
    """Which requests a worker works on: at most ``cap`` at once, fairly among clients.

    A request is admitted at once while fewer than ``cap`` are in flight. Beyond that it
    waits for a place, at most ``wait`` seconds, with at most ``room`` others; a place
    that frees goes to the waiting request of the client (peer address) with the fewest
    requests in flight, the longest waiting among equals, so a client that opens many
    requests at once gets its share of the places and not everyone's. When the waiting
    room is full, a newcomer takes the place of the newest waiter of the client with the
    most waiting, if that client has more than one more than the newcomer's. Everything
    here runs on the event loop, so no lock is needed.
    """

    def __init__(self, cap: int, wait: float = QUEUE_TIMEOUT, room: int | None = None) -> None:
        """Admit ``cap`` requests at once; let others wait ``wait`` seconds, ``room`` of them."""
        self.cap = cap
        self.wait = wait
        self.room = cap * QUEUE_PER_PLACE if room is None else room
        self.working = 0
        self.queued = 0
        self._held: Counter[str] = Counter()
        self._queue: dict[str, deque[_Waiter]] = {}
        self._arrivals = itertools.count()

    def held(self, peer: str) -> int:
        """Return how many requests of ``peer`` are in flight."""
        return self._held[peer]

    async def enter(self, peer: str) -> Place | None:
        """Return a place for a request of ``peer``, or ``None``: refuse it (503)."""
        if self.working < self.cap and not self.queued:
            self.working += 1
            self._held[peer] += 1
            return Place(self, peer)
        if self.wait <= 0 or (self.queued >= self.room and not self._make_room(peer)):
            return None
        loop = asyncio.get_running_loop()
        waiter = _Waiter(next(self._arrivals), loop.create_future())
        self._queue.setdefault(peer, deque()).append(waiter)
        self.queued += 1
        waiter.timer = loop.call_later(self.wait, self._refuse, peer, waiter)
        try:
            admitted = await waiter.future
        except asyncio.CancelledError:
            # The request was cancelled (its client went away) while it waited.
            future = waiter.future
            if future.done() and not future.cancelled() and future.result():
                Place(self, peer).release()  # handed a place meanwhile: pass it on
            else:
                self._leave(peer, waiter)
            raise
        return Place(self, peer) if admitted else None

    def release(self, peer: str) -> None:
        """Take back a place of ``peer``'s: hand it to the fairest waiter, if any."""
        self._held[peer] -= 1
        if self._held[peer] <= 0:
            del self._held[peer]
        while self._queue:
            queue = self._queue
            nxt = min(queue, key=lambda p: (self._held[p], queue[p][0].arrival))
            waiter = queue[nxt][0]
            self._leave(nxt, waiter)
            if not waiter.future.done():
                self._held[nxt] += 1
                waiter.future.set_result(True)
                return
        self.working -= 1

    def _make_room(self, peer: str) -> bool:
        mine = len(self._queue.get(peer, ()))
        most = max(self._queue, key=lambda p: len(self._queue[p]))
        if len(self._queue[most]) <= mine + 1:
            return False
        self._refuse(most, self._queue[most][-1])
        return True

    def _refuse(self, peer: str, waiter: _Waiter) -> None:
        self._leave(peer, waiter)
        if not waiter.future.done():
            waiter.future.set_result(False)

    def _leave(self, peer: str, waiter: _Waiter) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        queue = self._queue.get(peer)
        if queue is None or waiter not in queue:
            return
        queue.remove(waiter)
        self.queued -= 1
        if not queue:
            del self._queue[peer]


# The place of the request being answered (``_capped`` sets it for the request's task).
_PLACE: contextvars.ContextVar[Place | None] = contextvars.ContextVar(
    "travel_assistant_place", default=None
)


def leave_the_cap() -> None:
    """Give up the place of the request being answered: it only streams a waiting turn now.

    ``server.customer_api`` calls it when a turn's event stream begins: from then on the
    connection does no work while the turn waits for the model, and it does not count.
    """
    place = _PLACE.get()
    if place is not None:
        place.release()


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
        max_connections: Requests worked on at once; a request beyond them waits for a
            place (``queue_timeout``), then answers 503. Connections that only stream the
            events of a turn waiting for the model do not count; all the open connections
            together are bounded by the process's file descriptors
            (``open_connections_cap``).
        header_timeout: Seconds for a request's headers to arrive, from the connection
            (or the end of the previous answer) on; then the connection is closed.
        body_timeout: Seconds for the request body to arrive once its headers have;
            then it answers 408.
        keep_alive: Seconds an idle connection is kept open between requests.
        queue_timeout: Seconds a request beyond ``max_connections`` waits for a place
            before its 503; 0 refuses it at once.
        graceful_timeout: Seconds a stop gives the requests in flight (and the service
            its turns, ``STOPPING_SINCE``) to finish.
    """

    max_connections: int = MAX_CONNECTIONS
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    keep_alive: int = KEEP_ALIVE
    queue_timeout: float = QUEUE_TIMEOUT
    graceful_timeout: float = GRACEFUL_TIMEOUT


def uvicorn_options(limits: ServerLimits) -> dict[str, Any]:
    """Return the options of ``uvicorn.run`` (or ``uvicorn.Config``) that set ``limits``."""
    # uvicorn's own cap (``limit_concurrency``) is left off: it answers a text/plain 503,
    # counts idle connections and the very requests it refuses; ``Admission`` does it.
    admission = Admission(limits.max_connections, limits.queue_timeout)
    return {
        "http": header_deadline(limits.header_timeout, admission),
        "timeout_keep_alive": limits.keep_alive,
        "timeout_graceful_shutdown": limits.graceful_timeout,
    }


def uvicorn_config(
    app: AsgiApp, limits: ServerLimits = ServerLimits(), **options: Any
) -> uvicorn.Config:
    """Return uvicorn's configuration of ``app`` under ``limits`` (``options`` pass on).

    ``app`` is the application, or what ``serve`` listens with while it starts.
    """
    import uvicorn

    return uvicorn.Config(app, **uvicorn_options(limits), **options)


def header_deadline(
    header_timeout: float, admission: Admission | None = None
) -> type[asyncio.Protocol]:
    """Return uvicorn's h11 protocol, closing a connection whose headers are late.

    The deadline, ``header_timeout`` seconds, runs from the moment the connection is
    ready for a request (when it is made, or when the previous answer is complete) until
    the request's headers are read; bytes trickling in do not extend it. The protocol
    also answers a request it cannot parse (400) and a request ``admission`` refuses (503)
    itself, with the service's headers. (uvicorn is imported here, so that the command
    line reads these limits without it.)
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadline(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if admission is not None:
                self.app = _capped(self.app, admission, self.connections)

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

        def shutdown(self) -> None:
            # The server stops (it calls this on every connection first): the service's
            # turns get the graceful time from now on, as the requests do.
            self.app_state.setdefault(STOPPING_SINCE, time.monotonic())
            super().shutdown()

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


def _capped(app: Any, admission: Admission, connections: Any) -> Any:
    """Return ``app`` working on the requests ``admission`` admits; the others answer 503.

    The requests counted are those in flight: an idle connection kept alive between two
    requests (a page that asks every second or two) does no work, nor does one streaming
    a waiting turn's events (``leave_the_cap``). Every open connection still counts
    against the descriptors' bound.
    """
    most = max(open_connections_cap(), admission.cap)

    async def capped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        place = None
        if len(connections) <= most:
            client = scope.get("client")
            place = await admission.enter(client[0] if client else "")
        if place is None:
            headers = [
                *_HEADERS,
                (b"retry-after", str(BUSY_RETRY_AFTER).encode()),
                (b"content-length", str(len(_BUSY)).encode()),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": _BUSY})
            return
        token = _PLACE.set(place)
        try:
            await app(scope, receive, send)
        finally:
            _PLACE.reset(token)
            place.release()

    return capped
