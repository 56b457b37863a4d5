"""A person from the customer-service team, over HTTP: the customer's side and the staff's.

The customer asks for a person (``POST /api/v1/conversations/{id}/person``, the web
chat's "Talk to a person") and reads where they stand (``GET``: waiting, with their
place in the queue, or with a named person). A member of staff's token (an agent's or a
supervisor's) is the staff's side, under ``/api/v1/supervisor/desk``: the queue, taking a
conversation, writing to the customer, proposing an action, and handing it back to the
assistant with a note the model reads (or closing it). Only a supervisor's decides the
staff checks (second approvals): an agent's answers 403 there. Both sides go through
the conversation protocol (``Conversation.ask_for_person``, ``take``, ``person_says``,
``hand_back``), as the terminal's ``/agent`` and the ``desk`` command do, so what a
person writes over the API and in the desk terminal is the same history. A conversation
is never held by two people: the desk takes it with one conditional update
(``conversations.desk``).

Staff act under their token's login (``sub``), which the desk compares (who holds a
conversation, who proposed an action) and the audit log records; the customer is told
only their name (the token's ``name``, or the login of a token without one).

The supervisor page's forms are here too (``_page_routes``): the actions staff can
propose with their argument schemas, a proposal's preview (the customer's card, nothing
changed), the customer's bookings searched by name to fill an id, and Agent Inbox's edit
and respond at a check (``Conversation.edit_checked``, ``respond_to_check``).

Every staff action is recorded in the audit log, as a supervisor's looks are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, cast

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, Field, field_validator

from assistants.approvals import PendingAction
from conversations import words
from conversations.audit import Looked, record_action
from conversations.desk import Check, DeskError
from conversations.desk_rows import Staff
from conversations.events import Thread
from conversations.locks import ConversationStoreError
from conversations.protocol import Conversation, TurnRefusedError
from conversations.records import approval_of
from db.domains import RESERVATION_KINDS
from db.models import CURRENCY
from db.passengers import passenger_summary
from db.rules import parse_money
from db.values import fmt_money
from server.access import agent_may_read, staff, supervisor
from server.auth import Claims
from server.errors import ConflictError, NotFoundError, UnavailableError
from server.handoff_models import (
    ActionList,
    ActionOut,
    BookingList,
    BookingOut,
    CheckDecisionIn,
    CheckEditIn,
    CheckList,
    CheckRespondIn,
    HandBackIn,
    HandoffOut,
    PersonOut,
    ProposalIn,
    QueueOut,
    StaffCheckOut,
    StaffMessageIn,
    handoff_out,
    staff_check_out,
)
from server.records_out import approval_out
from server.schemas import (
    BLANKS,
    CONVERSATION_ID_PATTERN,
    PendingActionOut,
    PreviewOut,
    Problem,
    _Body,
)
from server.service import ConversationService

STAFF_PREFIX = "/api/v1/supervisor/desk"
# How long a person's message waits for a running turn (the assistant finishing the
# answer it was writing when the conversation was handed over) before a 409.
WRITE_WAIT = 5.0


class SecondApprovalOut(BaseModel):
    """The amount above which an action needs a staff check after the customer's yes."""

    amount: str | None = Field(
        description='The amount ("EUR 1,000.00"), or null: no second approval.'
    )
    cents: int | None


# What ``db.rules.parse_money`` reads (an amount in EUR, "EUR " before it or not), or off.
AMOUNT_PATTERN = r"^ *(?:(?:[Ee][Uu][Rr] +)?[0-9,]*[0-9][0-9,]*(?:\.[0-9]{0,2})?|[Oo][Ff][Ff])? *$"


class SecondApprovalIn(_Body):
    """A new second-approval amount."""

    amount: str | None = Field(
        max_length=40,
        pattern=AMOUNT_PATTERN,
        examples=["EUR 1000", "off"],
        description='An amount in EUR ("EUR 1000", "1000.50"), or "off" (or null): none.',
    )

    @field_validator("amount")
    @classmethod
    def _an_amount(cls, value: str | None) -> str | None:
        """Refuse what is not an amount (422, as every malformed body)."""
        if value is None or value.strip(BLANKS).lower() in ("", "off"):
            return None
        parse_money(value, CURRENCY)  # its ValueError says what is wanted
        return value.strip(BLANKS)

    def cents(self) -> int | None:
        """Return the amount in cents (``None``: no second approval)."""
        return parse_money(self.amount, CURRENCY) if self.amount is not None else None


def second_approval_out(cents: int | None) -> SecondApprovalOut:
    """Return the second-approval amount as the API shows it."""
    return SecondApprovalOut(amount=fmt_money(cents) if cents is not None else None, cents=cents)


class PersonDesk:
    """The hand-off operations of one service, with its errors as HTTP answers."""

    def __init__(self, service: ConversationService) -> None:
        """Act on the conversations of ``service``."""
        self.service = service
        self.conversations = service.conversations
        self.desk = service.conversations.desk

    # The customer's side -------------------------------------------------------------------

    def person(self, thread: Thread) -> PersonOut:
        """Return where the customer of ``thread`` stands."""
        conversation = self.conversations.get(thread)
        handoff = conversation.handoff()
        if handoff is None:
            latest = self.desk.latest(thread.thread_id)
            return PersonOut(
                status="assistant",
                place=None,
                agent=None,
                # After a hand-back, what the terminal says then too.
                text=words.back_with_assistant(latest.agent)
                if latest is not None and latest.agent  # withdrawn: nobody took it
                else words.ASSISTANT_ANSWERS,
                messages=latest.messages if latest is not None else 0,
            )
        notice = conversation.person_notice(handoff)
        assert notice is not None  # an open hand-off always has one
        held = handoff.status == "held"
        return PersonOut(
            status="with_person" if held else "waiting",
            place=None if held else self.desk.position(thread.thread_id),
            agent=handoff.agent if held else None,
            text=notice.text,
            messages=handoff.messages,
        )

    def ask(self, thread: Thread, reason: str) -> PersonOut:
        """Put ``thread`` in the queue for a person.

        An action still waiting for the customer's decision ends as not done.

        Raises:
            ConflictError: A turn of the conversation is running.
        """
        if self.service.runner.busy(thread.thread_id):
            raise ConflictError(
                "The assistant is answering: wait for the reply (or stop it), then ask for "
                "a person."
            )
        conversation = self.conversations.get(thread)
        with _refusals():
            conversation.ask_for_person(reason.strip(BLANKS))
        return self.person(thread)

    def withdraw(self, thread: Thread) -> PersonOut:
        """Take ``thread`` out of the queue for a person: the assistant answers again.

        Raises:
            ConflictError: Nobody was asked for, or a person has the conversation already.
        """
        conversation = self.conversations.get(thread)
        with _refusals():
            notice = conversation.withdraw_person_request()
        return self.person(thread).model_copy(update={"text": notice.text})

    # The staff's side ----------------------------------------------------------------------

    def queue(self, agent: Staff) -> QueueOut:
        """Return the waiting conversations and those ``agent`` holds."""
        waiting = self.desk.queue()
        return QueueOut(
            waiting=[handoff_out(h, place) for place, h in enumerate(waiting, start=1)],
            yours=[handoff_out(h) for h in self.desk.held_by(agent)],
        )

    def _handed(self, conversation_id: str) -> Conversation:
        handoff = self.desk.latest(conversation_id)
        if handoff is None:
            raise NotFoundError(f"Conversation {conversation_id} was never handed to a person.")
        return self.conversations.get(Thread(handoff.thread_id, handoff.passenger_id))

    def _record(self, agent: Staff, conversation: Conversation, what: Looked) -> None:
        thread = conversation.thread
        record_action(self.service.audit, agent.login, what, thread.thread_id, thread.passenger_id)

    def take(self, agent: Staff, conversation_id: str) -> HandoffOut:
        """Give the waiting ``conversation_id`` to ``agent``.

        Raises:
            NotFoundError: It was never handed to a person.
            ConflictError: It is not waiting, or someone else holds it.
        """
        conversation = self._handed(conversation_id)
        with _refusals():
            handoff = conversation.take(agent)
        self._record(agent, conversation, "took")
        return handoff_out(handoff)

    def write(self, agent: Staff, conversation_id: str, text: str) -> HandoffOut:
        """Write ``agent``'s message to the customer of ``conversation_id``.

        Raises:
            NotFoundError: It was never handed to a person.
            ConflictError: ``agent`` does not hold it, or a turn of it is running.
            UnavailableError: The conversations database cannot be reached.
        """
        conversation = self._handed(conversation_id)
        with _refusals():
            conversation.person_says(agent, text, wait=WRITE_WAIT)
        handoff = conversation.handoff()
        assert handoff is not None  # held by ``agent``, who alone can end it
        return handoff_out(handoff)

    def propose(
        self, agent: Staff, conversation_id: str, action: str, args: dict[str, Any]
    ) -> PendingActionOut:
        """Put ``agent``'s proposed action to the customer; return it as they see it.

        Raises:
            NotFoundError: It was never handed to a person.
            ConflictError: ``agent`` does not hold it, the action is unknown or not
                possible (the preview says why), or one already waits for the customer.
        """
        conversation = self._handed(conversation_id)
        with _refusals():
            approval = conversation.person_proposes(agent, action, args)
        self._record(agent, conversation, "proposed")
        return approval_out(approval)

    def checks(self, viewer: Staff | None = None) -> CheckList:
        """Return the checks waiting for staff, each with what the customer said yes to.

        Each says who proposed it; those ``viewer`` proposed are marked (``yours``):
        another supervisor decides them.
        """
        waiting = self.desk.checks_waiting()
        previews: dict[str, dict[str, tuple[str, ...]]] = {}
        calls: dict[str, dict[str, PendingAction]] = {}
        for check in waiting:  # one reading of the actions per conversation
            if check.thread_id not in previews:
                previews[check.thread_id] = self._previews(check)
                calls[check.thread_id] = self._calls(check)
        return CheckList(
            checks=[
                staff_check_out(
                    c,
                    previews[c.thread_id].get(c.tool_call_id, ()),
                    self._proposer(c),
                    viewer,
                    calls[c.thread_id].get(c.tool_call_id),
                )
                for c in waiting
            ]
        )

    def _calls(self, check: Check) -> dict[str, PendingAction]:
        """Return the calls waiting in ``check``'s conversation, by id: what an edit changes."""
        thread = Thread(check.thread_id, check.passenger_id)
        pending = self.conversations.assistant.pending_actions(thread)
        return {a.tool_call_id: a for a in pending}

    def _proposer(self, check: Check) -> Staff | None:
        conversation = self.conversations.get(Thread(check.thread_id, check.passenger_id))
        return conversation.proposer(check.tool_call_id)

    def _previews(self, check: Check) -> dict[str, tuple[str, ...]]:
        """Return the preview lines of the actions waiting in ``check``'s conversation.

        They are what the customer was shown before saying yes (as the desk's ``/checks``
        prints them), by the id of the tool call a check names.
        """
        conversation = self.conversations.get(Thread(check.thread_id, check.passenger_id))
        return {a.tool_call_id: a.lines for a in conversation.approvals()}

    def decide_check(
        self, staff: Staff, check_id: int, approved: bool, reason: str
    ) -> StaffCheckOut:
        """Record ``staff``'s yes or no; the customer's side goes on with it.

        Raises:
            NotFoundError: No such check.
            ConflictError: It was decided already, its action was dropped, or ``staff``
                proposed it (four eyes: another member of staff decides).
        """
        found = self.desk.check(check_id)
        if found is None:
            raise NotFoundError(f"There is no check {check_id}.")
        conversation = self.conversations.get(Thread(found.thread_id, found.passenger_id))
        lines = self._previews(found).get(found.tool_call_id, ())
        with _refusals():
            decided = conversation.decide_check(
                staff, check_id, approved=approved, reason=reason.strip(BLANKS)
            )
        self._record(staff, conversation, "approved" if approved else "refused")
        self.service.metrics.checks.labels("approved" if approved else "refused").inc()
        return staff_check_out(decided, lines, conversation.proposer(found.tool_call_id), staff)

    def second_approval(self) -> SecondApprovalOut:
        """Return the second-approval amount kept with the conversations."""
        with _refusals():
            return second_approval_out(self.desk.agree_check_above(None))

    def set_second_approval(self, staff: Staff, cents: int | None) -> SecondApprovalOut:
        """Keep ``cents`` as the second-approval amount (``None``: none), as ``staff`` asked.

        This worker uses it at once; it is kept with the conversations for every process.
        """
        with _refusals():
            self.desk.set_check_above(cents)
        self.conversations.check_above = cents
        return second_approval_out(cents)

    async def go_on(self, check_id: int) -> None:
        """Run the actions of ``check_id``'s conversation once staff decided every check.

        The last decision is what an approved action waited for: it runs now, as a turn
        of the service, whether or not the customer's window is open.
        """
        found = await anyio.to_thread.run_sync(self.desk.check, check_id)
        if found is None:
            return
        thread = Thread(found.thread_id, found.passenger_id)
        conversation = self.conversations.get(thread)
        if await anyio.to_thread.run_sync(conversation.checks_decided):
            await self.service.apply_checked(thread)

    def hand_back(
        self,
        agent: Staff,
        conversation_id: str,
        note: str,
        close: bool,
        end_pending: bool = False,
    ) -> HandoffOut:
        """End ``agent``'s hold of ``conversation_id``: the assistant answers again.

        An action still pending ends with it, as not done: only with ``end_pending``,
        so that the person is told first what it would end.

        Raises:
            NotFoundError: It was never handed to a person.
            ConflictError: ``agent`` does not hold it, a turn of it is running, or an
                action is pending and ``end_pending`` is not set.
        """
        conversation = self._handed(conversation_id)
        ending = conversation.would_end()
        if ending and not end_pending:
            raise ConflictError(words.hand_back_would_end(ending, close=close))
        with _refusals():
            handoff = conversation.hand_back(agent, note, close=close)
        self._record(agent, conversation, "closed" if close else "handed back")
        return handoff_out(handoff)

    # The supervisor page's forms ----------------------------------------------------------

    def actions(self) -> ActionList:
        """Return every action staff can propose, each with its arguments' JSON schema."""
        crew = self.conversations.assistant.crew
        found: list[ActionOut] = []
        for member in crew.members:
            for tool in member.tools.sensitive:
                schema = tool.tool_call_schema
                if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
                    continue  # every sensitive tool is a model's: not one without a form
                arguments = schema.model_json_schema()
                found.append(
                    ActionOut(
                        name=tool.name,
                        title=crew.previews[tool.name].title,
                        assistant_label=crew.label(member.name),
                        description=tool.description,
                        arguments=arguments,
                    )
                )
        return ActionList(actions=found)

    def preview_proposal(
        self, agent: Staff, conversation_id: str, action: str, args: dict[str, Any]
    ) -> PreviewOut:
        """Return what proposing ``action(args)`` would show the customer; change nothing.

        Raises:
            NotFoundError: It was never handed to a person.
            ConflictError: What proposing it would refuse (not held, not an action, an
                argument, another action waiting, not possible).
        """
        conversation = self._handed(conversation_id)
        with _refusals():
            preview = conversation.preview_proposal(agent, action, args)
        shown = approval_of(preview, "", "", "")
        return PreviewOut(
            title=shown.title,
            lines=list(shown.lines),
            amount=shown.amount,
            amount_kind=shown.amount_kind,
            error=shown.refusal,
        )

    def bookings(self, claims: Claims, conversation_id: str, words_: str) -> BookingList:
        """Return the customer's tickets and reservations matching ``words_`` (every word).

        What ``fetch_user_flight_information`` reads (``db.passengers.passenger_summary``),
        each with the argument it fills and the actions that take it.

        Raises:
            NotFoundError: No such conversation.
            HTTPException: 403, an agent's token on a conversation neither waiting nor theirs.
        """
        record = self.conversations.registry.get(conversation_id)
        if record is None:
            raise NotFoundError(f"There is no conversation {conversation_id}.")
        conversation = self.conversations.get(Thread(record.thread_id, record.passenger_id))
        agent_may_read(claims, conversation.handoff())
        db = self.conversations.assistant.db
        with db.rows() as rows:
            summary = passenger_summary(rows, record.passenger_id, db.clock())
        found = _bookings_of(summary, self._taking())
        wanted = words_.casefold().split()
        return BookingList(
            bookings=[b for b in found if all(w in b.label.casefold() for w in wanted)]
        )

    def _taking(self) -> dict[str, list[str]]:
        """Return, by booking kind, the actions whose arguments take one of its ids."""
        taking: dict[str, list[str]] = {}
        for action in self.actions().actions:
            takes = action.arguments.get("properties", {})
            if "ticket_no" in takes:
                taking.setdefault("ticket", []).append(action.name)
            elif "booking_id" in takes:
                kind = next((k.kind for k in RESERVATION_KINDS if action.name.endswith(k.kind)), "")
                taking.setdefault(kind, []).append(action.name)
        return taking

    def edit_check(
        self, staff: Staff, check_id: int, action: str, args: dict[str, Any]
    ) -> PendingActionOut:
        """Change a checked action's arguments: the customer is asked again, with its preview.

        Raises:
            NotFoundError: No such check.
            ConflictError: As ``Conversation.edit_checked`` refuses it.
        """
        conversation = self._checked(check_id)
        with _refusals():
            approval = conversation.edit_checked(staff, check_id, action, args)
        self._record(staff, conversation, "edited")
        return approval_out(approval)

    def respond_to_check(self, staff: Staff, check_id: int, text: str) -> StaffCheckOut:
        """Write ``staff``'s message to the customer about a check, which stays waiting.

        Raises:
            NotFoundError: No such check.
            ConflictError: It is not waiting, or a turn of the conversation is running.
        """
        conversation = self._checked(check_id)
        with _refusals():
            conversation.respond_to_check(staff, check_id, text)
        self._record(staff, conversation, "responded")
        found = self.desk.check(check_id)
        assert found is not None  # checks are never deleted with their conversation live
        lines = self._previews(found).get(found.tool_call_id, ())
        return staff_check_out(found, lines, conversation.proposer(found.tool_call_id), staff)

    def _checked(self, check_id: int) -> Conversation:
        found = self.desk.check(check_id)
        if found is None:
            raise NotFoundError(f"There is no check {check_id}.")
        return self.conversations.get(Thread(found.thread_id, found.passenger_id))


@contextmanager
def _refusals() -> Iterator[None]:
    """Answer what the desk or the conversation refuses as the API documents it.

    409 for a refusal of the desk (not waiting, held by another, not an action) or a
    turn running; 503 when the conversations database cannot be reached.
    """
    try:
        yield
    except DeskError as error:
        raise ConflictError(str(error)) from error
    except TurnRefusedError as error:
        if error.failure.kind == "unavailable":
            raise UnavailableError(error.failure.text) from error
        raise ConflictError(error.failure.text) from error
    except ConversationStoreError as error:
        raise UnavailableError(str(error)) from error


def _bookings_of(summary: dict[str, Any], taking: dict[str, list[str]]) -> list[BookingOut]:
    """Return a passenger's tickets and reservations as the page picks them."""
    found = []
    for ticket in summary["tickets"]:
        flights = ", ".join(
            f"{s['flight_no']} {s['route']} {s['departure']}" for s in ticket["segments"]
        )
        found.append(
            BookingOut(
                kind="ticket",
                argument="ticket_no",
                value=ticket["ticket_no"],
                label=f"Ticket {ticket['ticket_no']}: {flights} ({ticket['status']})",
                status=ticket["status"],
                actions=taking.get("ticket", []),
            )
        )
    for kind in RESERVATION_KINDS:
        for booking in summary[kind.summary_key]:
            units = f"{kind.period.unit}s"  # "3 nights", not a bare 3
            shown = [
                f"{v} {k}" if k == units else str(v)
                for k, v in booking.items()
                if k not in ("booking_id", kind.catalogue_key, "status", "total_cents")
                and v not in (None, "")
            ]
            found.append(
                BookingOut(
                    kind=kind.kind,
                    argument="booking_id",
                    value=booking["booking_id"],
                    label=f"{kind.noun.capitalize()} booking {booking['booking_id']}: "
                    f"{', '.join(shown)} ({booking['status']})",
                    status=str(booking["status"]),
                    actions=taking.get(kind.kind, []),
                )
            )
    return found


# --- the routes -----------------------------------------------------------------------------


async def _person_desk(request: Request) -> PersonDesk:
    return PersonDesk(cast(ConversationService, request.app.state.service))


def member(claims: Claims) -> Staff:
    """Return the member of staff a token names: their canonical login, and their name."""
    return Staff(claims.login, claims.shown_name)


People = Annotated[PersonDesk, Depends(_person_desk)]
# An agent's or a supervisor's token works the desk; only a supervisor's decides checks.
Working = Annotated[Claims, Depends(staff)]
Deciding = Annotated[Claims, Depends(supervisor)]
HandedId = Annotated[
    str,
    PathParam(
        pattern=CONVERSATION_ID_PATTERN,
        max_length=100,
        description="A conversation that was handed to a person (see the queue).",
    ),
]

_NOT_HANDED: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "description": "It was never handed to a person."}
}
_NOT_YOURS: dict[int | str, dict[str, Any]] = {
    409: {
        "model": Problem,
        "description": "It is not waiting, another person holds it, you do not hold it, or "
        "a turn of it is running.",
    }
}
_ONLY_SUPERVISORS: dict[int | str, dict[str, Any]] = {
    403: {
        "model": Problem,
        "description": "Not a supervisor's token: an agent's does not decide staff checks.",
    }
}
_STAFF_PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No token, or one that is not valid or expired."},
    403: {"model": Problem, "description": "Not a member of staff's token."},
    400: {"model": Problem, "description": "The body cannot be read (not UTF-8)."},
    408: {"model": Problem, "description": "The request body did not arrive in time."},
    413: {"model": Problem, "description": "The request body is too large."},
    503: {
        "model": Problem,
        "description": "The conversations database cannot be reached; nothing was changed.",
    },
}


def staff_router() -> APIRouter:
    """Return the staff's routes: the queue, take, write, hand back."""
    routes = APIRouter(
        prefix=STAFF_PREFIX,
        tags=["desk"],
        responses=_STAFF_PROBLEMS,
    )

    @routes.get("/queue", summary="The conversations waiting for a person, and yours")
    def queue(people: People, claims: Working) -> QueueOut:
        return people.queue(member(claims))

    @routes.post(
        "/{conversation_id}/take",
        summary="Take a waiting conversation: the customer is told your name",
        responses={**_NOT_HANDED, **_NOT_YOURS},
    )
    def take(people: People, claims: Working, conversation_id: HandedId) -> HandoffOut:
        return people.take(member(claims), conversation_id)

    @routes.post(
        "/{conversation_id}/messages",
        summary="Write to the customer (shown with your name; the assistant stays silent)",
        responses={**_NOT_HANDED, **_NOT_YOURS},
    )
    def write(
        people: People, claims: Working, conversation_id: HandedId, body: StaffMessageIn
    ) -> HandoffOut:
        return people.write(member(claims), conversation_id, body.text)

    @routes.post(
        "/{conversation_id}/hand-back",
        summary="Give the conversation back to the assistant with a note (or close it)",
        responses={**_NOT_HANDED, **_NOT_YOURS},
    )
    def hand_back(
        people: People, claims: Working, conversation_id: HandedId, body: HandBackIn
    ) -> HandoffOut:
        return people.hand_back(
            member(claims), conversation_id, body.note, body.close, body.end_pending
        )

    @routes.post(
        "/{conversation_id}/proposals",
        summary="Put an action to the customer for their yes or no (same preview as the "
        "assistant's)",
        description="Only while you hold the conversation. The customer decides it in "
        "their window; it runs without the assistant answering, and a second approval "
        "applies as for the assistant's actions.",
        responses={**_NOT_HANDED, **_NOT_YOURS},
    )
    def propose(
        people: People, claims: Working, conversation_id: HandedId, body: ProposalIn
    ) -> PendingActionOut:
        return people.propose(member(claims), conversation_id, body.action, body.args)

    @routes.get(
        "/second-approval",
        summary="The amount above which an approved action waits for a staff check",
    )
    def second_approval(people: People, claims: Working) -> SecondApprovalOut:
        return people.second_approval()

    @routes.put(
        "/second-approval",
        summary="Change the second-approval amount (supervisors)",
        description="Kept with the conversations; this worker uses it at once.",
        responses=_ONLY_SUPERVISORS,
    )
    def set_second_approval(
        people: People, claims: Deciding, body: SecondApprovalIn
    ) -> SecondApprovalOut:
        return people.set_second_approval(member(claims), body.cents())

    @routes.get(
        "/checks",
        summary="The actions customers approved that wait for your check (supervisors)",
        responses=_ONLY_SUPERVISORS,
    )
    def checks(people: People, claims: Deciding) -> CheckList:
        return people.checks(member(claims))

    @routes.post(
        "/checks/{check_id}",
        summary="Approve or refuse an action a customer approved (the second approval)",
        description="When yours is the last check the customer's actions wait for, they "
        "are applied at once, whether or not the customer's window is open: an approved "
        "action runs; a refused one is not done, and the customer and the assistant are "
        "told your reason. The customer's page follows it live (the conversation's "
        "events); its end is in the history. Each check is decided once, by a supervisor "
        "other than the one who proposed the action (four eyes).",
        responses={
            **_ONLY_SUPERVISORS,
            404: {"model": Problem, "description": "No such check."},
            409: {
                "model": Problem,
                "description": "It was decided already, the action was dropped, or you "
                "proposed it: another member of staff decides.",
            },
        },
    )
    async def decide_check(
        people: People,
        claims: Deciding,
        check_id: Annotated[int, PathParam(ge=1, le=2**62)],
        body: CheckDecisionIn,
    ) -> StaffCheckOut:
        decided = await anyio.to_thread.run_sync(
            people.decide_check, member(claims), check_id, body.approved, body.reason
        )
        await people.go_on(check_id)
        return decided

    _page_routes(routes)
    return routes


def _page_routes(routes: APIRouter) -> None:
    """Add the supervisor page's forms: actions, a proposal's preview, bookings, edit, respond."""

    @routes.get("/actions", summary="The actions you can propose, each with its arguments' schema")
    def actions(people: People, claims: Working) -> ActionList:
        return people.actions()

    @routes.post(
        "/{conversation_id}/proposals/preview",
        summary="What proposing an action would show the customer (nothing is changed)",
        description="The same checks as proposing it, and the same preview the customer "
        "would see: a 409 here is what sending it would answer.",
        responses={**_NOT_HANDED, **_NOT_YOURS},
    )
    def preview_proposal(
        people: People, claims: Working, conversation_id: HandedId, body: ProposalIn
    ) -> PreviewOut:
        return people.preview_proposal(member(claims), conversation_id, body.action, body.args)

    @routes.get(
        "/{conversation_id}/bookings",
        summary="The customer's tickets and reservations, searched by words (to fill an id)",
        responses={
            403: {
                "model": Problem,
                "description": "An agent's token on a conversation neither waiting nor theirs.",
            },
            404: {"model": Problem, "description": "No such conversation."},
        },
    )
    def bookings(
        people: People,
        claims: Working,
        conversation_id: HandedId,
        q: Annotated[
            str,
            Query(max_length=200, description="Words each booking shown contains (any case)."),
        ] = "",
    ) -> BookingList:
        return people.bookings(claims, conversation_id, q)

    _check_problems: dict[int | str, dict[str, Any]] = {
        **_ONLY_SUPERVISORS,
        404: {"model": Problem, "description": "No such check."},
    }

    @routes.post(
        "/checks/{check_id}/edit",
        summary="Change a checked action's arguments: the customer is asked again",
        description="Agent Inbox's edit. The customer's yes was for the old arguments, so "
        "nothing is approved: the action as it was ends as not done, its check is "
        "withdrawn, and the same action with your arguments is put to the customer as your "
        "proposal, with its new preview (above the second-approval amount, another "
        "supervisor checks it after their yes).",
        responses={
            **_check_problems,
            409: {
                "model": Problem,
                "description": "Not waiting, another action named, arguments wrong or not "
                "possible, several actions waiting together, or you proposed it.",
            },
        },
    )
    def edit_check(
        people: People,
        claims: Deciding,
        check_id: Annotated[int, PathParam(ge=1, le=2**62)],
        body: CheckEditIn,
    ) -> PendingActionOut:
        return people.edit_check(member(claims), check_id, body.action, body.args)

    @routes.post(
        "/checks/{check_id}/respond",
        summary="Write to the customer about a check, which stays waiting",
        description="Agent Inbox's respond: your message, with your name, for the customer "
        "and the assistant; the action stays approved by the customer and waiting for its "
        "check. To refuse it with a reason, decide the check.",
        responses={
            **_check_problems,
            409: {
                "model": Problem,
                "description": "It is not waiting, or a turn of the conversation is running.",
            },
        },
    )
    def respond_to_check(
        people: People,
        claims: Deciding,
        check_id: Annotated[int, PathParam(ge=1, le=2**62)],
        body: CheckRespondIn,
    ) -> StaffCheckOut:
        return people.respond_to_check(member(claims), check_id, body.text)


__all__ = [
    "HandoffOut",
    "PersonDesk",
    "PersonOut",
    "QueueOut",
    "staff_router",
]
