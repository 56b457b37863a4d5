"""Excursions (trip recommendations), declared: a reservation is one place on one date.

A reservation is priced at the excursion's price per person. An excursion has
``capacity_per_day`` places per date. A reservation changes or cancels free until
``EXCURSION_FREE_CANCEL_HOURS`` before 00:00 UTC of its date; later the price paid is not
refunded (so a late change pays the new date in full). Search, quotes and writes are
``db.reservations``'s.
"""

from __future__ import annotations

from db.models import ExcursionBooking, TripRecommendation
from db.periods import Period
from db.reservation_kind import ReservationKind
from db.rules import EXCURSION_FREE_CANCEL_HOURS

EXCURSION = ReservationKind(
    kind="excursion",
    noun="excursion",
    label="Excursion reservation",
    payment_prefix="excursion",
    booking_model=ExcursionBooking,
    catalogue_model=TripRecommendation,
    catalogue_key="recommendation_id",
    period=Period(fields=("date",)),
    free_hours=EXCURSION_FREE_CANCEL_HOURS,
    late_fee_what="the price paid is not refunded",
    late_fee_parts=lambda dates: 1,
    rate=TripRecommendation.price_cents,
    capacity=TripRecommendation.capacity_per_day,
    shown=(
        TripRecommendation.name,
        TripRecommendation.location,
        TripRecommendation.keywords,
        TripRecommendation.details,
        TripRecommendation.price_cents,
        ("places_per_day", TripRecommendation.capacity_per_day),
    ),
    full_message=(
        "{item.name} ({item.location}) has no place left on {day}. Try another date or "
        "another excursion."
    ),
    missing_item=(
        "No excursion with id {id} exists. Use search_trip_recommendations to find the "
        "recommendation_id."
    ),
    missing_booking=(
        "No excursion reservation with id {id} exists. The passenger's reservations are "
        "listed in their information (fetch_user_flight_information)."
    ),
    unchanged="is already on {dates}",
    price_detail="1 person x {rate}",
    change_detail=None,
    results_key="trip_recommendations",
    search_columns=(TripRecommendation.location, TripRecommendation.name),
    keywords_column=TripRecommendation.keywords,
    summary_key="excursion_reservations",
    summary_title="Excursions",
    summary_columns=(TripRecommendation.name, TripRecommendation.location),
    placeholder="excursion",
    placeholder_columns=(TripRecommendation.name,),
)
