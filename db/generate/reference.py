"""Reference data: the airports, aircraft and partner catalogues read from ``data/``.

``load_reference_data`` reads the files and checks that they can hold the fixtures of
``db.fixtures``; ``_write_reference`` queues their rows.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

from db import fixtures as fx
from db.engine import reference_data_dir
from db.generate.bulk_load import _RowSink
from db.models import FARE_CONDITIONS


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
        folder: The data folder; defaults to the packaged one (``db.engine``).

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
    for route in fx.FIXTURE_ROUTES:
        for code in (route.origin, route.destination):
            if code not in ref.airports:
                raise ValueError(f"data/airports.csv lacks {code}, which a fixture flies.")
        if route.aircraft_code not in ref.aircraft:
            raise ValueError(f"data/aircraft.json lacks type {route.aircraft_code}.")
    for aircraft in ref.aircraft.values():
        if not {"Business", "Economy"} <= set(aircraft.seats):
            raise ValueError(f"Aircraft {aircraft.code} needs Business and Economy cabins.")
    if set(ref.aircraft[fx.FIXTURE_FLIGHT_ROUTE.aircraft_code].seats) != set(FARE_CONDITIONS):
        raise ValueError(f"The aircraft of {fx.FIXTURE_FLIGHT_NO} needs all three fare classes.")
    full = [hotel for hotel in ref.hotels if hotel.name == fx.FULL_HOTEL_NAME]
    if len(full) != 1 or full[0].location != fx.FIXTURE_LOCATION:
        raise ValueError(
            f"data/hotels.csv needs one {fx.FULL_HOTEL_NAME!r} in {fx.FIXTURE_LOCATION}."
        )
    if full[0].rooms != fx.FULL_HOTEL_ROOMS:
        raise ValueError(f"{fx.FULL_HOTEL_NAME} must have {fx.FULL_HOTEL_ROOMS} rooms.")
    _fixture_hotel(ref)
    _first_at(ref.car_rentals, fx.FIXTURE_LOCATION, "data/car_rentals.csv")
    _first_at(ref.trips, fx.FIXTURE_LOCATION, "data/trip_recommendations.csv")
    _first_at(ref.hotels, fx.MULTI_SEGMENT_HOTEL_LOCATION, "data/hotels.csv")


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
    return _first_at(others, fx.FIXTURE_LOCATION, "data/hotels.csv")


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
