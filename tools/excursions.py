"""Excursion tools, declared: the text the model reads (``tools.reservations`` builds them)."""

from __future__ import annotations

from db.excursions import EXCURSION
from tools.reservations import ReservationTools

EXCURSION_TOOLS = ReservationTools(
    kind=EXCURSION,
    search_name="search_trip_recommendations",
    search_doc="""Search excursions and trip recommendations by city, name or keywords.

        Text filters match any part, ignoring case. Each excursion has a
        recommendation_id (use it to book), details, the price per person and the places
        available per day.

        Args:
            location: City, or part of it, e.g. "Basel".
            name: Excursion name, or part of it.
            keywords: Comma-separated words, e.g. "museum, art"; an excursion matches
                when any of them is among its keywords.
        """,
    book_doc="""Book a place on an excursion for the customer and charge its price.

        Needs a place left that day, today or later. Returns the reservation's
        booking_id, the date and the amount charged.

        Args:
            recommendation_id: The recommendation_id from search_trip_recommendations.
            date: The day of the excursion, "YYYY-MM-DD".
        """,
    update_doc="""Move the customer's excursion reservation to another day.

        Free until {excursion_free_hours} hours before the current excursion day; later
        the price paid is not refunded, so the new day is paid in full. Returns the dates
        before and after and the amount charged or refunded.

        Args:
            booking_id: The excursion reservation's booking_id from the customer's
                information.
            date: The new day, "YYYY-MM-DD".
        """,
    cancel_doc="""Cancel the customer's excursion reservation and refund it.

        Free until {excursion_free_hours} hours before the excursion day; later the price
        paid is not refunded. Returns the fee and the amount refunded.

        Args:
            booking_id: The excursion reservation's booking_id from the customer's
                information.
        """,
    no_match="No excursion matches. Try fewer or broader keywords.",
)
make_excursion_tools = EXCURSION_TOOLS.build
