"""Benchmark: what one conversation costs in prompt tokens, checkpoint bytes and time.

A zero-latency scripted model plays a fixed conversation through the real graph, the
real tools and the SQLite checkpointer: flight times, a policy question, a flight
change, a hotel, a car and an excursion booked, every approval answered yes (14 turns),
and the same pattern continued to 30 turns. For every model call it counts the prompt
offline with the o200k tokenizer (``bpe-openai``) over the messages as the OpenAI client
sends them (system prompt included), the tool definitions sent beside them, and the
share of the messages that repeats the start of the previous call's in the same thread
(what a provider's prompt cache can reuse). Per turn it reports the checkpoint bytes written and
the wall and CPU time outside the model, beside a bare LangGraph graph with the same
checkpointer (one node answering each message: the floor).

    python scripts/bench_conversation.py [--turns 14] [--turns 30] [--calls]

It also plays the conversation again in the same process, after one unmeasured run, as
a service or a clerk's terminal does after its first customer (compiled statements and
tool definitions kept). ``--play N`` only plays it N times, for counting instructions,
which stay steady where times drift (BENCHMARKS.md):

    python scripts/bench_conversation.py --play 1 --template /tmp/bench.sqlite  # builds it
    for n in 1 2; do PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file=/dev/null python scripts/bench_conversation.py --play $n \
        --template /tmp/bench.sqlite 2>&1 | grep 'I *refs'; done

Targets (issue 12): on 14 turns, total prompt tokens <= 60,000, median cacheable share
>= 80 %, no call above 6,000 tokens; over 30 turns, tokens per call flat after turn 10,
checkpoint bytes per turn flat and <= 40 kB median; time per turn outside the model
<= 20 ms median. Beside it, the same for bare graphs of as many steps as each turn took
(what LangGraph and the saver cost alone), each timed right after its turn, and the
ratio of the two medians, which holds still when the machine's speed drifts, even
within a run. And beside that, graphs of the program's own shape whose nodes do nothing
(``Shapes``): what LangGraph spends on this graph's nodes, edges and channels, so that
a turn's cost over them is the program's own work.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from threading import Event
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bpe_openai import get_encoding
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai.chat_models.base import _convert_message_to_dict
from langgraph.graph import END, START, MessagesState, StateGraph

from assistants.state import PRIMARY_ASSISTANT, State
from collector import loading_code, own_process
from conversations.assistant import Decision, Thread, TravelAssistant
from conversations.protocol import Answer, Conversations
from conversations.records import Outcome, TurnEnd
from conversations.run_cancel import CancelOnRequest
from conversations.sessions import SessionRegistry
from conversations.store import sqlite_checkpointer
from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from db.generate import build_database
from evaluation import Resolver, percentile
from graph import build_graph, drawing_model
from tests.support.scripted import ScriptedChatModel, call, say

NOW = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
ENCODING = get_encoding("o200k_base")


class MeasuredModel(ScriptedChatModel):
    """The scripted model, bound to its tools the way ``ChatOpenAI`` is.

    ``bind_tools`` converts the tools to OpenAI's form once and returns a binding that
    passes them with every request, as ``ChatOpenAI.bind_tools`` does; each request's
    definitions are recorded beside its messages.
    """

    schemas: list[list[dict[str, Any]]] = field(default_factory=list)  # type: ignore[assignment]
    seconds: float = 0.0

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:  # type: ignore[override]
        super().bind_tools(tools)
        # LangChain describes a model to its callbacks once per instance, from its repr;
        # a scripted model's repr holds every request so far. Describe it now, while that
        # is empty, so the benchmark does not count a cost a real client never has.
        self.__dict__.pop("_serialized", None)
        _ = self._serialized
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self.schemas.append(list(kwargs.get("tools", [])))
        return super()._stream(messages, stop, run_manager, **kwargs)

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        started = time.perf_counter()
        try:
            return super()._next(messages)
        finally:
            MeasuredModel.seconds += time.perf_counter() - started


@dataclass
class Turn:
    """One customer message and the model's scripted replies to it."""

    text: str
    replies: list[AIMessage]


def tutorial_turns(resolve: Resolver) -> list[Turn]:
    """Return the 14 turns: the shape of the tutorial's conversation, in our words."""
    flight = resolve("{flight:LX0112+1}")
    hotel = resolve("{hotel:Hotel Spalentor Garden}")
    car = resolve("{car:Alpina Car Hire/Economy}")
    excursion = resolve("{excursion:Kunstmuseum Highlights Tour}")
    day1, day3, day4 = resolve("{date:1}"), resolve("{date:3}"), resolve("{date:4}")
    to_flights = call("ToFlightBookingAssistant", {"request": "move the flight to tomorrow"})
    to_hotel = call(
        "ToHotelBookingAssistant",
        {"location": "Basel", "checkin_date": day1, "checkout_date": day4, "request": "mid-range"},
    )
    to_car = call(
        "ToBookCarRental",
        {"location": "Basel", "start_date": day1, "end_date": day3, "request": "cheapest"},
    )
    to_trip = call("ToBookExcursion", {"location": "Basel", "request": "a museum"})
    done = {"cancel": True, "reason": "Done."}
    return [
        Turn("Hello, when does my flight leave?", [say("Your LX0112 leaves today.")]),
        Turn(
            "Could I move it to an earlier flight today?",
            [
                say("", call("lookup_policy", {"query": "change a flight on the same day"})),
                say("Changes must leave at least 3 hours from now; the fee depends on the fare."),
            ],
        ),
        Turn(
            "Then tomorrow at the same time, please.",
            [
                say("", to_flights),
                say(
                    "",
                    call(
                        "search_flights",
                        {"departure_airport": "CDG", "arrival_airport": "BSL", "start_time": day1},
                    ),
                ),
                say("Tomorrow's LX0112 has seats. Shall I move you?"),
            ],
        ),
        Turn(
            "Yes, do it.",
            [
                say(
                    "",
                    call(
                        "update_ticket_to_new_flight",
                        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": flight},
                    ),
                ),
                say("", call("CompleteOrEscalate", done)),
                say("You are on tomorrow's flight."),
            ],
        ),
        Turn(
            "What about a place to stay and getting around?", [say("I can book a hotel and a car.")]
        ),
        Turn(
            "A mid-range hotel in Basel for three nights, and a car.",
            [
                say("", to_hotel),
                say(
                    "",
                    call(
                        "search_hotels",
                        {"location": "Basel", "checkin_date": day1, "checkout_date": day4},
                    ),
                ),
                say("Hotel Spalentor Garden fits. Book it?"),
            ],
        ),
        Turn(
            "Yes, book it.",
            [
                say(
                    "",
                    call(
                        "book_hotel",
                        {"hotel_id": hotel, "checkin_date": day1, "checkout_date": day4},
                    ),
                ),
                say("", call("CompleteOrEscalate", done)),
                say("Your hotel is booked."),
            ],
        ),
        Turn(
            "Now the car: what can I get?",
            [
                say("", to_car),
                say(
                    "",
                    call(
                        "search_car_rentals",
                        {"location": "Basel", "start_date": day1, "end_date": day3},
                    ),
                ),
                say("Alpina Car Hire has a midsize car."),
            ],
        ),
        Turn(
            "Take the cheapest and book it.",
            [
                say(
                    "",
                    call(
                        "book_car_rental", {"rental_id": car, "start_date": day1, "end_date": day3}
                    ),
                ),
                say("", call("CompleteOrEscalate", done)),
                say("Your car is booked."),
            ],
        ),
        Turn(
            "Anything worth doing in Basel?",
            [
                say("", to_trip),
                say("", call("search_trip_recommendations", {"location": "Basel"})),
                say("Museums, walks and river trips."),
            ],
        ),
        Turn("Are they open while I am there?", [say("Yes, every day of your stay.")]),
        Turn(
            "I like museums. Which ones?",
            [
                say(
                    "",
                    call(
                        "search_trip_recommendations", {"location": "Basel", "keywords": "museum"}
                    ),
                ),
                say("The Kunstmuseum tour."),
            ],
        ),
        Turn(
            "Book it for my second day.",
            [
                say("", call("book_excursion", {"recommendation_id": excursion, "date": day3})),
                say("Booked."),
            ],
        ),
        Turn(
            "That's all, thanks.",
            [say("", call("CompleteOrEscalate", done)), say("Have a good trip!")],
        ),
    ]


def conversation(resolve: Resolver, turns: int) -> list[Turn]:
    """Return ``turns`` turns: the 14 above, then questions and searches repeating."""
    script = tutorial_turns(resolve)[:turns]
    extra = [
        Turn("When does my flight leave again?", [say("Tomorrow, as booked.")]),
        Turn(
            "Any flights from Paris to Basel next week?",
            [
                say(
                    "",
                    call(
                        "search_flights",
                        {
                            "departure_airport": "CDG",
                            "arrival_airport": "BSL",
                            "start_time": resolve("{date:7}"),
                        },
                    ),
                ),
                say("Several, daily."),
            ],
        ),
        Turn(
            "What is the baggage allowance?",
            [
                say("", call("lookup_policy", {"query": "baggage allowance Economy"})),
                say("One bag of 23 kg."),
            ],
        ),
    ]
    while len(script) < turns:
        script.append(extra[len(script) % len(extra)])
    return script


def render(messages: Sequence[BaseMessage]) -> list[int]:
    """Return the o200k tokens of a request's messages as the OpenAI client sends them."""
    body = "".join(json.dumps(_convert_message_to_dict(m), ensure_ascii=False) for m in messages)
    return ENCODING.encode(body)


def schema_tokens(schemas: Sequence[dict[str, Any]]) -> int:
    """Return the o200k tokens of the tool definitions sent beside the messages."""
    return len(ENCODING.encode(json.dumps(schemas, ensure_ascii=False)))


def shared_prefix(left: Sequence[int], right: Sequence[int]) -> int:
    """Return how many leading tokens two requests share."""
    count = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        count += 1
    return count


def stored_bytes(connection: sqlite3.Connection) -> int:
    """Bytes of checkpoints and writes in the saver's database."""
    tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "checkpoints" not in tables:
        return 0
    (stored,) = connection.execute(
        "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints"
    ).fetchone()
    (written,) = connection.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
    return int(stored) + int(written)


@dataclass
class Figures:
    """What one run measured."""

    tokens: list[int] = field(default_factory=list)
    tool_tokens: list[int] = field(default_factory=list)
    cacheable: list[float] = field(default_factory=list)
    call_turns: list[int] = field(default_factory=list)
    turn_bytes: list[int] = field(default_factory=list)
    turn_wall_ms: list[float] = field(default_factory=list)
    turn_cpu_ms: list[float] = field(default_factory=list)
    turn_steps: list[int] = field(default_factory=list)  # checkpoints saved per turn


def saved_checkpoints(connection: sqlite3.Connection) -> int:
    """Return how many checkpoints the saver holds (one per graph step, and the input)."""
    return int(connection.execute("SELECT count(*) FROM checkpoints").fetchone()[0])


def run_assistant(
    template: Path,
    folder: Path,
    turns: int,
    *,
    warm_ups: int = 0,
    beside: Sequence[Chains] = (),
) -> Figures:
    """Play the conversation through the assistant; return its figures.

    The assistant and its database engine are built first, as a new process builds them.
    With ``warm_ups``, the conversation is played that many times unmeasured, each on a
    fresh copy of the database, before the measured one: what a process that has served
    a conversation already (the service, a clerk's terminal after the first customer)
    spends per turn, its statements compiled and its tool definitions and policy index
    built.
    """
    db_path = folder / "travel.sqlite"
    db_path.write_bytes(template.read_bytes())
    db = Database.from_url(str(db_path), clock=fixed_clock(NOW))
    script = conversation(Resolver(db), turns)
    model = MeasuredModel(script=[])
    checkpoints = sqlite3.connect(folder / "checkpoints.sqlite", check_same_thread=False)
    # As the terminal and the service start: built with the collector paused, then what
    # is alive frozen out of its way (``collector.loading_code``), the policy read.
    with loading_code():
        assistant = TravelAssistant.build(model, checkpointer(checkpoints), db=db)
    assistant.prepare()
    for warm_up in range(warm_ups):
        play(
            assistant, model, script, Thread(f"warm-up {warm_up}", FIXTURE_PASSENGER_ID), Figures()
        )
        db.dispose()  # the engine stays, with its compiled statements; the bookings go
        for stale in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
            stale.unlink(missing_ok=True)
        db_path.write_bytes(template.read_bytes())
        # Every binding holds this very model: empty its records in place.
        model.received.clear()
        model.schemas.clear()
    figures = Figures()
    thread = Thread("bench", FIXTURE_PASSENGER_ID)
    play(assistant, model, script, thread, figures, checkpoints, beside)
    previous: list[int] = []
    for messages, schemas in zip(model.received, model.schemas, strict=True):
        tokens = render(messages)
        figures.tokens.append(len(tokens))
        figures.tool_tokens.append(schema_tokens(schemas))
        figures.cacheable.append(shared_prefix(previous, tokens) / len(tokens) if previous else 0.0)
        previous = tokens
    db.dispose()
    checkpoints.close()
    return figures


def play(
    assistant: TravelAssistant,
    model: MeasuredModel,
    script: list[Turn],
    thread: Thread,
    figures: Figures,
    checkpoints: sqlite3.Connection | None = None,
    beside: Sequence[Chains] = (),
) -> None:
    """Play ``script`` on ``thread``, approving every write; add each turn to ``figures``.

    Each turn is followed by a turn of as many steps of every graph in ``beside``, so
    they are timed within moments of each other, whatever the host's speed does.
    """
    model.script.extend(r for t in script for r in t.replies)
    for index, turn in enumerate(script, start=1):
        before = stored_bytes(checkpoints) if checkpoints is not None else 0
        saved_before = saved_checkpoints(checkpoints) if checkpoints is not None else 0
        calls_before = len(model.received)
        MeasuredModel.seconds = 0.0
        wall, cpu = time.perf_counter(), time.process_time()
        if VIA_PROTOCOL:
            _play_turn_through_protocol(assistant, thread, turn.text)
        else:
            for _ in assistant.send(thread, turn.text):
                pass
            while pending := assistant.pending_actions(thread):
                decisions = {p.tool_call_id: Decision(True) for p in pending}
                for _ in assistant.resolve(thread, decisions):
                    pass
        model_seconds = MeasuredModel.seconds
        figures.turn_wall_ms.append((time.perf_counter() - wall - model_seconds) * 1000)
        figures.turn_cpu_ms.append((time.process_time() - cpu - model_seconds) * 1000)
        if checkpoints is not None:
            figures.turn_bytes.append(stored_bytes(checkpoints) - before)
            figures.turn_steps.append(saved_checkpoints(checkpoints) - saved_before)
            for baseline in beside:
                baseline.turn(figures.turn_steps[-1])
        figures.call_turns += [index] * (len(model.received) - calls_before)
    if model.script:
        raise SystemExit(f"the script and the graph disagree: {len(model.script)} replies left")


# Set by --protocol: turns go through conversations.protocol, as the terminal and the
# service drive them (claim, records, previews, answers), not TravelAssistant directly.
VIA_PROTOCOL = False
_PROTOCOLS: dict[int, Conversations] = {}


def _play_turn_through_protocol(assistant: TravelAssistant, thread: Thread, text: str) -> None:
    conversations = _PROTOCOLS.get(id(assistant))
    if conversations is None:
        registry = SessionRegistry(sqlite3.connect(":memory:", check_same_thread=False))
        conversations = _PROTOCOLS[id(assistant)] = Conversations(assistant, registry)
    conversation = conversations.get(thread)
    with conversation.claim() as claimed:
        end = _turn_end(claimed.send(text))
    # The front ends ask about the approvals the turn ended with (``TurnEnd``).
    while end.approvals:
        with conversation.claim() as claimed:
            end = _turn_end(claimed.resolve({a.tool_call_id: Answer(True) for a in end.approvals}))


def _turn_end(outcomes: Iterable[Outcome]) -> TurnEnd:
    ends = [o for o in outcomes if isinstance(o, TurnEnd)]
    if not ends:
        raise SystemExit("a turn through the protocol ended without a TurnEnd")
    return ends[-1]


def checkpointer(connection: sqlite3.Connection) -> Any:
    """The saver the program uses (``--untuned``: LangGraph's own defaults, for comparison)."""
    if UNTUNED:
        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(connection)
    return sqlite_checkpointer(connection)


UNTUNED = "--untuned" in sys.argv


class Chains:
    """Bare LangGraph graphs with the program's saver: chains of nodes, each adding a message.

    A chain of ``n`` nodes saves ``n + 1`` checkpoints per message (the input's and one
    per node), so ``turn(steps)`` plays one message through the chain that saves as many
    as an assistant turn did: what LangGraph and the saver alone cost for that turn.
    Each length has its own thread; every turn lands in ``figures``.
    """

    def __init__(self, folder: Path, name: str) -> None:
        self.checkpoints = sqlite3.connect(folder / f"{name}.sqlite", check_same_thread=False)
        self.saver = checkpointer(self.checkpoints)
        self.graphs: dict[int, Any] = {}
        self.figures = Figures()

    def graph(self, nodes: int) -> Any:
        """Return the compiled chain of ``nodes`` nodes (built once)."""
        if nodes not in self.graphs:

            def answer(state: MessagesState) -> dict[str, Any]:
                return {"messages": [AIMessage(content="ok")]}

            builder = StateGraph(MessagesState)
            previous = START
            for index in range(nodes):
                builder.add_node(f"answer{index}", answer)
                builder.add_edge(previous, f"answer{index}")
                previous = f"answer{index}"
            self.graphs[nodes] = builder.compile(checkpointer=self.saver)
        return self.graphs[nodes]

    def turn(self, steps: int) -> None:
        """Play one message through the chain that saves ``steps`` checkpoints; time it."""
        nodes = max(1, steps - 1)
        graph = self.graph(nodes)
        config = {"configurable": {"thread_id": f"chain of {nodes}"}}
        self.timed(lambda message: graph.invoke(message, config))

    def timed(self, run: Callable[[dict[str, Any]], object]) -> None:
        """Run the next message with ``run``; add its time and bytes to ``figures``."""
        message = {"messages": [HumanMessage(content=f"message {len(self.figures.turn_cpu_ms)}")]}
        before = stored_bytes(self.checkpoints)
        wall, cpu = time.perf_counter(), time.process_time()
        run(message)
        self.figures.turn_wall_ms.append((time.perf_counter() - wall) * 1000)
        self.figures.turn_cpu_ms.append((time.process_time() - cpu) * 1000)
        self.figures.turn_bytes.append(stored_bytes(self.checkpoints) - before)

    def close(self) -> None:
        """Close the chains' checkpoint file."""
        self.checkpoints.close()


class Shapes(Chains):
    """Graphs of the program's own shape whose nodes do nothing, with the program's saver.

    The program's nodes, edges and state (its channels, the messages stored as deltas),
    each node adding one message and each route taking the next node of a walk planned
    for the turn: ``turn(steps)`` walks as many nodes as the chain of ``steps`` has, from
    ``fetch_user_info`` to an assistant, which ends the run. What this costs beyond the
    chain is LangGraph's work for the program's shape; what a turn costs beyond this is
    the program's own: its nodes, tools, model calls, run settings and callbacks.
    """

    # The walk goes back and forth between the primary assistant and its tools, as most
    # turns do: first the tools, then the assistant, then any other node.
    PREFERRED = (f"{PRIMARY_ASSISTANT}_tools", PRIMARY_ASSISTANT)

    def __init__(self, folder: Path, name: str) -> None:
        super().__init__(folder, name)
        shape = build_graph(drawing_model(), None, db=Database.from_url("sqlite://")).builder
        self.edges = sorted(shape.edges)
        self.routes = {
            start: sorted({str(end) for b in branches.values() for end in (b.ends or {})})
            for start, branches in shape.branches.items()
        }
        self.next: dict[str, set[str]] = {name: set() for name in shape.nodes}
        for start, end in self.edges:
            if start != START:
                self.next[start].add(end)
        for start, ends in self.routes.items():
            self.next[start].update(ends)
        self.plan: list[str] = []  # the route decisions of the walk under way, in order

    def graph(self, nodes: int) -> Any:
        """Return the program's shape with nodes that do nothing (one graph for all walks)."""
        if not self.graphs:

            def answer(state: State) -> dict[str, Any]:
                return {"messages": [AIMessage(content="ok")]}

            def route(state: State) -> str:
                return self.plan.pop(0)

            builder = StateGraph(State)
            for name in self.next:
                builder.add_node(name, answer)
            for start, end in self.edges:
                builder.add_edge(start, end)
            for start, ends in self.routes.items():
                builder.add_conditional_edges(start, route, ends)
            self.graphs[0] = builder.compile(checkpointer=self.saver)
        return self.graphs[0]

    def walk(self, nodes: int) -> tuple[str, ...]:
        """Return a walk of ``nodes`` nodes from ``fetch_user_info`` to a node that may end."""

        @cache
        def from_node(node: str, left: int) -> tuple[str, ...] | None:
            if left == 1:
                return (node,) if END in self.next[node] else None
            order = sorted(
                self.next[node] - {END},
                key=lambda n: (self.PREFERRED.index(n) if n in self.PREFERRED else 2, n),
            )
            for following in order:
                rest = from_node(following, left - 1)
                if rest is not None:
                    return (node, *rest)
            return None

        found = from_node("fetch_user_info", max(2, nodes))
        if found is None:
            raise SystemExit(f"no walk of {nodes} nodes through the program's graph")
        return found

    def turn(self, steps: int, how: str = "invoke") -> None:
        """Walk as many nodes as the chain of ``steps`` checkpoints has; time it.

        ``how`` the graph is run: ``"invoke"`` as the chain is, ``"stream"`` with the
        program's stream modes and ``durability="sync"`` (``TravelAssistant._arun``),
        ``"stream+callbacks"`` with its cancel handler too.
        """
        walk = self.walk(max(1, steps - 1))
        self.plan = [
            following
            for node, following in zip(walk, (*walk[1:], END), strict=True)
            if node in self.routes
        ]
        graph = self.graph(len(walk))
        config: dict[str, Any] = {"configurable": {"thread_id": f"shape of {len(walk)}"}}
        if how == "stream+callbacks":
            config["callbacks"] = [CancelOnRequest(Event())]

        def run(message: dict[str, Any]) -> None:
            if how == "invoke":
                graph.invoke(message, config)
                return
            for _ in graph.stream(
                message, config, stream_mode=["updates", "checkpoints"], durability="sync"
            ):
                pass

        self.timed(run)
        if self.plan:
            raise SystemExit(f"the walk {walk} left route decisions unused: {self.plan}")


def run_shape_settings(folder: Path, rounds: int, steps: int = 8) -> None:
    """Print what the shape costs run as the chain is and as the program runs its graph.

    The three ways take turns, 20 turns each a round after 5 unmeasured; each round
    prints the median CPU per turn of each way.
    """
    ways = ("invoke", "stream", "stream+callbacks")
    for number in range(1, rounds + 1):
        medians = []
        for way in ways:
            shapes = Shapes(folder, f"settings-{number}-{way.replace('+', '-')}")
            for _ in range(25):
                shapes.turn(steps, way)
            medians.append(statistics.median(shapes.figures.turn_cpu_ms[5:]))
            shapes.close()
        print(
            f"round {number}, CPU per turn of {steps} steps: "
            + ", ".join(f"{way} {ms:.1f} ms" for way, ms in zip(ways, medians, strict=True))
        )


def run_floor(folder: Path, turns: int) -> Figures:
    """Play ``turns`` messages through a bare graph of one node with the same saver."""
    chains = Chains(folder, "floor")
    for _ in range(turns):
        chains.turn(2)
    chains.close()
    return chains.figures


def report(
    turns: int,
    figures: Figures,
    warm: Figures,
    floor: Figures,
    beside: Figures,
    beside_warm: Figures,
    shapes: Figures,
    shapes_warm: Figures,
    show_calls: bool,
) -> None:
    """Print the figures of one conversation length."""
    tokens = figures.tokens
    print(f"\n{turns}-turn conversation: {len(tokens)} model calls")
    print(
        f"  prompt tokens (o200k, messages): total {sum(tokens):,}, "
        f"median {statistics.median(tokens):,.0f}, max {max(tokens):,}"
    )
    tools = figures.tool_tokens
    print(
        f"  tool definitions beside them (JSON, o200k): total {sum(tools):,}, "
        f"median {statistics.median(tools):,.0f}, max {max(tools):,}"
    )
    shares = figures.cacheable[1:] or [0.0]
    print(
        f"  cacheable share (prefix of the previous call): median "
        f"{statistics.median(shares) * 100:.1f} %, p10 {percentile(shares, 0.10) * 100:.1f} %"
    )
    by_turn: dict[int, list[int]] = {}
    for turn, count in zip(figures.call_turns, tokens, strict=True):
        by_turn.setdefault(turn, []).append(count)
    curve = ", ".join(f"{t}:{max(c):,}" for t, c in sorted(by_turn.items()))
    print(f"  largest prompt per turn: {curve}")
    print(
        f"  checkpoint bytes per turn: median {statistics.median(figures.turn_bytes):,.0f}, "
        f"first {figures.turn_bytes[0]:,}, last {figures.turn_bytes[-1]:,} "
        f"(floor median {statistics.median(floor.turn_bytes):,.0f})"
    )
    if len(figures.turn_bytes) >= 20:  # is it flat? the median of each third of the turns
        third = len(figures.turn_bytes) // 3
        parts = [figures.turn_bytes[i * third : (i + 1) * third] for i in range(3)]
        print(
            "  checkpoint bytes per turn, median by third of the conversation: "
            + " | ".join(f"{statistics.median(p):,.0f}" for p in parts)
        )
    print(
        "  per turn outside the model: wall median "
        f"{statistics.median(figures.turn_wall_ms):.1f} ms "
        f"(p95 {percentile(figures.turn_wall_ms, 0.95):.1f}), CPU median "
        f"{statistics.median(figures.turn_cpu_ms):.1f} ms | floor: wall median "
        f"{statistics.median(floor.turn_wall_ms):.1f} ms, CPU median "
        f"{statistics.median(floor.turn_cpu_ms):.1f} ms"
    )
    same_steps = statistics.median(beside.turn_cpu_ms)
    print(
        f"  checkpoints per turn: median {statistics.median(figures.turn_steps):.0f}; after "
        "each turn, a bare graph of as many steps (a chain of nodes): CPU median "
        f"{same_steps:.1f} ms per turn"
    )
    # The machine's speed drifts, even within a run (a shared host); a turn and its
    # bare graph's are timed moments apart and drift together, so their ratio holds.
    print(
        "  CPU per turn over the bare graph of as many steps: "
        f"{statistics.median(figures.turn_cpu_ms) / same_steps:.2f}x"
    )
    warm_steps = statistics.median(beside_warm.turn_cpu_ms)
    print(
        "  the same conversation in a process that has served one already: CPU median "
        f"{statistics.median(warm.turn_cpu_ms):.1f} ms (wall "
        f"{statistics.median(warm.turn_wall_ms):.1f}); its bare graphs "
        f"{warm_steps:.1f} ms; "
        f"{statistics.median(warm.turn_cpu_ms) / warm_steps:.2f}x"
    )
    shape, shape_warm = (
        statistics.median(shapes.turn_cpu_ms),
        statistics.median(shapes_warm.turn_cpu_ms),
    )
    print(
        "  beside each turn, the program's graph with nodes that do nothing, as many steps: "
        f"CPU median {shape:.1f} ms ({shape / same_steps:.2f}x the bare graph); the turn "
        f"over it {statistics.median(figures.turn_cpu_ms) / shape:.2f}x, warm "
        f"{statistics.median(warm.turn_cpu_ms) / shape_warm:.2f}x"
    )
    if show_calls:
        for index, (count, share) in enumerate(zip(tokens, figures.cacheable, strict=True), 1):
            print(
                f"    call {index:3d} (turn {figures.call_turns[index - 1]:2d}): "
                f"{count:6,} tokens, {share * 100:5.1f} % cacheable"
            )


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns", type=int, action="append", help="conversation length (repeatable)"
    )
    parser.add_argument("--calls", action="store_true", help="print every model call")
    parser.add_argument(
        "--untuned",
        action="store_true",
        help="the SQLite saver as LangGraph sets it up (synchronous=FULL), for comparison",
    )
    parser.add_argument(
        "--play",
        type=int,
        metavar="N",
        help="only play the conversation N times in one process, printing nothing: run "
        "under valgrind with N=1 and N=2, the difference is one warm conversation",
    )
    parser.add_argument(
        "--protocol",
        action="store_true",
        help="drive each turn through conversations.protocol, as the front ends do",
    )
    parser.add_argument(
        "--template",
        type=Path,
        help="the generated database to copy for each conversation (built there if missing)",
    )
    parser.add_argument(
        "--shape-settings",
        type=int,
        metavar="ROUNDS",
        help="only time the program's graph with nodes that do nothing, run as the bare "
        "chain is and as the program runs it (stream modes, durability, callbacks)",
    )
    args = parser.parse_args()
    if args.shape_settings:
        with tempfile.TemporaryDirectory() as name:
            run_shape_settings(Path(name), args.shape_settings)
        return 0
    global VIA_PROTOCOL
    VIA_PROTOCOL = args.protocol
    own_process()  # started as the program's own process is (``cli.py``)
    lengths = args.turns or [14, 30]
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        template = args.template or folder / "template.sqlite"
        if not template.exists():
            database = Database.from_url(str(template), clock=fixed_clock(NOW))
            build_database(database, seed=7, scale=1)
            database.dispose()
        if args.play:
            run_assistant(template, folder, lengths[0], warm_ups=args.play - 1)
            return 0
        print("zero-latency scripted model, SQLite checkpointer, default-scale database")
        for turns in lengths:
            work = folder / f"run{turns}"
            work.mkdir()
            beside, shapes = Chains(work, "chains"), Shapes(work, "shapes")
            figures = run_assistant(template, work, turns, beside=(beside, shapes))
            (work / "warm").mkdir()
            beside_warm, shapes_warm = Chains(work, "chains-warm"), Shapes(work, "shapes-warm")
            warm = run_assistant(
                template, work / "warm", turns, warm_ups=1, beside=(beside_warm, shapes_warm)
            )
            floor = run_floor(work, turns)
            report(
                turns,
                figures,
                warm,
                floor,
                beside.figures,
                beside_warm.figures,
                shapes.figures,
                shapes_warm.figures,
                args.calls,
            )
            for baseline in (beside, beside_warm, shapes, shapes_warm):
                baseline.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
