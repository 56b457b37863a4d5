"""LangChain tools over the travel database, one module per domain.

``build_tools(db)`` returns every tool of the assistant as a ``ToolSet``, grouped the way
the graph binds them: the primary assistant's tools, and per specialist its safe tools
(run at once) and sensitive tools (run only after the customer approves).
``describe_action`` tells the customer what a pending sensitive call would do, computed
by the same quote functions the writes apply. ``TOOL_ERRORS`` are the exceptions a
``ToolNode`` turns into error messages for the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolInvocationError
from sqlalchemy.orm import Session

from db import car_rentals as car_queries
from db import excursions as excursion_queries
from db import flights as flight_queries
from db import hotels as hotel_queries
from db.engine import Database
from db.errors import InvalidInputError, MissingPassengerError, TravelError
from tools.car_rentals import make_car_rental_tools
from tools.excursions import make_excursion_tools
from tools.flights import make_flight_tools
from tools.hotels import make_hotel_tools
from tools.web import make_tavily_tool

__all__ = [
    "SENSITIVE_TOOL_NAMES",
    "TOOL_ERRORS",
    "ActionPreview",
    "ToolSet",
    "build_tools",
    "describe_action",
]

# Exceptions a ToolNode answers with an error ToolMessage instead of failing the run:
# business failures, and arguments the model got wrong (ToolNode wraps pydantic's
# ValidationError in ToolInvocationError). Anything else is a bug and propagates.
TOOL_ERRORS: tuple[type[Exception], ...] = (TravelError, ToolInvocationError)

# The writes of SPEC section 4: each one interrupts for the customer's approval.
SENSITIVE_TOOL_NAMES = frozenset(
    {
        "update_ticket_to_new_flight",
        "cancel_ticket",
        "book_car_rental",
        "update_car_rental",
        "cancel_car_rental",
        "book_hotel",
        "update_hotel",
        "cancel_hotel",
        "book_excursion",
        "update_excursion",
        "cancel_excursion",
    }
)


@dataclass(frozen=True)
class ToolSet:
    """Every tool of the assistant, grouped by who binds it and whether it needs approval.

    Attributes:
        fetch_user_flight_information: The passenger's tickets and reservations.
        search_flights: Flight search with prices and seats left.
        lookup_policy: Company policy search, if configured.
        tavily_search: Web search, only when a Tavily key is set.
        flights_safe: The flight specialist's safe tools.
        flights_sensitive: Ticket change and cancellation.
        car_rentals_safe: Car-rental search.
        car_rentals_sensitive: Car-rental book, update, cancel.
        hotels_safe: Hotel search.
        hotels_sensitive: Hotel book, update, cancel.
        excursions_safe: Excursion search.
        excursions_sensitive: Excursion book, update, cancel.
    """

    fetch_user_flight_information: BaseTool
    search_flights: BaseTool
    lookup_policy: BaseTool | None
    tavily_search: BaseTool | None
    flights_safe: tuple[BaseTool, ...]
    flights_sensitive: tuple[BaseTool, ...]
    car_rentals_safe: tuple[BaseTool, ...]
    car_rentals_sensitive: tuple[BaseTool, ...]
    hotels_safe: tuple[BaseTool, ...]
    hotels_sensitive: tuple[BaseTool, ...]
    excursions_safe: tuple[BaseTool, ...]
    excursions_sensitive: tuple[BaseTool, ...]

    def __post_init__(self) -> None:
        sensitive = {t.name for t in self._sensitive_tools()}
        if sensitive != SENSITIVE_TOOL_NAMES:
            raise ValueError(
                "The sensitive tools must be exactly those of the spec; missing "
                f"{sorted(SENSITIVE_TOOL_NAMES - sensitive)}, unexpected "
                f"{sorted(sensitive - SENSITIVE_TOOL_NAMES)}."
            )
        safe_and_sensitive = {t.name for t in self._safe_tools()} & sensitive
        if safe_and_sensitive:
            raise ValueError(f"Tools both safe and sensitive: {sorted(safe_and_sensitive)}.")

    def _sensitive_tools(self) -> tuple[BaseTool, ...]:
        return (
            self.flights_sensitive
            + self.car_rentals_sensitive
            + self.hotels_sensitive
            + self.excursions_sensitive
        )

    def _safe_tools(self) -> tuple[BaseTool, ...]:
        optional = tuple(t for t in (self.lookup_policy, self.tavily_search) if t is not None)
        return (
            self.fetch_user_flight_information,
            self.search_flights,
            *optional,
            *self.flights_safe,
            *self.car_rentals_safe,
            *self.hotels_safe,
            *self.excursions_safe,
        )

    @property
    def sensitive_names(self) -> frozenset[str]:
        """Return the names of the tools that need the customer's approval."""
        return frozenset(t.name for t in self._sensitive_tools())

    def all_tools(self) -> list[BaseTool]:
        """Return every tool once (by name), safe ones first."""
        seen: dict[str, BaseTool] = {}
        for item in self._safe_tools() + self._sensitive_tools():
            seen.setdefault(item.name, item)
        return list(seen.values())


def build_tools(
    db: Database,
    *,
    lookup_policy: BaseTool | None = None,
    tavily_api_key: str | None = None,
) -> ToolSet:
    """Build every tool over ``db``.

    Args:
        db: The travel database; its clock defines "now" for every rule.
        lookup_policy: The policy tool; by default ``lookup_policy`` over
            ``data/policy.md`` (read on first use).
        tavily_api_key: Binds ``tavily_search`` when given.

    Returns:
        The tool set.
    """
    if lookup_policy is None:
        from tools.policies import make_lookup_policy_tool

        lookup_policy = make_lookup_policy_tool()
    flights = make_flight_tools(db)
    cars = make_car_rental_tools(db)
    hotels = make_hotel_tools(db)
    excursions = make_excursion_tools(db)
    return ToolSet(
        fetch_user_flight_information=flights.fetch_user_flight_information,
        search_flights=flights.search_flights,
        lookup_policy=lookup_policy,
        tavily_search=make_tavily_tool(tavily_api_key),
        flights_safe=flights.safe,
        flights_sensitive=flights.sensitive,
        car_rentals_safe=cars.safe,
        car_rentals_sensitive=cars.sensitive,
        hotels_safe=hotels.safe,
        hotels_sensitive=hotels.sensitive,
        excursions_safe=excursions.safe,
        excursions_sensitive=excursions.sensitive,
    )


# Previews of sensitive calls -----------------------------------------------------------------


@dataclass(frozen=True)
class ActionPreview:
    """What a pending sensitive tool call would do, for the customer to approve.

    Attributes:
        tool_name: The tool called.
        title: A short title, e.g. ``"Change flight"``.
        lines: Human-readable lines: before -> after, prices, fees, total.
        error: Why the call would be refused, when its quote already fails.
    """

    tool_name: str
    title: str
    lines: list[str] = field(default_factory=list)
    error: str | None = None


_Quoter = Callable[[Session, str, Mapping[str, Any], datetime], Any]


def _int(args: Mapping[str, Any], name: str) -> int:
    value = _required(args, name)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a whole number; got {value!r}.") from None


def _required(args: Mapping[str, Any], name: str) -> Any:
    if args.get(name) in (None, ""):
        raise InvalidInputError(f"The argument {name} is missing.")
    return args[name]


def _str(args: Mapping[str, Any], name: str) -> str:
    return str(_required(args, name))


def _optional(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    return None if value in (None, "") else str(value)


_PREVIEWS: dict[str, tuple[str, _Quoter]] = {
    "update_ticket_to_new_flight": (
        "Change flight",
        lambda s, p, a, now: flight_queries.quote_ticket_change(
            s, p, _str(a, "ticket_no"), _int(a, "new_flight_id"), now
        ),
    ),
    "cancel_ticket": (
        "Cancel ticket",
        lambda s, p, a, now: flight_queries.quote_ticket_cancellation(
            s, p, _str(a, "ticket_no"), now
        ),
    ),
    "book_car_rental": (
        "Book car rental",
        lambda s, p, a, now: car_queries.quote_book_car_rental(
            s, p, _int(a, "rental_id"), _str(a, "start_date"), _str(a, "end_date"), now
        ),
    ),
    "update_car_rental": (
        "Change car rental",
        lambda s, p, a, now: car_queries.quote_update_car_rental(
            s, p, _int(a, "booking_id"), _optional(a, "start_date"), _optional(a, "end_date"), now
        ),
    ),
    "cancel_car_rental": (
        "Cancel car rental",
        lambda s, p, a, now: car_queries.quote_cancel_car_rental(s, p, _int(a, "booking_id"), now),
    ),
    "book_hotel": (
        "Book hotel",
        lambda s, p, a, now: hotel_queries.quote_book_hotel(
            s, p, _int(a, "hotel_id"), _str(a, "checkin_date"), _str(a, "checkout_date"), now
        ),
    ),
    "update_hotel": (
        "Change hotel",
        lambda s, p, a, now: hotel_queries.quote_update_hotel(
            s,
            p,
            _int(a, "booking_id"),
            _optional(a, "checkin_date"),
            _optional(a, "checkout_date"),
            now,
        ),
    ),
    "cancel_hotel": (
        "Cancel hotel",
        lambda s, p, a, now: hotel_queries.quote_cancel_hotel(s, p, _int(a, "booking_id"), now),
    ),
    "book_excursion": (
        "Book excursion",
        lambda s, p, a, now: excursion_queries.quote_book_excursion(
            s, p, _int(a, "recommendation_id"), _str(a, "date"), now
        ),
    ),
    "update_excursion": (
        "Change excursion",
        lambda s, p, a, now: excursion_queries.quote_update_excursion(
            s, p, _int(a, "booking_id"), _str(a, "date"), now
        ),
    ),
    "cancel_excursion": (
        "Cancel excursion",
        lambda s, p, a, now: excursion_queries.quote_cancel_excursion(
            s, p, _int(a, "booking_id"), now
        ),
    ),
}


def _raw_lines(args: Mapping[str, Any]) -> list[str]:
    return [f"{name}: {value}" for name, value in args.items()]


def describe_action(
    db: Database, passenger_id: str, tool_name: str, args: dict[str, Any]
) -> ActionPreview:
    """Describe what a pending sensitive call would do, without doing it.

    The preview comes from the same quote the write applies, at the database clock's
    now, so the customer approves the very fee, fare difference or refund the write will
    charge (unless the data changes in between, in which case the write re-checks).

    Args:
        db: The travel database.
        passenger_id: The configured passenger.
        tool_name: The tool called.
        args: The call's arguments, as the model gave them.

    Returns:
        The preview; ``error`` is set when the call would be refused, and then ``lines``
        lists the raw arguments. An unknown tool gets a generic title and its raw
        arguments.
    """
    entry = _PREVIEWS.get(tool_name)
    if entry is None:
        return ActionPreview(tool_name=tool_name, title=f"Run {tool_name}", lines=_raw_lines(args))
    title, quoter = entry
    try:
        if not passenger_id or not passenger_id.strip():
            raise MissingPassengerError("No passenger id is configured for this conversation.")
        with db.session() as session:
            quote = quoter(session, passenger_id.strip(), args, db.clock())
            lines: list[str] = list(quote.lines())
    except TravelError as error:
        return ActionPreview(
            tool_name=tool_name, title=title, lines=_raw_lines(args), error=str(error)
        )
    return ActionPreview(tool_name=tool_name, title=title, lines=lines)
