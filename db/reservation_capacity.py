"""Capacity of a partner: how many of its units (rooms, cars, places) are taken each day.

Periods are half-open, ``[first, stop)``: ``stop`` is the day after the last day a
reservation holds a unit. A search counts the units left with ``units_left``; a booking
or a change is refused on the day ``first_full_day`` finds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import date, timedelta


def daily_usage(periods: Iterable[tuple[date, date]]) -> Counter[date]:
    """Count, for every day, how many of the half-open periods ``[first, stop)`` cover it."""
    usage: Counter[date] = Counter()
    for first, stop in periods:
        day = first
        while day < stop:
            usage[day] += 1
            day += timedelta(days=1)
    return usage


def first_full_day(usage: Counter[date], first: date, stop: date, capacity: int) -> date | None:
    """Return the first day of ``[first, stop)`` with no unit left, or ``None``.

    Args:
        usage: Units taken per day.
        first: The first day wanted.
        stop: The day after the last day wanted.
        capacity: Units the partner has per day.
    """
    day = first
    while day < stop:
        if usage[day] >= capacity:
            return day
        day += timedelta(days=1)
    return None


def units_left(usage: Counter[date], first: date, stop: date, capacity: int) -> int:
    """Return how many units are free on every day of ``[first, stop)``."""
    taken = 0
    day = first
    while day < stop:
        taken = max(taken, usage[day])
        day += timedelta(days=1)
    return max(capacity - taken, 0)
