"""Hotel tools, declared: the text the model reads (``tools.reservations`` builds them)."""

from __future__ import annotations

from db.hotels import HOTEL
from tools.reservations import ReservationTools

HOTEL_TOOLS = ReservationTools(
    kind=HOTEL,
    search_name="search_hotels",
    search_doc="""Search hotels by city, name or price tier, priced for a stay when dates are given.

        Text filters match any part, ignoring case. Each hotel has a hotel_id (use it to
        book), its nightly rate and, when both dates are given, the number of nights, the
        total price of the stay and the rooms left for those nights. A stay is at most
        {max_hotel_nights} nights.

        Args:
            location: City, or part of it, e.g. "Basel".
            name: Hotel name, or part of it.
            price_tier: Price tier: "Budget", "Midscale", "Upscale" or "Luxury".
            checkin_date: Check-in date, "YYYY-MM-DD"; give it with checkout_date.
            checkout_date: Check-out date, "YYYY-MM-DD", after checkin_date.
        """,
    book_doc="""Book a hotel stay for the customer and charge its price.

        Needs a room free every night of the stay; at most {max_hotel_nights} nights,
        starting today or later. Returns the reservation's booking_id, dates and the
        amount charged.

        Args:
            hotel_id: The hotel_id from search_hotels.
            checkin_date: Check-in date, "YYYY-MM-DD".
            checkout_date: Check-out date, "YYYY-MM-DD", after checkin_date.
        """,
    update_doc="""Change the dates of the customer's hotel reservation.

        Give the new check-in date, the new check-out date or both; a date left out is
        kept. The stay is repriced; the difference is charged or refunded. Free until
        {hotel_free_hours} hours before the current check-in day, then the first night is
        charged as a fee. Returns the dates before and after and the amount charged or
        refunded.

        Args:
            booking_id: The hotel reservation's booking_id from the customer's information.
            checkin_date: New check-in date, "YYYY-MM-DD".
            checkout_date: New check-out date, "YYYY-MM-DD".
        """,
    cancel_doc="""Cancel the customer's hotel reservation and refund it.

        Free until {hotel_free_hours} hours before the check-in day; later the first
        night is kept as a fee. Returns the fee and the amount refunded.

        Args:
            booking_id: The hotel reservation's booking_id from the customer's information.
        """,
    no_match="No hotel matches. Try a shorter or different location or name.",
)
make_hotel_tools = HOTEL_TOOLS.build
