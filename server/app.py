"""The FastAPI application: the JSON API under ``/api/v1`` and the web chat at ``/``.

Every API request but the health check carries ``Authorization: Bearer <token>`` and
acts for the passenger the token names. Another passenger's conversation answers 404,
exactly as one that does not exist. A customer message or a set of decisions answers
with the turn as server-sent events (``token``, ``status``, ``message``, ``pending``,
then ``done``, or ``error``); everything is refused with a 4xx and changes nothing
before a stream starts. The graph runs in worker threads (``server.service``), never on
the event loop; the JSON endpoints, which read checkpoints and the travel database, are
plain functions that FastAPI runs in its thread pool.

``create_app`` takes the service and the token signer, so tests build the app over a
scripted model and a temporary database; ``serve`` runs it with uvicorn.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, cast

import anyio
from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Request, Response
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, StreamingResponse
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event
from fastapi.staticfiles import StaticFiles
from pydantic import TypeAdapter
from starlette.datastructures import MutableHeaders

from assistants.models import close_http_clients
from conversations.assistant import Thread
from conversations.loop import use_turn_loop
from server.access import customer
from server.auth import Claims, TokenSigner
from server.handoff import People, PersonIn, PersonOut, staff_router
from server.limits import BODY_TIMEOUT, STREAMS
from server.schemas import (
    CONVERSATION_ID_PATTERN,
    STREAM_EVENT_NAMES,
    ConversationList,
    ConversationOut,
    DecisionsIn,
    History,
    Me,
    MessageIn,
    PendingList,
    Problem,
    StopOut,
    StreamEvent,
    TitleIn,
)
from server.service import ConversationService, Journaled, ServiceError
from server.supervisor import router as supervisor_router

API_PREFIX = "/api/v1"
API_VERSION = "1.0.0"
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
# Swagger UI (``--docs``): its script, style and icon come from the CDN FastAPI names, and
# it starts with an inline script.
DOCS_CDN = "https://cdn.jsdelivr.net"
DOCS_HEADERS = {
    **PAGE_HEADERS,
    "Content-Security-Policy": f"default-src 'self'; script-src 'self' 'unsafe-inline' "
    f"{DOCS_CDN}; style-src 'self' {DOCS_CDN}; img-src 'self' data: "
    "https://fastapi.tiangolo.com; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'",
}

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]

ConversationId = Annotated[
    str,
    PathParam(
        pattern=CONVERSATION_ID_PATTERN,
        max_length=100,
        description="The conversation, as created by POST /conversations.",
    ),
]

_PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No token, or one that is not valid or expired."},
    403: {
        "model": Problem,
        "description": "A supervisor's token, which reads conversations and acts for no "
        "passenger (or, on creating a conversation, a passenger the database does not know).",
    },
    408: {"model": Problem, "description": "The request body did not arrive in time."},
    413: {"model": Problem, "description": "The request body is too large."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "No such conversation for this passenger."}
}
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": Problem,
        "description": "A turn of this conversation is running (here, in another worker or "
        "in a terminal), or the decisions do not fit.",
    },
    400: {"model": Problem, "description": "The body cannot be read (not UTF-8)."},
    503: {
        "model": Problem,
        "description": "The conversations database cannot be reached; nothing was changed.",
    },
}


async def _service(request: Request) -> ConversationService:
    return cast(ConversationService, request.app.state.service)


# A passenger's token; a supervisor's answers 403 on every passenger's endpoint.
Passenger = Annotated[Claims, Depends(customer)]
Service = Annotated[ConversationService, Depends(_service)]


def _owned(service: Service, claims: Passenger, conversation_id: ConversationId) -> Thread:
    return service.owned(claims.passenger_id, conversation_id)


OwnedThread = Annotated[Thread, Depends(_owned)]


async def _message_turn(service: Service, thread: OwnedThread, body: MessageIn) -> Journaled:
    # Claiming may wait on the database that holds the turn locks: off the event loop.
    cancel = await anyio.to_thread.run_sync(service.claim, thread)
    return service.start_message(thread, body.text, cancel)


async def _claimed(
    service: Service, thread: Thread, check: Callable[[], object]
) -> threading.Event:
    """Claim ``thread``, then run ``check`` off the loop; a refused request frees it again."""
    cancel = await anyio.to_thread.run_sync(service.claim, thread)
    try:
        await anyio.to_thread.run_sync(check)
    except BaseException:
        service.release(thread)
        raise
    return cancel


async def _decision_turn(service: Service, thread: OwnedThread, body: DecisionsIn) -> Journaled:
    check = partial(service.check_decisions, thread, body.decisions)
    cancel = await _claimed(service, thread, check)
    return service.start_decisions(thread, cancel, body.decisions)


async def _resumed_turn(service: Service, thread: OwnedThread) -> Journaled:
    cancel = await _claimed(service, thread, partial(service.check_resume, thread))
    return service.start_resume(thread, cancel)


async def _followed_turn(
    service: Service,
    thread: OwnedThread,
    last_event_id: Annotated[
        str | None, Header(max_length=100, description="The id of the last event read.")
    ] = None,
) -> Journaled:
    events = service.follow(thread, last_event_id)
    if events is None:
        raise _NoTurn()
    return events


class _NoTurn(Exception):
    """No turn of the conversation ran on this server lately (answered 204)."""


class EventStream(StreamingResponse):
    """A turn's events as server-sent events, written as they come.

    The bytes are FastAPI's own (``fastapi.sse.format_sse_event``, its keep-alive
    comment), and so are the headers its ``EventSourceResponse`` sends; what is left out
    is its machinery around each event (two memory streams, a task that times every
    wait, a cancellation checkpoint), a fifth of the event loop's CPU per turn under
    load (BENCHMARKS.md). The events that arrived together are written at once. The
    keep-alive comes from the journal's reader, after ``KEEPALIVE_SECONDS`` without an
    event (``Journal.read``).
    """

    media_type = "text/event-stream"

    def __init__(
        self, events: Journaled, *, accepted: bool = False, status_code: int = 200
    ) -> None:
        """Stream ``events``; ``accepted`` sends a comment first (the turn was taken).

        ``status_code`` is FastAPI's: it reads the default to document the routes.
        """
        super().__init__(
            _frames(events, accepted),
            status_code=status_code,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


_ACCEPTED = format_sse_event(comment="accepted")


async def _frames(events: Journaled, accepted: bool) -> AsyncIterator[bytes]:
    # While it streams, the connection only waits for the turn: the cap leaves it out.
    STREAMS.count += 1
    try:
        if accepted:  # a comment, so the client knows at once that the turn was taken
            yield _ACCEPTED
        async for batch in events:
            if not batch:
                yield KEEPALIVE_COMMENT
                continue
            # The events that came together go in one write (one chunk of the response).
            yield b"".join(
                format_sse_event(data_str=event.model_dump_json(), event=event.type, id=event_id)
                for event_id, event in batch
            )
    finally:
        STREAMS.count -= 1


def _router() -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, responses=_PROBLEMS)

    @router.get("/me", tags=["session"], summary="Who the token says you are")
    def me(claims: Passenger) -> Me:
        return Me(passenger_id=claims.passenger_id, expires_at=claims.expires_at)

    @router.get("/conversations", tags=["conversations"], summary="List your conversations")
    def list_conversations(service: Service, claims: Passenger) -> ConversationList:
        return ConversationList(conversations=service.passenger_conversations(claims.passenger_id))

    @router.post(
        "/conversations",
        status_code=201,
        tags=["conversations"],
        summary="Start a conversation",
        responses={403: {"model": Problem, "description": "The passenger is not known."}},
    )
    def create_conversation(service: Service, claims: Passenger) -> ConversationOut:
        return service.create(claims.passenger_id, str(uuid.uuid4()))

    @router.get(
        "/conversations/{conversation_id}",
        tags=["conversations"],
        summary="Read one conversation's summary",
        responses=_NOT_FOUND,
    )
    def get_conversation(service: Service, thread: OwnedThread) -> ConversationOut:
        record = service.sessions.get(thread.thread_id)
        if record is None:  # deleted in between
            raise HTTPException(404, f"No conversation {thread.thread_id}.")
        return service.summary(record)

    @router.get(
        "/conversations/{conversation_id}/messages",
        tags=["conversations"],
        summary="Read the conversation",
        description="Customer and assistant messages, and what became of every action "
        "(approved, declined with the reason, refused, not done), in order. Tool calls "
        "and their raw results are left out.",
        responses=_NOT_FOUND,
    )
    def get_history(service: Service, thread: OwnedThread) -> History:
        return History(conversation_id=thread.thread_id, items=service.history(thread))

    @router.post(
        "/conversations/{conversation_id}/messages",
        response_class=EventStream,
        tags=["turns"],
        summary="Send a message; the reply streams as server-sent events",
        description="Events: token (a piece of the reply), status (what the assistant is "
        "doing), message (a complete assistant message), pending (actions waiting for "
        "your decision, with their previews), then done; or error, which ends the stream. "
        "Actions left pending by an earlier turn are dropped by a new message (not done). "
        "The turn goes on if the client disconnects; read the history afterwards.",
        responses={**_NOT_FOUND, **_CONFLICT},
    )
    async def send_message(
        events: Annotated[Journaled, Depends(_message_turn)],
    ) -> EventStream:
        return EventStream(events, accepted=True)

    @router.get(
        "/conversations/{conversation_id}/pending",
        tags=["approvals"],
        summary="List the actions waiting for your decision, with their previews",
        responses=_NOT_FOUND,
    )
    def get_pending(service: Service, thread: OwnedThread) -> PendingList:
        return PendingList(actions=service.pending(thread))

    @router.post(
        "/conversations/{conversation_id}/decisions",
        response_class=EventStream,
        tags=["approvals"],
        summary="Approve or decline every pending action; the rest of the turn streams",
        description="One decision per pending action, each approved or declined with an "
        "optional reason, which is passed to the assistant. Only an explicit approval runs "
        "an action. The events are those of sending a message.",
        responses={**_NOT_FOUND, **_CONFLICT},
    )
    async def decide(
        events: Annotated[Journaled, Depends(_decision_turn)],
    ) -> EventStream:
        return EventStream(events, accepted=True)

    @router.post(
        "/conversations/{conversation_id}/resume",
        response_class=EventStream,
        tags=["approvals"],
        summary="Go on once staff checked the actions you approved; the rest streams",
        description="An action you approved that moves more than the second-approval "
        "amount waits for a member of staff (its pending entry has a check). The service "
        "applies the checks itself as soon as the last one is decided (follow it with "
        "the conversation's events): an approved action runs, a refused one is not done "
        "and the assistant is told why. This applies them should that not have happened "
        "(the service stopped in between). The events are those of sending a message. "
        "409 while a check still waits, or once they are applied.",
        responses={**_NOT_FOUND, **_CONFLICT},
    )
    async def resume(
        events: Annotated[Journaled, Depends(_resumed_turn)],
    ) -> EventStream:
        return EventStream(events, accepted=True)

    @router.patch(
        "/conversations/{conversation_id}",
        tags=["conversations"],
        summary="Rename a conversation",
        responses={**_NOT_FOUND, 400: _CONFLICT[400]},
    )
    def rename_conversation(
        service: Service, thread: OwnedThread, body: TitleIn
    ) -> ConversationOut:
        return service.rename(thread, body.title)

    @router.delete(
        "/conversations/{conversation_id}",
        status_code=204,
        tags=["conversations"],
        summary="Delete a conversation and everything said in it",
        responses={
            **_NOT_FOUND,
            409: {"model": Problem, "description": "A turn of it is running."},
            503: _CONFLICT[503],
        },
    )
    def delete_conversation(service: Service, thread: OwnedThread) -> Response:
        service.delete(thread)
        return Response(status_code=204)

    @router.get(
        "/conversations/{conversation_id}/events",
        response_class=EventStream,
        tags=["turns"],
        summary="Follow the turn that is running (after a reload or a lost connection)",
        description="The events of the turn this server runs for the conversation (or ran "
        "in the last few minutes), as sending a message streams them: from the start, or "
        "after the event named by the Last-Event-ID header when it belongs to this turn. "
        "204 when no turn of it ran here lately: read the conversation (its busy flag "
        "says whether a turn runs elsewhere, e.g. in another worker) and the history.",
        responses={
            **_NOT_FOUND,
            204: {"description": "No turn of this conversation ran on this server lately."},
        },
    )
    async def follow_turn(
        events: Annotated[Journaled, Depends(_followed_turn)],
    ) -> EventStream:
        return EventStream(events)

    @router.get(
        "/conversations/{conversation_id}/person",
        tags=["people"],
        summary="Whether a person from customer service has, or will have, the conversation",
        responses=_NOT_FOUND,
    )
    def get_person(people: People, thread: OwnedThread) -> PersonOut:
        return people.person(thread)

    @router.post(
        "/conversations/{conversation_id}/person",
        tags=["people"],
        summary="Ask for a person from customer service",
        description="The conversation joins the queue for a person; the assistant stops "
        "answering until the person hands it back. Messages sent meanwhile are kept for "
        "the person (their stream says so, then done). Asking again changes nothing.",
        responses={
            **_NOT_FOUND,
            **_CONFLICT,
            409: {
                "model": Problem,
                "description": "An action waits for your decision, or the assistant is answering.",
            },
        },
    )
    def ask_for_person(people: People, thread: OwnedThread, body: PersonIn) -> PersonOut:
        return people.ask(thread, body.reason)

    @router.post(
        "/conversations/{conversation_id}/stop",
        tags=["turns"],
        summary="Stop the assistant's answer, as Ctrl-C does in the terminal",
        description="The running turn is cancelled: nothing more is done, what was done "
        "stays, and its stream ends with an error event of kind stopped. The conversation "
        "can go on.",
        responses={
            **_NOT_FOUND,
            409: {
                "model": Problem,
                "description": "No turn of it runs on this server (none, or one elsewhere).",
            },
        },
    )
    def stop_turn(service: Service, thread: OwnedThread) -> StopOut:
        service.stop(thread)
        return StopOut(stopping=True)

    return router


class _Api(FastAPI):
    """FastAPI whose OpenAPI document says what each streamed event carries.

    Its outermost layers read the body under ``BodyLimit`` and add ``SecurityHeaders``
    to every answer, the server errors of Starlette's own outer layer included.
    """

    body_timeout: float = BODY_TIMEOUT

    def build_middleware_stack(self) -> ASGIApp:  # type: ignore[override]
        inner = cast(ASGIApp, super().build_middleware_stack())
        return SecurityHeaders(BodyLimit(inner, timeout=self.body_timeout))

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            document_event_streams(super().openapi())
        assert self.openapi_schema is not None
        return self.openapi_schema


def document_event_streams(schema: dict[str, Any]) -> None:
    """Describe the events of every ``text/event-stream`` response in ``schema``.

    FastAPI documents a stream of ``ServerSentEvent`` as events of any name and any
    data; this names the events and gives their data's schema (``StreamEvent``), and
    files the streaming routes' refusals under ``application/json``, which they are.
    """
    event_schema = TypeAdapter(StreamEvent).json_schema(
        ref_template="#/components/schemas/{model}", mode="serialization"
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in event_schema.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components["StreamEvent"] = event_schema
    item_schema = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": list(STREAM_EVENT_NAMES)},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": "#/components/schemas/StreamEvent"},
            },
            "id": {"type": "string"},
            "retry": {"type": "integer", "minimum": 0},
        },
    }
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.get("responses", {})
            content = responses.get("200", {}).get("content", {})
            if "text/event-stream" not in content:
                continue
            stream = content["text/event-stream"]
            stream.pop("schema", None)  # FastAPI's guess for a response class: "a string"
            stream["itemSchema"] = item_schema
            # FastAPI files every other answer of a streaming route under the stream's
            # media type too; refusals are plain JSON.
            for status, response in responses.items():
                other = response.get("content", {})
                if status != "200" and "text/event-stream" in other:
                    other["application/json"] = other.pop("text/event-stream")


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


def validation_problems(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Return ``errors`` (pydantic's) as the 422 body's items: type, location and message.

    The input and the error's context are left out: they quote what was sent, which may
    be huge, not printable, or not even encodable (a lone surrogate); a field name the
    client made up is quoted only when it is short and printable.
    """
    problems = []
    for error in errors:
        location = [
            part if isinstance(part, int) or _quotable(part) else "(unprintable name)"
            for part in error.get("loc", ())
        ]
        message = str(error.get("msg", "Invalid value."))
        problems.append(
            {
                "type": str(error.get("type", "value_error")),
                "loc": location,
                "msg": message if _quotable(message, 300) else "Invalid value.",
            }
        )
    return problems


def _quotable(text: object, limit: int = 100) -> bool:
    if not isinstance(text, str) or len(text) > limit or not text.isprintable():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def static_dir() -> Path:
    """Return the folder of the web chat's files (package data of ``server``)."""
    folder = files("server") / "static"
    return Path(str(folder))


def create_app(
    service: ConversationService | None,
    signer: TokenSigner,
    *,
    docs: bool = False,
    body_timeout: float = BODY_TIMEOUT,
) -> FastAPI:
    """Return the application over ``service``, authenticating with ``signer``.

    With ``docs``, ``/docs`` serves Swagger UI, which the browser loads from a CDN (no
    pinned copy ships with the package): off unless asked for. ``body_timeout`` bounds
    the reading of a request body (408 after it). Without ``service`` (``None``), the
    routes find it at ``app.state.service`` once it is set there: ``server.startup``
    builds it after the application, holds the requests that need it meanwhile, and
    closes it.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        use_turn_loop(asyncio.get_running_loop())  # every turn of the process runs here
        if service is not None:
            service.start_background()
        yield
        # Cancel the turns still running and wait for them to close, off the loop.
        if service is not None:
            await anyio.to_thread.run_sync(service.close)
        await close_http_clients()  # the models' clients, on the loop they belong to

    app = _Api(
        title="Meridian Travel assistant",
        version=API_VERSION,
        description="The customer-service assistant over HTTP: conversations, replies "
        "streamed as server-sent events, and approval of every action that writes. "
        "Authenticate with a bearer token from `travel-assistant token --passenger-id ID`.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.body_timeout = body_timeout
    if service is not None:
        app.state.service = service
    app.state.signer = signer

    @app.exception_handler(ServiceError)
    async def _refused(request: Request, error: ServiceError) -> JSONResponse:
        return JSONResponse({"detail": error.detail}, status_code=error.status)

    @app.exception_handler(_NoTurn)
    async def _no_turn(request: Request, error: _NoTurn) -> Response:
        return Response(status_code=204)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_problems(error.errors())}, status_code=422)

    if docs:

        @app.get("/docs", include_in_schema=False)
        def swagger() -> HTMLResponse:
            page = get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - docs")
            page.headers.update(DOCS_HEADERS)
            return page

    @app.get(
        "/api/v1/health",
        tags=["session"],
        summary="Tell whether the service is up",
        responses={
            503: {
                "description": 'Starting ({"status": "starting"}, with Retry-After), or '
                'failed to start ({"status": "failed", "detail": what to fix}).'
            }
        },
    )
    def health() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(_router())
    app.include_router(supervisor_router())
    app.include_router(staff_router())
    folder = static_dir()

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(folder / "index.html", headers=PAGE_HEADERS)

    @app.get("/supervisor", include_in_schema=False)
    def supervisor_page() -> FileResponse:
        return FileResponse(folder / "supervisor.html", headers=PAGE_HEADERS)

    # A conversation's address: the same page, which opens it.
    @app.get("/c/{conversation_id}", include_in_schema=False)
    def conversation_page(conversation_id: ConversationId) -> FileResponse:
        return FileResponse(folder / "index.html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=folder), name="static")
    return app
