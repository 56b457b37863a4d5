"""The caller's API: ``TravelAssistant`` drives conversations over the compiled graph.

The terminal program, the evaluation, the tests and any server use it, and none of them
touches the graph's internals: send a message, stream the reply as events, read the
pending sensitive actions with their previews, approve or decline each with a reason,
read the history and the active assistant. Facts about tool answers (declined, not run
and why, a hand-over) come from ``assistants.approvals.facts_of``, and what a tool call
is (safe, sensitive, a hand-over) from ``TravelAssistant.call_kind``.

The database is the truth about writes. A process killed after a write committed and
before the conversation was saved leaves that call waiting for approval; it is not
offered again (``pending_actions`` leaves it out, ``recovered_actions`` lists it), and
whatever comes next (``resolve``, a new message, a cancelled or cut-off turn) answers it
with its stored result, marked ``recovered``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, cast
from uuid import UUID, uuid4

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import PregelTask, RetryPolicy, StateSnapshot, StateUpdate

from assistants.approvals import (
    APPROVALS_KEY,
    ActionPreview,
    Decision,
    PendingAction,
    describe_action,
    not_run_answer,
    pending_calls,
    recovered_answers,
)
from assistants.calls import cancelling
from assistants.prompts import (
    ASKED_FOR_PERSON_MESSAGE,
    CUT_TOOL_MESSAGES,
    HANDED_BACK_MESSAGE,
    STEP_LIMIT_APOLOGY,
    STEP_LIMIT_TOOL_MESSAGE,
    TURN_CUT_NOTES,
)
from assistants.providers import (
    DEFAULT_RETRY_POLICY,
    ModelDeadlineError,
    ModelProviderError,
    TurnCancelledError,
    describe_provider_error,
    is_provider_error,
)
from assistants.routing import last_tool_batch
from assistants.specialists import CallKind, Crew, build_crew
from assistants.state import PRIMARY_ASSISTANT, RESET, active_assistant
from conversations.events import (
    CANCELLED_KEY,
    CUT_KEY,
    CUT_REPLY_KEY,
    Cancel,
    CutCause,
    MessageEvent,
    Thread,
    TokenEvent,
    TurnEvent,
    cancel_cause,
    is_cancel_note,
)
from conversations.loop import iterate
from conversations.loop_saver import saving_on_loop
from conversations.remembered_state import THREADS_KEPT, RemembersLastState, StateKey
from db.engine import Database
from db.passengers import passenger_exists
from graph import DEFAULT_RECURSION_LIMIT, ModelsArg, build_graph

__all__ = [
    "ActionPreview",
    "Decision",
    "MessageEvent",
    "ModelProviderError",
    "PendingAction",
    "Thread",
    "TokenEvent",
    "TravelAssistant",
    "TurnCancelledError",
    "TurnEvent",
    "is_cancel_note",
]


class _CancelOnRequest(BaseCallbackHandler):
    """Stop a run soon after ``cancel`` is set: before a model call, and before any node.

    So no tool runs after the cancel; it never raises in the middle of a node's tools,
    so a write that started is answered, not lost. A model call already waiting is ended
    by ``assistants.calls.bounded``, at once. It runs on the event loop (``run_inline``),
    where raising stops the run.
    """

    raise_error = True
    run_inline = True

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.root: UUID | None = None

    def _check(self) -> None:
        if self.cancel.is_set():
            raise TurnCancelledError("The turn was cancelled.")

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            self.root = run_id
        if parent_run_id is None or parent_run_id == self.root:  # the graph, or one node
            self._check()

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._check()

    def on_llm_start(self, serialized: Any, prompts: Any, **kwargs: Any) -> None:
        self._check()


class _HideCancelWarnings(logging.Filter):
    """Drop LangChain's warning about the exception ``_CancelOnRequest`` raises on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and args[0] == _CancelOnRequest.__name__)


_CANCEL_WARNINGS_FILTER = _HideCancelWarnings()


# What the model is told of an action dropped outside a turn, by why.
_DROPPED_MESSAGES = {
    "handed_back": HANDED_BACK_MESSAGE,
    "asked_for_person": ASKED_FOR_PERSON_MESSAGE,
}


class TravelAssistant:
    """Drive conversations over a compiled graph.

    A turn is ``send`` (a customer message), then, while ``pending_actions`` is not
    empty, ``resolve`` with one ``Decision`` per pending call. Events are yielded as the
    graph produces them, so a caller can stream the reply.
    """

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        db: Database,
        crew: Crew,
        *,
        recursion_limit: int = DEFAULT_RECURSION_LIMIT,
    ) -> None:
        """Wrap ``graph`` (from ``build_graph``) over ``db``.

        ``crew`` is the one the graph was built with, so previews and call kinds know
        every specialist's tools (``build`` makes both from one crew).
        """
        saving_on_loop(graph.checkpointer)  # a caller's sync saver, turned async
        self.graph = graph
        self.db = db
        self.crew = crew
        self.recursion_limit = recursion_limit
        # Each sensitive tool by name, and the specialist that owns it.
        self._sensitive_tools = {t.name: t for m in self.crew.members for t in m.tools.sensitive}
        self._owners = {t.name: m for m in self.crew.members for t in m.tools.sensitive}
        # The last state read of each recent thread, with what identifies it (see _state).
        self._states: OrderedDict[str, tuple[tuple[Any, ...], StateSnapshot]] = OrderedDict()
        self._states_lock = threading.Lock()

    @classmethod
    def build(
        cls,
        models: ModelsArg,
        checkpointer: BaseCheckpointSaver[Any] | None,
        *,
        db: Database,
        crew: Crew | None = None,
        tavily_api_key: str | None = None,
        retry_policy: RetryPolicy | None = DEFAULT_RETRY_POLICY,
        recursion_limit: int = DEFAULT_RECURSION_LIMIT,
    ) -> TravelAssistant:
        """Build the graph (see ``graph.build_graph``) and wrap it, with one crew for both.

        Without a ``crew``, every specialist's, with web search when ``tavily_api_key``
        is given (``settings.Settings.tavily_api_key``).
        """
        crew = crew or build_crew(db, tavily_api_key=tavily_api_key)
        graph = build_graph(models, checkpointer, db=db, crew=crew, retry_policy=retry_policy)
        return cls(graph, db, crew, recursion_limit=recursion_limit)

    def _state(self, config: RunnableConfig) -> StateSnapshot:
        """Return the thread's state, read again only when its saved checkpoint changed.

        Reading a state replays the delta channels' writes since their last snapshot
        (``assistants.state``), and a turn asks for it several times (pending actions,
        the active assistant, the history, a new message). The latest checkpoint's id
        and the writes pending on it, which the saver returns without replaying
        anything, identify a state: while they are the same, so is the state, whichever
        process wrote it. A few recent threads are kept. A run of this assistant leaves
        the state of its last checkpoint as it streamed it (``_snapshot_of``), so the
        questions after a turn replay nothing.
        """
        saver = self.graph.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            return self.graph.get_state(config)
        thread_id = str(config["configurable"]["thread_id"])
        key = _latest_key(saver, config)
        if key is None:
            return self.graph.get_state(config)
        with self._states_lock:
            found = self._states.get(thread_id)
            if found is not None and found[0] == key:
                self._states.move_to_end(thread_id)
                return found[1]
        snapshot = self.graph.get_state(config)
        if snapshot.config.get("configurable", {}).get("checkpoint_id") == key[0]:
            self._remember(config, snapshot, key[1])
        return snapshot

    def _remember(
        self, config: RunnableConfig, snapshot: StateSnapshot, pending: tuple[Any, ...] = ()
    ) -> None:
        """Keep ``snapshot`` as the state of its checkpoint with these pending writes."""
        key = (snapshot.config.get("configurable", {}).get("checkpoint_id"), pending)
        thread_id = str(config["configurable"]["thread_id"])
        with self._states_lock:
            self._states[thread_id] = (key, snapshot)
            self._states.move_to_end(thread_id)
            while len(self._states) > THREADS_KEPT:  # as many as the saver keeps
                self._states.popitem(last=False)

    def config(self, thread: Thread, **extra: Any) -> RunnableConfig:
        """Return the run config of ``thread``; ``extra`` adds configurable keys."""
        return {
            "configurable": {
                "thread_id": thread.thread_id,
                "passenger_id": thread.passenger_id,
                **extra,
            },
            "recursion_limit": self.recursion_limit,
        }

    def prepare(self) -> None:
        """Read the reference files the tools need (the company policy) before any turn.

        The terminal and the service call it at start-up, so a missing or empty policy
        file is reported there, not as a failed tool call mid-conversation.

        Raises:
            FileNotFoundError: The policy file does not exist.
            ValueError: The policy file holds no passage.
        """
        self.crew.prepare()

    def check_passenger(self, passenger_id: str) -> bool:
        """Tell whether ``passenger_id`` is a known passenger."""
        with self.db.session() as session:
            return passenger_exists(session, passenger_id)

    def send(
        self,
        thread: Thread,
        text: str,
        *,
        cancel: threading.Event | None = None,
        cancelled: CutCause = "cancelled",
        message_id: str | None = None,
    ) -> Iterator[TurnEvent]:
        """Add the customer's message and run until the reply or an approval stop.

        ``message_id`` names the message (as the history will), when the caller has
        shown it already under that id.

        Setting ``cancel`` (from any thread) stops the run soon after: see ``_run``. The
        turn is then closed as cut short for ``cancelled`` (who set it: the customer, or
        the service stopping). A turn the model server failed, or that ran out of time,
        is closed as such before the error is raised.

        Pending calls that already took effect (see ``recovered_actions``) are answered
        first with their stored results; the rest are left to the graph, which answers
        them as not run because a new message came instead.

        Raises:
            ModelProviderError: The model endpoint failed after the retries.
            TurnCancelledError: ``cancel`` was set; the turn is closed as cancelled.
        """
        return iterate(
            lambda: self.asend(
                thread, text, cancel=cancel, cancelled=cancelled, message_id=message_id
            )
        )

    async def asend(
        self,
        thread: Thread,
        text: str,
        *,
        cancel: threading.Event | None = None,
        cancelled: CutCause = "cancelled",
        message_id: str | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """``send`` on the event loop: the same turn, awaited rather than iterated."""
        config = self.config(thread)
        for event in self._settle_recovered(config, self._save_finished_step(config)):
            yield event
        message = HumanMessage(content=text, id=message_id)
        run = self._arun({"messages": [message]}, config, cancel, cancelled)
        async with aclosing(run):  # a caller that stops early stops the run now
            async for event in run:
                yield event

    def resolve(
        self,
        thread: Thread,
        decisions: Mapping[str, Decision],
        *,
        cancel: threading.Event | None = None,
        cancelled: CutCause = "cancelled",
        only_actions: bool = False,
    ) -> Iterator[TurnEvent]:
        """Resume a run stopped for approval with one decision per pending call.

        ``only_actions``: run the decided calls and stop there, without asking the model
        for a reply (a person holds the conversation); close the step with ``append``.

        A pending call missing from ``decisions`` is not run (only an explicit approval
        runs a call). ``cancel`` works as for ``send``; an approved call that had not
        started when it was set is not run. A call that already took effect before an
        interruption (``recovered_actions``) needs no decision: it is answered with its
        stored result whatever ``decisions`` says, so ``resolve(thread, {})`` goes on
        with a run whose every call was recovered.
        """
        return iterate(
            lambda: self.aresolve(
                thread, decisions, cancel=cancel, cancelled=cancelled, only_actions=only_actions
            )
        )

    async def aresolve(
        self,
        thread: Thread,
        decisions: Mapping[str, Decision],
        *,
        cancel: threading.Event | None = None,
        cancelled: CutCause = "cancelled",
        only_actions: bool = False,
    ) -> AsyncGenerator[TurnEvent, None]:
        """``resolve`` on the event loop."""
        payload = {call_id: d.as_config() for call_id, d in decisions.items()}
        run = self._arun(
            None,
            self.config(thread, **{APPROVALS_KEY: payload}),
            cancel,
            cancelled,
            stop_after=list(self.crew.sensitive_nodes) if only_actions else None,
        )
        async with aclosing(run):
            async for event in run:
                yield event

    def approve_all(self, thread: Thread) -> Iterator[TurnEvent]:
        """Approve every pending call."""
        decisions = {a.tool_call_id: Decision(True) for a in self.pending_actions(thread)}
        return self.resolve(thread, decisions)

    def deny_all(self, thread: Thread, reason: str | None) -> Iterator[TurnEvent]:
        """Deny every pending call with the same reason."""
        decisions = {a.tool_call_id: Decision(False, reason) for a in self.pending_actions(thread)}
        return self.resolve(thread, decisions)

    def pending_actions(self, thread: Thread) -> list[PendingAction]:
        """Return the sensitive calls waiting for a decision, in the model's order.

        A call whose write already committed (the process was killed before the
        conversation was saved) is not among them: see ``recovered_actions``.
        """
        config = self.config(thread)
        snapshot = self._state(config)
        owners = [
            self.crew.sensitive_nodes[n] for n in snapshot.next if n in self.crew.sensitive_nodes
        ]
        if not owners:
            return []
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        calls = pending_calls(messages, self.crew.sensitive_names)
        if not calls:
            return []
        done = self._recovered(config, messages)
        return [
            PendingAction(str(c["id"]), c["name"], dict(c["args"]), owners[0])
            for c in calls
            if str(c["id"]) not in done
        ]

    def recovered_actions(self, thread: Thread) -> list[PendingAction]:
        """Return the approved calls of the unfinished run that were already carried out.

        Their writes committed, but the process was killed before the conversation was
        saved, so the saved conversation still shows them unanswered. They are not asked
        again: resuming the run (``resolve``, with decisions for the ``pending_actions``
        if any) answers them with their results, and a new message (``send``) first
        saves their stored results; ``facts_of`` marks those answers ``recovered``.
        """
        config = self.config(thread)
        snapshot = self._state(config)
        if not (snapshot.next or snapshot.tasks):
            return []  # the run finished: every call of it was answered
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        done = self._recovered(config, messages)
        return [
            PendingAction(str(c["id"]), c["name"], dict(c["args"]), self._owners[c["name"]].name)
            for c in pending_calls(messages, self.crew.sensitive_names)
            if str(c["id"]) in done
        ]

    def _recovered(
        self, config: RunnableConfig, messages: list[AnyMessage]
    ) -> dict[str, ToolMessage]:
        """Return the stored answers of the pending calls that already took effect."""
        return recovered_answers(self.db, config, self._sensitive_tools, messages)

    def _save_finished_step(self, config: RunnableConfig) -> StateSnapshot:
        """Save what the nodes of a step that was cut short had finished; return the state.

        LangGraph keeps a finished node's writes apart until its whole step is saved.
        ``get_state`` shows them (a write's answer among them), but a run started with
        new input begins from the last saved step and drops them, which would leave a
        write that was done unanswered. Saving them as their nodes' updates keeps them.
        """
        snapshot = self._state(config)
        finished = [
            StateUpdate(task.result, task.name, task.id)
            for task in snapshot.tasks
            if task.result is not None
        ]
        if not finished:
            return snapshot
        self.graph.bulk_update_state(config, [finished])
        return self._state(config)

    def _settle_recovered(
        self, config: RunnableConfig, snapshot: StateSnapshot
    ) -> Iterator[TurnEvent]:
        """Save the stored answers of recovered calls, as their sensitive node would.

        Called before a new message replaces the unfinished run (which drops whatever
        that run had not saved), so the new turn starts from a conversation that says
        those calls were done.
        """
        if not (snapshot.next or snapshot.tasks):
            return
        done = self._recovered(config, snapshot.values.get("messages", []))
        if not done:
            return
        answers = list(done.values())
        # One batch comes from one assistant, so one sensitive node answers all of it.
        node = self._owners[str(answers[0].name)].specialist.sensitive_node
        self.graph.update_state(config, {"messages": answers}, as_node=node)
        for answer in answers:
            yield MessageEvent(answer, node)

    def propose(
        self, thread: Thread, name: str, args: Mapping[str, Any], message: AIMessage
    ) -> PendingAction:
        """Put a sensitive call to ``name`` before the customer, as its specialist would.

        For a person holding the conversation: ``message`` (their words, without tool
        calls) is saved as the specialist's step with the call added, so the run stops
        before the specialist's sensitive node and the customer decides it as any other
        (preview, ``y/n``, ``resolve``). The specialist becomes the active assistant.

        Raises:
            KeyError: ``name`` is not a sensitive tool of the crew.
        """
        owner = self._owners[name]
        config = self.config(thread)
        snapshot = self._save_finished_step(config)
        call_id = f"call_person_{uuid4().hex[:16]}"
        proposal = message.model_copy(
            update={
                "name": owner.name,
                "tool_calls": [
                    {"name": name, "args": dict(args), "id": call_id, "type": "tool_call"}
                ],
            }
        )
        values: dict[str, Any] = {"messages": [proposal]}
        if active_assistant(snapshot.values.get("dialog_state")) != owner.name:
            values["dialog_state"] = owner.name
        self.graph.update_state(config, values, as_node=owner.specialist.node)
        return PendingAction(call_id, name, dict(args), owner.name)

    def between_steps(self, thread: Thread) -> bool:
        """Tell whether a run stopped after its actions, before the assistant answered."""
        snapshot = self._state(self.config(thread))
        return bool(snapshot.next) and not self.pending_actions(thread)

    def append(
        self,
        thread: Thread,
        messages: Sequence[AnyMessage],
        *,
        to_primary: bool = False,
        drop_pending: Literal["handed_back", "asked_for_person"] | None = None,
    ) -> None:
        """Add ``messages`` to ``thread`` outside a turn, without running any assistant.

        For what is said while a person holds the conversation (``conversations.desk``):
        the messages are saved as the active assistant's step, which ends the run, so
        the next message is answered by that assistant as usual; with ``to_primary``,
        by the primary assistant (every specialist leaves the dialog stack).

        An action waiting for the customer's decision stays the last thing said, still
        to be decided: the messages go before it. With ``drop_pending`` (a hand-back, the
        customer asking for a person) it is answered as not done for that reason
        instead, and the messages follow.
        """
        config = self.config(thread)
        snapshot = self._save_finished_step(config)
        owner = active_assistant(snapshot.values.get("dialog_state"))
        said: list[BaseMessage] = list(messages)
        current: list[AnyMessage] = snapshot.values.get("messages", [])
        ai, pending = last_tool_batch(current)
        if pending and ai is not None and drop_pending:
            said_to_model = _DROPPED_MESSAGES[drop_pending]
            answers = [not_run_answer(c, said_to_model, drop_pending) for c in pending]
            node = self._owners[str(pending[0]["name"])].specialist.sensitive_node
            self.graph.update_state(config, {"messages": answers}, as_node=node)
        elif pending and ai is not None:
            # Its call and what answered it so far move after the new messages.
            tail = current[next(i for i, m in enumerate(current) if m is ai) :]
            said = [
                *(RemoveMessage(id=str(m.id)) for m in tail if m.id),
                *said,
                *(m.model_copy(update={"id": str(uuid4())}) for m in tail),
            ]
        values: dict[str, Any] = {"messages": said}
        if to_primary and owner != PRIMARY_ASSISTANT:
            values["dialog_state"] = RESET
        self.graph.update_state(config, values, as_node=owner)

    def preview(self, thread: Thread, action: PendingAction) -> ActionPreview:
        """Describe what ``action`` would do (before -> after, price), without doing it."""
        return describe_action(
            self.db, thread.passenger_id, action.name, action.args, self.crew.previews
        )

    def call_kind(self, name: str) -> CallKind:
        """Tell whether a tool call named ``name`` is safe, sensitive or a hand-over."""
        return self.crew.call_kind(name)

    def label(self, assistant: str) -> str:
        """Return how a terminal names ``assistant`` (empty for the primary assistant)."""
        return self.crew.label(assistant)

    def active_assistant(self, thread: Thread) -> str:
        """Return the assistant that will answer the next message."""
        snapshot = self._state(self.config(thread))
        return active_assistant(snapshot.values.get("dialog_state"))

    def user_info(self, thread: Thread) -> str:
        """Return the passenger's bookings as the last turn gave them to the model."""
        snapshot = self._state(self.config(thread))
        return str(snapshot.values.get("user_info", ""))

    def messages(self, thread: Thread) -> list[AnyMessage]:
        """Return the saved conversation of ``thread``."""
        snapshot = self._state(self.config(thread))
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        return list(messages)  # the snapshot may be read again (_state): the caller's own list

    def interrupted(self, thread: Thread) -> bool:
        """Tell whether the last turn of ``thread`` stopped part-way.

        That is a run that neither finished nor stopped for approval: the process was
        killed, or lost its terminal, while the assistant worked (also right after a
        node finished, before its step was saved).
        """
        snapshot = self._state(self.config(thread))
        if any(task.result is not None for task in snapshot.tasks):
            return True
        waiting = set(snapshot.next)
        return bool(waiting) and not waiting <= set(self.crew.sensitive_nodes)

    def cancel_turn(self, thread: Thread, cause: CutCause = "cancelled") -> bool:
        """Close the current turn of ``thread`` as cut short, so the conversation can go on.

        Every unanswered call of the last batch is answered as not run (``"cancelled"``,
        with ``cause`` beside it) and the turn ends with a short note from the active
        assistant saying why (``cause``), so the next request is a well-formed
        conversation and the model knows what happened. A pending approval counts as
        unanswered; a call that already took effect (``recovered_actions``) is answered
        as done.

        Returns:
            Whether there was an unfinished turn to close.
        """
        return self._close_cut(self.config(thread), cause)

    def _close_cut(
        self, config: RunnableConfig, cause: CutCause, said: Sequence[AIMessage] = ()
    ) -> bool:
        """Close the cut turn (see ``cancel_turn``); ``said``: the replies cut mid-stream.

        What the customer read of a reply that never finished is kept, before the note,
        so the history shows what the live page showed.
        """
        snapshot = self._save_finished_step(config)
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        _, pending = last_tool_batch(messages)
        unanswered = bool(messages) and isinstance(messages[-1], HumanMessage)
        if not (snapshot.next or pending or unanswered):
            return False
        owner = active_assistant(snapshot.values.get("dialog_state"))
        done = self._recovered(config, messages)
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

    async def _arun(
        self,
        inputs: dict[str, Any] | None,
        config: RunnableConfig,
        cancel: threading.Event | None = None,
        cancelled: CutCause = "cancelled",
        stop_after: list[str] | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run the graph on the event loop and yield its events as they come.

        The graph streams the model's tokens (``messages``), each node's update and each
        saved checkpoint. It goes on only when the caller asks for the next event, so a
        cancel set on seeing a tool call stops the run before the tool runs: the cancel
        ends a model call at once (``assistants.calls.bounded``) and stops the run
        before its next node (``_CancelOnRequest``), never in the middle of a node's
        tools, so a write that started is answered, not lost. A caller that stops
        reading early stops the run as a cancel would.

        Each step's checkpoint is saved before the next step starts
        (``durability="sync"``), so a process killed mid-turn loses at most the step that
        was running.
        """
        stop = cancel if cancel is not None else Cancel()
        logging.getLogger("langchain_core.callbacks.manager").addFilter(_CANCEL_WARNINGS_FILTER)
        run_config: RunnableConfig = {**config, "callbacks": [_CancelOnRequest(stop)]}
        stream = self.graph.astream(
            inputs,
            run_config,
            stream_mode=["messages", "updates", "checkpoints"],
            durability="sync",
            interrupt_after=stop_after,
        )
        streaming = _Streaming()
        saved: Mapping[str, Any] | None = None
        # A step's messages wait for the step's checkpoint: a message is shown as done
        # only once it is saved (a turn whose save is refused shows its failure instead).
        unsaved: list[TurnEvent] = []
        finished = False
        try:
            with cancelling(stop):
                async for mode, payload in stream:
                    if mode == "messages":
                        token = None if stop.is_set() else streaming.token(payload)
                        if token is not None:  # none after a cancel
                            yield token
                    elif mode == "checkpoints":
                        saved = cast("Mapping[str, Any]", payload)
                        for event in unsaved:
                            yield event
                        unsaved.clear()
                    else:
                        for event in _events(payload):
                            rest = streaming.finish(event)
                            if rest is not None:
                                yield rest
                            unsaved.append(event)
            finished = True
            for event in unsaved:
                yield event
        except GraphRecursionError:
            finished = True
            for event in self._end_at_step_limit(config):
                yield event
        except TurnCancelledError:
            finished = True
            self._close_cut(config, cancel_cause(stop, cancelled), streaming.cut())
            raise
        except Exception as error:
            finished = True
            if is_provider_error(error):
                cause: CutCause = "time_limit" if isinstance(error, ModelDeadlineError) else "model"
                self._close_cut(config, cause, streaming.cut())
                raise ModelProviderError(describe_provider_error(error)) from error
            # A bug, the conversations database failing, or a lost turn lock: the turn is
            # left as a dead process leaves it, and whoever holds the conversation next
            # closes it (``crash``); without the lock, writing here could race them.
            raise
        else:
            if saved is not None:  # the run ended at its last checkpoint: keep its state
                self._remember(config, _snapshot_of(saved))
                saver = self.graph.checkpointer
                if isinstance(saver, RemembersLastState):  # the next run starts from it
                    saver.remember_state(saved["config"], saved["values"])
        finally:
            if not finished:  # the caller stopped reading: stop the run, then close it
                stop.set()
                if await _ended_in_failure(stream):
                    self._close_cut(config, cancel_cause(stop, cancelled), streaming.cut())

    def _end_at_step_limit(self, config: RunnableConfig) -> Iterator[TurnEvent]:
        """Close a run that hit the recursion limit with a polite message."""
        snapshot = self._state(config)
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        _, pending = last_tool_batch(messages)
        done = self._recovered(config, messages)
        closing: list[AnyMessage] = [
            done.get(str(c["id"])) or not_run_answer(c, STEP_LIMIT_TOOL_MESSAGE, "step_limit")
            for c in pending
        ]
        apology = AIMessage(content=STEP_LIMIT_APOLOGY)
        closing.append(apology)
        owner = active_assistant(snapshot.values.get("dialog_state"))
        self.graph.update_state(config, {"messages": closing}, as_node=owner)
        yield MessageEvent(apology, owner)


def _latest_key(saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> StateKey | None:
    """Return what identifies the thread's latest saved state (see ``_state``).

    The latest checkpoint's id and the (task, channel) of its pending writes; a saver
    that can tell them without reading the checkpoint (``latest_key``) is asked for
    them alone.
    """
    latest_key = getattr(saver, "latest_key", None)
    if callable(latest_key):
        return cast(StateKey | None, latest_key(config))
    latest = saver.get_tuple(config)
    if latest is None:
        return None
    return (
        str(latest.config["configurable"].get("checkpoint_id")),
        tuple((str(write[0]), str(write[1])) for write in latest.pending_writes or ()),
    )


def _snapshot_of(saved: Mapping[str, Any]) -> StateSnapshot:
    """Return a run's ``checkpoints`` event as the ``StateSnapshot`` ``get_state`` gives.

    LangGraph streams each checkpoint it saves in ``get_state``'s format, as a dict and
    without the time it was made (``created_at`` is ``None``; nothing here reads it).
    """
    tasks = tuple(
        PregelTask(
            task["id"],
            task["name"],
            (),
            error=task.get("error"),
            state=task.get("state"),
            result=task.get("result"),
        )
        for task in saved.get("tasks", ())
    )
    return StateSnapshot(
        values=saved["values"],
        next=tuple(saved["next"]),
        config=saved["config"],
        metadata=saved.get("metadata"),
        created_at=None,
        parent_config=saved.get("parent_config"),
        tasks=tasks,
        interrupts=(),
    )


def _events(payload: Any) -> Iterator[MessageEvent]:
    """Return the complete messages of one ``updates`` event, with the node that added them."""
    for node, update in (payload or {}).items():
        if type(update) is not dict and not isinstance(update, Mapping):  # dict: no ABC check
            continue
        for message in update.get("messages", []) or []:
            if isinstance(message, _SHOWN):
                yield MessageEvent(message, node)


# The messages a turn shows as they come: a tuple, not a union built at every check.
_SHOWN = (AIMessage, ToolMessage)


@dataclass
class _Streaming:
    """The replies of a run as they streamed: their text so far and node, by message id."""

    texts: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def token(self, payload: Any) -> TokenEvent | None:
        """Return a ``messages`` event as a token of a reply, or ``None`` for anything else."""
        chunk, metadata = payload
        if type(chunk) is not AIMessageChunk or not isinstance(chunk.content, str):
            return None
        if not chunk.content:
            return None
        node = str((metadata or {}).get("langgraph_node", ""))
        if chunk.id:
            self.texts[chunk.id] = self.texts.get(chunk.id, "") + chunk.content
            self.nodes[chunk.id] = node
        return TokenEvent(chunk.content, node, chunk.id)

    def finish(self, event: MessageEvent) -> TokenEvent | None:
        """Mark ``event``'s message finished; return what its tokens did not carry, if any.

        A reply cut at the output limit ends with a note the node adds after the stream
        (``assistants.assistant``): the customer sees it stream like the rest.
        """
        message = event.message
        key = message.id or ""
        self.done.add(key)
        sent = self.texts.get(key)
        if not sent or not isinstance(message, AIMessage) or not isinstance(message.content, str):
            return None
        if len(message.content) <= len(sent) or not message.content.startswith(sent):
            return None
        self.texts[key] = message.content
        return TokenEvent(message.content[len(sent) :], event.node, message.id)

    def cut(self) -> list[AIMessage]:
        """Return the reply the customer saw part of that never finished, as said.

        Only the last one: a model call that failed and was retried streamed its reply
        again from the start, so an earlier attempt's part is superseded.
        """
        unfinished = [
            (key, text) for key, text in self.texts.items() if key not in self.done and text.strip()
        ]
        if not unfinished:
            return []
        key, text = unfinished[-1]
        return [
            AIMessage(
                content=text,
                id=key,
                name=self.nodes[key],
                response_metadata={CUT_REPLY_KEY: True},
            )
        ]


async def _ended_in_failure(stream: AsyncIterator[Any]) -> bool:
    """Run a stopped run to its end, dropping its events; tell whether it failed."""
    try:
        async for _ in stream:
            pass
    except Exception:
        return True
    return False
