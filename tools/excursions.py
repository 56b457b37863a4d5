"""Excursion tools: search (safe) and the customer's excursion reservations (sensitive).

The rules live in ``db.excursions``; these tools read the configured passenger, call it
and return its result.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool

from db import excursions as excursion_queries
from db.engine import Database
from tools.common import (
    DomainTools,
    Preview,
    RowId,
    SearchText,
    int_arg,
    passenger_id_from,
    read,
    str_arg,
    with_rules,
    write_once,
)

# What the customer sees before approving each sensitive excursion call.
EXCURSION_PREVIEWS: dict[str, Preview] = {
    "book_excursion": Preview(
        "Book excursion",
        lambda s, p, a, now: excursion_queries.quote_book_excursion(
            s, p, int_arg(a, "recommendation_id"), str_arg(a, "date"), now
        ),
    ),
    "update_excursion": Preview(
        "Change excursion",
        lambda s, p, a, now: excursion_queries.quote_update_excursion(
            s, p, int_arg(a, "booking_id"), str_arg(a, "date"), now
        ),
    ),
    "cancel_excursion": Preview(
        "Cancel excursion",
        lambda s, p, a, now: excursion_queries.quote_cancel_excursion(
            s, p, int_arg(a, "booking_id"), now
        ),
    ),
}


def make_excursion_tools(db: Database) -> DomainTools:
    """Build the excursion tools over ``db``.

    Args:
        db: The travel database; its clock defines "today" for every date rule.

    Returns:
        ``search_trip_recommendations`` as the safe tool; ``book_excursion``,
        ``update_excursion`` and ``cancel_excursion`` as the sensitive ones.
    """

    @tool(parse_docstring=True)
    def search_trip_recommendations(
        location: SearchText | None = None,
        name: SearchText | None = None,
        keywords: SearchText | None = None,
    ) -> dict[str, Any]:
        """Search excursions and trip recommendations by city, name or keywords.

        Text filters match any part, ignoring case. Each excursion has a
        recommendation_id (use it to book), details, the price per person and the places
        available per day.

        Args:
            location: City, or part of it, e.g. "Basel".
            name: Excursion name, or part of it.
            keywords: Comma-separated words, e.g. "museum, art"; an excursion matches
                when any of them is among its keywords.
        """
        result = read(
            db,
            lambda session, now: excursion_queries.search_trip_recommendations(
                session, location=location, name=name, keywords=keywords
            ),
        )
        if not result["trip_recommendations"]:
            result["message"] = "No excursion matches. Try fewer or broader keywords."
        return result

    @tool(parse_docstring=True)
    @with_rules
    def book_excursion(
        recommendation_id: RowId,
        date: str,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Book a place on an excursion for the customer and charge its price.

        Needs a place left that day, today or later. Returns the reservation's
        booking_id, the date and the amount charged.

        Args:
            recommendation_id: The recommendation_id from search_trip_recommendations.
            date: The day of the excursion, "YYYY-MM-DD".
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="book_excursion",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"recommendation_id": recommendation_id, "date": date},
            write=lambda session, now: excursion_queries.book_excursion(
                session, passenger_id, recommendation_id, date, now
            ),
        )

    @tool(parse_docstring=True)
    @with_rules
    def update_excursion(
        booking_id: RowId,
        date: str,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Move the customer's excursion reservation to another day.

        Free until {excursion_free_hours} hours before the current excursion day; later
        the price paid is not refunded, so the new day is paid in full. Returns the dates
        before and after and the amount charged or refunded.

        Args:
            booking_id: The excursion reservation's booking_id from the customer's
                information.
            date: The new day, "YYYY-MM-DD".
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="update_excursion",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"booking_id": booking_id, "date": date},
            write=lambda session, now: excursion_queries.update_excursion(
                session, passenger_id, booking_id, date, now
            ),
        )

    @tool(parse_docstring=True)
    @with_rules
    def cancel_excursion(
        booking_id: RowId,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Cancel the customer's excursion reservation and refund it.

        Free until {excursion_free_hours} hours before the excursion day; later the price
        paid is not refunded. Returns the fee and the amount refunded.

        Args:
            booking_id: The excursion reservation's booking_id from the customer's
                information.
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="cancel_excursion",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"booking_id": booking_id},
            write=lambda session, now: excursion_queries.cancel_excursion(
                session, passenger_id, booking_id, now
            ),
        )

    return DomainTools(
        safe=(search_trip_recommendations,),
        sensitive=(book_excursion, update_excursion, cancel_excursion),
        previews=EXCURSION_PREVIEWS,
    )
