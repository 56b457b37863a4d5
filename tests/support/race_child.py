"""One racer of ``tests/integration/test_races.py``: runs approved tool calls in its own process.

The test starts several of these (``multiprocessing``'s forkserver context, which forks
each from a clean process that imported this module and nothing of the test) and keeps
them for the whole module, so the program is imported once for all. For every race
it sends each racer a job over its pipe: the database URL and, for a racer that takes
part, one sensitive tool call with its passenger, conversation and call id. Every racer
(taking part or not) waits on one shared barrier, so the calls start together, and then
runs its call through the graph's own sensitive-tools node with the call approved, over a
``Database`` of its own on that URL: exactly what the graph runs once the customer said
yes. It answers with the ToolMessage's status and text, or with the traceback of an
exception that escaped the node (a crash the customer would see instead of an error
message). A racer that cannot take part (its database does not open, or another one's
did not) answers ``Unready`` instead, and the race is called off for all.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from datetime import datetime
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from sqlalchemy import text

from assistants.approvals import make_sensitive_tools_node
from assistants.specialists import Member, build_crew
from assistants.state import State
from db.clock import fixed_clock
from db.engine import Database

# How long a racer waits for the others at the barrier before giving up.
BARRIER_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Call:
    """One tool call to race, as the model would have made it in one conversation."""

    tool: str
    args: dict[str, Any]
    passenger_id: str
    thread_id: str
    call_id: str


@dataclass(frozen=True)
class Outcome:
    """What one racer got: the answer the model would read, or an escaped exception."""

    status: str | None
    content: str
    crash: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Unready:
    """Why a racer could not take part in a race (no call was run)."""

    reason: str


@dataclass(frozen=True)
class Job:
    """A race for every racer: ``call`` is ``None`` for a racer that sits this one out."""

    url: str
    call: Call | None


@dataclass(frozen=True)
class Forget:
    """Close the connections to ``url`` (its database is about to be dropped)."""

    url: str


class _Racer:
    def __init__(self, now: datetime) -> None:
        self.now = now
        self.databases: dict[str, Database] = {}
        self.nodes: dict[str, dict[str, Any]] = {}

    def prepare(self, url: str) -> dict[str, Any]:
        """Open the database and its sensitive-tools nodes, and warm one connection."""
        if url not in self.databases:
            database = Database.from_url(url, clock=fixed_clock(self.now))
            crew = build_crew(database)
            self.databases[url] = database
            self.nodes[url] = {
                tool.name: _sensitive_tools_graph(member)
                for member in crew.members
                for tool in member.tools.sensitive
            }
        database = self.databases[url]
        database.upgrade_schema()
        with database.session() as session:  # the race is about the write, not the connect
            session.execute(text("SELECT 1"))
        return self.nodes[url]

    def forget(self, url: str) -> None:
        database = self.databases.pop(url, None)
        self.nodes.pop(url, None)
        if database is not None:
            database.dispose()

    def close(self) -> None:
        for url in list(self.databases):
            self.forget(url)


def _sensitive_tools_graph(member: Member) -> Any:
    """Return a graph of the specialist's sensitive-tools node alone, as the graph wires it."""
    builder = StateGraph(State)
    node = member.specialist.sensitive_node
    builder.add_node(node, make_sensitive_tools_node(member))
    builder.add_edge(START, node)
    builder.add_edge(node, END)
    return builder.compile(checkpointer=InMemorySaver(), interrupt_before=[node])


def _stop(graph: Any, call: Call) -> RunnableConfig:
    """Bring the call to the stop before the node, where the customer's yes is awaited."""
    config: RunnableConfig = {
        "configurable": {"thread_id": call.thread_id, "passenger_id": call.passenger_id}
    }
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": call.tool, "args": call.args, "id": call.call_id, "type": "tool_call"}
        ],
    )
    graph.invoke({"messages": [message]}, config)
    return config


def _run(graph: Any, config: RunnableConfig) -> Outcome:
    """Go on with the customer's yes, as every client does."""
    started = time.monotonic()
    try:
        result = graph.invoke(Command(resume={"type": "accept"}), config)
    except Exception:  # reported to the test, which fails on it
        return Outcome(None, "", traceback.format_exc(), time.monotonic() - started)
    elapsed = time.monotonic() - started
    answers = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    if len(answers) != 1:
        return Outcome(None, "", f"expected one answer, got {result['messages']!r}", elapsed)
    answer = answers[0]
    return Outcome(answer.status, str(answer.content), None, elapsed)


def serve(connection: Connection, barrier: Barrier, now: datetime) -> None:
    """Answer jobs from ``connection`` until it sends ``None`` or closes.

    Args:
        connection: This racer's end of its pipe to the test.
        barrier: The barrier every racer waits on before each race.
        now: The fixed "now" of the test database.
    """
    racer = _Racer(now)
    try:
        while True:
            try:
                job = connection.recv()
            except EOFError:
                return
            if job is None:
                return
            if isinstance(job, Forget):
                racer.forget(job.url)
                connection.send(None)
                continue
            assert isinstance(job, Job), job
            try:
                nodes = racer.prepare(job.url)
                stopped = _stop(nodes[job.call.tool], job.call) if job.call is not None else None
            except Exception:
                barrier.abort()  # release the others: this race cannot run
                connection.send(Unready(traceback.format_exc()))
                continue
            try:
                barrier.wait(BARRIER_TIMEOUT_S)
            except threading.BrokenBarrierError:
                connection.send(Unready("called off: another racer could not take part"))
                continue
            if job.call is None or stopped is None:
                connection.send(None)
            else:
                connection.send(_run(nodes[job.call.tool], stopped))
    finally:
        racer.close()
