"""Partner reservations: hotel stays, car rentals and excursions, within capacity.

``_Reservations`` books one of each kind (with its payment, and a refund when cancelled);
``_book_random_reservations`` draws the random ones, after the fixtures.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from db.generate.bulk_load import _RowSink
from db.generate.reference import CarRentalRow, HotelRow, ReferenceData, TripRow
from db.generate.sales import _Counters
from db.generate.schedule import SCHEDULE_DAYS_AFTER

# Partner reservations per unit of scale.
HOTEL_BOOKINGS_PER_SCALE = 120
CAR_BOOKINGS_PER_SCALE = 80
EXCURSION_BOOKINGS_PER_SCALE = 150
CANCELLED_RESERVATION_SHARE = 0.08


class _Reservations:
    """Books hotels, cars and excursions within capacity, with their payments."""

    def __init__(
        self, sink: _RowSink, counters: _Counters, now: datetime, rng: random.Random
    ) -> None:
        self._sink = sink
        self._counters = counters
        self._now = now
        self._rng = rng
        self._rooms: dict[tuple[int, date], int] = {}
        self._cars: dict[tuple[int, date], int] = {}
        self._places: dict[tuple[int, date], int] = {}

    @staticmethod
    def _fits(
        usage: dict[tuple[int, date], int], item: int, days: Sequence[date], capacity: int
    ) -> bool:
        return all(usage.get((item, day), 0) < capacity for day in days)

    @staticmethod
    def _use(usage: dict[tuple[int, date], int], item: int, days: Sequence[date]) -> None:
        for day in days:
            usage[(item, day)] = usage.get((item, day), 0) + 1

    def _pay(
        self,
        owner: str,
        total: int,
        kind: str,
        reference: str,
        what: str,
        created: datetime,
        cancelled: bool,
    ) -> None:
        self._sink.add(
            "payments",
            (
                self._counters.next_payment_id(),
                owner,
                total,
                f"{kind}_book",
                reference,
                what,
                created,
            ),
        )
        if cancelled:
            refunded = min(self._now, created + timedelta(hours=self._rng.randrange(1, 120)))
            self._sink.add(
                "payments",
                (
                    self._counters.next_payment_id(), owner, -total, f"{kind}_cancel", reference,
                    f"Cancelled: {what}", refunded,
                ),
            )  # fmt: skip

    def hotel(
        self,
        owner: str,
        hotel: HotelRow,
        checkin: date,
        nights: int,
        created: datetime,
        cancelled: bool = False,
    ) -> int | None:
        """Reserve one room for ``nights`` nights; return the id, or ``None`` when full."""
        days = [checkin + timedelta(days=n) for n in range(nights)]
        if not cancelled:
            if not self._fits(self._rooms, hotel.id, days, hotel.rooms):
                return None
            self._use(self._rooms, hotel.id, days)
        self._counters.hotel_booking += 1
        booking_id = self._counters.hotel_booking
        total = nights * hotel.nightly_rate_cents
        checkout = checkin + timedelta(days=nights)
        status = "cancelled" if cancelled else "confirmed"
        self._sink.add(
            "hotel_bookings",
            (booking_id, owner, hotel.id, checkin, checkout, status, total, created),
        )
        what = f"{hotel.name}, {nights} night(s) from {checkin.isoformat()}"
        self._pay(owner, total, "hotel", f"hotel-{booking_id}", what, created, cancelled)
        return booking_id

    def car(
        self,
        owner: str,
        offer: CarRentalRow,
        start: date,
        end: date,
        created: datetime,
        cancelled: bool = False,
    ) -> int | None:
        """Reserve one car from ``start`` to ``end`` inclusive; ``None`` when none is left."""
        days = [start + timedelta(days=n) for n in range((end - start).days + 1)]
        if not cancelled:
            if not self._fits(self._cars, offer.id, days, offer.fleet_size):
                return None
            self._use(self._cars, offer.id, days)
        self._counters.car_rental_booking += 1
        booking_id = self._counters.car_rental_booking
        total = len(days) * offer.daily_rate_cents
        status = "cancelled" if cancelled else "confirmed"
        self._sink.add(
            "car_rental_bookings", (booking_id, owner, offer.id, start, end, status, total, created)
        )
        what = f"{offer.name} {offer.car_class} in {offer.location}, {start} to {end}"
        self._pay(owner, total, "car_rental", f"car-{booking_id}", what, created, cancelled)
        return booking_id

    def excursion(
        self, owner: str, trip: TripRow, day: date, created: datetime, cancelled: bool = False
    ) -> int | None:
        """Reserve one place on ``day``; ``None`` when the day is full."""
        if not cancelled:
            if not self._fits(self._places, trip.id, [day], trip.capacity_per_day):
                return None
            self._use(self._places, trip.id, [day])
        self._counters.excursion_booking += 1
        booking_id = self._counters.excursion_booking
        status = "cancelled" if cancelled else "confirmed"
        self._sink.add(
            "excursion_bookings",
            (booking_id, owner, trip.id, day, status, trip.price_cents, created),
        )
        what = f"{trip.name} on {day.isoformat()}"
        self._pay(
            owner,
            trip.price_cents,
            "excursion",
            f"excursion-{booking_id}",
            what,
            created,
            cancelled,
        )
        return booking_id

    def created_before(self, start: date) -> datetime:
        """Return a plausible moment a reservation starting on ``start`` was made."""
        rng = self._rng
        created = datetime.combine(start, time(), UTC) - timedelta(
            seconds=rng.randrange(86_400, 60 * 86_400)
        )
        if created > self._now:
            created = self._now - timedelta(seconds=rng.randrange(600, 20 * 86_400))
        return created


def _book_random_reservations(
    reservations: _Reservations,
    ref: ReferenceData,
    owners: Sequence[str],
    scale: int,
    today: date,
    rng: random.Random,
) -> None:
    def pick_day() -> date:
        return today + timedelta(days=rng.randint(-30, SCHEDULE_DAYS_AFTER))

    def cancelled() -> bool:
        return rng.random() < CANCELLED_RESERVATION_SHARE

    for _ in range(HOTEL_BOOKINGS_PER_SCALE * scale):
        checkin = pick_day()
        nights = rng.choice((1, 1, 2, 2, 3, 3, 4, 5, 7))
        reservations.hotel(
            rng.choice(owners), rng.choice(ref.hotels), checkin, nights,
            reservations.created_before(checkin), cancelled(),
        )  # fmt: skip
    for _ in range(CAR_BOOKINGS_PER_SCALE * scale):
        start = pick_day()
        end = start + timedelta(days=rng.choice((0, 1, 2, 3, 4, 6, 9)))
        reservations.car(
            rng.choice(owners), rng.choice(ref.car_rentals), start, end,
            reservations.created_before(start), cancelled(),
        )  # fmt: skip
    for _ in range(EXCURSION_BOOKINGS_PER_SCALE * scale):
        day = pick_day()
        reservations.excursion(
            rng.choice(owners),
            rng.choice(ref.trips),
            day,
            reservations.created_before(day),
            cancelled(),
        )
