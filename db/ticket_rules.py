"""The checks every ticket change and cancellation starts with, and the fee-free window.

``ticket_number`` reads a ticket number; ``_owned_active_ticket`` finds the passenger's
own active ticket and ``_segments`` its flights in order; ``_require_segment_changeable``
refuses a segment that has departed, is checked in or leaves too soon; ``_fee_waiver``
says whether the booking is recent enough for no fee. The quotes (``db.ticket_quotes``)
and the writes (``db.tickets``) build on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.errors import InvalidInputError, NotFoundError, OwnershipError, RuleViolationError
from db.models import BoardingPass, Booking, Flight, Ticket, TicketFlight
from db.passengers import segment_has_departed
from db.rules import (
    FREE_WINDOW_HOURS_AFTER_BOOKING,
    MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL,
    hours,
)
from db.values import MAX_TICKET_CHARS, plain_text, shown, utc_time

# A ticket number is digits (16 in this database); spaces between groups are ignored.
_TICKET_NO = re.compile(r"[0-9]{1,16}")


def _short(view: dict[str, Any]) -> str:
    return (
        f"{view['flight_no']} {view['departure_airport']} -> {view['arrival_airport']} "
        f"departing {view['scheduled_departure']}"
    )


def ticket_number(value: str) -> str:
    """Return a ticket number without its spaces, or refuse what cannot be one.

    Raises:
        InvalidInputError: Not digits, or longer than a ticket number.
    """
    number = plain_text(value, "ticket_no", MAX_TICKET_CHARS).replace(" ", "")
    if not _TICKET_NO.fullmatch(number):
        raise InvalidInputError(
            f"ticket_no must be a ticket number (digits, e.g. 7240005432906569); "
            f"got {shown(value)}."
        )
    return number


def _owned_active_ticket(session: Session, passenger_id: str, ticket_no: str) -> Ticket:
    number = ticket_number(ticket_no)
    ticket = session.get(Ticket, number)
    if ticket is None:
        raise NotFoundError(
            f"No ticket {number} exists. The passenger's tickets are listed in their flight "
            "information (fetch_user_flight_information)."
        )
    if ticket.passenger_id != passenger_id:
        raise OwnershipError(f"Ticket {number} does not belong to passenger {passenger_id}.")
    if ticket.status != "active":
        raise RuleViolationError(
            f"Ticket {number} is {ticket.status}; it can no longer be changed or cancelled."
        )
    return ticket


@dataclass(frozen=True)
class _Segment:
    segment: TicketFlight
    flight: Flight
    boarding: BoardingPass | None


def _segments(session: Session, ticket_no: str) -> list[_Segment]:
    rows = session.execute(
        select(TicketFlight, Flight, BoardingPass)
        .join(Flight, Flight.flight_id == TicketFlight.flight_id)
        .outerjoin(
            BoardingPass,
            (BoardingPass.ticket_no == TicketFlight.ticket_no)
            & (BoardingPass.flight_id == TicketFlight.flight_id),
        )
        .where(TicketFlight.ticket_no == ticket_no)
        .order_by(Flight.scheduled_departure)
    ).all()
    return [_Segment(segment, flight, boarding) for segment, flight, boarding in rows]


def _require_segment_changeable(
    item: _Segment, view: dict[str, Any], ticket_no: str, now: datetime, verb: str
) -> None:
    """Refuse a segment that has departed, is checked in, or leaves too soon."""
    if segment_has_departed(item.flight, now):
        raise RuleViolationError(
            f"Flight {_short(view)} of ticket {ticket_no} has already departed; a flown "
            f"segment cannot be {verb}."
        )
    if item.boarding is not None and item.boarding.checked_in_at is not None:
        raise RuleViolationError(
            f"The passenger is already checked in for flight {_short(view)} (ticket "
            f"{ticket_no}); a checked-in segment cannot be {verb}. Contact the airport "
            "service desk."
        )
    if item.flight.scheduled_departure - now < hours(MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL):
        raise RuleViolationError(
            f"Flight {_short(view)} leaves in less than "
            f"{MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL} hours; ticket {ticket_no} can no "
            f"longer be {verb} (changes and cancellations close "
            f"{MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL} hours before departure)."
        )


def _fee_waiver(booking: Booking, now: datetime) -> str | None:
    """Return why no fee applies (inside the free window), or ``None``."""
    if now - booking.book_date <= hours(FREE_WINDOW_HOURS_AFTER_BOOKING):
        return (
            f"free: booked {utc_time(booking.book_date)}, within "
            f"{FREE_WINDOW_HOURS_AFTER_BOOKING} hours"
        )
    return None
