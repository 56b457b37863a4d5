"""Edges of the commercial rules that a looser or shifted implementation would still pass.

Each test guards one rule at the place where a plausible slip would go unnoticed: a
route check that looks at one airport only, a date change that skips the capacity check,
a free window one hour (or one day) too wide or too narrow, a passenger summary
that forgets the partner reservations, and the limits of a partner reservation's dates
(365 days ahead, the day it starts, a car's return day, a hotel's check-out day, the
shortest stay or rental), each with a test on both sides.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from db import reservations, tickets
from db.car_rentals import CAR_RENTAL
from db.engine import Database
from db.errors import InvalidInputError, RuleViolationError, UnavailableError
from db.excursions import EXCURSION
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    FIXTURE_CAR_RENTAL_BOOKING_ID,
    FIXTURE_EXCURSION_BOOKING_ID,
    FIXTURE_FLIGHT_NO,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_PASSENGER_ID,
    FIXTURE_PASSENGER_IDS,
    FIXTURE_ROUTE,
    FIXTURE_TICKET_NO,
)
from db.hotels import HOTEL
from db.models import (
    Booking,
    CarRental,
    CarRentalBooking,
    ExcursionBooking,
    Flight,
    Hotel,
    Passenger,
    Ticket,
    TicketFlight,
    TripRecommendation,
)
from db.passengers import passenger_summary
from db.rules import FARE_RULES, FREE_WINDOW_HOURS_AFTER_BOOKING, MAX_DAYS_AHEAD
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, say
from tests.support.tools import add_flight, dump

NOW = FIXED_NOW
TODAY = NOW.date()
ONE_MINUTE = timedelta(minutes=1)


def day(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


class Watcher:
    """Snapshots that change whenever anything is committed (``tests.support.tools.dump``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def snapshot(self) -> dict[str, Any]:
        return dump(self.db)


@pytest.fixture
def watcher(travel_db: Database) -> Watcher:
    return Watcher(travel_db)


def other_passengers(db: Database, count: int) -> list[str]:
    """Return ``count`` passengers who are none of the fixture passengers."""
    with db.session() as session:
        ids = list(
            session.scalars(
                select(Passenger.passenger_id)
                .where(Passenger.passenger_id.not_in(FIXTURE_PASSENGER_IDS))
                .order_by(Passenger.passenger_id)
                .limit(count)
            )
        )
    assert len(ids) == count, "the generated database has enough passengers"
    return ids


# --- 1. A ticket moves only to a flight on the same departure AND arrival airports -------


def ticket_flight_ids(db: Database, ticket_no: str) -> list[int]:
    with db.session() as session:
        return list(
            session.scalars(
                select(TicketFlight.flight_id).where(TicketFlight.ticket_no == ticket_no)
            )
        )


@pytest.mark.parametrize(
    ("departure", "arrival"),
    [
        pytest.param(FIXTURE_ROUTE[0], "ZRH", id="same-departure-other-arrival"),
        pytest.param("ZRH", FIXTURE_ROUTE[1], id="other-departure-same-arrival"),
    ],
)
def test_ticket_change_refuses_a_flight_sharing_only_one_airport(
    travel_db: Database, watcher: Watcher, departure: str, arrival: str
) -> None:
    target = add_flight(
        travel_db,
        departure_airport=departure,
        arrival_airport=arrival,
        departs_in=timedelta(days=1),
    )
    before_flights = ticket_flight_ids(travel_db, FIXTURE_TICKET_NO)
    before = watcher.snapshot()
    with travel_db.session() as session, pytest.raises(RuleViolationError) as quoted:
        tickets.quote_ticket_change(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target, NOW)
    assert "same departure and arrival airports" in str(quoted.value)
    assert f"{departure} -> {arrival}" in str(quoted.value)
    with (
        pytest.raises(RuleViolationError, match="same departure and arrival airports"),
        travel_db.transaction() as session,
    ):
        tickets.update_ticket_to_new_flight(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target, NOW
        )
    assert watcher.snapshot() == before
    assert ticket_flight_ids(travel_db, FIXTURE_TICKET_NO) == before_flights


# --- 2. Moving a reservation onto sold-out days is refused and writes nothing -------------


def smallest_fleet_offer(db: Database) -> CarRental:
    with db.session() as session:
        return session.scalars(
            select(CarRental).order_by(CarRental.fleet_size, CarRental.id).limit(1)
        ).one()


def cars_left(db: Database, offer: CarRental, start: str, end: str) -> int:
    with db.session() as session:
        result = reservations.search(
            session, CAR_RENTAL, NOW, name=offer.name, start_date=start, end_date=end, limit=50
        )
    view = next(v for v in result["car_rentals"] if v["rental_id"] == offer.id)
    left: int = view["cars_left"]
    return left


def sell_out_cars(db: Database, offer: CarRental, start: str, end: str) -> None:
    """Book other passengers' rentals until no car of ``offer`` is left from start to end."""
    left = cars_left(db, offer, start, end)
    assert 0 < left <= offer.fleet_size
    for passenger_id in other_passengers(db, left):
        with db.transaction() as session:
            reservations.book(session, CAR_RENTAL, passenger_id, offer.id, (start, end), NOW)
    assert cars_left(db, offer, start, end) == 0


def car_booking_row(db: Database, booking_id: int) -> tuple[date, date, int, str]:
    with db.session() as session:
        booking = session.get(CarRentalBooking, booking_id)
        assert booking is not None
        return booking.start_date, booking.end_date, booking.total_cents, booking.status


@pytest.mark.parametrize(
    ("new_start", "new_end"),
    [
        pytest.param(day(44), day(45), id="whole-rental-onto-sold-out-days"),
        pytest.param(None, day(44), id="extended-into-a-sold-out-day"),
    ],
)
def test_update_car_rental_refuses_sold_out_days_and_changes_nothing(
    travel_db: Database, watcher: Watcher, new_start: str | None, new_end: str
) -> None:
    offer = smallest_fleet_offer(travel_db)
    with travel_db.transaction() as session:
        booked = reservations.book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(42), day(43)), NOW
        )
    booking_id: int = booked["booking_id"]
    sell_out_cars(travel_db, offer, day(44), day(45))
    row = car_booking_row(travel_db, booking_id)
    before = watcher.snapshot()
    with (
        pytest.raises(UnavailableError, match=f"no car left on {day(44)}"),
        travel_db.transaction() as session,
    ):
        reservations.update(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, booking_id, (new_start, new_end), NOW
        )
    assert watcher.snapshot() == before
    assert car_booking_row(travel_db, booking_id) == row


def smallest_excursion(db: Database) -> TripRecommendation:
    with db.session() as session:
        return session.scalars(
            select(TripRecommendation)
            .order_by(TripRecommendation.capacity_per_day, TripRecommendation.id)
            .limit(1)
        ).one()


def sell_out_excursion(db: Database, excursion: TripRecommendation, when: str) -> None:
    """Book other passengers' places until ``excursion`` is full on ``when``."""
    with db.session() as session:
        left = reservations.available(session, EXCURSION, excursion, (date.fromisoformat(when),))
    assert 0 < left <= excursion.capacity_per_day
    for passenger_id in other_passengers(db, left):
        with db.transaction() as session:
            reservations.book(session, EXCURSION, passenger_id, excursion.id, (when,), NOW)
    with db.session() as session:
        assert (
            reservations.available(session, EXCURSION, excursion, (date.fromisoformat(when),)) == 0
        )


def test_update_excursion_refuses_a_full_day_and_changes_nothing(
    travel_db: Database, watcher: Watcher
) -> None:
    excursion = smallest_excursion(travel_db)
    with travel_db.transaction() as session:
        booked = reservations.book(
            session, EXCURSION, BUSINESS_PASSENGER_ID, excursion.id, (day(40),), NOW
        )
    booking_id: int = booked["booking_id"]
    sell_out_excursion(travel_db, excursion, day(44))
    before = watcher.snapshot()
    with (
        pytest.raises(UnavailableError, match=f"no place left on {day(44)}"),
        travel_db.transaction() as session,
    ):
        reservations.update(session, EXCURSION, BUSINESS_PASSENGER_ID, booking_id, (day(44),), NOW)
    assert watcher.snapshot() == before
    with travel_db.session() as session:
        booking = session.get(ExcursionBooking, booking_id)
        assert booking is not None
        assert (booking.date.isoformat(), booking.status) == (day(40), "confirmed")


# --- 3. No fee within FREE_WINDOW_HOURS_AFTER_BOOKING of buying, the full fee after -------


def bought_ago(db: Database, ticket_no: str, age: timedelta) -> None:
    with db.transaction() as session:
        ticket = session.get(Ticket, ticket_no)
        assert ticket is not None
        session.execute(
            update(Booking).where(Booking.book_ref == ticket.book_ref).values(book_date=NOW - age)
        )


def next_day_fixture_flight(db: Database) -> int:
    """The LX0112 one day after the fixture passenger's flight (same route, bookable)."""
    with db.session() as session:
        current = session.scalars(
            select(Flight)
            .join(TicketFlight, TicketFlight.flight_id == Flight.flight_id)
            .where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
        ).one()
        return session.scalars(
            select(Flight.flight_id).where(
                Flight.flight_no == FIXTURE_FLIGHT_NO,
                Flight.scheduled_departure == current.scheduled_departure + timedelta(days=1),
            )
        ).one()


def change_fee(db: Database) -> tuple[int, int, str]:
    """Quote moving the fixture ticket: (fee, fee outside the window, note)."""
    target = next_day_fixture_flight(db)
    with db.session() as session:
        quote = tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target, NOW
        )
    return quote.change_fee_cents, FARE_RULES["Economy"].change_fee_cents, quote.fee_note


def cancel_fee(db: Database) -> tuple[int, int, str]:
    """Quote cancelling the fixture ticket: (fee, fee outside the window, note)."""
    with db.session() as session:
        quote = tickets.quote_ticket_cancellation(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, NOW
        )
    return (
        quote.cancel_fee_cents,
        min(FARE_RULES["Economy"].cancel_fee_cents, quote.paid_cents),
        quote.fee_note,
    )


FEE_QUOTES = [
    pytest.param(change_fee, id="ticket-change"),
    pytest.param(cancel_fee, id="ticket-cancellation"),
]


@pytest.mark.parametrize("quote_fee", FEE_QUOTES)
def test_free_window_after_booking_waives_the_fee_until_its_last_minute(
    travel_db: Database, quote_fee: Any
) -> None:
    bought_ago(
        travel_db,
        FIXTURE_TICKET_NO,
        timedelta(hours=FREE_WINDOW_HOURS_AFTER_BOOKING) - ONE_MINUTE,
    )
    fee, full_fee, note = quote_fee(travel_db)
    assert full_fee > 0, "the Economy fixture ticket pays a fee outside the window"
    assert fee == 0
    assert f"within {FREE_WINDOW_HOURS_AFTER_BOOKING} hours" in note


@pytest.mark.parametrize("quote_fee", FEE_QUOTES)
def test_free_window_after_booking_charges_the_fee_a_minute_after_it_ends(
    travel_db: Database, quote_fee: Any
) -> None:
    bought_ago(
        travel_db,
        FIXTURE_TICKET_NO,
        timedelta(hours=FREE_WINDOW_HOURS_AFTER_BOOKING) + ONE_MINUTE,
    )
    fee, full_fee, note = quote_fee(travel_db)
    assert full_fee > 0
    assert fee == full_fee
    assert "free" not in note


# --- 4. The passenger summary (user_info) lists every reservation kind -------------------


def reservation_ids(summary: dict[str, Any]) -> dict[str, set[int]]:
    return {
        key: {r["booking_id"] for r in summary.get(key, [])}
        for key in ("hotel_reservations", "car_rental_reservations", "excursion_reservations")
    }


FIXTURE_RESERVATIONS = {
    "hotel_reservations": {FIXTURE_HOTEL_BOOKING_ID},
    "car_rental_reservations": {FIXTURE_CAR_RENTAL_BOOKING_ID},
    "excursion_reservations": {FIXTURE_EXCURSION_BOOKING_ID},
}


def book_basel_hotel(db: Database) -> int:
    """Book the fixture passenger a second Basel stay; return the reservation id."""
    with db.session() as session:
        hotel_id = session.scalars(
            select(Hotel.id).where(Hotel.location == "Basel").order_by(Hotel.id).limit(1)
        ).one()
    with db.transaction() as session:
        result = reservations.book(
            session, HOTEL, FIXTURE_PASSENGER_ID, hotel_id, (day(20), day(22)), NOW
        )
    booking_id: int = result["booking_id"]
    assert booking_id != FIXTURE_HOTEL_BOOKING_ID
    return booking_id


def test_passenger_summary_includes_hotel_car_and_excursion_reservations(
    travel_db: Database,
) -> None:
    with travel_db.session() as session:
        summary = passenger_summary(session, FIXTURE_PASSENGER_ID, NOW)
    assert reservation_ids(summary) == FIXTURE_RESERVATIONS
    new_hotel = book_basel_hotel(travel_db)
    with travel_db.session() as session:
        summary = passenger_summary(session, FIXTURE_PASSENGER_ID, NOW)
    assert reservation_ids(summary) == {
        **FIXTURE_RESERVATIONS,
        "hotel_reservations": {FIXTURE_HOTEL_BOOKING_ID, new_hotel},
    }
    stay = next(r for r in summary["hotel_reservations"] if r["booking_id"] == new_hotel)
    assert (stay["checkin_date"], stay["checkout_date"], stay["status"]) == (
        day(20),
        day(22),
        "confirmed",
    )


def test_user_info_of_the_first_node_includes_every_reservation_kind(
    travel_db: Database,
) -> None:
    # Imported here: the graph is the one part of this file above the db layer.
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig

    from tests.support.assistants import build_assistant

    model = ScriptedChatModel(script=[say("Hello!"), say("Hello again!")])
    graph = build_assistant(travel_db, model).graph
    config: RunnableConfig = {
        "configurable": {"thread_id": "rule-edges", "passenger_id": FIXTURE_PASSENGER_ID}
    }

    def user_info_after(text: str) -> dict[str, set[int]]:
        """The booking ids under each heading of the bookings text the model reads."""
        graph.invoke({"messages": [HumanMessage(content=text)]}, config)
        info = str(graph.get_state(config).values["user_info"])
        found: dict[str, set[int]] = {}
        heading = ""
        for line in info.splitlines():
            if not line.startswith(("-", " ")):
                heading = line.split(":")[0]
            elif match := re.match(r"- booking (\d+):", line):
                found.setdefault(heading, set()).add(int(match[1]))
        return found

    headings = {
        "Hotels": "hotel_reservations",
        "Car rentals": "car_rental_reservations",
        "Excursions": "excursion_reservations",
    }
    first = user_info_after("hi")
    assert {headings[h]: ids for h, ids in first.items()} == FIXTURE_RESERVATIONS
    new_hotel = book_basel_hotel(travel_db)
    after = user_info_after("and now?")
    assert {headings[h]: ids for h, ids in after.items()} == {
        **FIXTURE_RESERVATIONS,
        "hotel_reservations": {FIXTURE_HOTEL_BOOKING_ID, new_hotel},
    }


# --- 5. Partner dates and units at their limits, on both sides ---------------------------


def first_entry(db: Database, kind: Any) -> Any:
    """Return the catalogue entry of ``kind`` with the most units per day."""
    model = kind.catalogue_model
    with db.session() as session:
        return session.scalars(
            select(model).order_by(kind.capacity.desc(), model.id).limit(1)
        ).one()


def dates_from(kind: Any, start: int, units: int = 1) -> tuple[str, ...]:
    """Return the dates of a reservation of ``kind`` starting ``start`` days from today."""
    if len(kind.date_fields) == 1:
        return (day(start),)
    if kind.period.last_day_included:  # a rental: both days count
        return (day(start), day(start + units - 1))
    return (day(start), day(start + units))  # a stay: the check-out day is not a night


KINDS = [
    pytest.param(HOTEL, id="hotel"),
    pytest.param(CAR_RENTAL, id="car"),
    pytest.param(EXCURSION, id="excursion"),
]


@pytest.mark.parametrize("kind", KINDS)
def test_reservations_open_exactly_max_days_ahead_and_not_a_day_more(
    travel_db: Database, kind: Any
) -> None:
    item = first_entry(travel_db, kind)
    with travel_db.session() as session:
        quote = reservations.quote_book(
            session, kind, BUSINESS_PASSENGER_ID, item.id, dates_from(kind, MAX_DAYS_AHEAD), NOW
        )
        assert quote.after is not None
        assert quote.after[kind.date_fields[0]] == day(MAX_DAYS_AHEAD)
        with pytest.raises(RuleViolationError, match="too far ahead"):
            reservations.quote_book(
                session,
                kind,
                BUSINESS_PASSENGER_ID,
                item.id,
                dates_from(kind, MAX_DAYS_AHEAD + 1),
                NOW,
            )


@pytest.mark.parametrize("kind", KINDS)
def test_a_reservation_starting_today_can_be_changed_or_cancelled_but_not_once_started(
    travel_db: Database, kind: Any
) -> None:
    # "A reservation whose start date has passed cannot be changed or cancelled": on its
    # first day it still can (late, with the kind's fee); the day after, it cannot.
    item = first_entry(travel_db, kind)
    with travel_db.transaction() as session:
        booked = reservations.book(
            session, kind, BUSINESS_PASSENGER_ID, item.id, dates_from(kind, 0, units=2), NOW
        )
    booking_id = booked["booking_id"]
    new_dates = (None,) * (len(kind.date_fields) - 1) + (dates_from(kind, 0, units=3)[-1],)
    if len(kind.date_fields) == 1:
        new_dates = (day(1),)
    tomorrow = NOW + timedelta(days=1)
    with travel_db.session() as session:
        cancel = reservations.quote_cancel(session, kind, BUSINESS_PASSENGER_ID, booking_id, NOW)
        assert cancel.fee_cents > 0, cancel.fee_note  # late: its free window has closed
        change = reservations.quote_update(
            session, kind, BUSINESS_PASSENGER_ID, booking_id, new_dates, NOW
        )
        assert change.after is not None and change.fee_cents > 0
        with pytest.raises(RuleViolationError, match="already started"):
            reservations.quote_cancel(session, kind, BUSINESS_PASSENGER_ID, booking_id, tomorrow)
        with pytest.raises(RuleViolationError, match="already started"):
            reservations.quote_update(
                session, kind, BUSINESS_PASSENGER_ID, booking_id, new_dates, tomorrow
            )


def with_units(db: Database, kind: Any, units: int) -> Any:
    """Return a catalogue entry of ``kind`` left with ``units`` units per day."""
    item = first_entry(db, kind)
    with db.transaction() as session:
        session.execute(
            update(kind.catalogue_model)
            .where(kind.catalogue_model.id == item.id)
            .values({kind.capacity.key: units})
        )
    return item


def test_a_car_is_still_taken_on_its_return_day(travel_db: Database) -> None:
    offer = with_units(travel_db, CAR_RENTAL, 1)
    with travel_db.transaction() as session:
        reservations.book(
            session, CAR_RENTAL, FIXTURE_PASSENGER_ID, offer.id, (day(30), day(31)), NOW
        )
    with travel_db.session() as session:
        with pytest.raises(UnavailableError, match=f"no car left on {day(31)}"):
            reservations.quote_book(
                session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(31), day(32)), NOW
            )
        after = reservations.quote_book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(32), day(33)), NOW
        )
        assert after.after == {"start_date": day(32), "end_date": day(33)}


def test_a_room_is_free_again_on_its_check_out_day(travel_db: Database) -> None:
    # Two rooms. One guest leaves on day 32, another arrives that day: a stay of the
    # nights of days 31 and 32 finds one room each night (the leaving guest's room is not
    # held on its check-out day), until a third guest takes the night of day 31.
    hotel = with_units(travel_db, HOTEL, 2)
    first, second, third = other_passengers(travel_db, 3)
    with travel_db.transaction() as session:
        reservations.book(session, HOTEL, first, hotel.id, (day(30), day(32)), NOW)
        reservations.book(session, HOTEL, second, hotel.id, (day(32), day(33)), NOW)
    wanted = (day(31), day(33))
    with travel_db.session() as session:
        quote = reservations.quote_book(
            session, HOTEL, BUSINESS_PASSENGER_ID, hotel.id, wanted, NOW
        )
        assert quote.new_total_cents == 2 * hotel.nightly_rate_cents
        found = reservations.search(
            session, HOTEL, NOW, name=hotel.name, checkin_date=wanted[0], checkout_date=wanted[1]
        )
        assert [h["rooms_left"] for h in found["hotels"] if h["hotel_id"] == hotel.id] == [1]
    with travel_db.transaction() as session:
        reservations.book(session, HOTEL, third, hotel.id, (day(31), day(32)), NOW)
    with (
        travel_db.session() as session,
        pytest.raises(UnavailableError, match=f"night of {day(31)}"),
    ):
        reservations.quote_book(session, HOTEL, BUSINESS_PASSENGER_ID, hotel.id, wanted, NOW)


def test_a_one_night_stay_and_a_one_day_rental_are_the_shortest_bookable(
    travel_db: Database,
) -> None:
    hotel, offer = first_entry(travel_db, HOTEL), first_entry(travel_db, CAR_RENTAL)
    with travel_db.session() as session:
        stay = reservations.quote_book(
            session, HOTEL, BUSINESS_PASSENGER_ID, hotel.id, (day(40), day(41)), NOW
        )
        rental = reservations.quote_book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(40), day(40)), NOW
        )
        assert stay.new_total_cents == hotel.nightly_rate_cents
        assert rental.new_total_cents == offer.daily_rate_cents
        with pytest.raises(InvalidInputError, match="at least one night"):
            reservations.quote_book(
                session, HOTEL, BUSINESS_PASSENGER_ID, hotel.id, (day(40), day(40)), NOW
            )
        with pytest.raises(InvalidInputError, match="on or after start_date"):
            reservations.quote_book(
                session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(40), day(39)), NOW
            )


@pytest.mark.parametrize(
    ("cents", "shown"),
    [
        (0, "EUR 0.00"),
        (5, "EUR 0.05"),
        (-1, "-EUR 0.01"),
        (-150_050, "-EUR 1,500.50"),
        (123_456_789, "EUR 1,234,567.89"),
    ],
)
def test_amounts_are_shown_with_their_sign_and_nothing_is_negative_zero(
    cents: int, shown: str
) -> None:
    # Found by mutmut: zero shown as "-EUR 0.00" passed every test (they compared with
    # the formatter itself or wrote the zero out by hand).
    from db.rules import format_money

    assert format_money(cents) == shown
