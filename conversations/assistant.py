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

Its parts live beside it: how a cancel stops a run (``run_cancel``), the run's stream
as events (``run_stream``), the thread states kept between questions (``state_cache``)
and the closing of runs that did not finish (``unfinished_runs``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal, cast
from uuid import uuid4

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, RetryPolicy, StateSnapshot

from assistants.approvals import (
    HANDED,
    ActionPreview,
    Decision,
    PendingAction,
    describe_action,
    not_run_answer,
    pending_calls,
)
from assistants.call_limits import ModelDeadlineError, TurnCancelledError
from assistants.calls import cancelling
from assistants.decisions import NO_DECISION
from assistants.prompts import (
    ASKED_FOR_PERSON_MESSAGE,
    EDITED_MESSAGE,
    HANDED_BACK_CHECKED_MESSAGE,
    HANDED_BACK_MESSAGE,
    WITHDRAWN_MESSAGE,
)
from assistants.providers import (
    DEFAULT_RETRY_POLICY,
    ModelProviderError,
    describe_provider_error,
    is_provider_error,
)
from assistants.routing import last_tool_batch
from assistants.specialists import CallKind, Crew, build_crew
from assistants.state import PRIMARY_ASSISTANT, RESET, active_assistant
from conversations.events import (
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
from conversations.remembered_state import RemembersLastState
from conversations.run_cancel import CANCEL_WARNINGS_FILTER, CancelOnRequest, ended_in_failure
from conversations.run_stream import Streaming, message_events
from conversations.state_cache import PreviewCache, StateCache, snapshot_of
from conversations.unfinished_runs import UnfinishedRuns
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


# What the model is told of an action dropped outside a turn, by why.
_DROPPED_MESSAGES = {
    "handed_back": HANDED_BACK_MESSAGE,
    "handed_back_checked": HANDED_BACK_CHECKED_MESSAGE,
    "asked_for_person": ASKED_FOR_PERSON_MESSAGE,
    "withdrawn": WITHDRAWN_MESSAGE,
    "edited": EDITED_MESSAGE,
}
# Why an action is dropped outside a turn (``TravelAssistant.append``).
DropCause = Literal["handed_back", "handed_back_checked", "asked_for_person", "withdrawn", "edited"]


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
        self._states = StateCache(graph)
        self._previews: PreviewCache[ActionPreview] = PreviewCache()
        # What closes the runs that did not finish, and answers their recovered writes.
        self._unfinished = UnfinishedRuns(
            graph, self._states, db, self._sensitive_tools, self._owners
        )

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

        See ``StateCache.read``; a run of this assistant leaves the state it ended with.
        """
        return self._states.read(config)

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
        for event in self._unfinished.settle_recovered(
            config, self._unfinished.save_finished_step(config)
        ):
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
        # Every pending call gets an answer, the LangGraph way (``assistants.approvals``);
        # one left out of ``decisions`` is not run, and the model is told no one decided.
        # (The node itself answers the calls whose write already committed, and drops
        # what is given for them: no need to look those up here.)
        snapshot = self._state(self.config(thread))
        stopped = any(n in self.crew.sensitive_nodes for n in snapshot.next)
        messages: list[AnyMessage] = snapshot.values.get("messages", []) if stopped else []
        calls = pending_calls(messages, self.crew.sensitive_names)
        answers: dict[str, Any] = dict.fromkeys((str(c["id"]) for c in calls), NO_DECISION)
        answers.update((call_id, d.as_resume()) for call_id, d in decisions.items())
        run = self._arun(
            Command(resume=answers) if answers else None,
            self.config(thread),
            cancel,
            cancelled,
            stop_after=list(self.crew.sensitive_nodes) if only_actions else None,
        )
        async with aclosing(run):
            async for event in run:
                yield event

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
        done = self._unfinished.recovered(config, messages)
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
        done = self._unfinished.recovered(config, messages)
        return [
            PendingAction(str(c["id"]), c["name"], dict(c["args"]), self._owners[c["name"]].name)
            for c in pending_calls(messages, self.crew.sensitive_names)
            if str(c["id"]) in done
        ]

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
        snapshot = self._unfinished.save_finished_step(config)
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
        drop_pending: DropCause | None = None,
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
        snapshot = self._unfinished.save_finished_step(config)
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

    def preview(
        self, thread: Thread, action: PendingAction, *, deciding: bool = False
    ) -> ActionPreview:
        """Describe what ``action`` would do (before -> after, price), without doing it.

        Reads of the same saved state shortly after share one (``PreviewCache``), the
        decision too: what it records is what the customer was shown. ``deciding`` hands
        it to the node that carries the decision out, which shows it in its request.
        """
        saved = self._state(self.config(thread)).config.get("configurable") or {}
        checkpoint = saved.get("checkpoint_id")
        # Worked out again after a write of this process too: the data it shows moved.
        # (A write elsewhere re-checks its own figures when it runs.)
        preview = self._previews.get(
            (thread.thread_id, f"{checkpoint}@{self.db.generation}", action.tool_call_id),
            lambda: describe_action(
                self.db, thread.passenger_id, action.name, action.args, self.crew.previews
            ),
            checkpoint is None,
        )
        if deciding:
            HANDED.give(thread.thread_id, action.tool_call_id, preview)
        return preview

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
        return self._unfinished.close_cut(self.config(thread), cause)

    async def _arun(
        self,
        inputs: dict[str, Any] | Command[Any] | None,
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
        before its next node (``CancelOnRequest``), never in the middle of a node's
        tools, so a write that started is answered, not lost. A caller that stops
        reading early stops the run as a cancel would.

        Each step's checkpoint is saved before the next step starts
        (``durability="sync"``), so a process killed mid-turn loses at most the step that
        was running.
        """
        stop = cancel if cancel is not None else Cancel()
        logging.getLogger("langchain_core.callbacks.manager").addFilter(CANCEL_WARNINGS_FILTER)
        run_config: RunnableConfig = {**config, "callbacks": [CancelOnRequest(stop)]}
        stream = self.graph.astream(
            inputs,
            run_config,
            stream_mode=["messages", "updates", "checkpoints"],
            durability="sync",
            interrupt_after=stop_after,
        )
        streaming = Streaming()
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
                        for event in message_events(payload):
                            rest = streaming.finish(event)
                            if rest is not None:
                                yield rest
                            unsaved.append(event)
            finished = True
            for event in unsaved:
                yield event
        except GraphRecursionError:
            finished = True
            for event in self._unfinished.end_at_step_limit(config):
                yield event
        except TurnCancelledError:
            finished = True
            self._unfinished.close_cut(config, cancel_cause(stop, cancelled), streaming.cut())
            raise
        except Exception as error:
            finished = True
            if is_provider_error(error):
                cause: CutCause = "time_limit" if isinstance(error, ModelDeadlineError) else "model"
                self._unfinished.close_cut(config, cause, streaming.cut())
                raise ModelProviderError(describe_provider_error(error)) from error
            # A bug, the conversations database failing, or a lost turn lock: the turn is
            # left as a dead process leaves it, and whoever holds the conversation next
            # closes it (``crash``); without the lock, writing here could race them.
            raise
        else:
            if saved is not None:  # the run ended at its last checkpoint: keep its state
                self._states.remember(config, snapshot_of(saved))
                saver = self.graph.checkpointer
                if isinstance(saver, RemembersLastState):  # the next run starts from it
                    saver.remember_state(saved["config"], saved["values"])
        finally:
            if not finished:  # the caller stopped reading: stop the run, then close it
                stop.set()
                if await ended_in_failure(stream):
                    self._unfinished.close_cut(
                        config, cancel_cause(stop, cancelled), streaming.cut()
                    )
