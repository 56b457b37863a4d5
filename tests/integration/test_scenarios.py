"""Every scenario of data/scenarios, offline, through the real graph and database.

The scenarios run over copies of the test database on the engine of the run (``--engine``):
SQLite files, or PostgreSQL databases copied from the session's template. The default run
takes one scenario of each category; the others are marked ``exhaustive`` and run in CI's
stage of their own (``pytest -m exhaustive``) and in its PostgreSQL stage (docs/testing.md).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from db.clock import fixed_clock
from db.copies import database_copy
from evaluation import (
    ExpectedHandoff,
    Scenario,
    StaffCheck,
    database_problems,
    load_scenarios,
    pass_hat_k,
)
from tests.support import exhaustive
from tests.support.databases import FIXED_NOW
from tests.support.scenarios import run_scripted as run

SCENARIOS = load_scenarios()
# The scenarios of the default run: one of each category (the judge's own tests below run
# a few more, changed); the others are exhaustive (tests/support/exhaustive.py).
REPRESENTATIVE = {
    "cancel_ticket_two_segments",
    "context_switch_hotel_flight_time",
    "correction_flight_date_before_proposal",
    "denial_excursion_move_fee",
    "desk_four_eyes_second_approval",
    "desk_talk_while_check_waits",
    "flight_change_happy",
    "handoff_after_two_declines",
    "multi_skill_basel_postponed",
    "parallel_hotel_extend_and_book_one_denied",
    "policy_check_in_and_seats",
    "resume_hotel_booking_specialist_active",
    "rule_someone_elses_ticket",
    "second_approval_refund_staff_refuses",
}


def test_scenarios_cover_the_categories() -> None:
    assert len(SCENARIOS) >= 3
    assert len({s.id for s in SCENARIOS}) == len(SCENARIOS)


def test_the_default_run_has_a_scenario_of_every_category() -> None:
    chosen = {s.category for s in SCENARIOS if s.id in REPRESENTATIVE}
    assert chosen == {s.category for s in SCENARIOS}


@pytest.mark.parametrize(
    "scenario",
    exhaustive.params(SCENARIOS, REPRESENTATIVE, ids=[s.id for s in SCENARIOS], key=lambda s: s.id),
)
def test_scenario_passes_offline(scenario: Scenario, template: Path | str) -> None:
    result = run(scenario, template)
    assert result.passed, "\n".join(result.failures)


def test_judge_fails_when_the_write_did_not_happen(template: Path | str) -> None:
    happy = next(s for s in SCENARIOS if s.id == "flight_change_happy")
    # Decline instead of approving: the gold state (ticket moved) is not reached.
    turns = (replace(happy.turns[0], decisions=("n: changed my mind",)), *happy.turns[1:])
    result = run(replace(happy, turns=turns), template)
    assert any(f.startswith("database: ticket_flights") for f in result.failures), result.failures


def test_judge_fails_on_a_write_that_should_not_happen(template: Path | str) -> None:
    denied = next(s for s in SCENARIOS if s.id == "flight_change_denied")
    turns = (replace(denied.turns[0], decisions=("y",)),)
    result = run(replace(denied, turns=turns), template)
    assert any(f.startswith("database:") for f in result.failures), result.failures


def test_judge_fails_on_unsaid_fact(template: Path | str) -> None:
    policy = next(s for s in SCENARIOS if s.id == "policy_24_hour_cancel")
    result = run(replace(policy, must_say=("EUR 999.99",)), template)
    assert result.failures == (
        "never said 'EUR 999.99'",
        "'EUR 999.99' was said, but no tool, customer message or booking gave it",
    )


def test_judge_fails_on_a_fact_only_the_script_said(template: Path | str) -> None:
    # Offline, the assistant's words are scripted: a figure it says must come from a tool.
    policy = next(s for s in SCENARIOS if s.id == "policy_24_hour_cancel")
    last = policy.turns[-1]
    replies = (*last.replies[:-1], {**last.replies[-1], "text": "That costs EUR 123.45."})
    turns = (*policy.turns[:-1], replace(last, replies=replies))
    result = run(replace(policy, turns=turns, must_say=("EUR 123.45",)), template)
    assert result.failures == (
        "'EUR 123.45' was said, but no tool, customer message or booking gave it",
    )


def test_judge_fails_on_an_unexpected_tool_error(
    template: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from db import reservations
    from db.errors import TravelError

    def unavailable(*args: object, **kwargs: object) -> None:
        raise TravelError("service unavailable")

    monkeypatch.setattr(reservations, "search", unavailable)
    happy = next(s for s in SCENARIOS if s.id == "hotel_booking_basel_happy")
    result = run(happy, template)
    assert "unexpected tool error from search_hotels: Error: service unavailable" in (
        result.failures
    )


def test_judge_accepts_an_error_the_scenario_expects(template: Path | str) -> None:
    rule = next(s for s in SCENARIOS if s.id == "rule_full_hotel_rheinblick")
    assert run(rule, template).passed
    failures = run(replace(rule, expected_errors=()), template).failures
    assert [f for f in failures if f.startswith("unexpected tool error from book_hotel")]


def test_judge_fails_on_an_unused_approval_answer(template: Path | str) -> None:
    happy = next(s for s in SCENARIOS if s.id == "flight_change_happy")
    first = happy.turns[0]
    turns = (replace(first, decisions=(*first.decisions, "y")), *happy.turns[1:])
    result = run(replace(happy, turns=turns), template)
    assert result.failures == ("1 scripted approval answers were never used: ['y']",)


def test_judge_fails_a_handoff_the_scenario_does_not_expect(template: Path | str) -> None:
    # The same run, judged as if no person were wanted: the desk's queue tells.
    asks = next(s for s in SCENARIOS if s.id == "handoff_asked_for_person")
    assert run(asks, template).passed
    result = run(replace(asks, handoff=None), template)
    assert result.failures == (
        "handed to a person (The customer asked to talk to a person.), which the scenario "
        "does not expect",
    )


def test_judge_fails_an_assistant_that_only_says_it_handed_off(template: Path | str) -> None:
    # The reply promises a person, but request_human_agent was never called: nobody is
    # coming, and saying so is not enough.
    complaint = next(s for s in SCENARIOS if s.id == "handoff_complaint_double_charge")
    (turn,) = complaint.turns
    replies = tuple(r for r in turn.replies if "request_human_agent" not in str(r))
    assert len(replies) == len(turn.replies) - 1
    result = run(replace(complaint, turns=(replace(turn, replies=replies),)), template)
    assert result.failures == (
        "never handed to a person: the conversation is not in the desk's queue",
    )
    # And a scenario that never hands off cannot pass by expecting one.
    policy = next(s for s in SCENARIOS if s.id == "policy_24_hour_cancel")
    assert run(replace(policy, handoff=ExpectedHandoff()), template).failures == (
        "never handed to a person: the conversation is not in the desk's queue",
    )


def test_judge_fails_a_handoff_that_also_booked(template: Path | str) -> None:
    # Handing off does not excuse a write: with the second hotel approved, the run ends
    # in the queue as expected, but the database has a booking the gold one lacks.
    declines = next(s for s in SCENARIOS if s.id == "handoff_after_two_declines")
    first, second = declines.turns
    result = run(replace(declines, turns=(first, replace(second, decisions=("y",)))), template)
    assert any(f.startswith("database: hotel_bookings") for f in result.failures), result.failures


def test_judge_fails_a_staff_check_the_scenario_does_not_expect(template: Path | str) -> None:
    # EUR 75.00 is below the scenario's EUR 100: lowered to EUR 50, the change waits for
    # a member of staff nobody scripted, and the trial ends with it waiting.
    below = next(s for s in SCENARIOS if s.id == "second_approval_below_amount_not_checked")
    assert run(below, template).passed
    failures = run(replace(below, second_approval_above=5_000), template).failures
    assert (
        "a member of staff's check of Change flight (To pay: EUR 75.00) was left waiting: "
        "the scenario scripts no staff answer for it"
    ) in failures
    assert any(f.startswith("database: ticket_flights") for f in failures), failures


@pytest.mark.parametrize("above", [None, 60_000])
def test_judge_fails_a_staff_check_the_scenario_expects_but_never_came(
    template: Path | str, above: int | None
) -> None:
    # Without the second approval, or above the booking's EUR 578.00, the hotel is booked
    # on the customer's yes alone: the database is right, the scripted staff yes unused.
    approves = next(s for s in SCENARIOS if s.id == "second_approval_hotel_staff_approves")
    result = run(replace(approves, second_approval_above=above), template)
    assert result.failures == (
        "1 scripted staff answers were never used (no check asked for them): ['approve']",
    )


@pytest.mark.parametrize(
    ("scenario_id", "answer", "table"),
    [
        ("second_approval_hotel_staff_approves", StaffCheck(False, "no"), "hotel_bookings"),
        ("second_approval_refund_staff_refuses", StaffCheck(True), "tickets"),
    ],
)
def test_judge_fails_when_staff_answer_the_other_way(
    template: Path | str, scenario_id: str, answer: StaffCheck, table: str
) -> None:
    # The staff's answer decides the final database: the other answer misses the gold one.
    scenario = next(s for s in SCENARIOS if s.id == scenario_id)
    first, *rest = scenario.turns
    turns = (replace(first, staff_checks=(answer,)), *rest)
    failures = run(replace(scenario, turns=turns), template).failures
    assert any(f.startswith(f"database: {table}") for f in failures), failures


@pytest.mark.parametrize(
    ("hotel", "nights", "staff"),
    [("Paddington Central Inn", 1, ()), ("Southbank Riverside Hotel", 2, (StaffCheck(True),))],
    ids=["cheap", "checked-too"],
)
def test_trial_answers_a_proposal_that_follows_a_checked_action(
    template: Path | str, hotel: str, nights: int, staff: tuple[StaffCheck, ...]
) -> None:
    # Right after the staff's yes runs the booking, the model proposes another: the
    # customer answers it (and staff too, above the amount). The applied check stays
    # open until nothing is pending, and must not be taken for the new action's.
    approves = next(s for s in SCENARIOS if s.id == "second_approval_hotel_staff_approves")
    first, *rest = approves.turns
    second = {
        "name": "book_hotel",
        "args": {
            "hotel_id": f"{{hotel:{hotel}}}",
            "checkin_date": "{date:12}",
            "checkout_date": f"{{date:{12 + nights}}}",
        },
    }
    replies = (
        *first.replies[:3],
        {"text": "Southbank is booked; now the nights after it.", "calls": [second]},
        {"text": "Done: both stays are booked."},
    )
    turn = replace(
        first, replies=replies, decisions=("y", "y"), staff_checks=(*first.staff_checks, *staff)
    )
    scenario = replace(
        approves,
        turns=(turn, *rest),
        gold_actions=(*approves.gold_actions, second),
        tool_facts=(),
    )
    result = run(scenario, template)
    assert result.passed, "\n".join(result.failures)
    assert [c.status for c in result.transcript.checks] == ["used"] * (1 + len(staff))


def test_database_problems_sees_a_change_in_any_table(template: Path | str, tmp_path: Path) -> None:
    from sqlalchemy import text

    clock = fixed_clock(FIXED_NOW)
    with (
        database_copy(template, tmp_path, "agent.sqlite", clock) as agent,
        database_copy(template, tmp_path, "gold.sqlite", clock) as gold,
    ):
        assert database_problems(agent, gold) == []
        with agent.engine.begin() as connection:
            connection.execute(text("UPDATE flights SET status = 'Cancelled' WHERE flight_id = 1"))
        (problem,) = database_problems(agent, gold)
        assert problem.startswith("flights: expected rows missing [(1,")
        assert "unexpected rows [(1," in problem
        assert "'Cancelled'" in problem.split("unexpected rows")[1]
        # A row the gold database lacks, in a table the flights change left alone.
        with agent.engine.begin() as connection:
            connection.execute(text("DELETE FROM hotel_bookings WHERE id = 2"))
        problems = database_problems(agent, gold)
        assert [p.split(":")[0] for p in problems] == ["flights", "hotel_bookings"]
        assert problems[1].startswith("hotel_bookings: expected rows missing [(2,")
        assert problems[1].endswith("unexpected rows []")


def test_database_problems_ignores_where_an_equal_row_is_stored(
    template: Path | str, tmp_path: Path
) -> None:
    # A row deleted and inserted again is stored elsewhere (on SQLite: under another rowid,
    # so the rows no longer pair up by rowid); the rows are still the same.
    from sqlalchemy import text

    clock = fixed_clock(FIXED_NOW)
    this_pass = "ticket_no = :ticket_no AND flight_id = :flight_id"
    with (
        database_copy(template, tmp_path, "agent.sqlite", clock) as agent,
        database_copy(template, tmp_path, "gold.sqlite", clock) as gold,
    ):
        with agent.engine.begin() as connection:
            row = dict(
                connection.execute(
                    text("SELECT * FROM boarding_passes ORDER BY ticket_no, flight_id LIMIT 1")
                )
                .mappings()
                .one()
            )
            connection.execute(
                text(f"DELETE FROM boarding_passes WHERE {this_pass}"),
                row,
            )
            columns = ", ".join(row)
            values = ", ".join(f":{column}" for column in row)
            connection.execute(
                text(f"INSERT INTO boarding_passes ({columns}) VALUES ({values})"), row
            )
        assert database_problems(agent, gold) == []
        with agent.engine.begin() as connection:
            connection.execute(
                text(f"UPDATE boarding_passes SET seat_no = 'ZZ9' WHERE {this_pass}"),
                row,
            )
        (problem,) = database_problems(agent, gold)
        assert problem.startswith(f"boarding_passes: expected rows missing [({row['ticket_no']!r},")
        assert "'ZZ9'" in problem.split("unexpected rows")[1]


def test_pass_hat_k_estimates() -> None:
    trials = {"a": [True, True, True], "b": [True, False, True], "c": [False, False, False]}
    assert pass_hat_k(trials, 1) == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert pass_hat_k(trials, 3) == pytest.approx(1 / 3)
