"""Benchmark: how soon the program answers, from the start of the process.

Prints the median and the slowest wall time, over several runs, of:

- ``travel-assistant --help``;
- ``chat`` until its first prompt is drawn (in a pseudo-terminal, against the scripted
  OpenAI-compatible server on 127.0.0.1, with the travel database already built);
- ``chat`` until it has said an input error and left: an unknown passenger, a missing
  ``--db``, a bad ``--max-tokens`` value;
- the input errors of the other commands (``sessions delete`` of an id that is not
  saved, ``audit``, ``token``, ``eval``, ``serve`` on a busy port, ``desk``, ``desk
  second-approval`` with a mistyped amount), with a conversations store in the home, as
  any home that has chatted has;
- ``serve`` until ``GET /api/v1/health`` answers at all (a 503 "starting" counts: the
  service listens and answers while its assistant is built), and until it answers 200
  (the assistant is built and requests are served), asked every ``POLL`` seconds; and
  until the web chat's page (``/``) is served;

and, for the commands that exit by themselves, the CPU time (user + system) the process
took, which the other work on a shared machine disturbs less than wall time.

``--before DIR`` runs every figure a second time with ``python -m cli`` in the tree DIR
(a worktree of another commit), the two in turn (A B A B ...), and prints both with the
ratio of the medians: a paired, interleaved comparison that holds when the machine's
speed drifts. The program under test is then run the same way, from this tree.

``--only WORD`` runs only the figures whose name starts with WORD (``serve``, ``chat``).

    python scripts/bench_startup.py [--runs 5] [--before ../other-worktree] [--only serve]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pexpect  # noqa: E402

from tests.support.fake_openai import FakeOpenAI  # noqa: E402

PASSENGER = "3442 587242"
# How often the health check is asked while serve starts (each answer costs the service
# a little of the CPU its start needs, so not more often).
POLL = 0.02


def installed() -> list[str]:
    script = Path(sys.executable).parent / "travel-assistant"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


class Program:
    """One build of the program: how to start it, and from which folder."""

    def __init__(self, label: str, command: list[str], cwd: Path | None) -> None:
        self.label = label
        self.command = command
        self.cwd = cwd


def timed(run: Callable[[], None]) -> tuple[float, float]:
    """Return the wall time of ``run`` and the CPU time of the children it reaped."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def figures(program: Program, env: dict[str, str], busy_port: int) -> dict[str, Callable[[], None]]:
    """Return each figure's run: one start of the program, to the point measured.

    ``busy_port`` is a port something else listens on (``serve``'s busy-port error).
    """
    command = program.command

    def plain(*args: str, code: int | None) -> Callable[[], None]:
        """Run the program with ``args``; it must exit with ``code`` (``None``: any but 0)."""

        def run() -> None:
            done = subprocess.run(
                [*command, *args], env=env, cwd=program.cwd, capture_output=True, check=False
            )
            if done.returncode == 0 if code is None else done.returncode != code:
                raise SystemExit(f"{args}: exit {done.returncode}: {done.stderr.decode()}")

        return run

    def prompt() -> None:
        child = pexpect.spawn(
            command[0],
            [*command[1:], "chat", "--passenger-id", PASSENGER],
            env=env,
            cwd=program.cwd,
            encoding="utf-8",
            timeout=60,
        )
        child.expect("you>")
        child.terminate(force=True)

    def serve(ready: bool, path: str = "/api/v1/health") -> Callable[[], None]:
        def run() -> None:
            port = free_port()
            child = subprocess.Popen(
                [*command, "serve", "--port", str(port)],
                env=env,
                cwd=program.cwd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30):
                            return  # a 200
                    except urllib.error.HTTPError:  # a 503: starting
                        if not ready:
                            return
                    except OSError:  # nothing listens yet
                        pass
                    time.sleep(POLL)
                raise SystemExit("serve did not answer within 300 s")
            finally:
                child.terminate()
                child.wait()

        return run

    return {
        "--help": plain("--help", code=0),
        "chat: first prompt": prompt,
        "chat: unknown passenger": plain("chat", "--passenger-id", "1111 111111", code=2),
        "chat: missing --db": plain(
            "chat", "--passenger-id", PASSENGER, "--db", "/nonexistent/travel.sqlite", code=2
        ),
        "chat: bad --max-tokens": plain(
            "chat", "--passenger-id", PASSENGER, "--max-tokens", "x", code=2
        ),
        # Input errors of the other commands (issue 49: each within about 0.4 s).
        "error: sessions delete": plain("sessions", "delete", "no-such-session", code=2),
        "error: audit --limit": plain("audit", "--limit", "0", code=2),
        "audit: empty log": plain("audit", "--supervisor", "nobody", code=0),
        "error: token passenger": plain("token", "--passenger-id", "1111 111111", code=2),
        "error: token --hours": plain("token", "--passenger-id", PASSENGER, "--hours", "0", code=2),
        "error: eval --trials": plain("eval", "--trials", "0", code=2),
        "error: eval --scenario": plain("eval", "--scenario", "no_such_scenario", code=2),
        # Any failure: uvicorn's own exit code before it was said first.
        "error: serve busy port": plain("serve", "--port", str(busy_port), code=None),
        "error: desk no --agent": plain("desk", code=2),
        "desk second-approval: a mistyped amount": plain(
            "desk", "second-approval", "a lot", code=2
        ),
        "serve: health answers": serve(ready=False),
        "serve: ready (200)": serve(ready=True),
        "serve: the page (/)": serve(ready=True, path="/"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--before", type=Path, help="a tree of another commit, run as python -m cli"
    )
    parser.add_argument(
        "--only", metavar="WORD", help="only the figures whose name starts with WORD"
    )
    args = parser.parse_args()
    if args.before:
        programs = [
            Program("after", [sys.executable, "-m", "cli"], ROOT),
            Program("before", [sys.executable, "-m", "cli"], args.before.resolve()),
        ]
    else:
        programs = [Program("installed", installed(), None)]
    with tempfile.TemporaryDirectory() as name, FakeOpenAI() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
        env.pop("PYTHONPATH", None)
        env.update(
            TRAVEL_ASSISTANT_HOME=name,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="bench",
            PROMPT_TOOLKIT_NO_CPR="1",
            NO_COLOR="1",
            TRAVEL_ASSISTANT_SECRET="bench-secret-bench-secret-bench-secret",
        )
        subprocess.run(
            [*programs[0].command, "db", "init"],
            env=env,
            cwd=programs[0].cwd,
            check=True,
            capture_output=True,
        )
        # A conversations store, as any home that has chatted has: the errors of the
        # commands that read it are measured with it there.
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from conversations.store import ConversationStore; "
                "ConversationStore.open(sys.argv[1]).close()",
                str(Path(name) / "sessions.sqlite"),
            ],
            cwd=ROOT,
            check=True,
        )
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        runs = {
            program.label: {
                name: run
                for name, run in figures(program, env, busy.getsockname()[1]).items()
                if name.startswith(args.only or "")
            }
            for program in programs
        }
        loads = [os.getloadavg()[0]]
        walls: dict[tuple[str, str], list[float]] = {}
        cpus: dict[tuple[str, str], list[float]] = {}
        for figure in runs[programs[0].label]:
            for program in programs:  # one warm-up each
                runs[program.label][figure]()
            for _ in range(args.runs):
                for program in programs:
                    wall, cpu = timed(runs[program.label][figure])
                    walls.setdefault((figure, program.label), []).append(wall)
                    cpus.setdefault((figure, program.label), []).append(cpu)
                loads.append(os.getloadavg()[0])
        print(
            f"load average (1 min, /proc/loadavg) {min(loads):.2f} to {max(loads):.2f}; "
            f"{args.runs} runs"
        )
        print(
            f"{'figure':<26} {'build':<9} {'wall median':>12} {'fastest':>9} {'slowest':>9} "
            f"{'CPU median':>11}"
        )
        for figure in runs[programs[0].label]:
            for program in programs:
                wall = walls[figure, program.label]
                cpu = cpus[figure, program.label]
                shown_cpu = (
                    ""
                    if figure.startswith(("chat: first", "serve"))
                    else (f"{statistics.median(cpu) * 1000:8.0f} ms")
                )
                print(
                    f"{figure:<26} {program.label:<9} {statistics.median(wall) * 1000:9.0f} ms "
                    f"{min(wall) * 1000:6.0f} ms {max(wall) * 1000:6.0f} ms {shown_cpu:>11}"
                )
            if len(programs) == 2:
                ratio = statistics.median(walls[figure, "after"]) / statistics.median(
                    walls[figure, "before"]
                )
                print(f"{'':<26} {'after/before':<12} {ratio:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
