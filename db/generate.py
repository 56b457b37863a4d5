"""Build the travel database: reference data from ``data/`` plus a generated schedule.

``build_database`` drops and recreates every table, then fills it from the reference
files (airports, aircraft seat maps, partner catalogues) and from a generator seeded with
``seed``: a network of routes that grows with ``scale``, a daily schedule from a week
before "now" to two months after it, fares, passengers, bookings, tickets, seats and
partner reservations. The same seed, scale and "now" always give the same rows; nothing
reads the wall clock or the global random generator.

Every record promised by ``db.fixtures`` is created first, exactly as its comments
describe, so tests and demos can rely on it.

On SQLite the whole build (drop, create, bulk inserts with ``executemany`` on the raw
connection, indexes, ``sqlite-utils`` full-text indexes) runs in one transaction, so a
failed or interrupted build leaves the previous database untouched and a half-built file
never looks complete. Other dialects (PostgreSQL) use SQLAlchemy Core inserts inside one
transaction.
"""

from __future__ import annotations

import bisect
import csv
import json
import math
import random
import sqlite3
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from time import perf_counter
from types import MappingProxyType
from typing import Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

import sqlite_utils
from sqlalchemy import Connection, Date, Engine, insert, inspect, text
from sqlalchemy.schema import CreateIndex, CreateTable, DropTable

from db import fixtures as fx
from db.engine import Database, reference_data_dir
from db.models import FARE_CONDITIONS, Base, UTCDateTime
from db.rules import CHECK_IN_OPENS_HOURS

DEFAULT_SCALE = 1
MAX_SCALE = 25
DEFAULT_SEED = 42

# Details of the fixtures that db/fixtures.py states only in its comments.
MULTI_SEGMENT_DAYS_AHEAD = 5
MULTI_SEGMENT_HOTEL_NIGHTS = 3
BUSINESS_DAYS_AHEAD = 10
BUSINESS_BOUGHT_AGO = timedelta(hours=2)
FLOWN_DAYS_AGO = 3
CHECKED_IN_DEPARTURE_IN = timedelta(hours=6)
FIXTURE_HOTEL_CHECKIN_IN_DAYS = 1
FIXTURE_HOTEL_NIGHTS = 3
FIXTURE_CAR_START_IN_DAYS = 1
FIXTURE_CAR_END_IN_DAYS = 3
FIXTURE_EXCURSION_IN_DAYS = 2
FIXTURE_LOCATION = "Basel"
MULTI_SEGMENT_HOTEL_LOCATION = "New York"

FIXTURE_PASSENGER_NAMES: Mapping[str, str] = MappingProxyType(
    {
        fx.FIXTURE_PASSENGER_ID: fx.FIXTURE_PASSENGER_NAME,
        fx.MULTI_SEGMENT_PASSENGER_ID: "Jonas Weber",
        fx.BUSINESS_PASSENGER_ID: "Priya Raman",
        fx.FLOWN_PASSENGER_ID: "Lucas Martin",
    }
)

# The schedule covers local dates from this many days before "now" to this many after.
SCHEDULE_DAYS_BEFORE = 7
SCHEDULE_DAYS_AFTER = 60
# Random city pairs added to the fixture routes per unit of scale (each pair flies both
# directions daily, some twice a day).
ROUTE_PAIRS_PER_SCALE = 9
TWICE_DAILY_SHARE = 0.25
MIN_ROUTE_KM = 250
# Aircraft fly routes up to this share of their range.
RANGE_MARGIN = 1.1
# Long-haul routes (above this) only touch a hub and use wide-bodies.
LONG_HAUL_KM = 4000

# Sales: the share of each cabin sold is a flight's base load times a booking curve that
# fills up towards departure. Loads are modest so the default build stays fast.
LOAD_RANGE = (0.10, 0.32)
CABIN_LOAD_FACTOR: Mapping[str, float] = MappingProxyType(
    {"Economy": 1.0, "Comfort": 0.85, "Business": 0.7}
)
CONNECTING_SHARE = 0.12
MIN_CONNECTION = timedelta(minutes=50)
MAX_CONNECTION = timedelta(hours=4)
SEAT_SELECTED_SHARE = 0.6
# Check-in closes this long before the scheduled departure (also for delayed flights).
CHECK_IN_CLOSES_BEFORE = timedelta(minutes=30)
CHECKED_IN_SHARE = 0.5
PASSENGER_REUSE_SHARE = 0.3

# Partner reservations per unit of scale.
HOTEL_BOOKINGS_PER_SCALE = 120
CAR_BOOKINGS_PER_SCALE = 80
EXCURSION_BOOKINGS_PER_SCALE = 150
CANCELLED_RESERVATION_SHARE = 0.08

_ROWS_PER_FLUSH = 50_000
_FTS_COLUMNS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "hotels": ("name", "location", "price_tier"),
        "car_rentals": ("name", "location", "price_tier", "car_class"),
        "trip_recommendations": ("name", "location", "keywords", "details"),
    }
)


@dataclass(frozen=True)
class BuildReport:
    """What a build produced.

    Attributes:
        seed: The seed the rows were generated from.
        scale: The size of the schedule.
        now: The moment the data is relative to (UTC).
        counts: Rows written per table, in dependency order.
        seconds: Wall time the build took.
    """

    seed: int
    scale: int
    now: datetime
    counts: Mapping[str, int]
    seconds: float

    @property
    def total_rows(self) -> int:
        """Return the number of rows written over all tables."""
        return sum(self.counts.values())


# ---------------------------------------------------------------------------------------
# Reference data
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AirportRow:
    """An airport of ``data/airports.csv``."""

    code: str
    name: str
    city: str
    country: str
    latitude: float
    longitude: float
    timezone: str

    @property
    def zone(self) -> ZoneInfo:
        """Return the airport's timezone."""
        return ZoneInfo(self.timezone)


@dataclass(frozen=True)
class AircraftType:
    """An aircraft type of ``data/aircraft.json`` with its seat map expanded.

    Attributes:
        code: The 3-character IATA type code.
        model: The model name.
        range_km: How far it flies.
        seats: Seat numbers per fare class, in seat-map order.
    """

    code: str
    model: str
    range_km: int
    seats: Mapping[str, tuple[str, ...]]

    @property
    def is_wide_body(self) -> bool:
        """Tell whether the type flies long-haul routes."""
        return self.range_km >= 10_000


@dataclass(frozen=True)
class HotelRow:
    """A hotel of ``data/hotels.csv``; ``id`` is its 1-based row number."""

    id: int
    name: str
    location: str
    price_tier: str
    nightly_rate_cents: int
    rooms: int


@dataclass(frozen=True)
class CarRentalRow:
    """A car-rental offer of ``data/car_rentals.csv``; ``id`` is its 1-based row number."""

    id: int
    name: str
    location: str
    price_tier: str
    car_class: str
    daily_rate_cents: int
    fleet_size: int


@dataclass(frozen=True)
class TripRow:
    """An excursion of ``data/trip_recommendations.csv``; ``id`` is its 1-based row number."""

    id: int
    name: str
    location: str
    keywords: str
    details: str
    price_cents: int
    capacity_per_day: int


@dataclass(frozen=True)
class ReferenceData:
    """Everything the generator reads from ``data/``."""

    airports: Mapping[str, AirportRow]
    aircraft: Mapping[str, AircraftType]
    hotels: tuple[HotelRow, ...]
    car_rentals: tuple[CarRentalRow, ...]
    trips: tuple[TripRow, ...]


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _expand_seat_map(cabins: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Turn cabin descriptions (rows and letters per fare class) into seat numbers."""
    seats: dict[str, list[str]] = {}
    for cabin in cabins:
        fare = str(cabin["fare_conditions"])
        if fare not in FARE_CONDITIONS:
            raise ValueError(f"Unknown fare class {fare!r} in data/aircraft.json.")
        skipped = set(cabin.get("skip_rows", ()))
        rows = range(int(cabin["first_row"]), int(cabin["last_row"]) + 1)
        seats.setdefault(fare, []).extend(
            f"{row}{letter}" for row in rows if row not in skipped for letter in cabin["letters"]
        )
    return {fare: tuple(seats[fare]) for fare in FARE_CONDITIONS if fare in seats}


def load_reference_data(folder: Path | None = None) -> ReferenceData:
    """Read and check the reference files.

    Args:
        folder: The data folder; defaults to ``db.engine.reference_data_dir()``.

    Returns:
        The airports, aircraft types and catalogues.

    Raises:
        ValueError: A file breaks a promise the fixtures rely on (the message names it).
    """
    folder = folder or reference_data_dir()
    airports = {
        row["airport_code"]: AirportRow(
            code=row["airport_code"],
            name=row["airport_name"],
            city=row["city"],
            country=row["country"],
            latitude=float(row["latitude"]),
            longitude=float(row["longitude"]),
            timezone=row["timezone"],
        )
        for row in _read_csv(folder / "airports.csv")
    }
    aircraft_doc = json.loads((folder / "aircraft.json").read_text(encoding="utf-8"))
    aircraft = {
        item["aircraft_code"]: AircraftType(
            code=item["aircraft_code"],
            model=item["model"],
            range_km=int(item["range_km"]),
            seats=MappingProxyType(_expand_seat_map(item["cabins"])),
        )
        for item in aircraft_doc["aircraft"]
    }
    hotels = tuple(
        HotelRow(
            id=number,
            name=row["name"],
            location=row["location"],
            price_tier=row["price_tier"],
            nightly_rate_cents=int(row["nightly_rate_cents"]),
            rooms=int(row["rooms"]),
        )
        for number, row in enumerate(_read_csv(folder / "hotels.csv"), start=1)
    )
    car_rentals = tuple(
        CarRentalRow(
            id=number,
            name=row["name"],
            location=row["location"],
            price_tier=row["price_tier"],
            car_class=row["car_class"],
            daily_rate_cents=int(row["daily_rate_cents"]),
            fleet_size=int(row["fleet_size"]),
        )
        for number, row in enumerate(_read_csv(folder / "car_rentals.csv"), start=1)
    )
    trips = tuple(
        TripRow(
            id=number,
            name=row["name"],
            location=row["location"],
            keywords=row["keywords"],
            details=row["details"],
            price_cents=int(row["price_cents"]),
            capacity_per_day=int(row["capacity_per_day"]),
        )
        for number, row in enumerate(_read_csv(folder / "trip_recommendations.csv"), start=1)
    )
    reference = ReferenceData(
        MappingProxyType(airports), MappingProxyType(aircraft), hotels, car_rentals, trips
    )
    _check_reference_data(reference)
    return reference


def _check_reference_data(ref: ReferenceData) -> None:
    """Fail early, naming the file, when the data cannot hold the fixtures."""
    for route in _FIXTURE_ROUTES:
        for code in (route.origin, route.destination):
            if code not in ref.airports:
                raise ValueError(f"data/airports.csv lacks {code}, which a fixture flies.")
        if route.aircraft_code not in ref.aircraft:
            raise ValueError(f"data/aircraft.json lacks type {route.aircraft_code}.")
    for aircraft in ref.aircraft.values():
        if not {"Business", "Economy"} <= set(aircraft.seats):
            raise ValueError(f"Aircraft {aircraft.code} needs Business and Economy cabins.")
    if set(ref.aircraft[_FIXTURE_ROUTES[0].aircraft_code].seats) != set(FARE_CONDITIONS):
        raise ValueError(f"The aircraft of {fx.FIXTURE_FLIGHT_NO} needs all three fare classes.")
    full = [hotel for hotel in ref.hotels if hotel.name == fx.FULL_HOTEL_NAME]
    if len(full) != 1 or full[0].location != FIXTURE_LOCATION:
        raise ValueError(f"data/hotels.csv needs one {fx.FULL_HOTEL_NAME!r} in Basel.")
    if full[0].rooms != fx.FULL_HOTEL_ROOMS:
        raise ValueError(f"{fx.FULL_HOTEL_NAME} must have {fx.FULL_HOTEL_ROOMS} rooms.")
    _fixture_hotel(ref)
    _first_at(ref.car_rentals, FIXTURE_LOCATION, "data/car_rentals.csv")
    _first_at(ref.trips, FIXTURE_LOCATION, "data/trip_recommendations.csv")
    _first_at(ref.hotels, MULTI_SEGMENT_HOTEL_LOCATION, "data/hotels.csv")


class _Located(Protocol):
    @property
    def location(self) -> str: ...


_LocatedT = TypeVar("_LocatedT", bound=_Located)


def _first_at(rows: Sequence[_LocatedT], location: str, source: str) -> _LocatedT:
    for row in rows:
        if row.location == location:
            return row
    raise ValueError(f"{source} needs at least one entry in {location}.")


def _fixture_hotel(ref: ReferenceData) -> HotelRow:
    """Return the Basel hotel of the fixture passenger (the first that is not the full one)."""
    others = [hotel for hotel in ref.hotels if hotel.name != fx.FULL_HOTEL_NAME]
    return _first_at(others, FIXTURE_LOCATION, "data/hotels.csv")


# ---------------------------------------------------------------------------------------
# Routes
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Route:
    """One daily flight number: where, when (local time at the origin) and on what.

    ``local_departure`` of ``None`` means the time is derived from "now" (fixtures).
    """

    flight_no: str
    origin: str
    destination: str
    aircraft_code: str
    local_departure: time | None
    fixture: bool = False


# The fixture routes, both directions. LX0112 must come first (see _check_reference_data).
_FIXTURE_ROUTES: tuple[_Route, ...] = (
    _Route(fx.FIXTURE_FLIGHT_NO, *fx.FIXTURE_ROUTE, "320", None, fixture=True),
    _Route("LX0113", fx.FIXTURE_ROUTE[1], fx.FIXTURE_ROUTE[0], "320", time(7, 5), True),
    _Route("LH2012", "MUC", "FRA", "321", time(7, 10), True),
    _Route("LH2013", "FRA", "MUC", "321", time(18, 20), True),
    _Route("LH0400", "FRA", "JFK", "359", time(10, 25), True),
    _Route("LH0401", "JFK", "FRA", "359", time(17, 45), True),
    _Route("LX0318", "ZRH", "LHR", "320", time(8, 40), True),
    _Route("LX0319", "LHR", "ZRH", "320", time(12, 5), True),
    _Route("KL1675", "AMS", "BCN", "738", time(9, 15), True),
    _Route("KL1676", "BCN", "AMS", "738", None, True),
)
_FIXTURE_FLIGHT, _, _MUC_FRA, _, _FRA_JFK, _, _ZRH_LHR, _, _AMS_BCN, _BCN_AMS = _FIXTURE_ROUTES


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Airports that get more routes, and the airline flying out of each country.
_HUBS = frozenset(
    _words(
        "FRA MUC ZRH CDG LHR AMS MAD BCN FCO VIE CPH IST JFK ORD ATL LAX YYZ DXB DOH SIN HKG "
        "NRT ICN"
    )
)
_AIRLINES: Mapping[str, str] = MappingProxyType(
    {
        "Switzerland": "LX", "Germany": "LH", "France": "AF", "United Kingdom": "BA",
        "Ireland": "EI", "Netherlands": "KL", "Belgium": "SN", "Luxembourg": "LG",
        "Spain": "IB", "Portugal": "TP", "Italy": "AZ", "Austria": "OS",
        "Czech Republic": "OK", "Hungary": "W6", "Poland": "LO", "Denmark": "SK",
        "Sweden": "SK", "Norway": "SK", "Finland": "AY", "Greece": "A3", "Turkey": "TK",
        "Iceland": "FI", "Romania": "RO", "United States": "UA", "Canada": "AC",
        "Mexico": "AM", "Brazil": "LA", "Argentina": "AR", "Colombia": "AV", "Chile": "LA",
        "United Arab Emirates": "EK", "Qatar": "QR", "Israel": "LY", "India": "AI",
        "Singapore": "SQ", "Thailand": "TG", "Hong Kong": "CX", "Japan": "NH",
        "South Korea": "KE", "China": "CA", "Malaysia": "MH", "Taiwan": "BR", "Egypt": "MS",
        "South Africa": "SA", "Morocco": "AT", "Kenya": "KQ", "Ethiopia": "ET",
        "Australia": "QF", "New Zealand": "NZ",
    }
)  # fmt: skip
_FALLBACK_AIRLINE = "TA"


def great_circle_km(a: AirportRow, b: AirportRow) -> float:
    """Return the great-circle distance between two airports in kilometres."""
    lat1, lon1, lat2, lon2 = map(math.radians, (a.latitude, a.longitude, b.latitude, b.longitude))
    haversine = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371.0 * math.asin(math.sqrt(haversine))


def flight_duration(distance_km: float) -> timedelta:
    """Return the block time of a flight: 30 minutes of taxi plus cruise at 800 km/h.

    Rounded up to 5 minutes.
    """
    minutes = 30 + distance_km / 800 * 60
    return timedelta(minutes=5 * math.ceil(minutes / 5))


def _pick_aircraft(ref: ReferenceData, distance_km: float, rng: random.Random) -> str:
    """Choose a type that reaches ``distance_km``: wide-bodies for long haul only."""
    wide = distance_km > LONG_HAUL_KM
    able = [
        craft.code
        for craft in ref.aircraft.values()
        if craft.range_km >= distance_km * RANGE_MARGIN
        and craft.is_wide_body == wide
        and (craft.range_km >= 5000 or distance_km <= 1500)
    ]
    if not able:  # e.g. 3,000-4,000 km beyond every narrow-body: fall back to wide-bodies
        able = [c.code for c in ref.aircraft.values() if c.range_km >= distance_km * RANGE_MARGIN]
    return rng.choice(able)


def _random_local_time(rng: random.Random, earliest: int, latest: int) -> time:
    """Return a time between two hours of the day, on a 5-minute grid."""
    minutes = 5 * rng.randrange(earliest * 12, latest * 12)
    return time(minutes // 60, minutes % 60)


class _FlightNumbers:
    """Hands out unused flight numbers per airline, an even outbound and the odd return."""

    def __init__(self, rng: random.Random, taken: Sequence[str]) -> None:
        self._rng = rng
        self._used = set(taken)

    def pair(self, airline: str) -> tuple[str, str]:
        """Return an unused outbound/return pair like ``("LX0482", "LX0483")``."""
        while True:
            number = self._rng.randrange(100, 9998, 2)
            outbound, inbound = f"{airline}{number:04d}", f"{airline}{number + 1:04d}"
            if outbound not in self._used and inbound not in self._used:
                self._used.update((outbound, inbound))
                return outbound, inbound


def _candidate_pairs(ref: ReferenceData) -> list[tuple[AirportRow, AirportRow, float, float]]:
    """Return city pairs worth flying, with their distance and a popularity weight."""
    fixture_pairs = {frozenset((r.origin, r.destination)) for r in _FIXTURE_ROUTES}
    longest = max(craft.range_km for craft in ref.aircraft.values()) / RANGE_MARGIN
    airports = list(ref.airports.values())
    pairs = []
    for i, a in enumerate(airports):
        for b in airports[i + 1 :]:
            if frozenset((a.code, b.code)) in fixture_pairs or a.city == b.city:
                continue
            distance = great_circle_km(a, b)
            hubs = (a.code in _HUBS) + (b.code in _HUBS)
            if distance < MIN_ROUTE_KM or distance > longest:
                continue
            if distance > LONG_HAUL_KM and hubs == 0:
                continue
            weight = (1, 4, 12)[hubs] * (1.0 if distance <= LONG_HAUL_KM else 0.6)
            pairs.append((a, b, distance, weight))
    return pairs


def _plan_routes(ref: ReferenceData, scale: int, rng: random.Random) -> list[_Route]:
    """Return the fixture routes plus ``ROUTE_PAIRS_PER_SCALE * scale`` random city pairs.

    Pairs are drawn by weight without replacement, so a larger scale adds routes to the
    network of a smaller one. Each pair flies both ways, some twice a day.
    """
    candidates = _candidate_pairs(ref)
    keyed = sorted(candidates, key=lambda pair: rng.random() ** (1.0 / pair[3]), reverse=True)
    numbers = _FlightNumbers(rng, [route.flight_no for route in _FIXTURE_ROUTES])
    routes = list(_FIXTURE_ROUTES)
    for a, b, distance, _weight in keyed[: ROUTE_PAIRS_PER_SCALE * scale]:
        if b.code in _HUBS and a.code not in _HUBS:
            a, b = b, a  # the hub's airline flies the pair
        airline = _AIRLINES.get(a.country, _FALLBACK_AIRLINE)
        twice = distance <= LONG_HAUL_KM and rng.random() < TWICE_DAILY_SHARE
        windows = ((6, 13), (14, 21)) if twice else ((6, 21),)
        for earliest, latest in windows:
            outbound, inbound = numbers.pair(airline)
            aircraft = _pick_aircraft(ref, distance, rng)
            routes.append(
                _Route(
                    outbound, a.code, b.code, aircraft, _random_local_time(rng, earliest, latest)
                )
            )
            routes.append(
                _Route(inbound, b.code, a.code, aircraft, _random_local_time(rng, earliest, latest))
            )
    return routes


# ---------------------------------------------------------------------------------------
# Schedule
# ---------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Flight:
    """One generated flight and its sales inventory.

    ``sold`` counts tickets per fare class; ``quota`` is how many the build sells in
    total; ``seat_pool`` holds the seats still to hand out to the random sales.
    """

    flight_id: int
    route: _Route
    aircraft: AircraftType
    local_date: date
    departure: datetime
    arrival: datetime
    status: str = "Scheduled"
    actual_departure: datetime | None = None
    actual_arrival: datetime | None = None
    fares: dict[str, int] = field(default_factory=dict)
    sold: dict[str, int] = field(default_factory=dict)
    quota: dict[str, int] = field(default_factory=dict)
    seat_pool: dict[str, list[str]] = field(default_factory=dict)
    taken_seats: set[str] = field(default_factory=set)
    next_boarding_no: int = 1

    @property
    def has_left(self) -> bool:
        """Tell whether the aircraft is in the air or has landed."""
        return self.actual_departure is not None

    def free(self, fare: str) -> int:
        """Return how many more seats of ``fare`` the random sales may sell."""
        return self.quota.get(fare, 0) - self.sold.get(fare, 0)


def _floor_to_5_minutes(moment: datetime) -> datetime:
    return moment.replace(minute=moment.minute - moment.minute % 5, second=0, microsecond=0)


def _derived_local_times(ref: ReferenceData, now: datetime) -> dict[str, time]:
    """Return the local departure times of fixture routes that depend on "now"."""
    derived = {}
    for route, delay in (
        (_FIXTURE_FLIGHT, fx.FIXTURE_DEPARTURE_IN),
        (_BCN_AMS, CHECKED_IN_DEPARTURE_IN),
    ):
        departure = _floor_to_5_minutes(now + delay)
        derived[route.flight_no] = departure.astimezone(ref.airports[route.origin].zone).time()
    return derived


def _build_schedule(
    ref: ReferenceData, routes: Sequence[_Route], now: datetime, rng: random.Random
) -> list[_Flight]:
    """Fly every route once a day over the schedule window and set statuses and fares.

    Flight ids follow the order of scheduled departure.
    """
    derived = _derived_local_times(ref, now)
    today = now.date()
    days = [
        today + timedelta(days=d) for d in range(-SCHEDULE_DAYS_BEFORE, SCHEDULE_DAYS_AFTER + 1)
    ]
    planned: list[tuple[datetime, str, _Route, date, timedelta]] = []
    for route in routes:
        origin, destination = ref.airports[route.origin], ref.airports[route.destination]
        duration = flight_duration(great_circle_km(origin, destination))
        local_time = route.local_departure
        if local_time is None:
            local_time = derived[route.flight_no]
        for day in days:
            departure = datetime.combine(day, local_time, tzinfo=origin.zone).astimezone(UTC)
            planned.append((departure, route.flight_no, route, day, duration))
    planned.sort(key=lambda item: (item[0], item[1]))
    flights = []
    for flight_id, (departure, _, route, day, duration) in enumerate(planned, start=1):
        aircraft = ref.aircraft[route.aircraft_code]
        flight = _Flight(flight_id, route, aircraft, day, departure, departure + duration)
        flight.sold = dict.fromkeys(aircraft.seats, 0)
        _set_status(flight, now, rng)
        _set_fares(flight, ref, now, rng)
        flights.append(flight)
    return flights


def _draw_delay(rng: random.Random) -> timedelta:
    roll = rng.random()
    if roll < 0.7:
        return timedelta(minutes=rng.randrange(0, 11))
    if roll < 0.95:
        return timedelta(minutes=rng.randrange(10, 46))
    return timedelta(minutes=rng.randrange(45, 151))


def _set_status(flight: _Flight, now: datetime, rng: random.Random) -> None:
    """Decide the status (and actual times) of a flight as seen at ``now``.

    Fixture routes are never cancelled or delayed at random, so the fixtures stay as
    documented.
    """
    check_in_open = flight.departure - timedelta(hours=CHECK_IN_OPENS_HOURS) <= now
    if flight.departure <= now:
        delay = _draw_delay(rng)
        actual_departure = flight.departure + delay
        if actual_departure > now:
            flight.status = "Delayed"
            return
        flight.actual_departure = actual_departure
        jitter = timedelta(minutes=rng.randrange(-10, 11))
        actual_arrival = max(
            flight.arrival + delay + jitter, actual_departure + timedelta(minutes=20)
        )
        if actual_arrival <= now:
            flight.status, flight.actual_arrival = "Arrived", actual_arrival
        else:
            flight.status = "Departed"
    elif check_in_open:
        delayed = not flight.route.fixture and rng.random() < 0.08
        flight.status = "Delayed" if delayed else "On Time"
    else:
        cancelled = not flight.route.fixture and rng.random() < 0.004
        flight.status = "Cancelled" if cancelled else "Scheduled"


def _set_fares(flight: _Flight, ref: ReferenceData, now: datetime, rng: random.Random) -> None:
    """Price every cabin: by distance, dearer close to departure, Business > Comfort > Economy."""
    distance = great_circle_km(
        ref.airports[flight.route.origin], ref.airports[flight.route.destination]
    )
    days_out = max((flight.departure - now).total_seconds() / 86_400, 0.0)
    demand = 1.0 + 0.35 * math.exp(-days_out / 10)
    economy = round((45 + 0.075 * distance) * demand * rng.uniform(0.9, 1.12))
    euros = {
        "Economy": economy,
        "Comfort": round(economy * rng.uniform(1.45, 1.7)),
        "Business": round(economy * rng.uniform(2.6, 3.3)),
    }
    flight.fares = {fare: euros[fare] * 100 for fare in flight.aircraft.seats}


def _plan_quotas(
    flights: Sequence[_Flight], full_flight: _Flight, now: datetime, rng: random.Random
) -> None:
    """Decide how many seats each cabin sells and which seats the random sales get.

    Loads rise towards departure; ``full_flight`` sells every Economy seat; cancelled
    flights sell nothing. Flights that have left seat every passenger.
    """
    for flight in flights:
        if flight.status == "Cancelled":
            flight.quota = dict(flight.sold)
            continue
        days_out = (flight.departure - now).total_seconds() / 86_400
        curve = 1.0 if days_out <= 2 else max(0.3, 1 - (days_out - 2) / 75)
        load = rng.uniform(*LOAD_RANGE) * curve
        for fare, seats in flight.aircraft.seats.items():
            wanted = round(len(seats) * load * CABIN_LOAD_FACTOR[fare] * rng.uniform(0.7, 1.3))
            if flight is full_flight and fare == "Economy":
                wanted = len(seats)
            flight.quota[fare] = max(flight.sold[fare], min(len(seats), wanted))
            to_sell = flight.quota[fare] - flight.sold[fare]
            seated = to_sell if flight.has_left else round(to_sell * SEAT_SELECTED_SHARE)
            open_seats = seats
            if flight.taken_seats:  # only fixture flights; skip the copy elsewhere
                open_seats = tuple(seat for seat in seats if seat not in flight.taken_seats)
            flight.seat_pool[fare] = rng.sample(open_seats, seated)


# ---------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------

Row = tuple[Any, ...]

# The column order of the row tuples built below (a test keeps them equal to the models).
COLUMNS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "airports_data": (
            "airport_code", "airport_name", "city", "country", "latitude", "longitude",
            "timezone",
        ),
        "aircrafts_data": ("aircraft_code", "model", "range_km"),
        "seats": ("aircraft_code", "seat_no", "fare_conditions"),
        "flights": (
            "flight_id", "flight_no", "scheduled_departure", "scheduled_arrival",
            "departure_airport", "arrival_airport", "status", "aircraft_code",
            "actual_departure", "actual_arrival",
        ),
        "flight_fares": ("flight_id", "fare_conditions", "amount_cents"),
        "passengers": ("passenger_id", "name", "email"),
        "bookings": ("book_ref", "book_date", "total_amount_cents"),
        "tickets": ("ticket_no", "book_ref", "passenger_id", "status"),
        "ticket_flights": ("ticket_no", "flight_id", "fare_conditions", "amount_cents"),
        "boarding_passes": ("ticket_no", "flight_id", "boarding_no", "seat_no", "checked_in_at"),
        "car_rentals": (
            "id", "name", "location", "price_tier", "car_class", "daily_rate_cents", "fleet_size",
        ),
        "hotels": ("id", "name", "location", "price_tier", "nightly_rate_cents", "rooms"),
        "trip_recommendations": (
            "id", "name", "location", "keywords", "details", "price_cents", "capacity_per_day",
        ),
        "car_rental_bookings": (
            "id", "passenger_id", "rental_id", "start_date", "end_date", "status",
            "total_cents", "created_at",
        ),
        "hotel_bookings": (
            "id", "passenger_id", "hotel_id", "checkin_date", "checkout_date", "status",
            "total_cents", "created_at",
        ),
        "excursion_bookings": (
            "id", "passenger_id", "recommendation_id", "date", "status", "total_cents",
            "created_at",
        ),
        "payments": (
            "id", "passenger_id", "amount_cents", "kind", "reference", "description",
            "created_at",
        ),
        "tool_call_records": (
            "tool_call_id", "tool_name", "passenger_id", "result_json", "created_at",
        ),
    }
)  # fmt: skip


class _Writer(Protocol):
    """Inserts rows into one table; the columns are ``COLUMNS[table]``."""

    def insert(self, table: str, rows: Sequence[Row]) -> None:
        """Insert ``rows`` (Python values: aware datetimes, dates) into ``table``."""


class _RowSink:
    """Buffers rows per table and writes them in foreign-key order.

    ``maybe_flush`` is called only between complete bookings, so a child row never
    reaches the database before its parent.
    """

    def __init__(self, writer: _Writer) -> None:
        self._writer = writer
        self._order = [table.name for table in Base.metadata.sorted_tables]
        self._buffers: dict[str, list[Row]] = {name: [] for name in self._order}
        self.counts: dict[str, int] = dict.fromkeys(self._order, 0)
        self._pending = 0

    def add(self, table: str, row: Row) -> None:
        """Queue one row."""
        self._buffers[table].append(row)
        self._pending += 1

    def maybe_flush(self) -> None:
        """Write the queued rows once enough have piled up."""
        if self._pending >= _ROWS_PER_FLUSH:
            self.flush()

    def flush(self) -> None:
        """Write every queued row, parents first."""
        for name in self._order:
            rows = self._buffers[name]
            if rows:
                self._writer.insert(name, rows)
                self.counts[name] += len(rows)
                self._buffers[name] = []
        self._pending = 0


def _write_reference(sink: _RowSink, ref: ReferenceData) -> None:
    for a in ref.airports.values():
        sink.add(
            "airports_data",
            (a.code, a.name, a.city, a.country, a.latitude, a.longitude, a.timezone),
        )
    for craft in ref.aircraft.values():
        sink.add("aircrafts_data", (craft.code, craft.model, craft.range_km))
        for fare, seats in craft.seats.items():
            for seat in seats:
                sink.add("seats", (craft.code, seat, fare))
    for h in ref.hotels:
        sink.add("hotels", (h.id, h.name, h.location, h.price_tier, h.nightly_rate_cents, h.rooms))
    for c in ref.car_rentals:
        sink.add(
            "car_rentals",
            (c.id, c.name, c.location, c.price_tier, c.car_class, c.daily_rate_cents, c.fleet_size),
        )
    for t in ref.trips:
        sink.add(
            "trip_recommendations",
            (t.id, t.name, t.location, t.keywords, t.details, t.price_cents, t.capacity_per_day),
        )


def _write_flights(sink: _RowSink, flights: Sequence[_Flight]) -> None:
    for f in flights:
        route = f.route
        sink.add(
            "flights",
            (
                f.flight_id, route.flight_no, f.departure, f.arrival, route.origin,
                route.destination, f.status, route.aircraft_code, f.actual_departure,
                f.actual_arrival,
            ),
        )  # fmt: skip
        for fare, amount in f.fares.items():
            sink.add("flight_fares", (f.flight_id, fare, amount))
        sink.maybe_flush()


# ---------------------------------------------------------------------------------------
# People and tickets
# ---------------------------------------------------------------------------------------

_FIRST_NAMES = _words(
    "Anna Ben Carla David Emma Felix Giulia Hugo Ines Jakob Klara Leon Maria Noah Olivia "
    "Paul Sofia Tom Ursula Victor Wei Yuki Zara Amir Bianca Chen Daniel Eva Farah Gabriel "
    "Hannah Ivan Julia Kenji Laura Mateo Nina Omar Pia Rafael Sara Thomas Lea Marco Elif "
    "Aisha Lukas Mila Jonas Chloe Diego Freya Hiroshi Isabel Joao Katarina Louis Maya "
    "Nikolai Oscar Priya Quentin Rosa Samuel Tara Valentina William Xavier Yasmin Zoe"
)
_LAST_NAMES = _words(
    "Müller Schmidt Meier Keller Martin Bernard Dubois Rossi Bianchi Garcia Martinez Lopez "
    "Silva Santos Smith Jones Taylor Brown Wilson Johnson Williams Miller Davis Nowak "
    "Kowalski Novak Horvat Jansen de_Vries Bakker Peeters Nielsen Hansen Johansson Larsen "
    "Virtanen Papadopoulos Yilmaz Kaya Cohen Levi Khan Patel Sharma Singh Tanaka Suzuki "
    "Sato Kim Lee Park Wang Li Zhang Liu Chen Nguyen Tran Fischer Weber Wagner Becker "
    "Hoffmann Schneider Huber Gruber Brunner Moser Ferrari Romano Costa Fernandes Pereira "
    "O'Brien Murphy Kelly Walsh Dupont Lambert Fontaine Moreau Laurent Ivanova Petrov Popescu"
)


def _ascii(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return "".join(ch for ch in folded.lower() if ch.isalnum() or ch == ".")


@dataclass
class _Counters:
    """Sequential identifiers shared by the whole build."""

    ticket: int = 7_240_001_000_000_000
    payment: int = 0
    hotel_booking: int = 0
    car_rental_booking: int = 0
    excursion_booking: int = 0

    def next_ticket_no(self) -> str:
        """Return the next random-sale ticket number (fixture numbers never collide)."""
        self.ticket += 1
        return str(self.ticket)

    def next_payment_id(self) -> int:
        """Return the next payment id."""
        self.payment += 1
        return self.payment


class _People:
    """Creates passengers and picks returning ones without double-booking a day."""

    def __init__(self, sink: _RowSink, rng: random.Random) -> None:
        self._sink = sink
        self._rng = rng
        self._ids: set[str] = set(fx.FIXTURE_PASSENGER_IDS)
        self.random_ids: list[str] = []
        self._busy_days: set[tuple[int, int]] = set()

    def add_fixture(self, passenger_id: str) -> None:
        """Create a fixture passenger with the documented name."""
        name = FIXTURE_PASSENGER_NAMES[passenger_id]
        email = f"{_ascii(name.replace(' ', '.'))}@example.com"
        self._sink.add("passengers", (passenger_id, name, email))

    def _new(self) -> int:
        rng = self._rng
        while True:
            passenger_id = f"{rng.randrange(1000, 10000)} {rng.randrange(100_000, 1_000_000)}"
            if passenger_id not in self._ids:
                break
        self._ids.add(passenger_id)
        name = f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES).replace('_', ' ')}"
        email = None
        if rng.random() < 0.85:
            email = f"{_ascii(name.replace(' ', '.'))}{rng.randrange(1, 100)}@example.com"
        self._sink.add("passengers", (passenger_id, name, email))
        self.random_ids.append(passenger_id)
        return len(self.random_ids) - 1

    def pick(self, days: Sequence[int]) -> str:
        """Return a passenger free on every day ordinal in ``days``; often a new one."""
        index: int | None = None
        if self.random_ids and self._rng.random() < PASSENGER_REUSE_SHARE:
            index = self._rng.randrange(len(self.random_ids))
            if any((index, day) in self._busy_days for day in days):
                index = None
        if index is None:
            index = self._new()
        self._busy_days.update((index, day) for day in days)
        return self.random_ids[index]


class _Sales:
    """Sells tickets: bookings, tickets, segments, seats, check-ins and payments."""

    def __init__(
        self,
        sink: _RowSink,
        people: _People,
        counters: _Counters,
        now: datetime,
        rng: random.Random,
    ) -> None:
        self._sink = sink
        self._people = people
        self._counters = counters
        self._now = now
        self._rng = rng
        self._book_refs: set[str] = set()

    # Shared pieces ------------------------------------------------------------------

    def _new_book_ref(self) -> str:
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
        while True:
            ref = "".join(self._rng.choice(alphabet) for _ in range(6))
            if ref not in self._book_refs:
                self._book_refs.add(ref)
                return ref

    def _add_booking(
        self,
        book_ref: str,
        booked: datetime,
        payer: str,
        total: int,
        flights: Sequence[_Flight],
        tickets: int,
    ) -> None:
        """Write the booking and the payment that bought it (before its tickets)."""
        self._sink.add("bookings", (book_ref, booked, total))
        itinerary = "-".join([flights[0].route.origin, *(f.route.destination for f in flights)])
        plural = "ticket" if tickets == 1 else "tickets"
        self._sink.add(
            "payments",
            (
                self._counters.next_payment_id(), payer, total, "ticket_purchase", book_ref,
                f"Booking {book_ref}: {tickets} {plural} {itinerary}", booked,
            ),
        )  # fmt: skip

    def _add_segment(
        self,
        ticket_no: str,
        flight: _Flight,
        fare: str,
        seat: str | None,
        checked_in: datetime | None,
    ) -> None:
        flight.sold[fare] += 1
        self._sink.add("ticket_flights", (ticket_no, flight.flight_id, fare, flight.fares[fare]))
        if seat is not None:
            boarding_no = flight.next_boarding_no
            flight.next_boarding_no += 1
            self._sink.add(
                "boarding_passes", (ticket_no, flight.flight_id, boarding_no, seat, checked_in)
            )

    # Fixtures -------------------------------------------------------------------------

    def sell_fixture(
        self,
        passenger_id: str,
        tickets: Sequence[tuple[str, Sequence[_Flight], str, datetime | None]],
        booked: datetime,
    ) -> None:
        """Sell a fixture booking; every segment gets a seat.

        Args:
            passenger_id: The owner of every ticket.
            tickets: ``(ticket_no, flights, fare class, checked-in time or None)``.
            booked: When the booking was bought.
        """
        book_ref = self._new_book_ref()
        all_flights = [flight for _, flights, _, _ in tickets for flight in flights]
        total = sum(f.fares[fare] for _, flights, fare, _ in tickets for f in flights)
        self._add_booking(book_ref, booked, passenger_id, total, all_flights, len(tickets))
        for ticket_no, flights, fare, checked_in in tickets:
            self._sink.add("tickets", (ticket_no, book_ref, passenger_id, "active"))
            for flight in flights:
                if flight.sold[fare] >= len(flight.aircraft.seats[fare]):
                    raise RuntimeError(f"No {fare} seat left for fixture {ticket_no}.")
                open_seats = [s for s in flight.aircraft.seats[fare] if s not in flight.taken_seats]
                seat = self._rng.choice(open_seats)
                flight.taken_seats.add(seat)
                self._add_segment(ticket_no, flight, fare, seat, checked_in)

    # Random sales ---------------------------------------------------------------------

    def _book_date(self, first: _Flight) -> datetime:
        rng = self._rng
        lead_seconds = 7_200 + min(int(rng.expovariate(1 / (18 * 86_400))), 120 * 86_400)
        booked = first.departure - timedelta(seconds=lead_seconds)
        if booked > self._now:
            booked = self._now - timedelta(seconds=rng.randrange(600, 15 * 86_400))
        return booked

    def _check_in_time(self, flight: _Flight, booked: datetime) -> datetime | None:
        rng = self._rng
        if flight.has_left:
            before = timedelta(seconds=rng.randrange(3_600, 23 * 3_600))
            return max(flight.departure - before, booked + timedelta(minutes=1))
        start = max(flight.departure - timedelta(hours=CHECK_IN_OPENS_HOURS), booked)
        end = min(self._now, flight.departure - CHECK_IN_CLOSES_BEFORE)
        if start <= end and rng.random() < CHECKED_IN_SHARE:
            return start + timedelta(seconds=rng.randrange(int((end - start).total_seconds()) + 1))
        return None

    def _party_size(self, room: int) -> int:
        roll = self._rng.random()
        return min(room, 1 if roll < 0.72 else 2 if roll < 0.92 else 3)

    def sell(self, flights: Sequence[_Flight], fare: str) -> None:
        """Sell one booking of 1-3 tickets over ``flights`` in ``fare`` (seats permitting)."""
        party = self._party_size(min(flight.free(fare) for flight in flights))
        if party <= 0:
            return
        book_ref = self._new_book_ref()
        booked = self._book_date(flights[0])
        days = [flight.departure.toordinal() for flight in flights]
        passengers = [self._people.pick(days) for _ in range(party)]
        total = party * sum(flight.fares[fare] for flight in flights)
        self._add_booking(book_ref, booked, passengers[0], total, flights, party)
        for passenger_id in passengers:
            ticket_no = self._counters.next_ticket_no()
            self._sink.add("tickets", (ticket_no, book_ref, passenger_id, "active"))
            for flight in flights:
                pool = flight.seat_pool[fare]
                seat = pool.pop() if pool else None
                checked_in = self._check_in_time(flight, booked) if seat else None
                self._add_segment(ticket_no, flight, fare, seat, checked_in)
        self._sink.maybe_flush()

    def sell_connections(self, flights: Sequence[_Flight]) -> None:
        """Sell two-segment itineraries through every connecting airport."""
        departures: dict[str, list[_Flight]] = {}
        for flight in flights:  # flights are in departure order
            if flight.status != "Cancelled":
                departures.setdefault(flight.route.origin, []).append(flight)
        times = {code: [f.departure for f in group] for code, group in departures.items()}
        for first in flights:
            if first.status == "Cancelled" or first.route.destination not in departures:
                continue
            for fare in first.aircraft.seats:
                attempts = int(first.free(fare) * CONNECTING_SHARE + self._rng.random())
                for _ in range(attempts):
                    second = self._connection(first, fare, departures, times)
                    if second is None:
                        break
                    self.sell([first, second], fare)

    def _connection(
        self,
        first: _Flight,
        fare: str,
        departures: Mapping[str, list[_Flight]],
        times: Mapping[str, list[datetime]],
    ) -> _Flight | None:
        hub = first.route.destination
        low = bisect.bisect_left(times[hub], first.arrival + MIN_CONNECTION)
        high = bisect.bisect_right(times[hub], first.arrival + MAX_CONNECTION)
        if low >= high or first.free(fare) <= 0:
            return None
        for _ in range(3):
            second = departures[hub][self._rng.randrange(low, high)]
            if second.route.destination != first.route.origin and second.free(fare) > 0:
                return second
        return None

    def sell_direct(self, flights: Sequence[_Flight]) -> None:
        """Fill every cabin up to its quota with single-segment tickets."""
        for flight in flights:
            for fare in flight.aircraft.seats:
                while flight.free(fare) > 0:
                    self.sell([flight], fare)


# ---------------------------------------------------------------------------------------
# Partner reservations
# ---------------------------------------------------------------------------------------


class _Reservations:
    """Books hotels, cars and excursions within capacity, with their payments."""

    def __init__(
        self, sink: _RowSink, counters: _Counters, now: datetime, rng: random.Random
    ) -> None:
        self._sink = sink
        self._counters = counters
        self._now = now
        self._rng = rng
        self._rooms: dict[tuple[int, date], int] = {}
        self._cars: dict[tuple[int, date], int] = {}
        self._places: dict[tuple[int, date], int] = {}

    @staticmethod
    def _fits(
        usage: dict[tuple[int, date], int], item: int, days: Sequence[date], capacity: int
    ) -> bool:
        return all(usage.get((item, day), 0) < capacity for day in days)

    @staticmethod
    def _use(usage: dict[tuple[int, date], int], item: int, days: Sequence[date]) -> None:
        for day in days:
            usage[(item, day)] = usage.get((item, day), 0) + 1

    def _pay(
        self,
        owner: str,
        total: int,
        kind: str,
        reference: str,
        what: str,
        created: datetime,
        cancelled: bool,
    ) -> None:
        self._sink.add(
            "payments",
            (
                self._counters.next_payment_id(),
                owner,
                total,
                f"{kind}_book",
                reference,
                what,
                created,
            ),
        )
        if cancelled:
            refunded = min(self._now, created + timedelta(hours=self._rng.randrange(1, 120)))
            self._sink.add(
                "payments",
                (
                    self._counters.next_payment_id(), owner, -total, f"{kind}_cancel", reference,
                    f"Cancelled: {what}", refunded,
                ),
            )  # fmt: skip

    def hotel(
        self,
        owner: str,
        hotel: HotelRow,
        checkin: date,
        nights: int,
        created: datetime,
        cancelled: bool = False,
    ) -> int | None:
        """Reserve one room for ``nights`` nights; return the id, or ``None`` when full."""
        days = [checkin + timedelta(days=n) for n in range(nights)]
        if not cancelled:
            if not self._fits(self._rooms, hotel.id, days, hotel.rooms):
                return None
            self._use(self._rooms, hotel.id, days)
        self._counters.hotel_booking += 1
        booking_id = self._counters.hotel_booking
        total = nights * hotel.nightly_rate_cents
        checkout = checkin + timedelta(days=nights)
        status = "cancelled" if cancelled else "confirmed"
        self._sink.add(
            "hotel_bookings",
            (booking_id, owner, hotel.id, checkin, checkout, status, total, created),
        )
        what = f"{hotel.name}, {nights} night(s) from {checkin.isoformat()}"
        self._pay(owner, total, "hotel", f"hotel-{booking_id}", what, created, cancelled)
        return booking_id

    def car(
        self,
        owner: str,
        offer: CarRentalRow,
        start: date,
        end: date,
        created: datetime,
        cancelled: bool = False,
    ) -> int | None:
        """Reserve one car from ``start`` to ``end`` inclusive; ``None`` when none is left."""
        days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
        if not cancelled:
            if not self._fits(self._cars, offer.id, days, offer.fleet_size):
                return None
            self._use(self._cars, offer.id, days)
        self._counters.car_rental_booking += 1
        booking_id = self._counters.car_rental_booking
        total = len(days) * offer.daily_rate_cents
        status = "cancelled" if cancelled else "confirmed"
        self._sink.add(
            "car_rental_bookings", (booking_id, owner, offer.id, start, end, status, total, created)
        )
        what = f"{offer.name} {offer.car_class} in {offer.location}, {start} to {end}"
        self._pay(owner, total, "car_rental", f"car-{booking_id}", what, created, cancelled)
        return booking_id

    def excursion(
        self, owner: str, trip: TripRow, day: date, created: datetime, cancelled: bool = False
    ) -> int | None:
        """Reserve one place on ``day``; ``None`` when the day is full."""
        if not cancelled:
            if not self._fits(self._places, trip.id, [day], trip.capacity_per_day):
                return None
            self._use(self._places, trip.id, [day])
        self._counters.excursion_booking += 1
        booking_id = self._counters.excursion_booking
        status = "cancelled" if cancelled else "confirmed"
        self._sink.add(
            "excursion_bookings",
            (booking_id, owner, trip.id, day, status, trip.price_cents, created),
        )
        what = f"{trip.name} on {day.isoformat()}"
        self._pay(
            owner,
            trip.price_cents,
            "excursion",
            f"excursion-{booking_id}",
            what,
            created,
            cancelled,
        )
        return booking_id

    def created_before(self, start: date) -> datetime:
        """Return a plausible moment a reservation starting on ``start`` was made."""
        rng = self._rng
        created = datetime.combine(start, time(), UTC) - timedelta(
            seconds=rng.randrange(86_400, 60 * 86_400)
        )
        if created > self._now:
            created = self._now - timedelta(seconds=rng.randrange(600, 20 * 86_400))
        return created


def _book_random_reservations(
    reservations: _Reservations,
    ref: ReferenceData,
    owners: Sequence[str],
    scale: int,
    today: date,
    rng: random.Random,
) -> None:
    def pick_day() -> date:
        return today + timedelta(days=rng.randint(-30, SCHEDULE_DAYS_AFTER))

    def cancelled() -> bool:
        return rng.random() < CANCELLED_RESERVATION_SHARE

    for _ in range(HOTEL_BOOKINGS_PER_SCALE * scale):
        checkin = pick_day()
        nights = rng.choice((1, 1, 2, 2, 3, 3, 4, 5, 7))
        reservations.hotel(
            rng.choice(owners), rng.choice(ref.hotels), checkin, nights,
            reservations.created_before(checkin), cancelled(),
        )  # fmt: skip
    for _ in range(CAR_BOOKINGS_PER_SCALE * scale):
        start = pick_day()
        end = start + timedelta(days=rng.choice((0, 1, 2, 3, 4, 6, 9)))
        reservations.car(
            rng.choice(owners), rng.choice(ref.car_rentals), start, end,
            reservations.created_before(start), cancelled(),
        )  # fmt: skip
    for _ in range(EXCURSION_BOOKINGS_PER_SCALE * scale):
        day = pick_day()
        reservations.excursion(
            rng.choice(owners),
            rng.choice(ref.trips),
            day,
            reservations.created_before(day),
            cancelled(),
        )


# ---------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------


def _find_flight(by_key: Mapping[tuple[str, date], _Flight], route: _Route, day: date) -> _Flight:
    flight = by_key.get((route.flight_no, day))
    if flight is None:
        raise RuntimeError(f"The schedule lacks fixture flight {route.flight_no} on {day}.")
    return flight


def _expect_status(flight: _Flight, allowed: Sequence[str]) -> _Flight:
    if flight.status not in allowed:
        raise RuntimeError(
            f"Fixture flight {flight.route.flight_no} on {flight.local_date} is {flight.status}, "
            f"expected one of {', '.join(allowed)}."
        )
    return flight


def _local_date(ref: ReferenceData, route: _Route, moment: datetime) -> date:
    return moment.astimezone(ref.airports[route.origin].zone).date()


def _sell_fixture_tickets(
    sales: _Sales, people: _People, ref: ReferenceData, flights: Sequence[_Flight], now: datetime
) -> _Flight:
    """Sell every fixture ticket of ``db.fixtures``; return the LX0112 flight to fill up."""
    by_key = {(f.route.flight_no, f.local_date): f for f in flights}
    today = now.date()
    bookable = ("Scheduled", "On Time")
    for passenger_id in fx.FIXTURE_PASSENGER_IDS:
        people.add_fixture(passenger_id)

    fixture_day = _local_date(
        ref, _FIXTURE_FLIGHT, _floor_to_5_minutes(now + fx.FIXTURE_DEPARTURE_IN)
    )
    fixture_flight = _expect_status(_find_flight(by_key, _FIXTURE_FLIGHT, fixture_day), bookable)
    sales.sell_fixture(
        fx.FIXTURE_PASSENGER_ID,
        [(fx.FIXTURE_TICKET_NO, [fixture_flight], "Economy", None)],
        now - timedelta(days=21),
    )

    day = today + timedelta(days=MULTI_SEGMENT_DAYS_AHEAD)
    legs = [_find_flight(by_key, _MUC_FRA, day), _find_flight(by_key, _FRA_JFK, day)]
    if legs[1].departure - legs[0].arrival < MIN_CONNECTION:
        raise RuntimeError("The fixture connection MUC-FRA-JFK is too short.")
    sales.sell_fixture(
        fx.MULTI_SEGMENT_PASSENGER_ID,
        [(fx.MULTI_SEGMENT_TICKET_NO, legs, "Economy", None)],
        now - timedelta(days=30),
    )

    business = _find_flight(by_key, _ZRH_LHR, today + timedelta(days=BUSINESS_DAYS_AHEAD))
    sales.sell_fixture(
        fx.BUSINESS_PASSENGER_ID,
        [(fx.BUSINESS_TICKET_NO, [business], "Business", None)],
        now - BUSINESS_BOUGHT_AGO,
    )

    flown = _find_flight(by_key, _AMS_BCN, today - timedelta(days=FLOWN_DAYS_AGO))
    _expect_status(flown, ("Arrived",))
    return_day = _local_date(ref, _BCN_AMS, _floor_to_5_minutes(now + CHECKED_IN_DEPARTURE_IN))
    checked_in = _expect_status(_find_flight(by_key, _BCN_AMS, return_day), ("On Time",))
    sales.sell_fixture(
        fx.FLOWN_PASSENGER_ID,
        [
            (fx.FLOWN_TICKET_NO, [flown], "Economy", flown.departure - timedelta(hours=20)),
            (fx.CHECKED_IN_TICKET_NO, [checked_in], "Economy", now - timedelta(hours=1)),
        ],
        now - timedelta(days=25),
    )
    full_day = fixture_day + timedelta(days=fx.FULL_FLIGHT_DAY_OFFSET)
    return _expect_status(_find_flight(by_key, _FIXTURE_FLIGHT, full_day), bookable)


def _book_fixture_reservations(
    reservations: _Reservations,
    ref: ReferenceData,
    flights: Sequence[_Flight],
    owners: Sequence[str],
    now: datetime,
    rng: random.Random,
) -> None:
    """Create the fixture reservations first, so the fixture passenger's ids are 1."""
    today = now.date()
    made = now - timedelta(days=6)
    ids = (
        reservations.hotel(
            fx.FIXTURE_PASSENGER_ID, _fixture_hotel(ref),
            today + timedelta(days=FIXTURE_HOTEL_CHECKIN_IN_DAYS), FIXTURE_HOTEL_NIGHTS, made,
        ),
        reservations.car(
            fx.FIXTURE_PASSENGER_ID, _first_at(ref.car_rentals, FIXTURE_LOCATION, ""),
            today + timedelta(days=FIXTURE_CAR_START_IN_DAYS),
            today + timedelta(days=FIXTURE_CAR_END_IN_DAYS), made,
        ),
        reservations.excursion(
            fx.FIXTURE_PASSENGER_ID, _first_at(ref.trips, FIXTURE_LOCATION, ""),
            today + timedelta(days=FIXTURE_EXCURSION_IN_DAYS), made,
        ),
    )  # fmt: skip
    expected = (
        fx.FIXTURE_HOTEL_BOOKING_ID,
        fx.FIXTURE_CAR_RENTAL_BOOKING_ID,
        fx.FIXTURE_EXCURSION_BOOKING_ID,
    )
    if ids != expected:
        raise RuntimeError(f"Fixture reservations got ids {ids}, expected {expected}.")

    arrival = next(
        f for f in flights
        if f.route is _FRA_JFK and f.local_date == today + timedelta(days=MULTI_SEGMENT_DAYS_AHEAD)
    )  # fmt: skip
    new_york = _first_at(ref.hotels, MULTI_SEGMENT_HOTEL_LOCATION, "")
    checkin = arrival.arrival.astimezone(ref.airports[_FRA_JFK.destination].zone).date()
    reservations.hotel(
        fx.MULTI_SEGMENT_PASSENGER_ID,
        new_york,
        checkin,
        MULTI_SEGMENT_HOTEL_NIGHTS,
        now - timedelta(days=30),
    )

    full = next(hotel for hotel in ref.hotels if hotel.name == fx.FULL_HOTEL_NAME)
    checkin = today + timedelta(days=fx.FULL_HOTEL_CHECKIN_IN_DAYS)
    for guest in rng.sample(list(owners), fx.FULL_HOTEL_ROOMS):
        made = now - timedelta(days=rng.randint(3, 20))
        if reservations.hotel(guest, full, checkin, fx.FULL_HOTEL_NIGHTS, made) is None:
            raise RuntimeError(f"{fx.FULL_HOTEL_NAME} has fewer rooms than FULL_HOTEL_ROOMS.")


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------


def _sqlite_text(value: datetime | None) -> str | None:
    """Format an aware datetime exactly as SQLAlchemy's SQLite DateTime stores it (naive UTC)."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _sqlite_date(value: date | None) -> str | None:
    return None if value is None else value.isoformat()


class _SqliteWriter:
    """Bulk inserts on the raw SQLite connection, in the text formats SQLAlchemy reads back.

    Plain ``executemany`` with prepared tuples: measured about 1.5 times faster than
    ``sqlite_utils`` ``insert_all``, which inspects every value.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._sql: dict[str, str] = {}
        self._converters: dict[str, list[tuple[int, Callable[[Any], Any]]]] = {}
        for name, columns in COLUMNS.items():
            placeholders = ", ".join("?" * len(columns))
            self._sql[name] = f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({placeholders})"
            table = Base.metadata.tables[name]
            converters: list[tuple[int, Callable[[Any], Any]]] = []
            for index, column in enumerate(columns):
                kind = table.c[column].type
                if isinstance(kind, UTCDateTime):
                    converters.append((index, _sqlite_text))
                elif isinstance(kind, Date):
                    converters.append((index, _sqlite_date))
            self._converters[name] = converters

    def insert(self, table: str, rows: Sequence[Row]) -> None:
        """Insert Python-valued rows, converting timestamps and dates to text."""
        converters = self._converters[table]
        records: Sequence[Sequence[Any]] = rows
        if converters:
            converted = []
            for row in rows:
                values = list(row)
                for index, convert in converters:
                    values[index] = convert(values[index])
                converted.append(values)
            records = converted
        self._connection.executemany(self._sql[table], records)


class _CoreWriter:
    """Portable inserts through SQLAlchemy Core (PostgreSQL and others)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def insert(self, table: str, rows: Sequence[Row]) -> None:
        """Insert rows as one executemany."""
        columns = COLUMNS[table]
        self._connection.execute(
            insert(Base.metadata.tables[table]),
            [dict(zip(columns, row, strict=True)) for row in rows],
        )


def _add_full_text_search(connection: sqlite3.Connection) -> None:
    """Index the catalogues for full-text search (optional: queries work without it)."""
    database = sqlite_utils.Database(connection, recursive_triggers=False, execute_plugins=False)
    for name, columns in _FTS_COLUMNS.items():
        # Inside our transaction sqlite-utils nests its work in a savepoint.
        database.table(name).enable_fts(list(columns), create_triggers=True)


def _sqlite_table_exists(connection: Any, name: str) -> bool:
    found = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return found is not None


@contextmanager
def _sqlite_writer(engine: Engine, only_if_missing: bool) -> Iterator[_Writer | None]:
    """Yield a writer inside one immediate transaction that drops and recreates the schema.

    Yields ``None`` (and changes nothing) when ``only_if_missing`` and the schema exists,
    which makes concurrent first-use builds safe. Indexes and full-text search are added
    after the rows, which is faster than maintaining them row by row.
    """
    dialect = engine.dialect
    proxy = engine.raw_connection()
    try:
        connection = proxy.driver_connection
        assert connection is not None
        connection.execute("BEGIN IMMEDIATE")
        try:
            if only_if_missing and _sqlite_table_exists(connection, "flights"):
                connection.execute("ROLLBACK")
                yield None
                return
            for name in _FTS_COLUMNS:
                connection.execute(f"DROP TABLE IF EXISTS {name}_fts")
            for table in reversed(Base.metadata.sorted_tables):
                connection.execute(str(DropTable(table, if_exists=True).compile(dialect=dialect)))
            for table in Base.metadata.sorted_tables:
                connection.execute(str(CreateTable(table).compile(dialect=dialect)))
            yield _SqliteWriter(connection)
            for table in Base.metadata.sorted_tables:
                for index in sorted(table.indexes, key=lambda item: str(item.name)):
                    connection.execute(str(CreateIndex(index).compile(dialect=dialect)))
            _add_full_text_search(connection)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
    finally:
        proxy.close()


@contextmanager
def _core_writer(engine: Engine, only_if_missing: bool) -> Iterator[_Writer | None]:
    """Yield a Core writer inside one transaction (DDL is transactional on PostgreSQL)."""
    with engine.begin() as connection:
        if only_if_missing and inspect(connection).has_table("flights"):
            yield None
            return
        Base.metadata.drop_all(connection)
        Base.metadata.create_all(connection)
        yield _CoreWriter(connection)
        if connection.dialect.name == "postgresql":
            _reset_sequences(connection)


def _reset_sequences(connection: Connection) -> None:
    """Move serial sequences past the explicit ids the generator wrote."""
    for table in Base.metadata.sorted_tables:
        column = table.autoincrement_column
        if column is None:
            continue
        connection.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', '{column.name}'), "
                f"COALESCE((SELECT MAX({column.name}) FROM {table.name}), 0) + 1, false)"
            )
        )


def _open_writer(engine: Engine, only_if_missing: bool) -> AbstractContextManager[_Writer | None]:
    if engine.dialect.name == "sqlite":
        return _sqlite_writer(engine, only_if_missing)
    return _core_writer(engine, only_if_missing)


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def _generate(
    writer: _Writer, ref: ReferenceData, seed: int, scale: int, now: datetime
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
    _plan_quotas(flights, full_flight, now, rng("quotas"))
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
    db: Database, seed: int, scale: int, now: datetime | None, only_if_missing: bool
) -> BuildReport | None:
    if not 1 <= scale <= MAX_SCALE:
        raise ValueError(f"scale must be between 1 and {MAX_SCALE}, not {scale}.")
    moment = now if now is not None else db.clock()
    if moment.tzinfo is None:
        raise ValueError("now must be timezone-aware.")
    moment = moment.astimezone(UTC)
    started = perf_counter()
    ref = load_reference_data()
    with _open_writer(db.engine, only_if_missing) as writer:
        if writer is None:
            return None
        counts = _generate(writer, ref, seed, scale, moment)
    return BuildReport(seed, scale, moment, MappingProxyType(counts), perf_counter() - started)


def build_database(
    db: Database,
    *,
    seed: int = DEFAULT_SEED,
    scale: int = DEFAULT_SCALE,
    now: datetime | None = None,
) -> BuildReport:
    """Drop and recreate every table, then fill the database deterministically.

    Args:
        db: The database to (re)build; its clock gives "now" unless ``now`` is passed.
        seed: The seed of every random choice.
        scale: The size of the route network, 1 to ``MAX_SCALE``.
        now: The moment the data is relative to (timezone-aware).

    Returns:
        The rows written per table and the time taken.

    Raises:
        ValueError: ``scale`` is out of range, ``now`` is naive, or a reference file is
            inconsistent with the fixtures.
    """
    report = _build(db, seed, scale, now, only_if_missing=False)
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


def ensure_database(db: Database, *, seed: int = DEFAULT_SEED, scale: int = DEFAULT_SCALE) -> bool:
    """Build the database unless it already has its tables.

    Creates the folder of a SQLite file first. On SQLite two processes starting at once
    do not both build: the second waits for the first (up to the busy timeout) and then
    finds the tables.

    Args:
        db: The database; its clock gives "now".
        seed: The seed used if a build is needed.
        scale: The scale used if a build is needed.

    Returns:
        ``True`` if this call built the database, ``False`` if it was already there.
    """
    _make_parent_folder(db.engine)
    if db.has_schema():
        return False
    return _build(db, seed, scale, None, only_if_missing=True) is not None
