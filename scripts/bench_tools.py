"""Measure the latency of every tool on a freshly generated database.

Builds a database in a temporary folder (``--scale`` sets its size), then invokes each
tool directly, as the graph's ToolNode would (a tool call with an id and a config
carrying the passenger), ``--calls`` times, and prints the median and 95th percentile.
Writes run against the temporary database with arguments chosen so that every call
succeeds and the state stays bookable (tickets move back and forth between two flights;
each cancellation uses a different ticket or reservation). Also times ``describe_action``
(the approval preview) and the passenger summary read on every turn.

    python scripts/bench_tools.py                # default scale
    python scripts/bench_tools.py --scale 10 --calls 100
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage
from sqlalchemy import select

from assistants.approvals import describe_action
from assistants.specialists import Crew, build_crew
from db.clock import fixed_clock
from db.engine import Database
from db.errors import TravelError
from db.fixtures import (
    FIXTURE_FLIGHT_NO,
    FIXTURE_PASSENGER_ID,
    FIXTURE_TICKET_NO,
)
from db.generate import build_database
from db.models import (
    BoardingPass,
    CarRental,
    Flight,
    Hotel,
    Ticket,
    TicketFlight,
    TripRecommendation,
)
from db.passengers import passenger_summary
from db.ticket_quotes import quote_ticket_cancellation

Args = dict[str, Any]


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(round(fraction * (len(ordered) - 1)), len(ordered) - 1)
    return ordered[index]


def _invoke(toolset: Crew, name: str, args: Args, passenger_id: str) -> ToolMessage:
    tool = next(t for t in toolset.all_tools() if t.name == name)
    message = tool.invoke(
        {"name": name, "args": args, "id": f"bench-{uuid.uuid4().hex}", "type": "tool_call"},
        {"configurable": {"passenger_id": passenger_id}},
    )
    assert isinstance(message, ToolMessage), message
    return message


class Bench:
    """Collects timings per label and prints them as a table."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.results: list[tuple[str, int, float, float]] = []

    def run(self, label: str, action: Callable[[int], object]) -> None:
        """Time ``action(i)`` for i in range(calls) after one warm-up call."""
        action(-1)
        samples = []
        for index in range(self.calls):
            start = time.perf_counter()
            action(index)
            samples.append((time.perf_counter() - start) * 1000)
        self.results.append(
            (label, len(samples), statistics.median(samples), _percentile(samples, 0.95))
        )
        print(f"  {label:<44} median {self.results[-1][2]:7.2f} ms", file=sys.stderr)

    def print(self) -> None:
        """Print the table of results to stdout."""
        print(f"{'tool':<46}{'calls':>6}{'median ms':>12}{'p95 ms':>10}")
        for label, count, median, p95 in self.results:
            print(f"{label:<46}{count:>6}{median:>12.2f}{p95:>10.2f}")


def _cancellable_tickets(db: Database, now: datetime, count: int) -> list[tuple[str, str]]:
    """Return (ticket_no, passenger_id) of active tickets every segment of which can go."""
    with db.session() as session:
        rows = session.execute(
            select(Ticket.ticket_no, Ticket.passenger_id, Flight.scheduled_departure)
            .join(TicketFlight, TicketFlight.ticket_no == Ticket.ticket_no)
            .join(Flight, Flight.flight_id == TicketFlight.flight_id)
            .outerjoin(
                BoardingPass,
                (BoardingPass.ticket_no == TicketFlight.ticket_no)
                & (BoardingPass.flight_id == TicketFlight.flight_id),
            )
            .where(Ticket.status == "active", BoardingPass.checked_in_at.is_(None))
            .where(Flight.scheduled_departure > now + timedelta(days=2))
            .order_by(Ticket.ticket_no)
            .limit(count * 4)
        ).all()
    seen: dict[str, str] = {}
    for ticket_no, passenger_id, _ in rows:
        seen.setdefault(ticket_no, passenger_id)
    tickets = []
    with db.session() as session:
        for ticket_no, passenger_id in seen.items():
            try:  # keep only tickets the rules let go (no segment too close or checked in)
                quote_ticket_cancellation(session, passenger_id, ticket_no, now)
            except TravelError:
                continue
            tickets.append((ticket_no, passenger_id))
            if len(tickets) == count:
                break
    if len(tickets) < count:
        raise SystemExit(f"only {len(tickets)} cancellable tickets; lower --calls")
    return tickets


def _first_id(db: Database, model: type[Any], location: str) -> int:
    with db.session() as session:
        found = session.scalar(
            select(model.id).where(model.location == location).order_by(model.id).limit(1)
        )
    assert found is not None, f"no {model.__name__} in {location}"
    return int(found)


def _fixture_alternates(db: Database, now: datetime) -> tuple[int, int]:
    """Return two later LX0112 flights with Economy seats to move the fixture ticket between."""
    with db.session() as session:
        flights = list(
            session.scalars(
                select(Flight.flight_id)
                .where(Flight.flight_no == FIXTURE_FLIGHT_NO, Flight.scheduled_departure > now)
                .order_by(Flight.scheduled_departure)
            )
        )
    # Day 0 is the ticket's flight, day 2 is sold out in Economy; 1 and 3 have seats.
    return flights[1], flights[3]


def run(scale: int, calls: int, seed: int) -> None:
    """Build the database, then time every tool."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    with tempfile.TemporaryDirectory(prefix="bench-tools-") as folder:
        db = Database.from_url(str(Path(folder) / "travel.sqlite"), clock=fixed_clock(now))
        started = time.perf_counter()
        report = build_database(db, seed=seed, scale=scale, now=now)
        print(
            f"database: scale {scale}, {report.total_rows} rows, built in "
            f"{time.perf_counter() - started:.1f} s; {calls} calls per tool",
        )
        toolset = build_crew(db)
        bench = Bench(calls)
        _bench_reads(bench, db, toolset, now)
        _bench_writes(bench, db, toolset, now, calls)
        bench.print()
        db.dispose()


def _bench_reads(bench: Bench, db: Database, toolset: Crew, now: datetime) -> None:
    today = now.date()

    def day(offset: int) -> str:
        return (today + timedelta(days=offset)).isoformat()

    routes = itertools.cycle([("CDG", "BSL"), ("MUC", "FRA"), ("FRA", "JFK"), ("ZRH", "LHR")])
    cities = itertools.cycle(["Basel", "Paris", "New York", "Tokyo", "Berlin"])
    pid = FIXTURE_PASSENGER_ID

    def ok(message: ToolMessage) -> None:
        assert message.status == "success", message.content

    bench.run(
        "fetch_user_flight_information",
        lambda i: ok(_invoke(toolset, "fetch_user_flight_information", {}, pid)),
    )
    bench.run(
        "search_flights (route)",
        lambda i: ok(
            _invoke(
                toolset,
                "search_flights",
                dict(zip(("departure_airport", "arrival_airport"), next(routes), strict=True)),
                pid,
            )
        ),
    )
    bench.run(
        "search_flights (all, 50 results)",
        lambda i: ok(_invoke(toolset, "search_flights", {"limit": 50}, pid)),
    )
    bench.run(
        "search_flights (window)",
        lambda i: ok(
            _invoke(
                toolset,
                "search_flights",
                {"departure_airport": "CDG", "start_time": day(3), "end_time": day(4)},
                pid,
            )
        ),
    )
    bench.run(
        "search_hotels (city + dates)",
        lambda i: ok(
            _invoke(
                toolset,
                "search_hotels",
                {"location": next(cities), "checkin_date": day(5), "checkout_date": day(9)},
                pid,
            )
        ),
    )
    bench.run(
        "search_car_rentals (city + dates)",
        lambda i: ok(
            _invoke(
                toolset,
                "search_car_rentals",
                {"location": next(cities), "start_date": day(5), "end_date": day(9)},
                pid,
            )
        ),
    )
    bench.run(
        "search_trip_recommendations (keywords)",
        lambda i: ok(
            _invoke(toolset, "search_trip_recommendations", {"keywords": "museum, river"}, pid)
        ),
    )
    if any(t.name == "lookup_policy" for t in toolset.primary_tools):
        bench.run(
            "lookup_policy",
            lambda i: ok(
                _invoke(toolset, "lookup_policy", {"query": "fee to cancel an Economy ticket"}, pid)
            ),
        )

    def summary(i: int) -> None:
        with db.session() as session:
            passenger_summary(session, pid, now)

    bench.run("passenger_summary (fetch_user_info node)", summary)
    first, _ = _fixture_alternates(db, now)
    bench.run(
        "describe_action (update_ticket_to_new_flight)",
        lambda i: describe_action(
            db,
            pid,
            "update_ticket_to_new_flight",
            {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": first},
            toolset.previews,
        ),
    )


def _bench_writes(bench: Bench, db: Database, toolset: Crew, now: datetime, calls: int) -> None:
    today = now.date()
    pid = FIXTURE_PASSENGER_ID

    def day(offset: int) -> str:
        return (today + timedelta(days=offset)).isoformat()

    def ok(message: ToolMessage) -> dict[str, Any]:
        assert message.status == "success", message.content
        result: dict[str, Any] = json.loads(str(message.content))
        return result

    first, second = _fixture_alternates(db, now)
    targets: Iterator[int] = itertools.cycle([first, second])
    bench.run(
        "update_ticket_to_new_flight",
        lambda i: ok(
            _invoke(
                toolset,
                "update_ticket_to_new_flight",
                {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": next(targets)},
                pid,
            )
        ),
    )
    tickets = iter(_cancellable_tickets(db, now, calls + 1))
    bench.run(
        "cancel_ticket",
        lambda i: ok(
            _invoke(toolset, "cancel_ticket", {"ticket_no": (t := next(tickets))[0]}, t[1])
        ),
    )
    for kind, book, update, cancel, model, dates in (
        (
            "hotel",
            "book_hotel",
            "update_hotel",
            "cancel_hotel",
            Hotel,
            ("checkin_date", "checkout_date"),
        ),
        (
            "car",
            "book_car_rental",
            "update_car_rental",
            "cancel_car_rental",
            CarRental,
            ("start_date", "end_date"),
        ),
    ):
        catalogue_id = _first_id(db, model, "Basel")
        id_name = "hotel_id" if kind == "hotel" else "rental_id"
        booked: list[int] = []
        bench.run(
            book,
            lambda i, cid=catalogue_id, name=id_name, fields=dates, out=booked, tool=book: (
                out.append(
                    ok(
                        _invoke(
                            toolset,
                            tool,
                            {name: cid, fields[0]: day(30 + i % 200), fields[1]: day(32 + i % 200)},
                            pid,
                        )
                    )["booking_id"]
                )
            ),
        )
        bench.run(
            update,
            lambda i, out=booked, fields=dates, tool=update: ok(
                _invoke(
                    toolset, tool, {"booking_id": out[i + 1], fields[1]: day(33 + i % 200)}, pid
                )
            ),
        )
        bench.run(
            cancel,
            lambda i, out=booked, tool=cancel: ok(
                _invoke(toolset, tool, {"booking_id": out[i + 1]}, pid)
            ),
        )
    excursion_id = _first_id(db, TripRecommendation, "Basel")
    excursions: list[int] = []
    bench.run(
        "book_excursion",
        lambda i: excursions.append(
            ok(
                _invoke(
                    toolset,
                    "book_excursion",
                    {"recommendation_id": excursion_id, "date": day(30 + (i + 1) % 300)},
                    pid,
                )
            )["booking_id"]
        ),
    )
    bench.run(
        "update_excursion",
        lambda i: ok(
            _invoke(
                toolset,
                "update_excursion",
                {"booking_id": excursions[i + 1], "date": day(31 + (i + 1) % 300)},
                pid,
            )
        ),
    )
    bench.run(
        "cancel_excursion",
        lambda i: ok(_invoke(toolset, "cancel_excursion", {"booking_id": excursions[i + 1]}, pid)),
    )


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=int, default=1, help="database size (default 1)")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per tool")
    parser.add_argument("--seed", type=int, default=7, help="generator seed")
    options = parser.parse_args(argv)
    run(options.scale, options.calls, options.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
