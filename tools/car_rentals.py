"""Car-rental tools: search (safe) and the customer's car rental reservations (sensitive).

The rules live in ``db.car_rentals``; these tools read the configured passenger, call it
and return its result.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool

from db import car_rentals as car_queries
from db.engine import Database
from tools.common import (
    DomainTools,
    Preview,
    RowId,
    SearchText,
    int_arg,
    optional_arg,
    passenger_id_from,
    read,
    str_arg,
    with_rules,
    write_once,
)

# What the customer sees before approving each sensitive car-rental call.
CAR_RENTAL_PREVIEWS: dict[str, Preview] = {
    "book_car_rental": Preview(
        "Book car rental",
        lambda s, p, a, now: car_queries.quote_book_car_rental(
            s, p, int_arg(a, "rental_id"), str_arg(a, "start_date"), str_arg(a, "end_date"), now
        ),
    ),
    "update_car_rental": Preview(
        "Change car rental",
        lambda s, p, a, now: car_queries.quote_update_car_rental(
            s,
            p,
            int_arg(a, "booking_id"),
            optional_arg(a, "start_date"),
            optional_arg(a, "end_date"),
            now,
        ),
    ),
    "cancel_car_rental": Preview(
        "Cancel car rental",
        lambda s, p, a, now: car_queries.quote_cancel_car_rental(
            s, p, int_arg(a, "booking_id"), now
        ),
    ),
}


def make_car_rental_tools(db: Database) -> DomainTools:
    """Build the car-rental tools over ``db``.

    Args:
        db: The travel database; its clock defines "today" for every date rule.

    Returns:
        ``search_car_rentals`` as the safe tool; ``book_car_rental``,
        ``update_car_rental`` and ``cancel_car_rental`` as the sensitive ones.
    """

    @tool(parse_docstring=True)
    @with_rules
    def search_car_rentals(
        location: SearchText | None = None,
        name: SearchText | None = None,
        price_tier: SearchText | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
    ) -> dict[str, Any]:
        """Search car rentals by city, company or price tier, priced for dates when given.

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
        """
        result = read(
            db,
            lambda session, now: car_queries.search_car_rentals(
                session,
                now,
                location=location,
                name=name,
                price_tier=price_tier,
                start_date=start_date,
                end_date=end_date,
            ),
        )
        if not result["car_rentals"]:
            result["message"] = (
                "No car rental matches. Try a shorter or different location or name."
            )
        return result

    @tool(parse_docstring=True)
    @with_rules
    def book_car_rental(
        rental_id: RowId,
        start_date: str,
        end_date: str,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Book a rental car for the customer and charge its price.

        Needs a car free every day from pick-up to return; at most {max_car_days} days,
        starting today or later. Returns the reservation's booking_id, dates and the
        amount charged.

        Args:
            rental_id: The rental_id from search_car_rentals.
            start_date: Pick-up date, "YYYY-MM-DD".
            end_date: Return date, "YYYY-MM-DD", on or after start_date.
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="book_car_rental",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"rental_id": rental_id, "start_date": start_date, "end_date": end_date},
            write=lambda session, now: car_queries.book_car_rental(
                session, passenger_id, rental_id, start_date, end_date, now
            ),
        )

    @tool(parse_docstring=True)
    @with_rules
    def update_car_rental(
        booking_id: RowId,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
        start_date: str | None = None,
        end_date: str | None = None,
    ) -> dict[str, Any]:
        """Change the dates of the customer's car rental reservation.

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
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="update_car_rental",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"booking_id": booking_id, "start_date": start_date, "end_date": end_date},
            write=lambda session, now: car_queries.update_car_rental(
                session, passenger_id, booking_id, start_date, end_date, now
            ),
        )

    @tool(parse_docstring=True)
    @with_rules
    def cancel_car_rental(
        booking_id: RowId,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Cancel the customer's car rental reservation and refund it.

        Free until {car_free_hours} hours before the pick-up day; later one day's rate is
        kept as a fee. Returns the fee and the amount refunded.

        Args:
            booking_id: The car rental reservation's booking_id from the customer's
                information.
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="cancel_car_rental",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"booking_id": booking_id},
            write=lambda session, now: car_queries.cancel_car_rental(
                session, passenger_id, booking_id, now
            ),
        )

    return DomainTools(
        safe=(search_car_rentals,),
        sensitive=(book_car_rental, update_car_rental, cancel_car_rental),
        previews=CAR_RENTAL_PREVIEWS,
    )
