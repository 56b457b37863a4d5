"""Orchestration: build the database by running every stage in order, in one transaction.

``build_database`` drops and recreates every table; ``ensure_database`` builds only when
the tables are missing. Each stage draws from its own random generator, seeded from
``seed`` and the stage's topic, so the stages stay stable when another one changes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from types import MappingProxyType

from sqlalchemy import Engine

from db.engine import Database
from db.generate.bulk_load import _open_writer, _RowSink, _Writer
from db.generate.fixture_bookings import _book_fixture_reservations, _sell_fixture_tickets
from db.generate.reference import ReferenceData, _write_reference, load_reference_data
from db.generate.reservations import _book_random_reservations, _Reservations
from db.generate.sales import _Counters, _People, _Sales
from db.generate.schedule import _build_schedule, _plan_quotas, _plan_routes, _write_flights

DEFAULT_SCALE = 1
MAX_SCALE = 25
DEFAULT_SEED = 42
# ``load`` multiplies the share of seats the random sales fill (``build_database``).
# SMALL_LOAD gives a database about a tenth the size of the full load's, with the same
# schedule, fixtures and rules: what the tests build unless one needs the full data.
DEFAULT_LOAD = 1.0
SMALL_LOAD = 0.1
MIN_LOAD = 0.05


@dataclass(frozen=True)
class BuildReport:
    """What a build produced.

    Attributes:
        seed: The seed the rows were generated from.
        scale: The size of the schedule.
        now: The moment the data is relative to (UTC).
        counts: Rows written per table, in dependency order.
        seconds: Wall time the build took.
        load: The share of the full load the random sales filled.
    """

    seed: int
    scale: int
    now: datetime
    counts: Mapping[str, int]
    seconds: float
    load: float = DEFAULT_LOAD

    @property
    def total_rows(self) -> int:
        """Return the number of rows written over all tables."""
        return sum(self.counts.values())


def _generate(
    writer: _Writer, ref: ReferenceData, seed: int, scale: int, load: float, now: datetime
) -> dict[str, int]:
    """Write every row; each concern draws from its own generator so they stay stable."""

    def rng(topic: str) -> random.Random:
        return random.Random(f"{seed}:{topic}")

    sink = _RowSink(writer)
    _write_reference(sink, ref)
    routes = _plan_routes(ref, scale, rng("routes"))
    flights = _build_schedule(ref, routes, now, rng("schedule"))
    _write_flights(sink, flights)
    sink.flush()

    counters = _Counters()
    people = _People(sink, rng("people"))
    sales = _Sales(sink, people, counters, now, rng("sales"))
    full_flight = _sell_fixture_tickets(sales, people, ref, flights, now)
    _plan_quotas(flights, full_flight, now, rng("quotas"), load)
    sales.sell_connections(flights)
    sales.sell_direct(flights)
    sink.flush()

    reservations = _Reservations(sink, counters, now, rng("reservations"))
    owners = people.random_ids
    _book_fixture_reservations(reservations, ref, flights, owners, now, rng("fixture-stays"))
    _book_random_reservations(reservations, ref, owners, scale, now.date(), rng("stays"))
    sink.flush()
    return sink.counts


def _build(
    db: Database,
    seed: int,
    scale: int,
    load: float,
    now: datetime | None,
    only_if_missing: bool,
) -> BuildReport | None:
    if not 1 <= scale <= MAX_SCALE:
        raise ValueError(f"scale must be between 1 and {MAX_SCALE}, not {scale}.")
    if not MIN_LOAD <= load <= 1:
        raise ValueError(f"load must be between {MIN_LOAD} and 1, not {load}.")
    moment = now if now is not None else db.clock()
    if moment.tzinfo is None:
        raise ValueError("now must be timezone-aware.")
    moment = moment.astimezone(UTC)
    started = perf_counter()
    ref = load_reference_data(db.data_dir)
    with _open_writer(db.engine, only_if_missing) as writer:
        if writer is None:
            return None
        counts = _generate(writer, ref, seed, scale, load, moment)
    seconds = perf_counter() - started
    return BuildReport(seed, scale, moment, MappingProxyType(counts), seconds, load)


def build_database(
    db: Database,
    *,
    seed: int = DEFAULT_SEED,
    scale: int = DEFAULT_SCALE,
    load: float = DEFAULT_LOAD,
    now: datetime | None = None,
) -> BuildReport:
    """Drop and recreate every table, then fill the database deterministically.

    The same ``seed``, ``scale``, ``load`` and "now" always give the same rows.

    Args:
        db: The database to (re)build; its clock gives "now" unless ``now`` is passed.
        seed: The seed of every random choice.
        scale: The size of the route network, 1 to ``MAX_SCALE``.
        load: How full the random sales make the flights, ``MIN_LOAD`` to 1: each cabin's
            quota of random tickets is multiplied by it. Below 1 the database is smaller
            (``SMALL_LOAD`` gives about a tenth of the tickets, passengers and payments)
            but has the same schedule, fares, statuses, fixtures (the full flight stays
            full) and rules; the random sales and reservations differ from the full
            load's. Partner reservations keep their number.
        now: The moment the data is relative to (timezone-aware).

    Returns:
        The rows written per table and the time taken.

    Raises:
        ValueError: ``scale`` or ``load`` is out of range, ``now`` is naive, or a reference
            file is inconsistent with the fixtures.
    """
    report = _build(db, seed, scale, load, now, only_if_missing=False)
    assert report is not None  # only_if_missing=False always builds
    return report


def _make_parent_folder(engine: Engine) -> None:
    url = engine.url
    if url.get_backend_name() != "sqlite":
        return
    path = url.database
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)


def ensure_database(
    db: Database,
    *,
    seed: int = DEFAULT_SEED,
    scale: int = DEFAULT_SCALE,
    load: float = DEFAULT_LOAD,
) -> bool:
    """Build the database unless it already has its tables.

    Creates the folder of a SQLite file first. Two processes starting at once do not
    both build: the second waits for the first (SQLite's write lock, a PostgreSQL
    advisory lock) and then finds the tables.

    Args:
        db: The database; its clock gives "now".
        seed: The seed used if a build is needed.
        scale: The scale used if a build is needed.
        load: The load used if a build is needed.

    Returns:
        ``True`` if this call built the database, ``False`` if it was already there.
    """
    _make_parent_folder(db.engine)
    if db.has_schema():
        return False
    return _build(db, seed, scale, load, None, only_if_missing=True) is not None
