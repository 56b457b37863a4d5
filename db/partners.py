"""What hotel, car-rental and excursion reservations share: date rules, fees and quotes.

Date rules (the same for searches and writes, so a price shown is a price bookable):

* dates are ``YYYY-MM-DD``; "today" is the UTC date of the database clock's now;
* a reservation may start today or later, and at most ``MAX_DAYS_AHEAD`` days ahead;
* a reservation whose start date has passed cannot be changed or cancelled;
* the free change/cancellation window of a reservation ends ``<KIND>_FREE_CANCEL_HOURS``
  hours before 00:00 UTC of its start date; later the kind's late fee applies (see
  ``db.rules``).

Every partner write is priced by a ``ReservationQuote``. Its ``net_cents`` is what the
write moves: positive is charged, negative refunded (new total - old total + fee).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Literal

from db.errors import InvalidInputError, RuleViolationError
from db.rules import MAX_DAYS_AHEAD, hours
from db.values import fmt_money, iso_date, money, start_of_day, today, utc_time

Action = Literal["book", "update", "cancel"]
RESULT_STATUS: dict[Action, str] = {"book": "booked", "update": "changed", "cancel": "cancelled"}


def require_bookable_start(start: date, now: datetime, field_name: str) -> None:
    """Check that a reservation start is neither past nor too far ahead.

    Args:
        start: The first day of the reservation.
        now: The database clock's now.
        field_name: The argument name, used in messages.

    Raises:
        InvalidInputError: ``start`` is before today.
        RuleViolationError: ``start`` is more than ``MAX_DAYS_AHEAD`` days ahead.
    """
    current = today(now)
    if start < current:
        raise InvalidInputError(
            f"{field_name} {iso_date(start)} is in the past; today is {iso_date(current)}. "
            "Ask the customer for future dates."
        )
    latest = current + timedelta(days=MAX_DAYS_AHEAD)
    if start > latest:
        raise RuleViolationError(
            f"{field_name} {iso_date(start)} is too far ahead: reservations open "
            f"{MAX_DAYS_AHEAD} days in advance (until {iso_date(latest)})."
        )


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


@dataclass(frozen=True)
class ReservationQuote:
    """What a partner write would do, computed without writing.

    Attributes:
        action: ``"book"``, ``"update"`` or ``"cancel"``.
        kind: ``"hotel"``, ``"car_rental"`` or ``"excursion"``.
        kind_label: The kind for people, e.g. ``"Hotel reservation"``.
        passenger_id: Who the reservation belongs to.
        booking_id: The reservation id (``None`` before a booking exists).
        item: The catalogue entry shown to the customer (id, name, location, ...).
        before: The dates before the write (``None`` for a booking).
        after: The dates after the write (``None`` for a cancellation).
        before_text: ``before`` for people, e.g. ``"check-in 2026-05-10, ..."``.
        after_text: ``after`` for people.
        old_total_cents: What the reservation cost before (0 for a booking).
        new_total_cents: What it costs after (0 for a cancellation).
        price_detail: How ``new_total_cents`` is made, e.g. ``"3 nights x EUR 150.00"``.
        fee_cents: The late change or cancellation fee.
        fee_note: Why the fee is what it is.
    """

    action: Action
    kind: str
    kind_label: str
    passenger_id: str
    booking_id: int | None
    item: dict[str, Any]
    before: dict[str, str] | None
    after: dict[str, str] | None
    before_text: str | None
    after_text: str | None
    old_total_cents: int
    new_total_cents: int
    price_detail: str | None
    fee_cents: int = 0
    fee_note: str | None = None
    extra_lines: tuple[str, ...] = field(default=())

    @property
    def net_cents(self) -> int:
        """Return the money the write moves: positive charged, negative refunded."""
        return self.new_total_cents - self.old_total_cents + self.fee_cents

    @property
    def title(self) -> str:
        """Return a short title for the approval prompt."""
        verb = {"book": "Book", "update": "Change", "cancel": "Cancel"}[self.action]
        noun = {"hotel": "hotel", "car_rental": "car rental", "excursion": "excursion"}
        return f"{verb} {noun.get(self.kind, self.kind)}"

    def lines(self) -> list[str]:
        """Return the before -> after and price lines shown before approval."""
        name = self.item.get("name", "")
        location = self.item.get("location", "")
        header = f"{name}, {location}" if location else str(name)
        lines: list[str] = []
        if self.booking_id is not None:
            lines.append(f"{self.kind_label} {self.booking_id}: {header}")
        else:
            lines.append(header)
        lines.extend(self.extra_lines)
        if self.action == "book":
            lines.append(f"Dates: {self.after_text}")
            lines.append(f"Price: {self.price_detail}")
        elif self.action == "update":
            lines.append(f"Dates: {self.before_text} -> {self.after_text}")
            lines.append(
                f"Price: {fmt_money(self.old_total_cents)} -> {fmt_money(self.new_total_cents)}"
                + (f" ({self.price_detail})" if self.price_detail else "")
            )
            lines.append(f"Change fee: {fmt_money(self.fee_cents)} ({self.fee_note})")
        else:
            lines.append(f"Dates: {self.before_text}")
            lines.append(f"Paid: {fmt_money(self.old_total_cents)}")
            lines.append(f"Cancellation fee: {fmt_money(self.fee_cents)} ({self.fee_note})")
        lines.append(_net_line(self.net_cents))
        return lines

    def as_result(self, booking_id: int) -> dict[str, Any]:
        """Return the JSON-able result of the applied write.

        Args:
            booking_id: The reservation id (the new one for a booking).
        """
        charged = max(self.net_cents, 0)
        refunded = max(-self.net_cents, 0)
        result: dict[str, Any] = {
            "status": RESULT_STATUS[self.action],
            "booking_id": booking_id,
            self.kind: self.item,
            "before": self.before,
            "after": self.after,
            **money("total", self.new_total_cents if self.action != "cancel" else 0),
            **money("fee", self.fee_cents),
            **money("charged", charged),
            **money("refunded", refunded),
        }
        if self.fee_note:
            result["fee_note"] = self.fee_note
        result["summary"] = self._summary(booking_id, charged, refunded)
        return result

    def _summary(self, booking_id: int, charged: int, refunded: int) -> str:
        what = f"{self.kind_label} {booking_id} ({self.item.get('name', '')})"
        if self.action == "book":
            done = f"{what} is booked for {self.after_text}."
        elif self.action == "update":
            done = f"{what} now runs {self.after_text} (was {self.before_text})."
        else:
            done = f"{what} for {self.before_text} is cancelled."
        if charged:
            money_text = f" Charged {fmt_money(charged)}."
        elif refunded:
            money_text = f" Refunded {fmt_money(refunded)}."
        else:
            money_text = " Nothing was charged or refunded."
        return done + money_text


def _net_line(net_cents: int) -> str:
    if net_cents > 0:
        return f"To pay: {fmt_money(net_cents)}"
    if net_cents < 0:
        return f"Refund: {fmt_money(-net_cents)}"
    return f"To pay: {fmt_money(0)}"


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
