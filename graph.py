"""The one place where the assistants, their tools and the dialog stack are wired together.

``build_graph`` compiles the graph of SPEC section 2 from a ``Crew`` (the specialists'
rows of ``assistants.specialists`` with their tools built) and checks the wiring while it
builds. The nodes themselves live in ``assistants.nodes``, ``assistants.approvals`` and
``assistants.assistant``; the API callers drive the graph with is
``conversations.TravelAssistant``.

Shape::

    START -> fetch_user_info -> (top of the dialog stack)
    primary_assistant -> primary_assistant_tools | enter_<X> | END
    enter_<X> -> <X> -> <X>_safe_tools | <X>_sensitive_tools | leave_skill | END
    leave_skill -> primary_assistant

Every ``<X>_sensitive_tools`` node is in ``interrupt_before``: the run stops before it,
and every caller resumes it with ``Command(resume=...)``, an answer per pending call
(``assistants.approvals``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import RetryPolicy

from assistants.approvals import make_sensitive_tools_node
from assistants.assistant import Assistant, ToolLike
from assistants.nodes import (
    FETCH_USER_INFO,
    LEAVE_SKILL,
    PRIMARY_TOOLS,
    create_entry_node,
    leave_skill,
    make_fetch_user_info,
    make_safe_tools_node,
)
from assistants.providers import DEFAULT_RETRY_POLICY
from assistants.routing import (
    COMPLETE_OR_ESCALATE,
    CompleteOrEscalate,
    Step,
    first_routing_call,
    last_tool_batch,
    next_step,
)
from assistants.specialists import Crew, Member, SpecialistNode, build_crew
from assistants.state import (
    PRIMARY_ASSISTANT,
    Configuration,
    Question,
    Reply,
    State,
    active_assistant,
)
from db.engine import Database

PRIMARY: Final = PRIMARY_ASSISTANT
# Where a router can lead besides a specialist's own nodes (``SpecialistNode``): the
# primary assistant, its tools, leaving a specialist, or the end of the run.
FixedNode = Literal["primary_assistant", "primary_assistant_tools", "leave_skill", "__end__"]
Route = FixedNode | SpecialistNode
_END = cast(Literal["__end__"], END)
RESERVED_NODE_NAMES = frozenset({PRIMARY, PRIMARY_TOOLS, FETCH_USER_INFO, LEAVE_SKILL})
# Steps one run (one customer message, or one resume after approvals) may take.
DEFAULT_RECURSION_LIMIT = 40

ModelsArg = BaseChatModel | Mapping[str, BaseChatModel]


# Tools that wait on the network (the web search): a node with one of them runs off the
# event loop, in LangGraph's executor, so its wait holds no other turn up.
REMOTE_TOOLS = frozenset({"tavily_search"})


class InPlace(Runnable[Any, Any]):
    """A sync node or router that an async run calls in place, on its event loop.

    LangGraph runs a plain sync function of an async run (``astream``) in a worker
    thread: a hand-off there and back for every node and every router, each step. These
    are short: pure functions of the state, or a few local queries (the travel database's
    reads and writes, as the checkpoint saver's on the loop, ``conversations.loop_saver``).
    A sync run (``invoke``, ``stream``) calls them as before. They are not traced on
    their own: LangGraph traces every node's run around them.
    """

    def __init__(self, func: Callable[..., Any], name: str | None = None) -> None:
        self.func = func
        self.name = name or getattr(func, "__name__", None)
        self._with_config = len(inspect.signature(func).parameters) > 1

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Call the function (with the run's config, when it takes one)."""
        return self.func(input, config) if self._with_config else self.func(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Call the function on the loop: it neither waits nor takes long."""
        return self.invoke(input, config)


def _as_it_is(func: Callable[..., Any]) -> Callable[..., Any]:
    """Leave a node or router to LangGraph (its executor, for a sync one in an async run)."""
    return func


class GraphConfigError(ValueError):
    """The graph was wired wrongly; the message says what to fix."""


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


def validate_crew(crew: Crew) -> None:
    """Raise ``GraphConfigError`` naming the fix when the crew cannot be wired."""
    names = [m.name for m in crew.members]
    routing = [m.specialist.routing_name for m in crew.members]
    for what, values in (("specialist names", names), ("routing tools", routing)):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise GraphConfigError(
                f"The {what} {repeated} appear more than once; make each unique."
            )
    taken = sorted(set(names) & RESERVED_NODE_NAMES)
    if taken:
        raise GraphConfigError(f"Specialists may not be named {taken}: those are graph nodes.")
    reserved_tools = {*routing, COMPLETE_OR_ESCALATE}
    owners = [(PRIMARY, list(crew.primary_tools))] + [
        (m.name, [*m.tools.safe, *m.tools.sensitive]) for m in crew.members
    ]
    for owner, tools in owners:
        tool_names = [t.name for t in tools]
        repeated = sorted({n for n in tool_names if tool_names.count(n) > 1})
        if repeated:
            raise GraphConfigError(
                f"{owner} lists {repeated} more than once (a tool is either safe or "
                "sensitive, once)."
            )
        clashes = sorted(set(tool_names) & reserved_tools)
        if clashes:
            raise GraphConfigError(
                f"{owner} has tools named like routing tools {clashes}; rename the tools."
            )
    for member in crew.members:
        if not member.tools.sensitive:
            raise GraphConfigError(f"{member.name} has no sensitive tools; it could never act.")


def build_graph(
    models: ModelsArg,
    checkpointer: BaseCheckpointSaver[Any] | None,
    *,
    db: Database,
    crew: Crew | None = None,
    retry_policy: RetryPolicy | None = DEFAULT_RETRY_POLICY,
    in_place: bool = True,
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
        crew: The specialists with their tools; by default every row of
            ``SPECIALISTS`` over ``db``, without web search (pass a crew built with a
            Tavily key for it).
        retry_policy: How failed model calls are retried; ``None`` disables retries.
        in_place: Run the sync nodes and routers of an async run on its event loop
            (``InPlace``); ``False`` leaves them to LangGraph's executor, as LangGraph's
            own server wants (it refuses blocking calls on its loop).

    Returns:
        The compiled graph, interrupting before every sensitive-tool node.

    Raises:
        GraphConfigError: A model is missing or the crew is wired inconsistently.
    """
    crew = crew or build_crew(db)
    validate_crew(crew)
    place: Callable[..., Any] = InPlace if in_place else _as_it_is

    builder = StateGraph(
        State, context_schema=Configuration, input_schema=Question, output_schema=Reply
    )
    builder.add_node(FETCH_USER_INFO, place(make_fetch_user_info(db)))
    builder.add_edge(START, FETCH_USER_INFO)
    assistants = [PRIMARY, *(m.name for m in crew.members)]

    def route_to_workflow(state: State) -> Route:
        """Start the turn with whoever is on top of the dialog stack."""
        name = active_assistant(state.get("dialog_state"))
        return PRIMARY if name == PRIMARY else SpecialistNode(name)

    builder.add_conditional_edges(FETCH_USER_INFO, place(route_to_workflow), assistants)
    _add_primary(builder, crew, _model_for(models, PRIMARY), db, retry_policy, place)
    for member in crew.members:
        model = _model_for(models, member.name)
        _add_specialist(builder, crew, member, model, db, retry_policy, place)
    builder.add_node(LEAVE_SKILL, place(leave_skill))
    builder.add_edge(LEAVE_SKILL, PRIMARY)
    return builder.compile(checkpointer=checkpointer, interrupt_before=list(crew.sensitive_nodes))


def _add_primary(
    builder: StateGraph[State, Configuration, Question, Reply],
    crew: Crew,
    model: BaseChatModel,
    db: Database,
    retry_policy: RetryPolicy | None,
    place: Callable[..., Any],
) -> None:
    """Add the primary assistant and its tools node, with the routes to each specialist."""
    routing: list[ToolLike] = [m.specialist.routing_tool for m in crew.members]
    bound: list[ToolLike] = [*crew.primary_tools, *routing]
    primary = Assistant(PRIMARY, model, crew.prompt(), bound, clock=db.clock)
    groups = crew.primary_groups
    builder.add_node(PRIMARY, primary.as_node(), retry_policy=retry_policy)
    tools_node = make_safe_tools_node(PRIMARY_TOOLS, crew.primary_tools, groups)
    remote = any(t.name in REMOTE_TOOLS for t in crew.primary_tools)
    builder.add_node(PRIMARY_TOOLS, tools_node if remote else place(tools_node))

    def route_primary(state: State) -> Route:
        """Go to the primary's tools, into a specialist, back to the primary, or end."""
        step = next_step(state["messages"], groups)
        if step == "enter":
            _, pending = last_tool_batch(state["messages"])
            chosen = first_routing_call(pending, crew.hand_overs)
            assert chosen is not None  # next_step only says "enter" for routing calls
            return crew.hand_overs[chosen["name"]].specialist.entry_node
        if step == "safe_tools":
            return PRIMARY_TOOLS
        if step == "assistant":
            return PRIMARY
        return _END

    entry_nodes = [m.specialist.entry_node for m in crew.members]
    router = place(route_primary)
    builder.add_conditional_edges(PRIMARY, router, [END, PRIMARY, PRIMARY_TOOLS, *entry_nodes])
    builder.add_conditional_edges(PRIMARY_TOOLS, router, [PRIMARY, *entry_nodes])


def _add_specialist(
    builder: StateGraph[State, Configuration, Question, Reply],
    crew: Crew,
    member: Member,
    model: BaseChatModel,
    db: Database,
    retry_policy: RetryPolicy | None,
    place: Callable[..., Any],
) -> None:
    """Add one specialist's four nodes and their edges."""
    spec = member.specialist
    bound: list[ToolLike] = [*member.tools.safe, *member.tools.sensitive, CompleteOrEscalate]
    assistant = Assistant(
        spec.name, model, crew.prompt(), bound, clock=db.clock, role_note=spec.role_note
    )
    builder.add_node(spec.entry_node, place(create_entry_node(member, crew)))
    builder.add_node(spec.name, assistant.as_node(), retry_policy=retry_policy)
    safe = make_safe_tools_node(spec.safe_node, member.tools.safe, member.groups)
    remote = any(t.name in REMOTE_TOOLS for t in [*member.tools.safe, *member.tools.sensitive])
    builder.add_node(spec.safe_node, safe if remote else place(safe))
    sensitive = make_sensitive_tools_node(member, db)
    builder.add_node(spec.sensitive_node, sensitive if remote else place(sensitive))
    builder.add_edge(spec.entry_node, spec.name)
    destinations: Mapping[Step, Route] = {
        "end": _END,
        "assistant": spec.node,
        "safe_tools": spec.safe_node,
        "sensitive_tools": spec.sensitive_node,
        "leave": LEAVE_SKILL,
    }

    def route_specialist(state: State) -> Route:
        """Go to the next group of unanswered calls, back to the specialist, or end."""
        # A specialist has no hand-over tools of the primary's, so "enter" cannot occur.
        return destinations[next_step(state["messages"], member.groups)]

    route_specialist.__name__ = f"route_{spec.name}"
    router = place(route_specialist)
    # The groups run in a fixed order, so a tool node only leads to the groups after it.
    builder.add_conditional_edges(spec.name, router, list(destinations.values()))
    builder.add_conditional_edges(
        spec.safe_node, router, [spec.sensitive_node, LEAVE_SKILL, spec.name]
    )
    builder.add_conditional_edges(spec.sensitive_node, router, [LEAVE_SKILL, spec.name])


def drawing_model() -> BaseChatModel:
    """Return a stand-in model for building the graph without calling any model.

    Used to draw the graph and to read saved conversations (``travel-assistant sessions``).
    """
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class _InertModel(FakeListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return _InertModel(responses=[""])


def draw_mermaid(db: Database | None = None, crew: Crew | None = None) -> str:
    """Return the graph as a Mermaid diagram (no model is called)."""
    database = db or Database.from_url("sqlite://")
    graph = build_graph(drawing_model(), None, db=database, crew=crew)
    return graph.get_graph().draw_mermaid()


def main(argv: Sequence[str] | None = None) -> int:
    """Print the graph as Mermaid (``python graph.py``)."""
    sys.stdout.write(draw_mermaid() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
