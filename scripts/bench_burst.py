"""Burst benchmark: hundreds of requests at once on one worker, as after a restart (issue 49).

Starts one ``travel-assistant serve`` (no model server: ``GET /api/v1/me`` needs none),
waits until it answers, then for each count of ``--requests`` sends that many requests at
once, each on its own connection with a token of its own passenger, as every open tab
does when a worker comes back. Each figure a line, per burst:

- ``served_first_second``: answered 200 within one second of the burst;
- ``served``, ``refused_503`` and ``errors`` (anything else, or no answer) at the first try;
- ``first_s``, ``p95_s``, ``max_s``: the time to the answer of the served requests, from
  the moment the burst begins (its connections included);
- ``all_served_s``: with every refused client trying again after the ``Retry-After`` it
  was given (as the web chat does), the seconds until the last one was served, and
  ``tries_max``, the most tries one client needed.

``--max-connections`` and ``--queue-timeout`` pass on to ``serve``; ``--tree DIR`` runs
the worker as ``python -m cli`` from another source tree (another commit, unpacked with
``git archive``), for the figures before a change:

    python scripts/bench_burst.py                             # 300 and 1,000 at once
    python scripts/bench_burst.py --requests 300 1000 --tree ../base
    python scripts/bench_burst.py --max-connections 4 --requests 8
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from db.engine import Database
from db.models import Passenger
from server.auth import TokenSigner
from tests.support.web import free_port

PATH = "/api/v1/me"
# Nothing listens on the discard port; ``--no-check`` keeps the start from asking it.
NO_MODEL_SERVER = "http://127.0.0.1:9/v1"


@dataclass
class Outcome:
    """One client's burst: its first answer and, trying again after 503, its last."""

    first_status: int = 0
    first_seconds: float = 0.0
    served_seconds: float | None = None
    tries: int = 0
    errors: list[str] = field(default_factory=list)


async def ask(port: int, request: bytes) -> tuple[int, int]:
    """Send ``request`` on a new connection; return its status and ``Retry-After`` (0: none)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        retry = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "retry-after":
                retry = int(value.strip())
        with contextlib.suppress(ConnectionError):
            await reader.read()  # ``Connection: close``: to its end
        return status, retry
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def client(port: int, token: str, start: float, retry: bool, deadline: float) -> Outcome:
    """Ask once at ``start``; with ``retry``, again after each 503's ``Retry-After``."""
    request = (
        f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    loop = asyncio.get_running_loop()
    outcome = Outcome()
    while True:
        outcome.tries += 1
        try:
            status, wait = await ask(port, request)
        except (OSError, asyncio.IncompleteReadError, ValueError) as error:
            status, wait = 0, 1
            outcome.errors.append(type(error).__name__)
        took = loop.time() - start
        if outcome.tries == 1:
            outcome.first_status, outcome.first_seconds = status, took
        if status == 200:
            outcome.served_seconds = took
            return outcome
        if not retry or status not in (0, 503) or loop.time() > deadline:
            return outcome
        await asyncio.sleep(wait or 1)


async def burst(port: int, tokens: list[str], retry: bool) -> list[Outcome]:
    """Send one request per token at once; return every client's outcome."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    return await asyncio.gather(
        *(client(port, token, start, retry, start + 120) for token in tokens)
    )


def figures(outcomes: list[Outcome]) -> dict[str, float | int]:
    """Return the burst's figures (see the module's docstring)."""
    served = sorted(o.first_seconds for o in outcomes if o.first_status == 200)
    everyone = [o.served_seconds for o in outcomes]
    p95 = served[math.ceil(0.95 * len(served)) - 1] if served else 0.0  # nearest rank
    return {
        "requests": len(outcomes),
        "served_first_second": sum(1 for s in served if s <= 1.0),
        "served": len(served),
        "refused_503": sum(1 for o in outcomes if o.first_status == 503),
        "errors": sum(1 for o in outcomes if o.first_status not in (200, 503)),
        "first_s": round(served[0], 3) if served else 0.0,
        "p95_s": round(p95, 3),
        "max_s": round(served[-1], 3) if served else 0.0,
        "all_served_s": (
            round(max(s for s in everyone if s is not None), 2)
            if all(s is not None for s in everyone)
            else -1
        ),
        "tries_max": max(o.tries for o in outcomes),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--max-connections", type=int, default=None)
    parser.add_argument("--queue-timeout", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=1, help="bursts of each size")
    parser.add_argument("--tree", type=Path, help="run the worker from this source tree")
    args = parser.parse_args(argv)

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket per client
    load = Path("/proc/loadavg").read_text().split()[:3]
    folder = Path(tempfile.mkdtemp(prefix="bench-burst-"))
    home = folder / "home"
    db_url = str(folder / "travel.sqlite")
    executable = shutil.which("travel-assistant")
    if executable is None:
        raise SystemExit("travel-assistant is not installed (pip install -e .)")
    program, cwd, tree = [executable], None, {}
    if args.tree is not None:
        program, cwd = [sys.executable, "-m", "cli"], args.tree.resolve()
        tree = {"PYTHONPATH": str(cwd)}
    secret = secrets.token_hex(32)
    env = {
        **os.environ,
        **tree,
        "TRAVEL_ASSISTANT_HOME": str(home),
        "TRAVEL_ASSISTANT_SECRET": secret,
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": NO_MODEL_SERVER,
        "TRAVEL_ASSISTANT_MODEL": "scripted",
    }
    common = [*program, "--home", str(home), "--db", db_url]
    subprocess.run(
        [*common, "db", "init", "--force"], env=env, check=True, capture_output=True, cwd=cwd
    )
    count = max(args.requests)
    db = Database.from_url(db_url)
    with db.session() as session:
        passengers = list(session.scalars(select(Passenger.passenger_id).limit(count)))
    db.dispose()
    signer = TokenSigner(secret)
    tokens = [signer.issue(passengers[i % len(passengers)]) for i in range(count)]

    options = []
    if args.max_connections is not None:
        options += ["--max-connections", str(args.max_connections)]
    if args.queue_timeout is not None:
        options += ["--queue-timeout", str(args.queue_timeout)]
    port = free_port()
    log = folder / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(
            [*common, "serve", "--port", str(port), "--no-check", *options],
            env=env,
            cwd=cwd,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 180
        while True:
            if worker.poll() is not None:
                raise SystemExit(f"the worker stopped: {log.read_text(errors='replace')}")
            with contextlib.suppress(httpx.TransportError):
                answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=5).status_code
                if answer == 200:
                    break
            if time.monotonic() > deadline:
                raise SystemExit("the worker did not become ready")
            time.sleep(0.1)
        print(f"load_at_start {' '.join(load)}")
        print(f"tree {args.tree or 'this one'}; options {' '.join(options) or 'defaults'}")
        for size in args.requests:
            for _ in range(args.rounds):
                time.sleep(2)  # the previous burst's connections are gone
                result = figures(asyncio.run(burst(port, tokens[:size], retry=True)))
                print(" ".join(f"{name}={value}" for name, value in result.items()))
        print(f"load_at_end {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
