"""Ticket writes: apply a quoted change or cancellation to the ticket, its seats and payments.

Each write locks its rows, quotes again (``db.ticket_quotes``) and applies exactly that
quote. The quotes are named here too (``__all__``): a ticket's previews and writes are
reached through this one module.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from db.models import BoardingPass, Booking, Flight, Ticket, TicketFlight
from db.ticket_quotes import quote_ticket_cancellation, quote_ticket_change
from db.ticket_rules import _short, ticket_number
from db.values import row_id
from db.writes import record_payment

__all__ = [
    "cancel_ticket",
    "quote_ticket_cancellation",
    "quote_ticket_change",
    "update_ticket_to_new_flight",
]


def update_ticket_to_new_flight(
    session: Session, passenger_id: str, ticket_no: str, new_flight_id: int, now: datetime
) -> dict[str, Any]:
    """Move a ticket's segment to another flight, with its seat, and charge the change.

    Applies exactly ``quote_ticket_change`` (and raises what it raises): the segment row
    and its boarding pass move to the new flight (a free seat of the same class, a new
    boarding number), the amount paid rises by any fare difference, and a payment is
    recorded.

    Concurrent writes (PostgreSQL runs them side by side under READ COMMITTED) are
    ordered by row locks taken before the quote reads anything: first the ticket, so
    changes and a cancellation of one ticket apply one after the other, each quoted from
    where the ticket is once the previous one committed (otherwise a second change would
    move a segment that is no longer there, yet charge for it); then the new flight, so
    changes competing for its last seat of a class, or its next boarding number, count
    the seats the previous one took. ``cancel_ticket`` locks only the ticket, so the
    order never inverts and two writes never wait for each other in a circle. On SQLite
    ``BEGIN IMMEDIATE`` (``db.writes.begin_write``) already serialises every writer.

    Returns:
        ``status``, ``ticket_no``, ``old_flight``, ``new_flight``, seats,
        ``boarding_no``, ``fare_difference``, ``change_fee``, ``charged`` (cents and
        text) and a ``summary`` sentence.
    """
    session.get(Ticket, ticket_number(ticket_no), with_for_update=True)
    new_flight = session.get(Flight, row_id(new_flight_id, "new_flight_id"), with_for_update=True)
    quote = quote_ticket_change(session, passenger_id, ticket_no, new_flight_id, now)
    assert new_flight is not None
    old_flight_id = int(quote.old_flight["flight_id"])
    had_boarding_pass = quote.old_seat is not None
    session.execute(
        delete(BoardingPass)
        .where(BoardingPass.ticket_no == quote.ticket_no, BoardingPass.flight_id == old_flight_id)
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(TicketFlight)
        .where(TicketFlight.ticket_no == quote.ticket_no, TicketFlight.flight_id == old_flight_id)
        .values(
            flight_id=new_flight_id,
            amount_cents=TicketFlight.amount_cents + quote.fare_difference_cents,
        )
        .execution_options(synchronize_session=False)
    )
    boarding_no: int | None = None
    if had_boarding_pass and quote.new_seat is not None:
        last = session.scalar(
            select(func.max(BoardingPass.boarding_no)).where(
                BoardingPass.flight_id == new_flight_id
            )
        )
        boarding_no = (last or 0) + 1
        session.add(
            BoardingPass(
                ticket_no=quote.ticket_no,
                flight_id=new_flight_id,
                boarding_no=boarding_no,
                seat_no=quote.new_seat,
                checked_in_at=None,
            )
        )
    if quote.fare_difference_cents:
        ticket = session.get(Ticket, quote.ticket_no)
        assert ticket is not None
        session.execute(
            update(Booking)
            .where(Booking.book_ref == ticket.book_ref)
            .values(total_amount_cents=Booking.total_amount_cents + quote.fare_difference_cents)
            .execution_options(synchronize_session=False)
        )
    record_payment(
        session,
        passenger_id=passenger_id,
        amount_cents=quote.total_cents,
        kind="ticket_change",
        reference=quote.ticket_no,
        description=f"Change of ticket {quote.ticket_no} to {_short(quote.new_flight)}",
        now=now,
    )
    session.flush()
    session.expire_all()
    return quote.as_result(boarding_no)


def cancel_ticket(
    session: Session, passenger_id: str, ticket_no: str, now: datetime
) -> dict[str, Any]:
    """Cancel a ticket: release its seats, mark it cancelled and refund it.

    Applies exactly ``quote_ticket_cancellation`` (and raises what it raises). The
    segments stay on the ticket so it remains visible as cancelled.

    Returns:
        ``status``, ``ticket_no``, ``cancelled_flights``, ``paid``, ``cancel_fee``,
        ``refunded`` (cents and text) and a ``summary`` sentence.
    """
    ticket = session.get(Ticket, ticket_number(ticket_no), with_for_update=True)
    quote = quote_ticket_cancellation(session, passenger_id, ticket_no, now)
    assert ticket is not None
    flight_ids = [int(view["flight_id"]) for view in quote.segments]
    session.execute(
        delete(BoardingPass)
        .where(BoardingPass.ticket_no == quote.ticket_no, BoardingPass.flight_id.in_(flight_ids))
        .execution_options(synchronize_session=False)
    )
    ticket.status = "cancelled"
    record_payment(
        session,
        passenger_id=passenger_id,
        amount_cents=-quote.refund_cents,
        kind="ticket_cancellation",
        reference=quote.ticket_no,
        description=f"Refund of cancelled ticket {quote.ticket_no}",
        now=now,
    )
    session.flush()
    return quote.as_result()
