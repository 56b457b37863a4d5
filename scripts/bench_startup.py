"""Benchmark: start-up time of the terminal program.

Prints the median and slowest wall time, over several runs, of ``travel-assistant
--help`` and of ``travel-assistant chat`` until its first prompt is drawn (in a
pseudo-terminal, against the scripted OpenAI-compatible server on 127.0.0.1, with the
travel database already built).

    python scripts/bench_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pexpect

from tests.support.fake_openai import FakeOpenAI


def program() -> list[str]:
    script = Path(sys.executable).parent / "travel-assistant"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name, FakeOpenAI() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
        env.update(
            TRAVEL_ASSISTANT_HOME=name,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="bench",
            PROMPT_TOOLKIT_NO_CPR="1",
            NO_COLOR="1",
        )
        subprocess.run([*program(), "db", "init"], env=env, check=True, capture_output=True)
        helps, chats = [], []
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run([*program(), "--help"], env=env, check=True, capture_output=True)
            helps.append(time.perf_counter() - started)
            started = time.perf_counter()
            child = pexpect.spawn(
                program()[0],
                [*program()[1:], "chat", "--passenger-id", "3442 587242"],
                env=env,
                encoding="utf-8",
                timeout=60,
            )
            child.expect("you>")
            chats.append(time.perf_counter() - started)
            child.terminate(force=True)
        for label, values in (("travel-assistant --help", helps), ("chat to first prompt", chats)):
            print(
                f"{label:<24} median {statistics.median(values) * 1000:6.0f} ms, "
                f"slowest {max(values) * 1000:6.0f} ms ({len(values)} runs)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
