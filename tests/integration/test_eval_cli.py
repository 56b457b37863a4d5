"""``travel-assistant eval``: its refusal without an endpoint, and a live run against the
scripted OpenAI-compatible server (the simulated customer talks to it too)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from cli import Console, Overrides, main
from db.clock import fixed_clock
from db.engine import packaged_data_dir
from tests.support.databases import FIXED_NOW
from tests.support.fake_openai import FakeOpenAI, Reply


def run_eval(argv: list[str], home: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    overrides = Overrides(console=Console(out=out, err=err), clock=fixed_clock(FIXED_NOW))
    code = main(["--home", str(home), "eval", *argv], overrides)
    return code, out.getvalue(), err.getvalue()


def test_eval_without_endpoint_says_what_to_set(tmp_path: Path) -> None:
    code, out, err = run_eval(["--model", "gpt-4o-mini"], tmp_path)
    assert code == 2
    assert "OPENAI_API_KEY" in err
    assert out == ""


def test_eval_live_run_against_scripted_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [
        Reply(tool_calls=[("lookup_policy", {"query": "cancel within 24 hours of booking"})]),
        Reply(text="Yes: within 24 hours of booking you can cancel without a fee."),
        Reply(text="###STOP###"),  # the simulated customer is satisfied
    ]
    with FakeOpenAI(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        code, out, err = run_eval(
            ["--model", "gpt-4o-mini", "--scenario", "policy_24_hour_cancel"], tmp_path
        )
    assert code == 0, err
    assert "policy_24_hour_cancel trial 1: pass" in err
    assert "policy                     1    1.00\n" in out  # one trial: one pass column
    assert "tokens: 20 in, 10 out" in out  # two assistant replies of the scripted usage
    assert "cost estimate: USD" in out
    assert len(server.requests) == 3
    # The customer simulator saw the assistant's words as the other side of the chat.
    assert server.requests[2]["messages"][-1]["role"] == "user"


def test_eval_unknown_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    code, _, err = run_eval(["--scenario", "nope"], tmp_path)
    assert code == 2
    assert "No scenario named ['nope']" in err


def test_eval_without_the_policy_file_stops_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = tmp_path / "reference"  # every reference file but the policy
    shutil.copytree(packaged_data_dir(), reference, ignore=shutil.ignore_patterns("policy.md"))
    monkeypatch.setenv("TRAVEL_ASSISTANT_DATA", str(reference))
    with FakeOpenAI([Reply(text="never sent")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        code, out, err = run_eval(
            ["--model", "gpt-4o-mini", "--scenario", "policy_24_hour_cancel"], tmp_path / "home"
        )
    assert code == 1
    said = " ".join(err.split())  # as one line, however it wrapped
    assert f"The company policy file {reference / 'policy.md'} does not exist" in said
    assert "trial 1" not in err  # no trial started, none was judged on tool errors
    assert server.requests == []
    assert out == ""
