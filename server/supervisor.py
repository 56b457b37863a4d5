"""The supervisor's view: every passenger's conversations, read-only and audited.

A supervisor's token (``travel-assistant token --supervisor NAME``) reads, under
``/api/v1/supervisor``, the list of all conversations and, for each, what the people
behind the desk need and the customer never sees: who answers it (the assistant, nobody
yet while it waits for a person, or the person who holds it), the active specialist, the
hand-overs, every tool call with its arguments and raw result, every approval with the
preview the customer was shown and its amount, the money moved, and the errors. It is
built from the conversation protocol (``Conversation.timeline``, ``approvals``,
``summary``, ``handoff``), as the terminal's ``/details`` is for one turn. Nothing here
writes a conversation: the routes are all ``GET``, and a supervisor's token is refused
(403) on the passengers' routes. Each conversation of the list carries a ``version`` that
moves whenever its view would show something new (a step saved, a decision, a check, who
holds it), so the page follows an open conversation live from the list it reads anyway,
and reads the conversation again only when it moved.

Every look is recorded in the store's audit log (``conversations.audit``): who, at what,
when; ``GET /api/v1/supervisor/audit`` and ``travel-assistant audit`` read it.

An agent's token (``token --agent LOGIN``) reads here who it is (``/me``), and lists and
reads only the conversations that wait for a person or that the agent holds; another
conversation and the audit log answer it 403 (``server.access``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from conversations.audit import AuditEntry, Looked
from conversations.events import Thread
from conversations.logins import canonical_login
from conversations.protocol import ActionStep, HandOverStep, Step, ToolCallDetail
from conversations.records import PRIMARY, AssistantLine, CustomerLine, Notice
from db.values import AmountKind, fmt_money
from server.access import agent_may_read, staff, supervisor
from server.auth import Claims
from server.records_out import approval_out
from server.schemas import CONVERSATION_ID_PATTERN, PendingActionOut, Problem
from server.service import ConversationService

if TYPE_CHECKING:
    from assistants.specialists import Crew
    from conversations.desk import Handoff
    from conversations.protocol import Summary
    from conversations.sessions import SessionRecord

PREFIX = "/api/v1/supervisor"
LIST_LIMIT = 200
PRIMARY_TITLE = "primary assistant"
AnswersBy = Literal["assistant", "waiting", "person"]
# Query text no storage engine keeps (PostgreSQL refuses NUL) is refused with 422.
NO_NUL = r"^[^\x00]*$"


# --- what the API shows ---------------------------------------------------------------------


class SupervisorMe(BaseModel):
    """Who the staff token names, as what, and until when."""

    name: str = Field(description="The name customers see (the login, without one).")
    login: str = Field(description="The login the desk compares and the audit log records.")
    role: Literal["supervisor", "agent"] = "supervisor"
    expires_at: datetime


class SupervisedConversation(BaseModel):
    """One conversation in the supervisor's list."""

    conversation_id: str
    passenger_id: str
    title: str = Field(description="The first customer message (empty until there is one).")
    created_at: datetime
    updated_at: datetime
    assistant: str = Field(description="The assistant that answers the next message.")
    assistant_title: str = Field(description='How it is named ("flights specialist").')
    answers: AnswersBy = Field(
        description="Who answers the customer now: the assistant; nobody yet, the "
        "conversation waits for a person in the desk's queue; or the person who holds it "
        "(the assistant stays silent until they hand it back)."
    )
    person: str = Field(description="The person who holds it (empty unless answers is person).")
    answers_text: str = Field(
        description='The same in words: "Held by Ana Lima", "Waiting for a person", '
        '"With the assistant (flights specialist)".'
    )
    pending_actions: int
    turns: int = Field(description="Customer messages so far.")
    busy: bool = Field(description="A turn is running right now.")
    messages: int = Field(
        description="Messages saved so far: it grows with every step a turn saves (the "
        "customer's message, each tool call and its result, each reply), and with what a "
        "person writes."
    )
    version: str = Field(
        description="Changes whenever something the conversation's view shows changes: a "
        "message or a step saved, a turn starting or ending, an action proposed or decided, "
        "a staff check decided, who holds it, a failed turn. A page that shows the "
        "conversation compares it with the list's, read anyway, and reads the conversation "
        "again only when it moved. Opaque: compare it, do not read it."
    )


class SupervisedList(BaseModel):
    """Every passenger's conversations, most recently used first."""

    conversations: list[SupervisedConversation]


class AssistantOut(BaseModel):
    """One assistant of the crew; ``active`` answers the conversation's next message."""

    name: str
    title: str
    active: bool


class CustomerStep(BaseModel):
    """A message the customer sent."""

    type: Literal["customer"] = "customer"
    text: str


class ReplyStep(BaseModel):
    """A reply an assistant wrote."""

    type: Literal["reply"] = "reply"
    assistant: str
    assistant_title: str
    text: str
    person: str = Field(
        default="", description="The person from customer service who wrote it, if one did."
    )


class NoticeStep(BaseModel):
    """A note no one wrote (a turn cancelled)."""

    type: Literal["notice"] = "notice"
    text: str


class HandOverOut(BaseModel):
    """One assistant hands the conversation to another."""

    type: Literal["hand_over"] = "hand_over"
    from_assistant: str
    from_title: str
    to_assistant: str
    to_title: str
    tool: str


class ToolCallOut(BaseModel):
    """A tool call with its arguments and its raw result."""

    type: Literal["tool_call"] = "tool_call"
    tool_call_id: str
    tool: str
    assistant: str
    assistant_title: str
    arguments: dict[str, Any]
    outcome: str | None = Field(
        description="ok, error, 'not run: <why>', or null while it waits for approval."
    )
    result: str | None = Field(description="The tool's raw answer, as the model read it.")


class ApprovalOut(BaseModel):
    """What became of an action that needed the customer's approval."""

    type: Literal["approval"] = "approval"
    tool_call_id: str
    tool: str
    title: str
    outcome: Literal["approved", "failed", "declined", "refused", "not_done"]
    reason: str | None
    lines: list[str] = Field(description="The preview the customer decided on.")
    amount: str | None = Field(description="Its line stating the amount.")
    amount_kind: AmountKind | None
    amount_cents: int | None
    moved: bool = Field(description="The amount was charged or refunded (the action ran).")
    result: str | None
    recovered: bool
    checked_by: str | None = Field(
        default=None,
        description="The member of staff whose check decided it with the customer (a second "
        "approval), by the name the customer is told; null when none was needed.",
    )
    text: str = Field(description="The sentence the customer's history shows for it.")


StepOut = Annotated[
    CustomerStep | ReplyStep | NoticeStep | HandOverOut | ToolCallOut | ApprovalOut,
    Field(discriminator="type"),
]


class MoneyOut(BaseModel):
    """The money the conversation's actions moved."""

    charged: str
    refunded: str
    charged_cents: int
    refunded_cents: int


class ErrorOut(BaseModel):
    """Something that went wrong: a tool that answered with an error, or a failed turn.

    Failed turns (a model server down, a cancelled turn) are those served by this
    worker since it started; ``detail`` is what the operator needs.
    """

    source: Literal["tool", "turn"]
    kind: str
    text: str
    detail: str | None
    at: datetime | None


class SupervisedDetail(BaseModel):
    """One conversation as the people behind the desk see it."""

    conversation: SupervisedConversation
    assistants: list[AssistantOut]
    steps: list[StepOut]
    pending: list[PendingActionOut] = Field(
        description="Actions waiting for the customer's decision, as the customer sees them."
    )
    money: MoneyOut
    errors: list[ErrorOut]


class AuditEntryOut(BaseModel):
    """One look: who, at what, when."""

    at: datetime
    supervisor: str
    looked_at: Looked
    conversation_id: str
    passenger_id: str


class AuditList(BaseModel):
    """The audit log, newest first."""

    entries: list[AuditEntryOut]


# --- building it ----------------------------------------------------------------------------


def assistant_title(crew: Crew, name: str) -> str:
    """Return how a supervisor reads ``name``: "flights specialist", "primary assistant"."""
    member = crew.member(name)
    return member.specialist.title if member is not None else PRIMARY_TITLE


def who_answers(handoff: Handoff | None, title: str) -> tuple[AnswersBy, str, str]:
    """Return who answers a conversation, the person holding it, and that in words.

    ``handoff`` is its open hand-off to a person, if any; ``title`` names the assistant
    that answers otherwise.
    """
    if handoff is None:
        return "assistant", "", f"With the assistant ({title})"
    if handoff.status == "held":
        return "person", handoff.agent, f"Held by {handoff.agent}"
    return "waiting", "", "Waiting for a person"


def version_of(
    record: SessionRecord,
    summary: Summary,
    handoff: Handoff | None,
    busy: bool,
    failures: int,
) -> str:
    """Return a conversation's version: a short digest of what its view shows.

    It is built from what the list reads anyway (the registry's ``record``, the
    protocol's ``summary``, the open ``handoff``, ``busy``) and the number of ``failures``
    this worker saw, so it costs no query of its own.
    """
    held = (
        (handoff.status, handoff.agent_login, handoff.agent, handoff.messages)
        if handoff is not None
        else None
    )
    facts = (
        record.updated_at.isoformat(),
        record.title,
        summary.assistant,
        summary.messages,
        summary.turns,
        summary.pending_actions,
        summary.checks_waiting,
        held,
        busy,
        failures,
    )
    return hashlib.blake2b(repr(facts).encode(), digest_size=8).hexdigest()


def step_out(step: Step, crew: Crew) -> StepOut:
    """Return one step of the timeline as the API shows it."""
    if isinstance(step, CustomerLine):
        return CustomerStep(text=step.text)
    if isinstance(step, AssistantLine):
        return ReplyStep(
            assistant=step.assistant,
            assistant_title=assistant_title(crew, step.assistant),
            text=step.text,
            person=step.person,
        )
    if isinstance(step, Notice):
        return NoticeStep(text=step.text)
    if isinstance(step, HandOverStep):
        return HandOverOut(
            from_assistant=step.from_assistant,
            from_title=assistant_title(crew, step.from_assistant),
            to_assistant=step.to_assistant,
            to_title=assistant_title(crew, step.to_assistant),
            tool=step.tool,
        )
    if isinstance(step, ToolCallDetail):
        return ToolCallOut(
            tool_call_id=step.tool_call_id,
            tool=step.tool,
            assistant=step.assistant,
            assistant_title=assistant_title(crew, step.assistant),
            arguments=json.loads(json.dumps(dict(step.arguments), default=str)),
            outcome=step.outcome,
            result=step.answer,
        )
    record = step.record
    return ApprovalOut(
        tool_call_id=record.tool_call_id,
        tool=record.tool,
        title=record.title,
        outcome=record.outcome,
        reason=record.reason,
        lines=list(record.lines),
        amount=record.amount,
        amount_kind=step.amount.kind if step.amount is not None else None,
        amount_cents=step.amount.cents if step.amount is not None else None,
        moved=step.moved,
        result=record.result,
        recovered=record.recovered,
        checked_by=record.checked_by,
        text=record.line,
    )


def money_of(steps: list[Step]) -> MoneyOut:
    """Return the money the actions that ran moved, charged and refunded."""
    moved = [s.amount for s in steps if isinstance(s, ActionStep) and s.moved and s.amount]
    charged = sum(a.cents for a in moved if a.kind == "pay")
    refunded = sum(a.cents for a in moved if a.kind == "refund")
    return MoneyOut(
        charged=fmt_money(charged),
        refunded=fmt_money(refunded),
        charged_cents=charged,
        refunded_cents=refunded,
    )


class Desk:
    """What a supervisor reads of the service, each look recorded in its audit log."""

    def __init__(self, service: ConversationService) -> None:
        """Read the conversations of ``service`` and record looks in ``service.audit``."""
        self.service = service
        self.crew = service.conversations.describer.crew

    def _look(self, who: str, looked_at: Looked, record: SessionRecord | None = None) -> None:
        self.service.audit.record(
            who,
            looked_at,
            datetime.now(UTC),
            conversation_id=record.thread_id if record is not None else "",
            passenger_id=record.passenger_id if record is not None else "",
        )

    def summary(self, record: SessionRecord) -> SupervisedConversation:
        """Return one conversation as the supervisor's list shows it."""
        service = self.service
        conversation = service.conversations.get(Thread(record.thread_id, record.passenger_id))
        summary = conversation.summary()
        title = assistant_title(self.crew, summary.assistant)
        handoff = conversation.handoff()
        answers, person, answers_text = who_answers(handoff, title)
        busy = service.runner.busy(record.thread_id) or conversation.busy()
        failures = len(service.failures.of(record.thread_id))
        return SupervisedConversation(
            conversation_id=record.thread_id,
            passenger_id=record.passenger_id,
            title=record.title,
            created_at=record.created_at,
            updated_at=record.updated_at,
            assistant=summary.assistant,
            assistant_title=title,
            answers=answers,
            person=person,
            answers_text=answers_text,
            pending_actions=summary.pending_actions,
            turns=summary.turns,
            busy=busy,
            messages=summary.messages,
            version=version_of(record, summary, handoff, busy, failures),
        )

    def conversations(
        self,
        who: str,
        passenger_id: str | None = None,
        limit: int = LIST_LIMIT,
        *,
        agent: bool = False,
    ) -> list[SupervisedConversation]:
        """Return every passenger's conversations (or one passenger's), most recent first.

        An ``agent``'s list holds only those an agent may read: waiting for a person, or
        held by them (``who``, their login).
        """
        self._look(who, "conversations")
        if agent:
            records = self._at_the_desk(who, passenger_id)[:limit]
        else:
            records = self.service.sessions.list(passenger_id, limit)
        return [self.summary(r) for r in records]

    def _at_the_desk(self, login: str, passenger_id: str | None) -> list[SessionRecord]:
        """Return the conversations waiting for a person or held by ``login``, latest first."""
        desk = self.service.conversations.desk
        ids = dict.fromkeys(h.thread_id for h in [*desk.queue(), *desk.held_by(login)])
        found = [self.service.sessions.get(i) for i in ids]
        return sorted(
            (r for r in found if r is not None and passenger_id in (None, r.passenger_id)),
            key=lambda r: r.updated_at,
            reverse=True,
        )

    def detail(self, who: str, conversation_id: str) -> SupervisedDetail:
        """Return one conversation step by step.

        Raises:
            HTTPException: 404, no such conversation.
        """
        record = self.service.sessions.get(conversation_id)
        if record is None:
            raise HTTPException(404, f"No conversation {conversation_id}.")
        self._look(who, "conversation", record)
        conversation = self.service.conversations.get(Thread(record.thread_id, record.passenger_id))
        steps = conversation.timeline()
        head = self.summary(record)
        names = [PRIMARY, *(m.name for m in self.crew.members)]
        errors = [
            ErrorOut(
                source="tool",
                kind="tool",
                text=f"{s.tool} answered with an error.",
                detail=s.answer,
                at=None,
            )
            for s in steps
            if isinstance(s, ToolCallDetail) and s.outcome == "error"
        ]
        errors += [
            ErrorOut(source="turn", kind=f.kind, text=f.text, detail=f.detail, at=f.at)
            for f in self.service.failures.of(record.thread_id)
        ]
        return SupervisedDetail(
            conversation=head,
            assistants=[
                AssistantOut(
                    name=n, title=assistant_title(self.crew, n), active=n == head.assistant
                )
                for n in names
            ],
            steps=[step_out(s, self.crew) for s in steps],
            pending=[approval_out(a) for a in conversation.approvals()],
            money=money_of(steps),
            errors=errors,
        )


def audit_out(entry: AuditEntry) -> AuditEntryOut:
    """Return one audit entry as the API shows it."""
    return AuditEntryOut(
        at=entry.at,
        supervisor=entry.supervisor,
        looked_at=entry.looked_at,
        conversation_id=entry.conversation_id,
        passenger_id=entry.passenger_id,
    )


# --- the routes -----------------------------------------------------------------------------


async def _desk(request: Request) -> Desk:
    return Desk(cast(ConversationService, request.app.state.service))


Supervisor = Annotated[Claims, Depends(supervisor)]
StaffClaims = Annotated[Claims, Depends(staff)]
DeskDep = Annotated[Desk, Depends(_desk)]

_PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No token, or one that is not valid or expired."},
    403: {
        "model": Problem,
        "description": "Not a staff token; or an agent's, which does not read the audit "
        "log, nor a conversation neither waiting for a person nor held by the agent.",
    },
}


class DayOut(BaseModel):
    """One day's figures (UTC), as docs/operations.md defines them."""

    day: date
    conversations: int = Field(description="Conversations started that day.")
    messages: int = Field(description="What the customers wrote in them.")
    resolved_by_assistant: int = Field(
        description="Handled by the assistant alone: no person, no staff check, nothing "
        "pending, and the customer did not come back within a day."
    )
    handed_to_person: int = Field(description="Requests for a person made that day.")
    wait_minutes_median: float | None = Field(description="Until a person took them.")
    wait_minutes_p90: float | None
    actions_approved: int
    actions_failed: int
    actions_declined: int
    actions_refused: int
    actions_not_done: int
    charged_cents: int
    refunded_cents: int
    checks_approved: int
    checks_refused: int
    checks_withdrawn: int
    checks_waiting: int
    model_errors: int = Field(description="Turns the model server failed or timed out.")
    tokens_in: int
    tokens_out: int
    cost: float | None = Field(description="Always null here: prices are the report's.")


class ReportOut(BaseModel):
    """The figures of each day asked for, oldest first."""

    days: list[DayOut]


def router() -> APIRouter:
    """Return the supervisor's routes: all ``GET``, all audited but the audit log itself."""
    routes = APIRouter(prefix=PREFIX, tags=["supervisor"], responses=_PROBLEMS)

    @routes.get("/me", summary="Who the staff token names (a supervisor's or an agent's)")
    def me(claims: StaffClaims) -> SupervisorMe:
        role: Literal["supervisor", "agent"] = (
            "supervisor" if claims.role == "supervisor" else "agent"
        )
        return SupervisorMe(
            name=claims.shown_name, login=claims.login, role=role, expires_at=claims.expires_at
        )

    @routes.get(
        "/conversations",
        summary="List every passenger's conversations (recorded in the audit log)",
        description="An agent's token lists only the conversations waiting for a person "
        "and those the agent holds.",
    )
    def conversations(
        desk: DeskDep,
        claims: StaffClaims,
        passenger_id: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
        limit: Annotated[int, Query(ge=1, le=LIST_LIMIT)] = LIST_LIMIT,
    ) -> SupervisedList:
        agent = claims.role != "supervisor"
        listed = desk.conversations(claims.login, passenger_id, limit, agent=agent)
        return SupervisedList(conversations=listed)

    @routes.get(
        "/conversations/{conversation_id}",
        summary="Read one conversation step by step (recorded in the audit log)",
        description="The active specialist, the hand-overs, every tool call with its "
        "arguments and raw result, every approval with what the customer was shown, the "
        "money moved, the actions waiting, and the errors. An agent's token reads one that "
        "waits for a person or that the agent holds.",
        responses={404: {"model": Problem, "description": "No such conversation."}},
    )
    def conversation(
        desk: DeskDep,
        claims: StaffClaims,
        conversation_id: Annotated[str, PathParam(pattern=CONVERSATION_ID_PATTERN, max_length=100)],
    ) -> SupervisedDetail:
        agent_may_read(claims, desk.service.conversations.desk.current(conversation_id))
        return desk.detail(claims.login, conversation_id)

    @routes.get("/audit", summary="Read the audit log: who looked at what, when")
    def audit(
        desk: DeskDep,
        claims: Supervisor,
        supervisor_name: Annotated[
            str | None, Query(alias="supervisor", max_length=200, pattern=NO_NUL)
        ] = None,
        conversation_id: Annotated[str | None, Query(max_length=100, pattern=NO_NUL)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> AuditList:
        entries = desk.service.audit.entries(
            # Recorded by canonical login: any spelling of one finds its entries.
            supervisor=canonical_login(supervisor_name) if supervisor_name is not None else None,
            conversation_id=conversation_id,
            limit=limit,
        )
        return AuditList(entries=[audit_out(e) for e in entries])

    @routes.get(
        "/report",
        summary="The day's figures: conversations, hand-offs and waits, actions, checks",
        description="Computed from what the store keeps, as `travel-assistant report` "
        "prints them (docs/operations.md defines each). Days are UTC, both ends included; "
        "by default the last 7 days, at most the 366 up to `until`; an end before the "
        "start gives no day.",
    )
    def report(
        desk: DeskDep,
        claims: Supervisor,
        since: Annotated[date | None, Query()] = None,
        until: Annotated[date | None, Query()] = None,
    ) -> ReportOut:
        from conversations.day_figures import day_figures

        last = until or datetime.now(UTC).date()
        first = max(since or last - timedelta(days=6), last - timedelta(days=365))
        days = day_figures(desk.service.conversations, first, last)
        return ReportOut(days=[DayOut.model_validate(d.as_row()) for d in days])

    return routes
