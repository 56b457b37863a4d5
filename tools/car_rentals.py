"""Car-rental tools, declared: the text the model reads (``tools.reservations`` builds them)."""

from __future__ import annotations

from db.car_rentals import CAR_RENTAL
from tools.reservations import ReservationTools

CAR_RENTAL_TOOLS = ReservationTools(
    kind=CAR_RENTAL,
    search_name="search_car_rentals",
    search_doc="""Search car rentals by city, company or price tier, priced for dates when given.

        Text filters match any part, ignoring case. Each offer has a rental_id (use it to
        book), the car class and daily rate and, when both dates are given, the number of
        days (both dates included), the total price and the cars left. A rental is at
        most {max_car_days} days.

        Args:
            location: City, or part of it, e.g. "Basel".
            name: Rental company name, or part of it.
            price_tier: Price tier: "Economy", "Midsize", "Premium" or "Luxury".
            start_date: Pick-up date, "YYYY-MM-DD"; give it with end_date.
            end_date: Return date, "YYYY-MM-DD", on or after start_date.
        """,
    book_doc="""Book a rental car for the customer and charge its price.

        Needs a car free every day from pick-up to return; at most {max_car_days} days,
        starting today or later. Returns the reservation's booking_id, dates and the
        amount charged.

        Args:
            rental_id: The rental_id from search_car_rentals.
            start_date: Pick-up date, "YYYY-MM-DD".
            end_date: Return date, "YYYY-MM-DD", on or after start_date.
        """,
    update_doc="""Change the dates of the customer's car rental reservation.

        Give the new pick-up date, the new return date or both; a date left out is kept.
        The rental is repriced; the difference is charged or refunded. Free until
        {car_free_hours} hours before the current pick-up day, then one day's rate is
        charged as a fee. Returns the dates before and after and the amount charged or
        refunded.

        Args:
            booking_id: The car rental reservation's booking_id from the customer's
                information.
            start_date: New pick-up date, "YYYY-MM-DD".
            end_date: New return date, "YYYY-MM-DD".
        """,
    cancel_doc="""Cancel the customer's car rental reservation and refund it.

        Free until {car_free_hours} hours before the pick-up day; later one day's rate is
        kept as a fee. Returns the fee and the amount refunded.

        Args:
            booking_id: The car rental reservation's booking_id from the customer's
                information.
        """,
    no_match="No car rental matches. Try a shorter or different location or name.",
)
make_car_rental_tools = CAR_RENTAL_TOOLS.build
