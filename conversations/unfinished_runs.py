"""Closing what a run left unfinished, so that the saved conversation stays well formed.

A step cut short keeps what its nodes finished; a write that committed before the
process died is answered with its stored result (``recovered``); a turn cut short, or
stopped at the step limit, has its unanswered calls answered as not run and ends with a
note from the active assistant. ``TravelAssistant`` calls these before a new message,
on a cancel or a failure, and when a person writes outside a turn.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot, StateUpdate

from assistants.approvals import not_run_answer, recovered_answers
from assistants.prompts import (
    CUT_TOOL_MESSAGES,
    STEP_LIMIT_APOLOGY,
    STEP_LIMIT_TOOL_MESSAGE,
    TURN_CUT_NOTES,
)
from assistants.routing import last_tool_batch
from assistants.specialists import Member
from assistants.state import active_assistant
from conversations.events import CANCELLED_KEY, CUT_KEY, CutCause, MessageEvent, TurnEvent
from conversations.state_cache import StateCache
from db.engine import Database


class UnfinishedRuns:
    """Save, answer and close what the runs of one graph left unfinished."""

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        states: StateCache,
        db: Database,
        sensitive_tools: Mapping[str, BaseTool],
        owners: Mapping[str, Member],
    ) -> None:
        """Work on ``graph``'s conversations, read through ``states``.

        ``sensitive_tools`` are the crew's sensitive tools by name, and ``owners`` the
        specialist that owns each.
        """
        self.graph = graph
        self.states = states
        self.db = db
        self.sensitive_tools = sensitive_tools
        self.owners = owners

    def recovered(
        self, config: RunnableConfig, messages: list[AnyMessage]
    ) -> dict[str, ToolMessage]:
        """Return the stored answers of the pending calls that already took effect."""
        return recovered_answers(self.db, config, self.sensitive_tools, messages)

    def save_finished_step(self, config: RunnableConfig) -> StateSnapshot:
        """Save what the nodes of a step that was cut short had finished; return the state.

        LangGraph keeps a finished node's writes apart until its whole step is saved.
        ``get_state`` shows them (a write's answer among them), but a run started with
        new input begins from the last saved step and drops them, which would leave a
        write that was done unanswered. Saving them as their nodes' updates keeps them.
        """
        snapshot = self.states.read(config)
        finished = [
            StateUpdate(task.result, task.name, task.id)
            for task in snapshot.tasks
            if task.result is not None
        ]
        if not finished:
            return snapshot
        self.graph.bulk_update_state(config, [finished])
        return self.states.read(config)

    def settle_recovered(
        self, config: RunnableConfig, snapshot: StateSnapshot
    ) -> Iterator[TurnEvent]:
        """Save the stored answers of recovered calls, as their sensitive node would.

        Called before a new message replaces the unfinished run (which drops whatever
        that run had not saved), so the new turn starts from a conversation that says
        those calls were done.
        """
        if not (snapshot.next or snapshot.tasks):
            return
        done = self.recovered(config, snapshot.values.get("messages", []))
        if not done:
            return
        answers = list(done.values())
        # One batch comes from one assistant, so one sensitive node answers all of it.
        node = self.owners[str(answers[0].name)].specialist.sensitive_node
        self.graph.update_state(config, {"messages": answers}, as_node=node)
        for answer in answers:
            yield MessageEvent(answer, node)

    def close_cut(
        self, config: RunnableConfig, cause: CutCause, said: Sequence[AIMessage] = ()
    ) -> bool:
        """Close the cut turn (``TravelAssistant.cancel_turn``); ``said``: replies cut mid-stream.

        What the customer read of a reply that never finished is kept, before the note,
        so the history shows what the live page showed.
        """
        snapshot = self.save_finished_step(config)
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        _, pending = last_tool_batch(messages)
        unanswered = bool(messages) and isinstance(messages[-1], HumanMessage)
        if not (snapshot.next or pending or unanswered):
            return False
        owner = active_assistant(snapshot.values.get("dialog_state"))
        done = self.recovered(config, messages)
        closing: list[AnyMessage] = [
            done.get(str(c["id"]))
            or not_run_answer(c, CUT_TOOL_MESSAGES[cause], "cancelled", **{CUT_KEY: cause})
            for c in pending
        ]
        closing += said
        closing.append(
            AIMessage(
                content=TURN_CUT_NOTES[cause],
                name=owner,
                response_metadata={CANCELLED_KEY: True, CUT_KEY: cause},
            )
        )
        self.graph.update_state(config, {"messages": closing}, as_node=owner)
        return True

    def end_at_step_limit(self, config: RunnableConfig) -> Iterator[TurnEvent]:
        """Close a run that hit the recursion limit with a polite message."""
        snapshot = self.states.read(config)
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        _, pending = last_tool_batch(messages)
        done = self.recovered(config, messages)
        closing: list[AnyMessage] = [
            done.get(str(c["id"])) or not_run_answer(c, STEP_LIMIT_TOOL_MESSAGE, "step_limit")
            for c in pending
        ]
        apology = AIMessage(content=STEP_LIMIT_APOLOGY)
        closing.append(apology)
        owner = active_assistant(snapshot.values.get("dialog_state"))
        self.graph.update_state(config, {"messages": closing}, as_node=owner)
        yield MessageEvent(apology, owner)
