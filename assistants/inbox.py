"""Approvals the LangGraph way: an ``interrupt`` per stop, answered by ``Command(resume=...)``.

The project's own callers (the terminal, the service) resume a run stopped before an
action with their decisions in ``config["configurable"]["approvals"]``. A LangGraph client
(Studio, the SDK, langchain-ai/agent-inbox) resumes the way LangGraph suggests instead:
the sensitive-tools node, resumed without ``approvals``, calls ``interrupt`` with one
request per pending call, and the client answers with ``Command(resume=...)``.

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
Beyond Agent Inbox's keys, each request carries ``tool_call_id`` and ``preview`` (the
title, the lines, and the amount as numbers), which its readers ignore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from assistants.decisions import ActionPreview, Amount, Decision

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
            schema.model_validate(dict(edited))
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in error.errors(include_url=False, include_input=False)
            )
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
        preview = request.get("preview", {})
        shown = tuple(str(line) for line in preview.get("lines", ()))
        amount = Amount.from_data(preview.get("amount"))
        kind, args = answer["type"], answer.get("args")
        if kind == "accept":
            if not request["config"]["allow_accept"]:
                refusal = str(preview.get("refused") or "it would be refused")
                decisions[call_id] = NativeDecision(Decision(False, refusal, shown, refused=True))
            else:
                decisions[call_id] = NativeDecision(Decision(True, None, shown, amount=amount))
        elif kind == "ignore":
            decisions[call_id] = NativeDecision(Decision(False, None, shown, amount=amount))
        elif kind == "response":
            reason = args if isinstance(args, str) else None
            decisions[call_id] = NativeDecision(Decision(False, reason, shown, amount=amount))
        else:
            edited = _edited_args(call, request, args, tools.get(call["name"]))
            again = describe(call["name"], edited)
            decisions[call_id] = NativeDecision(
                Decision(True, None, tuple(again.lines), amount=again.amount), edited
            )
    return decisions
