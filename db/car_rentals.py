"""Car-rental search and the passenger's car-rental reservations.

A rental runs from ``start_date`` to ``end_date`` inclusive (picked up on the first day,
returned on the last); it is priced per day at the offer's daily rate. An offer has
``fleet_size`` cars per day; a day is full when that many confirmed reservations cover
it. A rental changes or cancels free until ``CAR_FREE_CANCEL_HOURS`` before 00:00 UTC of
its pick-up day; later one day's rate (as paid) is charged. Every write is priced by a
quote first (see ``db.partners``); the write applies exactly that quote.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db import partners
from db.errors import InvalidInputError, RuleViolationError, UnavailableError
from db.models import CarRental, CarRentalBooking
from db.partners import (
    ReservationKind,
    ReservationQuote,
    daily_usage,
    first_full_day,
    require_bookable_start,
    require_not_started,
    units_left,
)
from db.passengers import require_passenger
from db.rules import CAR_FREE_CANCEL_HOURS, MAX_CAR_RENTAL_DAYS
from db.values import fmt_money, iso_date, money, parse_date, search_text

SEARCH_LIMIT = 20
KIND_LABEL = "Car rental reservation"
ONE_DAY = timedelta(days=1)


def validate_rental_period(
    start_date: str | date, end_date: str | date, now: datetime
) -> tuple[date, date]:
    """Parse and check the dates of a rental.

    Args:
        start_date: ``YYYY-MM-DD`` pick-up day.
        end_date: ``YYYY-MM-DD`` return day, on or after ``start_date``.
        now: The database clock's now.

    Returns:
        ``(start, end)``, both inclusive.

    Raises:
        InvalidInputError: A date is malformed or past, or the end is before the start.
        RuleViolationError: The rental is longer than ``MAX_CAR_RENTAL_DAYS`` days or
            starts too far ahead.
    """
    start = parse_date(start_date, "start_date")
    end = parse_date(end_date, "end_date")
    if end < start:
        raise InvalidInputError(
            f"end_date ({iso_date(end)}) must be on or after start_date ({iso_date(start)})."
        )
    require_bookable_start(start, now, "start_date")
    days = (end - start).days + 1
    if days > MAX_CAR_RENTAL_DAYS:
        raise RuleViolationError(
            f"A rental of {days} days is too long: one reservation covers at most "
            f"{MAX_CAR_RENTAL_DAYS} days. Split it into several reservations."
        )
    return start, end


def _period_text(start: date, end: date) -> str:
    days = (end - start).days + 1
    plural = "day" if days == 1 else "days"
    return f"{iso_date(start)} to {iso_date(end)} ({days} {plural})"


def rental_view(rental: CarRental) -> dict[str, Any]:
    """Return a car-rental offer as shown to the customer."""
    return {
        "rental_id": rental.id,
        "name": rental.name,
        "location": rental.location,
        "price_tier": rental.price_tier,
        "car_class": rental.car_class,
        **money("daily_rate", rental.daily_rate_cents),
        "fleet_size": rental.fleet_size,
    }


CAR_RENTAL = ReservationKind(
    kind="car_rental",
    label=KIND_LABEL,
    payment_prefix="car",
    booking_model=CarRentalBooking,
    catalogue_model=CarRental,
    catalogue_key="rental_id",
    date_fields=("start_date", "end_date"),
    free_hours=CAR_FREE_CANCEL_HOURS,
    late_fee_what="one day's rate is charged",
    late_fee_parts=lambda dates: (dates[1] - dates[0]).days + 1,
    view=rental_view,
    dates_text=lambda dates: _period_text(*dates),
    missing_item=(
        "No car-rental offer with id {id} exists. Use search_car_rentals to find the rental_id."
    ),
    missing_booking=(
        "No car rental reservation with id {id} exists. The passenger's reservations are "
        "listed in their information (fetch_user_flight_information)."
    ),
)


def _usage(
    session: Session,
    rental_ids: list[int],
    start: date,
    end: date,
    exclude_booking_id: int | None = None,
) -> dict[int, Counter[date]]:
    query = select(
        CarRentalBooking.rental_id, CarRentalBooking.start_date, CarRentalBooking.end_date
    ).where(
        CarRentalBooking.rental_id.in_(rental_ids),
        CarRentalBooking.status == "confirmed",
        CarRentalBooking.start_date <= end,
        CarRentalBooking.end_date >= start,
    )
    if exclude_booking_id is not None:
        query = query.where(CarRentalBooking.id != exclude_booking_id)
    periods: dict[int, list[tuple[date, date]]] = {rental_id: [] for rental_id in rental_ids}
    for rental_id, first, last in session.execute(query):
        periods[rental_id].append((first, last + ONE_DAY))
    return {rental_id: daily_usage(spans) for rental_id, spans in periods.items()}


def search_car_rentals(
    session: Session,
    now: datetime,
    *,
    location: str | None = None,
    name: str | None = None,
    price_tier: str | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    limit: int = SEARCH_LIMIT,
) -> dict[str, Any]:
    """Find car-rental offers by case-insensitive partial matches, priced for dates if given.

    Args:
        session: An open session.
        now: The database clock's now.
        location: Part of the city name.
        name: Part of the rental company's name.
        price_tier: Part of the price tier, e.g. ``"economy"``.
        start_date: ``YYYY-MM-DD`` pick-up day; give it with ``end_date``.
        end_date: ``YYYY-MM-DD`` return day; give it with ``start_date``.
        limit: How many offers to return at most.

    Returns:
        ``{"car_rentals": [...], "matches": int}``; each offer has its daily rate and,
        with dates, ``days``, ``total``/``total_cents`` and ``cars_left`` for the period.

    Raises:
        InvalidInputError: Only one date given, a date is malformed or past, or a
            search text is too long or not plain text (``db.values.search_text``).
        RuleViolationError: The period breaks a date rule (too long, too far ahead).
    """
    period: tuple[date, date] | None = None
    if (start_date is None) != (end_date is None):
        raise InvalidInputError(
            "Give both start_date and end_date (YYYY-MM-DD) to price a rental, or neither "
            "to list offers with their daily rates."
        )
    if start_date is not None and end_date is not None:
        period = validate_rental_period(start_date, end_date, now)
    query = select(CarRental)
    for column, value, field in (
        (CarRental.location, location, "location"),
        (CarRental.name, name, "name"),
        (CarRental.price_tier, price_tier, "price_tier"),
    ):
        needle = search_text(value, field)
        if needle is not None:
            query = query.where(func.lower(column).contains(needle, autoescape=True))
    rentals, matches = partners.first_matches(
        session, query, (CarRental.location, CarRental.name, CarRental.id), limit
    )
    views = [rental_view(rental) for rental in rentals]
    if period is not None and rentals:
        start, end = period
        days = (end - start).days + 1
        usage = _usage(session, [rental.id for rental in rentals], start, end)
        for rental, view in zip(rentals, views, strict=True):
            left = units_left(usage[rental.id], start, end + ONE_DAY, rental.fleet_size)
            view.update(
                {
                    **CAR_RENTAL.dates_dict((start, end)),
                    "days": days,
                    **money("total", days * rental.daily_rate_cents),
                    "cars_left": left,
                    "available": left > 0,
                }
            )
    return {"car_rentals": views, "matches": matches}


def _require_cars(
    session: Session,
    rental: CarRental,
    start: date,
    end: date,
    exclude_booking_id: int | None = None,
) -> None:
    usage = _usage(session, [rental.id], start, end, exclude_booking_id)[rental.id]
    full = first_full_day(usage, start, end + ONE_DAY, rental.fleet_size)
    if full is not None:
        raise UnavailableError(
            f"{rental.name} ({rental.car_class}, {rental.location}) has no car left on "
            f"{iso_date(full)}. Try other dates or another offer in {rental.location}."
        )


def quote_book_car_rental(
    session: Session,
    passenger_id: str,
    rental_id: int,
    start_date: str | date,
    end_date: str | date,
    now: datetime,
) -> ReservationQuote:
    """Price a new car rental without writing.

    Args:
        session: An open session.
        passenger_id: Who books.
        rental_id: The offer's id from ``search_car_rentals``.
        start_date: ``YYYY-MM-DD`` pick-up day.
        end_date: ``YYYY-MM-DD`` return day (inclusive).
        now: The database clock's now.

    Returns:
        The quote of the booking (its ``net_cents`` is the price charged).

    Raises:
        NotFoundError: Unknown passenger or offer.
        InvalidInputError: Malformed, past or reversed dates.
        RuleViolationError: The rental is too long or too far ahead.
        UnavailableError: A day of the rental has no car left.
    """
    require_passenger(session, passenger_id)
    start, end = validate_rental_period(start_date, end_date, now)
    rental = partners.catalogue_entry(session, CAR_RENTAL, rental_id)
    _require_cars(session, rental, start, end)
    days = (end - start).days + 1
    total = days * rental.daily_rate_cents
    return partners.quote_booking(
        CAR_RENTAL,
        passenger_id,
        rental,
        (start, end),
        total,
        f"{days} x {fmt_money(rental.daily_rate_cents)} = {fmt_money(total)}",
        extra_lines=(f"Car: {rental.car_class} ({rental.price_tier})",),
    )


def book_car_rental(
    session: Session,
    passenger_id: str,
    rental_id: int,
    start_date: str | date,
    end_date: str | date,
    now: datetime,
) -> dict[str, Any]:
    """Reserve a car and charge it; raises what ``quote_book_car_rental`` raises.

    Returns:
        The quote's result: ``status``, ``booking_id``, ``car_rental``, ``after``,
        ``total``, ``charged`` and a ``summary`` sentence.
    """
    return partners.book(
        session,
        CAR_RENTAL,
        rental_id,
        now,
        lambda: quote_book_car_rental(session, passenger_id, rental_id, start_date, end_date, now),
    )


def quote_update_car_rental(
    session: Session,
    passenger_id: str,
    booking_id: int,
    start_date: str | date | None,
    end_date: str | date | None,
    now: datetime,
) -> ReservationQuote:
    """Price new dates for a car rental reservation without writing.

    A date left out keeps its current value. The rental is repriced at the offer's
    current daily rate; the difference is charged or refunded, plus the late fee when the
    free window of the current pick-up day has passed.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the reservation).
        booking_id: The car rental reservation id.
        start_date: The new ``YYYY-MM-DD`` pick-up day, or ``None`` to keep it.
        end_date: The new ``YYYY-MM-DD`` return day, or ``None`` to keep it.
        now: The database clock's now.

    Returns:
        The quote of the change.

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is cancelled or has started, or the new period breaks a rule.
        InvalidInputError: No new date, same dates, or malformed, past or reversed dates.
        UnavailableError: A new day has no car left.
    """
    booking = partners.owned_booking(session, CAR_RENTAL, passenger_id, booking_id)
    if start_date is None and end_date is None:
        raise InvalidInputError("Give a new start_date, a new end_date or both (YYYY-MM-DD).")
    require_not_started(booking.start_date, now, f"{KIND_LABEL} {booking_id}")
    start, end = validate_rental_period(
        start_date if start_date is not None else booking.start_date,
        end_date if end_date is not None else booking.end_date,
        now,
    )
    if (start, end) == (booking.start_date, booking.end_date):
        raise InvalidInputError(
            f"{KIND_LABEL} {booking_id} already runs {_period_text(start, end)}; nothing to change."
        )
    rental = partners.catalogue_entry(session, CAR_RENTAL, booking.rental_id)
    _require_cars(session, rental, start, end, exclude_booking_id=booking.id)
    days = (end - start).days + 1
    return partners.quote_change(
        CAR_RENTAL,
        booking,
        rental,
        (start, end),
        days * rental.daily_rate_cents,
        f"{days} x {fmt_money(rental.daily_rate_cents)}",
        now,
    )


def update_car_rental(
    session: Session,
    passenger_id: str,
    booking_id: int,
    start_date: str | date | None,
    end_date: str | date | None,
    now: datetime,
) -> dict[str, Any]:
    """Move a car rental reservation to new dates; raises what the quote raises.

    Returns:
        The quote's result: ``before``, ``after``, new ``total``, ``fee``, and what was
        ``charged`` or ``refunded``.
    """
    return partners.change(
        session,
        CAR_RENTAL,
        passenger_id,
        booking_id,
        now,
        lambda: quote_update_car_rental(
            session, passenger_id, booking_id, start_date, end_date, now
        ),
    )


def quote_cancel_car_rental(
    session: Session, passenger_id: str, booking_id: int, now: datetime
) -> ReservationQuote:
    """Price the cancellation of a car rental reservation without writing.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the reservation).
        booking_id: The car rental reservation id.
        now: The database clock's now.

    Returns:
        The quote (its ``net_cents`` is minus the refund).

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is already cancelled or has started.
    """
    return partners.quote_cancellation(session, CAR_RENTAL, passenger_id, booking_id, now)


def cancel_car_rental(
    session: Session, passenger_id: str, booking_id: int, now: datetime
) -> dict[str, Any]:
    """Cancel a car rental reservation (kept, marked cancelled) and refund it.

    Raises what ``quote_cancel_car_rental`` raises.

    Returns:
        The quote's result: ``before``, ``fee`` and ``refunded``.
    """
    return partners.cancel(session, CAR_RENTAL, passenger_id, booking_id, now)
