"""Run the end-to-end crash-and-resume test many times beside a CPU burner.

The test kills the terminal program with SIGKILL while an approval is pending and
resumes the conversation in a new process. Under load, a slow process must still find
the approval pending and carry it out once. This script is for maintainers, not CI:

    python scripts/stress_e2e_resume.py --runs 20 --burners 2

It prints one line per run and the tally, and exits non-zero if any run failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/integration/test_e2e_openai.py::test_e2e_delegation_approval_and_resume"


def burn(stop: multiprocessing.synchronize.Event) -> None:
    """Keep one core busy until ``stop`` is set."""
    value = 0
    while not stop.is_set():
        for _ in range(100_000):
            value = (value * 31 + 7) % 1_000_003


def main(argv: list[str] | None = None) -> int:
    """Run the test ``--runs`` times with ``--burners`` busy processes beside it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--burners", type=int, default=multiprocessing.cpu_count())
    args = parser.parse_args(argv)
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=burn, args=(stop,)) for _ in range(args.burners)]
    for process in burners:
        process.start()
    failures = 0
    try:
        for run in range(1, args.runs + 1):
            started = time.perf_counter()
            result = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", TEST],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            seconds = time.perf_counter() - started
            verdict = "pass" if result.returncode == 0 else "FAIL"
            failures += result.returncode != 0
            print(f"run {run:>2}: {verdict} in {seconds:.1f} s", flush=True)
            if result.returncode != 0:
                print(result.stdout[-3000:], flush=True)
    finally:
        stop.set()
        for process in burners:
            process.join()
    print(f"{args.runs - failures} of {args.runs} runs passed beside {args.burners} burners")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
