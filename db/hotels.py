"""Hotel search and the passenger's hotel reservations.

A stay runs from ``checkin_date`` to ``checkout_date``; its nights are the days from
check-in up to the day before check-out. A hotel has ``rooms`` rooms per night; a night
is full when that many confirmed reservations cover it. A stay changes or cancels free
until ``HOTEL_FREE_CANCEL_HOURS`` before 00:00 UTC of its check-in day; later the first
night (of the stay as paid) is charged. Every write is priced by a quote first (see
``db.partners``); the write applies exactly that quote.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db import partners
from db.errors import InvalidInputError, RuleViolationError, UnavailableError
from db.models import Hotel, HotelBooking
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
from db.rules import HOTEL_FREE_CANCEL_HOURS, MAX_HOTEL_NIGHTS
from db.values import fmt_money, iso_date, money, parse_date, search_text

SEARCH_LIMIT = 20
KIND_LABEL = "Hotel reservation"


def validate_stay(
    checkin_date: str | date, checkout_date: str | date, now: datetime
) -> tuple[date, date]:
    """Parse and check the dates of a stay.

    Args:
        checkin_date: ``YYYY-MM-DD``.
        checkout_date: ``YYYY-MM-DD``, after ``checkin_date``.
        now: The database clock's now.

    Returns:
        ``(checkin, checkout)``.

    Raises:
        InvalidInputError: A date is malformed or past, or check-out is not after check-in.
        RuleViolationError: The stay is longer than ``MAX_HOTEL_NIGHTS`` or starts too far
            ahead.
    """
    checkin = parse_date(checkin_date, "checkin_date")
    checkout = parse_date(checkout_date, "checkout_date")
    if checkout <= checkin:
        raise InvalidInputError(
            f"checkout_date ({iso_date(checkout)}) must be after checkin_date "
            f"({iso_date(checkin)}); a stay is at least one night."
        )
    require_bookable_start(checkin, now, "checkin_date")
    nights = (checkout - checkin).days
    if nights > MAX_HOTEL_NIGHTS:
        raise RuleViolationError(
            f"A stay of {nights} nights is too long: one reservation covers at most "
            f"{MAX_HOTEL_NIGHTS} nights. Split it into several reservations."
        )
    return checkin, checkout


def _stay_text(checkin: date, checkout: date) -> str:
    nights = (checkout - checkin).days
    plural = "night" if nights == 1 else "nights"
    return f"check-in {iso_date(checkin)}, check-out {iso_date(checkout)} ({nights} {plural})"


def hotel_view(hotel: Hotel) -> dict[str, Any]:
    """Return a catalogue hotel as shown to the customer."""
    return {
        "hotel_id": hotel.id,
        "name": hotel.name,
        "location": hotel.location,
        "price_tier": hotel.price_tier,
        **money("nightly_rate", hotel.nightly_rate_cents),
        "rooms": hotel.rooms,
    }


HOTEL = ReservationKind(
    kind="hotel",
    label=KIND_LABEL,
    payment_prefix="hotel",
    booking_model=HotelBooking,
    catalogue_model=Hotel,
    catalogue_key="hotel_id",
    date_fields=("checkin_date", "checkout_date"),
    free_hours=HOTEL_FREE_CANCEL_HOURS,
    late_fee_what="the first night is charged",
    late_fee_parts=lambda dates: max((dates[1] - dates[0]).days, 1),
    view=hotel_view,
    dates_text=lambda dates: _stay_text(*dates),
    missing_item="No hotel with id {id} exists. Use search_hotels to find the hotel_id.",
    missing_booking=(
        "No hotel reservation with id {id} exists. The passenger's hotel reservations are "
        "listed in their information (fetch_user_flight_information)."
    ),
)


def _usage(
    session: Session,
    hotel_ids: list[int],
    checkin: date,
    checkout: date,
    exclude_booking_id: int | None = None,
) -> dict[int, Counter[date]]:
    query = select(HotelBooking.hotel_id, HotelBooking.checkin_date, HotelBooking.checkout_date)
    query = query.where(
        HotelBooking.hotel_id.in_(hotel_ids),
        HotelBooking.status == "confirmed",
        HotelBooking.checkin_date < checkout,
        HotelBooking.checkout_date > checkin,
    )
    if exclude_booking_id is not None:
        query = query.where(HotelBooking.id != exclude_booking_id)
    periods: dict[int, list[tuple[date, date]]] = {hotel_id: [] for hotel_id in hotel_ids}
    for hotel_id, first, stop in session.execute(query):
        periods[hotel_id].append((first, stop))
    return {hotel_id: daily_usage(spans) for hotel_id, spans in periods.items()}


def search_hotels(
    session: Session,
    now: datetime,
    *,
    location: str | None = None,
    name: str | None = None,
    price_tier: str | None = None,
    checkin_date: str | None = None,
    checkout_date: str | None = None,
    limit: int = SEARCH_LIMIT,
) -> dict[str, Any]:
    """Find hotels by case-insensitive partial matches, priced for a stay when dates are given.

    Args:
        session: An open session.
        now: The database clock's now.
        location: Part of the city name.
        name: Part of the hotel name.
        price_tier: Part of the price tier, e.g. ``"luxury"``.
        checkin_date: ``YYYY-MM-DD``; give it with ``checkout_date``.
        checkout_date: ``YYYY-MM-DD``; give it with ``checkin_date``.
        limit: How many hotels to return at most.

    Returns:
        ``{"hotels": [...], "matches": int}``; each hotel has its nightly rate and, with
        dates, ``nights``, ``total``/``total_cents`` and ``rooms_left`` for that stay.

    Raises:
        InvalidInputError: Only one date given, a date is malformed or past, or a
            search text is too long or not plain text (``db.values.search_text``).
        RuleViolationError: The stay breaks a date rule (too long, too far ahead).
    """
    stay: tuple[date, date] | None = None
    if (checkin_date is None) != (checkout_date is None):
        raise InvalidInputError(
            "Give both checkin_date and checkout_date (YYYY-MM-DD) to price a stay, or "
            "neither to list hotels with their nightly rates."
        )
    if checkin_date is not None and checkout_date is not None:
        stay = validate_stay(checkin_date, checkout_date, now)
    query = select(Hotel)
    for column, value, field in (
        (Hotel.location, location, "location"),
        (Hotel.name, name, "name"),
        (Hotel.price_tier, price_tier, "price_tier"),
    ):
        needle = search_text(value, field)
        if needle is not None:
            query = query.where(func.lower(column).contains(needle, autoescape=True))
    hotels, matches = partners.first_matches(
        session, query, (Hotel.location, Hotel.name, Hotel.id), limit
    )
    views = [hotel_view(hotel) for hotel in hotels]
    if stay is not None and hotels:
        checkin, checkout = stay
        nights = (checkout - checkin).days
        usage = _usage(session, [hotel.id for hotel in hotels], checkin, checkout)
        for hotel, view in zip(hotels, views, strict=True):
            left = units_left(usage[hotel.id], checkin, checkout, hotel.rooms)
            view.update(
                {
                    **HOTEL.dates_dict((checkin, checkout)),
                    "nights": nights,
                    **money("total", nights * hotel.nightly_rate_cents),
                    "rooms_left": left,
                    "available": left > 0,
                }
            )
    return {"hotels": views, "matches": matches}


def _require_rooms(
    session: Session,
    hotel: Hotel,
    checkin: date,
    checkout: date,
    exclude_booking_id: int | None = None,
) -> None:
    usage = _usage(session, [hotel.id], checkin, checkout, exclude_booking_id)[hotel.id]
    full = first_full_day(usage, checkin, checkout, hotel.rooms)
    if full is not None:
        raise UnavailableError(
            f"{hotel.name} ({hotel.location}) has no room left for the night of "
            f"{iso_date(full)}. Try other dates or another hotel in {hotel.location}."
        )


def quote_book_hotel(
    session: Session,
    passenger_id: str,
    hotel_id: int,
    checkin_date: str | date,
    checkout_date: str | date,
    now: datetime,
) -> ReservationQuote:
    """Price a new hotel stay without writing.

    Args:
        session: An open session.
        passenger_id: Who books.
        hotel_id: The hotel's id from ``search_hotels``.
        checkin_date: ``YYYY-MM-DD``.
        checkout_date: ``YYYY-MM-DD``.
        now: The database clock's now.

    Returns:
        The quote of the booking (its ``net_cents`` is the price charged).

    Raises:
        NotFoundError: Unknown passenger or hotel.
        InvalidInputError: Malformed, past or reversed dates.
        RuleViolationError: The stay is too long or too far ahead.
        UnavailableError: A night of the stay is fully booked.
    """
    require_passenger(session, passenger_id)
    checkin, checkout = validate_stay(checkin_date, checkout_date, now)
    hotel = partners.catalogue_entry(session, HOTEL, hotel_id)
    _require_rooms(session, hotel, checkin, checkout)
    nights = (checkout - checkin).days
    total = nights * hotel.nightly_rate_cents
    return partners.quote_booking(
        HOTEL,
        passenger_id,
        hotel,
        (checkin, checkout),
        total,
        f"{nights} x {fmt_money(hotel.nightly_rate_cents)} = {fmt_money(total)}",
    )


def book_hotel(
    session: Session,
    passenger_id: str,
    hotel_id: int,
    checkin_date: str | date,
    checkout_date: str | date,
    now: datetime,
) -> dict[str, Any]:
    """Reserve a hotel stay and charge it; raises what ``quote_book_hotel`` raises.

    Returns:
        The quote's result: ``status``, ``booking_id``, ``hotel``, ``after``, ``total``,
        ``charged`` and a ``summary`` sentence.
    """
    return partners.book(
        session,
        HOTEL,
        hotel_id,
        now,
        lambda: quote_book_hotel(session, passenger_id, hotel_id, checkin_date, checkout_date, now),
    )


def quote_update_hotel(
    session: Session,
    passenger_id: str,
    booking_id: int,
    checkin_date: str | date | None,
    checkout_date: str | date | None,
    now: datetime,
) -> ReservationQuote:
    """Price new dates for a hotel reservation without writing.

    A date left out keeps its current value. The stay is repriced at the hotel's current
    nightly rate; the difference is charged or refunded, plus the late fee when the free
    window of the current check-in has passed.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the reservation).
        booking_id: The hotel reservation id.
        checkin_date: The new ``YYYY-MM-DD`` check-in, or ``None`` to keep it.
        checkout_date: The new ``YYYY-MM-DD`` check-out, or ``None`` to keep it.
        now: The database clock's now.

    Returns:
        The quote of the change.

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is cancelled or has started, or the new stay breaks a rule.
        InvalidInputError: No new date, same dates, or malformed, past or reversed dates.
        UnavailableError: A new night is fully booked.
    """
    booking = partners.owned_booking(session, HOTEL, passenger_id, booking_id)
    if checkin_date is None and checkout_date is None:
        raise InvalidInputError(
            "Give a new checkin_date, a new checkout_date or both (YYYY-MM-DD)."
        )
    require_not_started(booking.checkin_date, now, f"{KIND_LABEL} {booking_id}")
    checkin, checkout = validate_stay(
        checkin_date if checkin_date is not None else booking.checkin_date,
        checkout_date if checkout_date is not None else booking.checkout_date,
        now,
    )
    if (checkin, checkout) == (booking.checkin_date, booking.checkout_date):
        raise InvalidInputError(
            f"{KIND_LABEL} {booking_id} already has these dates "
            f"({_stay_text(checkin, checkout)}); nothing to change."
        )
    hotel = partners.catalogue_entry(session, HOTEL, booking.hotel_id)
    _require_rooms(session, hotel, checkin, checkout, exclude_booking_id=booking.id)
    nights = (checkout - checkin).days
    return partners.quote_change(
        HOTEL,
        booking,
        hotel,
        (checkin, checkout),
        nights * hotel.nightly_rate_cents,
        f"{nights} x {fmt_money(hotel.nightly_rate_cents)}",
        now,
    )


def update_hotel(
    session: Session,
    passenger_id: str,
    booking_id: int,
    checkin_date: str | date | None,
    checkout_date: str | date | None,
    now: datetime,
) -> dict[str, Any]:
    """Move a hotel reservation to new dates; raises what ``quote_update_hotel`` raises.

    Returns:
        The quote's result: ``before``, ``after``, new ``total``, ``fee``, and what was
        ``charged`` or ``refunded``.
    """
    return partners.change(
        session,
        HOTEL,
        passenger_id,
        booking_id,
        now,
        lambda: quote_update_hotel(
            session, passenger_id, booking_id, checkin_date, checkout_date, now
        ),
    )


def quote_cancel_hotel(
    session: Session, passenger_id: str, booking_id: int, now: datetime
) -> ReservationQuote:
    """Price the cancellation of a hotel reservation without writing.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the reservation).
        booking_id: The hotel reservation id.
        now: The database clock's now.

    Returns:
        The quote (its ``net_cents`` is minus the refund).

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is already cancelled or has started.
    """
    return partners.quote_cancellation(session, HOTEL, passenger_id, booking_id, now)


def cancel_hotel(
    session: Session, passenger_id: str, booking_id: int, now: datetime
) -> dict[str, Any]:
    """Cancel a hotel reservation (the row stays, marked cancelled) and refund it.

    Raises what ``quote_cancel_hotel`` raises.

    Returns:
        The quote's result: ``before``, ``fee`` and ``refunded``.
    """
    return partners.cancel(session, HOTEL, passenger_id, booking_id, now)
