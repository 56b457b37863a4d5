"""The kinds of partner reservation the company sells, in the order they are shown.

Each is declared in its own module (``db.hotels``, ``db.car_rentals``,
``db.excursions``); what lists every kind (the passenger's summary, the bookings the
model reads, the evaluation's placeholders) iterates ``RESERVATION_KINDS``.
"""

from __future__ import annotations

from typing import Any

from db.car_rentals import CAR_RENTAL
from db.excursions import EXCURSION
from db.hotels import HOTEL
from db.reservation_kind import ReservationKind

RESERVATION_KINDS: tuple[ReservationKind[Any, Any], ...] = (HOTEL, CAR_RENTAL, EXCURSION)
