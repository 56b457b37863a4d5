"""Parsing of values that come from the model and formatting of values shown to the customer.

Every query module reads its inputs and shapes its outputs through these helpers, so a
date, a time or an amount looks the same whichever tool returns it:

* money: integer cents plus a formatted string (``"EUR 75.00"``), under ``<name>_cents``
  and ``<name>`` keys;
* times: the local time of the airport with its abbreviation and UTC offset
  (``"2026-05-04 15:05 CEST (+02:00)"``);
* dates: ``YYYY-MM-DD``.

It is also the one place where a value the model sent is checked before any SQL sees it:
ids within what the id columns hold (``row_id``), search text short and plain
(``search_text``, ``search_words``), dates and times of bounded length. An error quotes
the bad value through ``shown``, cut with an ellipsis, so no message grows with its input.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Any, Literal
from zoneinfo import ZoneInfo

from db.errors import InvalidInputError
from db.models import CURRENCY
from db.rules import format_money

_IATA = re.compile(r"^[A-Za-z]{3}$")

# The id columns are INTEGER: signed 32 bits on PostgreSQL (SQLite and BIGINT hold 64).
# Ids start at 1, so anything outside 1..MAX_ROW_ID names no row on any engine.
MAX_ROW_ID = 2**31 - 1
# Longest text a search argument may be: longer than any column it is matched against
# (names are at most 120 characters), far below SQLite's LIKE pattern limit.
MAX_SEARCH_CHARS = 120
# Most comma-separated keywords one search takes (each is one LIKE term).
MAX_SEARCH_WORDS = 10
# Longest question for the policy or the web search.
MAX_QUESTION_CHARS = 500
# Longest ticket number text: 16 digits, with room for spaces between groups.
MAX_TICKET_CHARS = 40
# Longest date or date-time text that can still be one ("2026-05-06T10:00:00.000+02:00").
_MAX_TIME_CHARS = 40
# How much of a bad value an error message quotes.
QUOTED_CHARS = 40
# Characters that are not text: controls (bar tab and line breaks) and lone surrogates,
# which PostgreSQL refuses (NUL) or no UTF-8 encoder can write (surrogates).
_NOT_TEXT = frozenset({"Cc", "Cs"})
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def shown(value: Any, limit: int = QUOTED_CHARS) -> str:
    """Quote a value for an error message, cut to about ``limit`` characters.

    A long text keeps its start, an ellipsis and its length (``'AAAA…' (1000000
    characters)``); a huge integer is named by its size, never printed digit by digit.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        start = repr(value[:limit])
        return f"{start[:-1]}…{start[-1]} ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…"


def row_id(value: Any, field: str) -> int:
    """Return ``value`` as the id of a row, or refuse what no id column can hold.

    Args:
        value: The id the model gave (the tools' signatures already make it an integer).
        field: The argument name, used in the error message.

    Raises:
        InvalidInputError: Not an integer, or outside ``1..MAX_ROW_ID``.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_ROW_ID:
        return value
    raise InvalidInputError(
        f"{field} must be a whole number from 1 to {MAX_ROW_ID}; got {shown(value)}."
    )


def plain_text(value: Any, field: str, max_chars: int) -> str:
    """Return ``value`` stripped, refusing what is not short plain text.

    Args:
        value: The text the model gave.
        field: The argument name, used in the error message.
        max_chars: The most characters allowed after stripping.

    Raises:
        InvalidInputError: Not text, too long, or with control or invalid characters.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be text; got {shown(value)}.")
    text = value.strip()
    if len(text) > max_chars:
        raise InvalidInputError(
            f"{field} is too long: at most {max_chars} characters; got {shown(text)}."
        )
    if any(
        unicodedata.category(char) in _NOT_TEXT and char not in _ALLOWED_CONTROLS for char in text
    ):
        raise InvalidInputError(
            f"{field} contains control or invalid characters; got {shown(text)}. Send plain text."
        )
    return text


def search_text(value: str | None, field: str) -> str | None:
    """Return a search argument stripped and lower-cased, or ``None`` when it is blank.

    The text is matched literally (callers use ``contains(..., autoescape=True)``), so
    ``%`` and ``_`` are characters like any other.

    Raises:
        InvalidInputError: Longer than ``MAX_SEARCH_CHARS``, or not plain text.
    """
    if value is None:
        return None
    text = plain_text(value, field, MAX_SEARCH_CHARS)
    return text.lower() or None


def search_words(value: str | None, field: str) -> list[str]:
    """Return the comma-separated words of a search argument, lower-cased.

    Raises:
        InvalidInputError: Too long, more than ``MAX_SEARCH_WORDS`` words, or not plain text.
    """
    if value is None:
        return []
    text = plain_text(value, field, MAX_SEARCH_CHARS)
    words = [word.strip().lower() for word in text.split(",") if word.strip()]
    if len(words) > MAX_SEARCH_WORDS:
        raise InvalidInputError(
            f"{field} has {len(words)} words; give at most {MAX_SEARCH_WORDS}, separated by commas."
        )
    return words


def money(name: str, cents: int) -> dict[str, int | str]:
    """Return ``{"<name>_cents": cents, "<name>": "EUR 12.34"}`` for one amount."""
    return {f"{name}_cents": cents, name: format_money(cents, CURRENCY)}


def fmt_money(cents: int) -> str:
    """Format cents in the company currency."""
    return format_money(cents, CURRENCY)


# Whether a write charges the customer or refunds them.
AmountKind = Literal["pay", "refund"]


def amount_line(kind: AmountKind, cents: int) -> str:
    """Return the last line of a preview: what the customer pays, or gets back."""
    label = "Refund" if kind == "refund" else "To pay"
    return f"{label}: {fmt_money(cents)}"


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@lru_cache(maxsize=4096)
def local_time(moment: datetime, timezone: str) -> str:
    """Format an aware UTC timestamp in an airport's local time.

    Remembered: every turn shows the passenger's flights again (``fetch_user_info``).

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
    text = value.strip() if isinstance(value, str) else ""
    try:
        if len(text) != 10:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(
            f"{field} must be a calendar date in YYYY-MM-DD format, e.g. 2026-06-01; "
            f"got {shown(value)}."
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
    text = value.strip() if isinstance(value, str) else ""
    try:
        if len(text) == 10:
            moment = start_of_day(parse_date(text, field))
            return moment + timedelta(days=1) if end else moment
        if not text or len(text) > _MAX_TIME_CHARS:
            raise ValueError(text)
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        # OverflowError: a moment at the very edge of the calendar (year 1 or 9999)
        # that moves past it when shifted to UTC or to the end of its day.
        raise InvalidInputError(
            f"{field} must be an ISO date (YYYY-MM-DD) or date-time (YYYY-MM-DDTHH:MM, "
            f"read as UTC unless it carries an offset such as +02:00); got {shown(value)}."
        ) from None


def airport_code_syntax(value: str) -> str | None:
    """Return ``value`` upper-cased when it is three letters (an IATA code), else ``None``."""
    text = value.strip()
    return text.upper() if _IATA.match(text) else None
