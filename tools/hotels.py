"""Hotel tools: search (safe) and the customer's hotel reservations (sensitive).

The rules live in ``db.hotels``; these tools read the configured passenger, call it and
return its result.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool

from db import hotels as hotel_queries
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

# What the customer sees before approving each sensitive hotel call.
HOTEL_PREVIEWS: dict[str, Preview] = {
    "book_hotel": Preview(
        "Book hotel",
        lambda s, p, a, now: hotel_queries.quote_book_hotel(
            s,
            p,
            int_arg(a, "hotel_id"),
            str_arg(a, "checkin_date"),
            str_arg(a, "checkout_date"),
            now,
        ),
    ),
    "update_hotel": Preview(
        "Change hotel",
        lambda s, p, a, now: hotel_queries.quote_update_hotel(
            s,
            p,
            int_arg(a, "booking_id"),
            optional_arg(a, "checkin_date"),
            optional_arg(a, "checkout_date"),
            now,
        ),
    ),
    "cancel_hotel": Preview(
        "Cancel hotel",
        lambda s, p, a, now: hotel_queries.quote_cancel_hotel(s, p, int_arg(a, "booking_id"), now),
    ),
}


def make_hotel_tools(db: Database) -> DomainTools:
    """Build the hotel tools over ``db``.

    Args:
        db: The travel database; its clock defines "today" for every date rule.

    Returns:
        ``search_hotels`` as the safe tool; ``book_hotel``, ``update_hotel`` and
        ``cancel_hotel`` as the sensitive ones.
    """

    @tool(parse_docstring=True)
    @with_rules
    def search_hotels(
        location: SearchText | None = None,
        name: SearchText | None = None,
        price_tier: SearchText | None = None,
        checkin_date: str | None = None,
        checkout_date: str | None = None,
    ) -> dict[str, Any]:
        """Search hotels by city, name or price tier, priced for a stay when dates are given.

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
        """
        result = read(
            db,
            lambda session, now: hotel_queries.search_hotels(
                session,
                now,
                location=location,
                name=name,
                price_tier=price_tier,
                checkin_date=checkin_date,
                checkout_date=checkout_date,
            ),
        )
        if not result["hotels"]:
            result["message"] = "No hotel matches. Try a shorter or different location or name."
        return result

    @tool(parse_docstring=True)
    @with_rules
    def book_hotel(
        hotel_id: RowId,
        checkin_date: str,
        checkout_date: str,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Book a hotel stay for the customer and charge its price.

        Needs a room free every night of the stay; at most {max_hotel_nights} nights,
        starting today or later. Returns the reservation's booking_id, dates and the
        amount charged.

        Args:
            hotel_id: The hotel_id from search_hotels.
            checkin_date: Check-in date, "YYYY-MM-DD".
            checkout_date: Check-out date, "YYYY-MM-DD", after checkin_date.
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="book_hotel",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={
                "hotel_id": hotel_id,
                "checkin_date": checkin_date,
                "checkout_date": checkout_date,
            },
            write=lambda session, now: hotel_queries.book_hotel(
                session, passenger_id, hotel_id, checkin_date, checkout_date, now
            ),
        )

    @tool(parse_docstring=True)
    @with_rules
    def update_hotel(
        booking_id: RowId,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
        checkin_date: str | None = None,
        checkout_date: str | None = None,
    ) -> dict[str, Any]:
        """Change the dates of the customer's hotel reservation.

        Give the new check-in date, the new check-out date or both; a date left out is
        kept. The stay is repriced; the difference is charged or refunded. Free until
        {hotel_free_hours} hours before the current check-in day, then the first night is
        charged as a fee. Returns the dates before and after and the amount charged or
        refunded.

        Args:
            booking_id: The hotel reservation's booking_id from the customer's information.
            checkin_date: New check-in date, "YYYY-MM-DD".
            checkout_date: New check-out date, "YYYY-MM-DD".
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="update_hotel",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={
                "booking_id": booking_id,
                "checkin_date": checkin_date,
                "checkout_date": checkout_date,
            },
            write=lambda session, now: hotel_queries.update_hotel(
                session, passenger_id, booking_id, checkin_date, checkout_date, now
            ),
        )

    @tool(parse_docstring=True)
    @with_rules
    def cancel_hotel(
        booking_id: RowId,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Cancel the customer's hotel reservation and refund it.

        Free until {hotel_free_hours} hours before the check-in day; later the first
        night is kept as a fee. Returns the fee and the amount refunded.

        Args:
            booking_id: The hotel reservation's booking_id from the customer's information.
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="cancel_hotel",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"booking_id": booking_id},
            write=lambda session, now: hotel_queries.cancel_hotel(
                session, passenger_id, booking_id, now
            ),
        )

    return DomainTools(
        safe=(search_hotels,),
        sensitive=(book_hotel, update_hotel, cancel_hotel),
        previews=HOTEL_PREVIEWS,
    )
