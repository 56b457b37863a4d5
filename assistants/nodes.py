"""The graph's nodes other than the assistants themselves and the approval node.

- ``fetch_user_info`` starts every turn: it loads the passenger's bookings (the new
  customer message carries them when they changed) and closes a batch of calls that a
  newer customer message left unanswered.
- ``<X>_safe_tools`` (and ``primary_assistant_tools``) run safe calls and answer calls
  to unknown tools with an error.
- ``enter_<X>`` answers the hand-over call and pushes the specialist on the stack; one
  closure factory serves every specialist.
- ``leave_skill`` answers ``CompleteOrEscalate``, pops the stack and returns to the
  primary assistant.

Every node answers every call it is given exactly once (the reference design answered
only the first of parallel calls). The sensitive-tools node lives in
``assistants.approvals``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, cast

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, RemoveMessage, ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from assistants.approvals import hand_over_answer, not_run_answer
from assistants.bookings import bookings_text
from assistants.context import bookings_of, latest_bookings, stamped, with_bookings
from assistants.prompts import (
    ENTRY_MESSAGE,
    ENTRY_NOT_STARTED,
    LEAVE_MESSAGE,
    SUPERSEDED_MESSAGE,
    UNKNOWN_TOOL_MESSAGE,
)
from assistants.routing import COMPLETE_OR_ESCALATE, ToolGroups, last_tool_batch
from assistants.specialists import Crew, Member
from assistants.state import POP, ConfigNode, State, StateNode, active_assistant
from db.engine import Database
from db.passengers import passenger_summary
from tools.common import passenger_id_from, run_calls, tool_node

FETCH_USER_INFO: Final = "fetch_user_info"
PRIMARY_TOOLS: Final = "primary_assistant_tools"
LEAVE_SKILL: Final = "leave_skill"


def _ordered(calls: Sequence[ToolCall], answers: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Return ``answers`` in the order of the calls they answer."""
    position = {call["id"]: index for index, call in enumerate(calls)}
    return sorted(answers, key=lambda m: position.get(getattr(m, "tool_call_id", None), 0))


def make_safe_tools_node(name: str, tools: Sequence[BaseTool], groups: ToolGroups) -> ConfigNode:
    """Return the node ``name`` that answers safe calls and calls to unknown tools."""
    node = tool_node(tools)
    known = {t.name for t in tools}
    available = ", ".join(sorted(known | groups.sensitive | groups.routing))

    def run_safe_tools(state: State, config: RunnableConfig) -> dict[str, Any]:
        _, pending = last_tool_batch(state["messages"])
        calls = groups.select(pending, "safe_tools")
        answers: list[AnyMessage] = list(
            run_calls(node, [c for c in calls if c["name"] in known], config)
        )
        answers += [
            not_run_answer(
                c, UNKNOWN_TOOL_MESSAGE.format(name=c["name"], available=available), "unknown_tool"
            )
            for c in calls
            if c["name"] not in known
        ]
        return {"messages": _ordered(calls, answers)}

    run_safe_tools.__name__ = name
    return run_safe_tools


def create_entry_node(member: Member, crew: Crew) -> StateNode:
    """Return the entry node of one specialist (one closure serves every specialist).

    It answers the specialist's hand-over call with a ToolMessage telling it who it is
    and pushes it on the dialog stack; any other hand-over of the batch is answered as
    not started (one specialist works at a time).
    """
    specialist = member.specialist

    def enter(state: State) -> dict[str, Any]:
        _, pending = last_tool_batch(state["messages"])
        routing = [c for c in pending if c["name"] in crew.hand_overs]
        chosen = next(c for c in routing if c["name"] == specialist.routing_name)
        answers: list[AnyMessage] = [
            hand_over_answer(
                chosen, ENTRY_MESSAGE.format(title=specialist.title), "enter", specialist.name
            )
        ]
        answers += [
            not_run_answer(
                c,
                ENTRY_NOT_STARTED.format(title=specialist.title),
                "one_specialist_at_a_time",
                specialist=specialist.name,
            )
            for c in routing
            if c is not chosen
        ]
        return {"messages": answers, "dialog_state": specialist.name}

    enter.__name__ = specialist.entry_node
    return enter


def leave_skill(state: State) -> dict[str, Any]:
    """Answer every ``CompleteOrEscalate`` call, pop the stack, return to the primary."""
    _, pending = last_tool_batch(state["messages"])
    leaving = active_assistant(state.get("dialog_state"))
    answers = [
        hand_over_answer(
            c,
            LEAVE_MESSAGE.format(reason=str(c["args"].get("reason") or "no reason given")),
            "leave",
            leaving,
        )
        for c in pending
        if c["name"] == COMPLETE_OR_ESCALATE
    ]
    return {"messages": answers, "dialog_state": POP}


def make_fetch_user_info(db: Database) -> ConfigNode:
    """Return the first node of every turn: it loads the passenger's bookings.

    It also closes any tool batch left unanswered (a new message sent while an approval
    was pending), so the history the model sees is always well formed.
    """

    def fetch_user_info(state: State, config: RunnableConfig) -> dict[str, Any]:
        passenger_id = passenger_id_from(config)
        with db.rows() as connection:
            summary = passenger_summary(connection, passenger_id, db.clock())
        info = bookings_text(summary)
        # Written only when it changed: a checkpoint stores each write of it.
        update: dict[str, Any] = {"user_info": info} if info != state.get("user_info") else {}
        messages = state["messages"]
        if not messages or not isinstance(messages[-1], HumanMessage):
            return update
        latest = messages[-1]
        retried = retried_question(messages)
        if retried is not None:  # the run that asked it first failed: keep the question once
            messages = [*messages[:-2], latest]
        # The message carries the bookings when they changed since an earlier one did:
        # requests show them there, after what the model has already read.
        carried = latest_bookings(messages[:-1])
        repaired = close_abandoned_batch(messages)
        if repaired:
            latest = cast(HumanMessage, repaired[-1])
        marked = stamped(latest, db.clock())
        if info != carried and bookings_of(marked) is None:
            marked = with_bookings(marked, info)
        if repaired:
            update["messages"] = [*repaired[:-1], marked]
        elif marked is not latest:
            update["messages"] = [marked]  # same id: replaces the message in place
        if retried is not None:
            update["messages"] = [retried, *update.get("messages", [])]
        return update

    return fetch_user_info


def retried_question(messages: Sequence[AnyMessage]) -> RemoveMessage | None:
    """Return the removal of a question that the latest customer message asks again.

    A run that failed before the assistant answered (a LangGraph server keeps what the
    run had saved: the question) leaves the question unanswered; a client that retries
    sends it again. Two customer messages in a row with the same words are that retry,
    and the earlier goes.
    """
    if len(messages) < 2:
        return None
    earlier, latest = messages[-2], messages[-1]
    if (
        isinstance(earlier, HumanMessage)
        and isinstance(latest, HumanMessage)
        and earlier.id
        and earlier.content == latest.content
    ):
        return RemoveMessage(id=earlier.id)
    return None


def close_abandoned_batch(messages: Sequence[AnyMessage]) -> list[BaseMessage]:
    """Answer calls of an earlier batch that a newer customer message left unanswered."""
    if not messages or not isinstance(messages[-1], HumanMessage):
        return []
    ai, pending = last_tool_batch(messages[:-1])
    if ai is None or not pending:
        return []
    latest = messages[-1]
    answers: list[BaseMessage] = [
        not_run_answer(c, SUPERSEDED_MESSAGE, "superseded") for c in pending
    ]
    # The answers must directly follow the calls, so the new message moves after them.
    moved = HumanMessage(content=latest.content, additional_kwargs=latest.additional_kwargs)
    removal: list[BaseMessage] = [RemoveMessage(id=latest.id)] if latest.id else []
    return [*removal, *answers, moved]
