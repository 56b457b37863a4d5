"""Ticket quotes: what a change or a cancellation would do and cost, computed without writing.

A quote is what the customer approves (its ``lines``) and what the write applies
(``db.tickets``). Rules enforced here, so that no tool can skip them (numbers from
``db.rules``; the checks changes and cancellations share are ``db.ticket_rules``):

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

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from db.errors import NotFoundError, RuleViolationError, UnavailableError
from db.flights import airport_zones, flight_view, seats_left
from db.models import BOOKABLE_FLIGHT_STATUSES, Airport, Booking, Flight, FlightFare
from db.passengers import segment_has_departed
from db.rules import MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE, fare_rule, hours
from db.seats import _free_seat
from db.ticket_rules import (
    _fee_waiver,
    _owned_active_ticket,
    _require_segment_changeable,
    _Segment,
    _segments,
    _short,
)
from db.values import AmountKind, amount_line, fmt_money, money, row_id, utc_time

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
