"""Build the travel database: reference data from ``data/`` plus a generated schedule.

``build_database`` drops and recreates every table, then fills it from the reference
files (airports, aircraft seat maps, partner catalogues) and from a generator seeded with
``seed``: a network of routes that grows with ``scale``, a daily schedule from a week
before "now" to two months after it, fares, passengers, bookings, tickets, seats and
partner reservations. The same seed, scale, load and "now" always give the same rows;
nothing reads the wall clock or the global random generator.

``load`` (1 by default) sets how full the random sales make the flights: below 1 the
database is smaller (``SMALL_LOAD``, about a tenth of the tickets, passengers and
payments, is what the tests build) with the same schedule, fixtures and rules.

Every record promised by ``db.fixtures`` is created first, exactly as its comments
describe, so tests and demos can rely on it.

The stages, one module each, listed from the ground up: each imports only modules listed
before it, and ``build`` runs them in order (reference data, schedule, fixture tickets,
random sales, fixture reservations, random reservations).

- ``bulk_load``: the row sink and the SQLite, PostgreSQL COPY and SQLAlchemy Core writers
  (one transaction each).
- ``routes``: the route type and the fixture routes.
- ``reference``: reading and checking ``data/``.
- ``schedule``: the route network, the daily flights, their statuses, fares and quotas.
- ``sales``: passengers, bookings, tickets, seats and boarding passes.
- ``reservations``: hotel, car-rental and excursion reservations.
- ``fixture_bookings``: the tickets and reservations of the fixture passengers.
- ``build``: ``build_database`` and ``ensure_database``, which run the stages in order.
"""

from db.fixtures import (
    BUSINESS_BOUGHT_AGO,
    BUSINESS_DAYS_AHEAD,
    CHECKED_IN_DEPARTURE_IN,
    FLOWN_DAYS_AGO,
    MULTI_SEGMENT_DAYS_AHEAD,
)
from db.generate.build import (
    DEFAULT_LOAD,
    DEFAULT_SCALE,
    DEFAULT_SEED,
    MAX_SCALE,
    MIN_LOAD,
    SMALL_LOAD,
    BuildReport,
    build_database,
    ensure_database,
)
from db.generate.bulk_load import COLUMNS, Row
from db.generate.reference import (
    AircraftType,
    AirportRow,
    CarRentalRow,
    HotelRow,
    ReferenceData,
    TripRow,
    load_reference_data,
)
from db.generate.sales import MIN_CONNECTION
from db.generate.schedule import flight_duration, great_circle_km

__all__ = [
    "BUSINESS_BOUGHT_AGO",
    "BUSINESS_DAYS_AHEAD",
    "CHECKED_IN_DEPARTURE_IN",
    "COLUMNS",
    "DEFAULT_LOAD",
    "DEFAULT_SCALE",
    "DEFAULT_SEED",
    "FLOWN_DAYS_AGO",
    "MAX_SCALE",
    "MIN_CONNECTION",
    "MIN_LOAD",
    "MULTI_SEGMENT_DAYS_AHEAD",
    "SMALL_LOAD",
    "AircraftType",
    "AirportRow",
    "BuildReport",
    "CarRentalRow",
    "HotelRow",
    "ReferenceData",
    "Row",
    "TripRow",
    "build_database",
    "ensure_database",
    "flight_duration",
    "great_circle_km",
    "load_reference_data",
]
