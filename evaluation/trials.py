"""The live suite: every scenario, several trials each, against a real model.

``run_trials`` builds the scenario database once (a template), runs each trial on its own
copy with a time limit, judges it, appends its record as soon as it ends, and adds up
what the command reports: pass^k per category, latency, tokens, errors. A trial that
fails with a bug is recorded as an error and the suite goes on. The command
(``commands/eval.py``) only reads the options and shows progress.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from langchain_core.language_models import BaseChatModel

from db.clock import Clock
from db.engine import Database
from db.generate import build_database
from evaluation.judge import ScenarioResult, Transcript
from evaluation.reports import Usage, trial_record
from evaluation.runs import run_scenario, simulated_customer
from evaluation.scenarios import SCENARIO_SEED, Scenario


class Progress(Protocol):
    """Who is told how the suite advances (the command's progress bar)."""

    def begin(self, scenario: str, trial: int) -> None:
        """A trial starts."""

    def turn(self, index: int) -> None:
        """The customer sends message ``index`` (from 0) of the current trial."""

    def end(self, passed: bool, verdict: str) -> None:
        """The current trial ended with ``verdict``."""


@dataclass
class SuiteReport:
    """What the trials add up to."""

    by_category: dict[str, dict[str, list[bool]]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    trials: int = 0
    spent: Usage = field(default_factory=lambda: Usage(0, 0))


@contextlib.contextmanager
def template_location(server: str | None, folder: Path) -> Iterator[Path | str]:
    """Yield where the scenario database is built: a file, or a temporary database."""
    if server is None:
        yield folder / "template.sqlite"
        return
    from db.copies import temporary_database

    with temporary_database(server, "eval_template") as url:
        yield url


def build_template(
    template: Path | str, clock: Clock | None = None, data_dir: Path | None = None
) -> Clock:
    """Build the scenario database at ``template``; return the clock it was built for.

    ``data_dir`` is the folder of the reference files it is built from.
    """
    seed_db = (
        Database.from_url(str(template), clock, data_dir)
        if clock
        else Database.from_url(str(template), data_dir=data_dir)
    )
    try:
        build_database(seed_db, seed=SCENARIO_SEED)
        return seed_db.clock
    finally:
        seed_db.dispose()


def run_trials(
    scenarios: Sequence[Scenario],
    trials: int,
    models: BaseChatModel | Mapping[str, BaseChatModel],
    customer_model: BaseChatModel,
    *,
    folder: Path,
    template: Path | str,
    clock: Clock,
    seconds: float,
    progress: Progress,
    records: TextIO | None = None,
    context: Mapping[str, Any] | None = None,
    on_error: Callable[[BaseException], None] | None = None,
    data_dir: Path | None = None,
) -> SuiteReport:
    """Run ``trials`` trials of every scenario over copies of ``template``.

    Each trial works in a folder of its own under ``folder``, within ``seconds``; its
    record goes to ``records`` (one JSON line, with ``context``) as soon as it ends.
    ``on_error`` sees the exception of a trial that failed with a bug; ``data_dir`` is
    the reference files' folder (the company policy the assistant reads among them).
    """
    report = SuiteReport()
    for scenario in scenarios:
        for trial in range(1, trials + 1):
            progress.begin(scenario.id, trial)
            started = time.monotonic()
            work = folder / f"{scenario.id}-{trial}"
            work.mkdir()
            try:
                result = run_scenario(
                    scenario,
                    template,
                    clock,
                    work,
                    lambda _db: models,
                    customer=simulated_customer(scenario, customer_model),
                    seconds=seconds,
                    on_turn=progress.turn,
                    data_dir=data_dir,
                )
            except Exception as error:  # a bug in one trial must not lose the others
                if on_error is not None:
                    on_error(error)
                result = ScenarioResult(
                    scenario, (), Transcript(), error=f"{type(error).__name__}: {error}"
                )
            _add(report, scenario, result)
            if records is not None:
                record = trial_record(
                    result, trial, **(context or {}), seconds=round(time.monotonic() - started, 3)
                )
                records.write(json.dumps(record, ensure_ascii=False) + "\n")
                records.flush()
            verdict = "pass" if result.passed else "FAIL: " + "; ".join(result.reasons)
            progress.end(result.passed, verdict)
    return report


def _add(report: SuiteReport, scenario: Scenario, result: ScenarioResult) -> None:
    report.trials += 1
    report.errors += result.error is not None
    report.by_category.setdefault(scenario.category, {}).setdefault(scenario.id, []).append(
        result.passed
    )
    report.latencies += result.transcript.latencies
    used = Usage.of(result.transcript.messages)
    report.spent = Usage(
        report.spent.input_tokens + used.input_tokens,
        report.spent.output_tokens + used.output_tokens,
    )
