"""Deadlines of a partner reservation: until when it may change, and what a late change costs.

* a reservation whose start date has passed cannot be changed or cancelled;
* the free change/cancellation window of a reservation ends ``<KIND>_FREE_CANCEL_HOURS``
  hours before 00:00 UTC of its start date; later the kind's late fee applies (see
  ``db.rules``).
"""

from __future__ import annotations

from datetime import date, datetime

from db.errors import RuleViolationError
from db.reservation_kind import BookingT, CatalogueT, ReservationKind
from db.rules import hours
from db.values import iso_date, start_of_day, today, utc_time


def require_not_started(start: date, now: datetime, what: str) -> None:
    """Refuse to change or cancel a reservation whose start date has passed.

    Args:
        start: The reservation's first day.
        now: The database clock's now.
        what: The reservation, named for the message, e.g. ``"Hotel reservation 4"``.

    Raises:
        RuleViolationError: ``start`` is before today.
    """
    if start < today(now):
        raise RuleViolationError(
            f"{what} started on {iso_date(start)}; a reservation that has already started "
            "can no longer be changed or cancelled here. The customer should contact the "
            "partner directly."
        )


def free_until(start: date, free_hours: int) -> datetime:
    """Return the end of the free change/cancellation window of a reservation."""
    return start_of_day(start) - hours(free_hours)


def is_late(start: date, free_hours: int, now: datetime) -> bool:
    """Tell whether ``now`` is past the free window of a reservation starting ``start``."""
    return now > free_until(start, free_hours)


def late_fee_note(start: date, free_hours: int, now: datetime, what: str) -> str:
    """Explain a partner fee: free until the deadline, or ``what`` after it.

    Args:
        start: The reservation's (current) first day.
        free_hours: The kind's free window in hours.
        now: The database clock's now.
        what: What the late fee is, e.g. ``"the first night is charged"``.

    Returns:
        A short phrase for the quote.
    """
    deadline = utc_time(free_until(start, free_hours))
    if not is_late(start, free_hours, now):
        return f"free until {deadline}"
    return f"{what}: the free window ended {deadline}"


def late_fee(
    kind: ReservationKind[BookingT, CatalogueT], booking: BookingT, now: datetime
) -> tuple[int, str]:
    """Return the fee of changing or cancelling a reservation now, and its note."""
    dates = kind.dates_of(booking)
    late = is_late(dates[0], kind.free_hours, now)
    fee = booking.total_cents // kind.late_fee_parts(dates) if late else 0
    return fee, late_fee_note(dates[0], kind.free_hours, now, kind.late_fee_what)
