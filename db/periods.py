"""The dates of a reservation: how a kind of reservation reads, checks and shows them.

A ``Period`` is declared once per reservation kind (``db.reservation_kind.ReservationKind``):
a hotel stay runs from check-in to check-out (the last day is not a night), a car
rental from pick-up to return (both days count), an excursion is one date. Everything
the kinds do with dates (parse the model's ``YYYY-MM-DD`` text, refuse reversed, past,
too far or too long periods, count the priced units, name the days a reservation holds
a unit, show the dates to people) follows from the declaration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from db.errors import InvalidInputError, RuleViolationError
from db.rules import MAX_DAYS_AHEAD
from db.values import iso_date, parse_date, today

ONE_DAY = timedelta(days=1)
# A reservation's dates, in the order of its period's ``fields``.
Dates = tuple[date, ...]


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


@dataclass(frozen=True)
class Period:
    """How one kind of reservation is dated.

    Attributes:
        fields: The date columns, first day first; also the tools' date arguments. One
            field is a one-day reservation; two are a first and a last day.
        text: How the dates read for people: ``{0}``, ``{1}`` are the dates and
            ``{units}`` their count with the unit, e.g. ``"{0} to {1} ({units})"``.
        unit: What is priced and counted, e.g. ``"night"`` (two fields only).
        last_day_included: Whether the last day is used too (a car's return day) or
            only ends the period (a hotel's check-out day).
        max_units: The most units one reservation covers.
        noun: The period for people, e.g. ``"stay"``, in the too-long message.
        reversed_message: The message when the last day is too early; ``{first}`` and
            ``{last}`` are filled in.
    """

    fields: tuple[str, ...]
    text: str = "{0}"
    unit: str = "day"
    last_day_included: bool = True
    max_units: int = 1
    noun: str = ""
    reversed_message: str = ""

    def units(self, dates: Dates) -> int:
        """Return how many units (nights, days) ``dates`` cover; a one-day period is 1."""
        return (dates[-1] - dates[0]).days + (1 if self.last_day_included else 0)

    def held(self, dates: Dates) -> tuple[date, date]:
        """Return the half-open days ``[first, stop)`` a reservation holds a unit."""
        return dates[0], dates[-1] + (ONE_DAY if self.last_day_included else timedelta(0))

    def units_text(self, count: int) -> str:
        """Return ``count`` with its unit, e.g. ``"1 night"``, ``"3 nights"``."""
        return f"{count} {self.unit}{'' if count == 1 else 's'}"

    def show(self, dates: Dates) -> str:
        """Return the dates for people."""
        return self.text.format(*map(iso_date, dates), units=self.units_text(self.units(dates)))

    def as_dict(self, dates: Dates) -> dict[str, str]:
        """Return dates as ``{field: "YYYY-MM-DD"}``."""
        return {name: iso_date(day) for name, day in zip(self.fields, dates, strict=True)}

    def parse(self, values: tuple[str | date, ...], now: datetime) -> Dates:
        """Parse and check the dates of a reservation, in ``fields`` order.

        Raises:
            InvalidInputError: A date is malformed or past, or the period is reversed.
            RuleViolationError: The period starts too far ahead or is too long.
        """
        pairs = zip(values, self.fields, strict=False)
        dates = tuple(parse_date(value, name) for value, name in pairs)
        if len(dates) != len(self.fields):
            raise InvalidInputError(f"Give {' and '.join(self.fields)} (YYYY-MM-DD).")
        if len(dates) > 1 and self.units(dates) < 1:
            raise InvalidInputError(
                self.reversed_message.format(first=iso_date(dates[0]), last=iso_date(dates[-1]))
            )
        require_bookable_start(dates[0], now, self.fields[0])
        units = self.units(dates)
        if len(dates) > 1 and units > self.max_units:
            raise RuleViolationError(
                f"A {self.noun} of {units} {self.unit}s is too long: one reservation covers "
                f"at most {self.max_units} {self.unit}s. Split it into several reservations."
            )
        return dates
