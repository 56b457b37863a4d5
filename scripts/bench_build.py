"""Benchmark: how long building the travel database takes, and how big it gets.

Builds the database in a temporary folder at the default and the largest scale (or the
scales given), with the clock fixed so runs are comparable, and prints per scale the
build time, the file size and the row count of every table.

    python scripts/bench_build.py [--scales 1 25] [--seed 42]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from db.clock import fixed_clock
from db.engine import Database
from db.generate import DEFAULT_SCALE, DEFAULT_SEED, MAX_SCALE, BuildReport, build_database

# A fixed "now" keeps the schedule, and so the row counts, identical between runs.
BENCH_NOW = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def build_once(folder: Path, scale: int, seed: int) -> tuple[BuildReport, int]:
    """Build at ``scale`` into a fresh file; return the report and the file size."""
    path = folder / f"travel-scale-{scale}.sqlite"
    database = Database.from_url(str(path), clock=fixed_clock(BENCH_NOW))
    try:
        report = build_database(database, seed=seed, scale=scale)
    finally:
        database.dispose()
    return report, path.stat().st_size


def format_report(report: BuildReport, size: int) -> str:
    """Return a few lines describing one build."""
    lines = [
        f"scale {report.scale}: {report.seconds:.1f} s, {report.total_rows:,} rows, "
        f"{size / 1_000_000:.1f} MB"
    ]
    width = max(len(table) for table in report.counts)
    lines += [f"  {table:<{width}}  {count:>10,}" for table, count in report.counts.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[DEFAULT_SCALE, MAX_SCALE])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-build-") as folder:
        for scale in args.scales:
            report, size = build_once(Path(folder), scale, args.seed)
            print(format_report(report, size), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
