"""The travel databases tests run on: the fixed moment they are built for, and how.

Tests run on a small database: scale 1 at ``SMALL_LOAD`` (``db.generate.build_database``),
the same schedule, fixtures and rules as the full one with a tenth of its random ticket
sales, so each test's private copy is about 4 MB rather than 32 MB. A test that needs
the full data (statistics of the generator, result counts of a busy schedule) is marked
``full_scale``; ``db_path``, ``db_url`` and ``travel_db`` then copy the full-load
template instead (``tests/conftest.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from db.clock import Clock, system_clock
from db.engine import Database

# Every test runs at this moment unless it says otherwise.
FIXED_NOW = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
# The marker of a test that needs the full-load database.
FULL_SCALE_MARK = "full_scale"


def database_load(full_scale: bool) -> float:
    """Return the ``load`` of the tests' database: ``SMALL_LOAD``, or 1 for ``full_scale``."""
    from db.generate import DEFAULT_LOAD, SMALL_LOAD

    return DEFAULT_LOAD if full_scale else SMALL_LOAD


def build_url(
    url: str, *, seed: int, clock: Clock = system_clock, full_scale: bool = False
) -> None:
    """Build the scale-1 travel database at ``url`` (a SQLite path or a server's URL).

    Small (``SMALL_LOAD``) unless ``full_scale``.
    """
    from db.generate import build_database

    database = Database.from_url(url, clock=clock)
    try:
        build_database(database, seed=seed, scale=1, load=database_load(full_scale))
    finally:
        database.dispose()


def build_sqlite(
    path: Path, *, seed: int, clock: Clock = system_clock, full_scale: bool = False
) -> None:
    """Build the scale-1 travel database into a new SQLite file at ``path``.

    Small (``SMALL_LOAD``) unless ``full_scale``.
    """
    build_url(str(path), seed=seed, clock=clock, full_scale=full_scale)
