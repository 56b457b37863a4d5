"""Parsing of values that come from the model and formatting of values shown to the customer.

Every query module reads its inputs and shapes its outputs through these helpers, so a
date, a time or an amount looks the same whichever tool returns it:

* money: integer cents plus a formatted string (``"EUR 75.00"``), under ``<name>_cents``
  and ``<name>`` keys;
* times: the local time of the airport with its abbreviation and UTC offset
  (``"2026-05-04 15:05 CEST (+02:00)"``);
* dates: ``YYYY-MM-DD``.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from db.errors import InvalidInputError
from db.models import CURRENCY
from db.rules import format_money

_IATA = re.compile(r"^[A-Za-z]{3}$")


def money(name: str, cents: int) -> dict[str, int | str]:
    """Return ``{"<name>_cents": cents, "<name>": "EUR 12.34"}`` for one amount."""
    return {f"{name}_cents": cents, name: format_money(cents, CURRENCY)}


def fmt_money(cents: int) -> str:
    """Format cents in the company currency."""
    return format_money(cents, CURRENCY)


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def local_time(moment: datetime, timezone: str) -> str:
    """Format an aware UTC timestamp in an airport's local time.

    Args:
        moment: A timezone-aware timestamp.
        timezone: The IANA timezone of the airport, e.g. ``"Europe/Paris"``.

    Returns:
        ``"YYYY-MM-DD HH:MM ABBR (+HH:MM)"``, e.g. ``"2026-05-04 15:05 CEST (+02:00)"``.
    """
    local = moment.astimezone(_zone(timezone))
    offset = local.strftime("%z")
    offset = f"{offset[:3]}:{offset[3:]}"
    abbreviation = local.tzname() or offset
    return f"{local:%Y-%m-%d %H:%M} {abbreviation} ({offset})"


def utc_time(moment: datetime) -> str:
    """Format an aware timestamp as UTC, e.g. ``"2026-05-04 09:00 UTC"``."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def iso_date(day: date) -> str:
    """Format a calendar date as ``YYYY-MM-DD``."""
    return day.isoformat()


def today(now: datetime) -> date:
    """Return the calendar date of ``now`` in UTC: the "today" of every date rule."""
    return now.astimezone(UTC).date()


def start_of_day(day: date) -> datetime:
    """Return 00:00 UTC of ``day`` (partner deadlines are counted from it)."""
    return datetime.combine(day, time(0, 0), tzinfo=UTC)


def parse_date(value: str | date, field: str) -> date:
    """Parse a ``YYYY-MM-DD`` date given by the model.

    Args:
        value: The text (or an already parsed date).
        field: The argument name, used in the error message.

    Returns:
        The date.

    Raises:
        InvalidInputError: The text is not a ``YYYY-MM-DD`` calendar date.
    """
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    text = str(value).strip()
    try:
        if len(text) != 10:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(
            f"{field} must be a calendar date in YYYY-MM-DD format, e.g. 2026-06-01; got {value!r}."
        ) from None


def parse_time_bound(value: str, field: str, *, end: bool) -> datetime:
    """Parse an ISO date or date-time given as a search bound.

    A naive value is read as UTC. A bare date means the start of that day (UTC) for a
    start bound and the end of that day for an end bound, so ``end_time="2026-05-06"``
    includes flights on the 6th.

    Args:
        value: ``YYYY-MM-DD``, ``YYYY-MM-DDTHH:MM[:SS]`` or with an offset
            (``...+02:00`` / ``...Z``).
        field: The argument name, used in the error message.
        end: Whether this is the end of a window.

    Returns:
        An aware UTC timestamp.

    Raises:
        InvalidInputError: The text is neither an ISO date nor an ISO date-time.
    """
    text = value.strip()
    if len(text) == 10:
        day = parse_date(text, field)
        moment = start_of_day(day)
        return moment + timedelta(days=1) if end else moment
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        raise InvalidInputError(
            f"{field} must be an ISO date (YYYY-MM-DD) or date-time (YYYY-MM-DDTHH:MM, "
            f"read as UTC unless it carries an offset such as +02:00); got {value!r}."
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def airport_code_syntax(value: str) -> str | None:
    """Return ``value`` upper-cased when it is three letters (an IATA code), else ``None``."""
    text = value.strip()
    return text.upper() if _IATA.match(text) else None
