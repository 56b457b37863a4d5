"""Benchmark: CPU instructions per warm conversation, counted by valgrind's callgrind.

Instruction counts repeat whatever the machine's load, where times drift. Each figure
is one run of ``scripts/bench_conversation.py --play 2`` under
``PYTHONHASHSEED=0 valgrind --tool=callgrind --fair-sched=yes``: the process builds the
assistant, plays the conversation once unmeasured, then again; the second, a
conversation in a process that has served one (the service, a clerk's terminal after
the first customer), is what is counted, between two marks where callgrind dumps a part
of its profile. ``--difference`` also runs ``--play 1`` and prints ``--play 2`` minus
``--play 1``, the figure BENCHMARKS.md quoted before, beside it. The process starts as
the program does (``cli.py``): once built, what is alive is frozen out of the garbage
collector's way (``collector.loading_code``). Two paths:

- ``terminal``: ``TravelAssistant.send``/``resolve``, the sync API the terminal's chat
  drives (the turn runs on the process's turn loop);
- ``protocol``: each turn through ``conversations.protocol`` (claim, records, previews,
  answers), as the terminal and the service drive it (``--protocol``).

    python scripts/bench_instructions.py                       # both paths, 14 turns
    python scripts/bench_instructions.py --tree /tmp/base      # and another checkout beside
    python scripts/bench_instructions.py --check               # the guard .ci/run runs

``--tree DIR`` measures another checkout (``git worktree add /tmp/base 2c2dfca``, or
``git archive``) with its own ``bench_conversation.py`` and the same interpreter,
libraries and database, in the same run, and prints each tree's count as a ratio to it.
``--keep DIR`` keeps callgrind's profiles there, for
``callgrind_annotate --inclusive=yes DIR/this.protocol.2.out.2`` (part 2 is the warm
conversation).

``--check`` runs the path and length recorded in ``scripts/instructions.json`` and fails
(exit 1) when the count is more than 10 % over the figure recorded there; ``--record``
writes the figure measured (do it in the commit of a deliberate change).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
RECORD = HERE / "scripts" / "instructions.json"
PATHS = ("terminal", "protocol")
# How much the count may grow over the recorded figure before the guard fails.
ALLOWED_GROWTH = 0.10
_COLLECTED = re.compile(r"Collected\s*:\s*([0-9]+)")


@dataclass(frozen=True)
class Job:
    """One callgrind run: a tree's benchmark on one path, playing ``plays`` conversations."""

    tree: Path
    label: str
    path: str
    plays: int
    turns: int


# Runs a tree's ``bench_conversation.py`` started as the program starts (below) and with
# its ``play`` bracketed: the last
# conversation played starts and ends with ``os.sched_yield()``, where callgrind dumps a
# profile part (``--dump-before=sched_yield``; nothing else here calls it). The part
# between the two marks is that conversation, the warm one with ``--play 2``.
_BRACKETED = """
import importlib.util, os, sys
tree, plays = sys.argv[1], int(sys.argv[3])
sys.argv = [os.path.join(tree, "scripts", "bench_conversation.py"), *sys.argv[2:]]
spec = importlib.util.spec_from_file_location("bench_conversation", sys.argv[0])
bench = sys.modules["bench_conversation"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
# Start as the program does (cli.py): the code loaded, the collector freezes what is
# alive (``collector.loading_code``), here once the assistant is built.
import collector
collector.own_process()
build = bench.TravelAssistant.build.__func__

def built(cls, *args, **kwargs):
    with collector.loading_code():
        return build(cls, *args, **kwargs)

bench.TravelAssistant.build = classmethod(built)
played = []
original = bench.play

def play(*args, **kwargs):
    played.append(None)
    last = len(played) == plays
    if last:
        os.sched_yield()
    try:
        return original(*args, **kwargs)
    finally:
        if last:
            os.sched_yield()

bench.play = play
raise SystemExit(bench.main())
"""
_TOTALS = re.compile(r"^(?:totals|summary):\s*([0-9]+)", re.MULTILINE)


def count(job: Job, template: Path, keep: Path | None) -> tuple[int, int]:
    """Run ``job`` under callgrind; return (the whole run's, the last conversation's) count."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--fair-sched=yes",
            "--dump-before=sched_yield",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            _BRACKETED,
            str(job.tree),
            "--play",
            str(job.plays),
            "--turns",
            str(job.turns),
            "--template",
            str(template),
        ]
        if job.path == "protocol":
            command.append("--protocol")
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(job.tree)}
        # From a scratch folder: neither tree reads a .env or writes beside the other.
        done = subprocess.run(
            command, cwd=scratch, env=env, capture_output=True, text=True, check=False
        )
        collected = _COLLECTED.findall(done.stderr)
        parts = sorted(Path(scratch).glob("callgrind.out*"), key=_part_number)
        if done.returncode != 0 or not collected or len(parts) != 3:
            tail = "\n".join(done.stderr.splitlines()[-15:])
            raise SystemExit(
                f"{job.label} {job.path} --play {job.plays} failed "
                f"({len(parts)} profile parts, 3 expected):\n{tail}"
            )
        totals = [_totals(part) for part in parts]
        if keep is not None:
            for part in parts:
                name = f"{job.label}.{job.path}.{job.plays}.{part.name.replace('callgrind.', '')}"
                shutil.copy(part, keep / name)
    # Parts: the start and the conversations before, the last conversation, the exit.
    return int(collected[-1]), totals[1]


def _part_number(part: Path) -> int:
    suffix = part.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else 1_000  # the final dump comes last


def _totals(part: Path) -> int:
    found = _TOTALS.findall(part.read_text(errors="replace"))
    if not found:
        raise SystemExit(f"no totals in {part}")
    return int(found[-1])


def build_template(template: Path) -> None:
    """Build the benchmark's database once (unmeasured), if it is not there yet."""
    if template.exists():
        return
    script = str(HERE / "scripts" / "bench_conversation.py")
    subprocess.run(
        [sys.executable, script, "--play", "1", "--turns", "1", "--template", str(template)],
        env={**os.environ, "PYTHONPATH": str(HERE)},
        check=True,
        capture_output=True,
    )


def measure(
    trees: list[tuple[str, Path]],
    paths: list[str],
    turns: int,
    template: Path,
    keep: Path | None,
    jobs: int,
    difference: bool,
) -> dict[tuple[str, str], int]:
    """Return the instructions per warm conversation of each (tree, path).

    The part of ``--play 2`` between its marks; with ``difference``, also ``--play 1``,
    and the difference of the two whole runs is printed beside it (the same figure, give
    or take the exit's and the warm-up's housekeeping).
    """
    plays = (1, 2) if difference else (2,)
    runs = [
        Job(tree, label, path, n, turns) for label, tree in trees for path in paths for n in plays
    ]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        counted = dict(zip(runs, pool.map(lambda j: count(j, template, keep), runs), strict=True))
    warm: dict[tuple[str, str], int] = {}
    for label, tree in trees:
        for path in paths:
            whole, last = counted[Job(tree, label, path, 2, turns)]
            warm[(label, path)] = last
            line = f"  {label} {path}: --play 2 {whole:,}, its last conversation {last:,}"
            if difference:
                one = counted[Job(tree, label, path, 1, turns)][0]
                line += f"; --play 2 minus --play 1 {whole - one:,}"
            print(line)
    return warm


def commit_of(tree: Path) -> str:
    """Return the short commit of ``tree``'s checkout, or ``?`` (an archive has none)."""
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else "?"


def main() -> int:
    """Measure, print, and check or record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=14, help="conversation length (14)")
    parser.add_argument("--path", choices=[*PATHS, "both"], default="both")
    parser.add_argument(
        "--tree",
        type=Path,
        action="append",
        default=[],
        help="another checkout, measured beside this one (repeatable; ratios to the first)",
    )
    parser.add_argument("--template", type=Path, help="the benchmark's database (built if missing)")
    parser.add_argument("--keep", type=Path, help="keep callgrind's profiles in this folder")
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at once (2)")
    parser.add_argument(
        "--check", action="store_true", help="fail when over the recorded figure by > 10 %%"
    )
    parser.add_argument("--record", action="store_true", help="write the figure measured")
    parser.add_argument(
        "--difference",
        action="store_true",
        help="also run --play 1 and print --play 2 minus --play 1 (twice the runs)",
    )
    args = parser.parse_args()
    recorded: dict[str, Any] = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    if args.check or args.record:
        if args.check and not recorded:
            raise SystemExit(f"--check: no figure recorded in {RECORD.name}; run --record")
        if args.check:
            args.turns, args.path = recorded["turns"], recorded["path"]
        elif args.path == "both":
            args.path = "protocol"
    paths = list(PATHS) if args.path == "both" else [args.path]
    trees = [("this", HERE)] + [(t.resolve().name, t.resolve()) for t in args.tree]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        template = args.template or Path(scratch) / "template.sqlite"
        build_template(template.resolve())
        print(
            f"instructions per warm conversation of {args.turns} turns (callgrind, the "
            f"second of --play 2), load {os.getloadavg()[0]:.1f}:"
        )
        warm = measure(
            trees, paths, args.turns, template.resolve(), args.keep, args.jobs, args.difference
        )
    first = trees[1][0] if len(trees) > 1 else None
    for (label, path), instructions in warm.items():
        line = f"{label} ({commit_of(dict(trees)[label])}) {path}: {instructions / 1e6:,.1f} M"
        if first is not None and label != first:
            line += f" = {instructions / warm[(first, path)]:.3f}x {first}'s"
        print(line)
    print(f"({time.monotonic() - started:.0f} s)")
    measured = warm[("this", paths[0])]
    if args.record:
        figure = {
            "path": paths[0],
            "turns": args.turns,
            "instructions": measured,
            "date": datetime.now(UTC).date().isoformat(),
            "note": "scripts/bench_instructions.py --record; --check fails above 1.10x this",
        }
        RECORD.write_text(json.dumps(figure, indent=2) + "\n")
        print(f"recorded {measured:,} in {RECORD.relative_to(HERE)}")
    if args.check:
        limit = recorded["instructions"] * (1 + ALLOWED_GROWTH)
        ratio = measured / recorded["instructions"]
        if measured > limit:
            print(
                f"FAIL: {measured:,} instructions is {ratio:.3f}x the recorded "
                f"{recorded['instructions']:,} (at most {1 + ALLOWED_GROWTH:.2f}x). If the growth "
                "is deliberate, run scripts/bench_instructions.py --record and commit it."
            )
            return 1
        print(f"ok: {ratio:.3f}x the recorded {recorded['instructions']:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
