"""The passenger's own records: identity, tickets with their segments, and reservations.

``passenger_summary`` is what the assistant knows about the customer on every turn (the
graph's ``fetch_user_info`` node) and what ``fetch_user_flight_information`` returns.
Cancelled tickets and reservations stay listed, marked as such, and a rebooked ticket
shows its new flight: nothing a write does makes a record vanish.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from db.errors import NotFoundError
from db.models import (
    Airport,
    BoardingPass,
    Booking,
    CarRental,
    CarRentalBooking,
    ExcursionBooking,
    Flight,
    Hotel,
    HotelBooking,
    Passenger,
    Ticket,
    TicketFlight,
    TripRecommendation,
)
from db.values import iso_date, local_time, money, utc_time

# Flight statuses that mean the aircraft has left.
DEPARTED_STATUSES = ("Departed", "Arrived")


def passenger_exists(session: Session, passenger_id: str) -> bool:
    """Tell whether a passenger with this id exists."""
    return session.get(Passenger, passenger_id) is not None


def require_passenger(session: Session, passenger_id: str) -> Passenger:
    """Return the passenger, or raise ``NotFoundError`` naming the id.

    Args:
        session: An open session.
        passenger_id: The configured passenger id.

    Raises:
        NotFoundError: No passenger has this id.
    """
    passenger = session.get(Passenger, passenger_id)
    if passenger is None:
        raise NotFoundError(
            f"No passenger with id {passenger_id} exists. Check the passenger id the "
            "conversation was started with."
        )
    return passenger


def segment_has_departed(flight: Flight, now: datetime) -> bool:
    """Tell whether a flight has left (by status, actual time or schedule)."""
    return (
        flight.status in DEPARTED_STATUSES
        or flight.actual_departure is not None
        or flight.scheduled_departure <= now
    )


def passenger_summary(session: Session, passenger_id: str, now: datetime) -> dict[str, Any]:
    """Return everything the passenger holds with the company, ready to be shown.

    Args:
        session: An open session.
        passenger_id: The configured passenger id.
        now: The database clock's now (decides which segments are flown).

    Returns:
        ``{"passenger_id", "name", "tickets": [...], "hotel_reservations": [...],
        "car_rental_reservations": [...], "excursion_reservations": [...]}``. A ticket is
        ``{"ticket_no", "book_ref", "booked_at", "status", "segments": [...]}`` and a
        segment ``{"flight_id", "flight_no", "departure_airport", "arrival_airport",
        "route", "departure", "arrival", "flight_status", "segment_status",
        "fare_conditions", "seat_no", "boarding_no", "checked_in", "amount_paid_cents",
        "amount_paid"}`` with local airport times; ``segment_status`` is ``"upcoming"``,
        ``"flown"`` or ``"cancelled"``. Tickets are ordered by their first departure,
        reservations by their first day.

    Raises:
        NotFoundError: No passenger has this id.
    """
    passenger = require_passenger(session, passenger_id)
    return {
        "passenger_id": passenger.passenger_id,
        "name": passenger.name,
        "tickets": _tickets(session, passenger_id, now),
        "hotel_reservations": _hotel_reservations(session, passenger_id),
        "car_rental_reservations": _car_reservations(session, passenger_id),
        "excursion_reservations": _excursion_reservations(session, passenger_id),
    }


def _tickets(session: Session, passenger_id: str, now: datetime) -> list[dict[str, Any]]:
    departure = aliased(Airport)
    arrival = aliased(Airport)
    rows = session.execute(
        select(Ticket, Booking, TicketFlight, Flight, departure, arrival, BoardingPass)
        .join(Booking, Booking.book_ref == Ticket.book_ref)
        .join(TicketFlight, TicketFlight.ticket_no == Ticket.ticket_no)
        .join(Flight, Flight.flight_id == TicketFlight.flight_id)
        .join(departure, departure.airport_code == Flight.departure_airport)
        .join(arrival, arrival.airport_code == Flight.arrival_airport)
        .outerjoin(
            BoardingPass,
            (BoardingPass.ticket_no == TicketFlight.ticket_no)
            & (BoardingPass.flight_id == TicketFlight.flight_id),
        )
        .where(Ticket.passenger_id == passenger_id)
        .order_by(Flight.scheduled_departure, Ticket.ticket_no)
    ).all()
    tickets: dict[str, dict[str, Any]] = {}
    segments: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ticket, booking, segment, flight, dep, arr, boarding in rows:
        if ticket.ticket_no not in tickets:
            tickets[ticket.ticket_no] = {
                "ticket_no": ticket.ticket_no,
                "book_ref": ticket.book_ref,
                "booked_at": utc_time(booking.book_date),
                "status": ticket.status,
            }
        if segment_has_departed(flight, now):
            state = "flown"
        elif ticket.status == "cancelled":
            state = "cancelled"
        else:
            state = "upcoming"
        segments[ticket.ticket_no].append(
            {
                "flight_id": flight.flight_id,
                "flight_no": flight.flight_no,
                "departure_airport": flight.departure_airport,
                "arrival_airport": flight.arrival_airport,
                "route": f"{dep.city} ({dep.airport_code}) -> {arr.city} ({arr.airport_code})",
                "departure": local_time(flight.scheduled_departure, dep.timezone),
                "arrival": local_time(flight.scheduled_arrival, arr.timezone),
                "flight_status": flight.status,
                "segment_status": state,
                "fare_conditions": segment.fare_conditions,
                "seat_no": boarding.seat_no if boarding else None,
                "boarding_no": boarding.boarding_no if boarding else None,
                "checked_in": bool(boarding and boarding.checked_in_at),
                **money("amount_paid", segment.amount_cents),
            }
        )
    return [{**ticket, "segments": segments[number]} for number, ticket in tickets.items()]


def _hotel_reservations(session: Session, passenger_id: str) -> list[dict[str, Any]]:
    rows = session.execute(
        select(HotelBooking, Hotel)
        .join(Hotel, Hotel.id == HotelBooking.hotel_id)
        .where(HotelBooking.passenger_id == passenger_id)
        .order_by(HotelBooking.checkin_date, HotelBooking.id)
    ).all()
    return [
        {
            "booking_id": booking.id,
            "hotel_id": hotel.id,
            "hotel_name": hotel.name,
            "location": hotel.location,
            "checkin_date": iso_date(booking.checkin_date),
            "checkout_date": iso_date(booking.checkout_date),
            "nights": (booking.checkout_date - booking.checkin_date).days,
            "status": booking.status,
            **money("total", booking.total_cents),
        }
        for booking, hotel in rows
    ]


def _car_reservations(session: Session, passenger_id: str) -> list[dict[str, Any]]:
    rows = session.execute(
        select(CarRentalBooking, CarRental)
        .join(CarRental, CarRental.id == CarRentalBooking.rental_id)
        .where(CarRentalBooking.passenger_id == passenger_id)
        .order_by(CarRentalBooking.start_date, CarRentalBooking.id)
    ).all()
    return [
        {
            "booking_id": booking.id,
            "rental_id": rental.id,
            "company": rental.name,
            "car_class": rental.car_class,
            "location": rental.location,
            "start_date": iso_date(booking.start_date),
            "end_date": iso_date(booking.end_date),
            "days": (booking.end_date - booking.start_date).days + 1,
            "status": booking.status,
            **money("total", booking.total_cents),
        }
        for booking, rental in rows
    ]


def _excursion_reservations(session: Session, passenger_id: str) -> list[dict[str, Any]]:
    rows = session.execute(
        select(ExcursionBooking, TripRecommendation)
        .join(TripRecommendation, TripRecommendation.id == ExcursionBooking.recommendation_id)
        .where(ExcursionBooking.passenger_id == passenger_id)
        .order_by(ExcursionBooking.date, ExcursionBooking.id)
    ).all()
    return [
        {
            "booking_id": booking.id,
            "recommendation_id": excursion.id,
            "name": excursion.name,
            "location": excursion.location,
            "date": iso_date(booking.date),
            "status": booking.status,
            **money("total", booking.total_cents),
        }
        for booking, excursion in rows
    ]
