"""The customer's API under ``/api/v1``: conversations, turns, approvals, a person.

A passenger's token acts on that passenger's conversations only: another passenger's
answers 404, exactly as one that does not exist, and a staff token answers 403.
A message, a set of decisions or a resume claims the conversation before it answers
(409 when a turn of it runs anywhere) and answers with the turn's events as server-sent
events (``EventStream``), read from the journal of the turn (``server.runs``); the turn
goes on when the client leaves, and ``GET .../events`` follows it again. What each
route does is the service's (``server.service``) or the desk's (``server.handoff``);
here are the routes, what they depend on, and the stream they answer with.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Annotated, Any, cast

import anyio
from fastapi import APIRouter, Depends, Header, HTTPException, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from conversations.assistant import Thread
from server.access import customer
from server.auth import Claims
from server.handoff import People
from server.handoff_models import PersonIn, PersonOut
from server.limits import leave_the_cap
from server.runs import Journaled
from server.schemas import (
    CONVERSATION_ID_PATTERN,
    ConversationList,
    ConversationOut,
    DecisionsIn,
    History,
    Me,
    MessageIn,
    PendingList,
    Problem,
    StopOut,
    Suggestions,
    TitleIn,
    WithdrawOut,
)
from server.service import ConversationService

API_PREFIX = "/api/v1"

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
        "description": "A staff token (a supervisor's or an agent's), which acts for no "
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
        raise NoTurn()
    return events


class NoTurn(Exception):
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
    leave_the_cap()
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


def router() -> APIRouter:
    """Return the customer's routes: conversations, turns, approvals and a person."""
    router = APIRouter(prefix=API_PREFIX, responses=_PROBLEMS)

    @router.get("/me", tags=["session"], summary="Who the token says you are")
    def me(claims: Passenger) -> Me:
        return Me(passenger_id=claims.passenger_id, expires_at=claims.expires_at)

    @router.get(
        "/suggestions",
        tags=["session"],
        summary="What a new conversation offers to ask, from your bookings",
        description="A greeting that says what the assistant can do, and three or four "
        "questions drawn from your next flight (general ones when no flight is ahead). "
        "Nothing is asked until you send one.",
    )
    def suggestions(service: Service, claims: Passenger) -> Suggestions:
        return service.suggestions(claims.passenger_id)

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
        "optional reason, which is passed to whoever proposed the action (the assistant, "
        "or the person its proposed_by names). Only an explicit approval runs "
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

    @router.post(
        "/conversations/{conversation_id}/withdraw",
        tags=["approvals"],
        summary="Withdraw the pending actions, the ones waiting for a staff check too",
        description="Nothing of them is done or charged, and the history records that you "
        "withdrew them; an action's check ends, so staff can no longer approve it. A "
        "message never withdraws an action you approved: this does. 409 when nothing is "
        "pending or a reply is being written.",
        responses={**_NOT_FOUND, **_CONFLICT},
    )
    def withdraw(service: Service, thread: OwnedThread) -> WithdrawOut:
        return service.withdraw(thread)

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
        "the person (their stream says so, then done). Asking again changes nothing. An "
        "action still waiting for your decision ends as not done (its record says why).",
        responses={
            **_NOT_FOUND,
            **_CONFLICT,
            409: {"model": Problem, "description": "The assistant is answering."},
        },
    )
    def ask_for_person(people: People, thread: OwnedThread, body: PersonIn) -> PersonOut:
        return people.ask(thread, body.reason)

    @router.delete(
        "/conversations/{conversation_id}/person",
        tags=["people"],
        summary="Leave the queue for a person",
        description="Withdraws the request while nobody has taken it: the assistant "
        "answers your next message, and is told.",
        responses={
            **_NOT_FOUND,
            **_CONFLICT,
            409: {
                "model": Problem,
                "description": "Nobody was asked for, or a person has the conversation already.",
            },
        },
    )
    def withdraw_person(people: People, thread: OwnedThread) -> PersonOut:
        return people.withdraw(thread)

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
