"""Every scenario of data/scenarios, offline, through the real graph and database."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from db.clock import fixed_clock
from evaluation import (
    Scenario,
    ScenarioResult,
    copy_database,
    database_problems,
    load_scenarios,
    pass_hat_k,
    run_offline,
)
from tests.conftest import FIXED_NOW
from tests.support.scripted import ScriptedChatModel

SCENARIOS = load_scenarios()


def scripted(replies: list[AIMessage]) -> ScriptedChatModel:
    return ScriptedChatModel(script=list(replies))


def run(scenario: Scenario, template: Path) -> ScenarioResult:
    return run_offline(scenario, template, fixed_clock(FIXED_NOW), scripted)


def test_scenarios_cover_the_categories() -> None:
    assert len(SCENARIOS) >= 3
    assert len({s.id for s in SCENARIOS}) == len(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario_passes_offline(scenario: Scenario, template_db_path: Path) -> None:
    result = run(scenario, template_db_path)
    assert result.passed, "\n".join(result.failures)


def test_judge_fails_when_the_write_did_not_happen(template_db_path: Path) -> None:
    happy = next(s for s in SCENARIOS if s.id == "flight_change_happy")
    # Decline instead of approving: the gold state (ticket moved) is not reached.
    turns = (replace(happy.turns[0], decisions=("n: changed my mind",)), *happy.turns[1:])
    result = run(replace(happy, turns=turns), template_db_path)
    assert any(f.startswith("database: ticket_flights") for f in result.failures), result.failures


def test_judge_fails_on_a_write_that_should_not_happen(template_db_path: Path) -> None:
    denied = next(s for s in SCENARIOS if s.id == "flight_change_denied")
    turns = (replace(denied.turns[0], decisions=("y",)),)
    result = run(replace(denied, turns=turns), template_db_path)
    assert any(f.startswith("database:") for f in result.failures), result.failures


def test_judge_fails_on_unsaid_fact(template_db_path: Path) -> None:
    policy = next(s for s in SCENARIOS if s.id == "policy_24_hour_cancel")
    result = run(replace(policy, must_say=("EUR 999.99",)), template_db_path)
    assert result.failures == (
        "never said 'EUR 999.99'",
        "'EUR 999.99' was said, but no tool, customer message or booking gave it",
    )


def test_judge_fails_on_a_fact_only_the_script_said(template_db_path: Path) -> None:
    # Offline, the assistant's words are scripted: a figure it says must come from a tool.
    policy = next(s for s in SCENARIOS if s.id == "policy_24_hour_cancel")
    last = policy.turns[-1]
    replies = (*last.replies[:-1], {**last.replies[-1], "text": "That costs EUR 123.45."})
    turns = (*policy.turns[:-1], replace(last, replies=replies))
    result = run(replace(policy, turns=turns, must_say=("EUR 123.45",)), template_db_path)
    assert result.failures == (
        "'EUR 123.45' was said, but no tool, customer message or booking gave it",
    )


def test_judge_fails_on_an_unexpected_tool_error(
    template_db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from db import hotels
    from db.errors import TravelError

    def unavailable(*args: object, **kwargs: object) -> None:
        raise TravelError("service unavailable")

    monkeypatch.setattr(hotels, "search_hotels", unavailable)
    happy = next(s for s in SCENARIOS if s.id == "hotel_booking_basel_happy")
    result = run(happy, template_db_path)
    assert "unexpected tool error from search_hotels: Error: service unavailable" in (
        result.failures
    )


def test_judge_accepts_an_error_the_scenario_expects(template_db_path: Path) -> None:
    rule = next(s for s in SCENARIOS if s.id == "rule_full_hotel_rheinblick")
    assert run(rule, template_db_path).passed
    failures = run(replace(rule, expected_errors=()), template_db_path).failures
    assert [f for f in failures if f.startswith("unexpected tool error from book_hotel")]


def test_judge_fails_on_an_unused_approval_answer(template_db_path: Path) -> None:
    happy = next(s for s in SCENARIOS if s.id == "flight_change_happy")
    first = happy.turns[0]
    turns = (replace(first, decisions=(*first.decisions, "y")), *happy.turns[1:])
    result = run(replace(happy, turns=turns), template_db_path)
    assert result.failures == ("1 scripted approval answers were never used: ['y']",)


def test_database_problems_sees_a_change_in_any_table(
    template_db_path: Path, tmp_path: Path
) -> None:
    from sqlalchemy import text

    clock = fixed_clock(FIXED_NOW)
    agent = copy_database(template_db_path, tmp_path, "agent.sqlite", clock)
    gold = copy_database(template_db_path, tmp_path, "gold.sqlite", clock)
    try:
        assert database_problems(agent, gold) == []
        with agent.engine.begin() as connection:
            connection.execute(text("UPDATE flights SET status = 'Cancelled' WHERE flight_id = 1"))
        (problem,) = database_problems(agent, gold)
        assert problem.startswith("flights: expected rows missing [(1,")
        assert "unexpected rows [(1," in problem
    finally:
        agent.dispose()
        gold.dispose()


def test_pass_hat_k_estimates() -> None:
    trials = {"a": [True, True, True], "b": [True, False, True], "c": [False, False, False]}
    assert pass_hat_k(trials, 1) == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert pass_hat_k(trials, 3) == pytest.approx(1 / 3)
