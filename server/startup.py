"""The service's start: listen at once, build the assistant in the background.

Building the assistant takes seconds (importing LangChain, LangGraph and the OpenAI
client, the graph, the policy index, the model endpoint's check), and a service that
answers nothing meanwhile looks dead to whoever watches it. ``travel-assistant serve``
therefore listens with ``StartupApp``, which imports none of that, and ``Startup`` does the
rest in a thread started with the application (its lifespan), in two steps: it loads the
application (``server.app``, whose imports are most of the wait) and then builds the
service, which it hands to the application as ``app.state.service``, where the routes
read it.

Meanwhile:

- ``GET /api/v1/health`` answers at once: 503 ``{"status": "starting"}`` with
  ``Retry-After`` while the build runs; the application's own answer (200
  ``{"status": "ok"}``) once it is done; 503 ``{"status": "failed", "detail": ...}`` when
  it failed, with the words the operator reads on the service's console (the model
  endpoint cannot be reached, the database is missing), for as long as the process runs.
- The pages, their files, the OpenAPI document and ``/me`` need no assistant: they wait
  only for the application's code, and answer even when the build failed.
- Every other API request waits for the assistant, at most ``ASSISTANT_WAIT`` seconds,
  then answers 503 with ``Retry-After``; once the build has failed, 503 at once.

Nothing here is imported by ``server.app``: importing this module (and uvicorn) is all the
process does before it listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import TYPE_CHECKING, Any, Literal

from assistants.calls import Flag, wait_set
from conversations.loop import use_turn_loop
from server.limits import GRACEFUL_TIMEOUT, STOPPING_SINCE

if TYPE_CHECKING:
    from fastapi import FastAPI

    from server.limits import ServerLimits
    from server.logs import LogFormat
    from server.service import ConversationService

log = logging.getLogger(__name__)

HEALTH_PATH = "/api/v1/health"
# API routes that need no assistant: they answer once the application is loaded.
WITHOUT_ASSISTANT = frozenset({"/api/v1/me", "/api/v1/supervisor/me"})
API_PATHS = "/api/"
# How long a request that needs the assistant waits for it before its 503.
ASSISTANT_WAIT = 20.0
# What ``Retry-After`` asks of a client turned away while the service starts.
RETRY_SECONDS = 2
STILL_STARTING = (
    "The assistant is still starting and did not become ready within {seconds:g} seconds; "
    "try again in a moment."
)
START_FAILED = (
    "The assistant could not be started, so the service cannot answer this; its operator "
    "must fix the problem and restart it (GET /api/v1/health says what it is)."
)

State = Literal["starting", "ready", "failed"]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


class StartupError(Exception):
    """The service could not be built; the message says what to fix, for the operator.

    ``code`` is the exit code the command would have stopped with before it listened.
    """

    def __init__(self, message: str, code: int = 1) -> None:
        """Carry ``message`` and ``code``."""
        super().__init__(message)
        self.message = message
        self.code = code


class Startup:
    """The application and its service, built once in a background thread.

    ``load`` returns the application (its routes read the service from
    ``app.state.service``); ``build`` returns the service, registering on the stack it
    is given what must be closed after it (the databases). A ``StartupError`` from either
    is the operator's message; anything else is logged with its traceback and said as
    its type and message.
    """

    def __init__(
        self,
        load: Callable[[], FastAPI],
        build: Callable[[ExitStack], ConversationService],
        loading: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        """Build with ``load`` then ``build``, inside ``loading()``, once ``start`` is called."""
        self._load = load
        self._build = build
        self._loading = loading
        self._stack = ExitStack()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._finished = False
        self._closing = False
        self._finish_by: float | None = None
        self.app: FastAPI | None = None
        self.service: ConversationService | None = None
        self.error: StartupError | None = None
        # Set when the application is loaded (or the start failed before it was).
        self.loaded = Flag()
        # Set when the service is ready or the start failed: ``state`` says which.
        self.done = Flag()

    @property
    def state(self) -> State:
        """``starting``, ``ready`` (the service answers) or ``failed`` (``error`` says why)."""
        if self.error is not None:
            return "failed"
        return "ready" if self.service is not None else "starting"

    def start(self) -> None:
        """Start the build in a daemon thread (once), so a stop never waits for it."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="startup", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self._loading():
            self._load_and_build()

    def _load_and_build(self) -> None:
        try:
            app = self._load()
            self.app = app
            self.loaded.set()
            if self._closing:  # stopped while the code was loading: build nothing
                with self._lock:
                    self._finished = True
                self.done.set()
                return
            service = self._build(self._stack)
        except BaseException as error:
            self._fail(error)
            return
        with self._lock:
            self._finished = True
            closing = self._closing
            if not closing:
                service.use_metrics(app.state.metrics)  # the ones /metrics shows
                app.state.service = service  # what the routes read (``server.app``)
                self.service = service
                service.start_background()
        if closing:  # the service was stopped while it was being built
            self._close(service)
        self.done.set()

    def _fail(self, error: BaseException) -> None:
        if isinstance(error, StartupError):
            self.error = error
        else:
            log.error("The service failed to start", exc_info=error)
            self.error = StartupError(f"{type(error).__name__}: {error}")
        with self._lock:
            self._finished = True
        self._stack.close()  # what the build had opened
        self.loaded.set()
        self.done.set()

    def close(self, finish_by: float | None = None) -> None:
        """Stop the service and close what it was built on (now, or when its build ends).

        Its turns running may finish until ``finish_by`` (``time.monotonic``); then they
        are cancelled.
        """
        with self._lock:
            if self._closing:
                return
            self._closing = True
            self._finish_by = finish_by
            finished = self._finished
        if finished:
            self._close(self.service)

    def _close(self, service: ConversationService | None) -> None:
        try:
            if service is not None:
                service.close(self._finish_by)
        finally:
            self._stack.close()


class StartupApp:
    """The ASGI application ``serve`` listens with: ``startup``'s, once it is there.

    It runs the build with its lifespan, answers the health check itself until the
    service is ready, and holds each other request until what it needs is built (see the
    module's docstring). ``wait`` bounds how long a request waits for the assistant.
    """

    def __init__(
        self, startup: Startup, wait: float = ASSISTANT_WAIT, graceful: float = GRACEFUL_TIMEOUT
    ) -> None:
        """Serve ``startup``'s application; a stop gives its turns ``graceful`` seconds."""
        self.startup = startup
        self.wait = wait
        self.graceful = graceful

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer or hold the request, or pass it on to the application."""
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        startup = self.startup
        http = scope["type"] == "http"
        if http and scope["path"] == HEALTH_PATH and startup.state != "ready":
            await _health(send, startup)
            return
        app = startup.app
        if app is None:
            await _wait(startup.loaded, self.wait)
            app = startup.app
        if app is not None and http and _needs_assistant(scope["path"]):
            if startup.state == "starting":
                await _wait(startup.done, self.wait)
            if startup.state != "ready":
                app = None
        if app is not None:
            await app(scope, receive, send)
        elif http:
            await _refuse(send, startup, self.wait)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                use_turn_loop(asyncio.get_running_loop())  # every turn runs on this loop
                self.startup.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                # The turns still running finish within the graceful time, counted from
                # when the server began to stop (``server.limits``), or are cancelled;
                # either way they are waited for: off the loop.
                since = scope.get("state", {}).get(STOPPING_SINCE, time.monotonic())
                await asyncio.to_thread(self.startup.close, since + self.graceful)
                if self.startup.app is not None:  # the models were built: close their clients
                    from assistants.models import close_http_clients

                    await close_http_clients()  # on the loop their connections belong to
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _wait(flag: Flag, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wait_set(flag), seconds)


def _needs_assistant(path: str) -> bool:
    return path.startswith(API_PATHS) and path not in WITHOUT_ASSISTANT


async def _health(send: Send, startup: Startup) -> None:
    if startup.error is not None:
        await _json(send, 503, {"status": "failed", "detail": startup.error.message})
    else:
        await _json(send, 503, {"status": "starting"}, retry=True)


async def _refuse(send: Send, startup: Startup, waited: float) -> None:
    if startup.error is not None:
        await _json(send, 503, {"detail": START_FAILED}, close=True)
    else:
        detail = STILL_STARTING.format(seconds=waited)
        await _json(send, 503, {"detail": detail}, retry=True, close=True)


async def _json(
    send: Send, status: int, payload: dict[str, str], *, retry: bool = False, close: bool = False
) -> None:
    """Answer ``payload`` with the headers every answer of the service carries."""
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"cache-control", b"no-store"),
    ]
    if retry:
        headers.append((b"retry-after", str(RETRY_SECONDS).encode()))
    if close:  # the request's body may be unread: do not read the next request after it
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve(
    app: Any,
    host: str,
    port: int,
    limits: ServerLimits | None = None,
    log_format: LogFormat = "text",
) -> None:
    """Run ``app`` with uvicorn under ``limits`` until interrupted (Ctrl-C stops it gracefully).

    A stop (SIGTERM, Ctrl-C) takes no new connection, gives the requests and turns in
    flight ``limits.graceful_timeout`` seconds to finish, then cancels what still runs.
    """
    import uvicorn

    from server.limits import ServerLimits, uvicorn_options
    from server.logs import log_config

    # uvicorn.run, not Server.run: it turns the Ctrl-C it re-raises after a graceful stop
    # into a clean exit. A SIGTERM (a rolling deploy) is re-raised the same way: as a
    # Ctrl-C, so that it too exits 0 once the stop is done.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="info",
            log_config=log_config(log_format),
            access_log=False,  # each request is a line of server.logs, with its id
            **uvicorn_options(limits or ServerLimits()),
        )
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
