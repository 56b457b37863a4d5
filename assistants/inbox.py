"""Approvals the LangGraph way: an ``interrupt`` per stop, answered by ``Command(resume=...)``.

Every client goes on the way LangGraph suggests: the terminal and the service (through
``Decision.as_resume``) as a LangGraph client does (Studio, the SDK,
langchain-ai/agent-inbox). The sensitive-tools node calls ``interrupt`` with one request
per pending call, and the client answers with ``Command(resume=...)``, at the stop
before the node or after the interrupt alike.

The request and the answer have the shape of Agent Inbox's human-interrupt schema: a
request names the action (the tool and its arguments), what the human may do with it and
a description (the preview the terminal shows: title, lines, amount); an answer per
request is ``{"type": "accept" | "ignore" | "response" | "edit", "args": ...}``:

- ``accept``: run the call as the model made it;
- ``ignore``: decline it, without a reason;
- ``response``: decline it, with ``args`` (text) as the customer's reason;
- ``edit``: run it with the edited arguments, ``args`` being ``{"action": <the same
  tool>, "args": {...}}``; allowed when the request says so (``allow_edit``).

``Command(resume=...)`` carries the answers as a list in the requests' order, as a
mapping from tool call id to answer, or as one answer when one call is pending. Anything
else is unreadable (``ApprovalResponseError``): nothing is done, and the node asks again
with the same requests, each saying why in ``error`` and at the top of its description.
Beyond Agent Inbox's keys, each request carries ``tool_call_id``, ``preview`` (the
title, the lines, and the amount as numbers) and ``answer_with`` (how to answer), which
its readers ignore. Beyond its keys an answer may carry the record's facts: ``shown`` and
``amount`` (what the customer decided on, instead of the request's preview),
``checked_by`` (the member of staff who checked it), ``refused`` (not the customer's no:
the action cannot be done, ``args`` says why) and ``no_decision`` (nobody decided it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from assistants.decisions import ActionPreview, Amount, Decision, text_or_none
from tools.common import argument_problems, validate_strictly

__all__ = [
    "ActionRequest",
    "ApprovalResponseError",
    "HumanInterrupt",
    "HumanInterruptConfig",
    "HumanResponse",
    "NativeDecision",
    "human_interrupt",
    "read_responses",
]


# Why a run resumed without a passenger stops before doing anything (for the client).
NO_PASSENGER_TO_ACT = (
    "No passenger id is configured for this run, so the waiting action was not carried out "
    "and still waits for a decision. Resume with the passenger's id as passenger_id in the "
    "run's configuration."
)


# How to answer, on every request: a client that went on with ``invoke(None)`` gets the
# requests back at once, and nothing runs until it answers.
ANSWER_WITH = (
    'Nothing runs until this is answered: resume with Command(resume={"type": "accept"}) '
    'to run it, or {"type": "response", "args": "<the reason>"} to decline it (a list '
    "with one answer per request when several wait)."
)


class ActionRequest(TypedDict):
    """The action waiting: the tool called and its arguments."""

    action: str
    args: dict[str, Any]


class HumanInterruptConfig(TypedDict):
    """What the human may do with a request."""

    allow_ignore: bool
    allow_respond: bool
    allow_edit: bool
    allow_accept: bool


class HumanInterrupt(TypedDict):
    """One pending call, as the run's ``interrupt`` shows it (Agent Inbox's shape)."""

    action_request: ActionRequest
    config: HumanInterruptConfig
    description: str | None
    tool_call_id: NotRequired[str]
    preview: NotRequired[dict[str, Any]]
    answer_with: NotRequired[str]
    error: NotRequired[str]


class HumanResponse(TypedDict):
    """The human's answer to one request."""

    type: Literal["accept", "ignore", "response", "edit"]
    args: str | ActionRequest | None


class ApprovalResponseError(ValueError):
    """A ``Command(resume=...)`` that cannot be read as decisions; nothing was done."""


@dataclass(frozen=True)
class NativeDecision:
    """A decision read from a resume, with the arguments an ``edit`` gave the call."""

    decision: Decision
    edited_args: dict[str, Any] | None = None


def human_interrupt(call: ToolCall, preview: ActionPreview) -> HumanInterrupt:
    """Return the request for one pending call, describing it with its preview.

    A call whose preview already shows it would be refused cannot be accepted or edited
    (declining it tells the assistant so); any other call may be edited.
    """
    refused = preview.error is not None
    lines = [f"**{preview.title}**", *(f"- {line}" for line in preview.lines)]
    if refused:
        lines.append(f"This cannot be done: {preview.error}")
    amount = preview.amount.as_data() if preview.amount is not None else None
    return {
        "action_request": {"action": call["name"], "args": dict(call["args"])},
        "config": {
            "allow_ignore": True,
            "allow_respond": True,
            "allow_edit": not refused,
            "allow_accept": not refused,
        },
        "description": "\n".join(lines),
        "tool_call_id": str(call["id"]),
        "answer_with": ANSWER_WITH,
        "preview": {
            "title": preview.title,
            "lines": list(preview.lines),
            "amount": amount,
            "refused": preview.error,
        },
    }


def unreadable(request: HumanInterrupt, error: ApprovalResponseError) -> HumanInterrupt:
    """Return ``request`` asked again after an answer that could not be read."""
    said = f"Your answer could not be read, so nothing was done: {error}"
    return {**request, "description": f"{said}\n\n{request['description'] or ''}", "error": said}


def _by_call(calls: Sequence[ToolCall], resume: Any) -> dict[str, Any]:
    """Pair each call id with its answer, from a list, a mapping or a single answer."""
    ids = [str(c["id"]) for c in calls]
    if isinstance(resume, Mapping) and "type" in resume:
        if len(ids) != 1:
            raise ApprovalResponseError(
                f"{len(ids)} actions are waiting: resume with a list of {len(ids)} answers, "
                "one per request in their order, or a mapping from tool call id to answer."
            )
        return {ids[0]: resume}
    if isinstance(resume, Mapping):
        unknown = sorted(str(k) for k in resume if str(k) not in ids)
        if unknown:
            raise ApprovalResponseError(
                f"No action waits under the tool call ids {unknown}; the waiting ones are {ids}."
            )
        return {str(k): v for k, v in resume.items()}
    if isinstance(resume, list | tuple):
        if len(resume) != len(ids):
            raise ApprovalResponseError(
                f"{len(ids)} actions are waiting but the resume carries {len(resume)} answers: "
                "give one per request, in their order."
            )
        return dict(zip(ids, resume, strict=True))
    raise ApprovalResponseError(
        "Resume with the answers to the waiting actions: a list with one "
        '{"type": "accept" | "ignore" | "response" | "edit", "args": ...} per request.'
    )


def _edited_args(
    call: ToolCall, request: HumanInterrupt, args: Any, tool: BaseTool | None
) -> dict[str, Any]:
    """Return the arguments an ``edit`` answer gives ``call``, checked against its tool."""
    name = call["name"]
    if not request["config"]["allow_edit"]:
        raise ApprovalResponseError(f"The action {name} cannot be edited; accept or decline it.")
    if not isinstance(args, Mapping) or args.get("action", name) != name:
        raise ApprovalResponseError(
            f'An edit of {name} gives {{"action": "{name}", "args": {{...}}}}: the same '
            "action, with its arguments."
        )
    edited = args.get("args")
    if not isinstance(edited, Mapping):
        raise ApprovalResponseError(f"The edit of {name} carries no arguments.")
    schema = tool.tool_call_schema if tool is not None else None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            validate_strictly(schema, edited)
        except ValidationError as error:
            problems = argument_problems(error.errors(include_url=False, include_input=False))
            raise ApprovalResponseError(
                f"The edited arguments of {name} are not valid ({problems}); nothing was done."
            ) from None
    return dict(edited)


def read_responses(
    calls: Sequence[ToolCall],
    requests: Sequence[HumanInterrupt],
    resume: Any,
    tools: Mapping[str, BaseTool],
    describe: Callable[[str, Mapping[str, Any]], ActionPreview],
) -> dict[str, NativeDecision]:
    """Read the answers of a ``Command(resume=...)`` as one decision per call id.

    Args:
        calls: The pending calls, in the order of ``requests``.
        requests: What ``interrupt`` showed for each.
        resume: The resume value.
        tools: The sensitive tools by name, to check edited arguments.
        describe: ``(name, args) -> ActionPreview`` for an edited call.

    Raises:
        ApprovalResponseError: An answer is missing or malformed.
    """
    answers = _by_call(calls, resume)
    decisions: dict[str, NativeDecision] = {}
    for call, request in zip(calls, requests, strict=True):
        call_id = str(call["id"])
        answer = answers.get(call_id)
        if not isinstance(answer, Mapping) or answer.get("type") not in (
            "accept",
            "ignore",
            "response",
            "edit",
        ):
            raise ApprovalResponseError(
                f"The answer for {call['name']} ({call_id}) must be "
                '{"type": "accept" | "ignore" | "response" | "edit", "args": ...}.'
            )
        decision = _decision(call, request, answer, tools, describe)
        if decision is not None:
            decisions[call_id] = decision
    return decisions


def _decision(
    call: ToolCall,
    request: HumanInterrupt,
    answer: Mapping[str, Any],
    tools: Mapping[str, BaseTool],
    describe: Callable[[str, Mapping[str, Any]], ActionPreview],
) -> NativeDecision | None:
    """Read one answer; ``None`` for the project's own "no decision" (``no_decision``).

    The project's front ends add the record's facts to their answers (``shown``,
    ``amount``, ``checked_by``, ``refused``: ``Decision.as_resume``); without them the
    record is the request's own preview.
    """
    preview = request.get("preview", {})
    given = answer.get("shown")
    lines = given if isinstance(given, list | tuple) else preview.get("lines", ())
    shown = tuple(str(line) for line in lines)
    amount = Amount.from_data(answer["amount"] if "amount" in answer else preview.get("amount"))
    checked_by = text_or_none(answer.get("checked_by"))
    kind, args = answer["type"], answer.get("args")
    reason = args if kind == "response" and isinstance(args, str) else None
    if answer.get("no_decision") is True:
        return None
    cannot = kind == "accept" and not request["config"]["allow_accept"]
    if answer.get("refused") is True or cannot:
        refusal = reason or str(preview.get("refused") or "it would be refused")
        return NativeDecision(Decision(False, refusal, shown, refused=True, amount=amount))
    if kind == "accept":
        return NativeDecision(Decision(True, None, shown, amount=amount, checked_by=checked_by))
    if kind != "edit":
        return NativeDecision(Decision(False, reason, shown, amount=amount, checked_by=checked_by))
    edited = _edited_args(call, request, args, tools.get(call["name"]))
    again = describe(call["name"], edited)
    return NativeDecision(Decision(True, None, tuple(again.lines), amount=again.amount), edited)
