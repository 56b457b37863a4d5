"""Query-level tests of db.passengers: what the assistant knows about the customer."""

from __future__ import annotations

import json

import pytest

from db.engine import Database
from db.errors import NotFoundError
from db.fixtures import (
    CHECKED_IN_TICKET_NO,
    FIXTURE_CAR_RENTAL_BOOKING_ID,
    FIXTURE_EXCURSION_BOOKING_ID,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_PASSENGER_ID,
    FIXTURE_PASSENGER_NAME,
    FIXTURE_TICKET_NO,
    FLOWN_PASSENGER_ID,
    FLOWN_TICKET_NO,
    MULTI_SEGMENT_PASSENGER_ID,
    MULTI_SEGMENT_TICKET_NO,
)
from db.passengers import passenger_exists, passenger_summary
from tests.support.databases import FIXED_NOW


def test_passenger_summary_lists_the_fixture_ticket(travel_db: Database) -> None:
    with travel_db.session() as session:
        summary = passenger_summary(session, FIXTURE_PASSENGER_ID, FIXED_NOW)
    assert summary["passenger_id"] == FIXTURE_PASSENGER_ID
    assert summary["name"] == FIXTURE_PASSENGER_NAME
    ticket = next(t for t in summary["tickets"] if t["ticket_no"] == FIXTURE_TICKET_NO)
    (segment,) = ticket["segments"]
    assert segment["flight_no"] == "LX0112"
    assert (segment["departure_airport"], segment["arrival_airport"]) == ("CDG", "BSL")
    assert segment["departure"].endswith("CEST (+02:00)")
    assert segment["fare_conditions"] == "Economy"
    assert segment["seat_no"]
    assert segment["checked_in"] is False
    assert segment["segment_status"] == "upcoming"
    assert segment["amount_paid"].startswith("EUR ")


def test_passenger_summary_lists_reservations(travel_db: Database) -> None:
    with travel_db.session() as session:
        summary = passenger_summary(session, FIXTURE_PASSENGER_ID, FIXED_NOW)
    (hotel,) = summary["hotel_reservations"]
    (car,) = summary["car_rental_reservations"]
    (excursion,) = summary["excursion_reservations"]
    assert hotel["booking_id"] == FIXTURE_HOTEL_BOOKING_ID
    assert hotel["location"] == "Basel"
    assert hotel["nights"] == 3
    assert car["booking_id"] == FIXTURE_CAR_RENTAL_BOOKING_ID
    assert excursion["booking_id"] == FIXTURE_EXCURSION_BOOKING_ID
    assert {hotel["status"], car["status"], excursion["status"]} == {"confirmed"}


def test_passenger_summary_marks_flown_and_checked_in_segments(travel_db: Database) -> None:
    with travel_db.session() as session:
        summary = passenger_summary(session, FLOWN_PASSENGER_ID, FIXED_NOW)
    tickets = {t["ticket_no"]: t for t in summary["tickets"]}
    assert tickets[FLOWN_TICKET_NO]["segments"][0]["segment_status"] == "flown"
    assert tickets[CHECKED_IN_TICKET_NO]["segments"][0]["checked_in"] is True


def test_passenger_summary_orders_segments_of_a_connection(travel_db: Database) -> None:
    with travel_db.session() as session:
        summary = passenger_summary(session, MULTI_SEGMENT_PASSENGER_ID, FIXED_NOW)
    ticket = next(t for t in summary["tickets"] if t["ticket_no"] == MULTI_SEGMENT_TICKET_NO)
    routes = [(s["departure_airport"], s["arrival_airport"]) for s in ticket["segments"]]
    assert routes == [("MUC", "FRA"), ("FRA", "JFK")]
    assert summary["hotel_reservations"][0]["location"] == "New York"


def test_passenger_summary_is_json_ready(travel_db: Database) -> None:
    with travel_db.session() as session:
        summary = passenger_summary(session, FIXTURE_PASSENGER_ID, FIXED_NOW)
    assert json.loads(json.dumps(summary)) == summary


def test_passenger_summary_rejects_unknown_passenger(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(NotFoundError, match="0000 000000"):
        passenger_summary(session, "0000 000000", FIXED_NOW)


def test_passenger_exists(travel_db: Database) -> None:
    with travel_db.session() as session:
        assert passenger_exists(session, FIXTURE_PASSENGER_ID)
        assert not passenger_exists(session, "0000 000000")
