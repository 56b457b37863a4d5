"""Scenarios played offline for tests: the scripted model and the fixed clock."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage

from db.clock import fixed_clock
from evaluation import Scenario, ScenarioResult, run_offline
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel


def scripted(replies: list[AIMessage]) -> ScriptedChatModel:
    """Return a chat model that answers with the scenario's scripted ``replies``."""
    return ScriptedChatModel(script=list(replies))


def run_scripted(scenario: Scenario, template: Path | str) -> ScenarioResult:
    """Play ``scenario`` on a copy of ``template`` with its scripted replies, at FIXED_NOW."""
    return run_offline(scenario, template, fixed_clock(FIXED_NOW), scripted)
