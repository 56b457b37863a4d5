"""The database generator: determinism, the documented fixtures, integrity and capacity."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from db import fixtures as fx
from db import generate
from db.clock import fixed_clock
from db.engine import Database, reference_data_dir
from db.errors import DatabaseMissingError
from db.generate import (
    BUSINESS_BOUGHT_AGO,
    BUSINESS_DAYS_AHEAD,
    CHECKED_IN_DEPARTURE_IN,
    COLUMNS,
    DEFAULT_LOAD,
    FLOWN_DAYS_AGO,
    MAX_SCALE,
    MIN_CONNECTION,
    MIN_LOAD,
    MULTI_SEGMENT_DAYS_AHEAD,
    SMALL_LOAD,
    BuildReport,
    build_database,
    ensure_database,
    load_reference_data,
)
from db.generate import build as generate_build
from db.generate.bulk_load import _core_writer, _RowSink
from db.generate.reservations import _Reservations
from db.generate.sales import _Counters
from db.generate.schedule import SCHEDULE_DAYS_AFTER, SCHEDULE_DAYS_BEFORE
from db.models import (
    BOOKABLE_FLIGHT_STATUSES,
    Airport,
    Base,
    BoardingPass,
    Booking,
    CarRental,
    CarRentalBooking,
    ExcursionBooking,
    Flight,
    FlightFare,
    Hotel,
    HotelBooking,
    Passenger,
    Payment,
    Seat,
    Ticket,
    TicketFlight,
    TripRecommendation,
)
from tests.support.databases import FIXED_NOW, database_load

TODAY = FIXED_NOW.date()
SQLITE_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$")
# Tables whose rows are generated (the others are copied from data/).
GENERATED_TABLES = (
    "flights",
    "flight_fares",
    "passengers",
    "bookings",
    "tickets",
    "ticket_flights",
    "boarding_passes",
    "hotel_bookings",
    "car_rental_bookings",
    "excursion_bookings",
    "payments",
)


def _floor_5(moment: datetime) -> datetime:
    return moment.replace(minute=moment.minute - moment.minute % 5, second=0, microsecond=0)


def _table_digest(path: Path, table: str) -> str:
    """Hash every row of a table in primary-key order (rowid order is not part of the contract)."""
    columns = ", ".join(COLUMNS[table])
    with sqlite3.connect(path) as connection:
        keys = [row[1] for row in connection.execute(f"PRAGMA table_info({table})") if row[5]]
        rows = connection.execute(f"SELECT {columns} FROM {table} ORDER BY {', '.join(keys)}")
        digest = hashlib.sha256()
        for row in rows:
            digest.update(repr(row).encode())
    return digest.hexdigest()


def _rows_digest(url: str, table: str) -> str:
    """Hash every row of a table as SQLAlchemy reads it back, on either engine.

    The rows are sorted in Python: the engines order text differently.
    """
    database = Database.from_url(url)
    columns = [Base.metadata.tables[table].c[name] for name in COLUMNS[table]]
    try:
        with database.engine.connect() as connection:
            rows = sorted(repr(tuple(row)) for row in connection.execute(select(*columns)))
    finally:
        database.dispose()
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _data_digest(folder: Path) -> dict[str, str]:
    return {
        item.name: hashlib.sha256(item.read_bytes()).hexdigest()
        for item in sorted(folder.iterdir())
        if item.is_file()
    }


def _build(
    path: Path | str, *, seed: int = 7, now: datetime = FIXED_NOW, full_scale: bool = False
) -> BuildReport:
    """Build like the test templates: the small database, or the full-load one."""
    database = Database.from_url(str(path), clock=fixed_clock(now))
    try:
        return build_database(database, seed=seed, scale=1, load=database_load(full_scale))
    finally:
        database.dispose()


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@dataclass(frozen=True)
class OtherSeedBuild:
    """A second small build (the load of ``template_db_path``), with another seed, and
    what the data folder looked like."""

    path: Path
    report: BuildReport
    data_before: dict[str, str]
    data_after: dict[str, str]


@pytest.fixture(scope="module")
def other_seed_build(tmp_path_factory: pytest.TempPathFactory) -> OtherSeedBuild:
    path = tmp_path_factory.mktemp("other-seed") / "travel.sqlite"
    before = _data_digest(reference_data_dir())
    report = _build(path, seed=8)
    return OtherSeedBuild(path, report, before, _data_digest(reference_data_dir()))


@pytest.fixture
def session(travel_db: Database) -> Iterator[Session]:
    with travel_db.session() as opened:
        yield opened


def _segments(session: Session, ticket_no: str) -> list[tuple[TicketFlight, Flight]]:
    rows = session.execute(
        select(TicketFlight, Flight)
        .join(Flight, Flight.flight_id == TicketFlight.flight_id)
        .where(TicketFlight.ticket_no == ticket_no)
        .order_by(Flight.scheduled_departure)
    ).all()
    return [(segment, flight) for segment, flight in rows]


def _boarding(session: Session, ticket_no: str, flight_id: int) -> BoardingPass | None:
    return session.get(BoardingPass, (ticket_no, flight_id))


def _local_date(moment: datetime, airport_code: str, session: Session) -> date:
    airport = session.get(Airport, airport_code)
    assert airport is not None
    return moment.astimezone(ZoneInfo(airport.timezone)).date()


def _seat_counts(session: Session) -> dict[tuple[str, str], int]:
    rows = session.execute(
        select(Seat.aircraft_code, Seat.fare_conditions, func.count()).group_by(
            Seat.aircraft_code, Seat.fare_conditions
        )
    ).all()
    return {(code, fare): count for code, fare, count in rows}


def _sold(session: Session, flight_id: int, fare: str) -> int:
    return session.execute(
        select(func.count())
        .select_from(TicketFlight)
        .join(Ticket, Ticket.ticket_no == TicketFlight.ticket_no)
        .where(
            TicketFlight.flight_id == flight_id,
            TicketFlight.fare_conditions == fare,
            Ticket.status == "active",
        )
    ).scalar_one()


# Determinism and the build contract ---------------------------------------------------


def _digests(target: Path | str, tables: Sequence[str], engine_name: str) -> dict[str, str]:
    """Digest tables: SQLite's stored text on SQLite, the values read back elsewhere."""
    if engine_name == "sqlite":
        return {table: _table_digest(Path(target), table) for table in tables}
    return {table: _rows_digest(str(target), table) for table in tables}


@pytest.mark.e2e  # builds whole travel databases
@pytest.mark.full_scale  # the determinism of the default (full) load
def test_build_database_same_seed_rebuild_gives_identical_rows(
    full_scale_template_db_path: Path, db_url: str, engine_name: str
) -> None:
    # Rebuilding a copy that already holds data must also drop what was there; on
    # PostgreSQL the rows (bulk loaded with COPY) must read back as the SQLite build's do.
    # (The small load's determinism: the core-insert test below rebuilds it.)
    expected = _digests(full_scale_template_db_path, list(COLUMNS), engine_name)
    database = Database.from_url(db_url)
    with database.engine.begin() as connection:
        connection.execute(text("DELETE FROM excursion_bookings WHERE id = 1"))
    database.dispose()
    _build(db_url, seed=7, full_scale=True)
    assert _digests(db_url, list(COLUMNS), engine_name) == expected


def test_build_database_other_seed_gives_other_rows(
    template_db_path: Path, other_seed_build: OtherSeedBuild
) -> None:
    for table in ("flights", "tickets", "ticket_flights", "hotel_bookings"):
        assert _table_digest(other_seed_build.path, table) != _table_digest(
            template_db_path, table
        ), table
    # Reference tables come from data/ and do not depend on the seed.
    for table in ("airports_data", "seats", "hotels", "trip_recommendations"):
        assert _table_digest(other_seed_build.path, table) == _table_digest(
            template_db_path, table
        ), table


def test_build_database_leaves_data_files_unchanged(other_seed_build: OtherSeedBuild) -> None:
    assert other_seed_build.data_before
    assert other_seed_build.data_after == other_seed_build.data_before


def test_build_report_counts_match_tables(other_seed_build: OtherSeedBuild) -> None:
    report = other_seed_build.report
    assert report.seed == 8 and report.scale == 1 and report.now == FIXED_NOW
    assert report.load == SMALL_LOAD
    assert report.seconds > 0
    assert set(report.counts) == set(Base.metadata.tables)
    with sqlite3.connect(other_seed_build.path) as connection:
        for table, count in report.counts.items():
            assert connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == count
    assert report.total_rows == sum(report.counts.values())


def test_build_database_default_scale_size(full_scale_template_db_path: Path) -> None:
    # The full-scale template is scale 1 at the default load: the size ``db init`` builds.
    assert database_load(full_scale=True) == DEFAULT_LOAD == 1
    assert 1_000 <= _count(full_scale_template_db_path, "flights") <= 3_000
    assert 20_000 <= _count(full_scale_template_db_path, "ticket_flights") <= 100_000
    assert _count(full_scale_template_db_path, "boarding_passes") > 0
    assert _count(full_scale_template_db_path, "payments") > 0


def test_small_load_keeps_the_schedule_and_the_fixtures(
    template_db_path: Path, full_scale_template_db_path: Path
) -> None:
    # The tests' small database differs from the full one only in the random sales and
    # what follows from them (who holds the random reservations, the ids after them).
    small, full = template_db_path, full_scale_template_db_path
    for table in ("flights", "flight_fares", "airports_data", "seats", "hotels"):
        assert _table_digest(small, table) == _table_digest(full, table), table
    for table in ("tickets", "ticket_flights", "passengers", "payments"):
        assert 0.05 <= _count(small, table) / _count(full, table) <= 0.2, table
    assert _count(small, "hotel_bookings") == _count(full, "hotel_bookings")
    tickets = (
        fx.FIXTURE_TICKET_NO,
        fx.MULTI_SEGMENT_TICKET_NO,
        fx.BUSINESS_TICKET_NO,
        fx.FLOWN_TICKET_NO,
        fx.CHECKED_IN_TICKET_NO,
    )
    marks = ", ".join("?" * len(tickets))
    people = ", ".join("?" * len(fx.FIXTURE_PASSENGER_IDS))
    queries = (
        (f"SELECT * FROM tickets WHERE ticket_no IN ({marks})", tickets),
        (f"SELECT * FROM ticket_flights WHERE ticket_no IN ({marks})", tickets),
        (f"SELECT * FROM boarding_passes WHERE ticket_no IN ({marks})", tickets),
        (
            f"SELECT b.* FROM bookings b JOIN tickets t ON t.book_ref = b.book_ref "
            f"WHERE t.ticket_no IN ({marks})",
            tickets,
        ),
        (f"SELECT * FROM passengers WHERE passenger_id IN ({people})", fx.FIXTURE_PASSENGER_IDS),
        (
            f"SELECT * FROM hotel_bookings WHERE passenger_id IN ({people})",
            fx.FIXTURE_PASSENGER_IDS,
        ),
        (f"SELECT * FROM car_rental_bookings WHERE id = {fx.FIXTURE_CAR_RENTAL_BOOKING_ID}", ()),
        (f"SELECT * FROM excursion_bookings WHERE id = {fx.FIXTURE_EXCURSION_BOOKING_ID}", ()),
        (
            "SELECT passenger_id, amount_cents, kind, reference, description, created_at "
            f"FROM payments WHERE passenger_id IN ({people})",
            fx.FIXTURE_PASSENGER_IDS,
        ),
    )
    for query, parameters in queries:
        rows = []
        for path in (small, full):
            with sqlite3.connect(path) as connection:
                rows.append(sorted(connection.execute(query, parameters).fetchall()))
        assert rows[0] == rows[1] and rows[0], query


def test_build_database_rejects_scale_out_of_range(tmp_path: Path) -> None:
    database = Database.from_url(str(tmp_path / "x.sqlite"), clock=fixed_clock(FIXED_NOW))
    for scale in (0, MAX_SCALE + 1):
        with pytest.raises(ValueError, match="scale"):
            build_database(database, scale=scale)
    assert not database.has_schema()


def test_build_database_rejects_load_out_of_range(tmp_path: Path) -> None:
    database = Database.from_url(str(tmp_path / "x.sqlite"), clock=fixed_clock(FIXED_NOW))
    for load in (0.0, MIN_LOAD / 2, 1.01):
        with pytest.raises(ValueError, match="load"):
            build_database(database, load=load)
    assert not database.has_schema()


def test_build_database_rejects_naive_now(tmp_path: Path) -> None:
    database = Database.from_url(str(tmp_path / "x.sqlite"))
    with pytest.raises(ValueError, match="timezone-aware"):
        build_database(database, now=datetime(2026, 5, 4, 9, 0))


@pytest.mark.e2e  # builds whole travel databases
def test_build_database_failure_keeps_previous_database(
    db_url: str, engine_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = ("flights", "tickets", "hotel_bookings")
    before = _digests(db_url, tables, engine_name)

    def explode(*_args: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(generate_build, "_book_random_reservations", explode)
    with pytest.raises(RuntimeError, match="disk full"):
        _build(db_url, seed=99)
    assert _digests(db_url, tables, engine_name) == before


@pytest.mark.e2e  # builds whole travel databases
def test_build_database_core_insert_path_matches_sqlite_path(
    tmp_path: Path, template_db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The portable path (used for PostgreSQL) lets SQLAlchemy format every value, so equal
    # rows also prove the SQLite fast path writes the text format SQLAlchemy expects.
    monkeypatch.setattr(generate_build, "_open_writer", _core_writer)
    path = tmp_path / "core.sqlite"
    _build(path, seed=7)
    for table in GENERATED_TABLES:
        assert _table_digest(path, table) == _table_digest(template_db_path, table), table


@pytest.mark.e2e  # builds whole travel databases
def test_ensure_database_builds_once_then_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "folder" / "travel.sqlite"
    database = Database.from_url(str(path), clock=fixed_clock(FIXED_NOW))
    try:
        assert ensure_database(database) is True
        assert path.exists() and database.has_schema()
        with database.transaction() as session:
            session.execute(HotelBooking.__table__.delete().where(HotelBooking.id == 1))
        assert ensure_database(database) is False
        with database.session() as session:
            assert session.get(HotelBooking, 1) is None  # not rebuilt
            assert session.get(HotelBooking, 2) is not None
    finally:
        database.dispose()


# Imports, says it is ready, waits until every process is, then ensures the database.
_ENSURE = """
import sys, time
from pathlib import Path
from db.engine import Database
from db.generate import ensure_database

url, folder, me, count = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
database = Database.from_url(url)
(folder / me).touch()
while len(list(folder.iterdir())) < count:
    time.sleep(0.01)
print("built" if ensure_database(database, seed=3) else "found", flush=True)
database.dispose()
"""


@pytest.mark.e2e  # builds whole travel databases
def test_two_processes_ensuring_one_database_at_once_build_it_once(
    engine_name: str, tmp_path: Path
) -> None:
    from tests.support import postgres

    with contextlib.ExitStack() as stack:
        if engine_name == "postgresql":
            url = stack.enter_context(postgres.scratch_database())
        else:
            url = str(tmp_path / "home" / "travel.sqlite")
        empty = Database.from_url(url)
        assert not empty.has_schema()
        with pytest.raises(DatabaseMissingError, match="travel-assistant db init"):
            empty.require_schema()
        ready = tmp_path / "ready"
        ready.mkdir()
        root = Path(__file__).resolve().parents[2]
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", _ENSURE, url, str(ready), str(number), "2"],
                cwd=root,
                env={**os.environ, "PYTHONPATH": str(root)},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for number in range(2)
        ]
        outputs = [worker.communicate(timeout=300) for worker in workers]
        assert [worker.returncode for worker in workers] == [0, 0], outputs
        assert sorted(out.strip() for out, _ in outputs) == ["built", "found"], outputs
        empty.require_schema()
        empty.upgrade_schema()
        with empty.session() as session:
            assert session.get(Passenger, fx.FIXTURE_PASSENGER_ID) is not None
            assert session.scalar(select(func.count()).select_from(HotelBooking)) == (
                session.scalar(select(func.max(HotelBooking.id)))
            )
        empty.dispose()


def test_load_reference_data_rejects_full_hotel_with_wrong_rooms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "data"
    shutil.copytree(reference_data_dir(), folder)
    hotels = (folder / "hotels.csv").read_text(encoding="utf-8")
    line = next(row for row in hotels.splitlines() if row.startswith(fx.FULL_HOTEL_NAME))
    (folder / "hotels.csv").write_text(
        hotels.replace(line, line.rsplit(",", 1)[0] + ",5"), encoding="utf-8"
    )
    with pytest.raises(ValueError, match="rooms"):
        load_reference_data(folder)


def test_columns_cover_every_model_column() -> None:
    for name, table in Base.metadata.tables.items():
        assert sorted(COLUMNS[name]) == sorted(column.name for column in table.columns), name


# Reference data ------------------------------------------------------------------------


def test_reference_data_airports_are_real_and_complete() -> None:
    ref = load_reference_data()
    assert len(ref.airports) >= 70
    for code in ("CDG", "BSL", "MUC", "FRA", "JFK", "ZRH", "LHR", "AMS", "BCN"):
        assert code in ref.airports
    for airport in ref.airports.values():
        assert re.fullmatch(r"[A-Z]{3}", airport.code)
        assert -90 <= airport.latitude <= 90 and -180 <= airport.longitude <= 180
        ZoneInfo(airport.timezone)  # raises for an unknown zone
    assert ref.airports["JFK"].timezone == "America/New_York"
    cdg_bsl = generate.great_circle_km(ref.airports["CDG"], ref.airports["BSL"])
    assert 380 < cdg_bsl < 420


def test_reference_data_catalogues_cover_served_cities() -> None:
    ref = load_reference_data()
    cities = {airport.city for airport in ref.airports.values()}
    for rows in (ref.hotels, ref.car_rentals, ref.trips):
        locations = {row.location for row in rows}
        assert len(locations) >= 12
        assert locations <= cities
        assert {"Basel", "Paris", "Zurich", "New York", "London", "Amsterdam"} <= locations
        assert {"Barcelona", "Munich"} <= locations
    assert {hotel.price_tier for hotel in ref.hotels} == {"Budget", "Midscale", "Upscale", "Luxury"}
    assert {car.price_tier for car in ref.car_rentals} == {
        "Economy",
        "Midsize",
        "Premium",
        "Luxury",
    }
    with (reference_data_dir() / "trip_recommendations.csv").open(encoding="utf-8") as handle:
        assert all(row["details"].endswith(".") for row in csv.DictReader(handle))


def test_reference_data_seat_maps_have_business_and_economy() -> None:
    ref = load_reference_data()
    assert len(ref.aircraft) >= 5
    for aircraft in ref.aircraft.values():
        assert {"Business", "Economy"} <= set(aircraft.seats)
        seats = [seat for cabin in aircraft.seats.values() for seat in cabin]
        assert len(seats) == len(set(seats)), aircraft.code
        assert all(len(seat) <= 4 for seat in seats)


# Fixtures ------------------------------------------------------------------------------


def test_fixture_ticket_is_on_lx0112_departing_in_four_hours(session: Session) -> None:
    ticket = session.get(Ticket, fx.FIXTURE_TICKET_NO)
    assert ticket is not None
    assert ticket.passenger_id == fx.FIXTURE_PASSENGER_ID and ticket.status == "active"
    ((segment, flight),) = _segments(session, fx.FIXTURE_TICKET_NO)
    assert flight.flight_no == fx.FIXTURE_FLIGHT_NO
    assert (flight.departure_airport, flight.arrival_airport) == fx.FIXTURE_ROUTE
    assert flight.scheduled_departure == _floor_5(FIXED_NOW + fx.FIXTURE_DEPARTURE_IN)
    assert flight.status in BOOKABLE_FLIGHT_STATUSES
    assert segment.fare_conditions == "Economy"
    boarding = _boarding(session, fx.FIXTURE_TICKET_NO, flight.flight_id)
    assert boarding is not None and boarding.checked_in_at is None
    seat = session.get(Seat, (flight.aircraft_code, boarding.seat_no))
    assert seat is not None and seat.fare_conditions == "Economy"
    seats = _seat_counts(session)
    assert {fare for code, fare in seats if code == flight.aircraft_code} == {
        "Economy",
        "Comfort",
        "Business",
    }


def test_fixture_passengers_exist_with_names(session: Session) -> None:
    for passenger_id in fx.FIXTURE_PASSENGER_IDS:
        passenger = session.get(Passenger, passenger_id)
        assert passenger is not None and passenger.name
    elena = session.get(Passenger, fx.FIXTURE_PASSENGER_ID)
    assert elena is not None and elena.name == fx.FIXTURE_PASSENGER_NAME


def test_fixture_flight_no_flies_every_following_day_at_the_same_local_time(
    session: Session,
) -> None:
    flights = session.scalars(
        select(Flight)
        .where(Flight.flight_no == fx.FIXTURE_FLIGHT_NO)
        .order_by(Flight.scheduled_departure)
    ).all()
    fixture = _floor_5(FIXED_NOW + fx.FIXTURE_DEPARTURE_IN)
    later = [f for f in flights if f.scheduled_departure > fixture]
    assert len(later) >= 50
    paris = ZoneInfo("Europe/Paris")
    expected_time = fixture.astimezone(paris).time()
    for offset, flight in enumerate(later, start=1):
        local = flight.scheduled_departure.astimezone(paris)
        assert local.date() == fixture.astimezone(paris).date() + timedelta(days=offset)
        assert local.time() == expected_time
        assert (flight.departure_airport, flight.arrival_airport) == fx.FIXTURE_ROUTE
        assert flight.status in BOOKABLE_FLIGHT_STATUSES


def test_fixture_routes_fly_daily_as_db_fixtures_states_them(session: Session) -> None:
    # The generator takes every fixture route from db.fixtures, so changing one there
    # changes the schedule: each flies once a local day with its airports, aircraft and
    # local time (or the time that follows "now"), and none is cancelled.
    assert len({route.flight_no for route in fx.FIXTURE_ROUTES}) == len(fx.FIXTURE_ROUTES)
    for route in fx.FIXTURE_ROUTES:
        zone = ZoneInfo(session.get_one(Airport, route.origin).timezone)
        if route.local_departure is not None:
            expected_time = route.local_departure
        else:
            assert route.departs_in is not None
            expected_time = _floor_5(FIXED_NOW + route.departs_in).astimezone(zone).time()
        flights = session.scalars(
            select(Flight)
            .where(Flight.flight_no == route.flight_no)
            .order_by(Flight.scheduled_departure)
        ).all()
        assert len(flights) == SCHEDULE_DAYS_BEFORE + SCHEDULE_DAYS_AFTER + 1, route.flight_no
        first_day = flights[0].scheduled_departure.astimezone(zone).date()
        for offset, flight in enumerate(flights):
            local = flight.scheduled_departure.astimezone(zone)
            assert (local.date(), local.time()) == (
                first_day + timedelta(days=offset),
                expected_time,
            )
            assert (flight.departure_airport, flight.arrival_airport, flight.aircraft_code) == (
                route.origin,
                route.destination,
                route.aircraft_code,
            )
            assert flight.status != "Cancelled"


@pytest.mark.parametrize(
    "times",
    [
        pytest.param({}, id="neither"),
        pytest.param({"local_departure": time(8, 0), "departs_in": timedelta(hours=1)}, id="both"),
    ],
)
def test_fixture_route_needs_exactly_one_departure_time(times: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        fx.FixtureRoute("XX0100", "ZRH", "BSL", "320", **times)


def test_full_flight_has_every_economy_seat_sold(session: Session) -> None:
    # Flights keep their local departure time, so find them by local date (DST-proof).
    paris = ZoneInfo("Europe/Paris")
    fixture_day = _floor_5(FIXED_NOW + fx.FIXTURE_DEPARTURE_IN).astimezone(paris).date()
    by_day = {
        f.scheduled_departure.astimezone(paris).date(): f
        for f in session.scalars(select(Flight).where(Flight.flight_no == fx.FIXTURE_FLIGHT_NO))
    }
    full = by_day[fixture_day + timedelta(days=fx.FULL_FLIGHT_DAY_OFFSET)]
    seats = _seat_counts(session)
    assert _sold(session, full.flight_id, "Economy") == seats[(full.aircraft_code, "Economy")]
    assert _sold(session, full.flight_id, "Business") < seats[(full.aircraft_code, "Business")]
    # The neighbouring days still have Economy seats, so a change elsewhere is possible.
    for days in (1, fx.FULL_FLIGHT_DAY_OFFSET + 1):
        other = by_day[fixture_day + timedelta(days=days)]
        assert _sold(session, other.flight_id, "Economy") < seats[(other.aircraft_code, "Economy")]


def test_fixture_reservations_are_in_basel_with_id_1(session: Session) -> None:
    hotel_booking = session.get(HotelBooking, fx.FIXTURE_HOTEL_BOOKING_ID)
    assert hotel_booking is not None
    hotel = session.get(Hotel, hotel_booking.hotel_id)
    assert hotel is not None and hotel.location == "Basel" and hotel.name != fx.FULL_HOTEL_NAME
    assert hotel_booking.passenger_id == fx.FIXTURE_PASSENGER_ID
    assert hotel_booking.status == "confirmed"
    assert hotel_booking.checkin_date == TODAY + timedelta(days=1)
    assert hotel_booking.checkout_date == TODAY + timedelta(days=4)
    assert hotel_booking.total_cents == 3 * hotel.nightly_rate_cents

    car_booking = session.get(CarRentalBooking, fx.FIXTURE_CAR_RENTAL_BOOKING_ID)
    assert car_booking is not None
    rental = session.get(CarRental, car_booking.rental_id)
    assert rental is not None and rental.location == "Basel"
    assert car_booking.passenger_id == fx.FIXTURE_PASSENGER_ID
    assert (car_booking.start_date, car_booking.end_date) == (
        TODAY + timedelta(days=1),
        TODAY + timedelta(days=3),
    )
    assert car_booking.total_cents == 3 * rental.daily_rate_cents

    excursion = session.get(ExcursionBooking, fx.FIXTURE_EXCURSION_BOOKING_ID)
    assert excursion is not None
    trip = session.get(TripRecommendation, excursion.recommendation_id)
    assert trip is not None and trip.location == "Basel"
    assert excursion.passenger_id == fx.FIXTURE_PASSENGER_ID
    assert excursion.date == TODAY + timedelta(days=2)
    assert excursion.total_cents == trip.price_cents
    for booking in (hotel_booking, car_booking, excursion):
        assert booking.created_at < FIXED_NOW


def test_multi_segment_ticket_connects_muc_fra_jfk(session: Session) -> None:
    ticket = session.get(Ticket, fx.MULTI_SEGMENT_TICKET_NO)
    assert ticket is not None and ticket.passenger_id == fx.MULTI_SEGMENT_PASSENGER_ID
    (first_segment, first), (second_segment, second) = _segments(
        session, fx.MULTI_SEGMENT_TICKET_NO
    )
    assert (first.departure_airport, first.arrival_airport) == ("MUC", "FRA")
    assert (second.departure_airport, second.arrival_airport) == ("FRA", "JFK")
    assert second.scheduled_departure - first.scheduled_arrival >= MIN_CONNECTION
    assert _local_date(first.scheduled_departure, "MUC", session) == TODAY + timedelta(
        days=MULTI_SEGMENT_DAYS_AHEAD
    )
    assert {first_segment.fare_conditions, second_segment.fare_conditions} == {"Economy"}
    stays = session.scalars(
        select(HotelBooking).where(HotelBooking.passenger_id == fx.MULTI_SEGMENT_PASSENGER_ID)
    ).all()
    assert len(stays) == 1
    hotel = session.get(Hotel, stays[0].hotel_id)
    assert hotel is not None and hotel.location == "New York"


def test_business_ticket_was_bought_two_hours_ago(session: Session) -> None:
    ticket = session.get(Ticket, fx.BUSINESS_TICKET_NO)
    assert ticket is not None and ticket.passenger_id == fx.BUSINESS_PASSENGER_ID
    ((segment, flight),) = _segments(session, fx.BUSINESS_TICKET_NO)
    assert (flight.departure_airport, flight.arrival_airport) == ("ZRH", "LHR")
    assert segment.fare_conditions == "Business"
    assert _local_date(flight.scheduled_departure, "ZRH", session) == TODAY + timedelta(
        days=BUSINESS_DAYS_AHEAD
    )
    booking = session.get(Booking, ticket.book_ref)
    assert booking is not None and booking.book_date == FIXED_NOW - BUSINESS_BOUGHT_AGO


def test_flown_and_checked_in_tickets(session: Session) -> None:
    for ticket_no in (fx.FLOWN_TICKET_NO, fx.CHECKED_IN_TICKET_NO):
        ticket = session.get(Ticket, ticket_no)
        assert ticket is not None and ticket.passenger_id == fx.FLOWN_PASSENGER_ID
    ((_, flown),) = _segments(session, fx.FLOWN_TICKET_NO)
    assert (flown.departure_airport, flown.arrival_airport) == ("AMS", "BCN")
    assert flown.status == "Arrived"
    assert flown.actual_arrival is not None and flown.actual_arrival < FIXED_NOW
    assert _local_date(flown.scheduled_departure, "AMS", session) == TODAY - timedelta(
        days=FLOWN_DAYS_AGO
    )
    flown_pass = _boarding(session, fx.FLOWN_TICKET_NO, flown.flight_id)
    assert flown_pass is not None and flown_pass.checked_in_at is not None

    ((_, upcoming),) = _segments(session, fx.CHECKED_IN_TICKET_NO)
    assert (upcoming.departure_airport, upcoming.arrival_airport) == ("BCN", "AMS")
    assert upcoming.scheduled_departure == _floor_5(FIXED_NOW + CHECKED_IN_DEPARTURE_IN)
    assert upcoming.status in BOOKABLE_FLIGHT_STATUSES
    boarding = _boarding(session, fx.CHECKED_IN_TICKET_NO, upcoming.flight_id)
    assert boarding is not None and boarding.checked_in_at is not None
    assert boarding.checked_in_at <= FIXED_NOW


def test_full_hotel_has_every_room_taken_for_the_fixture_nights(session: Session) -> None:
    hotel = session.scalars(select(Hotel).where(Hotel.name == fx.FULL_HOTEL_NAME)).one()
    assert hotel.location == "Basel" and hotel.rooms == fx.FULL_HOTEL_ROOMS
    stays = session.scalars(
        select(HotelBooking).where(
            HotelBooking.hotel_id == hotel.id, HotelBooking.status == "confirmed"
        )
    ).all()
    first_night = TODAY + timedelta(days=fx.FULL_HOTEL_CHECKIN_IN_DAYS)
    for offset in range(fx.FULL_HOTEL_NIGHTS):
        night = first_night + timedelta(days=offset)
        guests = [s for s in stays if s.checkin_date <= night < s.checkout_date]
        assert len(guests) == fx.FULL_HOTEL_ROOMS
        assert not {g.passenger_id for g in guests} & set(fx.FIXTURE_PASSENGER_IDS)


def test_fixture_passengers_hold_only_their_documented_tickets(session: Session) -> None:
    expected = {
        fx.FIXTURE_PASSENGER_ID: {fx.FIXTURE_TICKET_NO},
        fx.MULTI_SEGMENT_PASSENGER_ID: {fx.MULTI_SEGMENT_TICKET_NO},
        fx.BUSINESS_PASSENGER_ID: {fx.BUSINESS_TICKET_NO},
        fx.FLOWN_PASSENGER_ID: {fx.FLOWN_TICKET_NO, fx.CHECKED_IN_TICKET_NO},
    }
    for passenger_id, tickets in expected.items():
        held = session.scalars(
            select(Ticket.ticket_no).where(Ticket.passenger_id == passenger_id)
        ).all()
        assert set(held) == tickets


# Integrity -----------------------------------------------------------------------------
# The rules the random sales keep are checked on the full-load database (``full_scale``):
# the load the program builds, and the one that fills flights and reuses passengers most.


@pytest.mark.full_scale  # the rules of the random sales, at the default load
def test_build_database_foreign_keys_are_valid(travel_db: Database, engine_name: str) -> None:
    with travel_db.engine.connect() as connection:
        if engine_name == "sqlite":
            assert connection.exec_driver_sql("PRAGMA foreign_key_check").all() == []
            assert connection.exec_driver_sql("PRAGMA quick_check").one() == ("ok",)
            return
        # PostgreSQL checks every row when a key is added after the bulk load: each key
        # of the models is there, validated, and so are the secondary indexes.
        keys = connection.execute(
            text(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND convalidated "
                "AND connamespace = current_schema()::regnamespace"
            )
        ).scalar_one()
        indexes = set(
            connection.execute(
                text("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
            ).scalars()
        )
    tables = Base.metadata.tables.values()
    assert keys == sum(len(table.foreign_key_constraints) for table in tables) > 5
    assert {str(index.name) for table in tables for index in table.indexes} <= indexes


@pytest.mark.full_scale  # the rules of the random sales, at the default load
def test_build_database_never_double_books_a_seat(travel_db: Database) -> None:
    with travel_db.engine.connect() as connection:
        doubles = connection.execute(
            text(
                "SELECT flight_id, seat_no FROM boarding_passes "
                "GROUP BY flight_id, seat_no HAVING count(*) > 1"
            )
        ).all()
        wrong_cabin = connection.execute(
            text(
                "SELECT bp.ticket_no, bp.flight_id FROM boarding_passes bp "
                "JOIN ticket_flights tf ON tf.ticket_no = bp.ticket_no "
                "AND tf.flight_id = bp.flight_id "
                "JOIN flights f ON f.flight_id = bp.flight_id "
                "LEFT JOIN seats s ON s.aircraft_code = f.aircraft_code "
                "AND s.seat_no = bp.seat_no "
                "WHERE s.fare_conditions IS NULL OR s.fare_conditions != tf.fare_conditions"
            )
        ).all()
        passes = connection.execute(text("SELECT count(*) FROM boarding_passes")).scalar_one()
    assert doubles == [] and wrong_cabin == []
    assert passes > 1_000


@pytest.mark.full_scale  # the rules of the random sales, at the default load
def test_build_database_never_oversells_a_fare_class(travel_db: Database) -> None:
    with travel_db.engine.connect() as connection:
        oversold = connection.execute(
            text(
                "SELECT sales.flight_id, sales.fare_conditions, sales.sold FROM ("
                "  SELECT tf.flight_id, tf.fare_conditions, f.aircraft_code, count(*) AS sold "
                "  FROM ticket_flights tf JOIN flights f ON f.flight_id = tf.flight_id "
                "  GROUP BY tf.flight_id, tf.fare_conditions, f.aircraft_code"
                ") AS sales WHERE sales.sold > (SELECT count(*) FROM seats s "
                "  WHERE s.aircraft_code = sales.aircraft_code "
                "  AND s.fare_conditions = sales.fare_conditions)"
            )
        ).all()
        on_cancelled = connection.execute(
            text(
                "SELECT count(*) FROM ticket_flights tf "
                "JOIN flights f ON f.flight_id = tf.flight_id WHERE f.status = 'Cancelled'"
            )
        ).scalar_one()
        unpriced = connection.execute(
            text(
                "SELECT count(*) FROM ticket_flights tf LEFT JOIN flight_fares ff "
                "ON ff.flight_id = tf.flight_id AND ff.fare_conditions = tf.fare_conditions "
                "WHERE ff.amount_cents IS NULL OR ff.amount_cents != tf.amount_cents"
            )
        ).scalar_one()
    assert oversold == []
    assert on_cancelled == 0 and unpriced == 0


def test_build_database_fares_follow_cabins(session: Session) -> None:
    fares: dict[int, dict[str, int]] = {}
    for flight_id, fare, amount in session.execute(
        select(FlightFare.flight_id, FlightFare.fare_conditions, FlightFare.amount_cents)
    ):
        fares.setdefault(flight_id, {})[fare] = amount
    cabins: dict[str, set[str]] = {}
    for code, fare in session.execute(select(Seat.aircraft_code, Seat.fare_conditions).distinct()):
        cabins.setdefault(code, set()).add(fare)
    flights = session.execute(select(Flight.flight_id, Flight.aircraft_code)).all()
    assert len(fares) == len(flights)
    for flight_id, aircraft_code in flights:
        prices = fares[flight_id]
        assert set(prices) == cabins[aircraft_code]
        assert prices["Business"] > prices["Economy"] > 0
        if "Comfort" in prices:
            assert prices["Business"] > prices["Comfort"] > prices["Economy"]


def test_build_database_respects_partner_capacities(session: Session) -> None:
    def usage(rows: list[tuple[int, date, date]]) -> Counter[tuple[int, date]]:
        counter: Counter[tuple[int, date]] = Counter()
        for item, first, last in rows:
            day = first
            while day <= last:
                counter[(item, day)] += 1
                day += timedelta(days=1)
        return counter

    rooms = dict(session.execute(select(Hotel.id, Hotel.rooms)).all())
    stays = session.execute(
        select(HotelBooking.hotel_id, HotelBooking.checkin_date, HotelBooking.checkout_date).where(
            HotelBooking.status == "confirmed"
        )
    )
    nights = usage([(h, checkin, checkout - timedelta(days=1)) for h, checkin, checkout in stays])
    assert nights and all(count <= rooms[hotel] for (hotel, _), count in nights.items())

    fleet = dict(session.execute(select(CarRental.id, CarRental.fleet_size)).all())
    rentals = session.execute(
        select(
            CarRentalBooking.rental_id, CarRentalBooking.start_date, CarRentalBooking.end_date
        ).where(CarRentalBooking.status == "confirmed")
    )
    cars = usage(list(rentals))
    assert cars and all(count <= fleet[rental] for (rental, _), count in cars.items())

    places = dict(
        session.execute(select(TripRecommendation.id, TripRecommendation.capacity_per_day)).all()
    )
    outings = session.execute(
        select(ExcursionBooking.recommendation_id, ExcursionBooking.date).where(
            ExcursionBooking.status == "confirmed"
        )
    )
    trips = Counter(outings)
    assert trips and all(count <= places[trip] for (trip, _), count in trips.items())


class _ListWriter:
    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[object, ...]]] = {}

    def insert(self, table: str, rows: list[tuple[object, ...]]) -> None:
        self.rows.setdefault(table, []).extend(rows)


def test_reservations_refuse_when_capacity_is_used_up() -> None:
    ref = load_reference_data()
    writer = _ListWriter()
    sink = _RowSink(writer)
    reservations = _Reservations(sink, _Counters(), FIXED_NOW, random.Random(1))
    hotel = next(h for h in ref.hotels if h.name == fx.FULL_HOTEL_NAME)
    car = min(ref.car_rentals, key=lambda offer: offer.fleet_size)
    trip = min(ref.trips, key=lambda offer: offer.capacity_per_day)
    day = TODAY + timedelta(days=5)
    for _ in range(hotel.rooms):
        assert reservations.hotel("p", hotel, day, 2, FIXED_NOW) is not None
    # A cancelled stay takes no room; an overlapping one finds none; the day after is free.
    assert reservations.hotel("p", hotel, day, 1, FIXED_NOW, cancelled=True) is not None
    assert reservations.hotel("p", hotel, day + timedelta(days=1), 1, FIXED_NOW) is None
    assert reservations.hotel("p", hotel, day + timedelta(days=2), 1, FIXED_NOW) is not None
    for _ in range(car.fleet_size):
        assert reservations.car("p", car, day, day + timedelta(days=2), FIXED_NOW) is not None
    assert (
        reservations.car("p", car, day + timedelta(days=2), day + timedelta(days=4), FIXED_NOW)
        is None
    )
    assert reservations.car("p", car, day + timedelta(days=3), day + timedelta(days=4), FIXED_NOW)
    for _ in range(trip.capacity_per_day):
        assert reservations.excursion("p", trip, day, FIXED_NOW) is not None
    assert reservations.excursion("p", trip, day, FIXED_NOW) is None
    sink.flush()
    stays = writer.rows["hotel_bookings"]
    assert [row[0] for row in stays] == list(range(1, len(stays) + 1))
    refunds = [row for row in writer.rows["payments"] if row[3] == "hotel_cancel"]
    assert len(refunds) == 1 and refunds[0][2] == -hotel.nightly_rate_cents


def test_build_database_reservation_totals_follow_rates(session: Session) -> None:
    rates = dict(session.execute(select(Hotel.id, Hotel.nightly_rate_cents)).all())
    for stay in session.scalars(select(HotelBooking)):
        nights = (stay.checkout_date - stay.checkin_date).days
        assert stay.total_cents == nights * rates[stay.hotel_id]
    daily = dict(session.execute(select(CarRental.id, CarRental.daily_rate_cents)).all())
    for rental in session.scalars(select(CarRentalBooking)):
        days = (rental.end_date - rental.start_date).days + 1
        assert rental.total_cents == days * daily[rental.rental_id]
    prices = dict(
        session.execute(select(TripRecommendation.id, TripRecommendation.price_cents)).all()
    )
    for outing in session.scalars(select(ExcursionBooking)):
        assert outing.total_cents == prices[outing.recommendation_id]


def test_build_database_timestamps_read_back_aware_utc(
    travel_db: Database, engine_name: str
) -> None:
    with travel_db.session() as session:
        flight = session.scalars(select(Flight).where(Flight.status == "Arrived").limit(1)).one()
        booking = session.scalars(select(Booking).limit(1)).one()
        boarding = session.scalars(
            select(BoardingPass).where(BoardingPass.checked_in_at.is_not(None)).limit(1)
        ).one()
        payment = session.scalars(select(Payment).limit(1)).one()
        stay = session.scalars(select(HotelBooking).limit(1)).one()
        moments = [
            flight.scheduled_departure,
            flight.scheduled_arrival,
            flight.actual_departure,
            flight.actual_arrival,
            booking.book_date,
            boarding.checked_in_at,
            payment.created_at,
            stay.created_at,
        ]
        for moment in moments:
            assert moment is not None and moment.utcoffset() == timedelta(0)
            assert moment.tzinfo is UTC
        # Comparisons in SQL must agree with Python: the stored text sorts like the times.
        future_sql = session.execute(
            select(func.count()).select_from(Flight).where(Flight.scheduled_departure > FIXED_NOW)
        ).scalar_one()
        future_python = sum(
            1 for f in session.scalars(select(Flight)) if f.scheduled_departure > FIXED_NOW
        )
        assert future_sql == future_python > 0
    # Stored as naive UTC: SQLite text in SQLAlchemy's format, PostgreSQL ``timestamp``
    # (the bulk load must not shift an aware value by the session's time zone).
    with travel_db.engine.connect() as connection:
        if engine_name == "postgresql":
            connection.exec_driver_sql("SET LOCAL TIME ZONE 'America/New_York'")
        for table, column in (
            ("flights", "scheduled_departure"),
            ("bookings", "book_date"),
            ("boarding_passes", "checked_in_at"),
            ("payments", "created_at"),
        ):
            values = connection.exec_driver_sql(
                f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL LIMIT 200"
            ).scalars()
            stored = list(values)
            assert stored, table
            if engine_name == "sqlite":
                assert all(SQLITE_TIMESTAMP.match(value) for value in stored), table
            else:
                assert all(isinstance(v, datetime) and v.tzinfo is None for v in stored), table
    if engine_name == "postgresql":
        with travel_db.session() as session:
            fixture = session.scalars(
                select(Flight)
                .where(Flight.flight_no == fx.FIXTURE_FLIGHT_NO)
                .order_by(Flight.scheduled_departure)
            ).first()
            assert fixture is not None
        with travel_db.engine.connect() as connection:
            raw = connection.execute(
                text("SELECT scheduled_departure FROM flights WHERE flight_id = :id"),
                {"id": fixture.flight_id},
            ).scalar_one()
        assert raw == fixture.scheduled_departure.astimezone(UTC).replace(tzinfo=None)


def test_flight_statuses_agree_with_now(session: Session) -> None:
    flights = session.scalars(select(Flight)).all()
    statuses = Counter(flight.status for flight in flights)
    assert {"Arrived", "Departed", "On Time", "Scheduled"} <= set(statuses)
    for flight in flights:
        assert flight.scheduled_arrival > flight.scheduled_departure
        if flight.status == "Arrived":
            assert flight.actual_departure is not None and flight.actual_arrival is not None
            assert flight.actual_departure < flight.actual_arrival <= FIXED_NOW
        elif flight.status == "Departed":
            assert flight.actual_departure is not None and flight.actual_departure <= FIXED_NOW
            assert flight.actual_arrival is None
        else:
            assert flight.actual_departure is None and flight.actual_arrival is None
            if flight.status != "Delayed":
                assert flight.scheduled_departure > FIXED_NOW
    departures = [flight.scheduled_departure for flight in flights]
    assert min(departures) < FIXED_NOW - timedelta(days=6)
    assert max(departures) > FIXED_NOW + timedelta(days=59)


def test_flight_numbers_look_like_airline_codes(session: Session) -> None:
    numbers = session.execute(select(Flight.flight_no, Flight.scheduled_departure)).all()
    assert all(re.fullmatch(r"[A-Z0-9]{2}\d{4}", number) for number, _ in numbers)
    assert len(set(numbers)) == len(numbers)


@pytest.mark.full_scale  # the rules of the random sales, at the default load
def test_check_ins_happen_within_the_check_in_window(session: Session) -> None:
    checked_in = (
        select(BoardingPass.checked_in_at, Flight.scheduled_departure, Booking.book_date)
        .join(Flight, Flight.flight_id == BoardingPass.flight_id)
        .join(Ticket, Ticket.ticket_no == BoardingPass.ticket_no)
        .join(Booking, Booking.book_ref == Ticket.book_ref)
        .where(BoardingPass.checked_in_at.is_not(None))
    )
    rows = session.execute(checked_in).all()
    upcoming = session.execute(
        select(func.count())
        .select_from(BoardingPass)
        .join(Flight, Flight.flight_id == BoardingPass.flight_id)
        .where(BoardingPass.checked_in_at.is_not(None), Flight.scheduled_departure > FIXED_NOW)
    ).scalar_one()
    assert rows and upcoming > 1
    for moment, leaves, booked in rows:
        assert moment is not None
        assert leaves - timedelta(hours=24) <= moment <= leaves - timedelta(minutes=30)
        assert booked <= moment <= FIXED_NOW


@pytest.mark.full_scale  # the rules of the random sales, at the default load
def test_random_sales_include_valid_connections(session: Session) -> None:
    several = (
        select(TicketFlight.ticket_no).group_by(TicketFlight.ticket_no).having(func.count() > 1)
    )
    rows = session.execute(
        select(
            TicketFlight.ticket_no,
            Flight.departure_airport,
            Flight.arrival_airport,
            Flight.scheduled_departure,
            Flight.scheduled_arrival,
            TicketFlight.fare_conditions,
        )
        .join(Flight, Flight.flight_id == TicketFlight.flight_id)
        .where(TicketFlight.ticket_no.in_(several))
        .order_by(TicketFlight.ticket_no, Flight.scheduled_departure)
    ).all()
    itineraries: dict[str, list[tuple[str, str, datetime, datetime, str]]] = {}
    for ticket_no, origin, destination, departs, arrives, fare in rows:
        itineraries.setdefault(ticket_no, []).append((origin, destination, departs, arrives, fare))
    assert len(itineraries) > 20
    for ticket_no, legs in itineraries.items():
        assert len(legs) == 2, ticket_no
        first, second = legs
        assert first[1] == second[0] and second[1] != first[0]
        assert second[2] - first[3] >= MIN_CONNECTION
        assert first[4] == second[4]


@pytest.mark.full_scale  # the rules of the random sales, at the default load
def test_passengers_never_fly_twice_on_one_flight(travel_db: Database) -> None:
    with travel_db.engine.connect() as connection:
        twice = connection.execute(
            text(
                "SELECT t.passenger_id, tf.flight_id FROM ticket_flights tf "
                "JOIN tickets t ON t.ticket_no = tf.ticket_no "
                "GROUP BY t.passenger_id, tf.flight_id HAVING count(*) > 1"
            )
        ).all()
        returning = connection.execute(
            text(
                "SELECT count(*) FROM (SELECT passenger_id FROM tickets "
                "GROUP BY passenger_id HAVING count(*) > 1) AS repeat_customers"
            )
        ).scalar_one()
    assert twice == []
    assert returning > 100


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("TRAVEL_ASSISTANT_SLOW_TESTS"),
    reason="builds the largest database (about a minute); set TRAVEL_ASSISTANT_SLOW_TESTS=1",
)
def test_build_database_max_scale_reaches_target_size(tmp_path: Path) -> None:
    database = Database.from_url(str(tmp_path / "big.sqlite"), clock=fixed_clock(FIXED_NOW))
    report = build_database(database, scale=MAX_SCALE)
    database.dispose()
    assert report.counts["flights"] >= 33_000
    assert report.counts["ticket_flights"] >= 1_000_000
