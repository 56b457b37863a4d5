"""The three reservation domains (hotels, car rentals, excursions) side by side, for tests.

The tests of a behaviour every domain has (``tests/unit/test_db_reservations.py``,
``tests/unit/test_tools_reservations.py``) run once per domain, ``DOMAINS``. A ``Domain``
holds what differs between them, written out here rather than read from the production
declarations (``db.hotels.HOTEL`` ...), so that a wrong name, column or message there
fails a test instead of moving the expectation along with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from sqlalchemy import select, update

from db.car_rentals import CAR_RENTAL
from db.engine import Database
from db.excursions import EXCURSION
from db.fixtures import (
    FIXTURE_CAR_RENTAL_BOOKING_ID,
    FIXTURE_CAR_START_IN_DAYS,
    FIXTURE_EXCURSION_BOOKING_ID,
    FIXTURE_EXCURSION_IN_DAYS,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_HOTEL_CHECKIN_IN_DAYS,
)
from db.hotels import HOTEL
from db.models import (
    CarRental,
    CarRentalBooking,
    ExcursionBooking,
    Hotel,
    HotelBooking,
    TripRecommendation,
)
from db.reservation_kind import ReservationKind
from tests.support.databases import FIXED_NOW
from tools.car_rentals import make_car_rental_tools
from tools.common import DomainTools
from tools.excursions import make_excursion_tools
from tools.hotels import make_hotel_tools

NOW = FIXED_NOW
# A reservation's dates, "YYYY-MM-DD", in the order of its date fields.
Dates = tuple[str, ...]


def day(offset: int) -> str:
    """Return the date ``offset`` days from the tests' today, ``YYYY-MM-DD``."""
    return (NOW.date() + timedelta(days=offset)).isoformat()


def after_change(before: Dates, change: tuple[str | None, ...]) -> Dates:
    """Return the dates after a change of ``before``: a date given as ``None`` is kept."""
    return tuple(old if new is None else new for new, old in zip(change, before, strict=True))


@dataclass(frozen=True)
class Domain:
    """What tells one reservation domain from another in the tests.

    Attributes:
        kind: The production declaration the ``db.reservations`` functions take.
        make_tools: Builds the domain's tools over a database.
        name: The write tools are ``book_<name>``, ``update_<name>``, ``cancel_<name>``.
        search: The search tool.
        results: The key of the search results.
        id_arg: The catalogue id: its key in results and ``book_<name>``'s argument.
        fields: The date fields, in order (the keys of ``before``/``after`` too).
        catalogue: The catalogue table; ``rate`` is its price of one unit (a night, a
            day, a person), ``capacity`` its units per day (rooms, cars, places).
        bookings: The reservation table.
        rate: See ``catalogue``.
        capacity: See ``catalogue``.
        left: The key of the units left in a search priced for dates (none for
            excursions: their search takes no dates).
        label: How messages name a reservation (``"Hotel reservation 4"``).
        missing: How the message about an unknown catalogue id starts, before the id.
        payment_prefix: Payment references are ``<prefix>-<booking id>``.
        fixture_booking: ``FIXTURE_PASSENGER_ID``'s reservation, starting
            ``fixture_start`` days from today: already in its late window.
        fixture_start: See ``fixture_booking``.
        late_fee: What a late change or cancellation of a reservation keeps.
        shortest: The dates of the shortest reservation starting ``n`` days from today.
    """

    kind: ReservationKind[Any, Any]
    make_tools: Callable[[Database], DomainTools]
    name: str
    search: str
    results: str
    id_arg: str
    fields: tuple[str, ...]
    catalogue: type[Any]
    bookings: type[Any]
    rate: str
    capacity: str
    left: str
    label: str
    missing: str
    payment_prefix: str
    fixture_booking: int
    fixture_start: int
    late_fee: Callable[[Any], int]
    shortest: Callable[[int], Dates]

    def tools(self, db: Database) -> list[BaseTool]:
        """Return the domain's search and write tools over ``db``."""
        built = self.make_tools(db)
        return [*built.safe, *built.sensitive]

    def dated(self, dates: Dates) -> dict[str, str]:
        """Return ``dates`` keyed by the date fields, as a write's ``before``/``after``."""
        return dict(zip(self.fields, dates, strict=True))

    def offer(self, db: Database) -> Any:
        """Return the Basel catalogue entry with the most units per day."""
        table = self.catalogue
        with db.session() as session:
            return session.scalars(
                select(table)
                .where(table.location == "Basel")
                .order_by(getattr(table, self.capacity).desc(), table.id)
                .limit(1)
            ).one()

    def vacant(self, db: Database, units: int | None = None) -> Any:
        """Return ``offer`` with none of its units taken (the generated reservations on it
        are cancelled) and, if given, left with ``units`` units per day."""
        item = self.offer(db)
        with db.transaction() as session:
            session.execute(
                update(self.bookings)
                .where(getattr(self.bookings, self.id_arg) == item.id)
                .values(status="cancelled")
            )
            if units is not None:
                session.execute(
                    update(self.catalogue)
                    .where(self.catalogue.id == item.id)
                    .values({self.capacity: units})
                )
        return item


HOTELS = Domain(
    kind=HOTEL,
    make_tools=make_hotel_tools,
    name="hotel",
    search="search_hotels",
    results="hotels",
    id_arg="hotel_id",
    fields=("checkin_date", "checkout_date"),
    catalogue=Hotel,
    bookings=HotelBooking,
    rate="nightly_rate_cents",
    capacity="rooms",
    left="rooms_left",
    label="Hotel reservation",
    missing="No hotel with id",
    payment_prefix="hotel",
    fixture_booking=FIXTURE_HOTEL_BOOKING_ID,
    fixture_start=FIXTURE_HOTEL_CHECKIN_IN_DAYS,
    # The first night: the price paid over the nights.
    late_fee=lambda b: b.total_cents // (b.checkout_date - b.checkin_date).days,
    # One night: the check-out day is not a night.
    shortest=lambda n: (day(n), day(n + 1)),
)
CARS = Domain(
    kind=CAR_RENTAL,
    make_tools=make_car_rental_tools,
    name="car_rental",
    search="search_car_rentals",
    results="car_rentals",
    id_arg="rental_id",
    fields=("start_date", "end_date"),
    catalogue=CarRental,
    bookings=CarRentalBooking,
    rate="daily_rate_cents",
    capacity="fleet_size",
    left="cars_left",
    label="Car rental reservation",
    missing="No car-rental offer with id",
    payment_prefix="car",
    fixture_booking=FIXTURE_CAR_RENTAL_BOOKING_ID,
    fixture_start=FIXTURE_CAR_START_IN_DAYS,
    # One day: the price paid over the days, both the first and the last counted.
    late_fee=lambda b: b.total_cents // ((b.end_date - b.start_date).days + 1),
    # One day: returned the day it is picked up.
    shortest=lambda n: (day(n), day(n)),
)
EXCURSIONS = Domain(
    kind=EXCURSION,
    make_tools=make_excursion_tools,
    name="excursion",
    search="search_trip_recommendations",
    results="trip_recommendations",
    id_arg="recommendation_id",
    fields=("date",),
    catalogue=TripRecommendation,
    bookings=ExcursionBooking,
    rate="price_cents",
    capacity="capacity_per_day",
    left="",
    label="Excursion reservation",
    missing="No excursion with id",
    payment_prefix="excursion",
    fixture_booking=FIXTURE_EXCURSION_BOOKING_ID,
    fixture_start=FIXTURE_EXCURSION_IN_DAYS,
    # Everything: a late excursion is not refunded.
    late_fee=lambda b: b.total_cents,
    shortest=lambda n: (day(n),),
)

DOMAINS = [
    pytest.param(HOTELS, id="hotel"),
    pytest.param(CARS, id="car"),
    pytest.param(EXCURSIONS, id="excursion"),
]
# The domains reserved for a period (two dates, priced per unit, searched with dates).
PERIODS = [pytest.param(HOTELS, id="hotel"), pytest.param(CARS, id="car")]
