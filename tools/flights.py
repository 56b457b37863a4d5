"""Flight tools: the passenger's information, flight search, ticket changes and cancellation.

``fetch_user_flight_information`` and ``search_flights`` are safe; the two ticket writes
are sensitive (the graph asks the customer before they run). The search lives in
``db.flights`` and the ticket rules in ``db.ticket_rules`` and ``db.ticket_quotes``;
these tools only read the configured passenger, call them and shape the result.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool

from db import flights as flight_queries
from db import tickets as ticket_queries
from db.engine import Database
from db.passengers import passenger_summary
from tools.common import (
    DomainTools,
    Preview,
    RowId,
    SearchText,
    TicketNumber,
    int_arg,
    passenger_id_from,
    read,
    str_arg,
    with_rules,
    write_once,
)

# What the customer sees before approving each sensitive ticket call.
FLIGHT_PREVIEWS: dict[str, Preview] = {
    "update_ticket_to_new_flight": Preview(
        "Change flight",
        lambda s, p, a, now: ticket_queries.quote_ticket_change(
            s, p, str_arg(a, "ticket_no"), int_arg(a, "new_flight_id"), now
        ),
    ),
    "cancel_ticket": Preview(
        "Cancel ticket",
        lambda s, p, a, now: ticket_queries.quote_ticket_cancellation(
            s, p, str_arg(a, "ticket_no"), now
        ),
    ),
}


# What a search row leaves out for the model: the airport codes are in its route, the
# amounts in cents beside the amounts, and the aircraft, which no tool takes. Every later
# model call of the conversation pays for a search again while it is in the history.
_LEFT_OUT = frozenset({"departure_airport", "arrival_airport", "aircraft"})


def _lean(flight: dict[str, Any]) -> dict[str, Any]:
    """Return a search row as the model gets it (see ``_LEFT_OUT``)."""
    row = {k: v for k, v in flight.items() if k not in _LEFT_OUT}
    if isinstance(row.get("fares"), list):
        row["fares"] = [{k: v for k, v in f.items() if k != "price_cents"} for f in row["fares"]]
    return row


def make_flight_tools(db: Database) -> DomainTools:
    """Build the flight tools over ``db``.

    Args:
        db: The travel database; its clock defines "now" for every rule.

    Returns:
        ``search_flights`` and ``fetch_user_flight_information`` as the safe tools (the
        primary assistant binds them too); ``update_ticket_to_new_flight`` and
        ``cancel_ticket`` as the sensitive ones.
    """

    @tool(parse_docstring=True)
    def fetch_user_flight_information(config: RunnableConfig) -> dict[str, Any]:
        """Fetch the customer's tickets, flights, seats and reservations.

        Returns every ticket of the customer (cancelled ones marked as such) with its
        flight segments: flight_id, flight number, route, local departure and arrival
        times, flight status, fare class, seat, whether checked in and the amount paid;
        and their hotel, car rental and excursion reservations with dates, totals and
        status. The customer is the one this conversation is configured for.

        Args:
            config: Injected run config carrying the passenger id; never set by the model.
        """
        passenger_id = passenger_id_from(config)
        return read(db, lambda session, now: passenger_summary(session, passenger_id, now))

    @tool(parse_docstring=True)
    def search_flights(
        departure_airport: SearchText | None = None,
        arrival_airport: SearchText | None = None,
        start_time: str | None = None,
        end_time: str | None = None,
        limit: int | None = 20,
    ) -> dict[str, Any]:
        """Search flights by route and departure time, with prices and seats left.

        Flights come ordered by departure. Each has a flight_id (use it to change a
        ticket), local departure and arrival times, status, and per fare class (Economy,
        Comfort, Business) the price and the number of seats left. Without start_time
        only flights departing from now on are listed.

        Args:
            departure_airport: Departure airport as a 3-letter IATA code, e.g. "CDG".
            arrival_airport: Arrival airport as a 3-letter IATA code, e.g. "BSL".
            start_time: Earliest departure, "YYYY-MM-DD" or "YYYY-MM-DDTHH:MM" (UTC
                unless an offset such as "+02:00" is given).
            end_time: Latest departure, same format; a bare date includes that whole day.
            limit: How many flights to return, 1 to 50.
        """
        result = read(
            db,
            lambda session, now: flight_queries.search_flights(
                session,
                now,
                departure_airport=departure_airport,
                arrival_airport=arrival_airport,
                start_time=start_time,
                end_time=end_time,
                limit=flight_queries.DEFAULT_SEARCH_LIMIT if limit is None else limit,
            ),
        )
        result["flights"] = [_lean(flight) for flight in result["flights"]]
        if not result["flights"]:
            result["message"] = (
                "No flight matches. Try other airports, or a wider or later time window."
            )
        return result

    @tool(parse_docstring=True)
    @with_rules
    def update_ticket_to_new_flight(
        ticket_no: TicketNumber,
        new_flight_id: RowId,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Move the customer's ticket to another flight on the same route.

        The segment of the ticket on the new flight's route moves, with a seat of the
        same fare class. Allowed only to a flight with the same departure and arrival
        airports leaving at least {change_hours} hours from now, while the current flight
        is not checked in and leaves at least {cancel_hours} hours from now. A change fee
        applies unless the ticket was bought within the last {free_hours} hours, plus any
        fare increase (a lower fare is not refunded). Returns the old and new flight, the
        new seat, the change fee, the fare difference and the total charged.

        Args:
            ticket_no: The 16-digit ticket number, e.g. "7240005432906569".
            new_flight_id: The flight_id of the new flight, as returned by search_flights.
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="update_ticket_to_new_flight",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"ticket_no": ticket_no, "new_flight_id": new_flight_id},
            write=lambda session, now: ticket_queries.update_ticket_to_new_flight(
                session, passenger_id, ticket_no, new_flight_id, now
            ),
        )

    @tool(parse_docstring=True)
    @with_rules
    def cancel_ticket(
        ticket_no: TicketNumber,
        config: RunnableConfig,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> dict[str, Any]:
        """Cancel the customer's ticket and refund it.

        Every flight of the ticket not yet flown is cancelled and its seat released.
        Allowed only while none of those flights is checked in and each leaves at least
        {cancel_hours} hours from now. A cancellation fee is kept unless the ticket was
        bought within the last {free_hours} hours. Returns the cancelled flights, the
        cancellation fee and the amount refunded.

        Args:
            ticket_no: The 16-digit ticket number, e.g. "7240005432906569".
            config: Injected run config carrying the passenger id; never set by the model.
            tool_call_id: Injected id of this call; a repeated call takes effect once.
        """
        passenger_id = passenger_id_from(config)
        return write_once(
            db,
            config=config,
            tool_name="cancel_ticket",
            tool_call_id=tool_call_id,
            passenger_id=passenger_id,
            args={"ticket_no": ticket_no},
            write=lambda session, now: ticket_queries.cancel_ticket(
                session, passenger_id, ticket_no, now
            ),
        )

    return DomainTools(
        safe=(search_flights, fetch_user_flight_information),
        sensitive=(update_ticket_to_new_flight, cancel_ticket),
        previews=FLIGHT_PREVIEWS,
    )
