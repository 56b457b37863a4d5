"""Approval of sensitive actions, in one place.

Every sensitive-tools node sits in ``interrupt_before``: the run stops before it. Every
client goes on the same way, LangGraph's: ``Command(resume=...)`` with an answer per
pending call. The node ``interrupt``s with a request per call in Agent Inbox's shape
(the preview: title, lines, amount) and runs what the answers approve
(``assistants.inbox``); a resume given right after the stop is that interrupt's answer.
The terminal and the web answer through ``Decision.as_resume``, which adds the record's
facts (what the customer was shown, who checked it) to the same shape. The node is
fail-closed: only an explicit ``accept`` runs a call; ``graph.invoke(None, config)``
runs nothing and returns at once with the requests, which say how to answer. A run
without a passenger id does nothing at all: the node raises, so the calls stay pending.

Calls that never ran (declined, no decision, unknown tool, a second hand-over, a batch
left behind by a new message, the step limit) are answered by ``not_run_answer``, whose
artifact carries the structured facts (``AnswerFacts``) that callers read instead of
matching text: the terminal, the evaluation and any server ask ``facts_of(message)``.
The artifact stays in the saved state and is never sent to the model.

A write whose transaction committed is done, whatever the saved conversation says: a
process killed after the commit and before the checkpoint leaves the call unanswered,
waiting for approval again. ``recovered_answers`` finds such calls from their stored
records (``db.writes``: same conversation, call id and arguments), and every path that
answers a pending sensitive call answers them with the stored result and the fact
``recovered`` (``recovered_answer``), never with "declined" or "not run": the
sensitive-tools node below, whatever the decision it is given, and ``TravelAssistant``,
which does not offer them for approval again.

``describe_action`` tells the customer what a pending call would do, computed by the
same quote the write applies (each tools module declares its previews). The amount to
pay or refund travels as numbers beside the words (``Amount``): on the preview, on the
decision that the caller builds from it, and on the answer's facts.

The preview, the amount and the decision themselves (``ActionPreview``, ``Amount``,
``Decision``) are defined in ``assistants.decisions``, beneath this module and
``assistants.inbox`` alike, and handed on from here to the callers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from langchain_core.messages import AnyMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import interrupt
from pydantic import BaseModel, ValidationError

from assistants.decisions import ActionPreview as ActionPreview
from assistants.decisions import Amount as Amount
from assistants.decisions import Decision as Decision
from assistants.decisions import Refusal, amount_data, text_or_none
from assistants.inbox import (
    NO_PASSENGER_TO_ACT,
    ApprovalResponseError,
    NativeDecision,
    human_interrupt,
    read_responses,
    unreadable,
)
from assistants.prompts import (
    CHECK_REFUSED_MESSAGE,
    DENIED_MESSAGE,
    NO_DECISION_MESSAGE,
    REFUSED_MESSAGE,
)
from assistants.routing import last_tool_batch
from assistants.specialists import Member
from assistants.state import ConfigNode, State
from db.engine import Database
from db.errors import (
    InvalidInputError,
    MissingPassengerError,
    NotFoundError,
    OwnershipError,
    RuleViolationError,
    TravelError,
    UnavailableError,
)
from db.writes import find_stored_result
from tools.common import (
    Preview,
    argument_line,
    passenger_id_from,
    run_calls,
    thread_id_from,
    tool_node,
)

NotRun = Literal[
    "declined",
    "no_decision",
    "unknown_tool",
    "one_specialist_at_a_time",
    "superseded",
    "handed_back",
    "handed_back_checked",
    "asked_for_person",
    "withdrawn",
    "edited",
    "step_limit",
    "cancelled",
    "refused",
]
HandOver = Literal["enter", "leave"]


@dataclass(frozen=True)
class PendingAction:
    """A sensitive tool call waiting for the customer's decision.

    Attributes:
        tool_call_id: The call's id, the key of its decision.
        name: The tool called.
        args: The arguments, as the model gave them.
        assistant: The specialist that made the call.
    """

    tool_call_id: str
    name: str
    args: dict[str, Any]
    assistant: str


@dataclass(frozen=True)
class AnswerFacts:
    """What a tool answer says about its call, for callers (never text-matched).

    Attributes:
        ran: The tool ran (its answer may still be an error the tool raised).
        not_run: Why the call did not run, when it did not.
        reason: The customer's reason, for a declined call.
        hand_over: ``"enter"`` or ``"leave"`` for the answer to a routing call.
        specialist: The specialist entered, left, or busy instead.
        approved: The customer approved the call (a sensitive call that ran).
        shown: The preview lines the customer decided on, for an approved or declined
            call.
        amount: The amount those lines stated (their last line), when the caller that
            asked recorded it (``Decision.amount``).
        recovered: The call's write had committed before an interruption (the process
            died before the conversation was saved); the answer is its stored result,
            and the customer was not asked again.
        checked_by: The member of staff whose check (a second approval) decided the
            call with the customer, when one did.
    """

    ran: bool
    not_run: NotRun | None = None
    reason: str | None = None
    hand_over: HandOver | None = None
    specialist: str | None = None
    approved: bool = False
    shown: tuple[str, ...] = ()
    amount: Amount | None = None
    recovered: bool = False
    checked_by: str | None = None

    @property
    def declined(self) -> bool:
        """Tell whether the customer declined the call."""
        return self.not_run == "declined"

    @property
    def amount_line(self) -> str | None:
        """Return the shown line that states ``amount`` (the last), if one was recorded."""
        return self.shown[-1] if self.amount is not None and self.shown else None


def facts_of(message: ToolMessage) -> AnswerFacts:
    """Read the structured facts the graph stamped on a tool answer."""
    artifact = message.artifact if isinstance(message.artifact, Mapping) else {}
    not_run = artifact.get("not_run")
    shown = artifact.get("shown")
    return AnswerFacts(
        ran=not_run is None and "hand_over" not in artifact,
        not_run=cast(NotRun, not_run) if not_run is not None else None,
        reason=artifact.get("reason"),
        hand_over=artifact.get("hand_over"),
        specialist=artifact.get("specialist"),
        approved=artifact.get("approved") is True,
        shown=tuple(str(line) for line in shown) if isinstance(shown, list | tuple) else (),
        amount=Amount.from_data(artifact.get("amount")),
        recovered=artifact.get("recovered") is True,
        checked_by=text_or_none(artifact.get("checked_by")),
    )


def was_executed(message: ToolMessage) -> bool:
    """Tell whether a tool answer comes from running the tool."""
    return facts_of(message).ran


def not_run_answer(call: ToolCall, content: str, why: NotRun, **facts: Any) -> ToolMessage:
    """Answer a call that the graph did not execute; ``facts`` join ``why`` in the artifact."""
    return ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
        artifact={"not_run": why, **facts},
    )


def hand_over_answer(
    call: ToolCall, content: str, hand_over: HandOver, specialist: str
) -> ToolMessage:
    """Answer a routing call that entered or left ``specialist``."""
    return ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        artifact={"hand_over": hand_over, "specialist": specialist},
    )


def denial_answer(
    call: ToolCall,
    reason: str | None,
    shown: Sequence[str] = (),
    amount: Amount | None = None,
    checked_by: str | None = None,
) -> ToolMessage:
    """Return the answer to a sensitive call the customer declined.

    ``checked_by``: the customer said yes, and that member of staff said no at the
    second approval; ``reason`` is theirs.
    """
    reason = (reason or "").strip()
    reason_text = f"Their reason: {reason!r}. " if reason else "They gave no reason. "
    text = (
        CHECK_REFUSED_MESSAGE.format(staff=checked_by, reason_text=reason_text)
        if checked_by
        else DENIED_MESSAGE.format(reason_text=reason_text)
    )
    facts: dict[str, Any] = {"checked_by": checked_by} if checked_by else {}
    return not_run_answer(
        call,
        text,
        "declined",
        reason=reason or None,
        shown=list(shown),
        amount=amount_data(amount),
        **facts,
    )


def _approved_answer(answer: ToolMessage, decision: Decision | None) -> ToolMessage:
    """Stamp the answer of an approved call with the approval and what was shown."""
    artifact = dict(answer.artifact) if isinstance(answer.artifact, Mapping) else {}
    shown = decision.shown if decision is not None else ()
    amount = decision.amount if decision is not None else None
    artifact.update(approved=True, shown=list(shown), amount=amount_data(amount))
    if decision is not None and decision.checked_by:
        artifact["checked_by"] = decision.checked_by
    return answer.model_copy(update={"artifact": artifact})


def recovered_answer(
    call: ToolCall, result: Mapping[str, Any], shown: Sequence[str] = ()
) -> ToolMessage:
    """Answer a call whose write committed before an interruption with its stored result.

    The content is what the tool answered when it ran (its JSON result), so the model
    reads the same answer either way; the artifact says it was approved and recovered.
    """
    return ToolMessage(
        content=json.dumps(dict(result), ensure_ascii=False),
        tool_call_id=call["id"],
        name=call["name"],
        artifact={"approved": True, "recovered": True, "shown": list(shown)},
    )


def _tool_arguments(tool: BaseTool, args: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return a call's arguments as the tool hands them to its write, ``None`` if invalid.

    The tool validates the model's arguments and passes every one of them, defaults
    included, to ``write_once``, so the stored digest is of that whole, validated set.
    """
    schema = tool.tool_call_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return dict(args)
    try:
        return schema.model_validate(dict(args)).model_dump()
    except ValidationError:
        return None  # the tool would have refused it: nothing can have been written


def recovered_answers(
    db: Database,
    config: RunnableConfig,
    tools: Mapping[str, BaseTool],
    messages: Sequence[AnyMessage],
) -> dict[str, ToolMessage]:
    """Return answers for the pending calls whose write already committed, by call id.

    These are the unanswered calls of the latest batch, to one of ``tools``, whose
    record is stored for this conversation with the same id, tool, passenger and
    arguments: the process ran them and was killed before the conversation was saved.
    An id that an earlier answer in the conversation already used is a reused id, not
    a lost answer, and is left alone.

    Args:
        db: The travel database, where the records are.
        config: The run's config: its conversation and passenger.
        tools: The sensitive tools, by name.
        messages: The saved conversation.
    """
    _, pending = last_tool_batch(messages)
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    calls = [c for c in pending if c["name"] in tools and c["id"] not in answered]
    if not calls:
        return {}
    try:
        passenger_id = passenger_id_from(config)
    except TravelError:
        return {}  # without a passenger no write can have run
    thread_id = thread_id_from(config)
    answers: dict[str, ToolMessage] = {}
    for call in calls:
        args = _tool_arguments(tools[call["name"]], call["args"])
        if args is None:
            continue
        result = find_stored_result(
            db,
            thread_id=thread_id,
            tool_call_id=call["id"],
            tool_name=call["name"],
            passenger_id=passenger_id,
            args=args,
        )
        if result is not None:
            answers[str(call["id"])] = recovered_answer(call, result)
    return answers


def make_sensitive_tools_node(member: Member, db: Database | None = None) -> ConfigNode:
    """Return the node that runs ``member``'s approved sensitive calls and answers the rest.

    Only a decision with ``approved`` exactly ``True`` runs a call, one call at a time in
    the model's order (writes never race each other). A declined call is answered with
    the customer's reason; a call without a decision is answered as not run. With the
    travel database ``db``, a call whose write already committed (a crash before the
    conversation was saved) is answered with its stored result, whatever the decision.
    """
    node = tool_node(member.tools.sensitive)
    groups = member.groups
    tools = {t.name: t for t in member.tools.sensitive}

    previews = member.tools.previews

    def describe(passenger_id: str, name: str, args: Mapping[str, Any]) -> ActionPreview:
        if db is None:
            return ActionPreview(tool_name=name, title=f"Run {name}", lines=_raw_lines(args))
        return describe_action(db, passenger_id, name, args, previews)

    def ask(
        config: RunnableConfig, passenger_id: str, calls: list[ToolCall], done: Mapping[str, Any]
    ) -> dict[str, NativeDecision]:
        """Stop the run with a request per call; read the ``Command(resume=...)`` answers.

        Answers for calls already ``done`` (recovered) are not asked for and are dropped.
        """
        thread_id = thread_id_from(config)
        requests = []
        for call in calls:
            handed = HANDED.take(thread_id, str(call["id"])) if thread_id else None
            preview = handed or describe(passenger_id, call["name"], call["args"])
            requests.append(human_interrupt(call, preview))
        resume = interrupt(requests)
        while True:
            if isinstance(resume, Mapping) and "type" not in resume:
                resume = {k: v for k, v in resume.items() if str(k) not in done}
            try:
                return read_responses(
                    calls, requests, resume, tools, lambda n, a: describe(passenger_id, n, a)
                )
            except ApprovalResponseError as error:  # nothing done: ask again, saying why
                resume = interrupt([unreadable(r, error) for r in requests])

    def run_sensitive_tools(state: State, config: RunnableConfig) -> dict[str, Any]:
        last, pending = last_tool_batch(state["messages"])
        try:
            passenger_id = passenger_id_from(config)
        except MissingPassengerError:
            # Nothing can be done for nobody: the run fails, and the calls wait as before.
            raise MissingPassengerError(NO_PASSENGER_TO_ACT) from None
        done = recovered_answers(db, config, tools, state["messages"]) if db is not None else {}
        calls = groups.select(pending, "sensitive_tools")
        waiting = [c for c in calls if str(c["id"]) not in done]
        decided = ask(config, passenger_id, waiting, done) if waiting else {}
        answers: list[AnyMessage] = []
        edits: dict[str, dict[str, Any]] = {}
        for call in calls:
            given = decided.get(str(call["id"]))
            decision = given.decision if given is not None else None
            if given is not None and given.edited_args is not None:
                edits[str(call["id"])] = given.edited_args
                call = ToolCall(name=call["name"], args=given.edited_args, id=call["id"])
            recovered = done.get(str(call["id"]))
            if recovered is not None:
                answers.append(_approved_answer(recovered, decision))
            elif decision is None:
                answers.append(not_run_answer(call, NO_DECISION_MESSAGE, "no_decision"))
            elif decision.refused:
                answers.append(
                    not_run_answer(
                        call,
                        REFUSED_MESSAGE.format(refusal=decision.reason or "it would fail"),
                        "refused",
                        shown=list(decision.shown),
                        amount=amount_data(decision.amount),
                    )
                )
            elif decision.approved:
                answers += [_approved_answer(a, decision) for a in run_calls(node, [call], config)]
            else:
                answers.append(
                    denial_answer(
                        call, decision.reason, decision.shown, decision.amount, decision.checked_by
                    )
                )
        if edits and last is not None:  # the conversation shows the calls as they ran
            edited_calls = [
                {**c, "args": edits[str(c["id"])]} if str(c["id"]) in edits else c
                for c in last.tool_calls
            ]
            answers.insert(0, last.model_copy(update={"tool_calls": edited_calls}))
        return {"messages": answers}

    run_sensitive_tools.__name__ = member.specialist.sensitive_node
    return run_sensitive_tools


class HandedPreviews:
    """Previews worked out for a decision, handed to the node that carries it out.

    A caller works each action's preview out as the customer decides (the decision is
    made on it); the node must show its requests before it can read the answers
    (``interrupt``), so it takes that preview instead of working the same one out again
    a moment later. Each is taken once, and only within ``seconds`` of being handed.
    """

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds
        self._kept: dict[tuple[str, str], tuple[float, ActionPreview]] = {}
        self._lock = threading.Lock()

    def give(self, thread_id: str, tool_call_id: str, preview: ActionPreview) -> None:
        """Hand ``preview`` on for the call ``tool_call_id`` of ``thread_id``."""
        now = time.monotonic()
        with self._lock:
            self._kept = {k: v for k, v in self._kept.items() if now - v[0] < self.seconds}
            self._kept[(thread_id, tool_call_id)] = (now, preview)

    def take(self, thread_id: str, tool_call_id: str) -> ActionPreview | None:
        """Return the preview handed on for the call, once, if it is recent enough."""
        with self._lock:
            kept = self._kept.pop((thread_id, tool_call_id), None)
        if kept is None or time.monotonic() - kept[0] >= self.seconds:
            return None
        return kept[1]


# The process's hand-over (a call id is one call within its conversation).
HANDED = HandedPreviews()


def pending_calls(messages: Sequence[AnyMessage], sensitive: frozenset[str]) -> list[ToolCall]:
    """Return the unanswered sensitive calls of the latest batch, in the model's order."""
    _, pending = last_tool_batch(messages)
    return [c for c in pending if c["name"] in sensitive]


# Previews -----------------------------------------------------------------------------


def _raw_lines(args: Mapping[str, Any]) -> list[str]:
    return [argument_line(str(name), value) for name, value in args.items()]


def describe_action(
    db: Database,
    passenger_id: str,
    tool_name: str,
    args: Mapping[str, Any],
    previews: Mapping[str, Preview],
) -> ActionPreview:
    """Describe what a pending sensitive call would do, without doing it.

    The preview comes from the same quote the write applies, at the database clock's
    now, so the customer approves the very fee, fare difference or refund the write will
    charge (unless the data changes in between, in which case the write re-checks).

    Args:
        db: The travel database.
        passenger_id: The configured passenger.
        tool_name: The tool called.
        args: The call's arguments, as the model gave them.
        previews: Each sensitive tool's preview, by name (``Crew.previews``).

    Returns:
        The preview; ``error`` is set when the call would be refused, and then ``lines``
        lists the raw arguments and ``amount`` is ``None``. A tool without a preview gets
        a generic title and its raw arguments, and no amount.
    """
    preview = previews.get(tool_name)
    if preview is None:
        return ActionPreview(tool_name=tool_name, title=f"Run {tool_name}", lines=_raw_lines(args))
    try:
        if not passenger_id or not passenger_id.strip():
            raise MissingPassengerError("No passenger id is configured for this conversation.")
        with db.session() as session:
            quote = preview.quote(session, passenger_id.strip(), args, db.clock())
            lines = list(quote.lines())
            amount = Amount(quote.amount_kind, quote.amount_cents)
    except TravelError as error:
        return ActionPreview(
            tool_name=tool_name,
            title=preview.title,
            lines=_raw_lines(args),
            error=str(error),
            refusal=refusal_of(error),
        )
    return ActionPreview(tool_name=tool_name, title=preview.title, lines=lines, amount=amount)


def refusal_of(error: TravelError) -> Refusal:
    """Return the kind of refusal ``error`` is."""
    kinds: tuple[tuple[type[TravelError], Refusal], ...] = (
        (NotFoundError, "not_found"),
        (OwnershipError, "not_yours"),
        (RuleViolationError, "rules"),
        (UnavailableError, "unavailable"),
        (InvalidInputError, "invalid"),
    )
    return next((kind for cls, kind in kinds if isinstance(error, cls)), "other")
