"""Races between processes, on SQLite and on PostgreSQL.

Several real processes (``tests.support.race_child``, kept for the module) are released
together by a barrier against one database, each with its own ``Database`` on the same
URL, and run an approved write through the graph's sensitive-tools node, as customers in
their own conversations would:

* the last free room of a hotel for a night, the last seat of a fare class on a flight
  (each process moves another passenger's ticket onto it) and the last place of an
  excursion on a day: exactly one wins, capacity is never exceeded, and every loser
  reads the tool's own refusal, not a crash;
* one ticket moved to a different flight by every process at once: the changes apply
  one after the other, and every charge belongs to a move that happened;
* one hotel stay, car rental, excursion place or ticket cancelled by every process at
  once: it is cancelled once, the refund is paid once, every loser reads a clear error;
* one tool call (same conversation, id and arguments) delivered to every process at
  once: it writes once and every process answers with the stored result.

Each case sets up its own near-full situation through the ORM, on rows no other case
touches, so one database per engine serves the whole module. The PostgreSQL cases run
on a scratch copy of a template (the run's own with ``--engine postgresql``, otherwise
one built here once) and are skipped, saying why, when the server cannot be reached.

The racers are forked from a forkserver that imported the program once: spawning six
interpreters that each import LangGraph costs about 3 s of CPU apiece, which on two cores
was most of this file's time. Each racer still starts with no connection, thread or state
of the test process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import FULL_HOTEL_NAME
from db.flights import seats_left
from db.models import (
    BoardingPass,
    Booking,
    CarRental,
    CarRentalBooking,
    ExcursionBooking,
    Flight,
    FlightFare,
    Hotel,
    HotelBooking,
    Passenger,
    Payment,
    Seat,
    Ticket,
    TicketFlight,
    ToolCallRecord,
    TripRecommendation,
)
from tests.support import forkserver, postgres
from tests.support.databases import FIXED_NOW
from tests.support.race_child import Call, Forget, Job, Outcome, Unready, serve

RACERS = 6
# How long the test waits for a racer's answer: a racer stuck on a lock fails the test.
ANSWER_TIMEOUT_S = 120.0
# Days after now's date of the stays, rentals and excursions raced here: inside every
# kind's free cancellation window, so a cancellation refunds all that was paid.
AHEAD = 40
# Confirmed reservations of other passengers added to leave exactly one unit free.
FILLERS = 2
# The fare class whose last seat is raced: few seats per aircraft (few fillers to add)
# and a change fee (a payment to count).
FARE = "Comfort"
PRICE_CENTS = 30_000
_serial = itertools.count(1)


def day(offset: int) -> date:
    return FIXED_NOW.date() + timedelta(days=offset)


# The racing processes ------------------------------------------------------------------


class Racers:
    """``RACERS`` processes that each run one tool call per race, released together."""

    def __init__(self, count: int) -> None:
        context = forkserver.context()  # shared with test_crash_consistency.py
        self.barrier = context.Barrier(count)
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        for index in range(count):
            mine, theirs = context.Pipe()
            process = context.Process(
                target=serve,
                args=(theirs, self.barrier, FIXED_NOW),
                name=f"racer-{index}",
                daemon=True,
            )
            process.start()
            theirs.close()
            self.pipes.append(mine)
            self.processes.append(process)

    def _answer(self, pipe: Connection) -> Any:
        if not pipe.poll(ANSWER_TIMEOUT_S):
            raise AssertionError(f"a racer gave no answer within {ANSWER_TIMEOUT_S:.0f} s")
        return pipe.recv()

    def race(self, url: str, calls: Sequence[Call]) -> list[Outcome]:
        """Run ``calls`` at once, one per process; return the outcomes in call order."""
        assert len(calls) <= len(self.pipes)
        jobs: list[Call | None] = [*calls, *[None] * (len(self.pipes) - len(calls))]
        for pipe, call in zip(self.pipes, jobs, strict=True):
            pipe.send(Job(url, call))
        answers = [self._answer(pipe) for pipe in self.pipes]
        if self.barrier.broken:
            self.barrier.reset()  # every racer has answered: none is waiting on it
        unready = [a.reason for a in answers if isinstance(a, Unready)]
        causes = [r for r in unready if not r.startswith("called off")] or unready
        assert not unready, f"the race did not run: {causes[0]}"
        outcomes = [a for a, call in zip(answers, jobs, strict=True) if call is not None]
        assert all(isinstance(o, Outcome) for o in outcomes), answers
        return outcomes

    def forget(self, url: str) -> None:
        """Make every racer close its connections to ``url``."""
        for pipe in self.pipes:
            pipe.send(Forget(url))
        for pipe in self.pipes:
            self._answer(pipe)

    def stop(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):  # that racer may be gone already
                pipe.send(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()


@pytest.fixture(scope="module")
def racers() -> Iterator[Racers]:
    pool = Racers(RACERS)
    try:
        yield pool
    finally:
        pool.stop()


# One database per engine ---------------------------------------------------------------


@dataclass(frozen=True)
class Arena:
    """The database every racer writes to, and the test's own view of it."""

    url: str
    db: Database
    racers: Racers

    def race(self, calls: Sequence[Call]) -> list[Outcome]:
        return self.racers.race(self.url, calls)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def arena(
    request: pytest.FixtureRequest, racers: Racers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Arena]:
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("template_db_path")
        path = tmp_path_factory.mktemp("races") / "travel.sqlite"
        shutil.copyfile(template, path)
        yield from _arena(f"sqlite:///{path}", racers)
        return
    name = request.getfixturevalue("postgres_template")
    with postgres.scratch_database(template=name) as url:
        yield from _arena(url, racers)


def _arena(url: str, racers: Racers) -> Iterator[Arena]:
    database = Database.from_url(url, clock=fixed_clock(FIXED_NOW))
    try:
        racers.race(url, [])  # each racer opens the database and builds its tools once
        yield Arena(url, database, racers)
    finally:
        racers.forget(url)
        database.dispose()


# Setting up near-full situations through the ORM ---------------------------------------


def new_passengers(session: Session, count: int) -> list[str]:
    """Add ``count`` passengers of this test's own and return their ids."""
    ids = []
    for _ in range(count):
        number = next(_serial)
        passenger_id = f"RACER {number:05d}"
        session.add(Passenger(passenger_id=passenger_id, name=f"Racer {number}", email=None))
        ids.append(passenger_id)
    session.flush()
    return ids


def _nights_used(session: Session, hotel: Hotel, night: date) -> int:
    return (
        session.scalar(
            select(func.count()).where(
                HotelBooking.hotel_id == hotel.id,
                HotelBooking.status == "confirmed",
                HotelBooking.checkin_date <= night,
                HotelBooking.checkout_date > night,
            )
        )
        or 0
    )


def _hotel(session: Session, nth: int) -> Hotel:
    hotels = session.scalars(select(Hotel).where(Hotel.name != FULL_HOTEL_NAME).order_by(Hotel.id))
    return list(hotels)[nth]


def hotel_with_one_room_left(session: Session, nth: int, night: date) -> Hotel:
    """Fill the ``nth`` hotel on ``night`` with other passengers' stays but one room."""
    hotel = _hotel(session, nth)
    (filler,) = new_passengers(session, 1)
    hotel.rooms = _nights_used(session, hotel, night) + FILLERS + 1
    for _ in range(FILLERS):
        session.add(
            HotelBooking(
                passenger_id=filler,
                hotel_id=hotel.id,
                checkin_date=night,
                checkout_date=night + timedelta(days=1),
                status="confirmed",
                total_cents=hotel.nightly_rate_cents,
                created_at=FIXED_NOW - timedelta(days=3),
            )
        )
    session.flush()
    return hotel


def _places_used(session: Session, excursion: TripRecommendation, when: date) -> int:
    return (
        session.scalar(
            select(func.count()).where(
                ExcursionBooking.recommendation_id == excursion.id,
                ExcursionBooking.status == "confirmed",
                ExcursionBooking.date == when,
            )
        )
        or 0
    )


def excursion_with_one_place_left(session: Session, when: date) -> TripRecommendation:
    """Fill the first excursion on ``when`` with other passengers' places but one."""
    excursion = session.scalars(select(TripRecommendation).order_by(TripRecommendation.id)).first()
    assert excursion is not None
    (filler,) = new_passengers(session, 1)
    excursion.capacity_per_day = _places_used(session, excursion, when) + FILLERS + 1
    for _ in range(FILLERS):
        session.add(
            ExcursionBooking(
                passenger_id=filler,
                recommendation_id=excursion.id,
                date=when,
                status="confirmed",
                total_cents=excursion.price_cents,
                created_at=FIXED_NOW - timedelta(days=3),
            )
        )
    session.flush()
    return excursion


def _seats_unassigned(session: Session, flight: Flight) -> list[str]:
    """The seats of ``FARE`` on the flight without a boarding pass, by row."""
    taken = set(
        session.scalars(
            select(BoardingPass.seat_no).where(BoardingPass.flight_id == flight.flight_id)
        )
    )
    seats = session.scalars(
        select(Seat.seat_no).where(
            Seat.aircraft_code == flight.aircraft_code, Seat.fare_conditions == FARE
        )
    )
    return sorted((s for s in seats if s not in taken), key=lambda s: (len(s), s))


def _fare(session: Session, flight: Flight) -> FlightFare | None:
    return session.get(FlightFare, (flight.flight_id, FARE))


def _capacity(session: Session, flight: Flight) -> int:
    """The ``FARE`` seats of the flight's aircraft."""
    return (
        session.scalar(
            select(func.count()).where(
                Seat.aircraft_code == flight.aircraft_code, Seat.fare_conditions == FARE
            )
        )
        or 0
    )


def _sold(session: Session, flight_id: int) -> int:
    """The ``FARE`` segments of active tickets on the flight."""
    return (
        session.scalar(
            select(func.count())
            .select_from(TicketFlight)
            .join(Ticket, Ticket.ticket_no == TicketFlight.ticket_no)
            .where(
                TicketFlight.flight_id == flight_id,
                TicketFlight.fare_conditions == FARE,
                Ticket.status == "active",
            )
        )
        or 0
    )


def flights_on_one_route(session: Session, count: int) -> list[Flight]:
    """Return ``count`` scheduled flights on one route, days away (so a change is allowed),
    with a ``FARE`` fare: the first with ``RACERS`` free seats of it, none assigned, and the
    others with at least two seats of it left."""
    flights = session.scalars(
        select(Flight)
        .join(FlightFare, FlightFare.flight_id == Flight.flight_id)
        .where(
            FlightFare.fare_conditions == FARE,
            Flight.status == "Scheduled",
            Flight.scheduled_departure > FIXED_NOW + timedelta(days=2),
        )
        .order_by(Flight.scheduled_departure, Flight.flight_id)
    ).all()
    capacity = dict(
        session.execute(
            select(Seat.aircraft_code, func.count())
            .where(Seat.fare_conditions == FARE)
            .group_by(Seat.aircraft_code)
        ).all()
    )
    sold = dict(
        session.execute(
            select(TicketFlight.flight_id, func.count())
            .join(Ticket, Ticket.ticket_no == TicketFlight.ticket_no)
            .where(TicketFlight.fare_conditions == FARE, Ticket.status == "active")
            .group_by(TicketFlight.flight_id)
        ).all()
    )

    def left(flight: Flight) -> int:
        return int(capacity.get(flight.aircraft_code, 0)) - int(sold.get(flight.flight_id, 0))

    by_route: dict[tuple[str, str], list[Flight]] = {}
    for flight in flights:
        by_route.setdefault((flight.departure_airport, flight.arrival_airport), []).append(flight)
    for route_flights in by_route.values():
        others = [f for f in route_flights if left(f) >= 2]
        for origin in route_flights:
            if left(origin) >= RACERS and len(_seats_unassigned(session, origin)) >= RACERS:
                rest = [f for f in others if f is not origin][: count - 1]
                if len(rest) == count - 1:
                    assert all(seats_left(session, f, FARE) == left(f) for f in [origin, *rest])
                    return [origin, *rest]
                break
    raise AssertionError(f"no route has {count} flights with free {FARE} seats")


def new_ticket(
    session: Session, passenger_id: str, flight: Flight, fare: str, amount_cents: int
) -> str:
    """Sell a one-segment ticket in its own booking (bought a month ago)."""
    number = next(_serial)
    ticket_no = f"999{number:013d}"
    book_ref = f"r{number:05d}"  # the generator writes upper case only
    session.add(
        Booking(
            book_ref=book_ref,
            book_date=FIXED_NOW - timedelta(days=30),
            total_amount_cents=amount_cents,
        )
    )
    session.flush()
    session.add(
        Ticket(ticket_no=ticket_no, book_ref=book_ref, passenger_id=passenger_id, status="active")
    )
    session.flush()
    session.add(
        TicketFlight(
            ticket_no=ticket_no,
            flight_id=flight.flight_id,
            fare_conditions=fare,
            amount_cents=amount_cents,
        )
    )
    session.flush()
    return ticket_no


def fill_but_one_seat(session: Session, flight: Flight) -> None:
    """Sell ``FARE`` seats of ``flight`` to another passenger until one is left."""
    (filler,) = new_passengers(session, 1)
    for _ in range(seats_left(session, flight, FARE) - 1):
        new_ticket(session, filler, flight, FARE, PRICE_CENTS)
    assert seats_left(session, flight, FARE) == 1


def seated_tickets(session: Session, flight: Flight, passenger_ids: Sequence[str]) -> list[str]:
    """Sell each passenger a ``FARE`` ticket on ``flight`` with a seat assigned."""
    fare = _fare(session, flight)
    assert fare is not None
    seats = _seats_unassigned(session, flight)
    last = session.scalar(
        select(func.max(BoardingPass.boarding_no)).where(BoardingPass.flight_id == flight.flight_id)
    )
    tickets = []
    for index, passenger_id in enumerate(passenger_ids):
        ticket_no = new_ticket(session, passenger_id, flight, FARE, fare.amount_cents)
        session.add(
            BoardingPass(
                ticket_no=ticket_no,
                flight_id=flight.flight_id,
                boarding_no=(last or 0) + 1 + index,
                seat_no=seats[index],
                checked_in_at=None,
            )
        )
        tickets.append(ticket_no)
    session.flush()
    return tickets


# What the racers got -------------------------------------------------------------------


def no_crash(outcomes: Sequence[Outcome]) -> None:
    crashes = [o.crash for o in outcomes if o.crash]
    assert not crashes, f"{len(crashes)} racer(s) crashed; the first:\n{crashes[0]}"


def one_winner(outcomes: Sequence[Outcome], refusal: str) -> int:
    """Check that exactly one call succeeded and every other one read ``refusal``."""
    no_crash(outcomes)
    winners = [i for i, o in enumerate(outcomes) if o.status == "success"]
    assert len(winners) == 1, [o.content for o in outcomes]
    for index, outcome in enumerate(outcomes):
        if index == winners[0]:
            continue
        assert outcome.status == "error", outcome
        assert outcome.content.startswith("Error: ") and refusal in outcome.content, outcome.content
        assert "Traceback" not in outcome.content
    return winners[0]


def result(outcome: Outcome) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(outcome.content)
    return data


def calls(
    tool: str, args: Callable[[int], dict[str, Any]], passengers: Sequence[str], tag: str
) -> list[Call]:
    """One call per passenger, each in its own conversation (with the same call id, as
    providers that number their calls produce)."""
    return [
        Call(tool, args(index), passenger_id, f"race-{tag}-{index}", "call_0")
        for index, passenger_id in enumerate(passengers)
    ]


def payments(session: Session, reference: str) -> list[Payment]:
    return list(session.scalars(select(Payment).where(Payment.reference == reference)))


# The last unit -------------------------------------------------------------------------


def test_the_last_room_of_a_hotel_goes_to_exactly_one_racer(arena: Arena) -> None:
    night = day(AHEAD)
    with arena.db.transaction() as session:
        hotel = hotel_with_one_room_left(session, nth=0, night=night)
        hotel_id, rooms = hotel.id, hotel.rooms
        racers = new_passengers(session, RACERS)
    stay = {
        "hotel_id": hotel_id,
        "checkin_date": night.isoformat(),
        "checkout_date": day(AHEAD + 1).isoformat(),
    }

    outcomes = arena.race(calls("book_hotel", lambda _: stay, racers, "room"))

    winner = one_winner(outcomes, "has no room left for the night of")
    booked = result(outcomes[winner])
    with arena.db.session() as session:
        after = session.get(Hotel, hotel_id)
        assert after is not None
        assert _nights_used(session, after, night) == rooms
        mine = session.scalars(
            select(HotelBooking).where(HotelBooking.passenger_id.in_(racers))
        ).all()
        assert [(b.id, b.passenger_id) for b in mine] == [(booked["booking_id"], racers[winner])]
        charges = payments(session, f"hotel-{booked['booking_id']}")
        assert [p.amount_cents for p in charges] == [booked["charged_cents"]]
        assert not session.scalars(
            select(Payment).where(Payment.passenger_id.in_(racers[:winner] + racers[winner + 1 :]))
        ).all()


def test_the_last_seat_of_a_fare_class_goes_to_exactly_one_racer(arena: Arena) -> None:
    with arena.db.transaction() as session:
        origin, target = flights_on_one_route(session, 2)
        fill_but_one_seat(session, target)
        racers = new_passengers(session, RACERS)
        tickets = seated_tickets(session, origin, racers)
        origin_id, target_id = origin.flight_id, target.flight_id

    outcomes = arena.race(
        [
            Call(
                "update_ticket_to_new_flight",
                {"ticket_no": ticket_no, "new_flight_id": target_id},
                passenger_id,
                f"race-seat-{index}",
                "call_0",
            )
            for index, (passenger_id, ticket_no) in enumerate(zip(racers, tickets, strict=True))
        ]
    )

    winner = one_winner(outcomes, f"has no {FARE} seat left")
    changed = result(outcomes[winner])
    assert changed["ticket_no"] == tickets[winner]
    with arena.db.session() as session:
        full = session.get(Flight, target_id)
        assert full is not None
        assert _sold(session, target_id) == _capacity(session, full)
        for index, ticket_no in enumerate(tickets):
            flights = session.scalars(
                select(TicketFlight.flight_id).where(TicketFlight.ticket_no == ticket_no)
            ).all()
            passes = session.scalars(
                select(BoardingPass.flight_id).where(BoardingPass.ticket_no == ticket_no)
            ).all()
            expected = target_id if index == winner else origin_id
            assert (flights, passes) == ([expected], [expected]), ticket_no
            charged = [p.amount_cents for p in payments(session, ticket_no)]
            assert charged == ([changed["charged_cents"]] if index == winner else [])
        assert changed["charged_cents"] > 0  # the change fee: the payment check means something


def test_one_ticket_changed_by_every_racer_at_once_is_charged_per_move(arena: Arena) -> None:
    # The customer approves a change to a different flight in each of several
    # conversations at once. Each change applies to where the ticket is when it runs, so
    # the changes that succeed chain from the origin flight to the final one, and each
    # charge belongs to one real move.
    with arena.db.transaction() as session:
        origin, *targets = flights_on_one_route(session, RACERS + 1)
        (owner,) = new_passengers(session, 1)
        (ticket_no,) = seated_tickets(session, origin, [owner])
        origin_id = origin.flight_id
        target_ids = [flight.flight_id for flight in targets]

    outcomes = arena.race(
        [
            Call(
                "update_ticket_to_new_flight",
                {"ticket_no": ticket_no, "new_flight_id": flight_id},
                owner,
                f"race-moves-{index}",
                "call_0",
            )
            for index, flight_id in enumerate(target_ids)
        ]
    )

    no_crash(outcomes)
    refused = [o.content for o in outcomes if o.status != "success"]
    assert all(text.startswith("Error: ") for text in refused), refused
    moves = [result(o) for o in outcomes if o.status == "success"]
    assert moves, refused
    by_origin = {move["old_flight"]["flight_id"]: move for move in moves}
    assert len(by_origin) == len(moves), "two changes moved the ticket off the same flight"
    where = origin_id
    for _ in moves:
        where = by_origin[where]["new_flight"]["flight_id"]
    with arena.db.session() as session:
        flights = session.scalars(
            select(TicketFlight.flight_id).where(TicketFlight.ticket_no == ticket_no)
        ).all()
        passes = session.scalars(
            select(BoardingPass.flight_id).where(BoardingPass.ticket_no == ticket_no)
        ).all()
        assert (flights, passes) == ([where], [where])
        charged = sorted(p.amount_cents for p in payments(session, ticket_no))
        assert charged == sorted(move["charged_cents"] for move in moves)


def test_the_last_place_of_an_excursion_goes_to_exactly_one_racer(arena: Arena) -> None:
    when = day(AHEAD)
    with arena.db.transaction() as session:
        excursion = excursion_with_one_place_left(session, when)
        excursion_id, capacity = excursion.id, excursion.capacity_per_day
        racers = new_passengers(session, RACERS)
    args = {"recommendation_id": excursion_id, "date": when.isoformat()}

    outcomes = arena.race(calls("book_excursion", lambda _: args, racers, "place"))

    winner = one_winner(outcomes, "has no place left on")
    booked = result(outcomes[winner])
    with arena.db.session() as session:
        after = session.get(TripRecommendation, excursion_id)
        assert after is not None
        assert _places_used(session, after, when) == capacity
        mine = session.scalars(
            select(ExcursionBooking.passenger_id).where(ExcursionBooking.passenger_id.in_(racers))
        ).all()
        assert mine == [racers[winner]]
        charges = payments(session, f"excursion-{booked['booking_id']}")
        assert [p.amount_cents for p in charges] == [booked["charged_cents"]]


# Cancelling one booking from every process at once ------------------------------------


@dataclass(frozen=True)
class Cancellable:
    """A booking made for one passenger, to be cancelled by every racer at once."""

    tool: str
    args: dict[str, Any]
    reference: str
    status_query: Select[str]

    def status(self, session: Session) -> str | None:
        return session.scalar(self.status_query)


def _hotel_stay(session: Session, passenger_id: str) -> Cancellable:
    hotel = _hotel(session, 2)
    checkin = day(AHEAD + 3)
    assert _nights_used(session, hotel, checkin) < hotel.rooms
    stay = HotelBooking(
        passenger_id=passenger_id,
        hotel_id=hotel.id,
        checkin_date=checkin,
        checkout_date=checkin + timedelta(days=2),
        status="confirmed",
        total_cents=PRICE_CENTS,
        created_at=FIXED_NOW - timedelta(days=3),
    )
    session.add(stay)
    session.flush()
    stay_id = stay.id
    return Cancellable(
        "cancel_hotel",
        {"booking_id": stay_id},
        f"hotel-{stay_id}",
        select(HotelBooking.status).where(HotelBooking.id == stay_id),
    )


def _car_rental(session: Session, passenger_id: str) -> Cancellable:
    rental = session.scalars(select(CarRental).order_by(CarRental.id.desc())).first()
    assert rental is not None
    booking = CarRentalBooking(
        passenger_id=passenger_id,
        rental_id=rental.id,
        start_date=day(AHEAD + 3),
        end_date=day(AHEAD + 4),
        status="confirmed",
        total_cents=PRICE_CENTS,
        created_at=FIXED_NOW - timedelta(days=3),
    )
    session.add(booking)
    session.flush()
    booking_id = booking.id
    return Cancellable(
        "cancel_car_rental",
        {"booking_id": booking_id},
        f"car-{booking_id}",
        select(CarRentalBooking.status).where(CarRentalBooking.id == booking_id),
    )


def _excursion_place(session: Session, passenger_id: str) -> Cancellable:
    excursion = session.scalars(
        select(TripRecommendation).order_by(TripRecommendation.id.desc())
    ).first()
    assert excursion is not None
    place = ExcursionBooking(
        passenger_id=passenger_id,
        recommendation_id=excursion.id,
        date=day(AHEAD + 3),
        status="confirmed",
        total_cents=PRICE_CENTS,
        created_at=FIXED_NOW - timedelta(days=3),
    )
    session.add(place)
    session.flush()
    place_id = place.id
    return Cancellable(
        "cancel_excursion",
        {"booking_id": place_id},
        f"excursion-{place_id}",
        select(ExcursionBooking.status).where(ExcursionBooking.id == place_id),
    )


def _ticket(session: Session, passenger_id: str) -> Cancellable:
    flight = session.scalars(
        select(Flight)
        .where(
            Flight.status == "Scheduled", Flight.scheduled_departure > FIXED_NOW + timedelta(days=3)
        )
        .order_by(Flight.scheduled_departure.desc(), Flight.flight_id)
    ).first()
    assert flight is not None and seats_left(session, flight, "Economy") > 0
    ticket_no = new_ticket(session, passenger_id, flight, "Economy", PRICE_CENTS)
    return Cancellable(
        "cancel_ticket",
        {"ticket_no": ticket_no},
        ticket_no,
        select(Ticket.status).where(Ticket.ticket_no == ticket_no),
    )


CANCELLABLES: dict[str, tuple[Callable[[Session, str], Cancellable], str]] = {
    "hotel": (_hotel_stay, "Hotel reservation {id} is already cancelled."),
    "car_rental": (_car_rental, "Car rental reservation {id} is already cancelled."),
    "excursion": (_excursion_place, "Excursion reservation {id} is already cancelled."),
    "ticket": (_ticket, "Ticket {id} is cancelled; it can no longer be changed or cancelled."),
}


@pytest.mark.parametrize("kind", list(CANCELLABLES))
def test_a_booking_cancelled_by_every_racer_at_once_is_refunded_once(
    arena: Arena, kind: str
) -> None:
    make, refusal = CANCELLABLES[kind]
    with arena.db.transaction() as session:
        (owner,) = new_passengers(session, 1)
        booking = make(session, owner)
    # The customer in several conversations (tabs, devices) at once.
    racing = [owner] * RACERS

    outcomes = arena.race(calls(booking.tool, lambda _: booking.args, racing, f"cancel-{kind}"))

    (the_id,) = booking.args.values()
    winner = one_winner(outcomes, refusal.format(id=the_id))
    cancelled = result(outcomes[winner])
    assert cancelled["status"] == "cancelled" and cancelled["refunded_cents"] > 0
    with arena.db.session() as session:
        assert booking.status(session) == "cancelled"
        refunds = [p.amount_cents for p in payments(session, booking.reference)]
        assert refunds == [-cancelled["refunded_cents"]]


# One tool call delivered to every process at once --------------------------------------


def test_one_booking_call_delivered_to_every_racer_writes_once(arena: Arena) -> None:
    # The last room: a second run of the call would be refused as sold out, where it must
    # answer with the first run's result.
    night = day(AHEAD + 1)
    with arena.db.transaction() as session:
        hotel = hotel_with_one_room_left(session, nth=1, night=night)
        hotel_id = hotel.id
        (owner,) = new_passengers(session, 1)
    stay = {
        "hotel_id": hotel_id,
        "checkin_date": night.isoformat(),
        "checkout_date": day(AHEAD + 2).isoformat(),
    }
    same = Call("book_hotel", stay, owner, "race-same-book", "call_7")

    outcomes = arena.race([same] * RACERS)

    no_crash(outcomes)
    assert [o.status for o in outcomes] == ["success"] * RACERS, [o.content for o in outcomes]
    answers = [result(o) for o in outcomes]
    assert all(a == answers[0] for a in answers)
    with arena.db.session() as session:
        mine = session.scalars(
            select(HotelBooking.id).where(HotelBooking.passenger_id == owner)
        ).all()
        assert mine == [answers[0]["booking_id"]]
        assert [p.amount_cents for p in payments(session, f"hotel-{mine[0]}")] == [
            answers[0]["charged_cents"]
        ]
        assert session.get(ToolCallRecord, ("race-same-book", "call_7")) is not None


def test_one_cancel_call_delivered_to_every_racer_refunds_once(arena: Arena) -> None:
    # A second run of the call would be refused as already cancelled, where it must answer
    # with the first run's result.
    with arena.db.transaction() as session:
        (owner,) = new_passengers(session, 1)
        booking = _car_rental(session, owner)
    same = Call(booking.tool, booking.args, owner, "race-same-cancel", "call_3")

    outcomes = arena.race([same] * RACERS)

    no_crash(outcomes)
    assert [o.status for o in outcomes] == ["success"] * RACERS, [o.content for o in outcomes]
    answers = [result(o) for o in outcomes]
    assert all(a == answers[0] for a in answers) and answers[0]["status"] == "cancelled"
    with arena.db.session() as session:
        assert booking.status(session) == "cancelled"
        assert [p.amount_cents for p in payments(session, booking.reference)] == [
            -answers[0]["refunded_cents"]
        ]
