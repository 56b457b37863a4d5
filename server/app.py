"""The FastAPI application: the JSON API under ``/api/v1`` and the web chat at ``/``.

Every API request but the health check carries ``Authorization: Bearer <token>`` and
acts for the passenger the token names. Another passenger's conversation answers 404,
exactly as one that does not exist. A customer message or a set of decisions answers
with the turn as server-sent events (``token``, ``status``, ``message``, ``pending``,
then ``done``, or ``error``); everything is refused with a 4xx and changes nothing
before a stream starts. The graph runs in worker threads (``server.service``), never on
the event loop; the JSON endpoints, which read checkpoints and the travel database, are
plain functions that FastAPI runs in its thread pool.

The routes are the customer's (``server.customer_api``), the supervisor's
(``server.supervisor``) and the desk's (``server.handoff``); ``server.middleware`` holds
the layers around them. ``create_app`` puts them together with the OpenAPI document,
the answers to refused requests and the web chat's pages. It takes the service and the
token signer, so tests build the app over a scripted model and a temporary database;
``serve`` runs it with uvicorn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, cast

import anyio
from fastapi import Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import TypeAdapter

from assistants.models import close_http_clients
from conversations.loop import use_turn_loop
from server.access import supervisor
from server.auth import Claims, TokenSigner
from server.customer_api import ConversationId, NoTurn
from server.customer_api import router as customer_router
from server.errors import ServiceError
from server.handoff import staff_router
from server.limits import BODY_TIMEOUT, BUSY_RETRY_AFTER
from server.logs import logged_requests
from server.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from server.metrics import ServiceMetrics
from server.middleware import PAGE_HEADERS, ASGIApp, BodyLimit, DatabaseFaults, SecurityHeaders
from server.schemas import STREAM_EVENT_NAMES, StreamEvent
from server.service import ConversationService
from server.supervisor import router as supervisor_router

API_VERSION = "1.0.0"
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


class _Api(FastAPI):
    """FastAPI whose OpenAPI document says what each streamed event carries.

    Its outermost layers read the body under ``BodyLimit`` and add ``SecurityHeaders``
    to every answer, the server errors of Starlette's own outer layer included.
    """

    body_timeout: float = BODY_TIMEOUT

    def build_middleware_stack(self) -> ASGIApp:  # type: ignore[override]
        inner = cast(ASGIApp, super().build_middleware_stack())
        metrics: ServiceMetrics | None = getattr(self.state, "metrics", None)
        if metrics is not None:  # every answer counted, the outer layers' refusals too
            inner = cast(ASGIApp, metrics.middleware(cast(Any, inner)))
        inner = cast(ASGIApp, logged_requests(cast(Any, inner)))  # a line each, with its id
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
    # Inside Starlette's error layer, outside the routes: a database fault is a 503.
    app.add_middleware(DatabaseFaults)
    if service is not None:
        app.state.service = service
    # One worker's metrics: the service's own, or the one the service built later uses.
    app.state.metrics = service.metrics if service is not None else ServiceMetrics()
    app.state.signer = signer

    @app.exception_handler(ServiceError)
    async def _refused(request: Request, error: ServiceError) -> JSONResponse:
        # A 503 (the database, a stopping worker) passes: say when to try again.
        retry = {"Retry-After": str(BUSY_RETRY_AFTER)} if error.status == 503 else None
        return JSONResponse({"detail": error.detail}, status_code=error.status, headers=retry)

    @app.exception_handler(NoTurn)
    async def _no_turn(request: Request, error: NoTurn) -> Response:
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
    def health(request: Request) -> dict[str, str]:
        # What the start adds (``commands.serve``): whether the model server honours tools.
        return {"status": "ok", **getattr(request.app.state, "health", {})}

    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request, claims: Annotated[Claims, Depends(supervisor)]) -> Response:
        # Prometheus sends the supervisor's token as a bearer token (docs/operations.md).
        exposition = cast(ServiceMetrics, request.app.state.metrics).exposition()
        return Response(exposition, media_type=METRICS_CONTENT_TYPE)

    app.include_router(customer_router())
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
