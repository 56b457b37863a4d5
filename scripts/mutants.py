"""Mutation testing with hand-written mutants: do the tests catch realistic bugs?

Each mutant below is one plausible bug (a boundary off by one, a comparison flipped, a
check removed, the wrong constant, a fee not charged, a refund paid twice, a decision
that fails open, a stack pop that does not pop, an answer skipped for parallel calls),
written as an exact ``find`` string that must occur once in one file and its
``replace``, with the few tests that should fail because of it.

The working tree is never touched. The script copies the files git knows about
(tracked, plus untracked files that are not ignored) into a temporary folder, checks
every mutant still applies (a ``find`` that no longer occurs exactly once is *stale*:
the script fails rather than count it), runs every selected test on the unmutated copy
(the baseline must pass, and ``db`` must import from the copy), then applies one
mutant at a time, runs its tests with ``python -m pytest -x`` and restores the file.

    python scripts/mutants.py                    # every mutant, one at a time
    python scripts/mutants.py --jobs 2           # two at a time, each in its own copy
    python scripts/mutants.py --list             # the mutants, stale ones flagged
    python scripts/mutants.py --only hotel-free-hours-wrong-constant stack-pop-keeps-top

A mutant is *killed* when its tests fail, *SURVIVED* when they pass (a test is missing,
or the mutant changes nothing a customer could notice: replace it), *timeout* when they
run past ``--timeout`` (not counted as killed: on a loaded machine a timeout proves
nothing). The exit code is non-zero when fewer than 95% are killed or a mutant is stale.
See docs/testing.md for how to add one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_SCORE = 0.95
DEFAULT_TIMEOUT = 300.0
# The packages the tests import from the copy, not from the editable install.
PROBED_MODULES = (
    "db",
    "tools",
    "assistants",
    "graph",
    "conversations",
    "terminal",
    "commands",
    "cli",
    "server",
    "evaluation",
)
# The pytest processes running now, killed when the run is interrupted (each runs in its
# own session, so Ctrl-C does not reach it).
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.Lock()
_STOPPING = threading.Event()


@dataclass(frozen=True)
class Mutant:
    """One realistic bug and the tests that must catch it.

    Attributes:
        id: A short unique name, used by ``--only``.
        area: What part of the product the rule belongs to (for the listing).
        rule: The rule the bug breaks, in one line.
        file: The file to change, relative to the repository root.
        find: Text that must occur exactly once in ``file``.
        replace: What replaces it.
        tests: Test node ids (``path::name``) that should fail; the fastest first,
            since pytest stops at the first failure.
    """

    id: str
    area: str
    rule: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]


U = "tests/unit/"
# Tests named here more than once.
POLICY_FARES = U + "test_policies.py::test_policy_md_fare_table_matches_fare_rules"
POLICY_TIMES = U + "test_policies.py::test_policy_md_time_limits_table_matches_rules"
POLICY_PARTNERS = U + "test_policies.py::test_policy_md_partner_table_matches_rules"
POLICY_NUMBERS = U + "test_policy_numbers.py::test_policy_numbers_each_match_their_own_kinds_rule"
FLIGHTS = U + "test_db_flights.py::"
HOTELS = U + "test_db_hotels.py::"
RESERVATIONS = U + "test_db_reservations.py::"
EDGES = U + "test_rule_edges.py::"
GAPS = U + "test_mutant_gaps.py::"
GRAPH = U + "test_graph.py::"
ROUTING = U + "test_routing.py::"
CLI_ANSWERS = U + "test_cli_approval_answers.py::"
SECOND_LEG_EARLY = (
    FLIGHTS + "test_update_ticket_refuses_a_second_leg_leaving_before_the_first_arrives"
)
REFUSED_DECISIONS_FREE = (
    U + "test_server_api.py::test_server_refused_decisions_leave_the_conversation_free"
)
BODY_LIMIT = "test_server_body_of_exactly_the_limit_is_read_and_one_byte_more_is_413"
JUDGE = U + "test_judge.py::"
SCENARIOS = "tests/integration/test_scenarios.py::"
SECOND_APPROVAL = U + "test_second_approval.py::"
EXACTLY_ONCE = U + "test_exactly_once.py::"
DELEGATES = GRAPH + "test_graph_delegates_and_returns"
PARALLEL_DECISIONS = GRAPH + "test_graph_parallel_sensitive_calls_approve_one_deny_other"
ROUTER_ORDER = ROUTING + "test_next_step_orders_safe_then_sensitive_then_leave"


def _constant(ident: str, rule: str, find: str, replace: str, *tests: str) -> Mutant:
    return Mutant(ident, "db/rules.py", rule, "db/rules.py", find, replace, tests)


MUTANTS: tuple[Mutant, ...] = (
    # --- db/rules.py: every constant of the one table of rules ----------------------------
    _constant(
        "rule-change-hours",
        "a ticket moves only to a flight at least 3 hours away",
        "MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE = 3",
        "MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE = 2",
        POLICY_TIMES,
        FLIGHTS + "test_update_ticket_rejects_a_flight_leaving_within_three_hours",
    ),
    _constant(
        "rule-cancel-hours",
        "no change or cancel within 3 hours of departure",
        "MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL = 3",
        "MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL = 2",
        POLICY_TIMES,
        FLIGHTS + "test_cancel_ticket_rejects_a_flight_within_three_hours",
    ),
    _constant(
        "rule-free-window-hours",
        "24-hour free window after booking",
        "FREE_WINDOW_HOURS_AFTER_BOOKING = 24",
        "FREE_WINDOW_HOURS_AFTER_BOOKING = 48",
        POLICY_TIMES,
        EDGES + "test_free_window_after_booking_charges_the_fee_a_minute_after_it_ends",
    ),
    _constant(
        "rule-check-in-hours",
        "online check-in opens 24 hours before departure",
        "CHECK_IN_OPENS_HOURS = 24",
        "CHECK_IN_OPENS_HOURS = 48",
        POLICY_TIMES,
        U + "test_db_generate.py::test_check_ins_happen_within_the_check_in_window",
    ),
    _constant(
        "rule-economy-change-fee",
        "Economy change fee EUR 75",
        "change_fee_cents=7_500,",
        "change_fee_cents=5_000,",
        POLICY_FARES,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-economy-cancel-fee",
        "Economy cancellation fee EUR 100",
        "cancel_fee_cents=10_000,",
        "cancel_fee_cents=7_500,",
        POLICY_FARES,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-comfort-change-fee",
        "Comfort change fee EUR 40",
        "change_fee_cents=4_000,",
        "change_fee_cents=2_500,",
        POLICY_FARES,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-comfort-cancel-fee",
        "Comfort cancellation fee EUR 50",
        "cancel_fee_cents=5_000,",
        "cancel_fee_cents=4_000,",
        POLICY_FARES,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-business-change-fee",
        "Business changes free",
        "change_fee_cents=0,",
        "change_fee_cents=4_000,",
        POLICY_FARES,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-business-cancel-fee",
        "Business cancellations free",
        "cancel_fee_cents=0,",
        "cancel_fee_cents=5_000,",
        POLICY_FARES,
        POLICY_NUMBERS,
        FLIGHTS + "test_cancel_ticket_business_fee_comes_from_the_fare_rules",
    ),
    _constant(
        "rule-hotel-free-hours",
        "hotels change or cancel free until 48 hours before check-in day",
        "HOTEL_FREE_CANCEL_HOURS = 48",
        "HOTEL_FREE_CANCEL_HOURS = 72",
        POLICY_PARTNERS,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-car-free-hours",
        "cars change or cancel free until 24 hours before pick-up day",
        "CAR_FREE_CANCEL_HOURS = 24",
        "CAR_FREE_CANCEL_HOURS = 48",
        POLICY_PARTNERS,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-excursion-free-hours",
        "excursions change or cancel free until 72 hours before the day",
        "EXCURSION_FREE_CANCEL_HOURS = 72",
        "EXCURSION_FREE_CANCEL_HOURS = 48",
        POLICY_PARTNERS,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-max-hotel-nights",
        "a stay is at most 30 nights",
        "MAX_HOTEL_NIGHTS = 30",
        "MAX_HOTEL_NIGHTS = 31",
        POLICY_PARTNERS,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-max-car-days",
        "a rental is at most 30 days",
        "MAX_CAR_RENTAL_DAYS = 30",
        "MAX_CAR_RENTAL_DAYS = 31",
        POLICY_PARTNERS,
        POLICY_NUMBERS,
    ),
    _constant(
        "rule-max-days-ahead",
        "partner reservations open 365 days ahead",
        "MAX_DAYS_AHEAD = 365",
        "MAX_DAYS_AHEAD = 366",
        POLICY_PARTNERS,
        POLICY_NUMBERS,
    ),
    # --- flights: SPEC section 4 for tickets ------------------------------------------------
    # --- conversations/fences.py: a turn that lost its claim saves nothing ----------------
    Mutant(
        "fence-sqlite-any-claim",
        "conversations",
        "a save of a claimed turn checks that its claim still stands (SQLite)",
        "conversations/fences.py",
        "if row is None or int(row[0]) != claim[1]:",
        "if row is None:",
        (
            "tests/unit/test_fenced_turns.py::"
            "test_the_fence_checks_every_write_of_the_claimed_thread_only[sqlite]",
        ),
    ),
    Mutant(
        "fence-postgres-any-claim",
        "conversations",
        "a save of a claimed turn checks that its claim still stands (PostgreSQL)",
        "conversations/fences.py",
        "if found is None or int(found) != claim[1]:",
        "if found is None:",
        (
            "tests/unit/test_fenced_turns.py::"
            "test_the_fence_checks_every_write_of_the_claimed_thread_only[postgresql]",
        ),
    ),
    Mutant(
        "fence-writes-unchecked",
        "conversations",
        "every pending write of a claimed turn is checked, not only its checkpoints",
        "conversations/fences.py",
        "        self._writing.claim = self._claim_of(config)\n"
        "        try:\n"
        "            super().put_writes(",
        "        self._writing.claim = None\n        try:\n            super().put_writes(",
        (
            "tests/unit/test_fenced_turns.py::"
            "test_the_fence_checks_every_write_of_the_claimed_thread_only[sqlite]",
        ),
    ),
    Mutant(
        "flights-route-departure-only",
        "tickets",
        "same route: the departure AND the arrival airport must match",
        "db/ticket_quotes.py",
        "if (s.flight.departure_airport, s.flight.arrival_airport) == route",
        "if s.flight.departure_airport == route[0]",
        (
            EDGES + "test_ticket_change_refuses_a_flight_sharing_only_one_airport",
            FLIGHTS + "test_update_ticket_rejects_a_different_route",
        ),
    ),
    Mutant(
        "flights-route-arrival-only",
        "tickets",
        "same route: the departure AND the arrival airport must match",
        "db/ticket_quotes.py",
        "if (s.flight.departure_airport, s.flight.arrival_airport) == route",
        "if s.flight.arrival_airport == route[1]",
        (
            EDGES + "test_ticket_change_refuses_a_flight_sharing_only_one_airport",
            FLIGHTS + "test_update_ticket_rejects_a_different_route",
        ),
    ),
    Mutant(
        "flights-status-not-scheduled",
        "tickets",
        "a ticket moves only to a scheduled (bookable) flight",
        "db/ticket_quotes.py",
        "if new_flight.status not in BOOKABLE_FLIGHT_STATUSES:",
        'if new_flight.status in ("Departed", "Arrived"):',
        (FLIGHTS + "test_update_ticket_rejects_a_cancelled_flight",),
    ),
    Mutant(
        "flights-change-hours-boundary",
        "tickets",
        "a flight leaving exactly 3 hours from now is still a valid new flight",
        "db/ticket_quotes.py",
        "if new_flight.scheduled_departure - now < hours(MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE):",
        "if new_flight.scheduled_departure - now <= hours(MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE):",
        (
            GAPS + "test_ticket_change_accepts_a_flight_leaving_exactly_the_minimum_hours_ahead",
            FLIGHTS + "test_update_ticket_rejects_a_flight_leaving_within_three_hours",
        ),
    ),
    Mutant(
        "flights-seat-free-in-class",
        "tickets",
        "a ticket moves only to a flight with a seat free in its fare class",
        "db/ticket_quotes.py",
        "if seats_left(session, new_flight, fare_class) <= 0:",
        "if seats_left(session, new_flight, fare_class) < 0:",
        (
            FLIGHTS + "test_update_ticket_rejects_a_full_flight",
            FLIGHTS + "test_update_ticket_error_leaves_the_database_unchanged",
        ),
    ),
    Mutant(
        "flights-flown-segment",
        "tickets",
        "no change of a flown segment",
        "db/ticket_rules.py",
        "    if segment_has_departed(item.flight, now):\n",
        '    if item.flight.status == "Departed":\n',
        (FLIGHTS + "test_update_ticket_rejects_a_flown_segment",),
    ),
    Mutant(
        "flights-checked-in-segment",
        "tickets",
        "no change or cancel of a checked-in segment",
        "db/ticket_rules.py",
        "if item.boarding is not None and item.boarding.checked_in_at is not None:",
        "if item.boarding is not None and item.boarding.boarding_no is None:",
        (
            FLIGHTS + "test_update_ticket_rejects_a_checked_in_segment",
            FLIGHTS + "test_cancel_ticket_rejects_a_checked_in_ticket",
        ),
    ),
    Mutant(
        "flights-ticket-ownership",
        "tickets",
        "a ticket is changed or cancelled only by its own passenger",
        "db/ticket_rules.py",
        "if ticket.passenger_id != passenger_id:",
        "if not ticket.passenger_id:",
        (
            FLIGHTS + "test_update_ticket_rejects_someone_elses_ticket",
            FLIGHTS + "test_cancel_ticket_rejects_someone_elses_ticket",
        ),
    ),
    Mutant(
        "flights-free-window-widened",
        "tickets",
        "no fee only within 24 hours of booking (widened to 48)",
        "db/ticket_rules.py",
        "if now - booking.book_date <= hours(FREE_WINDOW_HOURS_AFTER_BOOKING):",
        "if now - booking.book_date <= hours(2 * FREE_WINDOW_HOURS_AFTER_BOOKING):",
        (EDGES + "test_free_window_after_booking_charges_the_fee_a_minute_after_it_ends",),
    ),
    Mutant(
        "flights-fare-difference-refunded",
        "tickets",
        "a higher fare is charged, a lower one never refunded",
        "db/ticket_quotes.py",
        "fare_difference_cents=max(fare.amount_cents - current.segment.amount_cents, 0),",
        "fare_difference_cents=fare.amount_cents - current.segment.amount_cents,",
        (FLIGHTS + "test_quote_ticket_change_never_refunds_a_lower_fare",),
    ),
    Mutant(
        "flights-cancel-fee-not-deducted",
        "tickets",
        "a cancellation refunds what was paid minus the cancel fee",
        "db/ticket_quotes.py",
        "return max(self.paid_cents - self.cancel_fee_cents, 0)",
        "return self.paid_cents",
        (FLIGHTS + "test_cancel_ticket_refunds_paid_minus_fee_and_releases_the_seat",),
    ),
    Mutant(
        "flights-connection-second-leg-unchecked",
        "tickets",
        "a connection's second leg may not move to a flight leaving before the first lands",
        "db/ticket_quotes.py",
        "    if index > 0:\n        previous = segments[index - 1].flight\n",
        "    if index > 1:\n        previous = segments[index - 1].flight\n",
        (
            SECOND_LEG_EARLY,
            U
            + "test_tools_flights.py::test_update_ticket_to_new_flight_refuses_and_changes_nothing",
        ),
    ),
    Mutant(
        "flights-connection-previous-boundary",
        "tickets",
        "a connection's next leg may not leave the very minute the previous one lands",
        "db/ticket_quotes.py",
        "if new_flight.scheduled_departure <= previous.scheduled_arrival:",
        "if new_flight.scheduled_departure < previous.scheduled_arrival:",
        (SECOND_LEG_EARLY,),
    ),
    Mutant(
        "flights-connection-next-unchecked",
        "tickets",
        "a connection's first leg may not move to a flight landing after the second leaves",
        "db/ticket_quotes.py",
        "    if index + 1 < len(segments):\n",
        "    if index + 2 < len(segments):\n",
        (FLIGHTS + "test_update_ticket_refuses_to_break_a_connection",),
    ),
    Mutant(
        "flights-cancel-hours-boundary",
        "tickets",
        "changes and cancellations are still open exactly 3 hours before departure",
        "db/ticket_rules.py",
        "if item.flight.scheduled_departure - now < hours(MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL):",
        "if item.flight.scheduled_departure - now <= hours(MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL):",
        (FLIGHTS + "test_change_and_cancel_stay_open_until_exactly_three_hours_before_departure",),
    ),
    Mutant(
        "flights-connection-next-boundary",
        "tickets",
        "a connection's first leg may not land the very minute the next one leaves",
        "db/ticket_quotes.py",
        "if new_flight.scheduled_arrival >= following.scheduled_departure:",
        "if new_flight.scheduled_arrival > following.scheduled_departure:",
        (FLIGHTS + "test_update_ticket_first_leg_must_land_before_the_next_leg_leaves",),
    ),
    Mutant(
        "flights-cancel-fee-lowest-class",
        "tickets",
        "a cancellation pays one fee, the highest of the ticket's classes",
        "db/ticket_quotes.py",
        "    fare_class = max(\n        (item.segment.fare_conditions for item in remaining),",
        "    fare_class = min(\n        (item.segment.fare_conditions for item in remaining),",
        (FLIGHTS + "test_cancel_ticket_charges_one_fee_the_highest_of_its_classes",),
    ),
    Mutant(
        "flights-cancel-fee-above-paid",
        "tickets",
        "a cancellation fee never exceeds what was paid (nothing back, nothing more owed)",
        "db/ticket_quotes.py",
        "fee = 0 if waiver else min(fare_rule(fare_class).cancel_fee_cents, paid)",
        "fee = 0 if waiver else fare_rule(fare_class).cancel_fee_cents",
        (
            FLIGHTS
            + "test_cancel_ticket_fee_above_the_amount_paid_"
            + "refunds_nothing_and_charges_nothing_more",
        ),
    ),
    Mutant(
        "flights-cancel-counts-flown-segments",
        "tickets",
        "a ticket whose first leg flew cancels and refunds only the legs not flown",
        "db/ticket_quotes.py",
        "remaining = [s for s in segments if not segment_has_departed(s.flight, now)]",
        "remaining = list(segments)",
        (FLIGHTS + "test_cancel_ticket_after_its_first_leg_flew_cancels_and_refunds_the_rest",),
    ),
    Mutant(
        "flights-change-booking-total-unchanged",
        "tickets",
        "a change's fare difference is added to the booking's total (tables stay consistent)",
        "db/tickets.py",
        "    if quote.fare_difference_cents:\n"
        "        ticket = session.get(Ticket, quote.ticket_no)",
        "    if quote.fare_difference_cents < 0:\n"
        "        ticket = session.get(Ticket, quote.ticket_no)",
        (FLIGHTS + "test_update_ticket_adds_the_fare_difference_to_the_booking_total",),
    ),
    # --- hotels, car rentals, excursions: SPEC section 4 for reservations ----------------
    Mutant(
        "partners-ownership",
        "reservations",
        "a reservation is changed or cancelled only by its own passenger",
        "db/partners.py",
        "if booking.passenger_id != passenger_id:",
        "if not booking.passenger_id:",
        (
            RESERVATIONS + "test_update_and_cancel_reject_someone_elses_reservation[hotel]",
            RESERVATIONS + "test_update_and_cancel_reject_someone_elses_reservation[car]",
        ),
    ),
    Mutant(
        "reservation-ownership-bypassed",
        "reservations",
        "ownership of a reservation to change (the quote reads the row directly)",
        "db/reservations.py",
        "    booking = partners.owned_booking(session, kind, passenger_id, booking_id)\n"
        "    if all(",
        "    booking = session.get(kind.booking_model, booking_id)\n    if all(",
        (
            RESERVATIONS + "test_update_and_cancel_reject_someone_elses_reservation[hotel]",
            RESERVATIONS + "test_update_and_cancel_reject_someone_elses_reservation[car]",
            RESERVATIONS + "test_update_and_cancel_reject_someone_elses_reservation[excursion]",
        ),
    ),
    Mutant(
        "partners-past-start-accepted",
        "reservations",
        "dates in the future: a start before today is refused",
        "db/periods.py",
        "    if start < current:\n",
        "    if start < current - timedelta(days=1):\n",
        (
            RESERVATIONS + "test_book_rejects_invalid_dates[hotel-past]",
            RESERVATIONS + "test_book_rejects_invalid_dates[car-past]",
        ),
    ),
    Mutant(
        "period-last-day-not-after-first",
        "reservations",
        "dates valid: a stay checks out after it checks in, a rental ends on or after it starts",
        "db/periods.py",
        "if len(dates) > 1 and self.units(dates) < 1:",
        "if len(dates) > 1 and self.units(dates) < 0:",
        (
            RESERVATIONS + "test_book_rejects_invalid_dates[hotel-no-night]",
            RESERVATIONS + "test_book_rejects_invalid_dates[car-reversed]",
        ),
    ),
    Mutant(
        "hotel-checkout-day-counted",
        "reservations",
        "a stay's nights end the day before check-out (the check-out day is not a night)",
        "db/hotels.py",
        "last_day_included=False,",
        "last_day_included=True,",
        (
            RESERVATIONS + "test_book_rejects_invalid_dates[hotel-no-night]",
            RESERVATIONS + "test_book_charges_every_unit_and_records_the_payment[hotel]",
        ),
    ),
    Mutant(
        "period-max-units-boundary",
        "reservations",
        "a stay of exactly 30 nights, a rental of exactly 30 days can be booked",
        "db/periods.py",
        "if len(dates) > 1 and units > self.max_units:",
        "if len(dates) > 1 and units >= self.max_units:",
        (
            GAPS + "test_hotel_stay_of_exactly_the_maximum_nights_is_bookable",
            GAPS + "test_car_rental_of_exactly_the_maximum_days_is_bookable",
        ),
    ),
    Mutant(
        "hotel-max-nights-boundary",
        "reservations",
        "a stay of exactly 30 nights can be booked (the hotel's own limit)",
        "db/hotels.py",
        "max_units=MAX_HOTEL_NIGHTS,",
        "max_units=MAX_HOTEL_NIGHTS - 1,",
        (
            GAPS + "test_hotel_stay_of_exactly_the_maximum_nights_is_bookable",
            RESERVATIONS + "test_book_rejects_dates_breaking_a_rule[hotel-too-long]",
        ),
    ),
    Mutant(
        "car-max-days-boundary",
        "reservations",
        "a rental of exactly 30 days can be booked (the rental's own limit)",
        "db/car_rentals.py",
        "max_units=MAX_CAR_RENTAL_DAYS,",
        "max_units=MAX_CAR_RENTAL_DAYS - 1,",
        (
            GAPS + "test_car_rental_of_exactly_the_maximum_days_is_bookable",
            RESERVATIONS + "test_book_rejects_dates_breaking_a_rule[car-too-long]",
        ),
    ),
    Mutant(
        "hotel-free-hours-wrong-constant",
        "reservations",
        "hotels use their own free window (48 h), not the car's (24 h)",
        "db/hotels.py",
        "free_hours=HOTEL_FREE_CANCEL_HOURS,",
        "free_hours=24,",
        (
            GAPS + "test_reservation_cancellation_is_free_until_its_kinds_window_closes",
            RESERVATIONS + "test_cancel_late_keeps_the_late_fee[hotel]",
        ),
    ),
    Mutant(
        "car-free-hours-wrong-constant",
        "reservations",
        "cars use their own free window (24 h), not the hotel's (48 h)",
        "db/car_rentals.py",
        "free_hours=CAR_FREE_CANCEL_HOURS,",
        "free_hours=48,",
        (
            GAPS + "test_reservation_cancellation_is_free_until_its_kinds_window_closes",
            RESERVATIONS + "test_cancel_in_the_free_window_refunds_everything[car]",
        ),
    ),
    Mutant(
        "excursion-free-hours-wrong-constant",
        "reservations",
        "excursions use their own free window (72 h), not the hotel's (48 h)",
        "db/excursions.py",
        "free_hours=EXCURSION_FREE_CANCEL_HOURS,",
        "free_hours=48,",
        (
            GAPS + "test_reservation_cancellation_is_free_until_its_kinds_window_closes",
            RESERVATIONS + "test_cancel_late_keeps_the_late_fee[excursion]",
        ),
    ),
    Mutant(
        "hotel-late-fee-whole-stay",
        "reservations",
        "a late hotel change or cancellation keeps the first night only",
        "db/hotels.py",
        "late_fee_parts=lambda dates: max((dates[1] - dates[0]).days, 1),",
        "late_fee_parts=lambda dates: 1,",
        (RESERVATIONS + "test_cancel_late_keeps_the_late_fee[hotel]",),
    ),
    Mutant(
        "car-late-fee-off-by-one",
        "reservations",
        "a late car change or cancellation keeps one day's rate",
        "db/car_rentals.py",
        "late_fee_parts=lambda dates: (dates[1] - dates[0]).days + 1,",
        "late_fee_parts=lambda dates: (dates[1] - dates[0]).days,",
        (RESERVATIONS + "test_cancel_late_keeps_the_late_fee[car]",),
    ),
    Mutant(
        "excursion-late-fee-half",
        "reservations",
        "a late excursion cancellation refunds nothing",
        "db/excursions.py",
        "late_fee_parts=lambda dates: 1,",
        "late_fee_parts=lambda dates: 2,",
        (RESERVATIONS + "test_cancel_late_keeps_the_late_fee[excursion]",),
    ),
    Mutant(
        "partners-late-change-fee-not-charged",
        "reservations",
        "a late change of a reservation pays the late fee",
        "db/partners.py",
        "    before = kind.dates_of(booking)\n"
        "    fee, note = late_fee(kind, booking, now)\n"
        "    return ReservationQuote(\n"
        '        action="update",',
        "    before = kind.dates_of(booking)\n"
        "    fee, note = 0, late_fee(kind, booking, now)[1]\n"
        "    return ReservationQuote(\n"
        '        action="update",',
        (
            RESERVATIONS + "test_update_late_pays_the_late_fee_on_top[hotel]",
            RESERVATIONS + "test_update_late_pays_the_late_fee_on_top[car]",
        ),
    ),
    Mutant(
        "partners-refund-paid-twice",
        "reservations",
        "a cancellation refunds once",
        "db/partners.py",
        '    booking.status = "cancelled"\n    _pay(session, kind, applied, booking.id, now)\n',
        '    booking.status = "cancelled"\n'
        "    _pay(session, kind, applied, booking.id, now)\n"
        "    _pay(session, kind, applied, booking.id, now)\n",
        (GAPS + "test_reservation_cancellation_records_one_refund_of_the_amount_returned",),
    ),
    Mutant(
        "period-max-days-ahead-boundary",
        "reservations",
        "a reservation can start exactly 365 days ahead, not a day more",
        "db/periods.py",
        "    if start > latest:\n",
        "    if start >= latest:\n",
        (EDGES + "test_reservations_open_exactly_max_days_ahead_and_not_a_day_more",),
    ),
    Mutant(
        "partners-started-boundary",
        "reservations",
        "a reservation can be changed or cancelled on its first day, not after",
        "db/reservation_deadlines.py",
        "    if start < today(now):\n",
        "    if start <= today(now):\n",
        (
            EDGES
            + "test_a_reservation_starting_today_can_be_changed_or_cancelled_but_not_once_started",
        ),
    ),
    Mutant(
        "period-one-unit-refused",
        "reservations",
        "a one-night stay and a one-day rental (returned the day it is picked up) are bookable",
        "db/periods.py",
        "if len(dates) > 1 and self.units(dates) < 1:",
        "if len(dates) > 1 and self.units(dates) < 2:",
        (EDGES + "test_a_one_night_stay_and_a_one_day_rental_are_the_shortest_bookable",),
    ),
    Mutant(
        "reservation-book-capacity",
        "availability",
        "a booking checks a unit (room, car, place) is free on its days",
        "db/reservations.py",
        "    _require_units(session, kind, item, period)\n",
        "",
        (
            RESERVATIONS + "test_book_refuses_a_day_with_no_unit_left_and_writes_nothing[hotel]",
            RESERVATIONS + "test_book_refuses_a_day_with_no_unit_left_and_writes_nothing[car]",
            RESERVATIONS
            + "test_book_refuses_a_day_with_no_unit_left_and_writes_nothing[excursion]",
        ),
    ),
    Mutant(
        "reservation-update-capacity",
        "availability",
        "a change checks a unit is free on the new days (not the old ones)",
        "db/reservations.py",
        "_require_units(session, kind, item, period, exclude_booking_id=booking.id)",
        "_require_units(session, kind, item, current, exclude_booking_id=booking.id)",
        (
            HOTELS + "test_update_hotel_refuses_full_nights",
            EDGES + "test_update_car_rental_refuses_sold_out_days_and_changes_nothing",
            EDGES + "test_update_excursion_refuses_a_full_day_and_changes_nothing",
        ),
    ),
    Mutant(
        "reservation-book-capacity-first-day-only",
        "availability",
        "a booking checks every day of its period, not only the first",
        "db/reservations.py",
        "    _require_units(session, kind, item, period)\n",
        "    _require_units(session, kind, item, period[:1] * len(period))\n",
        (
            GAPS + "test_car_rental_booking_refuses_a_sold_out_later_day",
            RESERVATIONS + "test_book_refuses_a_day_with_no_unit_left_and_writes_nothing[hotel]",
        ),
    ),
    Mutant(
        "reservation-return-day-not-held",
        "availability",
        "a rented car is still taken on its return day",
        "db/reservations.py",
        "reaches_first = last_day >= first if kind.period.last_day_included else last_day > first",
        "reaches_first = last_day > first",
        (EDGES + "test_a_car_is_still_taken_on_its_return_day",),
    ),
    Mutant(
        "period-check-out-night-held",
        "availability",
        "a room is free again on its guest's check-out day",
        "db/periods.py",
        "return dates[0], dates[-1] + (ONE_DAY if self.last_day_included else timedelta(0))",
        "return dates[0], dates[-1] + ONE_DAY",
        (EDGES + "test_a_room_is_free_again_on_its_check_out_day",),
    ),
    Mutant(
        "reservation-cancelled-still-holds",
        "availability",
        "a cancelled reservation frees its unit (only confirmed ones count)",
        "db/reservations.py",
        '        _column(booking, "status") == "confirmed",\n',
        "",
        (HOTELS + "test_cancel_hotel_frees_the_room",),
    ),
    Mutant(
        "reservation-update-counts-itself",
        "availability",
        "a change does not count the reservation's own unit against it",
        "db/reservations.py",
        "_require_units(session, kind, item, period, exclude_booking_id=booking.id)",
        "_require_units(session, kind, item, period, exclude_booking_id=None)",
        (HOTELS + "test_update_hotel_does_not_count_the_reservation_itself",),
    ),
    # --- writes: one transaction, exactly once ---------------------------------------------
    Mutant(
        "writes-not-atomic",
        "writes",
        "each write in one transaction: a write failing halfway leaves nothing behind",
        "db/engine.py",
        "        with self._sessions.begin() as session:\n            yield session\n",
        "        with self._sessions() as session:\n"
        "            try:\n"
        "                yield session\n"
        "            finally:\n"
        "                session.commit()\n",
        (GAPS + "test_write_transaction_leaves_nothing_behind_when_the_write_fails_halfway",),
    ),
    Mutant(
        "writes-run-twice",
        "writes",
        "a write repeated for the same tool call takes effect once (the tool drops its id)",
        "tools/common.py",
        "        tool_call_id=tool_call_id,\n",
        "        tool_call_id=None,\n",
        (
            U + "test_tools_reservations.py::test_book_repeated_call_books_once[hotel]",
            U + "test_tools_flights.py::test_cancel_ticket_repeated_call_refunds_once",
        ),
    ),
    Mutant(
        "writes-digest-first-argument-only",
        "writes",
        "a repeated call id with another date (the second argument) is refused, not answered",
        "tools/reservations.py",
        "args={key: arguments.get(key) for key in shown},",
        "args={key: arguments.get(key) for key in shown[:1]},",
        (EXACTLY_ONCE + "test_the_same_id_moving_an_excursion_to_another_date_is_refused",),
    ),
    # --- the approval path -------------------------------------------------------------------
    Mutant(
        "approval-ignore-approves",
        "approval",
        "only an explicit accept runs a call (an ignore declines)",
        "assistants/inbox.py",
        'if kind == "accept":',
        'if kind in ("accept", "ignore"):',
        (GRAPH + "test_graph_malformed_or_negative_answers_fail_closed",),
    ),
    Mutant(
        "approval-refused-answer-runs",
        "approval",
        "an answer that says the action cannot be done never runs it",
        "assistants/inbox.py",
        'if answer.get("refused") is True or cannot:',
        "if cannot:",
        (GRAPH + "test_graph_malformed_or_negative_answers_fail_closed",),
    ),
    Mutant(
        "approval-declined-call-runs",
        "approval",
        "a declined call does not run",
        "assistants/approvals.py",
        "elif decision.approved:",
        "elif decision is not None:",
        (GRAPH + "test_graph_denial_keeps_db_and_tells_model_the_reason",),
    ),
    Mutant(
        "approval-missing-decision-fails-open",
        "approval",
        "a call without a decision fails closed",
        "assistants/inbox.py",
        'if answer.get("no_decision") is True:\n        return None\n',
        'if answer.get("no_decision") is True:\n        return NativeDecision(Decision(True))\n',
        (GRAPH + "test_graph_missing_decision_fails_closed",),
    ),
    Mutant(
        "approval-reason-dropped",
        "approval",
        "a declined call is answered with the customer's reason",
        "assistants/approvals.py",
        'reason_text = f"Their reason: {reason!r}. " if reason else "They gave no reason. "',
        'reason_text = "They gave no reason. "',
        (GRAPH + "test_graph_denial_keeps_db_and_tells_model_the_reason",),
    ),
    Mutant(
        "approval-first-decision-for-all",
        "approval",
        "each parallel sensitive call is decided on its own",
        "assistants/approvals.py",
        'given = decided.get(str(call["id"]))',
        'given = decided.get(str(calls[0]["id"]))',
        (PARALLEL_DECISIONS,),
    ),
    Mutant(
        "approval-first-call-only",
        "approval",
        "every parallel sensitive call is answered",
        "assistants/approvals.py",
        'calls = groups.select(pending, "sensitive_tools")',
        'calls = groups.select(pending, "sensitive_tools")[:1]',
        (PARALLEL_DECISIONS,),
    ),
    Mutant(
        "cli-enter-approves",
        "approval",
        "Enter at 'Approve this action? [y/N]' declines",
        "terminal/approvals.py",
        'APPROVING = frozenset({"y", "yes"})',
        'APPROVING = frozenset({"y", "yes", ""})',
        (CLI_ANSWERS + "test_cli_approval_declines_enter_and_anything_but_yes",),
    ),
    Mutant(
        "cli-any-y-word-approves",
        "approval",
        "only y or yes approves ('yep' declines)",
        "terminal/approvals.py",
        "if answer.lower() in APPROVING:",
        'if answer.lower().startswith("y"):',
        (CLI_ANSWERS + "test_cli_approval_declines_enter_and_anything_but_yes",),
    ),
    Mutant(
        "cli-eof-approves",
        "approval",
        "EOF (Ctrl-D, no terminal) at the approval prompt declines",
        "terminal/approvals.py",
        "return Answer(False, words.NO_ANSWER_REASON)",
        "return Answer(True, words.NO_ANSWER_REASON)",
        (U + "test_cli.py::test_cli_eof_at_approval_denies",),
    ),
    Mutant(
        "cli-message-limit-off-by-one",
        "terminal",
        "the terminal sends a message of exactly MAX_MESSAGE_CHARS and refuses one more",
        "terminal/chat.py",
        "if len(text) > MAX_MESSAGE_CHARS:",
        "if len(text) >= MAX_MESSAGE_CHARS:",
        (U + "test_cli.py::test_cli_message_of_exactly_the_limit_is_sent_and_one_more_is_not",),
    ),
    # --- the dialog stack and the router ---------------------------------------------------------
    Mutant(
        "context-window-boundary",
        "model limits",
        "a context window with room for exactly the minimum prompt beside the reply is accepted",
        "assistants/models.py",
        "if self.context_tokens - largest < MIN_PROMPT_TOKENS:",
        "if self.context_tokens - largest <= MIN_PROMPT_TOKENS:",
        (
            U
            + "test_models.py::"
            + "test_a_context_window_with_room_for_exactly_the_minimum_prompt_is_accepted",
        ),
    ),
    Mutant(
        "context-window-default-reply-only",
        "model limits",
        "the context window must fit the largest reply limit of any assistant, not the default",
        "assistants/models.py",
        "largest = max(self.max_tokens_for(name) for name in assistant_names(specialists))",
        "largest = self.max_tokens",
        (
            U
            + "test_models.py::test_the_context_window_must_fit_the_largest_reply_of_any_assistant",
        ),
    ),
    Mutant(
        "stack-push-replaces",
        "dialog stack",
        "a specialist name pushes onto the stack",
        "assistants/state.py",
        "return [*left, right]",
        "return [right]",
        (ROUTING + "test_update_dialog_stack_pushes_pops_and_keeps",),
    ),
    Mutant(
        "stack-pop-keeps-top",
        "dialog stack",
        '"pop" drops the top of the stack',
        "assistants/state.py",
        "return left[:-1]",
        "return left",
        (ROUTING + "test_update_dialog_stack_pushes_pops_and_keeps",),
    ),
    Mutant(
        "stack-keep-clears",
        "dialog stack",
        "None keeps the stack as it is",
        "assistants/state.py",
        "    if right is None:\n        return left\n",
        "    if right is None:\n        return []\n",
        (ROUTING + "test_update_dialog_stack_pushes_pops_and_keeps",),
    ),
    Mutant(
        "enter-does-not-push",
        "dialog stack",
        "enter_X pushes X",
        "assistants/nodes.py",
        'return {"messages": answers, "dialog_state": specialist.name}',
        'return {"messages": answers, "dialog_state": None}',
        (DELEGATES,),
    ),
    Mutant(
        "enter-answers-first-routing-call-only",
        "dialog stack",
        "enter_X answers every routing call of the batch",
        "assistants/nodes.py",
        "            for c in routing\n            if c is not chosen\n",
        "            for c in routing[:0]\n",
        (GRAPH + "test_graph_routing_call_beside_search",),
    ),
    Mutant(
        "leave-does-not-pop",
        "dialog stack",
        "leave_skill pops the stack",
        "assistants/nodes.py",
        'return {"messages": answers, "dialog_state": POP}',
        'return {"messages": answers, "dialog_state": None}',
        (DELEGATES,),
    ),
    Mutant(
        "leave-answers-first-call-only",
        "dialog stack",
        "leave_skill answers every CompleteOrEscalate of the batch (and pops once)",
        "assistants/nodes.py",
        '        for c in pending\n        if c["name"] == COMPLETE_OR_ESCALATE\n',
        '        for c in pending[:1]\n        if c["name"] == COMPLETE_OR_ESCALATE\n',
        (
            GAPS + "test_leave_skill_answers_every_complete_or_escalate_and_pops_once",
            GAPS + "test_graph_parallel_complete_or_escalate_calls_are_all_answered",
        ),
    ),
    Mutant(
        "router-sensitive-before-safe",
        "dialog stack",
        "the router runs safe calls before asking about sensitive ones",
        "assistants/routing.py",
        "    if any(groups.is_safe(c) for c in pending):\n"
        '        return "safe_tools"\n'
        "    if any(groups.is_sensitive(c) for c in pending):\n"
        '        return "sensitive_tools"\n',
        "    if any(groups.is_sensitive(c) for c in pending):\n"
        '        return "sensitive_tools"\n'
        "    if any(groups.is_safe(c) for c in pending):\n"
        '        return "safe_tools"\n',
        (ROUTER_ORDER, GRAPH + "test_graph_mixed_batch_runs_safe_calls_before_stopping"),
    ),
    Mutant(
        "router-leave-before-sensitive",
        "dialog stack",
        "the router hands over (routing calls) only after the sensitive calls",
        "assistants/routing.py",
        "    if any(groups.is_sensitive(c) for c in pending):\n"
        '        return "sensitive_tools"\n'
        '    if any(c["name"] == COMPLETE_OR_ESCALATE for c in pending):\n'
        '        return "leave"\n',
        '    if any(c["name"] == COMPLETE_OR_ESCALATE for c in pending):\n'
        '        return "leave"\n'
        "    if any(groups.is_sensitive(c) for c in pending):\n"
        '        return "sensitive_tools"\n',
        (ROUTER_ORDER,),
    ),
    # --- the HTTP service: who may ask, and its turns ------------------------------------------
    Mutant(
        "service-issuer-unchecked",
        "service",
        "a token signed with the right secret but naming another issuer gets 401",
        "server/auth.py",
        "                issuer=ISSUER,\n",
        "",
        (U + "test_server_access.py::test_server_every_endpoint_needs_a_valid_token",),
    ),
    Mutant(
        "service-supervisor-acts-for-a-passenger",
        "service",
        "a supervisor's token is refused (403) on every passenger's endpoint: it cannot write",
        "server/access.py",
        "    if claims.role != CUSTOMER:\n",
        "    if claims.role not in (CUSTOMER, SUPERVISOR):\n",
        (
            U + "test_server_access.py::"
            "test_server_roles_keep_customers_and_supervisors_to_their_own_endpoints",
        ),
    ),
    Mutant(
        "service-customer-reads-the-supervisor-view",
        "service",
        "a passenger's token is refused (403) on every supervisor's endpoint",
        "server/access.py",
        "    if claims.role != SUPERVISOR:\n",
        "    if claims.role not in (CUSTOMER, SUPERVISOR):\n",
        (
            U + "test_server_access.py::"
            "test_server_roles_keep_customers_and_supervisors_to_their_own_endpoints",
        ),
    ),
    Mutant(
        "service-agent-decides-checks",
        "service",
        "an agent's token is refused (403) where only a supervisor may: staff checks, the "
        "audit log, other conversations",
        "server/access.py",
        "    if claims.role != SUPERVISOR:\n",
        "    if claims.role not in STAFF_ROLES:\n",
        (
            U + "test_server_access.py::"
            "test_server_an_agent_works_the_desk_and_nothing_only_a_supervisor_may",
            U + "test_server_staff_roles.py::"
            "test_an_agents_token_works_the_desk_but_never_decides_a_check",
        ),
    ),
    Mutant(
        "desk-holder-compared-by-name",
        "service",
        "who holds a conversation is compared by login: a namesake cannot write, the holder "
        "under another name can",
        "conversations/protocol.py",
        "        if handoff.agent_login != staff.login:\n",
        "        if handoff.agent != staff.name:\n",
        (
            U + "test_server_staff_roles.py::"
            "test_who_holds_a_conversation_is_compared_by_login_not_by_name",
        ),
    ),
    Mutant(
        "desk-four-eyes-by-name",
        "service",
        "four eyes go by the login: the proposer under another name cannot decide the check",
        "conversations/protocol.py",
        "        if proposer and proposer == decider.login:\n",
        "        if proposer and proposer == decider.name:\n",
        (
            U + "test_server_staff_roles.py::"
            "test_a_supervisor_never_decides_the_check_of_an_action_they_proposed",
        ),
    ),
    Mutant(
        "desk-customer-sees-the-login",
        "service",
        "customers see the name a member of staff goes by, never their login",
        "server/handoff.py",
        "    return Staff(claims.subject, claims.shown_name)\n",
        "    return Staff(claims.subject, claims.subject)\n",
        (U + "test_server_staff_roles.py::test_customers_see_the_name_of_staff_never_their_login",),
    ),
    Mutant(
        "service-unknown-role-accepted",
        "service",
        "a token with a role the service does not know is refused",
        "server/auth.py",
        "        if role not in ROLES:\n            raise AuthError",
        "        if role is None:\n            raise AuthError",
        (
            U + "test_server_auth.py::"
            "test_server_token_roles_customer_by_default_supervisor_acts_for_no_passenger",
        ),
    ),
    Mutant(
        "service-audit-window-reversed",
        "service",
        "a supervisor's look is recorded once per thing looked at within five minutes, and "
        "again after them",
        "conversations/audit.py",
        "AUDIT.c.at > at - within,",
        "AUDIT.c.at < at - within,",
        (
            "tests/integration/test_supervisor.py::test_supervisor_looks_are_audited_durably[sqlite]",
        ),
    ),
    Mutant(
        "service-secret-group-readable",
        "service",
        "a signing secret file readable by its group is refused",
        "server/auth.py",
        "mode & (stat.S_IRWXG | stat.S_IRWXO)",
        "mode & stat.S_IRWXO",
        (U + "test_server_auth.py::test_server_secret_open_to_anyone_but_its_owner_is_refused",),
    ),
    Mutant(
        "service-refused-decisions-keep-the-claim",
        "service",
        "decisions refused after the claim (409) release the conversation",
        "server/customer_api.py",
        "        service.release(thread)\n        raise\n",
        "        raise\n",
        (
            REFUSED_DECISIONS_FREE,
            U
            + "test_server_api.py::"
            + "test_server_decisions_missing_an_action_leave_the_conversation_free",
        ),
    ),
    Mutant(
        "service-issued-at-unchecked",
        "service",
        "a token without its issue time gets 401 (every claim is required, one at a time)",
        "server/auth.py",
        'options={"require": ["sub", "exp", "iat", "iss", "aud"]},',
        'options={"require": ["sub", "exp", "iss", "aud"]},',
        (U + "test_server_access.py::test_server_every_endpoint_needs_a_valid_token",),
    ),
    Mutant(
        "service-blank-subject-accepted",
        "service",
        "a token naming a blank passenger gets 401",
        "server/auth.py",
        "if not isinstance(subject, str) or not subject.strip():",
        "if not isinstance(subject, str):",
        (U + "test_server_access.py::test_server_every_endpoint_needs_a_valid_token",),
    ),
    Mutant(
        "service-token-lifetime-boundary",
        "service",
        "a token may live exactly 30 days, not a second more",
        "server/auth.py",
        "if lifetime > MAX_LIFETIME:",
        "if lifetime >= MAX_LIFETIME:",
        (
            U
            + "test_server_auth.py::"
            + "test_server_token_lives_thirty_days_at_most_and_not_a_second_more",
        ),
    ),
    Mutant(
        "cli-token-hours-boundary",
        "service",
        "token --hours 720 (30 days) is accepted, 720.5 is not",
        "commands/serve.py",
        "if not 1 / 60 <= args.hours <= longest:",
        "if not 1 / 60 <= args.hours < longest:",
        (U + "test_server_auth.py::test_cli_token_issues_the_longest_and_the_shortest_lifetimes",),
    ),
    Mutant(
        "service-secret-length-boundary",
        "service",
        "a secret of exactly 32 characters is accepted, 31 are not",
        "server/auth.py",
        "if len(given.strip()) < MIN_SECRET_CHARS:",
        "if len(given.strip()) <= MIN_SECRET_CHARS:",
        (
            U
            + "test_server_auth.py::"
            + "test_server_secret_of_exactly_the_minimum_length_is_accepted_and_one_less_is_not",
        ),
    ),
    Mutant(
        "service-message-limit-boundary",
        "service",
        "the service answers a message of exactly 4000 characters and refuses 4001",
        "server/schemas.py",
        "if len(value) > MAX_MESSAGE_CHARS:",
        "if len(value) >= MAX_MESSAGE_CHARS:",
        (
            U
            + "test_server_api.py::"
            + "test_server_message_of_exactly_the_limit_is_answered_and_one_more_is_refused",
        ),
    ),
    Mutant(
        "service-declared-body-boundary",
        "service",
        "a body that announces exactly 64 kB is read; one byte more is 413",
        "server/middleware.py",
        "int(declared) > self.max_bytes:",
        "int(declared) >= self.max_bytes:",
        (U + "test_server_hardening.py::" + BODY_LIMIT,),
    ),
    Mutant(
        "service-chunked-body-boundary",
        "service",
        "a chunked body of exactly 64 kB is read; one byte more is 413",
        "server/middleware.py",
        "if received > self.max_bytes:",
        "if received >= self.max_bytes:",
        (U + "test_server_hardening.py::" + BODY_LIMIT,),
    ),
    Mutant(
        "service-refused-claim-kept",
        "service",
        "a turn refused because another process holds the conversation leaves no claim behind",
        "server/runs.py",
        "            self._forget(thread_id)\n            kind = UnavailableError",
        "            kind = UnavailableError",
        (U + "test_server_api.py::test_server_refuses_a_turn_running_in_another_process",),
    ),
    Mutant(
        "service-turn-lock-kept",
        "service",
        "a finished turn lets go of the conversation's lock in the store, not only in the process",
        "server/runs.py",
        "                running.turn.release()\n",
        "                pass\n",
        (U + "test_server_api.py::test_server_refuses_a_turn_running_in_another_process",),
    ),
    Mutant(
        "service-failed-turn-keeps-claim",
        "service",
        "a turn that fails with a bug still frees the conversation",
        "server/runs.py",
        "            finally:\n"
        "                # Freeing a lock held in PostgreSQL is a round trip: off the loop.\n"
        "                await asyncio.to_thread(self.release, thread_id)\n",
        "            else:\n"
        "                await asyncio.to_thread(self.release, thread_id)\n"
        "            finally:\n",
        (U + "test_server_runner.py::test_server_runner_reports_a_bug_as_an_error_event",),
    ),
    # --- the scenario judge -----------------------------------------------------------------------
    Mutant(
        "judge-unanswered-call-passes",
        "judge",
        "the judge fails a run that leaves a tool call unanswered",
        "evaluation/judge.py",
        "if len(found) != 1:",
        "if len(found) > 1:",
        (JUDGE + "test_judge_fails_a_tool_call_left_unanswered",),
    ),
    Mutant(
        "judge-sensitive-without-decision-passes",
        "judge",
        "the judge fails a sensitive call that ran with no recorded decision",
        "evaluation/judge.py",
        "if facts.ran and (decision is None or not decision.approved):",
        "if facts.ran and decision is not None and not decision.approved:",
        (JUDGE + "test_judge_fails_a_sensitive_call_that_ran_with_no_recorded_decision",),
    ),
    Mutant(
        "judge-tool-facts-from-anyone",
        "judge",
        "a tool fact counts only when a tool returned it, not when the assistant said it",
        "evaluation/judge.py",
        'shown = " ".join(str(m.content) for m in messages if isinstance(m, ToolMessage)).lower()',
        'shown = " ".join(\n'
        "        str(m.content) for m in messages if isinstance(m, (ToolMessage, AIMessage))\n"
        "    ).lower()",
        (JUDGE + "test_judge_fails_a_tool_fact_that_only_the_assistant_said",),
    ),
    Mutant(
        "judge-expected-errors-ignored",
        "judge",
        "a tool error fails the run unless the scenario expects it",
        "evaluation/judge.py",
        'if failing and call["name"] not in scenario.expected_errors:',
        "if failing and not scenario.expected_errors:",
        (JUDGE + "test_judge_fails_an_unexpected_tool_error_and_accepts_an_expected_one",),
    ),
    Mutant(
        "judge-unexpected-handoff-passes",
        "judge",
        "a scenario without [handoff] fails when the conversation was handed to a person",
        "evaluation/judge.py",
        "        if handoff is None:\n            return []",
        "        if True:\n            return []",
        (JUDGE + "test_judge_fails_a_handoff_the_scenario_does_not_expect",),
    ),
    Mutant(
        "judge-handoff-taken-counts-as-waiting",
        "judge",
        "an expected hand-off must end waiting in the desk's queue, not held or ended",
        "evaluation/judge.py",
        'if handoff.status != "waiting":',
        'if handoff.status == "closed":',
        (JUDGE + "test_judge_fails_a_handoff_that_no_longer_waits_in_the_queue",),
    ),
    Mutant(
        "judge-handoff-reason-every-word",
        "judge",
        "a hand-off's reason needs one of reason_mentions, in any case, not all of them",
        "evaluation/judge.py",
        "elif expected.reason_mentions and not any(",
        "elif expected.reason_mentions and not all(",
        (JUDGE + "test_judge_fails_a_handoff_without_the_reason_the_scenario_expects",),
    ),
    Mutant(
        "judge-waiting-check-passes",
        "judge",
        "a staff check left waiting (the scenario scripts no answer for it) fails the run",
        "evaluation/judge.py",
        'if check.status == "waiting":',
        'if check.status == "withdrawn":',
        (
            JUDGE + "test_judge_fails_a_staff_check_the_scenario_does_not_expect",
            SCENARIOS + "test_judge_fails_a_staff_check_the_scenario_does_not_expect",
        ),
    ),
    Mutant(
        "eval-unused-staff-answers-dropped",
        "judge",
        "a scripted staff answer no check used fails the run (an expected check never came)",
        "evaluation/runs.py",
        "transcript.unused_staff_checks = [str(c) for c in staff]",
        "transcript.unused_staff_checks = []",
        (SCENARIOS + "test_judge_fails_a_staff_check_the_scenario_expects_but_never_came",),
    ),
    Mutant(
        "eval-staff-refusal-ignored",
        "judge",
        "a trial's member of staff answers each check as the scenario scripts it, no as no",
        "evaluation/runs.py",
        "STAFF, check.id, approved=answer.approved, reason=answer.reason",
        "STAFF, check.id, approved=True, reason=answer.reason",
        (
            SCENARIOS + "test_scenario_passes_offline[second_approval_refund_staff_refuses]",
            SCENARIOS + "test_judge_fails_when_staff_answer_the_other_way",
        ),
    ),
    Mutant(
        "judge-large-action-unchecked-passes",
        "judge",
        "a call that moved more than second_approval_above without a staff check fails",
        "evaluation/judge.py",
        "if facts.ran and above is not None and moved > above and not facts.checked_by:",
        "if facts.ran and above is not None and moved > above and not facts.approved:",
        (JUDGE + "test_judge_fails_a_staff_check_the_scenario_expects_but_never_came",),
    ),
    Mutant(
        "judge-staff-reason-untold-passes",
        "judge",
        "when staff refused an action, the assistant must have been told their reason",
        "evaluation/judge.py",
        "elif staff.reason.lower() not in str(found[0].content).lower():",
        "elif not staff.reason:",
        (
            JUDGE
            + "test_judge_fails_an_action_staff_refused_that_ran_or_whose_reason_was_never_told",
        ),
    ),
    Mutant(
        "second-approval-threshold-in-euros",
        "approval",
        "an action that moves more than the amount (in cents) waits for a member of staff",
        "conversations/turns.py",
        "return cents > 0 and moved + cents > above",
        "return cents > 0 and moved + cents > above * 100",
        (
            SECOND_APPROVAL + "test_second_approval_starts_one_cent_above_the_amount",
            SCENARIOS + "test_scenario_passes_offline[second_approval_refund_staff_refuses]",
        ),
    ),
    Mutant(
        "user-info-without-cars",
        "user info",
        "user_info (first node of every turn) lists car rental reservations",
        "db/domains.py",
        "= (HOTEL, CAR_RENTAL, EXCURSION)",
        "= (HOTEL, EXCURSION)",
        (EDGES + "test_passenger_summary_includes_hotel_car_and_excursion_reservations",),
    ),
)


@dataclass(frozen=True)
class Outcome:
    """What running one mutant's tests gave."""

    mutant: Mutant
    status: str  # "killed", "SURVIVED", "timeout" or "error"
    seconds: float
    detail: str = ""
    output: str = ""


# --- the copy -----------------------------------------------------------------------------


def project_files(root: Path) -> list[str]:
    """Return the files git knows about: tracked, plus untracked ones that are not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    names = sorted({name for name in listed.split("\0") if name})
    # A tracked file deleted in the working tree is listed but absent.
    return [name for name in names if (root / name).is_file()]


def make_copy(root: Path, files: Iterable[str], dest: Path) -> Path:
    """Copy ``files`` from ``root`` into ``dest`` (created), keeping their paths."""
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target, follow_symlinks=False)
    return dest


def mutant_problem(mutant: Mutant, tree: Path) -> str | None:
    """Return why ``mutant`` cannot be applied in ``tree`` (stale or broken), or ``None``."""
    path = tree / mutant.file
    if not path.is_file():
        return f"stale: {mutant.file} does not exist"
    text = path.read_text(encoding="utf-8")
    count = text.count(mutant.find)
    if count != 1:
        return f"stale: find occurs {count} times in {mutant.file} (must be exactly once)"
    if mutant.find == mutant.replace:
        return "broken: replace equals find"
    if mutant.file.endswith(".py"):
        try:
            compile(text.replace(mutant.find, mutant.replace), mutant.file, "exec")
        except SyntaxError as error:
            return f"broken: the mutated {mutant.file} does not compile ({error.msg})"
    for node in mutant.tests:
        test_file, _, name = node.partition("::")
        test_path = tree / test_file
        if not test_path.is_file():
            return f"stale: test file {test_file} does not exist"
        function = name.split("[")[0]
        pattern = rf"^\s*(?:async\s+)?def {re.escape(function)}\("
        if function and not re.search(pattern, test_path.read_text(encoding="utf-8"), re.M):
            return f"stale: no test {function} in {test_file}"
    return None


# --- running tests ------------------------------------------------------------------------


def test_env(tree: Path) -> dict[str, str]:
    """Return the environment that makes ``tree``'s modules win over the editable install."""
    env = dict(os.environ)
    inherited = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(tree) + (os.pathsep + inherited if inherited else "")
    # A mutant may keep the file's size and land within the same second as a cached
    # compile; without bytecode files a stale .pyc can never stand in for the mutant.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_pytest(
    tree: Path, tests: Sequence[str], basetemp: Path, timeout: float, *, stop_first: bool
) -> tuple[int | None, str, float]:
    """Run ``tests`` in ``tree``; return (exit code or ``None`` on timeout, output, seconds)."""
    # One process per mutant (``--jobs`` runs several) and every case of the tests named,
    # the long tail of a matrix included (see docs/testing.md).
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
    command.append("--exhaustive")
    if stop_first:
        command.append("-x")
    command += [f"--basetemp={basetemp}", *tests]
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=tree,
        env=test_env(tree),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    with _RUNNING_LOCK:
        _RUNNING.add(process)
    try:
        output, _ = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        _kill(process)
        output, _ = process.communicate()
        code = None
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(process)
    return code, output.decode(errors="replace"), time.monotonic() - started


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill a pytest process and everything it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def stop_everything() -> None:
    """Stop starting mutants and kill the pytest processes that are running."""
    _STOPPING.set()
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for process in running:
        _kill(process)


def probe_imports(tree: Path) -> list[str]:
    """Return the modules that would not be imported from ``tree`` (empty when all are)."""
    script = (
        "import importlib, sys\n"
        f"for name in {PROBED_MODULES!r}:\n"
        "    print(name, importlib.import_module(name).__file__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tree,
        env=test_env(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return [f"the import probe failed: {result.stderr.strip()[-500:]}"]
    wrong = []
    for line in result.stdout.splitlines():
        name, _, location = line.partition(" ")
        if not Path(location).resolve().is_relative_to(tree.resolve()):
            wrong.append(f"{name} imports from {location}, not from the copy {tree}")
    return wrong


def first_failure(output: str) -> str:
    """Return the node id of the first failing test in pytest's summary, if any."""
    match = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.M)
    return match.group(1) if match else ""


def run_mutant(mutant: Mutant, tree: Path, basetemp: Path, timeout: float) -> Outcome:
    """Apply ``mutant`` in ``tree``, run its tests, restore the file; return the outcome."""
    path = tree / mutant.file
    original = path.read_bytes()
    text = original.decode("utf-8")
    try:
        path.write_text(text.replace(mutant.find, mutant.replace, 1), encoding="utf-8")
        code, output, seconds = run_pytest(tree, mutant.tests, basetemp, timeout, stop_first=True)
    finally:
        path.write_bytes(original)
    if code is None:
        return Outcome(mutant, "timeout", seconds, f"after {timeout:.0f}s", output)
    if code == 0:
        return Outcome(mutant, "SURVIVED", seconds, "", output)
    if code == 1:
        return Outcome(mutant, "killed", seconds, first_failure(output), output)
    if code == 5:
        return Outcome(mutant, "error", seconds, "pytest collected no test", output)
    # 2, 3, 4: the mutant broke collection or pytest itself; the suite noticed.
    return Outcome(mutant, "killed", seconds, f"pytest exit {code}", output)


# --- the command --------------------------------------------------------------------------


def select(only: Sequence[str] | None) -> list[Mutant]:
    """Return the mutants named by ``--only`` (all without it); unknown names are an error."""
    ids = [m.id for m in MUTANTS]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise SystemExit(f"mutant ids used twice: {', '.join(repeated)}")
    if not only:
        return list(MUTANTS)
    unknown = [name for name in only if name not in ids]
    if unknown:
        raise SystemExit(f"unknown mutant ids: {', '.join(unknown)} (see --list)")
    return [m for m in MUTANTS if m.id in only]


def print_list(mutants: Sequence[Mutant], tree: Path) -> int:
    stale = 0
    for mutant in mutants:
        problem = mutant_problem(mutant, tree)
        stale += problem is not None
        flag = f"  <-- {problem}" if problem else ""
        print(f"{mutant.id:<40} {mutant.area:<13} {mutant.file}{flag}")
        print(f"    {mutant.rule}")
        for node in mutant.tests:
            print(f"    - {node}")
    areas: dict[str, int] = {}
    for mutant in mutants:
        areas[mutant.area] = areas.get(mutant.area, 0) + 1
    summary = ", ".join(f"{area} {count}" for area, count in areas.items())
    print(f"\n{len(mutants)} mutants ({summary}); {stale} stale")
    return 1 if stale else 0


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def run_all(mutants: Sequence[Mutant], jobs: int, timeout: float, verbose: bool) -> int:
    """Copy the tree, check the mutants, run the baseline, then every mutant; print a score."""
    started = time.monotonic()
    files = project_files(ROOT)
    with tempfile.TemporaryDirectory(prefix="mutants-", ignore_cleanup_errors=True) as scratch:
        work = Path(scratch)
        copies = [make_copy(ROOT, files, work / f"copy-{n}") for n in range(jobs)]
        print(f"{len(mutants)} mutants, {jobs} at a time, copies of {len(files)} files")

        problems = {m.id: mutant_problem(m, copies[0]) for m in mutants}
        for mutant in mutants:
            if problems[mutant.id]:
                print(f"{'STALE':<9} {'':>7}  {mutant.id}: {problems[mutant.id]}")
        runnable = [m for m in mutants if not problems[m.id]]

        for copy in copies:
            wrong = probe_imports(copy)
            if wrong:
                print("the copy's modules do not win over the installed ones:", *wrong, sep="\n  ")
                return 2
        baseline = unique(node for m in runnable for node in m.tests)
        print(f"baseline: {len(baseline)} tests on the unmutated copy ...", flush=True)
        code, output, seconds = run_pytest(
            copies[0], baseline, work / "tmp-baseline", timeout * 4, stop_first=False
        )
        if code != 0:
            print(output[-4000:])
            print(f"baseline failed (pytest exit {code}) after {seconds:.0f}s: fix it first")
            return 2
        print(f"baseline passed in {seconds:.0f}s; modules import from the copy")

        free: queue.Queue[int] = queue.Queue()
        for index in range(len(copies)):
            free.put(index)
        lock = threading.Lock()

        def work_on(mutant: Mutant) -> Outcome | None:
            if _STOPPING.is_set():
                return None
            index = free.get()
            try:
                outcome = run_mutant(mutant, copies[index], work / f"tmp-{index}", timeout)
            finally:
                free.put(index)
            if _STOPPING.is_set():
                return None
            with lock:
                note = f"  ({outcome.detail})" if outcome.detail else ""
                print(f"{outcome.status:<9} {outcome.seconds:6.1f}s  {mutant.id}{note}", flush=True)
                if verbose and outcome.status != "killed":
                    print(outcome.output[-3000:])
            return outcome

        pool = ThreadPoolExecutor(max_workers=len(copies))
        try:
            futures = [pool.submit(work_on, mutant) for mutant in runnable]
            outcomes = [outcome for f in futures if (outcome := f.result()) is not None]
        except KeyboardInterrupt:
            stop_everything()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    killed = sum(o.status == "killed" for o in outcomes)
    total = len(mutants)
    score = killed / total if total else 1.0
    print()
    for status in ("SURVIVED", "timeout", "error"):
        for outcome in (o for o in outcomes if o.status == status):
            print(f"{status}: {outcome.mutant.id} ({outcome.mutant.file}): {outcome.mutant.rule}")
    stale = sum(1 for p in problems.values() if p)
    print(
        f"score: {killed}/{total} killed ({score:.1%}); "
        f"{sum(o.status == 'SURVIVED' for o in outcomes)} survived, "
        f"{sum(o.status == 'timeout' for o in outcomes)} timed out, {stale} stale; "
        f"{time.monotonic() - started:.0f}s"
    )
    if stale:
        print("stale mutants: update their find strings or tests (see --list)")
    return 0 if score >= MIN_SCORE and not stale else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Apply hand-written mutants one at a time in a copy of the tree and run "
        "the tests that should catch each.",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these mutants")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds per mutant (default {DEFAULT_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show pytest's output for survivors"
    )
    args = parser.parse_args(argv)
    mutants = select(args.only)
    if args.list:
        return print_list(mutants, ROOT)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    try:
        return run_all(mutants, min(args.jobs, len(mutants)), args.timeout, args.verbose)
    except KeyboardInterrupt:
        stop_everything()
        print("\ninterrupted: the running tests were stopped; no score")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
