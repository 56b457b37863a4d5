"""The scenario judge's procedural checks, on hand-built transcripts (no graph, no database).

``evaluation.judge.judge`` must fail a run that broke the conversation's own rules even
when the database ended right: every tool call answered exactly once, and no sensitive
call run without the customer's recorded yes. The scenarios of ``data/scenarios`` (in
``tests/integration/test_scenarios.py``) only reach the judge through the real graph,
which never breaks these rules, so these checks are tested here, one rule at a time,
with a clean transcript beside them that must pass. So are the hand-off check and the
second approval's checks, on the desk's records a transcript ends with, and the
``[handoff]`` table, ``second_approval_above`` and ``staff_checks`` of a scenario file.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage

from assistants.approvals import Decision, not_run_answer
from conversations.audit import AuditEntry, Looked
from conversations.desk import Check, CheckStatus, Handoff, Status
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from evaluation.judge import Transcript, judge
from evaluation.scenarios import (
    ExpectedHandoff,
    Scenario,
    ScenarioError,
    StaffCheck,
    load_scenario,
)

SENSITIVE = frozenset({"cancel_ticket", "update_ticket_to_new_flight"})
SCENARIO = Scenario(
    id="judge_self_test",
    category="judge",
    passenger_id=FIXTURE_PASSENGER_ID,
    description="A hand-built run for the judge's own tests.",
    instructions="",
    turns=(),
)


def _call(name: str, call_id: str) -> ToolCall:
    return ToolCall(name=name, args={"ticket_no": FIXTURE_TICKET_NO}, id=call_id, type="tool_call")


def _ran(call: ToolCall) -> ToolMessage:
    """The answer of a call that ran (a tool's own answer carries no ``not_run``)."""
    return ToolMessage('{"status": "ok"}', tool_call_id=call["id"], name=call["name"])


def _verdict(messages: list[AnyMessage], decisions: dict[str, Decision]) -> tuple[str, ...]:
    transcript = Transcript(messages=messages, decisions=decisions)
    return judge(SCENARIO, transcript, [], SENSITIVE)


def _run(*answers: ToolMessage, calls: list[ToolCall]) -> list[AnyMessage]:
    return [HumanMessage("Please sort out my ticket."), AIMessage("", tool_calls=calls), *answers]


def test_judge_passes_a_run_that_kept_every_rule() -> None:
    # The control: what the checks below break, one at a time, is right here.
    search = _call("fetch_user_flight_information", "c0")
    approved = _call("update_ticket_to_new_flight", "c1")
    declined = _call("cancel_ticket", "c2")
    messages = _run(
        _ran(search),
        _ran(approved),
        not_run_answer(declined, "The customer said no.", "declined"),
        calls=[search, approved, declined],
    )
    decisions = {"c1": Decision(approved=True), "c2": Decision(approved=False, reason="no")}
    assert _verdict(messages, decisions) == ()


def test_judge_fails_a_tool_call_left_unanswered() -> None:
    search = _call("fetch_user_flight_information", "c0")
    change = _call("update_ticket_to_new_flight", "c1")
    # The second call of the batch has no answer at all: reported, not a crash.
    messages = _run(_ran(search), calls=[search, change])
    failures = _verdict(messages, {"c1": Decision(approved=True)})
    assert failures == ("tool call update_ticket_to_new_flight (c1) answered 0 times",)


def test_judge_fails_a_tool_call_answered_twice() -> None:
    search = _call("fetch_user_flight_information", "c0")
    messages = _run(_ran(search), _ran(search), calls=[search])
    assert _verdict(messages, {}) == (
        "tool call fetch_user_flight_information (c0) answered 2 times",
    )


def test_judge_fails_a_sensitive_call_that_ran_with_no_recorded_decision() -> None:
    change = _call("update_ticket_to_new_flight", "c1")
    messages = _run(_ran(change), calls=[change])
    assert _verdict(messages, {}) == (
        "update_ticket_to_new_flight ran without the customer's approval",
    )


def test_judge_fails_a_sensitive_call_that_ran_though_declined() -> None:
    cancel = _call("cancel_ticket", "c2")
    messages = _run(_ran(cancel), calls=[cancel])
    failures = _verdict(messages, {"c2": Decision(approved=False, reason="no")})
    assert failures == (
        "cancel_ticket ran without the customer's approval",
        "cancel_ticket was denied but ran anyway",
    )


def test_judge_fails_a_tool_fact_that_only_the_assistant_said() -> None:
    # ``tool_facts`` are what a tool must have returned (the fee, the refusal's reason):
    # the assistant saying it is no proof a tool did.
    scenario = replace(SCENARIO, tool_facts=("EUR 75.00",))
    search = _call("fetch_user_flight_information", "c0")
    quiet = ToolMessage('{"status": "ok"}', tool_call_id="c0", name=search["name"])
    told = ToolMessage('{"change_fee": "EUR 75.00"}', tool_call_id="c0", name=search["name"])
    reply = AIMessage("The change fee is EUR 75.00.")
    for answer, expected in ((quiet, ("no tool returned 'EUR 75.00'",)), (told, ())):
        messages = [*_run(answer, calls=[search]), reply]
        transcript = Transcript(messages=messages, decisions={})
        assert judge(scenario, transcript, [], SENSITIVE) == expected


def test_judge_fails_an_unexpected_tool_error_and_accepts_an_expected_one() -> None:
    search = _call("search_flights", "c1")
    refused = ToolMessage(
        "Error: no airport has the code XXX.\nUse a 3-letter IATA code.",
        tool_call_id="c1",
        name=search["name"],
        status="error",
    )
    transcript = Transcript(messages=_run(refused, calls=[search]), decisions={})
    assert judge(SCENARIO, transcript, [], SENSITIVE) == (
        "unexpected tool error from search_flights: Error: no airport has the code XXX.",
    )
    expected = replace(SCENARIO, expected_errors=("search_flights",))
    assert judge(expected, transcript, [], SENSITIVE) == ()
    # An error expected of another tool does not excuse this one.
    elsewhere = replace(SCENARIO, expected_errors=("cancel_ticket",))
    assert len(judge(elsewhere, transcript, [], SENSITIVE)) == 1


# --- the hand-off to a person (``[handoff]``) ------------------------------------------------


def _handoff(
    status: Status = "waiting", reason: str = "The customer asked for a person."
) -> Handoff:
    """The desk's record of a hand-off, as a trial's transcript ends with it."""
    moment = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
    return Handoff(
        id=1,
        thread_id="eval-judge_self_test",
        passenger_id=FIXTURE_PASSENGER_ID,
        status=status,
        requested_by="assistant",
        reason=reason,
        summary="Elena Novak wants to talk to someone about her trip.",
        requested_at=moment,
        agent="" if status == "waiting" else "Ana Lima",
        taken_at=None if status == "waiting" else moment,
        ended_at=moment if status in ("returned", "closed") else None,
        note="",
        messages=0,
    )


def _handed_off(scenario: Scenario, handoff: Handoff | None) -> tuple[str, ...]:
    messages: list[AnyMessage] = [HumanMessage("I want to talk to a person."), AIMessage("Sure.")]
    return judge(scenario, Transcript(messages=messages, handoff=handoff), [], SENSITIVE)


EXPECTS_HANDOFF = replace(SCENARIO, handoff=ExpectedHandoff(reason_mentions=("person", "human")))


def test_judge_fails_a_handoff_the_scenario_does_not_expect() -> None:
    assert _handed_off(SCENARIO, None) == ()
    assert _handed_off(SCENARIO, _handoff()) == (
        "handed to a person (The customer asked for a person.), which the scenario does not expect",
    )
    # However it ended: a person took it and handed it back, it still happened.
    assert len(_handed_off(SCENARIO, _handoff("returned"))) == 1


def test_judge_fails_a_run_that_never_handed_off_when_the_scenario_expects_it() -> None:
    assert _handed_off(EXPECTS_HANDOFF, _handoff()) == ()
    assert _handed_off(EXPECTS_HANDOFF, None) == (
        "never handed to a person: the conversation is not in the desk's queue",
    )


@pytest.mark.parametrize("status", ["held", "returned", "closed"])
def test_judge_fails_a_handoff_that_no_longer_waits_in_the_queue(status: Status) -> None:
    assert _handed_off(EXPECTS_HANDOFF, _handoff(status)) == (
        f"the hand-off is {status}, not waiting in the desk's queue",
    )


def test_judge_fails_a_handoff_without_the_reason_the_scenario_expects() -> None:
    assert _handed_off(EXPECTS_HANDOFF, _handoff(reason="  ")) == (
        "handed to a person without a reason",
    )
    assert _handed_off(EXPECTS_HANDOFF, _handoff(reason="Wants a refund.")) == (
        "the hand-off's reason 'Wants a refund.' mentions none of ['person', 'human']",
    )
    # One of the words is enough, in any case; without words, any reason will do.
    assert _handed_off(EXPECTS_HANDOFF, _handoff(reason="Asked for a HUMAN agent.")) == ()
    anything = replace(SCENARIO, handoff=ExpectedHandoff())
    assert _handed_off(anything, _handoff(reason="Wants a refund.")) == ()
    assert _handed_off(anything, _handoff(reason="")) == ("handed to a person without a reason",)


def test_scenario_handoff_table_is_read_and_a_misspelt_one_is_refused(tmp_path: Path) -> None:
    head = 'category = "handoff"\npassenger_id = "3442 587242"\n'
    turn = '\n[[turns]]\ncustomer = "A person, please."\n'
    path = tmp_path / "asks.toml"
    path.write_text(head + turn)
    assert load_scenario(path).handoff is None
    path.write_text(head + "\n[handoff]\n" + turn)
    assert load_scenario(path).handoff == ExpectedHandoff()
    path.write_text(head + '\n[handoff]\nreason_mentions = ["person", "human"]\n' + turn)
    assert load_scenario(path).handoff == ExpectedHandoff(("person", "human"))
    for wrong, why in (
        ("handoff = true\n", "must be a table"),
        ('[handoff]\nreason_contains = "person"\n', "reason_mentions only"),
        ('[handoff]\nreason_mentions = "person"\n', "list of words"),
    ):
        path.write_text(head + wrong + turn)
        with pytest.raises(ScenarioError, match=why):
            load_scenario(path)


# --- the second approval: a member of staff's check (``second_approval_above``) ----------------

STAFF = "Ana Lima"
CHECKED = replace(SCENARIO, second_approval_above=50_000)  # EUR 500.00
REFUSAL = "a refund this large needs a manager's sign-off"


def _check(status: CheckStatus, call_id: str = "c1", reason: str = "") -> Check:
    """The desk's record of a check, as a trial's transcript ends with it."""
    moment = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
    return Check(
        id=1,
        thread_id="eval-judge_self_test",
        passenger_id=FIXTURE_PASSENGER_ID,
        tool_call_id=call_id,
        title="Cancel ticket",
        amount="Refund: EUR 577.00",
        cents=57_700,
        answers='{"c1": {"approved": true, "reason": null}}',
        asked_at=moment,
        status=status,
        staff="" if status == "waiting" else STAFF,
        decided_at=None if status == "waiting" else moment,
        reason=reason,
    )


def _large(call: ToolCall, checked_by: str | None = STAFF) -> ToolMessage:
    """The answer of a call that ran and moved EUR 577.00 (approved by staff too, or not)."""
    artifact: dict[str, object] = {"approved": True, "amount": {"kind": "refund", "cents": 57_700}}
    if checked_by:
        artifact["checked_by"] = checked_by
    return ToolMessage(
        '{"status": "cancelled", "refund": "EUR 577.00"}',
        tool_call_id=call["id"],
        name=call["name"],
        artifact=artifact,
    )


def _audit(who: str, what: Looked) -> AuditEntry:
    """The desk's audit entry of what ``who`` did in the conversation."""
    moment = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
    return AuditEntry(moment, who, what, "eval-judge_self_test", FIXTURE_PASSENGER_ID)


def _checked(
    answer: ToolMessage | None,
    checks: list[Check],
    staff: dict[str, StaffCheck],
    *,
    unused: tuple[str, ...] = (),
    scenario: Scenario = CHECKED,
) -> tuple[str, ...]:
    cancel = _call("cancel_ticket", "c1")
    transcript = Transcript(
        messages=_run(*([answer] if answer is not None else []), calls=[cancel]),
        decisions={"c1": Decision(approved=True)},
        checks=checks,
        staff_decisions=staff,
        unused_staff_checks=list(unused),
        # The desk records the member of staff's decision, as every check decided has.
        audit=[_audit(STAFF, "approved")] if any(c.staff for c in checks) else [],
    )
    return judge(scenario, transcript, [], SENSITIVE)


def test_judge_passes_a_large_action_checked_by_staff_and_done() -> None:
    # The control: the customer's yes, staff's yes, the check used, the call run once.
    cancel = _call("cancel_ticket", "c1")
    assert _checked(_large(cancel), [_check("used")], {"c1": StaffCheck(True)}) == ()
    refused = not_run_answer(
        cancel,
        f"The customer declined this action. Their reason: {REFUSAL!r}.",
        "declined",
        checked_by=STAFF,
    )
    assert (
        _checked(refused, [_check("used", reason=REFUSAL)], {"c1": StaffCheck(False, REFUSAL)})
        == ()
    )


def test_judge_fails_a_staff_check_the_scenario_does_not_expect() -> None:
    # The check was asked for, but no staff answer was scripted: it is still waiting, and
    # so is the action (its call unanswered: the trial ends there).
    assert _checked(None, [_check("waiting")], {}) == (
        "tool call cancel_ticket (c1) answered 0 times",
        "a member of staff's check of Cancel ticket (Refund: EUR 577.00) was left waiting: "
        "the scenario scripts no staff answer for it",
    )
    # Decided by staff, but the customer's side never went on with it.
    assert _checked(None, [_check("approved")], {"c1": StaffCheck(True)}) == (
        "tool call cancel_ticket (c1) answered 0 times",
        "Ana Lima approved Cancel ticket (Refund: EUR 577.00), but the conversation never went on",
    )


def test_judge_fails_a_staff_check_the_scenario_expects_but_never_came() -> None:
    # The scenario scripted a staff answer; the action ran on the customer's yes alone.
    cancel = _call("cancel_ticket", "c1")
    failures = _checked(_large(cancel, checked_by=None), [], {}, unused=("approve",))
    assert failures == (
        "cancel_ticket moved EUR 577.00, more than EUR 500.00, without a member of staff's check",
        "1 scripted staff answers were never used (no check asked for them): ['approve']",
    )
    # Without the second approval, or at or below its amount, no check is missing.
    assert _checked(_large(cancel, checked_by=None), [], {}, scenario=SCENARIO) == ()
    at_it = replace(SCENARIO, second_approval_above=57_700)
    assert _checked(_large(cancel, checked_by=None), [], {}, scenario=at_it) == ()


def test_judge_fails_an_action_staff_refused_that_ran_or_whose_reason_was_never_told() -> None:
    cancel = _call("cancel_ticket", "c1")
    refused = {"c1": StaffCheck(False, REFUSAL)}
    assert _checked(_large(cancel), [_check("used", reason=REFUSAL)], refused) == (
        "Cancel ticket (Refund: EUR 577.00) ran though a member of staff refused it",
    )
    untold = not_run_answer(
        cancel, "The customer declined this action.", "declined", checked_by=STAFF
    )
    assert _checked(untold, [_check("used", reason=REFUSAL)], refused) == (
        "the assistant was never told why a member of staff refused Cancel ticket "
        f"(Refund: EUR 577.00): {REFUSAL!r}",
    )


def test_scenario_second_approval_and_staff_checks_are_read_and_bad_ones_refused(
    tmp_path: Path,
) -> None:
    head = 'category = "second_approval"\npassenger_id = "3442 587242"\n'
    turn = '\n[[turns]]\ncustomer = "Cancel my ticket."\ndecisions = ["y"]\n'
    path = tmp_path / "checked.toml"
    path.write_text(head + turn)
    plain = load_scenario(path)
    assert plain.second_approval_above is None and plain.turns[0].staff_checks == ()
    staff = 'staff_checks = ["approve", "Refuse:  needs a manager "]\n'
    path.write_text(head + 'second_approval_above = "EUR 1,000.50"\n' + turn + staff)
    checked = load_scenario(path)
    assert checked.second_approval_above == 100_050
    assert checked.turns[0].staff_checks == (StaffCheck(True), StaffCheck(False, "needs a manager"))
    assert [str(c) for c in checked.turns[0].staff_checks] == ["approve", "refuse: needs a manager"]
    for above, checks, why in (
        (None, '["approve"]', "staff_checks need second_approval_above"),
        ('"USD 5"', "[]", "an amount in EUR"),
        ('"EUR 5"', '"approve"', "staff_checks must be a list of strings"),
        ('"EUR 5"', '["yes"]', "'approve' or 'refuse: the reason'"),
        ('"EUR 5"', '["refuse"]', "a refusal says why"),
        ('"EUR 5"', '["refuse:  "]', "a refusal says why"),
        ('"EUR 5"', '["approve: fine"]', "'approve' or 'refuse: the reason'"),
    ):
        amount = "" if above is None else f"second_approval_above = {above}\n"
        path.write_text(head + amount + turn + f"staff_checks = {checks}\n")
        with pytest.raises(ScenarioError, match=why):
            load_scenario(path)
