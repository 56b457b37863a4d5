"""The fixture passengers and records that every generated database contains.

Tests and demos rely on these; the generator (``db.generate``) creates them first, so
their reservation ids are stable. All times are relative to the database's "now"; a day
count "after now's date" counts from the UTC date of "now".

Every fact the generator needs to create a fixture is stated here as a constant, so the
generator (``db.generate``) defines none of its own: the routes the fixture tickets fly
(flight numbers, airports, aircraft, departure times, and their returns) are here too, and
``db.generate.routes`` only turns them into routes of the schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import time, timedelta
from types import MappingProxyType


@dataclass(frozen=True)
class FixtureRoute:
    """A flight number a fixture flies; the schedule flies it every day at one local time.

    Attributes:
        flight_no: The flight number.
        origin: The departure airport code (``data/airports.csv``).
        destination: The arrival airport code.
        aircraft_code: The aircraft type (``data/aircraft.json``).
        local_departure: The departure time, local at ``origin``; ``None`` when
            ``departs_in`` sets it.
        departs_in: For a route whose time follows "now": today's (or tomorrow's) flight
            departs this long after now, rounded down to 5 minutes, and the flights of
            the other days leave at the same local time. ``None`` for a fixed time.
    """

    flight_no: str
    origin: str
    destination: str
    aircraft_code: str
    local_departure: time | None = None
    departs_in: timedelta | None = None

    def __post_init__(self) -> None:
        if (self.local_departure is None) == (self.departs_in is None):
            raise ValueError(
                f"Fixture route {self.flight_no} needs exactly one of local_departure "
                "and departs_in."
            )


# The passenger of the design card, with ticket 7240005432906569 on LX0112 CDG -> BSL,
# Economy, seat assigned and not checked in, departing FIXTURE_DEPARTURE_IN from now
# (rounded down to 5 minutes). LX0112 flies the same route at the same time every day of
# the schedule, so later LX0112 flights exist on each following day. It is an A320 ("320",
# a type with all three fare classes); its return LX0113 leaves BSL at 07:05 local time.
FIXTURE_PASSENGER_ID = "3442 587242"
FIXTURE_PASSENGER_NAME = "Elena Novak"
FIXTURE_TICKET_NO = "7240005432906569"
FIXTURE_FLIGHT_NO = "LX0112"
FIXTURE_ROUTE = ("CDG", "BSL")
FIXTURE_DEPARTURE_IN = timedelta(hours=4)
FIXTURE_FLIGHT_ROUTE = FixtureRoute(
    FIXTURE_FLIGHT_NO, *FIXTURE_ROUTE, "320", departs_in=FIXTURE_DEPARTURE_IN
)
FIXTURE_RETURN_ROUTE = FixtureRoute("LX0113", FIXTURE_ROUTE[1], FIXTURE_ROUTE[0], "320", time(7, 5))
# The fare class of the fixture ticket.
FIXTURE_FARE_CONDITIONS = "Economy"
# The fixture ticket's booking was bought this long before now.
FIXTURE_BOOKED_AGO = timedelta(days=21)
# The LX0112 flight this many days after the fixture flight has every Economy seat sold.
FULL_FLIGHT_DAY_OFFSET = 2
# The fixture passenger also holds one confirmed reservation of each kind in
# FIXTURE_LOCATION, all made FIXTURE_RESERVATIONS_MADE_AGO before now and created in this
# order so their ids are 1 in their tables.
FIXTURE_LOCATION = "Basel"
FIXTURE_RESERVATIONS_MADE_AGO = timedelta(days=6)
# A stay at the first hotel in FIXTURE_LOCATION other than FULL_HOTEL_NAME, checking in
# FIXTURE_HOTEL_CHECKIN_IN_DAYS after now's date for FIXTURE_HOTEL_NIGHTS nights.
FIXTURE_HOTEL_BOOKING_ID = 1
FIXTURE_HOTEL_CHECKIN_IN_DAYS = 1
FIXTURE_HOTEL_NIGHTS = 3
# A car of the first rental offer in FIXTURE_LOCATION, from FIXTURE_CAR_START_IN_DAYS to
# FIXTURE_CAR_END_IN_DAYS after now's date (both days included).
FIXTURE_CAR_RENTAL_BOOKING_ID = 1
FIXTURE_CAR_START_IN_DAYS = 1
FIXTURE_CAR_END_IN_DAYS = 3
# A place on the first excursion in FIXTURE_LOCATION, FIXTURE_EXCURSION_IN_DAYS after
# now's date.
FIXTURE_EXCURSION_BOOKING_ID = 1
FIXTURE_EXCURSION_IN_DAYS = 2

# A two-segment ticket MUC -> FRA -> JFK in MULTI_SEGMENT_FARE_CONDITIONS, flying
# MULTI_SEGMENT_DAYS_AHEAD days after now's date, bought MULTI_SEGMENT_BOOKED_AGO before
# now. With it, a stay of MULTI_SEGMENT_HOTEL_NIGHTS nights at the first hotel in
# MULTI_SEGMENT_HOTEL_LOCATION, from the local date of arrival at JFK, made at the same time.
# The legs are LH2012 (MUC 07:10, A321) and LH0400 (FRA 10:25, A350-900), which connect
# in at least db.generate.MIN_CONNECTION; their returns are LH2013 and LH0401.
MULTI_SEGMENT_PASSENGER_ID = "8149 604011"
MULTI_SEGMENT_PASSENGER_NAME = "Jonas Weber"
MULTI_SEGMENT_TICKET_NO = "7240005000000101"
MULTI_SEGMENT_FARE_CONDITIONS = "Economy"
MULTI_SEGMENT_DAYS_AHEAD = 5
MULTI_SEGMENT_BOOKED_AGO = timedelta(days=30)
MULTI_SEGMENT_HOTEL_LOCATION = "New York"
MULTI_SEGMENT_HOTEL_NIGHTS = 3
MULTI_SEGMENT_FIRST_ROUTE = FixtureRoute("LH2012", "MUC", "FRA", "321", time(7, 10))
MULTI_SEGMENT_FIRST_RETURN_ROUTE = FixtureRoute("LH2013", "FRA", "MUC", "321", time(18, 20))
MULTI_SEGMENT_SECOND_ROUTE = FixtureRoute("LH0400", "FRA", "JFK", "359", time(10, 25))
MULTI_SEGMENT_SECOND_RETURN_ROUTE = FixtureRoute("LH0401", "JFK", "FRA", "359", time(17, 45))

# A ticket ZRH -> LHR in BUSINESS_FARE_CONDITIONS, flying BUSINESS_DAYS_AHEAD days after
# now's date, bought BUSINESS_BOUGHT_AGO before now (inside the free-change window), on
# LX0318 (ZRH 08:40, A320); its return is LX0319.
BUSINESS_PASSENGER_ID = "5102 899977"
BUSINESS_PASSENGER_NAME = "Priya Raman"
BUSINESS_TICKET_NO = "7240005000000202"
BUSINESS_FARE_CONDITIONS = "Business"
BUSINESS_DAYS_AHEAD = 10
BUSINESS_BOUGHT_AGO = timedelta(hours=2)
BUSINESS_ROUTE = FixtureRoute("LX0318", "ZRH", "LHR", "320", time(8, 40))
BUSINESS_RETURN_ROUTE = FixtureRoute("LX0319", "LHR", "ZRH", "320", time(12, 5))

# Two tickets in FLOWN_FARE_CONDITIONS, in one booking bought FLOWN_BOOKED_AGO before now:
# one already flown (AMS -> BCN, FLOWN_DAYS_AGO days before now's date, Arrived, checked
# in FLOWN_CHECKED_IN_BEFORE_DEPARTURE before its departure) and one already checked in
# (BCN -> AMS, departing CHECKED_IN_DEPARTURE_IN from now rounded down to 5 minutes,
# checked in CHECKED_IN_AGO before now). They fly KL1675 (AMS 09:15, Boeing 737-800) and
# its return KL1676.
FLOWN_PASSENGER_ID = "1024 556320"
FLOWN_PASSENGER_NAME = "Lucas Martin"
FLOWN_TICKET_NO = "7240005000000303"
CHECKED_IN_TICKET_NO = "7240005000000304"
FLOWN_FARE_CONDITIONS = "Economy"
FLOWN_BOOKED_AGO = timedelta(days=25)
FLOWN_DAYS_AGO = 3
FLOWN_CHECKED_IN_BEFORE_DEPARTURE = timedelta(hours=20)
CHECKED_IN_DEPARTURE_IN = timedelta(hours=6)
CHECKED_IN_AGO = timedelta(hours=1)
FLOWN_ROUTE = FixtureRoute("KL1675", "AMS", "BCN", "738", time(9, 15))
CHECKED_IN_ROUTE = FixtureRoute("KL1676", "BCN", "AMS", "738", departs_in=CHECKED_IN_DEPARTURE_IN)

# A Basel hotel with FULL_HOTEL_ROOMS rooms, all taken by other passengers for the nights
# from FULL_HOTEL_CHECKIN_IN_DAYS to FULL_HOTEL_CHECKIN_IN_DAYS + FULL_HOTEL_NIGHTS days
# after now's date.
FULL_HOTEL_NAME = "Hotel Rheinblick Basel"
FULL_HOTEL_ROOMS = 2
FULL_HOTEL_CHECKIN_IN_DAYS = 10
FULL_HOTEL_NIGHTS = 2

# Every fixture route, each followed by its return: the schedule flies all of them daily
# and never cancels or delays one of them at random.
FIXTURE_ROUTES: tuple[FixtureRoute, ...] = (
    FIXTURE_FLIGHT_ROUTE,
    FIXTURE_RETURN_ROUTE,
    MULTI_SEGMENT_FIRST_ROUTE,
    MULTI_SEGMENT_FIRST_RETURN_ROUTE,
    MULTI_SEGMENT_SECOND_ROUTE,
    MULTI_SEGMENT_SECOND_RETURN_ROUTE,
    BUSINESS_ROUTE,
    BUSINESS_RETURN_ROUTE,
    FLOWN_ROUTE,
    CHECKED_IN_ROUTE,
)

FIXTURE_PASSENGER_IDS = (
    FIXTURE_PASSENGER_ID,
    MULTI_SEGMENT_PASSENGER_ID,
    BUSINESS_PASSENGER_ID,
    FLOWN_PASSENGER_ID,
)
# The name of each fixture passenger, by passenger id.
FIXTURE_PASSENGER_NAMES: Mapping[str, str] = MappingProxyType(
    {
        FIXTURE_PASSENGER_ID: FIXTURE_PASSENGER_NAME,
        MULTI_SEGMENT_PASSENGER_ID: MULTI_SEGMENT_PASSENGER_NAME,
        BUSINESS_PASSENGER_ID: BUSINESS_PASSENGER_NAME,
        FLOWN_PASSENGER_ID: FLOWN_PASSENGER_NAME,
    }
)
