"""Seat choice: the free seat of a fare class that a moved ticket gets on its new flight.

The seat it had if that one is free, else the first free seat by row in the same column
(letter), else the first free seat by row.
"""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import BoardingPass, Flight, Seat

_SEAT = re.compile(r"^(\d+)([A-Z]*)$")


def _seat_key(seat_no: str) -> tuple[int, str]:
    match = _SEAT.match(seat_no)
    if match is None:
        return (10_000, seat_no)
    return (int(match.group(1)), match.group(2))


def _free_seat(
    session: Session, flight: Flight, fare_conditions: str, preferred: str | None
) -> str | None:
    """Pick a free seat of a class: the same seat if free, else the first by row."""
    taken = set(
        session.scalars(
            select(BoardingPass.seat_no).where(BoardingPass.flight_id == flight.flight_id)
        )
    )
    free = sorted(
        (
            seat
            for seat in session.scalars(
                select(Seat.seat_no).where(
                    Seat.aircraft_code == flight.aircraft_code,
                    Seat.fare_conditions == fare_conditions,
                )
            )
            if seat not in taken
        ),
        key=_seat_key,
    )
    if not free:
        return None
    if preferred in free:
        return preferred
    if preferred is not None:
        letter = _seat_key(preferred)[1]
        for seat in free:
            if _seat_key(seat)[1] == letter:
                return seat
    return free[0]
