"""What a run reports: pass^k, the summary lines, trial records, tokens and their cost."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AnyMessage

from evaluation.judge import ScenarioResult


def pass_hat_k(results: Mapping[str, Sequence[bool]], k: int) -> float:
    """Return pass^k: the chance that k trials of a scenario all pass, averaged.

    Estimated per scenario from n trials with c successes as C(c, k) / C(n, k).
    """
    from math import comb

    values = []
    for trials in results.values():
        n, c = len(trials), sum(trials)
        if n >= k:
            values.append(comb(c, k) / comb(n, k))
    return statistics.fmean(values) if values else 0.0


def summarise(by_category: Mapping[str, Mapping[str, Sequence[bool]]], k: int) -> list[str]:
    """Return report lines of pass^1 and pass^k per category and overall."""

    def row(name: str, trials: Mapping[str, Sequence[bool]]) -> str:
        one, many = pass_hat_k(trials, 1), pass_hat_k(trials, k)
        line = f"{name:<18} {len(trials):>9} {one:>7.2f}"
        return line if k == 1 else f"{line} {many:>7.2f}"

    # With one trial per scenario pass^k is pass^1: one column, not the same one twice.
    header = f"{'category':<18} {'scenarios':>9} {'pass^1':>7}"
    lines = [header if k == 1 else f"{header} {f'pass^{k}':>7}"]
    everything: dict[str, Sequence[bool]] = {}
    for category in sorted(by_category):
        everything.update(by_category[category])
        lines.append(row(category, by_category[category]))
    lines.append(row("all", everything))
    return lines


def trial_record(result: ScenarioResult, trial: int, **context: Any) -> dict[str, Any]:
    """Return one trial as plain data: one line of ``travel-assistant eval --jsonl``.

    ``context`` adds fields that identify the run (its start, the model).
    """
    used = Usage.of(result.transcript.messages)
    latencies = result.transcript.latencies
    handoff = result.transcript.handoff
    return {
        **context,
        "scenario": result.scenario.id,
        "category": result.scenario.category,
        "trial": trial,
        "passed": result.passed,
        "reasons": list(result.reasons),
        "error": result.error,
        # Whether the conversation was handed to a person, and why the assistant said.
        "handoff": None
        if handoff is None
        else {"status": handoff.status, "reason": handoff.reason},
        # Each second-approval check: what it was, how it ended, and the staff's answer.
        "checks": [
            {
                "action": check.title,
                "amount": check.amount,
                "status": check.status,
                "staff": _staff_answer(result, check.tool_call_id),
            }
            for check in result.transcript.checks
        ],
        # What the people at the desk did, step by step, and what the desk refused.
        "desk": [
            {"turn": done.turn + 1, "step": str(done.step), "refused": done.refusal}
            for done in result.transcript.desk_steps
        ],
        "tokens": {"input": used.input_tokens, "output": used.output_tokens},
        "latency": {
            "per_message": [round(seconds, 3) for seconds in latencies],
            "median": round(statistics.median(latencies), 3) if latencies else None,
            "total": round(sum(latencies), 3),
        },
    }


def _staff_answer(result: ScenarioResult, tool_call_id: str) -> str | None:
    answer = result.transcript.staff_decisions.get(tool_call_id)
    return None if answer is None else str(answer)


def to_json(result: ScenarioResult, trial: int = 1, **context: Any) -> str:
    """Return a one-line JSON record of a result (see ``trial_record``)."""
    return json.dumps(trial_record(result, trial, **context), ensure_ascii=False)


@dataclass(frozen=True)
class Usage:
    """Tokens the assistant used in one run."""

    input_tokens: int
    output_tokens: int

    @classmethod
    def of(cls, messages: Sequence[AnyMessage]) -> Usage:
        """Add up the usage the provider reported on the assistant's messages."""
        spent_in = spent_out = 0
        for message in messages:
            usage = getattr(message, "usage_metadata", None) or {}
            spent_in += int(usage.get("input_tokens", 0))
            spent_out += int(usage.get("output_tokens", 0))
        return cls(spent_in, spent_out)

    def cost(self, price: tuple[float, float] | None) -> float | None:
        """Return the cost in USD at ``price`` (per million in, out), if known."""
        if price is None:
            return None
        return (self.input_tokens * price[0] + self.output_tokens * price[1]) / 1_000_000


def percentile(values: Sequence[float], share: float) -> float:
    """Return the ``share`` percentile of ``values`` (nearest rank)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(share * (len(ordered) - 1))))
    return ordered[rank]
