"""Rules that a mutant of scripts/mutants.py broke without any other test noticing.

Each test is named after the rule it guards and says which mutant it kills. They sit at
the edges a plausible slip moves: a boundary that is part of the allowed range (a flight
exactly 3 hours away, a stay of exactly 30 nights), a free window that must be the
kind's own, a capacity check that must cover every day, a refund recorded once, a
transaction that keeps nothing of a failed write, a hand-back that answers every call.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from sqlalchemy import select, update

from assistants.nodes import leave_skill
from assistants.state import update_dialog_stack
from conversations.assistant import Thread
from db import reservations, tickets
from db.car_rentals import CAR_RENTAL
from db.engine import Database
from db.errors import RuleViolationError, UnavailableError
from db.excursions import EXCURSION
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    FIXTURE_PASSENGER_ID,
    FIXTURE_ROUTE,
    FIXTURE_TICKET_NO,
)
from db.hotels import HOTEL
from db.models import CarRental, Hotel, HotelBooking, Payment, TripRecommendation
from db.rules import (
    CAR_FREE_CANCEL_HOURS,
    EXCURSION_FREE_CANCEL_HOURS,
    HOTEL_FREE_CANCEL_HOURS,
    MAX_CAR_RENTAL_DAYS,
    MAX_HOTEL_NIGHTS,
    MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE,
)
from db.values import start_of_day
from db.writes import record_payment
from tests.support.assistants import build_assistant
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.tools import add_flight, dump

NOW = FIXED_NOW
TODAY = NOW.date()
ONE_MINUTE = timedelta(minutes=1)


def day(offset: int) -> str:
    return (TODAY + timedelta(days=offset)).isoformat()


def largest_basel(db: Database, model: Any, capacity: Any) -> Any:
    """The Basel catalogue entry of ``model`` with the most units per day."""
    with db.session() as session:
        return session.scalars(
            select(model).where(model.location == "Basel").order_by(capacity.desc()).limit(1)
        ).one()


# --- flights-change-hours-boundary: "at least 3 hours" includes exactly 3 hours ----------


def test_ticket_change_accepts_a_flight_leaving_exactly_the_minimum_hours_ahead(
    travel_db: Database,
) -> None:
    minimum = timedelta(hours=MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE)
    exactly = add_flight(
        travel_db,
        departure_airport=FIXTURE_ROUTE[0],
        arrival_airport=FIXTURE_ROUTE[1],
        departs_in=minimum,
    )
    too_soon = add_flight(
        travel_db,
        departure_airport=FIXTURE_ROUTE[0],
        arrival_airport=FIXTURE_ROUTE[1],
        departs_in=minimum - ONE_MINUTE,
        flight_no="ZZ0002",
    )
    with travel_db.session() as session:
        quote = tickets.quote_ticket_change(
            session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, exactly, NOW
        )
        assert quote.new_flight["flight_id"] == exactly
        with pytest.raises(RuleViolationError, match="leaves less than"):
            tickets.quote_ticket_change(
                session, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, too_soon, NOW
            )


# --- hotel-max-nights-boundary / car-max-days-boundary: the maximum itself is allowed ----


def test_hotel_stay_of_exactly_the_maximum_nights_is_bookable(travel_db: Database) -> None:
    hotel = largest_basel(travel_db, Hotel, Hotel.rooms)
    with travel_db.session() as session:
        quote = reservations.quote_book(
            session,
            HOTEL,
            BUSINESS_PASSENGER_ID,
            hotel.id,
            (day(100), day(100 + MAX_HOTEL_NIGHTS)),
            NOW,
        )
        assert quote.new_total_cents == MAX_HOTEL_NIGHTS * hotel.nightly_rate_cents
        with pytest.raises(RuleViolationError, match="too long"):
            reservations.quote_book(
                session,
                HOTEL,
                BUSINESS_PASSENGER_ID,
                hotel.id,
                (day(100), day(101 + MAX_HOTEL_NIGHTS)),
                NOW,
            )


def test_car_rental_of_exactly_the_maximum_days_is_bookable(travel_db: Database) -> None:
    offer = largest_basel(travel_db, CarRental, CarRental.fleet_size)
    last_day = day(100 + MAX_CAR_RENTAL_DAYS - 1)
    with travel_db.session() as session:
        quote = reservations.quote_book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(100), last_day), NOW
        )
        assert quote.new_total_cents == MAX_CAR_RENTAL_DAYS * offer.daily_rate_cents
        with pytest.raises(RuleViolationError, match="too long"):
            reservations.quote_book(
                session,
                CAR_RENTAL,
                BUSINESS_PASSENGER_ID,
                offer.id,
                (day(100), day(100 + MAX_CAR_RENTAL_DAYS)),
                NOW,
            )


# --- <kind>-free-hours-wrong-constant: each kind cancels free until its own deadline -----


def _book_hotel(db: Database, start: str) -> tuple[int, int]:
    hotel = largest_basel(db, Hotel, Hotel.rooms)
    stop = (date.fromisoformat(start) + timedelta(days=2)).isoformat()
    with db.transaction() as session:
        booked = reservations.book(
            session, HOTEL, BUSINESS_PASSENGER_ID, hotel.id, (start, stop), NOW
        )
    # Late, the first of the two nights is kept.
    return booked["booking_id"], booked["total_cents"] // 2


def _book_car(db: Database, start: str) -> tuple[int, int]:
    offer = largest_basel(db, CarRental, CarRental.fleet_size)
    end = (date.fromisoformat(start) + timedelta(days=2)).isoformat()
    with db.transaction() as session:
        booked = reservations.book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (start, end), NOW
        )
    # Late, one of the three days is kept.
    return booked["booking_id"], booked["total_cents"] // 3


def _book_excursion(db: Database, start: str) -> tuple[int, int]:
    excursion = largest_basel(db, TripRecommendation, TripRecommendation.capacity_per_day)
    with db.transaction() as session:
        booked = reservations.book(
            session, EXCURSION, BUSINESS_PASSENGER_ID, excursion.id, (start,), NOW
        )
    # Late, nothing is refunded.
    return booked["booking_id"], booked["total_cents"]


KINDS = [
    pytest.param(_book_hotel, HOTEL, HOTEL_FREE_CANCEL_HOURS, id="hotel"),
    pytest.param(_book_car, CAR_RENTAL, CAR_FREE_CANCEL_HOURS, id="car"),
    pytest.param(_book_excursion, EXCURSION, EXCURSION_FREE_CANCEL_HOURS, id="excursion"),
]


@pytest.mark.parametrize(("book", "kind", "free_hours"), KINDS)
def test_reservation_cancellation_is_free_until_its_kinds_window_closes(
    travel_db: Database,
    book: Callable[[Database, str], tuple[int, int]],
    kind: Any,
    free_hours: int,
) -> None:
    start = day(20)
    booking_id, late_fee = book(travel_db, start)
    assert late_fee > 0
    deadline = start_of_day(date.fromisoformat(start)) - timedelta(hours=free_hours)
    with travel_db.session() as session:
        at_deadline = reservations.quote_cancel(
            session, kind, BUSINESS_PASSENGER_ID, booking_id, deadline
        )
        after = reservations.quote_cancel(
            session, kind, BUSINESS_PASSENGER_ID, booking_id, deadline + ONE_MINUTE
        )
    assert at_deadline.fee_cents == 0, at_deadline.fee_note
    assert after.fee_cents == late_fee, after.fee_note


# --- partners-refund-paid-twice: a cancellation records exactly one refund ----------------


@pytest.mark.parametrize(
    ("book", "prefix", "kind"),
    [
        pytest.param(_book_hotel, "hotel", HOTEL, id="hotel"),
        pytest.param(_book_car, "car", CAR_RENTAL, id="car"),
        pytest.param(_book_excursion, "excursion", EXCURSION, id="excursion"),
    ],
)
def test_reservation_cancellation_records_one_refund_of_the_amount_returned(
    travel_db: Database,
    book: Callable[[Database, str], tuple[int, int]],
    prefix: str,
    kind: Any,
) -> None:
    booking_id, _ = book(travel_db, day(20))
    with travel_db.transaction() as session:
        result = reservations.cancel(session, kind, BUSINESS_PASSENGER_ID, booking_id, NOW)
    assert result["refunded_cents"] > 0
    with travel_db.session() as session:
        amounts = list(
            session.scalars(
                select(Payment.amount_cents)
                .where(Payment.reference == f"{prefix}-{booking_id}")
                .order_by(Payment.id)
            )
        )
    assert amounts == [result["refunded_cents"], -result["refunded_cents"]]


# --- car-book-capacity-first-day-only: every day of a rental needs a free car ------------


def test_car_rental_booking_refuses_a_sold_out_later_day(travel_db: Database) -> None:
    offer = largest_basel(travel_db, CarRental, CarRental.fleet_size)
    with travel_db.transaction() as session:
        session.execute(update(CarRental).where(CarRental.id == offer.id).values(fleet_size=1))
        reservations.book(
            session, CAR_RENTAL, FIXTURE_PASSENGER_ID, offer.id, (day(22), day(23)), NOW
        )
    before = dump(travel_db)
    with (
        pytest.raises(UnavailableError, match=f"no car left on {day(22)}"),
        travel_db.transaction() as session,
    ):
        reservations.book(
            session, CAR_RENTAL, BUSINESS_PASSENGER_ID, offer.id, (day(21), day(22)), NOW
        )
    assert dump(travel_db) == before


# --- writes-not-atomic: a write that fails halfway leaves nothing behind -----------------


def test_write_transaction_leaves_nothing_behind_when_the_write_fails_halfway(
    travel_db: Database,
) -> None:
    hotel = largest_basel(travel_db, Hotel, Hotel.rooms)
    before = dump(travel_db)
    with pytest.raises(RuleViolationError, match="second step"), travel_db.transaction() as s:
        reservations.book(s, HOTEL, BUSINESS_PASSENGER_ID, hotel.id, (day(30), day(31)), NOW)
        record_payment(
            s,
            passenger_id=BUSINESS_PASSENGER_ID,
            amount_cents=1,
            kind="test",
            reference="test",
            description="a second step of the same write",
            now=NOW,
        )
        s.flush()
        raise RuleViolationError("the second step of the write failed")
    assert dump(travel_db) == before
    with travel_db.session() as session:
        stays = session.scalars(
            select(HotelBooking).where(HotelBooking.passenger_id == BUSINESS_PASSENGER_ID)
        )
        assert all(stay.checkin_date != date.fromisoformat(day(30)) for stay in stays)


# --- leave-answers-first-call-only: every CompleteOrEscalate answered, one pop ------------


def test_leave_skill_answers_every_complete_or_escalate_and_pops_once() -> None:
    first = call("CompleteOrEscalate", {"cancel": True, "reason": "done"})
    second = call("CompleteOrEscalate", {"cancel": True, "reason": "also done"})
    stack = ["update_flight", "book_hotel"]
    update_ = leave_skill(
        {
            "messages": [HumanMessage("thanks"), AIMessage("", tool_calls=[first, second])],
            "user_info": "",
            "dialog_state": stack,
            "remaining_steps": 10,
        }
    )
    answers = update_["messages"]
    assert [m.tool_call_id for m in answers] == [first["id"], second["id"]]
    assert "also done" in str(answers[1].content)
    assert update_dialog_stack(stack, update_["dialog_state"]) == ["update_flight"]


def test_graph_parallel_complete_or_escalate_calls_are_all_answered(
    travel_db: Database,
) -> None:
    model = ScriptedChatModel()
    assistant = build_assistant(travel_db, model)
    thread = Thread("gaps-leave", FIXTURE_PASSENGER_ID)
    first = call("CompleteOrEscalate", {"cancel": True, "reason": "done"})
    second = call("CompleteOrEscalate", {"cancel": True, "reason": "also done"})
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "change my flight"})),
        say("Which day?"),
        say("", first, second),
        say("Anything else?"),
    )
    list(assistant.send(thread, "change my flight"))
    list(assistant.send(thread, "never mind"))
    messages = assistant.messages(thread)
    answered: list[str | None] = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert answered.count(first["id"]) == answered.count(second["id"]) == 1
    assert assistant.active_assistant(thread) == "primary_assistant"
    assert messages[-1].content == "Anything else?"
