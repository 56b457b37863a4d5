"""Every scenario of tests/scenarios, offline, through the real graph and database."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from db.clock import fixed_clock
from evaluation import Scenario, ScenarioResult, load_scenarios, pass_hat_k, run_offline
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
    assert result.failures == ("never said 'EUR 999.99'",)


def test_pass_hat_k_estimates() -> None:
    trials = {"a": [True, True, True], "b": [True, False, True], "c": [False, False, False]}
    assert pass_hat_k(trials, 1) == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert pass_hat_k(trials, 3) == pytest.approx(1 / 3)
