"""What hotel, car-rental and excursion reservations share: date rules, fees and quotes.

Date rules (the same for searches and writes, so a price shown is a price bookable):

* dates are ``YYYY-MM-DD``; "today" is the UTC date of the database clock's now;
* a reservation may start today or later, and at most ``MAX_DAYS_AHEAD`` days ahead;
* a reservation whose start date has passed cannot be changed or cancelled;
* the free change/cancellation window of a reservation ends ``<KIND>_FREE_CANCEL_HOURS``
  hours before 00:00 UTC of its start date; later the kind's late fee applies (see
  ``db.rules``).

Every partner write is priced by a ``ReservationQuote``. Its ``net_cents`` is what the
write moves: positive is charged, negative refunded (new total - old total + fee).

A ``ReservationKind`` describes what tells one kind of reservation from another (tables,
date columns, labels, late-fee rule); the functions below it look up, quote and write a
reservation of any kind, so the three kinds share one implementation of ownership,
late fees, payments and the write lock order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Generic, Literal, Protocol, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import QueryableAttribute, Session

from db.errors import NotFoundError, OwnershipError, RuleViolationError
from db.periods import Dates, Period
from db.rules import hours
from db.values import (
    AmountKind,
    amount_line,
    fmt_money,
    iso_date,
    money,
    row_id,
    start_of_day,
    today,
    utc_time,
)
from db.writes import record_payment

Action = Literal["book", "update", "cancel"]
RESULT_STATUS: dict[Action, str] = {"book": "booked", "update": "changed", "cancel": "cancelled"}
# How an action starts the title of its approval card ("Change hotel").
VERBS: dict[Action, str] = {"book": "Book", "update": "Change", "cancel": "Cancel"}


def require_not_started(start: date, now: datetime, what: str) -> None:
    """Refuse to change or cancel a reservation whose start date has passed.

    Args:
        start: The reservation's first day.
        now: The database clock's now.
        what: The reservation, named for the message, e.g. ``"Hotel reservation 4"``.

    Raises:
        RuleViolationError: ``start`` is before today.
    """
    if start < today(now):
        raise RuleViolationError(
            f"{what} started on {iso_date(start)}; a reservation that has already started "
            "can no longer be changed or cancelled here. The customer should contact the "
            "partner directly."
        )


def free_until(start: date, free_hours: int) -> datetime:
    """Return the end of the free change/cancellation window of a reservation."""
    return start_of_day(start) - hours(free_hours)


def is_late(start: date, free_hours: int, now: datetime) -> bool:
    """Tell whether ``now`` is past the free window of a reservation starting ``start``."""
    return now > free_until(start, free_hours)


def daily_usage(periods: Iterable[tuple[date, date]]) -> Counter[date]:
    """Count, for every day, how many of the half-open periods ``[first, stop)`` cover it."""
    usage: Counter[date] = Counter()
    for first, stop in periods:
        day = first
        while day < stop:
            usage[day] += 1
            day += timedelta(days=1)
    return usage


def first_full_day(usage: Counter[date], first: date, stop: date, capacity: int) -> date | None:
    """Return the first day of ``[first, stop)`` with no unit left, or ``None``.

    Args:
        usage: Units taken per day.
        first: The first day wanted.
        stop: The day after the last day wanted.
        capacity: Units the partner has per day.
    """
    day = first
    while day < stop:
        if usage[day] >= capacity:
            return day
        day += timedelta(days=1)
    return None


def units_left(usage: Counter[date], first: date, stop: date, capacity: int) -> int:
    """Return how many units are free on every day of ``[first, stop)``."""
    taken = 0
    day = first
    while day < stop:
        taken = max(taken, usage[day])
        day += timedelta(days=1)
    return max(capacity - taken, 0)


@dataclass(frozen=True)
class ReservationQuote:
    """What a partner write would do, computed without writing.

    Attributes:
        action: ``"book"``, ``"update"`` or ``"cancel"``.
        kind: ``"hotel"``, ``"car_rental"`` or ``"excursion"``.
        noun: The kind in the title, e.g. ``"car rental"``.
        kind_label: The kind for people, e.g. ``"Hotel reservation"``.
        passenger_id: Who the reservation belongs to.
        booking_id: The reservation id (``None`` before a booking exists).
        item: The catalogue entry shown to the customer (id, name, location, ...).
        before: The dates before the write (``None`` for a booking).
        after: The dates after the write (``None`` for a cancellation).
        before_text: ``before`` for people, e.g. ``"check-in 2026-05-10, ..."``.
        after_text: ``after`` for people.
        old_total_cents: What the reservation cost before (0 for a booking).
        new_total_cents: What it costs after (0 for a cancellation).
        price_detail: How ``new_total_cents`` is made, e.g. ``"3 nights x EUR 150.00"``.
        fee_cents: The late change or cancellation fee.
        fee_note: Why the fee is what it is.
    """

    action: Action
    kind: str
    noun: str
    kind_label: str
    passenger_id: str
    booking_id: int | None
    item: dict[str, Any]
    before: dict[str, str] | None
    after: dict[str, str] | None
    before_text: str | None
    after_text: str | None
    old_total_cents: int
    new_total_cents: int
    price_detail: str | None
    fee_cents: int = 0
    fee_note: str | None = None
    extra_lines: tuple[str, ...] = field(default=())

    @property
    def net_cents(self) -> int:
        """Return the money the write moves: positive charged, negative refunded."""
        return self.new_total_cents - self.old_total_cents + self.fee_cents

    @property
    def amount_kind(self) -> AmountKind:
        """Return what the customer does with ``amount_cents``; nothing moved is paying 0."""
        return "refund" if self.net_cents < 0 else "pay"

    @property
    def amount_cents(self) -> int:
        """Return the money the write moves, without its sign (see ``amount_kind``)."""
        return abs(self.net_cents)

    @property
    def title(self) -> str:
        """Return a short title for the approval prompt."""
        return f"{VERBS[self.action]} {self.noun}"

    def lines(self) -> list[str]:
        """Return the before -> after and price lines shown before approval."""
        name = self.item.get("name", "")
        location = self.item.get("location", "")
        header = f"{name}, {location}" if location else str(name)
        lines: list[str] = []
        if self.booking_id is not None:
            lines.append(f"{self.kind_label} {self.booking_id}: {header}")
        else:
            lines.append(header)
        lines.extend(self.extra_lines)
        if self.action == "book":
            lines.append(f"Dates: {self.after_text}")
            lines.append(f"Price: {self.price_detail}")
        elif self.action == "update":
            lines.append(f"Dates: {self.before_text} -> {self.after_text}")
            lines.append(
                f"Price: {fmt_money(self.old_total_cents)} -> {fmt_money(self.new_total_cents)}"
                + (f" ({self.price_detail})" if self.price_detail else "")
            )
            lines.append(f"Change fee: {fmt_money(self.fee_cents)} ({self.fee_note})")
        else:
            lines.append(f"Dates: {self.before_text}")
            lines.append(f"Paid: {fmt_money(self.old_total_cents)}")
            lines.append(f"Cancellation fee: {fmt_money(self.fee_cents)} ({self.fee_note})")
        lines.append(amount_line(self.amount_kind, self.amount_cents))
        return lines

    def as_result(self, booking_id: int) -> dict[str, Any]:
        """Return the JSON-able result of the applied write.

        Args:
            booking_id: The reservation id (the new one for a booking).
        """
        charged = max(self.net_cents, 0)
        refunded = max(-self.net_cents, 0)
        result: dict[str, Any] = {
            "status": RESULT_STATUS[self.action],
            "booking_id": booking_id,
            self.kind: self.item,
            "before": self.before,
            "after": self.after,
            **money("total", self.new_total_cents if self.action != "cancel" else 0),
            **money("fee", self.fee_cents),
            **money("charged", charged),
            **money("refunded", refunded),
        }
        if self.fee_note:
            result["fee_note"] = self.fee_note
        result["summary"] = self._summary(booking_id, charged, refunded)
        return result

    def _summary(self, booking_id: int, charged: int, refunded: int) -> str:
        what = f"{self.kind_label} {booking_id} ({self.item.get('name', '')})"
        if self.action == "book":
            done = f"{what} is booked for {self.after_text}."
        elif self.action == "update":
            done = f"{what} now runs {self.after_text} (was {self.before_text})."
        else:
            done = f"{what} for {self.before_text} is cancelled."
        if charged:
            money_text = f" Charged {fmt_money(charged)}."
        elif refunded:
            money_text = f" Refunded {fmt_money(refunded)}."
        else:
            money_text = " Nothing was charged or refunded."
        return done + money_text


def late_fee_note(start: date, free_hours: int, now: datetime, what: str) -> str:
    """Explain a partner fee: free until the deadline, or ``what`` after it.

    Args:
        start: The reservation's (current) first day.
        free_hours: The kind's free window in hours.
        now: The database clock's now.
        what: What the late fee is, e.g. ``"the first night is charged"``.

    Returns:
        A short phrase for the quote.
    """
    deadline = utc_time(free_until(start, free_hours))
    if not is_late(start, free_hours, now):
        return f"free until {deadline}"
    return f"{what}: the free window ended {deadline}"


class BookingRow(Protocol):
    """The columns every reservation table has (a mapped class takes them as keywords)."""

    def __init__(self, **columns: Any) -> None: ...

    id: int
    passenger_id: str
    status: str
    total_cents: int


class CatalogueRow(Protocol):
    """The columns every partner catalogue has."""

    id: int
    name: str
    location: str


BookingT = TypeVar("BookingT", bound=BookingRow)
CatalogueT = TypeVar("CatalogueT", bound=CatalogueRow)
EntryT = TypeVar("EntryT")  # a row a search returns
Column = QueryableAttribute[Any]
# A column shown under its own name, or under another one: ``("places_per_day", column)``.
Shown = Column | tuple[str, Column]


def shown_name(entry: Shown) -> str:
    """Return the key a shown column has in results."""
    return entry[0] if isinstance(entry, tuple) else entry.key


def shown_column(entry: Shown) -> Column:
    """Return the column of a shown entry."""
    return entry[1] if isinstance(entry, tuple) else entry


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one object per kind
class ReservationKind(Generic[BookingT, CatalogueT]):
    """One kind of partner reservation, declared: everything that tells it from another.

    The generic code (this module's lookups, quotes and writes; ``db.reservations`` for
    search, availability, pricing and the passenger's summary) reads only this.

    Attributes:
        kind: ``"hotel"``, ``"car_rental"`` or ``"excursion"``: the quote's kind, the key
            of the catalogue entry in results and the prefix of payment kinds; the tools'
            names are ``book_<kind>``, ``update_<kind>``, ``cancel_<kind>``.
        noun: The kind in approval titles, e.g. ``"car rental"`` ("Change car rental").
        label: The kind for people, e.g. ``"Hotel reservation"``.
        payment_prefix: The prefix of payment references, e.g. ``"hotel"`` (``hotel-4``).
        booking_model: The reservation table.
        catalogue_model: The partner's catalogue table (``id``, ``name``, ``location``).
        catalogue_key: The reservation column holding the catalogue id, e.g. ``"hotel_id"``;
            also the catalogue id's key in results and the booking tool's id argument.
        period: How the reservation is dated; its fields are the reservation's date
            columns and the keys of a quote's ``before``/``after``.
        free_hours: The free change/cancellation window before the first day, in hours.
        late_fee_what: What the late fee is, for the fee note.
        late_fee_parts: How many parts the price paid splits into for the late fee (one
            part is kept), from the reservation's dates.
        rate: The catalogue's price column, in cents per unit of the period (per night,
            per day; per person for a one-day period).
        capacity: The catalogue's units per day (rooms, cars, places).
        shown: The catalogue columns shown to the customer, after the id; the rate is
            shown as money under its name without ``_cents``.
        full_message: Why a day has no unit left: ``{item.<column>}`` and ``{day}``.
        missing_item: The not-found message for a catalogue id (``{id}`` is filled in).
        missing_booking: The not-found message for a reservation id (``{id}``).
        unchanged: What a change to the same dates says, e.g. ``"already runs {dates}"``.
        price_detail: How a booking's price is made: ``{units}``, ``{rate}``, ``{total}``.
        change_detail: The same for a change (``None``: not shown).
        book_lines: Lines the booking card shows under the name (``{item.<column>}``).
        results_key: The key of the search results, e.g. ``"hotels"``.
        search_columns: The catalogue columns searched by a partial match; the search
            arguments have their names.
        keywords_column: A column searched for any of comma-separated words (the
            ``keywords`` argument), if any.
        dates_message: With dates, a search prices the period and says this when only
            some dates are given; ``None`` for a search without dates.
        left_key: The key of the units left in a priced search, e.g. ``"rooms_left"``.
        summary_key: The key of the passenger's reservations of this kind in their
            summary, e.g. ``"hotel_reservations"``.
        summary_title: Their heading in the bookings the model reads, e.g. ``"Hotels"``.
        summary_columns: The catalogue columns a summary row shows, after the ids; all
            but ``location`` name the entry.
        placeholder: The evaluation scenarios' placeholder, ``{<placeholder>:NAME}``.
        placeholder_columns: The columns a placeholder's ``/``-separated parts match.
    """

    kind: str
    noun: str
    label: str
    payment_prefix: str
    booking_model: type[BookingT]
    catalogue_model: type[CatalogueT]
    catalogue_key: str
    period: Period
    free_hours: int
    late_fee_what: str
    late_fee_parts: Callable[[Dates], int]
    rate: Column
    capacity: Column
    shown: tuple[Shown, ...]
    full_message: str
    missing_item: str
    missing_booking: str
    unchanged: str
    results_key: str
    search_columns: tuple[Column, ...]
    summary_key: str
    summary_title: str
    summary_columns: tuple[Shown, ...]
    placeholder: str
    placeholder_columns: tuple[Column, ...]
    price_detail: str = "{units} x {rate} = {total}"
    change_detail: str | None = "{units} x {rate}"
    book_lines: tuple[str, ...] = ()
    keywords_column: Column | None = None
    dates_message: str | None = None
    left_key: str = ""

    @property
    def date_fields(self) -> tuple[str, ...]:
        """Return the reservation's date columns, first day first."""
        return self.period.fields

    def dates_of(self, booking: BookingT) -> Dates:
        """Return a reservation's dates, in ``date_fields`` order."""
        return tuple(getattr(booking, name) for name in self.date_fields)

    def dates_dict(self, dates: Dates) -> dict[str, str]:
        """Return dates as a quote's ``before``/``after``: ``{column: "YYYY-MM-DD"}``."""
        return self.period.as_dict(dates)

    def dates_text(self, dates: Dates) -> str:
        """Return the dates for people."""
        return self.period.show(dates)

    def catalogue_id(self, booking: BookingT) -> int:
        """Return the id of the catalogue entry a reservation is for."""
        value: int = getattr(booking, self.catalogue_key)
        return value

    def view(self, item: CatalogueT) -> dict[str, Any]:
        """Return a catalogue entry as shown to the customer."""
        view: dict[str, Any] = {self.catalogue_key: item.id}
        for entry in self.shown:
            value = getattr(item, shown_column(entry).key)
            if shown_column(entry).key == self.rate.key:
                view.update(money(shown_name(entry).removesuffix("_cents"), value))
            else:
                view[shown_name(entry)] = value
        return view


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


def late_fee(
    kind: ReservationKind[BookingT, CatalogueT], booking: BookingT, now: datetime
) -> tuple[int, str]:
    """Return the fee of changing or cancelling a reservation now, and its note."""
    dates = kind.dates_of(booking)
    late = is_late(dates[0], kind.free_hours, now)
    fee = booking.total_cents // kind.late_fee_parts(dates) if late else 0
    return fee, late_fee_note(dates[0], kind.free_hours, now, kind.late_fee_what)


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
