"""The passenger's own records: identity, tickets with their segments, and reservations.

``passenger_summary`` is what the assistant knows about the customer on every turn (the
graph's ``fetch_user_info`` node) and what ``fetch_user_flight_information`` returns.
Cancelled tickets and reservations stay listed, marked as such, and a rebooked ticket
shows its new flight: nothing a write does makes a record vanish.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.orm import Session, aliased

from db import reservations
from db.domains import RESERVATION_KINDS
from db.models import (
    Airport,
    BoardingPass,
    Booking,
    Flight,
    Passenger,
    Ticket,
    TicketFlight,
)
from db.values import local_time, money, utc_time

# Flight statuses that mean the aircraft has left.
DEPARTED_STATUSES = ("Departed", "Arrived")


def passenger_exists(session: Session, passenger_id: str) -> bool:
    """Tell whether a passenger with this id exists."""
    return session.get(Passenger, passenger_id) is not None


class FlightTimes(Protocol):
    """What tells whether a flight has left: a ``Flight``, or a row with its columns."""

    @property
    def status(self) -> str:
        """The flight's status (``Departed`` and ``Arrived`` mean it left)."""
        ...

    @property
    def actual_departure(self) -> datetime | None:
        """When it actually left, if it did."""
        ...

    @property
    def scheduled_departure(self) -> datetime:
        """When it is scheduled to leave."""
        ...


def segment_has_departed(flight: FlightTimes, now: datetime) -> bool:
    """Tell whether a flight has left (by status, actual time or schedule)."""
    return (
        flight.status in DEPARTED_STATUSES
        or flight.actual_departure is not None
        or flight.scheduled_departure <= now
    )


# What ``passenger_summary`` reads through: a session, or a connection (rows only).
Reader = Session | Connection

# The queries of ``passenger_summary``, built once: it runs on every turn, and building a
# statement costs more than running it. Each selects only the columns it shows (rows, not
# ORM objects).
_PASSENGER = select(Passenger.passenger_id, Passenger.name).where(
    Passenger.passenger_id == bindparam("passenger_id")
)
_DEPARTURE = aliased(Airport)
_ARRIVAL = aliased(Airport)
_TICKETS = (
    select(
        Ticket.ticket_no,
        Ticket.book_ref,
        Ticket.status.label("ticket_status"),
        Booking.book_date,
        TicketFlight.fare_conditions,
        TicketFlight.amount_cents,
        Flight.flight_id,
        Flight.flight_no,
        Flight.departure_airport,
        Flight.arrival_airport,
        Flight.scheduled_departure,
        Flight.scheduled_arrival,
        Flight.actual_departure,
        Flight.status,
        _DEPARTURE.city.label("departure_city"),
        _DEPARTURE.timezone.label("departure_timezone"),
        _ARRIVAL.city.label("arrival_city"),
        _ARRIVAL.timezone.label("arrival_timezone"),
        BoardingPass.seat_no,
        BoardingPass.boarding_no,
        BoardingPass.checked_in_at,
    )
    .join(Booking, Booking.book_ref == Ticket.book_ref)
    .join(TicketFlight, TicketFlight.ticket_no == Ticket.ticket_no)
    .join(Flight, Flight.flight_id == TicketFlight.flight_id)
    .join(_DEPARTURE, _DEPARTURE.airport_code == Flight.departure_airport)
    .join(_ARRIVAL, _ARRIVAL.airport_code == Flight.arrival_airport)
    .outerjoin(
        BoardingPass,
        (BoardingPass.ticket_no == TicketFlight.ticket_no)
        & (BoardingPass.flight_id == TicketFlight.flight_id),
    )
    .where(Ticket.passenger_id == bindparam("passenger_id"))
    .order_by(Flight.scheduled_departure, Ticket.ticket_no)
)


def passenger_summary(session: Reader, passenger_id: str, now: datetime) -> dict[str, Any]:
    """Return everything the passenger holds with the company, ready to be shown.

    Args:
        session: An open session, or a connection (``Database.rows``: cheaper, it reads
            rows only).
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
    passenger = session.execute(_PASSENGER, {"passenger_id": passenger_id}).first()
    if passenger is None:
        raise reservations.no_such_passenger(passenger_id)
    return {
        "passenger_id": passenger.passenger_id,
        "name": passenger.name,
        "tickets": _tickets(session, passenger_id, now),
        **{
            kind.summary_key: reservations.summary(session, kind, passenger_id)
            for kind in RESERVATION_KINDS
        },
    }


def _tickets(session: Reader, passenger_id: str, now: datetime) -> list[dict[str, Any]]:
    rows = session.execute(_TICKETS, {"passenger_id": passenger_id}).all()
    tickets: dict[str, dict[str, Any]] = {}
    segments: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.ticket_no not in tickets:
            tickets[row.ticket_no] = {
                "ticket_no": row.ticket_no,
                "book_ref": row.book_ref,
                "booked_at": utc_time(row.book_date),
                "status": row.ticket_status,
            }
        if segment_has_departed(row, now):
            state = "flown"
        elif row.ticket_status == "cancelled":
            state = "cancelled"
        else:
            state = "upcoming"
        segments[row.ticket_no].append(
            {
                "flight_id": row.flight_id,
                "flight_no": row.flight_no,
                "departure_airport": row.departure_airport,
                "arrival_airport": row.arrival_airport,
                "route": f"{row.departure_city} ({row.departure_airport}) -> "
                f"{row.arrival_city} ({row.arrival_airport})",
                "departure": local_time(row.scheduled_departure, row.departure_timezone),
                "arrival": local_time(row.scheduled_arrival, row.arrival_timezone),
                "flight_status": row.status,
                "segment_status": state,
                "fare_conditions": row.fare_conditions,
                "seat_no": row.seat_no,
                "boarding_no": row.boarding_no,
                "checked_in": row.checked_in_at is not None,
                **money("amount_paid", row.amount_cents),
            }
        )
    return [{**ticket, "segments": segments[number]} for number, ticket in tickets.items()]


@dataclass(frozen=True)
class NextFlight:
    """The passenger's next flight, as a new conversation's suggested questions name it.

    Attributes:
        flight_no: Its flight number ("LX0112").
        arrival_city: Where that flight lands.
        destination_city: Where the trip goes: the ticket's last stop, or where this
            flight lands when the ticket comes back to where it started (a return).
    """

    flight_no: str
    arrival_city: str
    destination_city: str


def next_flight(session: Reader, passenger_id: str, now: datetime) -> NextFlight | None:
    """Return the passenger's next flight not yet flown, on a ticket not cancelled.

    ``None`` when there is none (or no such passenger).
    """
    rows = session.execute(_TICKETS, {"passenger_id": passenger_id}).all()
    ahead = [r for r in rows if r.ticket_status != "cancelled" and not segment_has_departed(r, now)]
    if not ahead:
        return None
    first = ahead[0]  # by departure
    ticket = [r for r in rows if r.ticket_no == first.ticket_no]
    destination = ticket[-1].arrival_city
    if ticket[-1].arrival_airport == ticket[0].departure_airport:  # a return: back home
        destination = first.arrival_city
    return NextFlight(first.flight_no, first.arrival_city, destination)
