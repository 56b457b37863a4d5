"""The fixture passengers and records that every generated database contains.

Tests and demos rely on these; the generator (``db.generate``) creates them first, so
their reservation ids are stable. All times are relative to the database's "now".
"""

from __future__ import annotations

from datetime import timedelta

# The passenger of the design card, with ticket 7240005432906569 on LX0112 CDG -> BSL,
# Economy, seat assigned and not checked in, departing FIXTURE_DEPARTURE_IN from now
# (rounded down to 5 minutes). LX0112 flies the same route at the same time every day of
# the schedule, so later LX0112 flights exist on each following day.
FIXTURE_PASSENGER_ID = "3442 587242"
FIXTURE_PASSENGER_NAME = "Elena Novak"
FIXTURE_TICKET_NO = "7240005432906569"
FIXTURE_FLIGHT_NO = "LX0112"
FIXTURE_ROUTE = ("CDG", "BSL")
FIXTURE_DEPARTURE_IN = timedelta(hours=4)
# The LX0112 flight this many days after the fixture flight has every Economy seat sold.
FULL_FLIGHT_DAY_OFFSET = 2
# The fixture passenger also holds one confirmed reservation of each kind in Basel,
# created in this order so their ids are 1 in their tables.
FIXTURE_HOTEL_BOOKING_ID = 1  # Basel, check-in 1 day from now's date, 3 nights
FIXTURE_CAR_RENTAL_BOOKING_ID = 1  # Basel, from 1 to 3 days from now's date
FIXTURE_EXCURSION_BOOKING_ID = 1  # Basel, 2 days from now's date

# A two-segment ticket MUC -> FRA -> JFK in Economy, 5 days from now, plus a hotel
# reservation in New York.
MULTI_SEGMENT_PASSENGER_ID = "8149 604011"
MULTI_SEGMENT_TICKET_NO = "7240005000000101"

# A Business-class ticket ZRH -> LHR 10 days from now, bought 2 hours ago (inside the
# free-change window).
BUSINESS_PASSENGER_ID = "5102 899977"
BUSINESS_TICKET_NO = "7240005000000202"

# A ticket already flown (AMS -> BCN, 3 days ago, Arrived) and a ticket already checked in
# (BCN -> AMS, departing 6 hours from now).
FLOWN_PASSENGER_ID = "1024 556320"
FLOWN_TICKET_NO = "7240005000000303"
CHECKED_IN_TICKET_NO = "7240005000000304"

# A Basel hotel with FULL_HOTEL_ROOMS rooms, all taken by other passengers for the nights
# from FULL_HOTEL_CHECKIN_IN_DAYS to FULL_HOTEL_CHECKIN_IN_DAYS + FULL_HOTEL_NIGHTS days
# after now's date.
FULL_HOTEL_NAME = "Hotel Rheinblick Basel"
FULL_HOTEL_ROOMS = 2
FULL_HOTEL_CHECKIN_IN_DAYS = 10
FULL_HOTEL_NIGHTS = 2

FIXTURE_PASSENGER_IDS = (
    FIXTURE_PASSENGER_ID,
    MULTI_SEGMENT_PASSENGER_ID,
    BUSINESS_PASSENGER_ID,
    FLOWN_PASSENGER_ID,
)
