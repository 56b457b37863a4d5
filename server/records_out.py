"""The conversation protocol's records as the API's models, field by field.

The protocol says what happened in a conversation and how the customer is told
(``conversations.records``, a second approval's ``conversations.desk.Check``, a
conversation's ``Summary``); this turns it into the models of ``server.schemas``: a
conversation in the list, a pending action with its preview and its check, an item of
the history, the events a live turn streams, and what the customer is told of a failure
(never the operator's detail). The service and the runner of its turns take them from
here, and so do the supervisor's view and the desk wherever they show what the customer
sees (a pending action), so it reads the same everywhere. The people behind the desk
also read records in views of their own (the supervisor's steps, the staff's checks):
those are built next to their models, in ``server.supervisor`` and ``server.handoff``.
The words are the protocol's (``conversations.words``, the records' own text).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal, cast

from conversations import words
from conversations.records import (
    ActionRecord,
    Activity,
    Approval,
    AssistantLine,
    CustomerLine,
    HandOver,
    Notice,
    Outcome,
    Record,
    ReplyPiece,
    TurnEnd,
    TurnFailure,
)
from server.markdown import reply_html
from server.schemas import (
    ActionItem,
    AssistantItem,
    CheckOut,
    ConversationOut,
    CustomerItem,
    DoneEvent,
    ErrorEvent,
    HistoryItem,
    NoticeItem,
    PendingActionOut,
    PendingEvent,
    PreviewOut,
    RecordEvent,
    StatusEvent,
    StreamEvent,
)
from server.schemas import MessageEvent as MessageOut
from server.schemas import TokenEvent as TokenOut

if TYPE_CHECKING:
    from conversations.desk import Check
    from conversations.protocol import Summary
    from conversations.sessions import SessionRecord

log = logging.getLogger(__name__)

UNEXPECTED_ERROR = words.SERVICE_FAILED


def conversation_out(record: SessionRecord, summary: Summary, busy: bool) -> ConversationOut:
    """Return the API's view of one conversation: its record, its ``summary``, ``busy``."""
    return ConversationOut(
        conversation_id=record.thread_id,
        title=record.title,
        created_at=record.created_at,
        updated_at=record.updated_at,
        assistant=summary.assistant,
        assistant_label=summary.label,
        pending_actions=summary.pending_actions,
        checks_waiting=summary.checks_waiting,
        busy=busy,
        checked=summary.checked,
        messages=summary.messages,
    )


def approval_out(approval: Approval) -> PendingActionOut:
    """Return a pending action as the API shows it: the terminal's lines, the amount apart."""
    return PendingActionOut(
        tool_call_id=approval.tool_call_id,
        tool=approval.tool,
        assistant=approval.assistant,
        assistant_label=approval.label,
        preview=PreviewOut(
            title=approval.title,
            lines=list(approval.lines),
            amount=approval.amount,
            amount_kind=approval.amount_kind,
            error=approval.refusal,
        ),
        check=check_out(approval.check) if approval.check is not None else None,
        proposed_by=approval.proposed_by,
    )


def check_out(check: Check) -> CheckOut:
    """Return a second approval's check as the customer's API shows it."""
    status = cast('Literal["waiting", "approved", "refused"]', check.status)
    if check.decided:
        text = words.check_decided(check.staff, check.title, check.approved, check.reason)
    else:
        text = words.CHECK_WAITING
    return CheckOut(
        check_id=check.id, status=status, staff=check.staff, reason=check.reason, text=text
    )


def history_item(record: Record) -> HistoryItem:
    """Return one record of the history as the API's item."""
    if isinstance(record, CustomerLine):
        return CustomerItem(id=record.id, text=record.text)
    if isinstance(record, AssistantLine):
        return AssistantItem(
            id=record.id,
            assistant=record.assistant,
            label=record.label,
            text=record.text,
            html=reply_html(record.text),
            person=record.person,
        )
    if isinstance(record, ActionRecord):
        return ActionItem(
            tool_call_id=record.tool_call_id,
            tool=record.tool,
            title=record.title,
            outcome=record.outcome,
            reason=record.reason,
            lines=list(record.lines),
            amount=record.amount,
            result=record.result,
            text=record.line,
        )
    return NoticeItem(text=record.text)


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def stream_events(outcome: Outcome) -> Iterator[StreamEvent]:
    """Return what a live turn's ``outcome`` sends to the client (often nothing)."""
    if isinstance(outcome, ReplyPiece):
        yield TokenOut(
            text=outcome.text,
            assistant=outcome.assistant,
            label=outcome.label,
            message_id=outcome.message_id,
        )
    elif isinstance(outcome, AssistantLine):
        yield MessageOut(
            id=outcome.id,
            assistant=outcome.assistant,
            label=outcome.label,
            text=outcome.text,
            html=reply_html(outcome.text),
        )
    elif isinstance(outcome, Activity):
        yield StatusEvent(text=f"{_capitalized(outcome.text)}…", tool=outcome.tool)
    elif isinstance(outcome, HandOver) and outcome.text:
        yield StatusEvent(text=f"{_capitalized(outcome.text)}.", tool=outcome.tool)
    elif isinstance(outcome, ActionRecord | Notice):
        # The status line says it at once; the record is what the history shows for it.
        status = outcome.status if isinstance(outcome, ActionRecord) else outcome.text
        yield StatusEvent(text=status, tool=getattr(outcome, "tool", None))
        item = history_item(outcome)
        assert isinstance(item, ActionItem | NoticeItem)
        yield RecordEvent(item=item)
    elif isinstance(outcome, TurnEnd):
        if outcome.approvals:
            yield PendingEvent(actions=[approval_out(a) for a in outcome.approvals])
        yield DoneEvent(
            pending_actions=len(outcome.approvals),
            assistant=outcome.assistant,
            label=outcome.label,
        )
    elif isinstance(outcome, TurnFailure):
        yield failure_event(outcome)


def failure_event(failure: TurnFailure, stopped: bool = False) -> ErrorEvent:
    """Return what the customer is told of ``failure``: never the operator's detail.

    A model-server failure is logged with a reference the customer can quote; a cancel
    the customer asked for (Stop, ``stopped``) says so.
    """
    if failure.kind == "cancelled" and stopped:
        return ErrorEvent(detail=words.CANCELLED["customer"], kind="stopped")
    if failure.kind in ("model", "time_limit"):  # its text is written for an operator
        reference = secrets.token_hex(4)
        log.warning("The model server failed [reference %s]: %s", reference, failure.detail)
        return ErrorEvent(
            detail=words.with_reference(words.MODEL_UNAVAILABLE, reference),
            kind=failure.kind,
            reference=reference,
        )
    return ErrorEvent(detail=failure.text, kind=failure.kind)


def unexpected_event(reference: str) -> ErrorEvent:
    """Return what the customer is told of a bug: nothing of it, a ``reference`` to quote."""
    return ErrorEvent(
        detail=words.with_reference(UNEXPECTED_ERROR, reference),
        kind="unexpected",
        reference=reference,
    )
