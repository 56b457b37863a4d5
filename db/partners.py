"""The steps every kind of partner reservation shares: find its rows, quote a write, apply it.

The functions here look up, quote and write a reservation of any declared kind
(``db.reservation_kind``), so the three kinds share one implementation of ownership,
late fees (``db.reservation_deadlines``), payments and the write lock order. A quote is
a ``ReservationQuote`` (``db.reservation_quote``); a write applies exactly the quote.
``first_matches`` returns a search's first page and its total.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import QueryableAttribute, Session

from db.errors import NotFoundError, OwnershipError, RuleViolationError
from db.periods import Dates
from db.reservation_deadlines import late_fee, require_not_started
from db.reservation_kind import BookingT, CatalogueT, ReservationKind
from db.reservation_quote import ReservationQuote
from db.values import row_id
from db.writes import record_payment

EntryT = TypeVar("EntryT")  # a row a search returns


def first_matches(
    session: Session,
    query: Select[EntryT],
    order_by: Sequence[QueryableAttribute[Any]],
    limit: int,
) -> tuple[list[EntryT], int]:
    """Return the first ``limit`` entries ``query`` finds in ``order_by`` order, and the total.

    One statement: ``count(*) OVER ()`` counts every matching row before ``LIMIT``
    applies, so the total needs no second query (a round trip less on PostgreSQL).
    """
    if limit < 1:  # no row would carry the count
        return [], session.scalar(select(func.count()).select_from(query.subquery())) or 0
    counted = query.add_columns(func.count().over()).order_by(*order_by).limit(limit)
    rows = session.execute(counted).all()
    return [row[0] for row in rows], (int(rows[0][1]) if rows else 0)


def catalogue_entry(
    session: Session,
    kind: ReservationKind[BookingT, CatalogueT],
    item_id: int,
    *,
    lock: bool = False,
) -> CatalogueT:
    """Return a catalogue entry, locked ``FOR UPDATE`` when ``lock`` is set.

    Raises:
        InvalidInputError: The id is not one an id column can hold.
        NotFoundError: No entry has that id.
    """
    item = session.get(
        kind.catalogue_model, row_id(item_id, kind.catalogue_key), with_for_update=lock
    )
    if item is None:
        raise NotFoundError(kind.missing_item.format(id=item_id))
    return item


def owned_booking(
    session: Session,
    kind: ReservationKind[BookingT, CatalogueT],
    passenger_id: str,
    booking_id: int,
    *,
    lock: bool = False,
) -> BookingT:
    """Return a confirmed reservation of the passenger, locked when ``lock`` is set.

    Raises:
        InvalidInputError: The id is not one an id column can hold.
        NotFoundError: No reservation has that id.
        OwnershipError: It is another passenger's.
        RuleViolationError: It is cancelled.
    """
    booking = session.get(
        kind.booking_model, row_id(booking_id, "booking_id"), with_for_update=lock
    )
    if booking is None:
        raise NotFoundError(kind.missing_booking.format(id=booking_id))
    if booking.passenger_id != passenger_id:
        raise OwnershipError(
            f"{kind.label} {booking_id} does not belong to passenger {passenger_id}."
        )
    if booking.status != "confirmed":
        raise RuleViolationError(f"{kind.label} {booking_id} is already cancelled.")
    return booking


def quote_booking(
    kind: ReservationKind[BookingT, CatalogueT],
    passenger_id: str,
    item: CatalogueT,
    dates: Dates,
    total_cents: int,
    price_detail: str,
    extra_lines: tuple[str, ...] = (),
) -> ReservationQuote:
    """Return the quote of a new reservation, checked and priced by the caller."""
    return ReservationQuote(
        action="book",
        kind=kind.kind,
        noun=kind.noun,
        kind_label=kind.label,
        passenger_id=passenger_id,
        booking_id=None,
        item=kind.view(item),
        before=None,
        after=kind.dates_dict(dates),
        before_text=None,
        after_text=kind.dates_text(dates),
        old_total_cents=0,
        new_total_cents=total_cents,
        price_detail=price_detail,
        extra_lines=extra_lines,
    )


def quote_change(
    kind: ReservationKind[BookingT, CatalogueT],
    booking: BookingT,
    item: CatalogueT,
    dates: Dates,
    total_cents: int,
    price_detail: str | None,
    now: datetime,
) -> ReservationQuote:
    """Return the quote of moving a reservation to ``dates``, checked and priced by the caller.

    The late fee of the current dates is added.
    """
    before = kind.dates_of(booking)
    fee, note = late_fee(kind, booking, now)
    return ReservationQuote(
        action="update",
        kind=kind.kind,
        noun=kind.noun,
        kind_label=kind.label,
        passenger_id=booking.passenger_id,
        booking_id=booking.id,
        item=kind.view(item),
        before=kind.dates_dict(before),
        after=kind.dates_dict(dates),
        before_text=kind.dates_text(before),
        after_text=kind.dates_text(dates),
        old_total_cents=booking.total_cents,
        new_total_cents=total_cents,
        price_detail=price_detail,
        fee_cents=fee,
        fee_note=note,
    )


def quote_cancellation(
    session: Session,
    kind: ReservationKind[BookingT, CatalogueT],
    passenger_id: str,
    booking_id: int,
    now: datetime,
) -> ReservationQuote:
    """Price the cancellation of a reservation without writing.

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is already cancelled or has started.
    """
    booking = owned_booking(session, kind, passenger_id, booking_id)
    before = kind.dates_of(booking)
    require_not_started(before[0], now, f"{kind.label} {booking_id}")
    item = catalogue_entry(session, kind, kind.catalogue_id(booking))
    fee, note = late_fee(kind, booking, now)
    return ReservationQuote(
        action="cancel",
        kind=kind.kind,
        noun=kind.noun,
        kind_label=kind.label,
        passenger_id=passenger_id,
        booking_id=booking.id,
        item=kind.view(item),
        before=kind.dates_dict(before),
        after=None,
        before_text=kind.dates_text(before),
        after_text=None,
        old_total_cents=booking.total_cents,
        new_total_cents=0,
        price_detail=None,
        fee_cents=min(fee, booking.total_cents),
        fee_note=note,
    )


def book(
    session: Session,
    kind: ReservationKind[BookingT, CatalogueT],
    item_id: int,
    now: datetime,
    quote: Callable[[], ReservationQuote],
) -> dict[str, Any]:
    """Lock the catalogue entry, then write and charge the booking ``quote()`` prices.

    Returns:
        The quote's result with the new reservation id.
    """
    catalogue_entry(session, kind, item_id, lock=True)
    applied = quote()
    assert applied.after is not None
    booking = kind.booking_model(
        passenger_id=applied.passenger_id,
        **{kind.catalogue_key: item_id},
        **{name: date.fromisoformat(applied.after[name]) for name in kind.date_fields},
        status="confirmed",
        total_cents=applied.new_total_cents,
        created_at=now,
    )
    session.add(booking)
    session.flush()
    _pay(session, kind, applied, booking.id, now)
    return applied.as_result(booking.id)


def change(
    session: Session,
    kind: ReservationKind[BookingT, CatalogueT],
    passenger_id: str,
    booking_id: int,
    now: datetime,
    quote: Callable[[], ReservationQuote],
) -> dict[str, Any]:
    """Lock the reservation and its catalogue entry, then apply the change ``quote()`` prices.

    Returns:
        The quote's result.
    """
    booking = owned_booking(session, kind, passenger_id, booking_id, lock=True)
    catalogue_entry(session, kind, kind.catalogue_id(booking), lock=True)
    applied = quote()
    assert applied.after is not None
    for name in kind.date_fields:
        setattr(booking, name, date.fromisoformat(applied.after[name]))
    booking.total_cents = applied.new_total_cents
    _pay(session, kind, applied, booking.id, now)
    session.flush()
    return applied.as_result(booking.id)


def cancel(
    session: Session,
    kind: ReservationKind[BookingT, CatalogueT],
    passenger_id: str,
    booking_id: int,
    now: datetime,
) -> dict[str, Any]:
    """Lock the reservation, mark it cancelled and refund it as quoted.

    Returns:
        The quote's result.
    """
    booking = owned_booking(session, kind, passenger_id, booking_id, lock=True)
    applied = quote_cancellation(session, kind, passenger_id, booking_id, now)
    booking.status = "cancelled"
    _pay(session, kind, applied, booking.id, now)
    session.flush()
    return applied.as_result(booking.id)


def _pay(
    session: Session,
    kind: ReservationKind[BookingT, CatalogueT],
    quote: ReservationQuote,
    booking_id: int,
    now: datetime,
) -> None:
    record_payment(
        session,
        passenger_id=quote.passenger_id,
        amount_cents=quote.net_cents,
        kind=f"{kind.kind}_{quote.action}",
        reference=f"{kind.payment_prefix}-{booking_id}",
        description=f"{quote.title}: {quote.item['name']}, {quote.after_text or quote.before_text}",
        now=now,
    )
