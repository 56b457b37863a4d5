"""Benchmark: what the system adds around the model, and how big the prompts get.

A zero-latency scripted model plays a 30-turn conversation with approvals (a flight
search, a hotel booking approved by the customer, a hand-back; ten times over) through
the real graph and database. Printed: the median and p95 time per turn and per graph
step, with the in-memory and with the SQLite checkpointer; the checkpoint bytes added per
turn; and the size of the prompt sent on every model call (characters, and tokens
estimated at four characters each, since no tokenizer loads offline).

    python scripts/bench_overhead.py [--turns 30] [--curve]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from conversations.assistant import Decision, Thread, TravelAssistant
from db.clock import fixed_clock
from db.engine import Database
from db.generate import build_database
from evaluation import Resolver, percentile
from tests.support.scripted import ScriptedChatModel, call, say

NOW = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
PASSENGER = "3442 587242"


def script_for(turns: int, resolve: Resolver) -> tuple[list[str], list[Any]]:
    """Return the customer's messages and the model's replies for ``turns`` turns."""
    hotel = resolve("{hotel:Hotel Spalentor Garden}")
    customer: list[str] = []
    replies: list[Any] = []
    for index in range(turns):
        step = index % 3
        if step == 0:
            customer.append(f"Which flights go from Paris to Basel? (question {index})")
            replies += [
                say(
                    "",
                    call("search_flights", {"departure_airport": "CDG", "arrival_airport": "BSL"}),
                ),
                say("Here are the next flights from Paris to Basel, with fares and seats left."),
            ]
        elif step == 1:
            day = 20 + index
            checkin, checkout = resolve(f"{{date:{day}}}"), resolve(f"{{date:{day + 2}}}")
            customer.append(f"Book me a hotel in Basel from {checkin} to {checkout}.")
            replies += [
                say(
                    "",
                    call(
                        "ToHotelBookingAssistant",
                        {
                            "location": "Basel",
                            "checkin_date": checkin,
                            "checkout_date": checkout,
                            "request": "any",
                        },
                    ),
                ),
                say(
                    "",
                    call(
                        "search_hotels",
                        {"location": "Basel", "checkin_date": checkin, "checkout_date": checkout},
                    ),
                ),
                say(
                    "Booking it for you.",
                    call(
                        "book_hotel",
                        {"hotel_id": hotel, "checkin_date": checkin, "checkout_date": checkout},
                    ),
                ),
                say("Your hotel is booked."),
            ]
        else:
            customer.append("Thanks, that is all for the hotel.")
            replies += [
                say("", call("CompleteOrEscalate", {"cancel": True, "reason": "Hotel booked."})),
                say("You're welcome. Anything else?"),
            ]
    return customer, replies


def prompt_chars(messages: list[BaseMessage]) -> int:
    """Characters sent in one model call (message text and tool-call arguments)."""
    total = 0
    for message in messages:
        total += len(str(message.content))
        total += sum(len(str(c["args"])) for c in getattr(message, "tool_calls", []) or [])
    return total


def stored_bytes(path: Path) -> int:
    """Bytes of checkpoints and pending writes stored in the SQLite checkpoint file."""
    if not path.exists():
        return 0
    with sqlite3.connect(path) as connection:
        tables = {
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if "checkpoints" not in tables:
            return 0
        stored = connection.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints"
        ).fetchone()[0]
        written = connection.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes"
        ).fetchone()[0]
    return int(stored) + int(written)


def run(template: Path, folder: Path, turns: int, saver_kind: str) -> dict[str, Any]:
    """Play the conversation once; return per-turn and per-step timings."""
    work = folder / saver_kind
    work.mkdir()
    db_path = work / "travel.sqlite"
    db_path.write_bytes(template.read_bytes())
    db = Database.from_url(str(db_path), clock=fixed_clock(NOW))
    customer, replies = script_for(turns, Resolver(db))
    model = ScriptedChatModel(script=replies)
    checkpoints = work / "checkpoints.sqlite"
    saver: Any = (
        InMemorySaver()
        if saver_kind == "memory"
        else SqliteSaver(sqlite3.connect(checkpoints, check_same_thread=False))
    )
    assistant = TravelAssistant.build(model, saver, db=db)
    thread = Thread("bench", PASSENGER)
    turn_times, step_times, sizes = [], [], []
    seen = 0
    for text in customer:
        before = stored_bytes(checkpoints) if saver_kind == "sqlite" else 0
        started = time.perf_counter()
        for _ in assistant.send(thread, text):
            pass
        while pending := assistant.pending_actions(thread):
            for _ in assistant.resolve(thread, {p.tool_call_id: Decision(True) for p in pending}):
                pass
        elapsed = time.perf_counter() - started
        # Every graph step writes one checkpoint: count them (outside the timing).
        history = sum(1 for _ in assistant.graph.get_state_history(assistant.config(thread)))
        steps, seen = history - seen, history
        turn_times.append(elapsed)
        step_times.append(elapsed / max(steps, 1))
        if saver_kind == "sqlite":
            sizes.append(stored_bytes(checkpoints) - before)
    db.dispose()
    return {
        "turn": turn_times,
        "step": step_times,
        "bytes": sizes,
        "prompts": [prompt_chars(m) for m in model.received],
        "leftover": len(model.script),
    }


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--curve", action="store_true", help="print the prompt size of every call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        template = folder / "template.sqlite"
        build_database(Database.from_url(str(template), clock=fixed_clock(NOW)), seed=7, scale=1)
        print(
            f"{args.turns}-turn conversation, zero-latency scripted model, default-scale database"
        )
        for kind in ("memory", "sqlite"):
            result = run(template, folder, args.turns, kind)
            assert result["leftover"] == 0, "the script and the graph disagree"
            turn, step = result["turn"], result["step"]
            print(
                f"  {kind:<6} per turn: median {statistics.median(turn) * 1000:7.1f} ms, "
                f"p95 {percentile(turn, 0.95) * 1000:7.1f} ms | per graph step: "
                f"median {statistics.median(step) * 1000:6.2f} ms, "
                f"p95 {percentile(step, 0.95) * 1000:6.2f} ms"
            )
            if kind == "sqlite":
                sizes = result["bytes"]
                print(
                    f"  checkpoint bytes stored per turn (SQLite saver): median "
                    f"{statistics.median(sizes):,.0f}, max {max(sizes):,}, total {sum(sizes):,}"
                )
        prompts = result["prompts"]
        print(
            f"  prompt size per model call over {len(prompts)} calls: first {prompts[0]:,} chars "
            f"(~{prompts[0] // 4:,} tokens), median {statistics.median(prompts):,.0f}, "
            f"max {max(prompts):,} (~{max(prompts) // 4:,} tokens), last {prompts[-1]:,}"
        )
        tenth = max(1, len(prompts) // 10)
        curve = ", ".join(f"{prompts[i]:,}" for i in range(0, len(prompts), tenth))
        print(f"  curve (every {tenth}th call): {curve}")
        if args.curve:
            for index, size in enumerate(prompts, start=1):
                print(f"    call {index:3d}: {size:,} chars")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
