"""The route network and the flight schedule.

Routes: the fixture routes plus random city pairs, with great-circle distances, block
times, aircraft and flight numbers. Schedule: every route flown daily over the schedule
window, each flight with its status (as seen at "now"), fares and the quotas the sales
fill.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from types import MappingProxyType

from db.generate.bulk_load import _RowSink
from db.generate.reference import AircraftType, AirportRow, ReferenceData
from db.generate.routes import _FIXTURE_ROUTES, _Route
from db.rules import CHECK_IN_OPENS_HOURS

# The schedule covers local dates from this many days before "now" to this many after.
SCHEDULE_DAYS_BEFORE = 7
SCHEDULE_DAYS_AFTER = 60
# Random city pairs added to the fixture routes per unit of scale (each pair flies both
# directions daily, some twice a day).
ROUTE_PAIRS_PER_SCALE = 9
TWICE_DAILY_SHARE = 0.25
MIN_ROUTE_KM = 250
# Aircraft fly routes up to this share of their range.
RANGE_MARGIN = 1.1
# Long-haul routes (above this) only touch a hub and use wide-bodies.
LONG_HAUL_KM = 4000

# Quotas: the share of each cabin sold is a flight's base load times a booking curve
# that fills up towards departure (times the build's ``load``, 1 unless a smaller
# database is asked for). Loads are modest so the default build stays fast.
LOAD_RANGE = (0.10, 0.32)
CABIN_LOAD_FACTOR: Mapping[str, float] = MappingProxyType(
    {"Economy": 1.0, "Comfort": 0.85, "Business": 0.7}
)
# The share of tickets sold with a seat (on flights that have left, every ticket has one).
SEAT_SELECTED_SHARE = 0.6


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Airports that get more routes, and the airline flying out of each country.
_HUBS = frozenset(
    _words(
        "FRA MUC ZRH CDG LHR AMS MAD BCN FCO VIE CPH IST JFK ORD ATL LAX YYZ DXB DOH SIN HKG "
        "NRT ICN"
    )
)
_AIRLINES: Mapping[str, str] = MappingProxyType(
    {
        "Switzerland": "LX", "Germany": "LH", "France": "AF", "United Kingdom": "BA",
        "Ireland": "EI", "Netherlands": "KL", "Belgium": "SN", "Luxembourg": "LG",
        "Spain": "IB", "Portugal": "TP", "Italy": "AZ", "Austria": "OS",
        "Czech Republic": "OK", "Hungary": "W6", "Poland": "LO", "Denmark": "SK",
        "Sweden": "SK", "Norway": "SK", "Finland": "AY", "Greece": "A3", "Turkey": "TK",
        "Iceland": "FI", "Romania": "RO", "United States": "UA", "Canada": "AC",
        "Mexico": "AM", "Brazil": "LA", "Argentina": "AR", "Colombia": "AV", "Chile": "LA",
        "United Arab Emirates": "EK", "Qatar": "QR", "Israel": "LY", "India": "AI",
        "Singapore": "SQ", "Thailand": "TG", "Hong Kong": "CX", "Japan": "NH",
        "South Korea": "KE", "China": "CA", "Malaysia": "MH", "Taiwan": "BR", "Egypt": "MS",
        "South Africa": "SA", "Morocco": "AT", "Kenya": "KQ", "Ethiopia": "ET",
        "Australia": "QF", "New Zealand": "NZ",
    }
)  # fmt: skip
_FALLBACK_AIRLINE = "TA"


def great_circle_km(a: AirportRow, b: AirportRow) -> float:
    """Return the great-circle distance between two airports in kilometres."""
    lat1, lon1, lat2, lon2 = map(math.radians, (a.latitude, a.longitude, b.latitude, b.longitude))
    haversine = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371.0 * math.asin(math.sqrt(haversine))


def flight_duration(distance_km: float) -> timedelta:
    """Return the block time of a flight: 30 minutes of taxi plus cruise at 800 km/h.

    Rounded up to 5 minutes.
    """
    minutes = 30 + distance_km / 800 * 60
    return timedelta(minutes=5 * math.ceil(minutes / 5))


def _pick_aircraft(ref: ReferenceData, distance_km: float, rng: random.Random) -> str:
    """Choose a type that reaches ``distance_km``: wide-bodies for long haul only."""
    wide = distance_km > LONG_HAUL_KM
    able = [
        craft.code
        for craft in ref.aircraft.values()
        if craft.range_km >= distance_km * RANGE_MARGIN
        and craft.is_wide_body == wide
        and (craft.range_km >= 5000 or distance_km <= 1500)
    ]
    if not able:  # e.g. 3,000-4,000 km beyond every narrow-body: fall back to wide-bodies
        able = [c.code for c in ref.aircraft.values() if c.range_km >= distance_km * RANGE_MARGIN]
    return rng.choice(able)


def _random_local_time(rng: random.Random, earliest: int, latest: int) -> time:
    """Return a time between two hours of the day, on a 5-minute grid."""
    minutes = 5 * rng.randrange(earliest * 12, latest * 12)
    return time(minutes // 60, minutes % 60)


class _FlightNumbers:
    """Hands out unused flight numbers per airline, an even outbound and the odd return."""

    def __init__(self, rng: random.Random, taken: Sequence[str]) -> None:
        self._rng = rng
        self._used = set(taken)

    def pair(self, airline: str) -> tuple[str, str]:
        """Return an unused outbound/return pair like ``("LX0482", "LX0483")``."""
        while True:
            number = self._rng.randrange(100, 9998, 2)
            outbound, inbound = f"{airline}{number:04d}", f"{airline}{number + 1:04d}"
            if outbound not in self._used and inbound not in self._used:
                self._used.update((outbound, inbound))
                return outbound, inbound


def _candidate_pairs(ref: ReferenceData) -> list[tuple[AirportRow, AirportRow, float, float]]:
    """Return city pairs worth flying, with their distance and a popularity weight."""
    fixture_pairs = {frozenset((r.origin, r.destination)) for r in _FIXTURE_ROUTES}
    longest = max(craft.range_km for craft in ref.aircraft.values()) / RANGE_MARGIN
    airports = list(ref.airports.values())
    pairs = []
    for i, a in enumerate(airports):
        for b in airports[i + 1 :]:
            if frozenset((a.code, b.code)) in fixture_pairs or a.city == b.city:
                continue
            distance = great_circle_km(a, b)
            hubs = (a.code in _HUBS) + (b.code in _HUBS)
            if distance < MIN_ROUTE_KM or distance > longest:
                continue
            if distance > LONG_HAUL_KM and hubs == 0:
                continue
            weight = (1, 4, 12)[hubs] * (1.0 if distance <= LONG_HAUL_KM else 0.6)
            pairs.append((a, b, distance, weight))
    return pairs


def _plan_routes(ref: ReferenceData, scale: int, rng: random.Random) -> list[_Route]:
    """Return the fixture routes plus ``ROUTE_PAIRS_PER_SCALE * scale`` random city pairs.

    Pairs are drawn by weight without replacement, so a larger scale adds routes to the
    network of a smaller one. Each pair flies both ways, some twice a day.
    """
    candidates = _candidate_pairs(ref)
    keyed = sorted(candidates, key=lambda pair: rng.random() ** (1.0 / pair[3]), reverse=True)
    numbers = _FlightNumbers(rng, [route.flight_no for route in _FIXTURE_ROUTES])
    routes = list(_FIXTURE_ROUTES)
    for a, b, distance, _weight in keyed[: ROUTE_PAIRS_PER_SCALE * scale]:
        if b.code in _HUBS and a.code not in _HUBS:
            a, b = b, a  # the hub's airline flies the pair
        airline = _AIRLINES.get(a.country, _FALLBACK_AIRLINE)
        twice = distance <= LONG_HAUL_KM and rng.random() < TWICE_DAILY_SHARE
        windows = ((6, 13), (14, 21)) if twice else ((6, 21),)
        for earliest, latest in windows:
            outbound, inbound = numbers.pair(airline)
            aircraft = _pick_aircraft(ref, distance, rng)
            routes.append(
                _Route(
                    outbound, a.code, b.code, aircraft, _random_local_time(rng, earliest, latest)
                )
            )
            routes.append(
                _Route(inbound, b.code, a.code, aircraft, _random_local_time(rng, earliest, latest))
            )
    return routes


# ---------------------------------------------------------------------------------------
# Schedule
# ---------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Flight:
    """One generated flight and its sales inventory.

    ``sold`` counts tickets per fare class; ``quota`` is how many the build sells in
    total; ``seat_pool`` holds the seats still to hand out to the random sales.
    """

    flight_id: int
    route: _Route
    aircraft: AircraftType
    local_date: date
    departure: datetime
    arrival: datetime
    status: str = "Scheduled"
    actual_departure: datetime | None = None
    actual_arrival: datetime | None = None
    fares: dict[str, int] = field(default_factory=dict)
    sold: dict[str, int] = field(default_factory=dict)
    quota: dict[str, int] = field(default_factory=dict)
    seat_pool: dict[str, list[str]] = field(default_factory=dict)
    taken_seats: set[str] = field(default_factory=set)
    next_boarding_no: int = 1

    @property
    def has_left(self) -> bool:
        """Tell whether the aircraft is in the air or has landed."""
        return self.actual_departure is not None

    def free(self, fare: str) -> int:
        """Return how many more seats of ``fare`` the random sales may sell."""
        return self.quota.get(fare, 0) - self.sold.get(fare, 0)


def _floor_to_5_minutes(moment: datetime) -> datetime:
    return moment.replace(minute=moment.minute - moment.minute % 5, second=0, microsecond=0)


def _local_departure(ref: ReferenceData, route: _Route, now: datetime) -> time:
    """Return the daily local departure time of ``route``, derived from "now" if it follows it."""
    if route.local_departure is not None:
        return route.local_departure
    if route.departs_in is None:
        raise RuntimeError(f"Route {route.flight_no} has no departure time.")
    departure = _floor_to_5_minutes(now + route.departs_in)
    return departure.astimezone(ref.airports[route.origin].zone).time()


def _build_schedule(
    ref: ReferenceData, routes: Sequence[_Route], now: datetime, rng: random.Random
) -> list[_Flight]:
    """Fly every route once a day over the schedule window and set statuses and fares.

    Flight ids follow the order of scheduled departure.
    """
    today = now.date()
    days = [
        today + timedelta(days=d) for d in range(-SCHEDULE_DAYS_BEFORE, SCHEDULE_DAYS_AFTER + 1)
    ]
    planned: list[tuple[datetime, str, _Route, date, timedelta]] = []
    for route in routes:
        origin, destination = ref.airports[route.origin], ref.airports[route.destination]
        duration = flight_duration(great_circle_km(origin, destination))
        local_time = _local_departure(ref, route, now)
        for day in days:
            departure = datetime.combine(day, local_time, tzinfo=origin.zone).astimezone(UTC)
            planned.append((departure, route.flight_no, route, day, duration))
    planned.sort(key=lambda item: (item[0], item[1]))
    flights = []
    for flight_id, (departure, _, route, day, duration) in enumerate(planned, start=1):
        aircraft = ref.aircraft[route.aircraft_code]
        flight = _Flight(flight_id, route, aircraft, day, departure, departure + duration)
        flight.sold = dict.fromkeys(aircraft.seats, 0)
        _set_status(flight, now, rng)
        _set_fares(flight, ref, now, rng)
        flights.append(flight)
    return flights


def _draw_delay(rng: random.Random) -> timedelta:
    roll = rng.random()
    if roll < 0.7:
        return timedelta(minutes=rng.randrange(0, 11))
    if roll < 0.95:
        return timedelta(minutes=rng.randrange(10, 46))
    return timedelta(minutes=rng.randrange(45, 151))


def _set_status(flight: _Flight, now: datetime, rng: random.Random) -> None:
    """Decide the status (and actual times) of a flight as seen at ``now``.

    Fixture routes are never cancelled or delayed at random, so the fixtures stay as
    documented.
    """
    check_in_open = flight.departure - timedelta(hours=CHECK_IN_OPENS_HOURS) <= now
    if flight.departure <= now:
        delay = _draw_delay(rng)
        actual_departure = flight.departure + delay
        if actual_departure > now:
            flight.status = "Delayed"
            return
        flight.actual_departure = actual_departure
        jitter = timedelta(minutes=rng.randrange(-10, 11))
        actual_arrival = max(
            flight.arrival + delay + jitter, actual_departure + timedelta(minutes=20)
        )
        if actual_arrival <= now:
            flight.status, flight.actual_arrival = "Arrived", actual_arrival
        else:
            flight.status = "Departed"
    elif check_in_open:
        delayed = not flight.route.fixture and rng.random() < 0.08
        flight.status = "Delayed" if delayed else "On Time"
    else:
        cancelled = not flight.route.fixture and rng.random() < 0.004
        flight.status = "Cancelled" if cancelled else "Scheduled"


def _set_fares(flight: _Flight, ref: ReferenceData, now: datetime, rng: random.Random) -> None:
    """Price every cabin: by distance, dearer close to departure, Business > Comfort > Economy."""
    distance = great_circle_km(
        ref.airports[flight.route.origin], ref.airports[flight.route.destination]
    )
    days_out = max((flight.departure - now).total_seconds() / 86_400, 0.0)
    demand = 1.0 + 0.35 * math.exp(-days_out / 10)
    economy = round((45 + 0.075 * distance) * demand * rng.uniform(0.9, 1.12))
    euros = {
        "Economy": economy,
        "Comfort": round(economy * rng.uniform(1.45, 1.7)),
        "Business": round(economy * rng.uniform(2.6, 3.3)),
    }
    flight.fares = {fare: euros[fare] * 100 for fare in flight.aircraft.seats}


def _plan_quotas(
    flights: Sequence[_Flight],
    full_flight: _Flight,
    now: datetime,
    rng: random.Random,
    load: float = 1.0,
) -> None:
    """Decide how many seats each cabin sells and which seats the random sales get.

    Loads rise towards departure and are multiplied by ``load`` (see ``build_database``);
    ``full_flight`` sells every Economy seat whatever ``load`` is; cancelled flights sell
    nothing. Flights that have left seat every passenger.
    """
    for flight in flights:
        if flight.status == "Cancelled":
            flight.quota = dict(flight.sold)
            continue
        days_out = (flight.departure - now).total_seconds() / 86_400
        curve = 1.0 if days_out <= 2 else max(0.3, 1 - (days_out - 2) / 75)
        base = rng.uniform(*LOAD_RANGE) * curve
        for fare, seats in flight.aircraft.seats.items():
            drawn = len(seats) * base * CABIN_LOAD_FACTOR[fare] * rng.uniform(0.7, 1.3)
            wanted = round(drawn * load)
            if flight is full_flight and fare == "Economy":
                wanted = len(seats)
            flight.quota[fare] = max(flight.sold[fare], min(len(seats), wanted))
            to_sell = flight.quota[fare] - flight.sold[fare]
            seated = to_sell if flight.has_left else round(to_sell * SEAT_SELECTED_SHARE)
            open_seats = seats
            if flight.taken_seats:  # only fixture flights; skip the copy elsewhere
                open_seats = tuple(seat for seat in seats if seat not in flight.taken_seats)
            flight.seat_pool[fare] = rng.sample(open_seats, seated)


def _write_flights(sink: _RowSink, flights: Sequence[_Flight]) -> None:
    for f in flights:
        route = f.route
        sink.add(
            "flights",
            (
                f.flight_id, route.flight_no, f.departure, f.arrival, route.origin,
                route.destination, f.status, route.aircraft_code, f.actual_departure,
                f.actual_arrival,
            ),
        )  # fmt: skip
        for fare, amount in f.fares.items():
            sink.add("flight_fares", (f.flight_id, fare, amount))
        sink.maybe_flush()
