"""Excursion (trip recommendation) search and the passenger's excursion reservations.

A reservation is one place on one date at the excursion's price. An excursion has
``capacity_per_day`` places per date. A reservation changes or cancels free until
``EXCURSION_FREE_CANCEL_HOURS`` before 00:00 UTC of its date; later the price paid is not
refunded (so a late change pays the new date in full). Every write is priced by a quote
first (see ``db.partners``); the write applies exactly that quote.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from db import partners
from db.errors import InvalidInputError, UnavailableError
from db.models import ExcursionBooking, TripRecommendation
from db.partners import (
    ReservationKind,
    ReservationQuote,
    require_bookable_start,
    require_not_started,
)
from db.passengers import require_passenger
from db.rules import EXCURSION_FREE_CANCEL_HOURS
from db.values import fmt_money, iso_date, money, parse_date, search_text, search_words

SEARCH_LIMIT = 20
KIND_LABEL = "Excursion reservation"


def validate_excursion_date(value: str | date, now: datetime) -> date:
    """Parse and check an excursion date.

    Args:
        value: ``YYYY-MM-DD``.
        now: The database clock's now.

    Returns:
        The date.

    Raises:
        InvalidInputError: The date is malformed or past.
        RuleViolationError: The date is too far ahead.
    """
    day = parse_date(value, "date")
    require_bookable_start(day, now, "date")
    return day


def excursion_view(excursion: TripRecommendation) -> dict[str, Any]:
    """Return an excursion as shown to the customer."""
    return {
        "recommendation_id": excursion.id,
        "name": excursion.name,
        "location": excursion.location,
        "keywords": excursion.keywords,
        "details": excursion.details,
        **money("price", excursion.price_cents),
        "places_per_day": excursion.capacity_per_day,
    }


EXCURSION = ReservationKind(
    kind="excursion",
    label=KIND_LABEL,
    payment_prefix="excursion",
    booking_model=ExcursionBooking,
    catalogue_model=TripRecommendation,
    catalogue_key="recommendation_id",
    date_fields=("date",),
    free_hours=EXCURSION_FREE_CANCEL_HOURS,
    late_fee_what="the price paid is not refunded",
    late_fee_parts=lambda dates: 1,
    view=excursion_view,
    dates_text=lambda dates: iso_date(dates[0]),
    missing_item=(
        "No excursion with id {id} exists. Use search_trip_recommendations to find the "
        "recommendation_id."
    ),
    missing_booking=(
        "No excursion reservation with id {id} exists. The passenger's reservations are "
        "listed in their information (fetch_user_flight_information)."
    ),
)


def search_trip_recommendations(
    session: Session,
    *,
    location: str | None = None,
    name: str | None = None,
    keywords: str | None = None,
    limit: int = SEARCH_LIMIT,
) -> dict[str, Any]:
    """Find excursions by case-insensitive partial matches.

    Args:
        session: An open session.
        location: Part of the city name.
        name: Part of the excursion's name.
        keywords: Comma-separated words; an excursion matches when its keywords contain
            any of them.
        limit: How many excursions to return at most.

    Returns:
        ``{"trip_recommendations": [...], "matches": int}`` with price per person and
        places per day.

    Raises:
        InvalidInputError: A search text is too long, has too many keywords or is not
            plain text (``db.values.search_text``, ``search_words``).
    """
    query = select(TripRecommendation)
    for column, value, field in (
        (TripRecommendation.location, location, "location"),
        (TripRecommendation.name, name, "name"),
    ):
        needle = search_text(value, field)
        if needle is not None:
            query = query.where(func.lower(column).contains(needle, autoescape=True))
    words = search_words(keywords, "keywords")
    if words:
        query = query.where(
            or_(
                *(
                    func.lower(TripRecommendation.keywords).contains(word, autoescape=True)
                    for word in words
                )
            )
        )
    order = (TripRecommendation.location, TripRecommendation.name, TripRecommendation.id)
    excursions, matches = partners.first_matches(session, query, order, limit)
    views = [excursion_view(excursion) for excursion in excursions]
    return {"trip_recommendations": views, "matches": matches}


def places_left(
    session: Session,
    excursion: TripRecommendation,
    day: date,
    exclude_booking_id: int | None = None,
) -> int:
    """Return how many places of an excursion are still free on ``day``."""
    query = select(func.count()).where(
        ExcursionBooking.recommendation_id == excursion.id,
        ExcursionBooking.status == "confirmed",
        ExcursionBooking.date == day,
    )
    if exclude_booking_id is not None:
        query = query.where(ExcursionBooking.id != exclude_booking_id)
    taken = session.scalar(query) or 0
    return max(excursion.capacity_per_day - taken, 0)


def _require_place(
    session: Session,
    excursion: TripRecommendation,
    day: date,
    exclude_booking_id: int | None = None,
) -> None:
    if places_left(session, excursion, day, exclude_booking_id) <= 0:
        raise UnavailableError(
            f"{excursion.name} ({excursion.location}) has no place left on {iso_date(day)}. "
            "Try another date or another excursion."
        )


def quote_book_excursion(
    session: Session,
    passenger_id: str,
    recommendation_id: int,
    day: str | date,
    now: datetime,
) -> ReservationQuote:
    """Price a place on an excursion without writing.

    Args:
        session: An open session.
        passenger_id: Who books.
        recommendation_id: The excursion's id from ``search_trip_recommendations``.
        day: ``YYYY-MM-DD``.
        now: The database clock's now.

    Returns:
        The quote of the booking (its ``net_cents`` is the price charged).

    Raises:
        NotFoundError: Unknown passenger or excursion.
        InvalidInputError: A malformed or past date.
        RuleViolationError: The date is too far ahead.
        UnavailableError: No place is left that day.
    """
    require_passenger(session, passenger_id)
    when = validate_excursion_date(day, now)
    excursion = partners.catalogue_entry(session, EXCURSION, recommendation_id)
    _require_place(session, excursion, when)
    return partners.quote_booking(
        EXCURSION,
        passenger_id,
        excursion,
        (when,),
        excursion.price_cents,
        f"1 person x {fmt_money(excursion.price_cents)}",
    )


def book_excursion(
    session: Session,
    passenger_id: str,
    recommendation_id: int,
    day: str | date,
    now: datetime,
) -> dict[str, Any]:
    """Reserve a place on an excursion and charge it; raises what the quote raises.

    Returns:
        The quote's result: ``status``, ``booking_id``, ``excursion``, ``after``,
        ``total``, ``charged`` and a ``summary`` sentence.
    """
    return partners.book(
        session,
        EXCURSION,
        recommendation_id,
        now,
        lambda: quote_book_excursion(session, passenger_id, recommendation_id, day, now),
    )


def quote_update_excursion(
    session: Session, passenger_id: str, booking_id: int, day: str | date, now: datetime
) -> ReservationQuote:
    """Price moving an excursion reservation to another date without writing.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the reservation).
        booking_id: The excursion reservation id.
        day: The new ``YYYY-MM-DD`` date.
        now: The database clock's now.

    Returns:
        The quote of the change.

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is cancelled or has taken place, or the date is too far.
        InvalidInputError: A malformed, past or unchanged date.
        UnavailableError: No place is left on the new date.
    """
    booking = partners.owned_booking(session, EXCURSION, passenger_id, booking_id)
    require_not_started(booking.date, now, f"{KIND_LABEL} {booking_id}")
    when = validate_excursion_date(day, now)
    if when == booking.date:
        raise InvalidInputError(
            f"{KIND_LABEL} {booking_id} is already on {iso_date(when)}; nothing to change."
        )
    excursion = partners.catalogue_entry(session, EXCURSION, booking.recommendation_id)
    _require_place(session, excursion, when, exclude_booking_id=booking.id)
    return partners.quote_change(
        EXCURSION, booking, excursion, (when,), excursion.price_cents, None, now
    )


def update_excursion(
    session: Session, passenger_id: str, booking_id: int, day: str | date, now: datetime
) -> dict[str, Any]:
    """Move an excursion reservation to another date; raises what the quote raises.

    Returns:
        The quote's result: ``before``, ``after``, ``total``, ``fee``, and what was
        ``charged`` or ``refunded``.
    """
    return partners.change(
        session,
        EXCURSION,
        passenger_id,
        booking_id,
        now,
        lambda: quote_update_excursion(session, passenger_id, booking_id, day, now),
    )


def quote_cancel_excursion(
    session: Session, passenger_id: str, booking_id: int, now: datetime
) -> ReservationQuote:
    """Price the cancellation of an excursion reservation without writing.

    Args:
        session: An open session.
        passenger_id: Who asks (must own the reservation).
        booking_id: The excursion reservation id.
        now: The database clock's now.

    Returns:
        The quote (its ``net_cents`` is minus the refund).

    Raises:
        NotFoundError: Unknown reservation.
        OwnershipError: The reservation is another passenger's.
        RuleViolationError: It is already cancelled or has taken place.
    """
    return partners.quote_cancellation(session, EXCURSION, passenger_id, booking_id, now)


def cancel_excursion(
    session: Session, passenger_id: str, booking_id: int, now: datetime
) -> dict[str, Any]:
    """Cancel an excursion reservation (kept, marked cancelled) and refund it.

    Raises what ``quote_cancel_excursion`` raises.

    Returns:
        The quote's result: ``before``, ``fee`` and ``refunded``.
    """
    return partners.cancel(session, EXCURSION, passenger_id, booking_id, now)
