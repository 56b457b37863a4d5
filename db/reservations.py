"""Search, price, book, change and cancel a partner reservation of any declared kind.

Hotels, car rentals and excursions are one kind of thing: a passenger reserves a
catalogue entry (a hotel, a car-rental offer, an excursion) for some dates, within the
entry's units per day (rooms, cars, places), at its rate per unit of the period. Each
is declared once, as a ``db.reservation_kind.ReservationKind`` (``db.hotels.HOTEL``,
``db.car_rentals.CAR_RENTAL``, ``db.excursions.EXCURSION``); the functions here do the
rest for any of them:

* ``search`` finds catalogue entries by partial matches and, with dates, prices the
  period and counts the units left;
* ``quote_book``, ``quote_update`` and ``quote_cancel`` price a write without doing it
  (what the customer approves); ``book``, ``update`` and ``cancel`` lock the rows and
  apply exactly that quote (``db.partners``);
* ``summary`` lists a passenger's reservations of one kind, ``find_id`` turns an
  evaluation placeholder into a catalogue id.

Dates are given in the order of the kind's ``period.fields``: ``(checkin, checkout)``,
``(start, end)`` or ``(date,)``; a change gives ``None`` for a date it keeps.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import Connection, Select, bindparam, func, or_, select
from sqlalchemy.orm import Session

from db import partners
from db.errors import InvalidInputError, NotFoundError, UnavailableError
from db.models import Passenger
from db.periods import Dates
from db.reservation_capacity import daily_usage, first_full_day, units_left
from db.reservation_deadlines import require_not_started
from db.reservation_kind import Column, ReservationKind, shown_column, shown_name
from db.reservation_quote import ReservationQuote
from db.values import fmt_money, iso_date, money, search_text, search_words

SEARCH_LIMIT = 20
# Any declared kind: the functions read only the declaration.
Kind = ReservationKind[Any, Any]
DateArg = str | date


def no_such_passenger(passenger_id: str) -> NotFoundError:
    """Return the error that names an unknown passenger id."""
    return NotFoundError(
        f"No passenger with id {passenger_id} exists. Check the passenger id the "
        "conversation was started with."
    )


def require_passenger(session: Session, passenger_id: str) -> Passenger:
    """Return the passenger, or raise ``NotFoundError`` naming the id.

    Raises:
        NotFoundError: No passenger has this id.
    """
    passenger = session.get(Passenger, passenger_id)
    if passenger is None:
        raise no_such_passenger(passenger_id)
    return passenger


def _column(model: type[Any], name: str) -> Column:
    column: Column = getattr(model, name)
    return column


def _value(row: Any, column: Column) -> int:
    value: int = getattr(row, column.key)
    return value


# --- search and availability ----------------------------------------------------------------


def search(
    session: Session,
    kind: Kind,
    now: datetime,
    *,
    limit: int = SEARCH_LIMIT,
    **filters: str | None,
) -> dict[str, Any]:
    """Find catalogue entries by case-insensitive partial matches, priced for dates if given.

    Args:
        session: An open session.
        kind: The kind of reservation.
        now: The database clock's now.
        limit: How many entries to return at most.
        **filters: Part of a search column's text (by the column's name), comma-separated
            ``keywords`` when the kind has them and, for a kind priced by period, every
            date of ``period.fields`` or none.

    Returns:
        ``{<results_key>: [...], "matches": int}``; with dates, each entry also has the
        dates, the units (``nights``, ``days``), ``total``/``total_cents``, the units
        left (``left_key``) and ``available``.

    Raises:
        InvalidInputError: Only some dates given, a date is malformed or past, or a
            search text is too long or not plain text (``db.values.search_text``).
        RuleViolationError: The period breaks a date rule (too long, too far ahead).
        TypeError: A filter the kind does not have.
    """
    dates: Dates | None = None
    if kind.dates_message is not None:
        values = [filters.pop(name, None) for name in kind.date_fields]
        given = [value for value in values if value is not None]
        if given and len(given) != len(values):
            raise InvalidInputError(kind.dates_message)
        if given:
            dates = kind.period.parse(tuple(given), now)
    model = kind.catalogue_model
    query = select(model)
    for column in kind.search_columns:
        needle = search_text(filters.pop(column.key, None), column.key)
        if needle is not None:
            query = query.where(func.lower(column).contains(needle, autoescape=True))
    if kind.keywords_column is not None:
        words = search_words(filters.pop("keywords", None), "keywords")
        if words:
            keywords = func.lower(kind.keywords_column)
            query = query.where(or_(*(keywords.contains(w, autoescape=True) for w in words)))
    if filters:
        raise TypeError(f"{kind.results_key} cannot be searched by {sorted(filters)}")
    order = [_column(model, name) for name in ("location", "name", "id")]
    items, matches = partners.first_matches(session, query, order, limit)
    views = [kind.view(item) for item in items]
    if dates is not None and items:
        units = kind.period.units(dates)
        first, stop = kind.period.held(dates)
        usage = _usage(session, kind, [item.id for item in items], dates)
        for item, view in zip(items, views, strict=True):
            left = units_left(usage[item.id], first, stop, _value(item, kind.capacity))
            view.update(
                {
                    **kind.dates_dict(dates),
                    f"{kind.period.unit}s": units,
                    **money("total", units * _value(item, kind.rate)),
                    kind.left_key: left,
                    "available": left > 0,
                }
            )
    return {kind.results_key: views, "matches": matches}


def _usage(
    session: Session,
    kind: Kind,
    item_ids: list[int],
    dates: Dates,
    exclude_booking_id: int | None = None,
) -> dict[int, Counter[date]]:
    """Return, per catalogue entry, the units its confirmed reservations take each day."""
    booking = kind.booking_model
    item_id = _column(booking, kind.catalogue_key)
    first_day = _column(booking, kind.date_fields[0])
    last_day = _column(booking, kind.date_fields[-1])
    first, stop = kind.period.held(dates)
    # The reservation holds its last day too (a car's return day) or not (check-out).
    reaches_first = last_day >= first if kind.period.last_day_included else last_day > first
    query = select(item_id, first_day, last_day).where(
        item_id.in_(item_ids),
        _column(booking, "status") == "confirmed",
        first_day < stop,
        reaches_first,
    )
    if exclude_booking_id is not None:
        query = query.where(_column(booking, "id") != exclude_booking_id)
    periods: dict[int, list[tuple[date, date]]] = {entry: [] for entry in item_ids}
    for entry, start, end in session.execute(query):
        periods[entry].append(kind.period.held((start, end)))
    return {entry: daily_usage(spans) for entry, spans in periods.items()}


def _days_held(
    session: Session, kind: Kind, item: Any, dates: Dates, exclude_booking_id: int | None
) -> tuple[Counter[date], date, date, int]:
    """Return the units taken per day, the days ``dates`` hold and the units per day."""
    usage = _usage(session, kind, [item.id], dates, exclude_booking_id)[item.id]
    first, stop = kind.period.held(dates)
    return usage, first, stop, _value(item, kind.capacity)


def available(
    session: Session, kind: Kind, item: Any, dates: Dates, exclude_booking_id: int | None = None
) -> int:
    """Return how many units of ``item`` are free on every day of ``dates``."""
    return units_left(*_days_held(session, kind, item, dates, exclude_booking_id))


def _require_units(
    session: Session, kind: Kind, item: Any, dates: Dates, exclude_booking_id: int | None = None
) -> None:
    full = first_full_day(*_days_held(session, kind, item, dates, exclude_booking_id))
    if full is not None:
        raise UnavailableError(kind.full_message.format(item=item, day=iso_date(full)))


# --- quotes and writes ----------------------------------------------------------------------


def quote_book(
    session: Session,
    kind: Kind,
    passenger_id: str,
    item_id: int,
    dates: Sequence[DateArg],
    now: datetime,
) -> ReservationQuote:
    """Price a new reservation without writing.

    Args:
        session: An open session.
        kind: The kind of reservation.
        passenger_id: Who books.
        item_id: The catalogue entry's id from ``search``.
        dates: ``YYYY-MM-DD`` dates in ``period.fields`` order.
        now: The database clock's now.

    Returns:
        The quote of the booking (its ``net_cents`` is the price charged).

    Raises:
        NotFoundError: Unknown passenger or catalogue entry.
        InvalidInputError: Malformed, past or reversed dates.
        RuleViolationError: The period is too long or too far ahead.
        UnavailableError: A day of the period has no unit left.
    """
    require_passenger(session, passenger_id)
    period = kind.period.parse(tuple(dates), now)
    item = partners.catalogue_entry(session, kind, item_id)
    _require_units(session, kind, item, period)
    units, rate = kind.period.units(period), _value(item, kind.rate)
    total = units * rate
    return partners.quote_booking(
        kind,
        passenger_id,
        item,
        period,
        total,
        kind.price_detail.format(units=units, rate=fmt_money(rate), total=fmt_money(total)),
        extra_lines=tuple(line.format(item=item) for line in kind.book_lines),
    )


def book(
    session: Session,
    kind: Kind,
    passenger_id: str,
    item_id: int,
    dates: Sequence[DateArg],
    now: datetime,
) -> dict[str, Any]:
    """Reserve and charge what ``quote_book`` prices; raises what it raises.

    Returns:
        The quote's result: ``status``, ``booking_id``, the entry, ``after``, ``total``,
        ``charged`` and a ``summary`` sentence.
    """
    return partners.book(
        session,
        kind,
        item_id,
        now,
        lambda: quote_book(session, kind, passenger_id, item_id, dates, now),
    )


def _give_new_dates(fields: tuple[str, ...]) -> str:
    wanted = ", ".join(f"a new {name}" for name in fields)
    return f"Give {wanted}{' or both' if len(fields) > 1 else ''} (YYYY-MM-DD)."


def quote_update(
    session: Session,
    kind: Kind,
    passenger_id: str,
    booking_id: int,
    dates: Sequence[DateArg | None],
    now: datetime,
) -> ReservationQuote:
    """Price new dates for a reservation without writing.

    A date given as ``None`` keeps its current value. The period is repriced at the
    entry's current rate; the difference is charged or refunded, plus the late fee when
    the free window of the current first day has passed.

    Args:
        session: An open session.
        kind: The kind of reservation.
        passenger_id: Who asks (must own the reservation).
        booking_id: The reservation id.
        dates: The new ``YYYY-MM-DD`` dates in ``period.fields`` order, ``None`` to keep one.
        now: The database clock's now.

    Returns:
        The quote of the change.

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is cancelled or has started, or the new period breaks a rule.
        InvalidInputError: No new date, same dates, or malformed, past or reversed dates.
        UnavailableError: A new day has no unit left.
    """
    booking = partners.owned_booking(session, kind, passenger_id, booking_id)
    if all(value is None for value in dates):
        raise InvalidInputError(_give_new_dates(kind.date_fields))
    current = kind.dates_of(booking)
    require_not_started(current[0], now, f"{kind.label} {booking_id}")
    period = kind.period.parse(
        tuple(old if new is None else new for new, old in zip(dates, current, strict=False)),
        now,
    )
    if period == current:
        raise InvalidInputError(
            f"{kind.label} {booking_id} "
            f"{kind.unchanged.format(dates=kind.dates_text(period))}; nothing to change."
        )
    item = partners.catalogue_entry(session, kind, kind.catalogue_id(booking))
    _require_units(session, kind, item, period, exclude_booking_id=booking.id)
    units, rate = kind.period.units(period), _value(item, kind.rate)
    detail = kind.change_detail
    return partners.quote_change(
        kind,
        booking,
        item,
        period,
        units * rate,
        detail.format(units=units, rate=fmt_money(rate)) if detail is not None else None,
        now,
    )


def update(
    session: Session,
    kind: Kind,
    passenger_id: str,
    booking_id: int,
    dates: Sequence[DateArg | None],
    now: datetime,
) -> dict[str, Any]:
    """Move a reservation to the dates ``quote_update`` prices; raises what it raises.

    Returns:
        The quote's result: ``before``, ``after``, new ``total``, ``fee``, and what was
        ``charged`` or ``refunded``.
    """
    return partners.change(
        session,
        kind,
        passenger_id,
        booking_id,
        now,
        lambda: quote_update(session, kind, passenger_id, booking_id, dates, now),
    )


# ``quote_cancel(session, kind, passenger_id, booking_id, now)`` prices a cancellation;
# ``cancel`` with the same arguments marks the reservation cancelled (the row stays) and
# refunds it as quoted.
quote_cancel = partners.quote_cancellation
cancel = partners.cancel


# --- what the passenger holds, and the evaluation's placeholders ---------------------------


@functools.cache
def _summary_query(kind: Kind) -> Select[Any]:
    """Build a kind's summary query once: it runs on every turn of every conversation."""
    booking, item = kind.booking_model, kind.catalogue_model
    first_day = _column(booking, kind.date_fields[0])
    return (
        select(
            _column(booking, "id").label("booking_id"),
            *(_column(booking, name) for name in kind.date_fields),
            _column(booking, "status"),
            _column(booking, "total_cents"),
            _column(item, "id").label(kind.catalogue_key),
            *(shown_column(entry).label(shown_name(entry)) for entry in kind.summary_columns),
        )
        .join(item, _column(item, "id") == _column(booking, kind.catalogue_key))
        .where(_column(booking, "passenger_id") == bindparam("passenger_id"))
        .order_by(first_day, _column(booking, "id"))
    )


def summary(reader: Session | Connection, kind: Kind, passenger_id: str) -> list[dict[str, Any]]:
    """Return the passenger's reservations of one kind, cancelled ones too, by first day.

    Each is ``{"booking_id", <catalogue_key>, <summary columns>, <dates>, <units>,
    "status", "total_cents", "total"}``; a one-day kind has no units.
    """
    rows = reader.execute(_summary_query(kind), {"passenger_id": passenger_id}).all()
    found = []
    for row in rows:
        values = row._mapping
        dates = tuple(values[name] for name in kind.date_fields)
        units = {f"{kind.period.unit}s": kind.period.units(dates)} if len(dates) > 1 else {}
        found.append(
            {
                "booking_id": values["booking_id"],
                kind.catalogue_key: values[kind.catalogue_key],
                **{shown_name(e): values[shown_name(e)] for e in kind.summary_columns},
                **kind.dates_dict(dates),
                **units,
                "status": values["status"],
                **money("total", values["total_cents"]),
            }
        )
    return found


def find_id(session: Session, kind: Kind, argument: str) -> int | None:
    """Return the id of the first catalogue entry a placeholder's argument names.

    The argument's ``/``-separated parts match ``placeholder_columns`` in order
    (``{car:NAME/TIER}``); the first always applies, a later empty part does not.
    """
    parts = argument.split("/", len(kind.placeholder_columns) - 1)
    query = select(_column(kind.catalogue_model, "id"))
    for index, (column, part) in enumerate(zip(kind.placeholder_columns, parts, strict=False)):
        if index == 0 or part:
            query = query.where(column == part)
    found: int | None = session.scalars(query).first()
    return found
