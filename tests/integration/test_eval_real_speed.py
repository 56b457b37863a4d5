"""``travel-assistant eval`` at real-model speed: picking scenarios, a time limit per trial,
a provider error recorded as that trial's error while the suite goes on, every trial as a
JSON line, and a progress bar with the running pass rate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cli import Console, Overrides, main
from db.clock import fixed_clock
from tests.support.databases import FIXED_NOW
from tests.support.fake_openai import Endless, Fail, FakeOpenAI, Reply

A_PASS = [
    Reply(tool_calls=[("lookup_policy", {"query": "cancel within 24 hours of booking"})]),
    Reply(text="Yes: within 24 hours of booking you can cancel without a fee."),
    Reply(text="###STOP###"),
]


class Terminal(io.StringIO):
    """Standard error as a terminal, so the progress bar is drawn."""

    def isatty(self) -> bool:
        return True


def run_eval(argv: list[str], home: Path, err: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), err or io.StringIO()
    overrides = Overrides(console=Console(out=out, err=err), clock=fixed_clock(FIXED_NOW))
    code = main(["--home", str(home), "eval", *argv], overrides)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_scenarios_are_picked_by_name_pattern_or_category(tmp_path: Path, endpoint: None) -> None:
    code, out, _ = run_eval(["--list", "--category", "policy"], tmp_path)
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines()]
    assert "policy_24_hour_cancel" in listed and len(listed) == 5
    code, out, _ = run_eval(["--list", "--scenario", "cancel_hotel_*"], tmp_path)
    assert [line.split()[0] for line in out.splitlines()] == [
        "cancel_hotel_free_new_york",
        "cancel_hotel_late_fee",
    ]
    code, _, err = run_eval(["--list", "--category", "nope"], tmp_path)
    assert code == 2
    assert "No category ['nope']; the categories are [" in err


def test_a_provider_error_is_that_trials_error_and_the_suite_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = tmp_path / "runs" / "trials.jsonl"
    # The scenarios run in file-name order: policy_24_hour_cancel, then the check-in one.
    script = [*A_PASS, Fail(400, "Invalid 'messages': unsupported field")]
    with FakeOpenAI(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        argv = ["--model", "gpt-4o-mini", "--jsonl", str(records), "--max-tokens", "300"]
        argv += ["--scenario", "policy_check_in_and_seats", "--scenario", "policy_24_hour_cancel"]
        code, out, err = run_eval(argv, tmp_path)
    assert code == 1  # an error is reported in the exit code, after the whole suite
    assert "policy_24_hour_cancel trial 1: pass" in err
    assert (
        "policy_check_in_and_seats trial 1: FAIL: error: The model server refused the request "
        "(HTTP 400): Invalid 'messages': unsupported field." in err
    )
    assert "1 of 2 trials ended in an error" in err
    assert "policy                     2    0.50\n" in out
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["scenario"], r["passed"]) for r in lines] == [
        ("policy_24_hour_cancel", True),
        ("policy_check_in_and_seats", False),
    ]
    passed, failed = lines
    assert failed["error"].startswith("The model server refused the request (HTTP 400)")
    assert failed["reasons"] == [f"error: {failed['error']}"]
    assert passed["error"] is None and passed["reasons"] == []
    assert passed["tokens"] == {"input": 20, "output": 10}
    assert len(passed["latency"]["per_message"]) == 1
    assert passed["model"] == "gpt-4o-mini" and passed["max_tokens"] == 300
    assert passed["run"] == failed["run"]
    assert all(r["max_tokens"] == 300 for r in server.requests)


def test_a_trial_that_runs_too_long_is_stopped_and_the_suite_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = tmp_path / "trials.jsonl"
    with FakeOpenAI([*A_PASS, Endless()]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        # Room for the first trial to pass at any reasonable speed; the second never ends.
        argv = ["--time-limit", "4", "--scenario", "policy_check_in_and_seats"]
        argv += ["--scenario", "policy_24_hour_cancel", "--jsonl", str(records)]
        code, _, err = run_eval(argv, tmp_path)
    assert code == 1
    stopped = json.loads(records.read_text().splitlines()[-1])
    assert 4 <= stopped["seconds"] < 10  # the stream went on for ever; the trial did not
    assert "policy_24_hour_cancel trial 1: pass" in err
    assert (
        "policy_check_in_and_seats trial 1: FAIL: error: The run reached its time limit of 4 s"
        in err
    )


def test_the_progress_bar_shows_the_running_pass_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI(A_PASS) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code, _, err = run_eval(["--scenario", "policy_24_hour_cancel"], tmp_path, Terminal())
    assert code == 0
    assert "pass 1/1 (100%)" in err
    assert "policy_24_hour_cancel trial 1: pass" in err


def test_a_live_trial_has_its_large_action_checked_by_the_scripted_staff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real model path: the customer's yes comes from the scenario, and so does the
    # staff's no; the model hears the reason and the refund is never made.
    records = tmp_path / "trials.jsonl"
    ticket = "7240005000000202"
    script = [
        Reply(tool_calls=[("ToFlightBookingAssistant", {"request": f"Cancel ticket {ticket}"})]),
        Reply(text="Cancelling it now.", tool_calls=[("cancel_ticket", {"ticket_no": ticket})]),
        Reply(text="Our team did not approve it: it needs a manager. It is not cancelled."),
        Reply(text="###STOP###"),  # the simulated customer
    ]
    with FakeOpenAI(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        argv = ["--scenario", "second_approval_refund_staff_refuses", "--jsonl", str(records)]
        code, _, err = run_eval(argv, tmp_path)
    assert code == 0, err
    assert "second_approval_refund_staff_refuses trial 1: pass" in err
    (record,) = [json.loads(line) for line in records.read_text().splitlines()]
    assert record["checks"] == [
        {
            "action": "Cancel ticket",
            "amount": "Refund: EUR 377.00",
            "status": "used",
            "staff": "refuse: a refund this large needs a manager's sign-off; a manager will "
            "call the customer today",
        }
    ]
    told = json.dumps(server.requests[2]["messages"])
    assert "The customer approved this action, but Ana Lima" in told
    assert "refused it at the second approval" in told
    assert "a refund this large needs a manager" in told


def test_a_live_trial_has_the_people_at_the_desk_act_between_the_customers_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real model path with the desk's steps: the assistant hands the conversation
    # over, Ana proposes the booking, the customer's yes (from the scenario) waits for a
    # check Ana may not give, Bruno gives it, and Ana hands back. Nobody asks the
    # simulated customer anything during the people's own turn.
    records = tmp_path / "trials.jsonl"
    handed = {
        "reason": "The customer asked for a person to make a company hotel booking.",
        "summary": "Priya Raman wants Southbank Riverside Hotel booked by a person.",
    }
    script = [
        Reply(tool_calls=[("request_human_agent", handed)]),
        Reply(text="Of course: a person from our customer-service team will answer you here."),
        Reply(text="Thanks! So the hotel is booked?"),  # the simulated customer
        Reply(text="Yes: Southbank Riverside Hotel is booked, and EUR 578.00 was charged."),
        Reply(text="###STOP###"),  # the simulated customer
    ]
    with FakeOpenAI(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        argv = ["--scenario", "desk_four_eyes_second_approval", "--jsonl", str(records)]
        code, _, err = run_eval(argv, tmp_path)
    assert code == 0, err
    assert "desk_four_eyes_second_approval trial 1: pass" in err
    (record,) = [json.loads(line) for line in records.read_text().splitlines()]
    assert record["desk"] == [
        {"turn": 1, "step": "Ana Lima takes the conversation", "refused": None},
        {"turn": 1, "step": "Ana Lima writes to the customer", "refused": None},
        {"turn": 1, "step": "Ana Lima proposes book_hotel", "refused": None},
        {
            "turn": 2,
            "step": "Ana Lima approves the check",
            "refused": "You proposed Book hotel (To pay: EUR 578.00) for passenger "
            "5102 899977, so another member of staff must decide its check: a second "
            "approval needs a second person.",
        },
        {"turn": 2, "step": "Bruno Costa approves the check", "refused": None},
        {"turn": 2, "step": "Ana Lima hands the conversation back", "refused": None},
    ]
    assert [c["status"] for c in record["checks"]] == ["used"]
    # The primary assistant answered the customer's last message having read Ana's note;
    # the simulated customer never read it.
    assert "Bruno Costa gave the second approval" in json.dumps(server.requests[3]["messages"])
    assert "Bruno Costa gave the second approval" not in json.dumps(server.requests[2]["messages"])
