"""The one table of commercial rules: time limits, fees and refunds.

Every fee, refund and time limit that a tool enforces is computed from the constants
below, and the company policy in ``data/policy.md`` states the same numbers (a test
keeps them equal). Change a number here and in the policy together.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

# Flights ---------------------------------------------------------------------------
# A ticket may be moved only onto a flight that leaves at least this long from now.
MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE = 3
# A ticket may be changed or cancelled only while its flight is at least this far away.
MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL = 3
# Within this many hours of buying, a change or cancellation carries no fee.
FREE_WINDOW_HOURS_AFTER_BOOKING = 24
# Online check-in opens this many hours before departure.
CHECK_IN_OPENS_HOURS = 24


@dataclass(frozen=True)
class FareRule:
    """What a fare class pays to change or cancel."""

    change_fee_cents: int
    cancel_fee_cents: int
    checked_bags: int
    bag_weight_kg: int
    cabin_bags: int


FARE_RULES: dict[str, FareRule] = {
    "Economy": FareRule(
        change_fee_cents=7_500,
        cancel_fee_cents=10_000,
        checked_bags=1,
        bag_weight_kg=23,
        cabin_bags=1,
    ),
    "Comfort": FareRule(
        change_fee_cents=4_000,
        cancel_fee_cents=5_000,
        checked_bags=2,
        bag_weight_kg=23,
        cabin_bags=1,
    ),
    "Business": FareRule(
        change_fee_cents=0,
        cancel_fee_cents=0,
        checked_bags=2,
        bag_weight_kg=32,
        cabin_bags=2,
    ),
}

# Partners: hotels, cars, excursions ----------------------------------------------------
# Hotel stays cancel or change free until this many hours before check-in day starts
# (local midnight is approximated by 00:00 UTC); later, the first night is charged.
HOTEL_FREE_CANCEL_HOURS = 48
# Car rentals cancel or change free until this many hours before the pick-up day;
# later, one day's rate is charged.
CAR_FREE_CANCEL_HOURS = 24
# Excursions cancel or change free until this many hours before the excursion day;
# later, the price is not refunded.
EXCURSION_FREE_CANCEL_HOURS = 72
# The longest stay or rental that can be booked in one reservation.
MAX_HOTEL_NIGHTS = 30
MAX_CAR_RENTAL_DAYS = 30
# How far ahead partner reservations can be made.
MAX_DAYS_AHEAD = 365


def hours(value: int) -> timedelta:
    """Return ``value`` hours as a timedelta (reads better at the call sites)."""
    return timedelta(hours=value)


def fare_rule(fare_conditions: str) -> FareRule:
    """Return the rule of a fare class; an unknown class is a bug, not a customer error."""
    return FARE_RULES[fare_conditions]


def parse_money(text: str, currency: str = "EUR") -> int:
    """Read an amount such as ``"EUR 1000"``, ``"1,000.50"`` or ``"EUR 1,000.00"`` as cents.

    Raises:
        ValueError: It is not an amount in ``currency`` (the message says what is wanted).
    """
    words = text.replace(",", "").split()
    if len(words) == 2 and words[0].upper() == currency.upper():
        words = words[1:]
    wanted = f"an amount in {currency}, such as '{currency} 1000' or '1000.50'"
    if len(words) != 1:
        raise ValueError(f"{text!r} is not {wanted}.")
    whole, _, part = words[0].partition(".")
    if not whole.isdigit() or (part and (not part.isdigit() or len(part) > 2)):
        raise ValueError(f"{text!r} is not {wanted}.")
    return int(whole) * 100 + int(part.ljust(2, "0") or 0)


def format_money(cents: int, currency: str = "EUR") -> str:
    """Format cents as ``"EUR 75.00"``; negative amounts keep their sign."""
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}{currency} {whole:,}.{part:02d}"
