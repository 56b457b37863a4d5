"""Ticket sales: passengers, bookings, tickets, segments, seats, boarding passes, payments.

``_Sales`` sells the fixture bookings first, then connecting and direct tickets until each
cabin reaches the quota the schedule planned.
"""

from __future__ import annotations

import bisect
import random
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from db import fixtures as fx
from db.generate.bulk_load import _RowSink
from db.generate.schedule import _Flight, _words
from db.rules import CHECK_IN_OPENS_HOURS

# Connecting itineraries: this share of a flight's free seats, through a connection
# of MIN_CONNECTION to MAX_CONNECTION.
CONNECTING_SHARE = 0.12
MIN_CONNECTION = timedelta(minutes=50)
MAX_CONNECTION = timedelta(hours=4)
# Check-in closes this long before the scheduled departure (also for delayed flights).
CHECK_IN_CLOSES_BEFORE = timedelta(minutes=30)
CHECKED_IN_SHARE = 0.5
# The share of bookings that go to a passenger created before.
PASSENGER_REUSE_SHARE = 0.3


_FIRST_NAMES = _words(
    "Anna Ben Carla David Emma Felix Giulia Hugo Ines Jakob Klara Leon Maria Noah Olivia "
    "Paul Sofia Tom Ursula Victor Wei Yuki Zara Amir Bianca Chen Daniel Eva Farah Gabriel "
    "Hannah Ivan Julia Kenji Laura Mateo Nina Omar Pia Rafael Sara Thomas Lea Marco Elif "
    "Aisha Lukas Mila Jonas Chloe Diego Freya Hiroshi Isabel Joao Katarina Louis Maya "
    "Nikolai Oscar Priya Quentin Rosa Samuel Tara Valentina William Xavier Yasmin Zoe"
)
_LAST_NAMES = _words(
    "Müller Schmidt Meier Keller Martin Bernard Dubois Rossi Bianchi Garcia Martinez Lopez "
    "Silva Santos Smith Jones Taylor Brown Wilson Johnson Williams Miller Davis Nowak "
    "Kowalski Novak Horvat Jansen de_Vries Bakker Peeters Nielsen Hansen Johansson Larsen "
    "Virtanen Papadopoulos Yilmaz Kaya Cohen Levi Khan Patel Sharma Singh Tanaka Suzuki "
    "Sato Kim Lee Park Wang Li Zhang Liu Chen Nguyen Tran Fischer Weber Wagner Becker "
    "Hoffmann Schneider Huber Gruber Brunner Moser Ferrari Romano Costa Fernandes Pereira "
    "O'Brien Murphy Kelly Walsh Dupont Lambert Fontaine Moreau Laurent Ivanova Petrov Popescu"
)


def _ascii(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return "".join(ch for ch in folded.lower() if ch.isalnum() or ch == ".")


@dataclass
class _Counters:
    """Sequential identifiers shared by the whole build."""

    ticket: int = 7_240_001_000_000_000
    payment: int = 0
    hotel_booking: int = 0
    car_rental_booking: int = 0
    excursion_booking: int = 0

    def next_ticket_no(self) -> str:
        """Return the next random-sale ticket number (fixture numbers never collide)."""
        self.ticket += 1
        return str(self.ticket)

    def next_payment_id(self) -> int:
        """Return the next payment id."""
        self.payment += 1
        return self.payment


class _People:
    """Creates passengers and picks returning ones without double-booking a day."""

    def __init__(self, sink: _RowSink, rng: random.Random) -> None:
        self._sink = sink
        self._rng = rng
        self._ids: set[str] = set(fx.FIXTURE_PASSENGER_IDS)
        self.random_ids: list[str] = []
        self._busy_days: set[tuple[int, int]] = set()

    def add_fixture(self, passenger_id: str) -> None:
        """Create a fixture passenger with the documented name."""
        name = fx.FIXTURE_PASSENGER_NAMES[passenger_id]
        email = f"{_ascii(name.replace(' ', '.'))}@example.com"
        self._sink.add("passengers", (passenger_id, name, email))

    def _new(self) -> int:
        rng = self._rng
        while True:
            passenger_id = f"{rng.randrange(1000, 10000)} {rng.randrange(100_000, 1_000_000)}"
            if passenger_id not in self._ids:
                break
        self._ids.add(passenger_id)
        name = f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES).replace('_', ' ')}"
        email = None
        if rng.random() < 0.85:
            email = f"{_ascii(name.replace(' ', '.'))}{rng.randrange(1, 100)}@example.com"
        self._sink.add("passengers", (passenger_id, name, email))
        self.random_ids.append(passenger_id)
        return len(self.random_ids) - 1

    def pick(self, days: Sequence[int]) -> str:
        """Return a passenger free on every day ordinal in ``days``; often a new one."""
        index: int | None = None
        if self.random_ids and self._rng.random() < PASSENGER_REUSE_SHARE:
            index = self._rng.randrange(len(self.random_ids))
            if any((index, day) in self._busy_days for day in days):
                index = None
        if index is None:
            index = self._new()
        self._busy_days.update((index, day) for day in days)
        return self.random_ids[index]


class _Sales:
    """Sells tickets: bookings, tickets, segments, seats, check-ins and payments."""

    def __init__(
        self,
        sink: _RowSink,
        people: _People,
        counters: _Counters,
        now: datetime,
        rng: random.Random,
    ) -> None:
        self._sink = sink
        self._people = people
        self._counters = counters
        self._now = now
        self._rng = rng
        self._book_refs: set[str] = set()

    # Shared pieces ------------------------------------------------------------------

    def _new_book_ref(self) -> str:
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
        while True:
            ref = "".join(self._rng.choice(alphabet) for _ in range(6))
            if ref not in self._book_refs:
                self._book_refs.add(ref)
                return ref

    def _add_booking(
        self,
        book_ref: str,
        booked: datetime,
        payer: str,
        total: int,
        flights: Sequence[_Flight],
        tickets: int,
    ) -> None:
        """Write the booking and the payment that bought it (before its tickets)."""
        self._sink.add("bookings", (book_ref, booked, total))
        itinerary = "-".join([flights[0].route.origin, *(f.route.destination for f in flights)])
        plural = "ticket" if tickets == 1 else "tickets"
        self._sink.add(
            "payments",
            (
                self._counters.next_payment_id(), payer, total, "ticket_purchase", book_ref,
                f"Booking {book_ref}: {tickets} {plural} {itinerary}", booked,
            ),
        )  # fmt: skip

    def _add_segment(
        self,
        ticket_no: str,
        flight: _Flight,
        fare: str,
        seat: str | None,
        checked_in: datetime | None,
    ) -> None:
        flight.sold[fare] += 1
        self._sink.add("ticket_flights", (ticket_no, flight.flight_id, fare, flight.fares[fare]))
        if seat is not None:
            boarding_no = flight.next_boarding_no
            flight.next_boarding_no += 1
            self._sink.add(
                "boarding_passes", (ticket_no, flight.flight_id, boarding_no, seat, checked_in)
            )

    # Fixtures -------------------------------------------------------------------------

    def sell_fixture(
        self,
        passenger_id: str,
        tickets: Sequence[tuple[str, Sequence[_Flight], str, datetime | None]],
        booked: datetime,
    ) -> None:
        """Sell a fixture booking; every segment gets a seat.

        Args:
            passenger_id: The owner of every ticket.
            tickets: ``(ticket_no, flights, fare class, checked-in time or None)``.
            booked: When the booking was bought.
        """
        book_ref = self._new_book_ref()
        all_flights = [flight for _, flights, _, _ in tickets for flight in flights]
        total = sum(f.fares[fare] for _, flights, fare, _ in tickets for f in flights)
        self._add_booking(book_ref, booked, passenger_id, total, all_flights, len(tickets))
        for ticket_no, flights, fare, checked_in in tickets:
            self._sink.add("tickets", (ticket_no, book_ref, passenger_id, "active"))
            for flight in flights:
                if flight.sold[fare] >= len(flight.aircraft.seats[fare]):
                    raise RuntimeError(f"No {fare} seat left for fixture {ticket_no}.")
                open_seats = [s for s in flight.aircraft.seats[fare] if s not in flight.taken_seats]
                seat = self._rng.choice(open_seats)
                flight.taken_seats.add(seat)
                self._add_segment(ticket_no, flight, fare, seat, checked_in)

    # Random sales ---------------------------------------------------------------------

    def _book_date(self, first: _Flight) -> datetime:
        rng = self._rng
        lead_seconds = 7_200 + min(int(rng.expovariate(1 / (18 * 86_400))), 120 * 86_400)
        booked = first.departure - timedelta(seconds=lead_seconds)
        if booked > self._now:
            booked = self._now - timedelta(seconds=rng.randrange(600, 15 * 86_400))
        return booked

    def _check_in_time(self, flight: _Flight, booked: datetime) -> datetime | None:
        rng = self._rng
        if flight.has_left:
            before = timedelta(seconds=rng.randrange(3_600, 23 * 3_600))
            return max(flight.departure - before, booked + timedelta(minutes=1))
        start = max(flight.departure - timedelta(hours=CHECK_IN_OPENS_HOURS), booked)
        end = min(self._now, flight.departure - CHECK_IN_CLOSES_BEFORE)
        if start <= end and rng.random() < CHECKED_IN_SHARE:
            return start + timedelta(seconds=rng.randrange(int((end - start).total_seconds()) + 1))
        return None

    def _party_size(self, room: int) -> int:
        roll = self._rng.random()
        return min(room, 1 if roll < 0.72 else 2 if roll < 0.92 else 3)

    def sell(self, flights: Sequence[_Flight], fare: str) -> None:
        """Sell one booking of 1-3 tickets over ``flights`` in ``fare`` (seats permitting)."""
        party = self._party_size(min(flight.free(fare) for flight in flights))
        if party <= 0:
            return
        book_ref = self._new_book_ref()
        booked = self._book_date(flights[0])
        days = [flight.departure.toordinal() for flight in flights]
        passengers = [self._people.pick(days) for _ in range(party)]
        total = party * sum(flight.fares[fare] for flight in flights)
        self._add_booking(book_ref, booked, passengers[0], total, flights, party)
        for passenger_id in passengers:
            ticket_no = self._counters.next_ticket_no()
            self._sink.add("tickets", (ticket_no, book_ref, passenger_id, "active"))
            for flight in flights:
                pool = flight.seat_pool[fare]
                seat = pool.pop() if pool else None
                checked_in = self._check_in_time(flight, booked) if seat else None
                self._add_segment(ticket_no, flight, fare, seat, checked_in)
        self._sink.maybe_flush()

    def sell_connections(self, flights: Sequence[_Flight]) -> None:
        """Sell two-segment itineraries through every connecting airport."""
        departures: dict[str, list[_Flight]] = {}
        for flight in flights:  # flights are in departure order
            if flight.status != "Cancelled":
                departures.setdefault(flight.route.origin, []).append(flight)
        times = {code: [f.departure for f in group] for code, group in departures.items()}
        for first in flights:
            if first.status == "Cancelled" or first.route.destination not in departures:
                continue
            for fare in first.aircraft.seats:
                attempts = int(first.free(fare) * CONNECTING_SHARE + self._rng.random())
                for _ in range(attempts):
                    second = self._connection(first, fare, departures, times)
                    if second is None:
                        break
                    self.sell([first, second], fare)

    def _connection(
        self,
        first: _Flight,
        fare: str,
        departures: Mapping[str, list[_Flight]],
        times: Mapping[str, list[datetime]],
    ) -> _Flight | None:
        hub = first.route.destination
        low = bisect.bisect_left(times[hub], first.arrival + MIN_CONNECTION)
        high = bisect.bisect_right(times[hub], first.arrival + MAX_CONNECTION)
        if low >= high or first.free(fare) <= 0:
            return None
        for _ in range(3):
            second = departures[hub][self._rng.randrange(low, high)]
            if second.route.destination != first.route.origin and second.free(fare) > 0:
                return second
        return None

    def sell_direct(self, flights: Sequence[_Flight]) -> None:
        """Fill every cabin up to its quota with single-segment tickets."""
        for flight in flights:
            for fare in flight.aircraft.seats:
                while flight.free(fare) > 0:
                    self.sell([flight], fare)
