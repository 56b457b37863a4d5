"""Benchmark: the terminal program's memory over a long session (issue 28: no leak).

Runs the installed ``travel-assistant chat`` in a pseudo-terminal against the scripted
OpenAI-compatible server on 127.0.0.1 (zero latency, a short answer to every message,
a flight search every tenth turn so that tools and the database are used too), sends
``--turns`` messages one after the other in one conversation, and reads the program's
resident memory (``VmRSS`` in ``/proc``) every ``--every`` turns. Prints the series and
the last reading over the one after the first window: flat means within 10 %.

    python scripts/bench_terminal_memory.py [--turns 300] [--every 50]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pexpect

from tests.support.fake_openai import FakeOpenAI, Reply

PASSENGER = "3442 587242"


def respond(body: dict[str, Any]) -> Reply:
    """Answer every message; every tenth one searches flights first."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Reply(text="Those are the flights I found.")
    text = str(last.get("content", ""))
    if "flights" in text:
        return Reply(tool_calls=[("search_flights", {"departure_airport": "BSL", "limit": 5})])
    return Reply(text="Noted. Anything else I can do for you?")


def rss_kib(pid: int) -> int:
    """Return the resident memory of process ``pid`` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--every", type=int, default=50)
    args = parser.parse_args()
    script = Path(sys.executable).parent / "travel-assistant"
    with tempfile.TemporaryDirectory() as name, FakeOpenAI(strict=False, responder=respond) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
        env.update(
            TRAVEL_ASSISTANT_HOME=name,
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY="bench",
            PROMPT_TOOLKIT_NO_CPR="1",
            NO_COLOR="1",
        )
        subprocess.run([str(script), "db", "init"], env=env, check=True, capture_output=True)
        child = pexpect.spawn(
            str(script),
            ["chat", "--passenger-id", PASSENGER],
            env=env,
            encoding="utf-8",
            timeout=120,
            dimensions=(40, 120),
        )
        child.expect("you>")
        readings: list[tuple[int, int]] = [(0, rss_kib(child.pid))]
        started = time.perf_counter()
        for turn in range(1, args.turns + 1):
            text = "show me flights from Basel" if turn % 10 == 0 else f"message number {turn}"
            child.send(text + "\r")
            child.expect("Anything else|flights I found")
            child.expect("you>")
            if turn % args.every == 0:
                readings.append((turn, rss_kib(child.pid)))
        elapsed = time.perf_counter() - started
        child.send("exit\r")
        child.expect(pexpect.EOF)
        child.close()
    print(f"{args.turns} turns in {elapsed:.0f} s; load average {os.getloadavg()[0]:.2f}")
    for turn, kib in readings:
        print(f"  after {turn:4d} turns: {kib / 1024:7.1f} MiB")
    first = next(kib for turn, kib in readings if turn >= args.every)
    print(f"last / after the first {args.every} turns: {readings[-1][1] / first:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
