"""LangChain tools over the travel database, one module per domain.

Each domain module builds its tools over a ``Database`` and declares, beside its
sensitive tools, the preview the customer sees before approving a call:
``make_flight_tools``, ``make_car_rental_tools``, ``make_hotel_tools`` and
``make_excursion_tools`` each return a ``DomainTools``. ``build_primary_tools`` assembles
the primary assistant's tools (its own bookings, flight search, the policy and, with a
key, web search). Which specialist binds which domain is decided in
``assistants.specialists``, not here.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool

from db.engine import Database
from tools.car_rentals import make_car_rental_tools
from tools.common import DomainTools, Preview, Quote, tool_error_message
from tools.excursions import make_excursion_tools
from tools.flights import make_flight_tools
from tools.handoff import make_handoff_tool
from tools.hotels import make_hotel_tools
from tools.web import make_tavily_tool

__all__ = [
    "DomainTools",
    "Preview",
    "Quote",
    "build_primary_tools",
    "make_car_rental_tools",
    "make_excursion_tools",
    "make_flight_tools",
    "make_hotel_tools",
    "make_tavily_tool",
    "tool_error_message",
]


def build_primary_tools(
    db: Database,
    *,
    lookup_policy: BaseTool | None = None,
    tavily_api_key: str | None = None,
) -> tuple[BaseTool, ...]:
    """Build the primary assistant's tools over ``db``.

    Args:
        db: The travel database; its clock defines "now" for every rule.
        lookup_policy: The policy tool; by default ``lookup_policy`` over the company
            policy (read on first use).
        tavily_api_key: Adds ``tavily_search`` when given.

    Returns:
        ``search_flights``, ``fetch_user_flight_information``, ``lookup_policy``,
        ``request_human_agent`` and, with a key, ``tavily_search``.
    """
    if lookup_policy is None:
        from tools.policies import make_lookup_policy_tool

        lookup_policy = make_lookup_policy_tool()
    flights = make_flight_tools(db)
    found = [
        flights.tool("search_flights"),
        flights.tool("fetch_user_flight_information"),
        lookup_policy,
        make_handoff_tool(),
    ]
    web = make_tavily_tool(tavily_api_key)
    if web is not None:
        found.append(web)
    return tuple(found)
