"""The injectable clock: every "now" in the project comes from here."""

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


def fixed_clock(moment: datetime) -> Clock:
    """Return a clock that always answers ``moment`` (which must be timezone-aware)."""
    if moment.tzinfo is None:
        raise ValueError("fixed_clock needs a timezone-aware datetime")
    frozen = moment.astimezone(UTC)
    return lambda: frozen
