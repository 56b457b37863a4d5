"""The one place where the assistants, their tools and the dialog stack are wired together.

``build_graph`` compiles the graph of SPEC section 2; ``TravelAssistant`` is the small API
that the terminal program, the tests and any future server use to drive it: send a
message, read the pending sensitive actions, approve or deny each with a reason, read the
active assistant.

Shape::

    START -> fetch_user_info -> (top of the dialog stack)
    primary_assistant -> primary_assistant_tools | enter_<X> | END
    enter_<X> -> <X> -> <X>_safe_tools | <X>_sensitive_tools | leave_skill | END
    leave_skill -> primary_assistant

Every ``<X>_sensitive_tools`` node is in ``interrupt_before``: the run stops before it,
and the caller resumes it with a decision per pending call (see ``TravelAssistant``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Union

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.types import RetryPolicy

from assistants.assistant import Assistant, ToolLike, make_runnable
from assistants.prompts import (
    DENIED_MESSAGE,
    ENTRY_MESSAGE,
    ENTRY_NOT_STARTED,
    LEAVE_MESSAGE,
    STEP_LIMIT_APOLOGY,
    STEP_LIMIT_TOOL_MESSAGE,
    UNKNOWN_TOOL_MESSAGE,
    primary_prompt,
)
from assistants.routing import (
    COMPLETE_OR_ESCALATE,
    ROUTING_TOOLS,
    CompleteOrEscalate,
    Step,
    ToBookCarRental,
    ToBookExcursion,
    ToFlightBookingAssistant,
    ToHotelBookingAssistant,
    ToolGroups,
    first_routing_target,
    last_tool_batch,
    next_step,
)
from assistants.specialists import SpecialistSpec, specialist_specs
from assistants.state import POP, SPECIALIST_NAMES, State, active_assistant
from db.engine import Database
from db.errors import TravelError
from db.passengers import passenger_exists, passenger_summary
from tools import ToolSet, build_tools
from tools.common import passenger_id_from

PRIMARY = "primary_assistant"
PRIMARY_TOOLS = "primary_assistant_tools"
FETCH_USER_INFO = "fetch_user_info"
LEAVE_SKILL = "leave_skill"
APPROVALS_KEY = "approvals"
# Steps one run (one customer message, or one resume after approvals) may take.
DEFAULT_RECURSION_LIMIT = 40

ModelsArg = BaseChatModel | Mapping[str, BaseChatModel]


class ConfigNode(Protocol):
    """A node that reads the run's config."""

    def __call__(self, state: State, config: RunnableConfig) -> dict[str, Any]:
        """Return the node's update."""


class StateNode(Protocol):
    """A node that reads only the state."""

    def __call__(self, state: State) -> dict[str, Any]:
        """Return the node's update."""


class GraphConfigError(ValueError):
    """The graph was wired wrongly; the message says what to fix."""


class ModelProviderError(Exception):
    """The model endpoint kept failing; the conversation is saved and can go on."""


def entry_node_name(specialist: str) -> str:
    """Return the name of the node that hands the conversation to ``specialist``."""
    return f"enter_{specialist}"


def safe_tools_node_name(specialist: str) -> str:
    """Return the name of the node running ``specialist``'s safe tools."""
    return f"{specialist}_safe_tools"


def sensitive_tools_node_name(specialist: str) -> str:
    """Return the name of the node running ``specialist``'s sensitive tools."""
    return f"{specialist}_sensitive_tools"


SENSITIVE_NODES: tuple[str, ...] = tuple(sensitive_tools_node_name(n) for n in SPECIALIST_NAMES)


# --- provider errors -----------------------------------------------------------------


def is_transient_provider_error(error: Exception) -> bool:
    """Tell whether a model call failed for a reason worth retrying (timeouts, 429, 5xx)."""
    try:
        import openai
    except ImportError:  # pragma: no cover - langchain-openai depends on openai
        return False
    transient: tuple[type[Exception], ...] = (
        openai.APITimeoutError,
        openai.APIConnectionError,
        openai.RateLimitError,
        openai.InternalServerError,
        TimeoutError,
        ConnectionError,
    )
    return isinstance(error, transient)


DEFAULT_RETRY_POLICY = RetryPolicy(
    initial_interval=1.0,
    backoff_factor=2.0,
    max_interval=20.0,
    max_attempts=4,
    retry_on=is_transient_provider_error,
)


# --- tool nodes ------------------------------------------------------------------------


def not_run_answer(call: ToolCall, content: str, why: str) -> ToolMessage:
    """Answer a call that the graph did not execute (denied, unknown, superseded).

    The artifact (kept in the state, never sent to the model) says why, so callers and
    the evaluation can tell a refusal by a tool from a call that never ran.
    """
    return ToolMessage(
        content=content,
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
        artifact={"not_run": why},
    )


def was_executed(message: ToolMessage) -> bool:
    """Tell whether a tool answer comes from running the tool."""
    return not (isinstance(message.artifact, dict) and "not_run" in message.artifact)


def tool_error_message(error: TravelError | ToolInvocationError) -> str:
    """Turn a business failure or malformed arguments into the text the model reads."""
    if isinstance(error, ToolInvocationError):
        return f"Error: {error.message}"
    return f"Error: {error}"


# ToolNode infers which exceptions the handler takes from its annotation, and cannot read
# the string annotations this module's ``from __future__ import annotations`` produces.
tool_error_message.__annotations__ = {
    "error": Union[TravelError, ToolInvocationError],  # noqa: UP007 - ToolNode checks for Union
    "return": str,
}


def _ordered(calls: Sequence[ToolCall], answers: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Return ``answers`` in the order of the calls they answer."""
    position = {call["id"]: index for index, call in enumerate(calls)}
    return sorted(
        answers,
        key=lambda m: (
            position.get(m.tool_call_id, len(position)) if isinstance(m, ToolMessage) else 0
        ),
    )


def _run_tools(
    tool_node: ToolNode, calls: list[ToolCall], config: RunnableConfig
) -> list[AnyMessage]:
    if not calls:
        return []
    result = tool_node.invoke({"messages": [AIMessage(content="", tool_calls=calls)]}, config)
    messages: list[AnyMessage] = result["messages"]
    return messages


def make_safe_tools_node(owner: str, tools: Sequence[BaseTool], groups: ToolGroups) -> ConfigNode:
    """Return the node that answers ``owner``'s safe calls and calls to unknown tools."""
    tool_node = ToolNode(list(tools), handle_tool_errors=tool_error_message)
    known = {t.name for t in tools}
    available = ", ".join(sorted(known | groups.sensitive | groups.routing))

    def run_safe_tools(state: State, config: RunnableConfig) -> dict[str, Any]:
        _, pending = last_tool_batch(state["messages"])
        calls = groups.select(pending, "safe_tools")
        answers = _run_tools(tool_node, [c for c in calls if c["name"] in known], config)
        answers += [
            not_run_answer(
                c, UNKNOWN_TOOL_MESSAGE.format(name=c["name"], available=available), "unknown_tool"
            )
            for c in calls
            if c["name"] not in known
        ]
        return {"messages": _ordered(calls, answers)}

    run_safe_tools.__name__ = f"{owner}_safe_tools"
    return run_safe_tools


@dataclass(frozen=True)
class Decision:
    """The customer's answer to one pending sensitive call."""

    approved: bool
    reason: str | None = None

    def as_config(self) -> dict[str, Any]:
        """Return the decision as plain data, as it travels in the run's config."""
        return {"approved": self.approved, "reason": self.reason}


def _decisions_from(config: RunnableConfig) -> Mapping[str, Any] | None:
    configurable = config.get("configurable") or {}
    decisions = configurable.get(APPROVALS_KEY)
    return decisions if isinstance(decisions, Mapping) else None


def denial_message(call: ToolCall, reason: str | None) -> ToolMessage:
    """Return the answer to a sensitive call the customer declined."""
    reason = (reason or "").strip()
    reason_text = f"Their reason: {reason!r}. " if reason else "They gave no reason. "
    return not_run_answer(call, DENIED_MESSAGE.format(reason_text=reason_text), "declined")


def make_sensitive_tools_node(
    owner: str, tools: Sequence[BaseTool], groups: ToolGroups
) -> ConfigNode:
    """Return the node that runs approved sensitive calls and answers denied ones.

    Decisions travel in ``config["configurable"]["approvals"]``: a mapping of tool call
    id to ``{"approved": bool, "reason": str | None}``. A call with no decision in the
    mapping is denied (only an explicit yes approves). When the mapping is absent
    altogether, the run was resumed the plain LangGraph way (``invoke(None, config)``,
    as in the design card) and every pending call counts as approved.
    """
    tool_node = ToolNode(list(tools), handle_tool_errors=tool_error_message)

    def run_sensitive_tools(state: State, config: RunnableConfig) -> dict[str, Any]:
        _, pending = last_tool_batch(state["messages"])
        calls = groups.select(pending, "sensitive_tools")
        decisions = _decisions_from(config)
        answers: list[AnyMessage] = []
        # One call at a time, in the model's order: writes never race each other.
        for call in calls:
            decision = None if decisions is None else decisions.get(str(call["id"]))
            approved = decisions is None or (
                isinstance(decision, Mapping) and decision.get("approved") is True
            )
            if approved:
                answers += _run_tools(tool_node, [call], config)
            else:
                reason = decision.get("reason") if isinstance(decision, Mapping) else None
                answers.append(denial_message(call, reason))
        return {"messages": answers}

    run_sensitive_tools.__name__ = f"{owner}_sensitive_tools"
    return run_sensitive_tools


def create_entry_node(spec: SpecialistSpec) -> StateNode:
    """Return the entry node of one specialist (one closure serves all four).

    It answers the routing call with a ToolMessage telling the specialist who it is and
    pushes it on the dialog stack; any other routing call of the batch is answered as
    not started.
    """

    def enter(state: State) -> dict[str, Any]:
        _, pending = last_tool_batch(state["messages"])
        routing = [c for c in pending if c["name"] in ROUTING_TOOLS]
        chosen = next(c for c in routing if ROUTING_TOOLS[c["name"]] == spec.name)
        answers: list[AnyMessage] = [
            ToolMessage(
                content=ENTRY_MESSAGE.format(title=spec.title),
                tool_call_id=chosen["id"],
                name=chosen["name"],
            )
        ]
        answers += [
            not_run_answer(
                c, ENTRY_NOT_STARTED.format(title=spec.title), "one_specialist_at_a_time"
            )
            for c in routing
            if c is not chosen
        ]
        return {"messages": answers, "dialog_state": spec.name}

    enter.__name__ = entry_node_name(spec.name)
    return enter


def leave_skill(state: State) -> dict[str, Any]:
    """Answer every ``CompleteOrEscalate`` call, pop the stack, return to the primary."""
    _, pending = last_tool_batch(state["messages"])
    calls = [c for c in pending if c["name"] == COMPLETE_OR_ESCALATE]
    answers = [
        ToolMessage(
            content=LEAVE_MESSAGE.format(reason=str(c["args"].get("reason") or "no reason given")),
            tool_call_id=c["id"],
            name=c["name"],
        )
        for c in calls
    ]
    return {"messages": answers, "dialog_state": POP}


# --- user info and the first node -------------------------------------------------------


def make_fetch_user_info(db: Database) -> ConfigNode:
    """Return the first node of every turn: it loads the passenger's bookings.

    It also closes any tool batch left unanswered (a new message sent while an approval
    was pending), so the history the model sees is always well formed.
    """

    def fetch_user_info(state: State, config: RunnableConfig) -> dict[str, Any]:
        passenger_id = passenger_id_from(config)
        with db.session() as session:
            summary = passenger_summary(session, passenger_id, db.clock())
        update: dict[str, Any] = {"user_info": json.dumps(summary, ensure_ascii=False, default=str)}
        repaired = _close_abandoned_batch(state["messages"])
        if repaired:
            update["messages"] = repaired
        return update

    return fetch_user_info


def _close_abandoned_batch(messages: Sequence[AnyMessage]) -> list[BaseMessage]:
    """Answer calls of an earlier batch that a newer customer message left unanswered."""
    if not messages or not isinstance(messages[-1], HumanMessage):
        return []
    ai, pending = last_tool_batch(messages[:-1])
    if ai is None or not pending:
        return []
    latest = messages[-1]
    answers: list[AnyMessage] = [
        not_run_answer(
            c,
            "Not run: the customer sent a new message instead of approving this action.",
            "superseded",
        )
        for c in pending
    ]
    # The answers must directly follow the calls, so the new message moves after them.
    moved = HumanMessage(content=latest.content, additional_kwargs=latest.additional_kwargs)
    removal: list[BaseMessage] = [RemoveMessage(id=latest.id)] if latest.id else []
    return [*removal, *answers, moved]


def route_to_workflow(state: State) -> str:
    """Route the start of a turn to whoever is on top of the dialog stack."""
    return active_assistant(state.get("dialog_state"))


# --- the factory ------------------------------------------------------------------------


def _model_for(models: ModelsArg, assistant: str) -> BaseChatModel:
    if isinstance(models, BaseChatModel):
        return models
    model = models.get(assistant) or models.get("default")
    if model is None:
        raise GraphConfigError(
            f"No chat model for {assistant!r}: pass a model under that name or under 'default' "
            f"(got {sorted(models)})."
        )
    return model


def _validate(primary_tools: Sequence[BaseTool], specs: Sequence[SpecialistSpec]) -> None:
    reserved = set(ROUTING_TOOLS) | {COMPLETE_OR_ESCALATE}
    owners: list[tuple[str, list[BaseTool], list[BaseTool]]] = [
        ("primary_assistant", list(primary_tools), [])
    ] + [(s.name, list(s.safe_tools), list(s.sensitive_tools)) for s in specs]
    for owner, safe, sensitive in owners:
        names = [t.name for t in [*safe, *sensitive]]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise GraphConfigError(
                f"{owner} lists {duplicates} more than once (a tool is either safe or "
                "sensitive, once)."
            )
        clashes = sorted(set(names) & reserved)
        if clashes:
            raise GraphConfigError(
                f"{owner} has tools named like routing tools {clashes}; rename the tools."
            )
    if sorted(s.name for s in specs) != sorted(SPECIALIST_NAMES):
        raise GraphConfigError(
            f"Expected one spec for each of {list(SPECIALIST_NAMES)}, "
            f"got {[s.name for s in specs]}."
        )
    for spec in specs:
        if not spec.sensitive_tools:
            raise GraphConfigError(f"{spec.name} has no sensitive tools; it could never act.")


def _primary_tools(tools: ToolSet) -> list[BaseTool]:
    found = [tools.search_flights, tools.fetch_user_flight_information]
    found += [t for t in (tools.lookup_policy, tools.tavily_search) if t is not None]
    return found


def build_graph(
    models: ModelsArg,
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    db: Database,
    tools: ToolSet | None = None,
    retry_policy: RetryPolicy | None = DEFAULT_RETRY_POLICY,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build and compile the assistant graph.

    Args:
        models: One chat model for every assistant, or a mapping from assistant name
            (``primary_assistant``, ``update_flight``, ...) to model, with an optional
            ``default`` entry.
        checkpointer: Where conversations are saved (``InMemorySaver`` in tests, a
            SQLite saver in the terminal program). ``None`` compiles without one, which
            is only useful for drawing the graph.
        db: The travel database the tools and ``fetch_user_info`` read.
        tools: The tools; built from ``db`` when omitted.
        retry_policy: How failed model calls are retried; ``None`` disables retries.

    Returns:
        The compiled graph, interrupting before every sensitive-tool node.

    Raises:
        GraphConfigError: A model is missing or the tools are wired inconsistently.
    """
    tools = tools or build_tools(db)
    specs = specialist_specs(tools)
    primary_tools = _primary_tools(tools)
    _validate(primary_tools, specs)

    builder = StateGraph(State)
    builder.add_node(FETCH_USER_INFO, make_fetch_user_info(db))
    builder.add_edge(START, FETCH_USER_INFO)
    builder.add_conditional_edges(FETCH_USER_INFO, route_to_workflow, [PRIMARY, *SPECIALIST_NAMES])

    routing_tools: list[ToolLike] = [
        ToFlightBookingAssistant,
        ToBookCarRental,
        ToHotelBookingAssistant,
        ToBookExcursion,
    ]
    primary = Assistant(
        PRIMARY,
        make_runnable(
            _model_for(models, PRIMARY), primary_prompt(), [*primary_tools, *routing_tools]
        ),
        clock=db.clock,
    )
    primary_groups = ToolGroups(sensitive=frozenset(), routing=frozenset(ROUTING_TOOLS))
    builder.add_node(PRIMARY, primary, retry_policy=retry_policy)
    builder.add_node(PRIMARY_TOOLS, make_safe_tools_node(PRIMARY, primary_tools, primary_groups))
    primary_destinations = {
        "end": END,
        "assistant": PRIMARY,
        "safe_tools": PRIMARY_TOOLS,
    }

    def route_primary(state: State) -> str:
        step = next_step(state["messages"], primary_groups)
        if step == "enter":
            _, pending = last_tool_batch(state["messages"])
            target = first_routing_target(pending)
            assert target is not None  # next_step only says "enter" for routing calls
            return entry_node_name(target)
        return primary_destinations[step]

    entry_nodes = [entry_node_name(s.name) for s in specs]
    builder.add_conditional_edges(
        PRIMARY, route_primary, [*primary_destinations.values(), *entry_nodes]
    )
    builder.add_conditional_edges(PRIMARY_TOOLS, route_primary, [PRIMARY, *entry_nodes])

    for spec in specs:
        _add_specialist(builder, spec, _model_for(models, spec.name), db, retry_policy)

    builder.add_node(LEAVE_SKILL, leave_skill)
    builder.add_edge(LEAVE_SKILL, PRIMARY)
    return builder.compile(checkpointer=checkpointer, interrupt_before=list(SENSITIVE_NODES))


def _add_specialist(
    builder: StateGraph[State, None, State, State],
    spec: SpecialistSpec,
    model: BaseChatModel,
    db: Database,
    retry_policy: RetryPolicy | None,
) -> None:
    """Add one specialist's four nodes and their edges."""
    groups = ToolGroups(
        sensitive=frozenset(t.name for t in spec.sensitive_tools),
        routing=frozenset({COMPLETE_OR_ESCALATE}),
    )
    bound: list[ToolLike] = [*spec.safe_tools, *spec.sensitive_tools, CompleteOrEscalate]
    assistant = Assistant(spec.name, make_runnable(model, spec.prompt, bound), clock=db.clock)
    safe_node = safe_tools_node_name(spec.name)
    sensitive_node = sensitive_tools_node_name(spec.name)
    builder.add_node(entry_node_name(spec.name), create_entry_node(spec))
    builder.add_node(spec.name, assistant, retry_policy=retry_policy)
    builder.add_node(safe_node, make_safe_tools_node(spec.name, spec.safe_tools, groups))
    builder.add_node(
        sensitive_node, make_sensitive_tools_node(spec.name, spec.sensitive_tools, groups)
    )
    builder.add_edge(entry_node_name(spec.name), spec.name)
    destinations: dict[Step, str] = {
        "end": END,
        "assistant": spec.name,
        "safe_tools": safe_node,
        "sensitive_tools": sensitive_node,
        "leave": LEAVE_SKILL,
    }

    def route_specialist(state: State) -> str:
        step = next_step(state["messages"], groups)
        # A specialist has no routing tools of the primary's, so "enter" cannot occur.
        return destinations[step]

    route_specialist.__name__ = f"route_{spec.name}"
    # The groups run in a fixed order, so a tool node only leads to the groups after it.
    builder.add_conditional_edges(spec.name, route_specialist, list(destinations.values()))
    builder.add_conditional_edges(
        safe_node, route_specialist, [sensitive_node, LEAVE_SKILL, spec.name]
    )
    builder.add_conditional_edges(sensitive_node, route_specialist, [LEAVE_SKILL, spec.name])


def drawing_model() -> BaseChatModel:
    """Return a stand-in model for building the graph without calling any model.

    Used to draw the graph and to read saved conversations (``travel-assistant sessions``).
    """
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class _InertModel(FakeListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return _InertModel(responses=[""])


def draw_mermaid(db: Database | None = None) -> str:
    """Return the graph as a Mermaid diagram (no model is called)."""
    database = db or Database.from_url("sqlite://")
    graph = build_graph(drawing_model(), None, db=database)
    return graph.get_graph().draw_mermaid()


# --- the caller's API ---------------------------------------------------------------------


@dataclass(frozen=True)
class PendingAction:
    """A sensitive tool call waiting for the customer's decision."""

    tool_call_id: str
    name: str
    args: dict[str, Any]
    assistant: str


@dataclass(frozen=True)
class TokenEvent:
    """A piece of an assistant's reply, as the model streams it."""

    text: str
    assistant: str
    message_id: str | None


@dataclass(frozen=True)
class MessageEvent:
    """A complete message added by a node (an assistant's reply or a tool result)."""

    message: AnyMessage
    node: str


TurnEvent = TokenEvent | MessageEvent


@dataclass(frozen=True)
class Thread:
    """One conversation: its id and the passenger it acts for."""

    thread_id: str
    passenger_id: str


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
        *,
        recursion_limit: int = DEFAULT_RECURSION_LIMIT,
    ) -> None:
        """Wrap ``graph`` (from ``build_graph``) over ``db``."""
        self.graph = graph
        self.db = db
        self.recursion_limit = recursion_limit

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

    def check_passenger(self, passenger_id: str) -> bool:
        """Tell whether ``passenger_id`` is a known passenger."""
        with self.db.session() as session:
            return passenger_exists(session, passenger_id)

    def send(self, thread: Thread, text: str) -> Iterator[TurnEvent]:
        """Add the customer's message and run until the reply or an approval stop.

        Raises:
            ModelProviderError: The model endpoint failed after the retries.
        """
        yield from self._run({"messages": [HumanMessage(content=text)]}, self.config(thread))

    def resolve(self, thread: Thread, decisions: Mapping[str, Decision]) -> Iterator[TurnEvent]:
        """Resume a run stopped for approval with one decision per pending call.

        A pending call missing from ``decisions`` is denied.
        """
        payload = {call_id: d.as_config() for call_id, d in decisions.items()}
        yield from self._run(None, self.config(thread, **{APPROVALS_KEY: payload}))

    def approve_all(self, thread: Thread) -> Iterator[TurnEvent]:
        """Approve every pending call."""
        decisions = {a.tool_call_id: Decision(True) for a in self.pending_actions(thread)}
        return self.resolve(thread, decisions)

    def deny_all(self, thread: Thread, reason: str | None) -> Iterator[TurnEvent]:
        """Deny every pending call with the same reason."""
        decisions = {a.tool_call_id: Decision(False, reason) for a in self.pending_actions(thread)}
        return self.resolve(thread, decisions)

    def pending_actions(self, thread: Thread) -> list[PendingAction]:
        """Return the sensitive calls waiting for a decision, in the model's order."""
        snapshot = self.graph.get_state(self.config(thread))
        waiting = [n for n in snapshot.next if n in SENSITIVE_NODES]
        if not waiting:
            return []
        owner = waiting[0].removesuffix("_sensitive_tools")
        _, pending = last_tool_batch(snapshot.values.get("messages", []))
        # Safe calls run before the stop and routing calls after it, so what is still
        # unanswered here, routing calls aside, is exactly the sensitive group.
        routing = {*ROUTING_TOOLS, COMPLETE_OR_ESCALATE}
        return [
            PendingAction(str(c["id"]), c["name"], dict(c["args"]), owner)
            for c in pending
            if c["name"] not in routing
        ]

    def active_assistant(self, thread: Thread) -> str:
        """Return the assistant that will answer the next message."""
        snapshot = self.graph.get_state(self.config(thread))
        return active_assistant(snapshot.values.get("dialog_state"))

    def messages(self, thread: Thread) -> list[AnyMessage]:
        """Return the saved conversation of ``thread``."""
        snapshot = self.graph.get_state(self.config(thread))
        messages: list[AnyMessage] = snapshot.values.get("messages", [])
        return messages

    def _run(self, inputs: dict[str, Any] | None, config: RunnableConfig) -> Iterator[TurnEvent]:
        try:
            for mode, payload in self.graph.stream(
                inputs, config, stream_mode=["messages", "updates"]
            ):
                yield from _events(mode, payload)
        except GraphRecursionError:
            yield from self._end_at_step_limit(config)
        except Exception as error:
            if is_transient_provider_error(error) or _is_provider_error(error):
                raise ModelProviderError(_describe_provider_error(error)) from error
            raise

    def _end_at_step_limit(self, config: RunnableConfig) -> Iterator[TurnEvent]:
        """Close a run that hit the recursion limit with a polite message."""
        snapshot = self.graph.get_state(config)
        _, pending = last_tool_batch(snapshot.values.get("messages", []))
        closing: list[AnyMessage] = [
            not_run_answer(c, STEP_LIMIT_TOOL_MESSAGE, "step_limit") for c in pending
        ]
        apology = AIMessage(content=STEP_LIMIT_APOLOGY)
        closing.append(apology)
        owner = active_assistant(snapshot.values.get("dialog_state"))
        self.graph.update_state(config, {"messages": closing}, as_node=owner)
        yield MessageEvent(apology, owner)


def _events(mode: str, payload: Any) -> Iterator[TurnEvent]:
    if mode == "messages":
        chunk, metadata = payload
        if isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str) and chunk.content:
            yield TokenEvent(chunk.content, str(metadata.get("langgraph_node", "")), chunk.id)
        return
    for node, update in (payload or {}).items():
        if not isinstance(update, Mapping):
            continue
        for message in update.get("messages", []) or []:
            if isinstance(message, AIMessage | ToolMessage):
                yield MessageEvent(message, node)


def _is_provider_error(error: Exception) -> bool:
    try:
        import openai
    except ImportError:  # pragma: no cover
        return False
    return isinstance(error, openai.OpenAIError)


def _describe_provider_error(error: Exception) -> str:
    name = type(error).__name__
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"The model endpoint failed ({name}{': ' + text if text else ''})."


def main() -> int:
    """Print the graph as Mermaid (``python graph.py``)."""
    sys.stdout.write(draw_mermaid() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
