"""Hotels, declared: a stay is a reservation of a room from check-in to check-out.

A stay's nights are the days from check-in up to the day before check-out, priced at
the hotel's nightly rate. A hotel has ``rooms`` rooms per night; a night is full when
that many confirmed reservations cover it. A stay changes or cancels free until
``HOTEL_FREE_CANCEL_HOURS`` before 00:00 UTC of its check-in day; later the first night
(of the stay as paid) is charged. Search, quotes and writes are ``db.reservations``'s.
"""

from __future__ import annotations

from db.models import Hotel, HotelBooking
from db.periods import Period
from db.reservation_kind import ReservationKind
from db.rules import HOTEL_FREE_CANCEL_HOURS, MAX_HOTEL_NIGHTS

HOTEL = ReservationKind(
    kind="hotel",
    noun="hotel",
    label="Hotel reservation",
    payment_prefix="hotel",
    booking_model=HotelBooking,
    catalogue_model=Hotel,
    catalogue_key="hotel_id",
    period=Period(
        fields=("checkin_date", "checkout_date"),
        text="check-in {0}, check-out {1} ({units})",
        unit="night",
        last_day_included=False,
        max_units=MAX_HOTEL_NIGHTS,
        noun="stay",
        reversed_message=(
            "checkout_date ({last}) must be after checkin_date ({first}); a stay is at "
            "least one night."
        ),
    ),
    free_hours=HOTEL_FREE_CANCEL_HOURS,
    late_fee_what="the first night is charged",
    late_fee_parts=lambda dates: max((dates[1] - dates[0]).days, 1),
    rate=Hotel.nightly_rate_cents,
    capacity=Hotel.rooms,
    shown=(Hotel.name, Hotel.location, Hotel.price_tier, Hotel.nightly_rate_cents, Hotel.rooms),
    full_message=(
        "{item.name} ({item.location}) has no room left for the night of {day}. Try other "
        "dates or another hotel in {item.location}."
    ),
    missing_item="No hotel with id {id} exists. Use search_hotels to find the hotel_id.",
    missing_booking=(
        "No hotel reservation with id {id} exists. The passenger's hotel reservations are "
        "listed in their information (fetch_user_flight_information)."
    ),
    unchanged="already has these dates ({dates})",
    results_key="hotels",
    search_columns=(Hotel.location, Hotel.name, Hotel.price_tier),
    dates_message=(
        "Give both checkin_date and checkout_date (YYYY-MM-DD) to price a stay, or "
        "neither to list hotels with their nightly rates."
    ),
    left_key="rooms_left",
    summary_key="hotel_reservations",
    summary_title="Hotels",
    summary_columns=(("hotel_name", Hotel.name), Hotel.location),
    placeholder="hotel",
    placeholder_columns=(Hotel.name,),
)
