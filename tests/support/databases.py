"""The travel databases tests run on: the fixed moment they are built for, and how."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from db.clock import Clock, system_clock
from db.engine import Database

# Every test runs at this moment unless it says otherwise.
FIXED_NOW = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)


def build_sqlite(path: Path, *, seed: int, clock: Clock = system_clock) -> None:
    """Build the default-scale travel database into a new SQLite file at ``path``."""
    from db.generate import build_database

    database = Database.from_url(str(path), clock=clock)
    build_database(database, seed=seed, scale=1)
    database.dispose()
