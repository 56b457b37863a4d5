"""Car rentals, declared: a rental is a reservation of a car from pick-up to return.

A rental runs from ``start_date`` to ``end_date`` inclusive (picked up on the first day,
returned on the last); it is priced per day at the offer's daily rate. An offer has
``fleet_size`` cars per day; a day is full when that many confirmed reservations cover
it. A rental changes or cancels free until ``CAR_FREE_CANCEL_HOURS`` before 00:00 UTC of
its pick-up day; later one day's rate (as paid) is charged. Search, quotes and writes
are ``db.reservations``'s.
"""

from __future__ import annotations

from db.models import CarRental, CarRentalBooking
from db.periods import Period
from db.reservation_kind import ReservationKind
from db.rules import CAR_FREE_CANCEL_HOURS, MAX_CAR_RENTAL_DAYS

CAR_RENTAL = ReservationKind(
    kind="car_rental",
    noun="car rental",
    label="Car rental reservation",
    payment_prefix="car",
    booking_model=CarRentalBooking,
    catalogue_model=CarRental,
    catalogue_key="rental_id",
    period=Period(
        fields=("start_date", "end_date"),
        text="{0} to {1} ({units})",
        max_units=MAX_CAR_RENTAL_DAYS,
        noun="rental",
        reversed_message="end_date ({last}) must be on or after start_date ({first}).",
    ),
    free_hours=CAR_FREE_CANCEL_HOURS,
    late_fee_what="one day's rate is charged",
    late_fee_parts=lambda dates: (dates[1] - dates[0]).days + 1,
    rate=CarRental.daily_rate_cents,
    capacity=CarRental.fleet_size,
    shown=(
        CarRental.name,
        CarRental.location,
        CarRental.price_tier,
        CarRental.car_class,
        CarRental.daily_rate_cents,
        CarRental.fleet_size,
    ),
    full_message=(
        "{item.name} ({item.car_class}, {item.location}) has no car left on {day}. Try "
        "other dates or another offer in {item.location}."
    ),
    missing_item=(
        "No car-rental offer with id {id} exists. Use search_car_rentals to find the rental_id."
    ),
    missing_booking=(
        "No car rental reservation with id {id} exists. The passenger's reservations are "
        "listed in their information (fetch_user_flight_information)."
    ),
    unchanged="already runs {dates}",
    book_lines=("Car: {item.car_class} ({item.price_tier})",),
    results_key="car_rentals",
    search_columns=(CarRental.location, CarRental.name, CarRental.price_tier),
    dates_message=(
        "Give both start_date and end_date (YYYY-MM-DD) to price a rental, or neither to "
        "list offers with their daily rates."
    ),
    left_key="cars_left",
    summary_key="car_rental_reservations",
    summary_title="Car rentals",
    summary_columns=(("company", CarRental.name), CarRental.car_class, CarRental.location),
    placeholder="car",
    placeholder_columns=(CarRental.name, CarRental.price_tier),
)
