"""The fixtures: the tickets and reservations of the passengers of ``db.fixtures``.

They are created before any random sale or reservation, exactly as ``db.fixtures``
describes them, so their ids are stable. Every fact comes from ``db.fixtures``; a flight
a fixture needs that the schedule lacks (or has with the wrong status) fails the build.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta

from db import fixtures as fx
from db.generate.reference import ReferenceData, _first_at, _fixture_hotel
from db.generate.reservations import _Reservations
from db.generate.sales import MIN_CONNECTION, _People, _Sales
from db.generate.schedule import _Flight, _floor_to_5_minutes


def _find_flight(
    by_key: Mapping[tuple[str, date], _Flight], route: fx.FixtureRoute, day: date
) -> _Flight:
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


def _local_date(ref: ReferenceData, route: fx.FixtureRoute, moment: datetime) -> date:
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

    fixture_route = fx.FIXTURE_FLIGHT_ROUTE
    fixture_day = _local_date(
        ref, fixture_route, _floor_to_5_minutes(now + fx.FIXTURE_DEPARTURE_IN)
    )
    fixture_flight = _expect_status(_find_flight(by_key, fixture_route, fixture_day), bookable)
    sales.sell_fixture(
        fx.FIXTURE_PASSENGER_ID,
        [(fx.FIXTURE_TICKET_NO, [fixture_flight], fx.FIXTURE_FARE_CONDITIONS, None)],
        now - fx.FIXTURE_BOOKED_AGO,
    )

    day = today + timedelta(days=fx.MULTI_SEGMENT_DAYS_AHEAD)
    legs = [
        _find_flight(by_key, fx.MULTI_SEGMENT_FIRST_ROUTE, day),
        _find_flight(by_key, fx.MULTI_SEGMENT_SECOND_ROUTE, day),
    ]
    if legs[1].departure - legs[0].arrival < MIN_CONNECTION:
        airports = "-".join(
            (legs[0].route.origin, legs[0].route.destination, legs[1].route.destination)
        )
        raise RuntimeError(f"The fixture connection {airports} is too short.")
    sales.sell_fixture(
        fx.MULTI_SEGMENT_PASSENGER_ID,
        [(fx.MULTI_SEGMENT_TICKET_NO, legs, fx.MULTI_SEGMENT_FARE_CONDITIONS, None)],
        now - fx.MULTI_SEGMENT_BOOKED_AGO,
    )

    business_day = today + timedelta(days=fx.BUSINESS_DAYS_AHEAD)
    business = _find_flight(by_key, fx.BUSINESS_ROUTE, business_day)
    sales.sell_fixture(
        fx.BUSINESS_PASSENGER_ID,
        [(fx.BUSINESS_TICKET_NO, [business], fx.BUSINESS_FARE_CONDITIONS, None)],
        now - fx.BUSINESS_BOUGHT_AGO,
    )

    flown = _find_flight(by_key, fx.FLOWN_ROUTE, today - timedelta(days=fx.FLOWN_DAYS_AGO))
    _expect_status(flown, ("Arrived",))
    return_route = fx.CHECKED_IN_ROUTE
    return_day = _local_date(
        ref, return_route, _floor_to_5_minutes(now + fx.CHECKED_IN_DEPARTURE_IN)
    )
    checked_in = _expect_status(_find_flight(by_key, return_route, return_day), ("On Time",))
    flown_checked_in = flown.departure - fx.FLOWN_CHECKED_IN_BEFORE_DEPARTURE
    sales.sell_fixture(
        fx.FLOWN_PASSENGER_ID,
        [
            (fx.FLOWN_TICKET_NO, [flown], fx.FLOWN_FARE_CONDITIONS, flown_checked_in),
            (
                fx.CHECKED_IN_TICKET_NO,
                [checked_in],
                fx.FLOWN_FARE_CONDITIONS,
                now - fx.CHECKED_IN_AGO,
            ),
        ],
        now - fx.FLOWN_BOOKED_AGO,
    )
    full_day = fixture_day + timedelta(days=fx.FULL_FLIGHT_DAY_OFFSET)
    return _expect_status(_find_flight(by_key, fixture_route, full_day), bookable)


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
    made = now - fx.FIXTURE_RESERVATIONS_MADE_AGO
    ids = (
        reservations.hotel(
            fx.FIXTURE_PASSENGER_ID, _fixture_hotel(ref),
            today + timedelta(days=fx.FIXTURE_HOTEL_CHECKIN_IN_DAYS), fx.FIXTURE_HOTEL_NIGHTS,
            made,
        ),
        reservations.car(
            fx.FIXTURE_PASSENGER_ID, _first_at(ref.car_rentals, fx.FIXTURE_LOCATION, ""),
            today + timedelta(days=fx.FIXTURE_CAR_START_IN_DAYS),
            today + timedelta(days=fx.FIXTURE_CAR_END_IN_DAYS), made,
        ),
        reservations.excursion(
            fx.FIXTURE_PASSENGER_ID, _first_at(ref.trips, fx.FIXTURE_LOCATION, ""),
            today + timedelta(days=fx.FIXTURE_EXCURSION_IN_DAYS), made,
        ),
    )  # fmt: skip
    expected = (
        fx.FIXTURE_HOTEL_BOOKING_ID,
        fx.FIXTURE_CAR_RENTAL_BOOKING_ID,
        fx.FIXTURE_EXCURSION_BOOKING_ID,
    )
    if ids != expected:
        raise RuntimeError(f"Fixture reservations got ids {ids}, expected {expected}.")

    flight_day = today + timedelta(days=fx.MULTI_SEGMENT_DAYS_AHEAD)
    second_leg = fx.MULTI_SEGMENT_SECOND_ROUTE
    by_key = {(f.route.flight_no, f.local_date): f for f in flights}
    arrival = _find_flight(by_key, second_leg, flight_day)
    new_york = _first_at(ref.hotels, fx.MULTI_SEGMENT_HOTEL_LOCATION, "")
    checkin = arrival.arrival.astimezone(ref.airports[second_leg.destination].zone).date()
    reservations.hotel(
        fx.MULTI_SEGMENT_PASSENGER_ID,
        new_york,
        checkin,
        fx.MULTI_SEGMENT_HOTEL_NIGHTS,
        now - fx.MULTI_SEGMENT_BOOKED_AGO,
    )

    full = next(hotel for hotel in ref.hotels if hotel.name == fx.FULL_HOTEL_NAME)
    checkin = today + timedelta(days=fx.FULL_HOTEL_CHECKIN_IN_DAYS)
    for guest in rng.sample(list(owners), fx.FULL_HOTEL_ROOMS):
        made = now - timedelta(days=rng.randint(3, 20))
        if reservations.hotel(guest, full, checkin, fx.FULL_HOTEL_NIGHTS, made) is None:
            raise RuntimeError(f"{fx.FULL_HOTEL_NAME} has fewer rooms than FULL_HOTEL_ROOMS.")
