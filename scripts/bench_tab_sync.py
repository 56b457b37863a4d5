"""Benchmark: what live sync costs the service, for one idle open tab and for many.

An open tab of the web chat that nobody touches still asks the service what changed,
once a tick (``TAB_POLL_MS``, 1.5 s, in ``server/static/app.js``): the conversation's
summary, ``GET /api/v1/conversations/{id}`` (the person's state instead while a person
is waited for). This measures what those ticks cost.

As ``scripts/bench_load.py`` does, it starts a scripted OpenAI-compatible model server
(answering at once) and one ``travel-assistant serve`` worker over a new SQLite travel
database and conversation store. Each of the most ``--tabs`` passengers gets a
conversation of ``--turns`` turns (a greeting, a policy question and a flight search,
with their tool calls: a history of some 20 messages). Then, for each number of tabs,
that many idle tabs are opened, one a passenger, each over its own keep-alive
connection as a browser holds it: after a random start within the first tick, each
waits ``--poll`` seconds, asks, and waits again, as the page does, for ``--seconds``.

Printed, one line of JSON a measure: the tabs, the ticks and the requests a second (all
of them, and those answered 200; ``ideal``: the tabs over the tick), the worker's CPU
(user + system, from ``/proc``, in 10 ms clock ticks: a longer ``--seconds`` reads one
tab more finely) per request and per tick, its idle CPU over as long (measured first,
with no tab open) taken off, its share of one core, and the tabs one core could serve
at that cost; the p50/p95/max latency of an answered request; the requests refused (503:
a worker counts every open connection, idle keep-alive ones too, against
``--max-connections``, default 128) and the errors.
The load average at the start and at the end goes with the figures (the worker shares
the machine with this process and whatever else runs).

``--probe`` says what a tick asks: ``summary`` (a tab in view, the one request a tick),
``person`` (while a person is waited for), or, to compare, what a tab asked before one
watcher per conversation: ``summary+pending`` (an action waiting for a staff check) and
``summary+person`` (a person waited for), two requests a tick.

    python scripts/bench_tab_sync.py                          # 1, 50 and 200 tabs
    python scripts/bench_tab_sync.py --tabs 1 50 200 --probe summary summary+pending
    python scripts/bench_tab_sync.py --tabs 200 --max-connections 256
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from bench_load import cpu_seconds, plan_stays, respond, stream, wait_until_up

from db.engine import Database
from evaluation import percentile
from server.auth import TokenSigner
from tests.support.fake_openai import FakeOpenAI
from tests.support.web import free_port

TAB_POLL_SECONDS = 1.5  # TAB_POLL_MS in server/static/app.js
# One TLS context for every client (httpx builds one per client otherwise: 45 ms each).
TLS = ssl.create_default_context()
PROBES = {
    "summary": ("",),
    "person": ("/person",),
    "summary+pending": ("", "/pending"),
    "summary+person": ("", "/person"),
}
TURNS = [
    "Hello, I have a few questions today.",
    "What is your baggage policy?",
    "Which flights go from BSL to CDG?",
    "Can I bring a bicycle?",
]


@dataclass
class Tab:
    """One idle open tab: its passenger's token and conversation."""

    token: str
    conversation: str


@dataclass
class Polled:
    """What the tabs asked: each tick's start, each request's start, status and time."""

    ticks: list[float] = field(default_factory=list)  # the loop's clock
    requests: list[tuple[float, int, float]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)


async def converse(url: str, token: str, turns: int, crowd: asyncio.Semaphore) -> str:
    """Create a conversation of ``turns`` turns for the passenger of ``token``; its id."""
    async with (
        crowd,
        httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120, verify=TLS
        ) as client,
    ):
        created = await client.post("/api/v1/conversations")
        created.raise_for_status()
        conversation = str(created.json()["conversation_id"])
        for turn in range(turns):
            path = f"{url}/api/v1/conversations/{conversation}/messages"
            events = await stream(client, path, {"text": TURNS[turn % len(TURNS)]})
            if events[-1].name != "done":
                raise SystemExit(f"a setup turn failed: {events[-1].data}")
        return conversation


async def idle_tab(
    client: httpx.AsyncClient,
    conversation: str,
    paths: tuple[str, ...],
    poll: float,
    until: float,
    polled: Polled,
) -> None:
    """Ask like an idle tab in view until ``until`` (the loop's clock)."""
    loop = asyncio.get_running_loop()
    base = f"/api/v1/conversations/{conversation}"
    await asyncio.sleep(random.uniform(0, poll))  # tabs opened at any moment
    while True:
        await asyncio.sleep(poll)
        if loop.time() >= until:
            return
        polled.ticks.append(loop.time())
        for path in paths:  # one after the other, over the tab's one connection
            await ask(client, base + path, polled)


async def ask(client: httpx.AsyncClient, path: str, polled: Polled) -> None:
    """GET ``path``; note when, its status and how long the answer took."""
    at = asyncio.get_running_loop().time()
    started = time.perf_counter()
    try:
        response = await client.get(path)
    except httpx.HTTPError as error:
        polled.errors.append((at, repr(error)))
        return
    polled.requests.append((at, response.status_code, time.perf_counter() - started))


def measure(
    url: str, pid: int, tabs: list[Tab], probe: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Open ``tabs`` idle for ``args.seconds`` (after two ticks to settle); the figures."""
    paths = PROBES[probe]
    idle_cpu = cpu_seconds(pid)
    time.sleep(args.idle_seconds)  # the worker alone, to take its own ticking off
    idle_per_second = (cpu_seconds(pid) - idle_cpu) / args.idle_seconds
    polled = Polled()
    window: dict[str, float] = {}

    async def run() -> None:
        loop = asyncio.get_running_loop()
        clients = [  # each tab its own connection, as each customer's browser has
            httpx.AsyncClient(
                base_url=url, headers={"Authorization": f"Bearer {t.token}"}, timeout=30, verify=TLS
            )
            for t in tabs
        ]
        counting_from = loop.time() + 2 * args.poll  # every tab has asked by then
        until = counting_from + args.seconds

        async def mark() -> None:
            await asyncio.sleep(counting_from - loop.time())
            window["cpu"], window["at"] = cpu_seconds(pid), loop.time()
            await asyncio.sleep(until - loop.time())
            window["cpu_end"], window["end"] = cpu_seconds(pid), loop.time()

        try:
            await asyncio.gather(
                mark(),
                *(
                    idle_tab(client, tab.conversation, paths, args.poll, until, polled)
                    for client, tab in zip(clients, tabs, strict=True)
                ),
            )
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    asyncio.run(run())
    at, end = window["at"], window["end"]
    elapsed = end - at
    cpu = max(window["cpu_end"] - window["cpu"] - idle_per_second * elapsed, 0.0)
    ticks = sum(1 for t in polled.ticks if at <= t < end)
    inside = [(status, took) for t, status, took in polled.requests if at <= t < end]
    answered = [took for status, took in inside if status == 200]
    refused = sum(1 for status, _ in inside if status == 503)
    errors = sum(1 for status, _ in inside if status not in (200, 503))
    errors += sum(1 for t, _ in polled.errors if at <= t < end)
    latencies = answered or [0.0]
    per_tick_ms = cpu / max(ticks, 1) * 1000
    return {
        "tabs": len(tabs),
        "probe": probe,
        "requests_per_tick": len(paths),
        "poll_s": args.poll,
        "seconds": round(elapsed, 1),
        "ticks_per_second": round(ticks / elapsed, 1),
        "requests_per_second": round((len(inside) + errors) / elapsed, 1),
        "answered_per_second": round(len(answered) / elapsed, 1),
        "ideal_requests_per_second": round(len(tabs) * len(paths) / args.poll, 1),
        "worker_cpu_ms_per_request": round(cpu / max(len(inside), 1) * 1000, 2),
        "worker_cpu_ms_per_tick": round(per_tick_ms, 2),
        "worker_cpu_share_of_one_core": round(cpu / elapsed, 3),
        "worker_idle_cpu_share_of_one_core": round(idle_per_second, 3),
        "tabs_one_core_serves_at_this_cost": round(args.poll * 1000 / per_tick_ms)
        if per_tick_ms
        else None,
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 1),
        "latency_p95_ms": round(percentile(latencies, 0.95) * 1000, 1),
        "latency_max_ms": round(max(latencies) * 1000, 1),
        "refused_503": refused,
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tabs", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument(
        "--probe", nargs="+", choices=sorted(PROBES), default=["summary"], help="what a tick asks"
    )
    parser.add_argument("--turns", type=int, default=3, help="turns of each conversation")
    parser.add_argument("--seconds", type=float, default=15.0, help="each measure's length")
    parser.add_argument(
        "--idle-seconds", type=float, default=5.0, help="the worker's idle CPU, read first"
    )
    parser.add_argument("--poll", type=float, default=TAB_POLL_SECONDS, help="seconds a tick")
    parser.add_argument("--max-connections", type=int, help="serve's --max-connections")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if min(args.tabs) < 1 or args.turns < 0 or args.seconds <= 0 or args.poll <= 0:
        parser.error("--tabs at least 1, --turns 0 or more, --seconds and --poll above 0")

    load_at_start = Path("/proc/loadavg").read_text().split()[:3]
    folder = Path(tempfile.mkdtemp(prefix="bench-tab-sync-"))
    home = folder / "home"
    db_url = str(folder / "travel.sqlite")
    executable = shutil.which("travel-assistant")
    if executable is None:
        raise SystemExit("travel-assistant is not installed (pip install -e .)")
    env = {
        **os.environ,
        "TRAVEL_ASSISTANT_HOME": str(home),
        "TRAVEL_ASSISTANT_SECRET": secrets.token_hex(32),
        "OPENAI_API_KEY": "bench",
        "TRAVEL_ASSISTANT_MODEL": "scripted",
    }
    common = [executable, "--home", str(home), "--db", db_url]
    subprocess.run([*common, "db", "init", "--force"], env=env, check=True, capture_output=True)
    db = Database.from_url(db_url)
    passengers, _ = plan_stays(db, max(args.tabs))
    db.dispose()
    signer = TokenSigner(env["TRAVEL_ASSISTANT_SECRET"])
    results = []
    with FakeOpenAI(strict=True, responder=respond) as fake:
        env["OPENAI_BASE_URL"] = fake.base_url
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        serve = [*common, "serve", "--port", str(port), "--no-check"]
        if args.max_connections:
            serve += ["--max-connections", str(args.max_connections)]
        log = (folder / "worker.log").open("wb")
        worker = subprocess.Popen(serve, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_up(url, worker)
            tokens = [signer.issue(passenger) for passenger in passengers]

            async def set_up() -> list[str]:
                crowd = asyncio.Semaphore(8)
                return list(
                    await asyncio.gather(*(converse(url, t, args.turns, crowd) for t in tokens))
                )

            started = time.perf_counter()
            conversations = asyncio.run(set_up())
            print(
                f"# {len(conversations)} conversations of {args.turns} turns set up "
                f"in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
            tabs = [Tab(t, c) for t, c in zip(tokens, conversations, strict=True)]
            for probe in args.probe:
                for count in args.tabs:
                    result = measure(url, worker.pid, tabs[:count], probe, args)
                    results.append(result)
                    print(json.dumps(result), flush=True)
        finally:
            worker.send_signal(signal.SIGINT)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
            log.close()
    print(
        json.dumps(
            {
                "load_average_at_start": load_at_start,
                "load_average_at_end": Path("/proc/loadavg").read_text().split()[:3],
            }
        )
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    failed = any(r["errors"] for r in results)
    if failed:
        print("the worker's log is kept:", folder / "worker.log")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
