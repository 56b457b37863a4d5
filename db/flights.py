"""Flight search: flights as shown to the customer, their fares and the seats left.

Seats left in a class = seats of that class on the aircraft - segments of active tickets
in that class on the flight.

The passenger's ticket changes and cancellations are ``db.tickets``, their rules
``db.ticket_rules`` and ``db.ticket_quotes``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from db.errors import InvalidInputError, NotFoundError
from db.models import (
    FARE_CONDITIONS,
    Aircraft,
    Airport,
    Flight,
    FlightFare,
    Seat,
    Ticket,
    TicketFlight,
)
from db.values import (
    airport_code_syntax,
    local_time,
    money,
    parse_time_bound,
    search_text,
    shown,
    utc_time,
)

DEFAULT_SEARCH_LIMIT = 20
MAX_SEARCH_LIMIT = 50
# Airports suggested for a city name given in place of a code, and the room their names
# may take in the error message (the whole message stays under about 300 characters).
_AIRPORT_SUGGESTIONS = 8
_AIRPORT_HINT_CHARS = 150


# Search ----------------------------------------------------------------------------------


def airport_zones(session: Session, codes: set[str]) -> dict[str, Airport]:
    """Return the airports of ``codes`` by code (for their cities and time zones)."""
    if not codes:
        return {}
    rows = session.scalars(select(Airport).where(Airport.airport_code.in_(sorted(codes))))
    return {airport.airport_code: airport for airport in rows}


def flight_view(flight: Flight, airports: dict[str, Airport]) -> dict[str, Any]:
    """Return a flight as shown to the customer, with local airport times.

    Args:
        flight: The flight.
        airports: The departure and arrival airports by code.
    """
    dep = airports[flight.departure_airport]
    arr = airports[flight.arrival_airport]
    return {
        "flight_id": flight.flight_id,
        "flight_no": flight.flight_no,
        "departure_airport": flight.departure_airport,
        "arrival_airport": flight.arrival_airport,
        "route": f"{dep.city} ({dep.airport_code}) -> {arr.city} ({arr.airport_code})",
        "scheduled_departure": local_time(flight.scheduled_departure, dep.timezone),
        "scheduled_arrival": local_time(flight.scheduled_arrival, arr.timezone),
        "status": flight.status,
    }


def _seat_capacity(session: Session, aircraft_codes: set[str]) -> dict[tuple[str, str], int]:
    rows = session.execute(
        select(Seat.aircraft_code, Seat.fare_conditions, func.count())
        .where(Seat.aircraft_code.in_(sorted(aircraft_codes)))
        .group_by(Seat.aircraft_code, Seat.fare_conditions)
    )
    return {(code, fare): count for code, fare, count in rows}


def _seats_sold(session: Session, flight_ids: list[int]) -> dict[tuple[int, str], int]:
    rows = session.execute(
        select(TicketFlight.flight_id, TicketFlight.fare_conditions, func.count())
        .join(Ticket, Ticket.ticket_no == TicketFlight.ticket_no)
        .where(TicketFlight.flight_id.in_(flight_ids), Ticket.status == "active")
        .group_by(TicketFlight.flight_id, TicketFlight.fare_conditions)
    )
    return {(flight_id, fare): count for flight_id, fare, count in rows}


def seats_left(session: Session, flight: Flight, fare_conditions: str) -> int:
    """Return the seats still for sale in one fare class of a flight (never negative)."""
    capacity = _seat_capacity(session, {flight.aircraft_code}).get(
        (flight.aircraft_code, fare_conditions), 0
    )
    sold = _seats_sold(session, [flight.flight_id]).get((flight.flight_id, fare_conditions), 0)
    return max(capacity - sold, 0)


def _airport_hint(airports: list[Airport]) -> str:
    """Name matching airports, as many as fit ``_AIRPORT_HINT_CHARS``."""
    names: list[str] = []
    used = 0
    for airport in airports:
        name = f"{airport.airport_code} ({airport.airport_name})"
        if names and used + len(name) + 2 > _AIRPORT_HINT_CHARS:
            break
        names.append(name)
        used += len(name) + 2
    return f" Matching airports: {', '.join(names)}." if names else ""


def _resolve_airport(session: Session, value: str | None, field: str) -> str | None:
    """Validate an airport argument; suggest codes when a city name was given."""
    needle = search_text(value, field)
    if needle is None:
        return None
    code = airport_code_syntax(needle)
    if code is not None and session.get(Airport, code) is not None:
        return code
    suggestions = list(
        session.scalars(
            select(Airport)
            .where(
                or_(
                    func.lower(Airport.city).contains(needle, autoescape=True),
                    func.lower(Airport.airport_name).contains(needle, autoescape=True),
                )
            )
            .order_by(Airport.airport_code)
            .limit(_AIRPORT_SUGGESTIONS)
        )
    )
    hint = _airport_hint(suggestions)
    if code is not None:
        raise NotFoundError(f"No airport with IATA code {code} is served.{hint}")
    raise InvalidInputError(
        f"{field} must be a 3-letter IATA airport code such as CDG; got {shown(value)}.{hint}"
    )


def search_flights(
    session: Session,
    now: datetime,
    *,
    departure_airport: str | None = None,
    arrival_airport: str | None = None,
    start_time: str | None = None,
    end_time: str | None = None,
    limit: int = DEFAULT_SEARCH_LIMIT,
) -> dict[str, Any]:
    """Find flights ordered by departure, with price and seats left per fare class.

    Without ``start_time`` only flights departing from now on are listed. Times are ISO
    dates or date-times; a naive time is UTC; a bare date as ``end_time`` includes that
    whole day (UTC).

    Args:
        session: An open session.
        now: The database clock's now.
        departure_airport: 3-letter IATA code, any case.
        arrival_airport: 3-letter IATA code, any case.
        start_time: Earliest departure.
        end_time: Latest departure.
        limit: How many flights to return; clamped to 1..``MAX_SEARCH_LIMIT``.

    Returns:
        ``{"flights": [...], "count": int, "window": {"from", "to"}}``. A flight has
        ``flight_id``, ``flight_no``, airports, ``route``, local
        ``scheduled_departure``/``scheduled_arrival``, ``status``, ``aircraft`` and
        ``fares``: ``[{"fare_conditions", "price_cents", "price", "seats_left"}]``.

    Raises:
        InvalidInputError: A malformed, overlong or non-text airport, a malformed time,
            or ``end_time`` before ``start_time``.
        NotFoundError: An airport code that is not served.
    """
    departure = _resolve_airport(session, departure_airport, "departure_airport")
    arrival = _resolve_airport(session, arrival_airport, "arrival_airport")
    lower = parse_time_bound(start_time, "start_time", end=False) if start_time else now
    upper = parse_time_bound(end_time, "end_time", end=True) if end_time else None
    if upper is not None and upper <= lower:
        raise InvalidInputError(
            f"end_time ({end_time}) must be after start_time "
            f"({start_time or 'now, ' + utc_time(now)})."
        )
    limit = min(max(int(limit), 1), MAX_SEARCH_LIMIT)
    query = select(Flight).where(Flight.scheduled_departure >= lower)
    if upper is not None:
        query = query.where(Flight.scheduled_departure < upper)
    if departure:
        query = query.where(Flight.departure_airport == departure)
    if arrival:
        query = query.where(Flight.arrival_airport == arrival)
    flights = list(
        session.scalars(query.order_by(Flight.scheduled_departure, Flight.flight_id).limit(limit))
    )
    window = {"from": utc_time(lower), "to": utc_time(upper) if upper else None}
    if not flights:
        return {"flights": [], "count": 0, "window": window}
    ids = [flight.flight_id for flight in flights]
    airports = airport_zones(
        session, {f.departure_airport for f in flights} | {f.arrival_airport for f in flights}
    )
    aircraft = {
        a.aircraft_code: a.model
        for a in session.scalars(
            select(Aircraft).where(
                Aircraft.aircraft_code.in_(sorted({f.aircraft_code for f in flights}))
            )
        )
    }
    capacity = _seat_capacity(session, {flight.aircraft_code for flight in flights})
    sold = _seats_sold(session, ids)
    fares: dict[int, dict[str, int]] = {}
    for fare in session.scalars(select(FlightFare).where(FlightFare.flight_id.in_(ids))):
        fares.setdefault(fare.flight_id, {})[fare.fare_conditions] = fare.amount_cents
    results = []
    for flight in flights:
        view = flight_view(flight, airports)
        view["aircraft"] = aircraft.get(flight.aircraft_code, flight.aircraft_code)
        view["fares"] = [
            {
                "fare_conditions": fare_class,
                **money("price", fares[flight.flight_id][fare_class]),
                "seats_left": max(
                    capacity.get((flight.aircraft_code, fare_class), 0)
                    - sold.get((flight.flight_id, fare_class), 0),
                    0,
                ),
            }
            for fare_class in FARE_CONDITIONS
            if fare_class in fares.get(flight.flight_id, {})
            and (flight.aircraft_code, fare_class) in capacity
        ]
        results.append(view)
    return {"flights": results, "count": len(results), "window": window}
