"""The passenger's ticket changes and cancellations: rules, quotes and writes.

Rules enforced here, so that no tool can skip them (numbers from ``db.rules``):

* a ticket is changed or cancelled only by its passenger, and only while ``active``;
* a segment that has departed or is checked in cannot be changed or cancelled, nor one
  departing less than ``MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL`` hours from now;
* a segment moves only to another flight on the same departure and arrival airports,
  with a bookable status, departing at least ``MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE``
  hours from now, with a fare and a free seat in the ticket's fare class, and still in
  order with the ticket's other segments;
* within ``FREE_WINDOW_HOURS_AFTER_BOOKING`` hours of the booking no fee is charged;
  otherwise the fare class's change or cancel fee;
* a higher fare on the new flight is charged (the fare difference); a lower one is not
  refunded; a cancellation refunds what was paid for the cancelled segments minus the
  cancel fee.

Flights are found and shown, and their seats left counted, by ``db.flights``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from db.errors import (
    InvalidInputError,
    NotFoundError,
    OwnershipError,
    RuleViolationError,
    UnavailableError,
)
from db.flights import airport_zones, flight_view, seats_left
from db.models import (
    BOOKABLE_FLIGHT_STATUSES,
    Airport,
    BoardingPass,
    Booking,
    Flight,
    FlightFare,
    Seat,
    Ticket,
    TicketFlight,
)
from db.passengers import segment_has_departed
from db.rules import (
    FREE_WINDOW_HOURS_AFTER_BOOKING,
    MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL,
    MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE,
    fare_rule,
    hours,
)
from db.values import (
    MAX_TICKET_CHARS,
    AmountKind,
    amount_line,
    fmt_money,
    money,
    plain_text,
    row_id,
    shown,
    utc_time,
)
from db.writes import record_payment

_SEAT = re.compile(r"^(\d+)([A-Z]*)$")
# A ticket number is digits (16 in this database); spaces between groups are ignored.
_TICKET_NO = re.compile(r"[0-9]{1,16}")


# Ticket rules ----------------------------------------------------------------------------


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


def _seat_key(seat_no: str) -> tuple[int, str]:
    match = _SEAT.match(seat_no)
    if match is None:
        return (10_000, seat_no)
    return (int(match.group(1)), match.group(2))


def _free_seat(
    session: Session, flight: Flight, fare_conditions: str, preferred: str | None
) -> str | None:
    """Pick a free seat of a class: the same seat if free, else the first by row."""
    taken = set(
        session.scalars(
            select(BoardingPass.seat_no).where(BoardingPass.flight_id == flight.flight_id)
        )
    )
    free = sorted(
        (
            seat
            for seat in session.scalars(
                select(Seat.seat_no).where(
                    Seat.aircraft_code == flight.aircraft_code,
                    Seat.fare_conditions == fare_conditions,
                )
            )
            if seat not in taken
        ),
        key=_seat_key,
    )
    if not free:
        return None
    if preferred in free:
        return preferred
    if preferred is not None:
        letter = _seat_key(preferred)[1]
        for seat in free:
            if _seat_key(seat)[1] == letter:
                return seat
    return free[0]


# Change ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TicketChangeQuote:
    """What moving a ticket's segment to another flight would do, computed without writing.

    Attributes:
        passenger_id: The ticket's passenger.
        ticket_no: The ticket.
        fare_conditions: The segment's fare class (kept on the new flight).
        old_flight: The current flight as shown (see ``flight_view``).
        new_flight: The new flight as shown.
        old_seat: The current seat, if one is assigned.
        new_seat: The seat that will be assigned on the new flight.
        paid_cents: What was paid for the segment.
        new_fare_cents: The fare of the class on the new flight.
        fare_difference_cents: The fare increase charged (never negative).
        change_fee_cents: The change fee (0 inside the free window).
        fee_note: Why the fee is what it is.
    """

    passenger_id: str
    ticket_no: str
    fare_conditions: str
    old_flight: dict[str, Any]
    new_flight: dict[str, Any]
    old_seat: str | None
    new_seat: str | None
    paid_cents: int
    new_fare_cents: int
    fare_difference_cents: int
    change_fee_cents: int
    fee_note: str

    title = "Change flight"

    @property
    def total_cents(self) -> int:
        """Return what the change costs: fee plus fare difference."""
        return self.change_fee_cents + self.fare_difference_cents

    @property
    def amount_kind(self) -> AmountKind:
        """Return what the customer does with ``amount_cents``: a change is paid for."""
        return "pay"

    @property
    def amount_cents(self) -> int:
        """Return what the customer pays, for the preview's last line and its callers."""
        return self.total_cents

    def lines(self) -> list[str]:
        """Return the before -> after and price lines shown before approval."""
        lines = [
            f"Ticket {self.ticket_no} ({self.fare_conditions})",
            f"Flight: {_short(self.old_flight)}",
            f"     -> {_short(self.new_flight)}",
        ]
        if self.old_seat or self.new_seat:
            lines.append(f"Seat: {self.old_seat or 'none'} -> {self.new_seat or 'none'}")
        lines.append(
            f"Fare paid {fmt_money(self.paid_cents)}, fare on the new flight "
            f"{fmt_money(self.new_fare_cents)}: difference charged "
            f"{fmt_money(self.fare_difference_cents)}"
            + (" (a lower fare is not refunded)" if self.new_fare_cents < self.paid_cents else "")
        )
        lines.append(f"Change fee: {fmt_money(self.change_fee_cents)} ({self.fee_note})")
        lines.append(amount_line(self.amount_kind, self.amount_cents))
        return lines

    def as_result(self, boarding_no: int | None) -> dict[str, Any]:
        """Return the JSON-able result of the applied change."""
        return {
            "status": "changed",
            "ticket_no": self.ticket_no,
            "fare_conditions": self.fare_conditions,
            "old_flight": self.old_flight,
            "new_flight": self.new_flight,
            "old_seat": self.old_seat,
            "new_seat": self.new_seat,
            "boarding_no": boarding_no,
            **money("fare_difference", self.fare_difference_cents),
            **money("change_fee", self.change_fee_cents),
            "fee_note": self.fee_note,
            **money("charged", self.total_cents),
            "summary": (
                f"Ticket {self.ticket_no} moved from {_short(self.old_flight)} to "
                f"{_short(self.new_flight)}"
                + (f", seat {self.new_seat}" if self.new_seat else "")
                + f". Charged {fmt_money(self.total_cents)}."
            ),
        }


def quote_ticket_change(
    session: Session, passenger_id: str, ticket_no: str, new_flight_id: int, now: datetime
) -> TicketChangeQuote:
    """Price moving a ticket's segment to ``new_flight_id`` without writing.

    The segment moved is the ticket's segment on the new flight's route.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the ticket).
        ticket_no: The ticket number.
        new_flight_id: The ``flight_id`` from ``search_flights``.
        now: The database clock's now.

    Returns:
        The quote of the change.

    Raises:
        InvalidInputError: The ticket number or flight id cannot be one.
        NotFoundError: Unknown ticket or flight.
        OwnershipError: The ticket is another passenger's.
        RuleViolationError: A rule forbids the change (see the module docstring).
        UnavailableError: No fare or seat is left in the ticket's class on the new flight.
    """
    ticket = _owned_active_ticket(session, passenger_id, ticket_no)
    new_flight = session.get(Flight, row_id(new_flight_id, "new_flight_id"))
    if new_flight is None:
        raise NotFoundError(
            f"No flight with flight_id {new_flight_id} exists. Use search_flights to find "
            "the flight_id of the new flight."
        )
    segments = _segments(session, ticket.ticket_no)
    airports = airport_zones(
        session,
        {new_flight.departure_airport, new_flight.arrival_airport}
        | {s.flight.departure_airport for s in segments}
        | {s.flight.arrival_airport for s in segments},
    )
    new_view = flight_view(new_flight, airports)
    if any(s.flight.flight_id == new_flight.flight_id for s in segments):
        raise RuleViolationError(
            f"Ticket {ticket.ticket_no} is already on flight {_short(new_view)}; choose a "
            "different flight."
        )
    route = (new_flight.departure_airport, new_flight.arrival_airport)
    matching = [
        s for s in segments if (s.flight.departure_airport, s.flight.arrival_airport) == route
    ]
    if not matching:
        routes = ", ".join(
            f"{s.flight.departure_airport} -> {s.flight.arrival_airport}" for s in segments
        )
        # The first sentence is the one a customer is shown (conversations.words.refusal_text):
        # no internal id in it; the model gets the flight_id after it.
        raise RuleViolationError(
            f"Flight {new_flight.flight_no} flies {route[0]} -> {route[1]}, but ticket "
            f"{ticket.ticket_no} has no segment on that route (it flies {routes}). A ticket "
            "can only move to a flight with the same departure and arrival airports, so "
            f"flight_id {new_flight.flight_id} cannot be used for it."
        )
    current = next((s for s in matching if not segment_has_departed(s.flight, now)), matching[0])
    old_view = flight_view(current.flight, airports)
    _require_segment_changeable(current, old_view, ticket.ticket_no, now, "changed")
    if new_flight.status not in BOOKABLE_FLIGHT_STATUSES:
        raise RuleViolationError(
            f"Flight {_short(new_view)} is {new_flight.status}; a ticket can only move to a "
            f"flight that is {', '.join(BOOKABLE_FLIGHT_STATUSES)}."
        )
    if new_flight.scheduled_departure - now < hours(MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE):
        raise RuleViolationError(
            f"Flight {_short(new_view)} leaves less than {MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE}"
            f" hours from now ({utc_time(now)}); choose a flight departing at least "
            f"{MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE} hours from now."
        )
    _require_connections(segments, current, new_flight, new_view, airports)
    fare_class = current.segment.fare_conditions
    fare = session.get(FlightFare, (new_flight.flight_id, fare_class))
    if fare is None:
        raise UnavailableError(
            f"Flight {_short(new_view)} has no {fare_class} fare. Choose another flight."
        )
    if seats_left(session, new_flight, fare_class) <= 0:
        raise UnavailableError(
            f"Flight {_short(new_view)} has no {fare_class} seat left. Search other dates "
            "or times with search_flights."
        )
    new_seat: str | None = None
    if current.boarding is not None:
        new_seat = _free_seat(session, new_flight, fare_class, current.boarding.seat_no)
        if new_seat is None:
            raise UnavailableError(
                f"Flight {_short(new_view)} has no {fare_class} seat left. Search other "
                "dates or times with search_flights."
            )
    booking = session.get(Booking, ticket.book_ref)
    assert booking is not None, "every ticket has a booking (foreign key)"
    waiver = _fee_waiver(booking, now)
    fee = 0 if waiver else fare_rule(fare_class).change_fee_cents
    note = waiver or f"{fare_class} change fee"
    return TicketChangeQuote(
        passenger_id=passenger_id,
        ticket_no=ticket.ticket_no,
        fare_conditions=fare_class,
        old_flight=old_view,
        new_flight=new_view,
        old_seat=current.boarding.seat_no if current.boarding else None,
        new_seat=new_seat,
        paid_cents=current.segment.amount_cents,
        new_fare_cents=fare.amount_cents,
        fare_difference_cents=max(fare.amount_cents - current.segment.amount_cents, 0),
        change_fee_cents=fee,
        fee_note=note,
    )


def _require_connections(
    segments: list[_Segment],
    current: _Segment,
    new_flight: Flight,
    new_view: dict[str, Any],
    airports: dict[str, Airport],
) -> None:
    """Keep a multi-segment itinerary in order around the moved segment."""
    index = segments.index(current)
    if index > 0:
        previous = segments[index - 1].flight
        if new_flight.scheduled_departure <= previous.scheduled_arrival:
            raise RuleViolationError(
                f"Flight {_short(new_view)} leaves before the ticket's previous segment "
                f"{_short(flight_view(previous, airports))} arrives. Choose a later flight, "
                "or change the earlier segment first."
            )
    if index + 1 < len(segments):
        following = segments[index + 1].flight
        if new_flight.scheduled_arrival >= following.scheduled_departure:
            raise RuleViolationError(
                f"Flight {_short(new_view)} arrives after the ticket's next segment "
                f"{_short(flight_view(following, airports))} leaves. Choose an earlier "
                "flight, or change the later segment first."
            )


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


# Cancel ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TicketCancelQuote:
    """What cancelling a ticket would do, computed without writing.

    Attributes:
        passenger_id: The ticket's passenger.
        ticket_no: The ticket.
        segments: The unflown segments that will be cancelled, as shown.
        paid_cents: What was paid for those segments.
        cancel_fee_cents: The fee kept (0 inside the free window, never above the paid
            amount).
        fee_note: Why the fee is what it is.
    """

    passenger_id: str
    ticket_no: str
    segments: tuple[dict[str, Any], ...]
    paid_cents: int
    cancel_fee_cents: int
    fee_note: str

    title = "Cancel ticket"

    @property
    def refund_cents(self) -> int:
        """Return the refund: paid minus the fee, never negative."""
        return max(self.paid_cents - self.cancel_fee_cents, 0)

    @property
    def amount_kind(self) -> AmountKind:
        """Return what the customer does with ``amount_cents``: a cancellation refunds."""
        return "refund"

    @property
    def amount_cents(self) -> int:
        """Return the refund, for the preview's last line and its callers."""
        return self.refund_cents

    def lines(self) -> list[str]:
        """Return the lines shown before approval."""
        lines = [f"Ticket {self.ticket_no}: every remaining flight is cancelled"]
        lines.extend(
            f"Flight: {_short(view)} ({view['fare_conditions']}) -> cancelled"
            for view in self.segments
        )
        lines.append(f"Paid for these flights: {fmt_money(self.paid_cents)}")
        lines.append(f"Cancellation fee: {fmt_money(self.cancel_fee_cents)} ({self.fee_note})")
        lines.append(amount_line(self.amount_kind, self.amount_cents))
        return lines

    def as_result(self) -> dict[str, Any]:
        """Return the JSON-able result of the applied cancellation."""
        return {
            "status": "cancelled",
            "ticket_no": self.ticket_no,
            "cancelled_flights": list(self.segments),
            **money("paid", self.paid_cents),
            **money("cancel_fee", self.cancel_fee_cents),
            "fee_note": self.fee_note,
            **money("refunded", self.refund_cents),
            "summary": (
                f"Ticket {self.ticket_no} is cancelled ({len(self.segments)} flight"
                f"{'' if len(self.segments) == 1 else 's'}). Refunded "
                f"{fmt_money(self.refund_cents)}."
            ),
        }


def quote_ticket_cancellation(
    session: Session, passenger_id: str, ticket_no: str, now: datetime
) -> TicketCancelQuote:
    """Price cancelling a ticket without writing.

    Every segment not yet flown is cancelled; each must be cancellable (not checked in,
    departing at least ``MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL`` hours from now). The fee
    is one per ticket: the highest cancel fee among the cancelled segments' classes.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the ticket).
        ticket_no: The ticket number.
        now: The database clock's now.

    Returns:
        The quote of the cancellation.

    Raises:
        InvalidInputError: The ticket number cannot be one.
        NotFoundError: Unknown ticket.
        OwnershipError: The ticket is another passenger's.
        RuleViolationError: The ticket is cancelled or flown, or a segment cannot be
            cancelled any more.
    """
    ticket = _owned_active_ticket(session, passenger_id, ticket_no)
    segments = _segments(session, ticket.ticket_no)
    airports = airport_zones(
        session,
        {s.flight.departure_airport for s in segments}
        | {s.flight.arrival_airport for s in segments},
    )
    remaining = [s for s in segments if not segment_has_departed(s.flight, now)]
    if not remaining:
        flown = "; ".join(_short(flight_view(s.flight, airports)) for s in segments)
        raise RuleViolationError(
            f"Every flight of ticket {ticket.ticket_no} has already departed ({flown}); a "
            "flown ticket cannot be cancelled."
        )
    views = []
    for item in remaining:
        view = flight_view(item.flight, airports)
        _require_segment_changeable(item, view, ticket.ticket_no, now, "cancelled")
        views.append({**view, "fare_conditions": item.segment.fare_conditions})
    paid = sum(item.segment.amount_cents for item in remaining)
    booking = session.get(Booking, ticket.book_ref)
    assert booking is not None, "every ticket has a booking (foreign key)"
    waiver = _fee_waiver(booking, now)
    fare_class = max(
        (item.segment.fare_conditions for item in remaining),
        key=lambda name: fare_rule(name).cancel_fee_cents,
    )
    fee = 0 if waiver else min(fare_rule(fare_class).cancel_fee_cents, paid)
    return TicketCancelQuote(
        passenger_id=passenger_id,
        ticket_no=ticket.ticket_no,
        segments=tuple(views),
        paid_cents=paid,
        cancel_fee_cents=fee,
        fee_note=waiver or f"{fare_class} cancellation fee",
    )


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
