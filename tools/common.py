"""What every tool shares: the configured passenger, reads, and once-only writes.

The passenger a tool acts for comes only from the run's config
(``config["configurable"]["passenger_id"]``), never from an argument the model fills in.
Writes run in one transaction through ``db.writes.run_once``, keyed by the tool call id,
so a write repeated for the same tool call takes effect once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from sqlalchemy.orm import Session

from db import rules
from db.engine import Database
from db.errors import MissingPassengerError
from db.writes import run_once

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# The numbers tool descriptions quote, taken from the one table of rules so the prompt
# text never disagrees with what the tools enforce.
RULE_TEXT: dict[str, int] = {
    "change_hours": rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE,
    "cancel_hours": rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL,
    "free_hours": rules.FREE_WINDOW_HOURS_AFTER_BOOKING,
    "hotel_free_hours": rules.HOTEL_FREE_CANCEL_HOURS,
    "car_free_hours": rules.CAR_FREE_CANCEL_HOURS,
    "excursion_free_hours": rules.EXCURSION_FREE_CANCEL_HOURS,
    "max_hotel_nights": rules.MAX_HOTEL_NIGHTS,
    "max_car_days": rules.MAX_CAR_RENTAL_DAYS,
    "max_days_ahead": rules.MAX_DAYS_AHEAD,
}


def with_rules(function: F) -> F:
    """Fill ``{placeholders}`` of a tool's docstring with the numbers of ``db.rules``.

    Apply it below ``@tool`` so the description the model reads is already filled in.
    """
    if function.__doc__:
        function.__doc__ = function.__doc__.format(**RULE_TEXT)
    return function


def passenger_id_from(config: RunnableConfig | None) -> str:
    """Return the passenger id configured for this conversation.

    Args:
        config: The run's config, as injected into a tool or node.

    Returns:
        The passenger id, stripped of surrounding spaces.

    Raises:
        MissingPassengerError: The config carries no passenger id.
    """
    configurable = (config or {}).get("configurable") or {}
    value = configurable.get("passenger_id")
    if value is None or not str(value).strip():
        raise MissingPassengerError(
            "No passenger id is configured for this conversation, so no booking can be "
            "looked up or changed. Ask the customer to restart the assistant with their "
            "passenger id (travel-assistant chat --passenger-id ID)."
        )
    return str(value).strip()


def read(db: Database, query: Callable[[Session, datetime], T]) -> T:
    """Run a read-only query with a fresh session and the database clock's now.

    Args:
        db: The database.
        query: Called with the session and now.

    Returns:
        What ``query`` returns.
    """
    with db.session() as session:
        return query(session, db.clock())


def write_once(
    db: Database,
    *,
    tool_name: str,
    tool_call_id: str | None,
    passenger_id: str,
    write: Callable[[Session, datetime], dict[str, Any]],
) -> dict[str, Any]:
    """Run a write in one transaction, at most once per tool call.

    Args:
        db: The database.
        tool_name: The tool's name, stored with the result.
        tool_call_id: The injected tool call id (``None`` when invoked directly).
        passenger_id: The configured passenger.
        write: Called with the session and now; returns the JSON-able result.

    Returns:
        The write's result, or the stored result of the earlier run of this tool call.
    """
    now = db.clock()
    with db.transaction() as session:
        return run_once(
            session,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            passenger_id=passenger_id,
            now=now,
            write=lambda: write(session, now),
        )


@dataclass(frozen=True)
class DomainTools:
    """The tools of one specialist's domain, split by whether they need approval."""

    safe: tuple[BaseTool, ...]
    sensitive: tuple[BaseTool, ...]
