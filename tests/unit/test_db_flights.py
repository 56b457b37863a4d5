"""Query-level tests of db.flights and db.tickets: search, ticket change and cancellation rules."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from db import flights, tickets
from db.clock import fixed_clock
from db.engine import Database
from db.errors import (
    InvalidInputError,
    NotFoundError,
    OwnershipError,
    RuleViolationError,
    UnavailableError,
)
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    BUSINESS_TICKET_NO,
    CHECKED_IN_TICKET_NO,
    FIXTURE_PASSENGER_ID,
    FIXTURE_TICKET_NO,
    FLOWN_PASSENGER_ID,
    FLOWN_TICKET_NO,
    MULTI_SEGMENT_PASSENGER_ID,
    MULTI_SEGMENT_TICKET_NO,
)
from db.models import (
    BoardingPass,
    Booking,
    Flight,
    FlightFare,
    Payment,
    Seat,
    Ticket,
    TicketFlight,
)
from db.passengers import passenger_summary
from db.rules import (
    FARE_RULES,
    FREE_WINDOW_HOURS_AFTER_BOOKING,
    MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL,
    MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE,
)
from tests.support.databases import FIXED_NOW
from tests.support.tools import add_flight, dump, full_flight, lx0112

NOW = FIXED_NOW


def _segments(db: Database, ticket_no: str) -> list[tuple[int, str, int, str | None]]:
    with db.session() as session:
        rows = session.execute(
            select(TicketFlight, BoardingPass.seat_no)
            .join(Flight, Flight.flight_id == TicketFlight.flight_id)
            .outerjoin(
                BoardingPass,
                (BoardingPass.ticket_no == TicketFlight.ticket_no)
                & (BoardingPass.flight_id == TicketFlight.flight_id),
            )
            .where(TicketFlight.ticket_no == ticket_no)
            .order_by(Flight.scheduled_departure)
        ).all()
        return [(tf.flight_id, tf.fare_conditions, tf.amount_cents, seat) for tf, seat in rows]


def _set_book_date(db: Database, ticket_no: str, age: timedelta) -> None:
    with db.transaction() as session:
        ticket = session.get(Ticket, ticket_no)
        assert ticket is not None
        session.execute(
            update(Booking).where(Booking.book_ref == ticket.book_ref).values(book_date=NOW - age)
        )


def _fare(db: Database, flight_id: int, fare_class: str) -> int:
    with db.session() as session:
        fare = session.get(FlightFare, (flight_id, fare_class))
        assert fare is not None
        return fare.amount_cents


def _future_flight(db: Database, departure: str, arrival: str, after: timedelta) -> int:
    """Return a scheduled flight on the route departing at least ``after`` from now."""
    with db.session() as session:
        found = session.scalar(
            select(Flight.flight_id)
            .where(
                Flight.departure_airport == departure,
                Flight.arrival_airport == arrival,
                Flight.scheduled_departure >= NOW + after,
                Flight.status.in_(("Scheduled", "On Time", "Delayed")),
            )
            .order_by(Flight.scheduled_departure)
            .limit(1)
        )
    if found is not None:
        return found
    return add_flight(db, departure_airport=departure, arrival_airport=arrival, departs_in=after)


# Search -------------------------------------------------------------------------------------


def test_search_flights_lists_future_flights_in_departure_order(travel_db: Database) -> None:
    with travel_db.session() as session:
        result = flights.search_flights(
            session, NOW, departure_airport="CDG", arrival_airport="BSL"
        )
    found = result["flights"]
    assert found, "the fixture route has flights"
    assert result["count"] == len(found)
    with travel_db.session() as session:
        departures = [session.get(Flight, f["flight_id"]).scheduled_departure for f in found]  # type: ignore[union-attr]
    assert departures == sorted(departures)
    assert all(d >= NOW for d in departures)
    first = lx0112(travel_db, 0)
    assert first.flight_id in [f["flight_id"] for f in found]


def test_search_flights_shows_local_times_with_zone(travel_db: Database) -> None:
    flight = lx0112(travel_db, 0)
    with travel_db.session() as session:
        result = flights.search_flights(
            session, NOW, departure_airport="CDG", arrival_airport="BSL", limit=50
        )
    view = next(f for f in result["flights"] if f["flight_id"] == flight.flight_id)
    local = flight.scheduled_departure + timedelta(hours=2)  # Paris is on CEST in May
    assert view["scheduled_departure"] == f"{local:%Y-%m-%d %H:%M} CEST (+02:00)"
    assert view["flight_no"] == "LX0112"
    assert view["route"].endswith("(BSL)")


def test_search_flights_gives_price_and_seats_left_per_fare_class(travel_db: Database) -> None:
    flight = lx0112(travel_db, 0)
    with travel_db.session() as session:
        result = flights.search_flights(
            session, NOW, departure_airport="CDG", arrival_airport="BSL", limit=50
        )
        seats = session.scalar(
            select(Seat.seat_no)
            .where(Seat.aircraft_code == flight.aircraft_code, Seat.fare_conditions == "Economy")
            .limit(1)
        )
        assert seats is not None
        left = flights.seats_left(session, flight, "Economy")
    view = next(f for f in result["flights"] if f["flight_id"] == flight.flight_id)
    economy = next(f for f in view["fares"] if f["fare_conditions"] == "Economy")
    assert economy["price_cents"] == _fare(travel_db, flight.flight_id, "Economy")
    assert economy["price"].startswith("EUR ")
    assert economy["seats_left"] == left


def test_search_flights_reports_sold_out_economy(travel_db: Database) -> None:
    full = full_flight(travel_db)
    with travel_db.session() as session:
        result = flights.search_flights(
            session, NOW, departure_airport="CDG", arrival_airport="BSL", limit=50
        )
    view = next(f for f in result["flights"] if f["flight_id"] == full.flight_id)
    economy = next(f for f in view["fares"] if f["fare_conditions"] == "Economy")
    assert economy["seats_left"] == 0


def test_search_flights_accepts_lowercase_codes(travel_db: Database) -> None:
    with travel_db.session() as session:
        upper = flights.search_flights(session, NOW, departure_airport="CDG")
        lower = flights.search_flights(session, NOW, departure_airport=" cdg ")
    assert upper == lower
    assert all(f["departure_airport"] == "CDG" for f in upper["flights"])


def test_search_flights_suggests_codes_for_a_city_name(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(InvalidInputError) as raised:
        flights.search_flights(session, NOW, departure_airport="Paris")
    assert "3-letter IATA" in str(raised.value)
    assert "CDG" in str(raised.value)


def test_search_flights_rejects_unknown_code(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(NotFoundError, match="QQQ"):
        flights.search_flights(session, NOW, arrival_airport="QQQ")


def test_search_flights_bare_end_date_includes_that_day(travel_db: Database) -> None:
    tomorrow = (NOW + timedelta(days=1)).date().isoformat()
    with travel_db.session() as session:
        result = flights.search_flights(
            session, NOW, start_time=tomorrow, end_time=tomorrow, limit=50
        )
        for view in result["flights"]:
            flight = session.get(Flight, view["flight_id"])
            assert flight is not None
            assert flight.scheduled_departure.date().isoformat() == tomorrow
    assert result["flights"]


def test_search_flights_reads_naive_times_as_utc(travel_db: Database) -> None:
    flight = lx0112(travel_db, 1)
    start = flight.scheduled_departure.strftime("%Y-%m-%dT%H:%M")
    with travel_db.session() as session:
        naive = flights.search_flights(session, NOW, departure_airport="CDG", start_time=start)
        explicit = flights.search_flights(
            session, NOW, departure_airport="CDG", start_time=start + "+00:00"
        )
    assert naive == explicit
    assert naive["flights"][0]["flight_id"] == flight.flight_id


def test_search_flights_finds_past_flights_when_the_window_asks(travel_db: Database) -> None:
    with travel_db.session() as session:
        result = flights.search_flights(
            session,
            NOW,
            departure_airport="AMS",
            arrival_airport="BCN",
            start_time=(NOW - timedelta(days=4)).date().isoformat(),
            end_time=(NOW - timedelta(days=2)).date().isoformat(),
        )
    flown = _segments(travel_db, FLOWN_TICKET_NO)[0][0]
    assert flown in [f["flight_id"] for f in result["flights"]]


def test_search_flights_rejects_reversed_window(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(InvalidInputError, match="end_time"):
        flights.search_flights(session, NOW, start_time="2026-05-10", end_time="2026-05-08")


def test_search_flights_rejects_malformed_time(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(InvalidInputError, match="start_time"):
        flights.search_flights(session, NOW, start_time="next tuesday")


@pytest.mark.parametrize(("asked", "expected_max"), [(0, 1), (-5, 1), (1000, 50)])
def test_search_flights_clamps_limit(travel_db: Database, asked: int, expected_max: int) -> None:
    with travel_db.session() as session:
        result = flights.search_flights(session, NOW, limit=asked)
    assert 1 <= result["count"] <= expected_max


# Change -------------------------------------------------------------------------------------


def test_quote_ticket_change_charges_fee_and_fare_increase(travel_db: Database) -> None:
    _set_book_date(travel_db, FIXTURE_TICKET_NO, timedelta(days=10))
    target = lx0112(travel_db, 1)
    paid = _segments(travel_db, FIXTURE_TICKET_NO)[0][2]
    new_fare = _fare(travel_db, target.flight_id, "Economy")
    with travel_db.session() as session:
        quote = tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target.flight_id, NOW
        )
    assert quote.change_fee_cents == FARE_RULES["Economy"].change_fee_cents
    assert quote.fare_difference_cents == max(new_fare - paid, 0)
    assert quote.total_cents == quote.change_fee_cents + quote.fare_difference_cents
    assert quote.old_flight["flight_id"] == lx0112(travel_db, 0).flight_id
    assert quote.new_flight["flight_id"] == target.flight_id
    assert any(line.startswith("Change fee:") for line in quote.lines())


def test_quote_ticket_change_is_free_within_the_booking_window(travel_db: Database) -> None:
    _set_book_date(
        travel_db, FIXTURE_TICKET_NO, timedelta(hours=FREE_WINDOW_HOURS_AFTER_BOOKING - 1)
    )
    with travel_db.session() as session:
        quote = tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, lx0112(travel_db, 1).flight_id, NOW
        )
    assert quote.change_fee_cents == 0
    assert "free" in quote.fee_note


@pytest.mark.parametrize(
    ("since_booking", "free"),
    [
        (timedelta(hours=FREE_WINDOW_HOURS_AFTER_BOOKING), True),
        (timedelta(hours=FREE_WINDOW_HOURS_AFTER_BOOKING, seconds=1), False),
    ],
    ids=["exactly-the-window", "a-second-after"],
)
def test_quote_ticket_change_free_window_ends_at_its_last_second(
    travel_db: Database, since_booking: timedelta, free: bool
) -> None:
    # Found by mutmut: nothing sat on the boundary ("within 24 hours" includes the 24th).
    _set_book_date(travel_db, FIXTURE_TICKET_NO, since_booking)
    with travel_db.session() as session:
        quote = tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, lx0112(travel_db, 1).flight_id, NOW
        )
    assert (quote.change_fee_cents == 0) is free


def test_ticket_numbers_are_read_with_or_without_spaces() -> None:
    # Found by mutmut: a ticket number typed in groups was never tested.
    from db.ticket_rules import ticket_number

    assert ticket_number(" 7240 0054 3290 6569 ") == "7240005432906569"
    with pytest.raises(InvalidInputError, match="ticket_no must be a ticket number"):
        ticket_number("7240-0054")


def test_quote_ticket_change_never_refunds_a_lower_fare(travel_db: Database) -> None:
    target = lx0112(travel_db, 1)
    with travel_db.transaction() as session:
        session.execute(
            update(TicketFlight)
            .where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
            .values(amount_cents=_fare(travel_db, target.flight_id, "Economy") + 5_000)
        )
    with travel_db.session() as session:
        quote = tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target.flight_id, NOW
        )
    assert quote.fare_difference_cents == 0


def test_quote_ticket_change_writes_nothing(travel_db: Database) -> None:
    before = dump(travel_db)
    with travel_db.session() as session:
        tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, lx0112(travel_db, 1).flight_id, NOW
        )
        session.commit()
    assert dump(travel_db) == before


def test_update_ticket_moves_segment_and_boarding_pass(travel_db: Database) -> None:
    _set_book_date(travel_db, FIXTURE_TICKET_NO, timedelta(days=10))
    old = lx0112(travel_db, 0)
    target = lx0112(travel_db, 1)
    (_, fare_class, paid, seat) = _segments(travel_db, FIXTURE_TICKET_NO)[0]
    assert seat is not None
    with travel_db.transaction() as session:
        result = tickets.update_ticket_to_new_flight(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target.flight_id, NOW
        )
    new_fare = _fare(travel_db, target.flight_id, "Economy")
    difference = max(new_fare - paid, 0)
    expected_total = FARE_RULES["Economy"].change_fee_cents + difference
    assert result["status"] == "changed"
    assert result["charged_cents"] == expected_total
    assert result["new_flight"]["flight_id"] == target.flight_id
    ((flight_id, fare_after, amount_after, seat_after),) = _segments(travel_db, FIXTURE_TICKET_NO)
    assert (flight_id, fare_after, amount_after) == (
        target.flight_id,
        fare_class,
        paid + difference,
    )
    assert seat_after == result["new_seat"]
    with travel_db.session() as session:
        seat_class = session.scalar(
            select(Seat.fare_conditions).where(
                Seat.aircraft_code == target.aircraft_code, Seat.seat_no == seat_after
            )
        )
        assert seat_class == fare_class
        assert (
            session.scalar(
                select(BoardingPass).where(
                    BoardingPass.ticket_no == FIXTURE_TICKET_NO,
                    BoardingPass.flight_id == old.flight_id,
                )
            )
            is None
        )
        payments = list(
            session.scalars(select(Payment).where(Payment.reference == FIXTURE_TICKET_NO))
        )
    assert [p.amount_cents for p in payments] == [expected_total]


def test_update_ticket_keeps_the_ticket_in_the_passenger_summary(travel_db: Database) -> None:
    target = lx0112(travel_db, 1)
    with travel_db.transaction() as session:
        tickets.update_ticket_to_new_flight(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target.flight_id, NOW
        )
    with travel_db.session() as session:
        summary = passenger_summary(session, FIXTURE_PASSENGER_ID, NOW)
    ticket = next(t for t in summary["tickets"] if t["ticket_no"] == FIXTURE_TICKET_NO)
    assert [s["flight_id"] for s in ticket["segments"]] == [target.flight_id]
    assert ticket["segments"][0]["seat_no"] is not None
    assert ticket["status"] == "active"


def test_update_ticket_releases_the_old_seat_and_takes_a_new_one(travel_db: Database) -> None:
    old = lx0112(travel_db, 0)
    target = lx0112(travel_db, 1)
    with travel_db.session() as session:
        old_left = flights.seats_left(session, old, "Economy")
        new_left = flights.seats_left(session, target, "Economy")
    with travel_db.transaction() as session:
        tickets.update_ticket_to_new_flight(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target.flight_id, NOW
        )
    with travel_db.session() as session:
        assert flights.seats_left(session, old, "Economy") == old_left + 1
        assert flights.seats_left(session, target, "Economy") == new_left - 1


def test_update_ticket_moves_the_matching_segment_of_a_connection(travel_db: Database) -> None:
    first, second = _segments(travel_db, MULTI_SEGMENT_TICKET_NO)
    with travel_db.session() as session:
        leg = session.get(Flight, second[0])
        assert leg is not None
        departs_in = leg.scheduled_departure - NOW + timedelta(hours=2)
    target = add_flight(
        travel_db, departure_airport="FRA", arrival_airport="JFK", departs_in=departs_in
    )
    with travel_db.transaction() as session:
        tickets.update_ticket_to_new_flight(
            session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, target, NOW
        )
    after = _segments(travel_db, MULTI_SEGMENT_TICKET_NO)
    assert after[0] == first
    assert after[1][0] == target


def test_update_ticket_refuses_to_break_a_connection(travel_db: Database) -> None:
    _, second = _segments(travel_db, MULTI_SEGMENT_TICKET_NO)
    with travel_db.session() as session:
        leg = session.get(Flight, second[0])
        assert leg is not None
        departs_in = leg.scheduled_departure - NOW + timedelta(hours=1)
    target = add_flight(
        travel_db, departure_airport="MUC", arrival_airport="FRA", departs_in=departs_in
    )
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="next segment"):
        tickets.quote_ticket_change(
            session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, target, NOW
        )


@pytest.mark.parametrize(
    "before_landing",
    [timedelta(minutes=30), timedelta(0)],
    ids=["before-the-first-leg-lands", "the-minute-it-lands"],
)
def test_update_ticket_refuses_a_second_leg_leaving_before_the_first_arrives(
    travel_db: Database, before_landing: timedelta
) -> None:
    # The check of a connection looks both ways: the first leg is the second leg's
    # previous segment, so moving the second leg earlier than the first one lands breaks
    # the connection as surely as moving the first leg later (test above).
    first, _ = _segments(travel_db, MULTI_SEGMENT_TICKET_NO)
    with travel_db.session() as session:
        leg = session.get(Flight, first[0])
        assert leg is not None
        departs_in = leg.scheduled_arrival - NOW - before_landing
    assert departs_in > timedelta(hours=MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE)
    target = add_flight(
        travel_db, departure_airport="FRA", arrival_airport="JFK", departs_in=departs_in
    )
    before = dump(travel_db)
    with travel_db.session() as session, pytest.raises(RuleViolationError) as raised:
        tickets.quote_ticket_change(
            session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, target, NOW
        )
    assert "leaves before the ticket's previous segment" in str(raised.value)
    with travel_db.transaction() as session, pytest.raises(RuleViolationError, match="previous"):
        tickets.update_ticket_to_new_flight(
            session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, target, NOW
        )
    assert dump(travel_db) == before


def test_update_ticket_rejects_someone_elses_ticket(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(OwnershipError) as raised:
        tickets.quote_ticket_change(
            session, FLOWN_PASSENGER_ID, FIXTURE_TICKET_NO, lx0112(travel_db, 1).flight_id, NOW
        )
    assert str(raised.value) == (
        f"Ticket {FIXTURE_TICKET_NO} does not belong to passenger {FLOWN_PASSENGER_ID}."
    )


def test_update_ticket_rejects_a_different_route(travel_db: Database) -> None:
    other = _future_flight(travel_db, "ZRH", "LHR", timedelta(days=1))
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="same departure"):
        tickets.quote_ticket_change(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, other, NOW)


def test_update_ticket_rejects_a_flight_leaving_within_three_hours(travel_db: Database) -> None:
    soon = add_flight(
        travel_db,
        departure_airport="ZRH",
        arrival_airport="LHR",
        departs_in=timedelta(hours=MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE) - timedelta(minutes=5),
    )
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="3 hours"):
        tickets.quote_ticket_change(session, BUSINESS_PASSENGER_ID, BUSINESS_TICKET_NO, soon, NOW)


def test_update_ticket_rejects_a_cancelled_flight(travel_db: Database) -> None:
    cancelled = add_flight(
        travel_db,
        departure_airport="ZRH",
        arrival_airport="LHR",
        departs_in=timedelta(days=2),
        status="Cancelled",
    )
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="Cancelled"):
        tickets.quote_ticket_change(
            session, BUSINESS_PASSENGER_ID, BUSINESS_TICKET_NO, cancelled, NOW
        )


def test_update_ticket_rejects_when_the_current_flight_is_too_close(travel_db: Database) -> None:
    later = NOW + timedelta(hours=2)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="less than 3"):
        tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, lx0112(travel_db, 1).flight_id, later
        )


def test_update_ticket_rejects_a_full_flight(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(UnavailableError, match="no Economy seat"):
        tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, full_flight(travel_db).flight_id, NOW
        )


def test_update_ticket_rejects_a_flown_segment(travel_db: Database) -> None:
    target = _future_flight(travel_db, "AMS", "BCN", timedelta(days=1))
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="departed"):
        tickets.quote_ticket_change(session, FLOWN_PASSENGER_ID, FLOWN_TICKET_NO, target, NOW)


def test_update_ticket_rejects_a_checked_in_segment(travel_db: Database) -> None:
    target = _future_flight(travel_db, "BCN", "AMS", timedelta(days=1))
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="checked in"):
        tickets.quote_ticket_change(session, FLOWN_PASSENGER_ID, CHECKED_IN_TICKET_NO, target, NOW)


def test_update_ticket_rejects_the_same_flight(travel_db: Database) -> None:
    current = lx0112(travel_db, 0).flight_id
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="already on"):
        tickets.quote_ticket_change(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, current, NOW)


def test_update_ticket_rejects_unknown_ticket_and_flight(travel_db: Database) -> None:
    with travel_db.session() as session:
        with pytest.raises(NotFoundError, match="No ticket 0000000000000000"):
            tickets.quote_ticket_change(
                session,
                FIXTURE_PASSENGER_ID,
                "0000000000000000",
                lx0112(travel_db, 1).flight_id,
                NOW,
            )
        with pytest.raises(NotFoundError, match="No flight with flight_id 99999999"):
            tickets.quote_ticket_change(
                session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, 99_999_999, NOW
            )


def test_update_ticket_error_leaves_the_database_unchanged(travel_db: Database) -> None:
    before = dump(travel_db)
    with pytest.raises(UnavailableError), travel_db.transaction() as session:
        tickets.update_ticket_to_new_flight(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, full_flight(travel_db).flight_id, NOW
        )
    assert dump(travel_db) == before


# Cancel -------------------------------------------------------------------------------------


def test_cancel_ticket_refunds_paid_minus_fee_and_releases_the_seat(travel_db: Database) -> None:
    _set_book_date(travel_db, FIXTURE_TICKET_NO, timedelta(days=10))
    flight = lx0112(travel_db, 0)
    paid = _segments(travel_db, FIXTURE_TICKET_NO)[0][2]
    with travel_db.session() as session:
        left = flights.seats_left(session, flight, "Economy")
    with travel_db.transaction() as session:
        result = tickets.cancel_ticket(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, NOW)
    fee = min(FARE_RULES["Economy"].cancel_fee_cents, paid)
    assert result["cancel_fee_cents"] == fee
    assert result["refunded_cents"] == paid - fee
    with travel_db.session() as session:
        ticket = session.get(Ticket, FIXTURE_TICKET_NO)
        assert ticket is not None and ticket.status == "cancelled"
        assert flights.seats_left(session, flight, "Economy") == left + 1
        assert (
            session.scalar(select(BoardingPass).where(BoardingPass.ticket_no == FIXTURE_TICKET_NO))
            is None
        )
        refunds = [
            p.amount_cents
            for p in session.scalars(select(Payment).where(Payment.reference == FIXTURE_TICKET_NO))
        ]
        summary = passenger_summary(session, FIXTURE_PASSENGER_ID, NOW)
    assert refunds == ([-(paid - fee)] if paid > fee else [])
    ticket_view = next(t for t in summary["tickets"] if t["ticket_no"] == FIXTURE_TICKET_NO)
    assert ticket_view["status"] == "cancelled"
    assert [s["segment_status"] for s in ticket_view["segments"]] == ["cancelled"]


def test_cancel_ticket_within_the_booking_window_refunds_everything(travel_db: Database) -> None:
    _set_book_date(travel_db, FIXTURE_TICKET_NO, timedelta(hours=1))
    paid = _segments(travel_db, FIXTURE_TICKET_NO)[0][2]
    with travel_db.session() as session:
        quote = tickets.quote_ticket_cancellation(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, NOW
        )
    assert quote.cancel_fee_cents == 0
    assert quote.refund_cents == paid


def test_cancel_ticket_business_fee_comes_from_the_fare_rules(travel_db: Database) -> None:
    _set_book_date(travel_db, BUSINESS_TICKET_NO, timedelta(days=3))
    paid = sum(s[2] for s in _segments(travel_db, BUSINESS_TICKET_NO))
    with travel_db.session() as session:
        quote = tickets.quote_ticket_cancellation(
            session, BUSINESS_PASSENGER_ID, BUSINESS_TICKET_NO, NOW
        )
    assert quote.cancel_fee_cents == FARE_RULES["Business"].cancel_fee_cents
    assert quote.refund_cents == paid - FARE_RULES["Business"].cancel_fee_cents


def test_cancel_ticket_cancels_every_segment_of_a_connection(travel_db: Database) -> None:
    paid = sum(s[2] for s in _segments(travel_db, MULTI_SEGMENT_TICKET_NO))
    with travel_db.transaction() as session:
        result = tickets.cancel_ticket(
            session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, NOW
        )
    assert len(result["cancelled_flights"]) == 2
    assert result["paid_cents"] == paid


def test_cancel_ticket_rejects_a_flown_ticket(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="departed"):
        tickets.quote_ticket_cancellation(session, FLOWN_PASSENGER_ID, FLOWN_TICKET_NO, NOW)


def test_cancel_ticket_rejects_a_checked_in_ticket(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="checked in"):
        tickets.quote_ticket_cancellation(session, FLOWN_PASSENGER_ID, CHECKED_IN_TICKET_NO, NOW)


def test_cancel_ticket_rejects_a_flight_within_three_hours(travel_db: Database) -> None:
    later = NOW + timedelta(hours=2)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="less than 3"):
        tickets.quote_ticket_cancellation(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, later)


def test_cancel_ticket_rejects_someone_elses_ticket(travel_db: Database) -> None:
    with travel_db.session() as session, pytest.raises(OwnershipError, match="does not belong"):
        tickets.quote_ticket_cancellation(session, BUSINESS_PASSENGER_ID, FIXTURE_TICKET_NO, NOW)


def test_cancel_ticket_twice_is_refused(travel_db: Database) -> None:
    with travel_db.transaction() as session:
        tickets.cancel_ticket(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, NOW)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="cancelled"):
        tickets.quote_ticket_cancellation(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, NOW)


def test_cancelled_ticket_cannot_be_changed(travel_db: Database) -> None:
    with travel_db.transaction() as session:
        tickets.cancel_ticket(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, NOW)
    with travel_db.session() as session, pytest.raises(RuleViolationError, match="cancelled"):
        tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, lx0112(travel_db, 1).flight_id, NOW
        )


def test_database_clock_drives_the_rules(db_url: str) -> None:
    late = Database.from_url(db_url, clock=fixed_clock(NOW + timedelta(hours=2)))
    try:
        with late.session() as session, pytest.raises(RuleViolationError):
            tickets.quote_ticket_cancellation(
                session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, late.clock()
            )
    finally:
        late.dispose()


# Both sides of the time limits, and what a cancellation or change must keep -----------------


def test_change_and_cancel_stay_open_until_exactly_three_hours_before_departure(
    travel_db: Database,
) -> None:
    # "Changes and cancellations close 3 hours before the scheduled departure": at exactly
    # 3 hours they are still open, a minute later they are closed.
    departure = lx0112(travel_db, 0).scheduled_departure
    target = lx0112(travel_db, 1).flight_id
    at_limit = departure - timedelta(hours=MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL)
    past_limit = at_limit + timedelta(minutes=1)
    with travel_db.session() as session:
        cancel = tickets.quote_ticket_cancellation(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, at_limit
        )
        change = tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target, at_limit
        )
        assert cancel.refund_cents >= 0 and change.new_flight["flight_id"] == target
        with pytest.raises(RuleViolationError, match="less than 3 hours"):
            tickets.quote_ticket_cancellation(
                session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, past_limit
            )
        with pytest.raises(RuleViolationError, match="less than 3 hours"):
            tickets.quote_ticket_change(
                session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target, past_limit
            )


@pytest.mark.parametrize(
    ("lands_before", "allowed"),
    [(timedelta(minutes=1), True), (timedelta(0), False)],
    ids=["a-minute-before-the-next-leg-leaves", "the-minute-it-leaves"],
)
def test_update_ticket_first_leg_must_land_before_the_next_leg_leaves(
    travel_db: Database, lands_before: timedelta, allowed: bool
) -> None:
    _, second = _segments(travel_db, MULTI_SEGMENT_TICKET_NO)
    duration = timedelta(hours=1, minutes=30)
    with travel_db.session() as session:
        leg = session.get(Flight, second[0])
        assert leg is not None
        departs_in = leg.scheduled_departure - NOW - duration - lands_before
    target = add_flight(
        travel_db,
        departure_airport="MUC",
        arrival_airport="FRA",
        departs_in=departs_in,
        duration=duration,
    )
    with travel_db.session() as session:
        if allowed:
            quote = tickets.quote_ticket_change(
                session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, target, NOW
            )
            assert quote.new_flight["flight_id"] == target
        else:
            with pytest.raises(RuleViolationError, match="arrives after the ticket's next"):
                tickets.quote_ticket_change(
                    session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, target, NOW
                )


def _set_segment(db: Database, ticket_no: str, flight_id: int, **values: object) -> None:
    with db.transaction() as session:
        session.execute(
            update(TicketFlight)
            .where(TicketFlight.ticket_no == ticket_no, TicketFlight.flight_id == flight_id)
            .values(**values)
        )


def test_cancel_ticket_charges_one_fee_the_highest_of_its_classes(travel_db: Database) -> None:
    # "The fee is one per ticket: the highest cancel fee among the cancelled segments'
    # classes": a Comfort leg beside an Economy leg pays the Economy fee, once.
    first, _ = _segments(travel_db, MULTI_SEGMENT_TICKET_NO)
    _set_segment(travel_db, MULTI_SEGMENT_TICKET_NO, first[0], fare_conditions="Comfort")
    paid = sum(s[2] for s in _segments(travel_db, MULTI_SEGMENT_TICKET_NO))
    fees = {name: FARE_RULES[name].cancel_fee_cents for name in ("Comfort", "Economy")}
    assert fees["Economy"] > fees["Comfort"] > 0
    with travel_db.session() as session:
        quote = tickets.quote_ticket_cancellation(
            session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, NOW
        )
    assert quote.cancel_fee_cents == fees["Economy"]
    assert quote.refund_cents == paid - fees["Economy"]
    assert quote.fee_note == "Economy cancellation fee"


def test_cancel_ticket_fee_above_the_amount_paid_refunds_nothing_and_charges_nothing_more(
    travel_db: Database,
) -> None:
    fee = FARE_RULES["Economy"].cancel_fee_cents
    paid = fee - 2_500
    _set_segment(travel_db, FIXTURE_TICKET_NO, lx0112(travel_db, 0).flight_id, amount_cents=paid)
    with travel_db.transaction() as session:
        result = tickets.cancel_ticket(session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, NOW)
    assert (result["paid_cents"], result["cancel_fee_cents"]) == (paid, paid)
    assert result["refunded_cents"] == 0
    with travel_db.session() as session:
        moved = list(
            session.scalars(
                select(Payment.amount_cents).where(Payment.reference == FIXTURE_TICKET_NO)
            )
        )
    assert moved == []  # nothing refunded, nothing charged


def test_cancel_ticket_after_its_first_leg_flew_cancels_and_refunds_the_rest(
    travel_db: Database,
) -> None:
    first, second = _segments(travel_db, MULTI_SEGMENT_TICKET_NO)
    with travel_db.transaction() as session:
        session.execute(
            update(Flight)
            .where(Flight.flight_id == first[0])
            .values(
                scheduled_departure=NOW - timedelta(hours=5),
                scheduled_arrival=NOW - timedelta(hours=4),
                actual_departure=NOW - timedelta(hours=5),
                status="Arrived",
            )
        )
    fee = FARE_RULES["Economy"].cancel_fee_cents
    with travel_db.transaction() as session:
        result = tickets.cancel_ticket(
            session, MULTI_SEGMENT_PASSENGER_ID, MULTI_SEGMENT_TICKET_NO, NOW
        )
    assert [f["flight_id"] for f in result["cancelled_flights"]] == [second[0]]
    assert result["paid_cents"] == second[2]
    assert result["refunded_cents"] == max(second[2] - fee, 0)


def test_update_ticket_adds_the_fare_difference_to_the_booking_total(
    travel_db: Database,
) -> None:
    # Every write keeps all tables consistent: the booking's total follows its tickets.
    old, target = lx0112(travel_db, 0), lx0112(travel_db, 1)
    _set_segment(
        travel_db,
        FIXTURE_TICKET_NO,
        old.flight_id,
        amount_cents=_fare(travel_db, target.flight_id, "Economy") - 1_000,
    )
    with travel_db.session() as session:
        ticket = session.get(Ticket, FIXTURE_TICKET_NO)
        assert ticket is not None
        booking = session.get(Booking, ticket.book_ref)
        assert booking is not None
        total_before, book_ref = booking.total_amount_cents, booking.book_ref
    with travel_db.transaction() as session:
        result = tickets.update_ticket_to_new_flight(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, target.flight_id, NOW
        )
    assert result["fare_difference_cents"] == 1_000
    with travel_db.session() as session:
        booking = session.get(Booking, book_ref)
        assert booking is not None
        assert booking.total_amount_cents == total_before + 1_000
    assert _segments(travel_db, FIXTURE_TICKET_NO)[0][:3] == (
        target.flight_id,
        "Economy",
        _fare(travel_db, target.flight_id, "Economy"),
    )


def test_a_tickets_segments_come_in_departure_order_not_storage_order(
    travel_db: Database,
) -> None:
    # Found by mutmut: the segments' ORDER BY could go, since the key's index returned
    # them in flight id order, which was also departure order. Make the first-stored
    # segment depart last: only the ORDER BY puts it back in its place.
    from db.ticket_rules import _segments

    with travel_db.transaction() as session:
        ids = session.scalars(
            select(TicketFlight.flight_id)
            .where(TicketFlight.ticket_no == MULTI_SEGMENT_TICKET_NO)
            .order_by(TicketFlight.flight_id)
        ).all()
        moved = [session.get(Flight, i) for i in ids]
        first = moved[0]
        assert first is not None
        shift = max(f.scheduled_departure for f in moved if f) - first.scheduled_departure
        first.scheduled_departure += shift + timedelta(days=1)
        first.scheduled_arrival += shift + timedelta(days=1)
    with travel_db.session() as session:
        segments = _segments(session, MULTI_SEGMENT_TICKET_NO)
    departures = [s.flight.scheduled_departure for s in segments]
    assert len(segments) == 2 and segments[-1].flight.flight_id == ids[0]
    assert departures == sorted(departures)
