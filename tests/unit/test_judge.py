"""The scenario judge's procedural checks, on hand-built transcripts (no graph, no database).

``evaluation.judge.judge`` must fail a run that broke the conversation's own rules even
when the database ended right: every tool call answered exactly once, and no sensitive
call run without the customer's recorded yes. The scenarios of ``data/scenarios`` (in
``tests/integration/test_scenarios.py``) only reach the judge through the real graph,
which never breaks these rules, so these checks are tested here, one rule at a time,
with a clean transcript beside them that must pass.
"""

from __future__ import annotations

from dataclasses import replace

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage

from assistants.approvals import Decision, not_run_answer
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from evaluation.judge import Transcript, judge
from evaluation.scenarios import Scenario

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
