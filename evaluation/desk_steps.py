"""The people of a trial: what the customer and the staff at the desk do between turns.

A scenario's turns script, beside the customer's messages, what people do once a message
was answered (``desk``, ``evaluation.scenarios.DeskStep``): the customer asks for a
person or withdraws the request; a member of staff takes the conversation, writes,
proposes an action, decides a check, hands it back. Each step runs through the
conversation protocol's own operations, as ``travel-assistant desk``, the web chat and
the service run them, and is recorded in the desk's audit log as the desk records it.
What the desk refuses is kept as the step's refusal: the judge compares it with what
the scenario expects (``refused``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from conversations.audit import AuditLog, Looked, record_action
from conversations.desk import DeskError
from conversations.desk_rows import login_of
from conversations.turns import DecisionsError, TurnRefusedError
from evaluation.judge import DeskStepResult, Transcript
from evaluation.scenarios import DeskStep, StaffCheck

if TYPE_CHECKING:
    from conversations.protocol import Conversation
    from conversations.records import Outcome


def run_step(
    conversation: Conversation,
    audit: AuditLog,
    step: DeskStep,
    turn: int,
    resolve: Callable[[Any], Any],
    transcript: Transcript,
    finish: Callable[[Iterable[Outcome]], None],
) -> DeskStepResult:
    """Do ``step`` of turn ``turn`` (from 0) in ``conversation``; return what became of it.

    ``resolve`` turns the placeholders of its texts and arguments into the trial's ids and
    dates; ``finish`` plays the outcomes of the turn a staff decision applies (the last
    one runs the checked actions at once, as the desk does). A staff decision is kept in
    ``transcript`` (``staff_decisions``), as a scripted staff answer is; what the desk
    or the protocol refuses is the result's ``refusal``.
    """
    text = str(resolve(step.text))
    try:
        _do(conversation, audit, step, text, resolve, transcript, finish)
    except DeskError as refusal:
        return DeskStepResult(turn, step, str(refusal), text)
    except TurnRefusedError as refusal:
        return DeskStepResult(turn, step, refusal.failure.text, text)
    except DecisionsError as refusal:
        return DeskStepResult(turn, step, refusal.text, text)
    return DeskStepResult(turn, step, None, text)


def _do(
    conversation: Conversation,
    audit: AuditLog,
    step: DeskStep,
    text: str,
    resolve: Callable[[Any], Any],
    transcript: Transcript,
    finish: Callable[[Iterable[Outcome]], None],
) -> None:
    """Run ``step`` through the protocol, and record a staff action as the desk does.

    Raises:
        DeskError: The desk refuses it (not waiting, held by someone else, four eyes...).
        TurnRefusedError: A turn of the conversation runs.
        DecisionsError: The decided checks have nothing left to apply.
    """
    what: Looked
    if step.action == "ask_for_person":
        conversation.ask_for_person(text)
        return
    if step.action == "withdraw_request":
        conversation.withdraw_person_request()
        return
    if step.action == "take":
        conversation.take(step.by)
        what = "took"
    elif step.action == "write":
        conversation.person_says(step.by, text)
        return  # the desk records what a person does to a conversation, not each message
    elif step.action == "hand_back":
        conversation.hand_back(step.by, text, close=step.close)
        what = "closed" if step.close else "handed back"
    elif step.action == "propose":
        conversation.person_proposes(step.by, step.tool, resolve(dict(step.args)))
        what = "proposed"
    else:
        approved = step.action == "approve"
        waiting = [c for c in conversation.checks() if not c.decided]
        if not waiting:
            raise DeskError("No check waits in this conversation.")
        check = waiting[0]
        conversation.decide_check(step.by, check.id, approved=approved, reason=text)
        transcript.staff_decisions[check.tool_call_id] = StaffCheck(approved, text)
        _record(audit, step.by, "approved" if approved else "refused", conversation)
        if conversation.checks_decided():  # the last decision runs what waited for it
            finish(conversation.apply_checked())
        return
    _record(audit, step.by, what, conversation)


def _record(audit: AuditLog, staff: str, what: Looked, conversation: Conversation) -> None:
    """Record in the audit log what ``staff`` did to ``conversation``, as the desk does."""
    thread = conversation.thread
    record_action(audit, login_of(staff), what, thread.thread_id, thread.passenger_id)


def record_staff_check(
    audit: AuditLog, staff: str, approved: bool, conversation: Conversation
) -> None:
    """Record a scripted staff answer (``staff_checks``) in the audit log, as the desk does."""
    _record(audit, staff, "approved" if approved else "refused", conversation)
