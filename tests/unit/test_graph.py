"""Graph flows with a scripted model, an in-memory saver and a generated database."""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, RetryPolicy
from sqlalchemy import text

from assistants.approvals import facts_of, was_executed
from assistants.assistant import STEP_RESERVE
from assistants.prompts import EMPTY_ANSWER_APOLOGY, STEP_LIMIT_APOLOGY
from conversations.assistant import Decision, ModelProviderError, Thread, TravelAssistant
from conversations.loop import turn_loop
from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import (
    FIXTURE_FLIGHT_NO,
    FIXTURE_PASSENGER_ID,
    FIXTURE_TICKET_NO,
    FLOWN_PASSENGER_ID,
)
from graph import draw_mermaid
from tests.support.assistants import build_assistant
from tests.support.databases import FIXED_NOW
from tests.support.flights import change_call, fixture_segment
from tests.support.scripted import ScriptedChatModel, call, say

SNAPSHOT = Path(__file__).parent / "snapshots" / "graph.mmd"
THREAD = Thread("t-1", FIXTURE_PASSENGER_ID)
NO_RETRY_DELAY = RetryPolicy(initial_interval=0.0, backoff_factor=1.0, jitter=False, max_attempts=3)


@pytest.fixture
def assistant(make_assistant: Callable[..., TravelAssistant]) -> TravelAssistant:
    return make_assistant(retry_policy=NO_RETRY_DELAY)


def run(events: Iterator[Any]) -> list[Any]:
    return list(events)


def history(assistant: TravelAssistant, thread: Thread = THREAD) -> list[AnyMessage]:
    return assistant.messages(thread)


def stack(assistant: TravelAssistant, thread: Thread = THREAD) -> list[str]:
    snapshot = assistant.graph.get_state(assistant.config(thread))
    return list(snapshot.values.get("dialog_state", []))


def assert_every_call_answered_once(messages: list[AnyMessage]) -> None:
    calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    answers = Counter(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    assert sorted(answers) == sorted(calls), (calls, answers)
    assert all(count == 1 for count in answers.values()), answers


def tool_answer(messages: list[AnyMessage], call_id: str) -> ToolMessage:
    return next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id)


def system_prompt(received: list[Any]) -> str:
    first = received[0]
    assert isinstance(first, SystemMessage)
    return str(first.content)


# --- the primary assistant -----------------------------------------------------------------


def test_graph_primary_answers_with_a_tool(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    search = call("search_flights", {"departure_airport": "CDG", "arrival_airport": "BSL"})
    model.extend(say("", search), say("There are several flights to Basel."))
    run(assistant.send(THREAD, "Any flights from Paris to Basel?"))
    messages = history(assistant)
    answer = tool_answer(messages, search["id"])
    assert answer.status != "error"
    assert FIXTURE_FLIGHT_NO in str(answer.content)
    assert messages[-1].content == "There are several flights to Basel."
    assert stack(assistant) == []
    assert_every_call_answered_once(messages)


def test_graph_user_info_reaches_the_request(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello!"))
    run(assistant.send(THREAD, "hi"))
    prompt = system_prompt(model.received[0])
    # Nothing that changes during a conversation is in the system prompt (prompt cache):
    # the bookings and the time come with the customer message.
    assert FIXTURE_TICKET_NO not in prompt and "Current time" not in prompt
    [customer] = [m for m in model.received[0] if isinstance(m, HumanMessage)]
    bookings = assistant.user_info(THREAD)
    assert FIXTURE_TICKET_NO in bookings
    assert (
        customer.content
        == f"<bookings>\n{bookings}\n</bookings>\n[2026-05-04 09:00 UTC, Monday] hi"
    )
    assert assistant.messages(THREAD)[0].content == "hi"  # saved as the customer wrote it


def test_graph_bookings_come_again_only_where_they_changed(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    model.extend(say("Hello!"), say("Still here."), say("Noted."))
    run(assistant.send(THREAD, "hi"))
    run(assistant.send(THREAD, "anything new?"))  # nothing changed: no bookings again
    second = [m for m in model.received[-1] if isinstance(m, HumanMessage)]
    assert [str(m.content).count("<bookings") for m in second] == [1, 0]
    with travel_db.transaction() as session:  # a booking made elsewhere (another desk)
        session.execute(
            text("UPDATE hotel_bookings SET status = 'cancelled' WHERE passenger_id = :p"),
            {"p": FIXTURE_PASSENGER_ID},
        )
    run(assistant.send(THREAD, "and now?"))
    third = [str(m.content) for m in model.received[-1] if isinstance(m, HumanMessage)]
    # The earlier messages are sent as before (the provider's cache still applies); the
    # new one says what changed, and only that.
    assert third[:2] == [str(m.content) for m in second]
    assert third[2].startswith("<bookings changed>\nHotels:\n- booking")
    assert "cancelled" in third[2] and "Tickets" not in third[2]


def test_graph_each_message_keeps_the_time_it_was_received(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    model.extend(say("Hello!"), say("Still here."))
    run(assistant.send(THREAD, "hi"))
    first_prompt = model.received[-1]
    travel_db.clock = fixed_clock(FIXED_NOW + timedelta(minutes=7))
    run(assistant.send(THREAD, "are you there?"))
    second_prompt = model.received[-1]
    # The earlier call is the start of the later one: a prompt cache can reuse all of it.
    assert second_prompt[: len(first_prompt)] == first_prompt
    assert second_prompt[-1].content == "[2026-05-04 09:07 UTC, Monday] are you there?"


ROUTES = [
    (
        "ToFlightBookingAssistant",
        {"request": "change my flight"},
        "update_flight",
        "flights specialist",
    ),
    (
        "ToBookCarRental",
        {
            "location": "Basel",
            "start_date": "2026-05-10",
            "end_date": "2026-05-12",
            "request": "small car",
        },
        "book_car_rental",
        "car-rental specialist",
    ),
    (
        "ToHotelBookingAssistant",
        {
            "location": "Basel",
            "checkin_date": "2026-05-10",
            "checkout_date": "2026-05-12",
            "request": "",
        },
        "book_hotel",
        "hotel specialist",
    ),
    (
        "ToBookExcursion",
        {"location": "Basel", "request": "museum"},
        "book_excursion",
        "excursions specialist",
    ),
]


@pytest.mark.parametrize(("tool", "args", "specialist", "title"), ROUTES)
def test_graph_delegates_and_returns(
    assistant: TravelAssistant,
    model: ScriptedChatModel,
    tool: str,
    args: dict[str, Any],
    specialist: str,
    title: str,
) -> None:
    route = call(tool, args)
    model.extend(say("", route), say("Which dates suit you?"))
    run(assistant.send(THREAD, "I need help"))
    assert stack(assistant) == [specialist]
    assert assistant.active_assistant(THREAD) == specialist
    entry = tool_answer(history(assistant), route["id"])
    assert title in str(entry.content)
    # The specialist keeps control on the next turn, with its own prompt and tools.
    leave = call("CompleteOrEscalate", {"cancel": True, "reason": "customer changed their mind"})
    model.extend(say("", leave), say("Anything else I can do?"))
    run(assistant.send(THREAD, "never mind"))
    assert title in system_prompt(model.received[2])
    assert any("CompleteOrEscalate" in tools for tools in model.bound_tools)
    assert stack(assistant) == []
    assert "customer changed their mind" in str(
        tool_answer(history(assistant), leave["id"]).content
    )
    assert "Meridian Travel" in system_prompt(model.received[3])
    assert_every_call_answered_once(history(assistant))


# --- approvals -------------------------------------------------------------------------------


def enter_flights(
    assistant: TravelAssistant, model: ScriptedChatModel, *calls: dict[str, Any]
) -> None:
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})), say("", *calls)
    )
    run(assistant.send(THREAD, "Please move my flight to tomorrow"))


def test_graph_sensitive_call_stops_and_approval_changes_db(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    enter_flights(assistant, model, change)
    pending = assistant.pending_actions(THREAD)
    assert [(p.tool_call_id, p.name, p.assistant) for p in pending] == [
        (change["id"], "update_ticket_to_new_flight", "update_flight")
    ]
    assert fixture_segment(travel_db).flight_id != change["args"]["new_flight_id"]
    model.extend(say("Done: you fly tomorrow."))
    run(assistant.resolve(THREAD, {change["id"]: Decision(True)}))
    assert fixture_segment(travel_db).flight_id == change["args"]["new_flight_id"]
    assert assistant.pending_actions(THREAD) == []
    assert tool_answer(history(assistant), change["id"]).status != "error"
    assert_every_call_answered_once(history(assistant))


def test_a_turns_nodes_and_routers_run_on_the_loop_without_a_thread_hand_off(
    assistant: TravelAssistant,
    model: ScriptedChatModel,
    travel_db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every node and router of a turn (the bookings, the primary's tools, entering and
    # leaving a specialist, its safe and sensitive tools) runs in place on the turn loop:
    # the only work handed to a worker thread is the scripted model's own (one per call).
    handed: list[str] = []
    loop = turn_loop()
    original = loop.run_in_executor

    def recording(executor: Any, func: Any, *args: Any) -> Any:
        inner = func.args[0] if isinstance(func, functools.partial) and func.args else func
        handed.append(getattr(inner, "__qualname__", repr(inner)))
        return original(executor, func, *args)

    monkeypatch.setattr(loop, "run_in_executor", recording)
    change = change_call(travel_db)
    model.extend(say("", call("lookup_policy", {"query": "change a flight"})))
    enter_flights(assistant, model, change)
    model.extend(say("", call("CompleteOrEscalate", {"cancel": True, "reason": "No."})))
    model.extend(say("Your booking stays as it is."))
    run(assistant.resolve(THREAD, {change["id"]: Decision(False, "too expensive")}))
    calls = len(model.received)
    assert calls == 5 and assert_every_call_answered_once(history(assistant)) is None
    assert handed == ["ScriptedChatModel._astream.<locals>.<lambda>"] * calls


def test_graph_denial_keeps_db_and_tells_model_the_reason(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    enter_flights(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    model.extend(say("Understood, I left your booking as it is."))
    run(assistant.resolve(THREAD, {change["id"]: Decision(False, "too expensive")}))
    assert fixture_segment(travel_db).flight_id == before
    denial = tool_answer(history(assistant), change["id"])
    assert denial.status == "error"
    assert not was_executed(denial)
    assert facts_of(denial).declined
    assert facts_of(denial).reason == "too expensive"
    assert "too expensive" in str(denial.content)
    assert any(
        isinstance(m, ToolMessage) and "too expensive" in str(m.content) for m in model.received[-1]
    )
    assert_every_call_answered_once(history(assistant))


def test_graph_missing_decision_fails_closed(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    enter_flights(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    model.extend(say("Nothing was changed."))
    run(assistant.resolve(THREAD, {}))
    assert fixture_segment(travel_db).flight_id == before
    assert tool_answer(history(assistant), change["id"]).status == "error"


# A raw resume without decisions asks again: tests/unit/test_native_approvals.py.


def test_graph_going_on_without_an_answer_runs_nothing_and_says_how_to_answer(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    # The tutorial's way of going on after the stop is not a yes: it returns at once with
    # the requests, each saying how to answer; an explicit accept then runs the call.
    change = change_call(travel_db)
    enter_flights(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    config = assistant.config(THREAD)
    for _ in range(2):
        result = assistant.graph.invoke(None, config)
        (request,) = result["__interrupt__"][0].value
        assert request["tool_call_id"] == change["id"]
        assert 'Command(resume={"type": "accept"})' in request["answer_with"]
        assert fixture_segment(travel_db).flight_id == before
    model.extend(say("Done."))
    assistant.graph.invoke(Command(resume={"type": "accept"}), config)
    assert fixture_segment(travel_db).flight_id == change["args"]["new_flight_id"]
    assert was_executed(tool_answer(history(assistant), change["id"]))


@pytest.mark.parametrize(
    "answer",
    [
        {"approved": True},  # the decision's old shape, not an answer
        {"type": "yes"},
        {"type": "accept", "refused": True},
        {"type": "ignore", "args": "fine, go ahead"},
        {"type": "edit", "args": {"action": "cancel_ticket", "args": {}}},
    ],
    ids=["old-shape", "unknown-type", "refused", "ignore", "edit-to-another-tool"],
)
def test_graph_malformed_or_negative_answers_fail_closed(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database, answer: Any
) -> None:
    change = change_call(travel_db)
    enter_flights(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    model.extend(say("Nothing changed."))
    assistant.graph.invoke(Command(resume={change["id"]: answer}), assistant.config(THREAD))
    assert fixture_segment(travel_db).flight_id == before
    answered = [m for m in history(assistant) if getattr(m, "tool_call_id", None) == change["id"]]
    assert all(not was_executed(m) for m in answered)


def test_graph_parallel_sensitive_calls_approve_one_deny_other(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    cancel = call("cancel_ticket", {"ticket_no": FIXTURE_TICKET_NO})
    enter_flights(assistant, model, change, cancel)
    assert [p.tool_call_id for p in assistant.pending_actions(THREAD)] == [
        change["id"],
        cancel["id"],
    ]
    model.extend(say("Your ticket is moved and not cancelled."))
    run(
        assistant.resolve(
            THREAD, {change["id"]: Decision(True), cancel["id"]: Decision(False, "keep it")}
        )
    )
    messages = history(assistant)
    assert fixture_segment(travel_db).flight_id == change["args"]["new_flight_id"]
    assert tool_answer(messages, change["id"]).status != "error"
    assert "keep it" in str(tool_answer(messages, cancel["id"]).content)
    assert_every_call_answered_once(messages)


def test_graph_answers_keep_the_amount_the_customer_decided_on(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    # Callers show the amount of an earlier approval from the answer's facts, not its words.
    change = change_call(travel_db)
    cancel = call("cancel_ticket", {"ticket_no": FIXTURE_TICKET_NO})
    enter_flights(assistant, model, change, cancel)
    previews = {
        a.tool_call_id: assistant.preview(THREAD, a) for a in assistant.pending_actions(THREAD)
    }
    decisions = {
        call_id: Decision(call_id == change["id"], None, tuple(p.lines), amount=p.amount)
        for call_id, p in previews.items()
    }
    model.extend(say("Your ticket is moved and not cancelled."))
    run(assistant.resolve(THREAD, decisions))
    messages = history(assistant)
    for call_id, kind in ((change["id"], "pay"), (cancel["id"], "refund")):
        facts = facts_of(tool_answer(messages, call_id))
        amount = previews[call_id].amount
        assert amount is not None and amount.kind == kind
        assert facts.amount == amount
        assert facts.amount_line == previews[call_id].lines[-1]
    assert facts_of(tool_answer(messages, change["id"])).approved
    assert facts_of(tool_answer(messages, cancel["id"])).declined


def test_graph_mixed_batch_runs_safe_calls_before_stopping(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    search = call("search_flights", {"departure_airport": "CDG", "arrival_airport": "BSL"})
    enter_flights(assistant, model, change, search)
    messages = history(assistant)
    assert tool_answer(messages, search["id"]).status != "error"
    assert [p.tool_call_id for p in assistant.pending_actions(THREAD)] == [change["id"]]
    snapshot = assistant.graph.get_state(assistant.config(THREAD))
    assert snapshot.next == ("update_flight_sensitive_tools",)


def test_graph_routing_call_beside_search(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    search = call("search_flights", {"departure_airport": "CDG"})
    route = call(
        "ToHotelBookingAssistant",
        {
            "location": "Basel",
            "checkin_date": "2026-05-10",
            "checkout_date": "2026-05-11",
            "request": "",
        },
    )
    second = call(
        "ToBookCarRental",
        {"location": "Basel", "start_date": "2026-05-10", "end_date": "2026-05-11", "request": ""},
    )
    model.extend(say("", route, search, second), say("Which hotel do you like?"))
    run(assistant.send(THREAD, "hotel and car in Basel, and flights from Paris"))
    messages = history(assistant)
    assert stack(assistant) == ["book_hotel"]
    assert tool_answer(messages, search["id"]).status != "error"
    assert tool_answer(messages, second["id"]).status == "error"
    assert "Not started" in str(tool_answer(messages, second["id"]).content)
    not_started = facts_of(tool_answer(messages, second["id"]))
    assert (not_started.not_run, not_started.specialist) == (
        "one_specialist_at_a_time",
        "book_hotel",
    )
    entered = facts_of(tool_answer(messages, route["id"]))
    assert (entered.hand_over, entered.specialist) == ("enter", "book_hotel")
    assert_every_call_answered_once(messages)


def test_graph_offers_web_search_when_tavily_key_is_set(
    travel_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tavily

    searched: list[str] = []

    class FakeTavily:
        def __init__(self, api_key: str) -> None:
            assert api_key == "tvly-test-key"

        def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
            # A search waits on the network: the turn loop goes on meanwhile (its node
            # runs in LangGraph's executor, not in place on the loop).
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), turn_loop()).result(timeout=5)
            searched.append(query)
            return {
                "results": [{"title": "Basel weather", "url": "https://x.test", "content": "Sunny"}]
            }

    monkeypatch.setattr(tavily, "TavilyClient", FakeTavily)
    model = ScriptedChatModel()
    assistant = build_assistant(
        travel_db, model, retry_policy=NO_RETRY_DELAY, tavily_api_key="tvly-test-key"
    )
    web = call("tavily_search", {"query": "Basel weather tomorrow"})
    model.extend(say("", web), say("Sunny."))
    run(assistant.send(THREAD, "What's the weather in Basel?"))
    assert "tavily_search" in model.bound_tools[0]
    assert searched == ["Basel weather tomorrow"]
    assert "Sunny" in str(tool_answer(history(assistant), web["id"]).content)


def test_graph_offers_no_web_search_without_tavily_key(travel_db: Database) -> None:
    model = ScriptedChatModel()
    build_assistant(travel_db, model)
    assert model.bound_tools and all("tavily_search" not in names for names in model.bound_tools)


def test_graph_unknown_tool_is_an_error_not_an_approval(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    bogus = call("delete_all_bookings", {})
    model.extend(say("", bogus), say("Sorry, I cannot do that."))
    run(assistant.send(THREAD, "delete everything"))
    assert assistant.pending_actions(THREAD) == []
    answer = tool_answer(history(assistant), bogus["id"])
    assert answer.status == "error"
    assert "delete_all_bookings is not a tool" in str(answer.content)
    assert not was_executed(answer)


def test_graph_business_error_reaches_model_as_error(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    other = Thread("t-other", FLOWN_PASSENGER_ID)
    model.extend(say("", call("ToFlightBookingAssistant", {"request": "x"})), say("", change))
    run(assistant.send(other, "move ticket"))
    model.extend(say("That ticket is not yours."))
    run(assistant.resolve(other, {change["id"]: Decision(True)}))
    answer = tool_answer(history(assistant, other), change["id"])
    assert answer.status == "error"
    assert FLOWN_PASSENGER_ID in str(answer.content)
    assert fixture_segment(travel_db).flight_id != change["args"]["new_flight_id"]


def test_graph_new_message_while_pending_closes_the_batch(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    enter_flights(assistant, model, change)
    model.extend(say("Sure, what else?"))
    run(assistant.send(THREAD, "actually, wait"))
    messages = history(assistant)
    assert tool_answer(messages, change["id"]).status == "error"
    assert_every_call_answered_once(messages)
    # The answer directly follows the call, then the new customer message.
    index = next(
        i
        for i, m in enumerate(messages)
        if isinstance(m, ToolMessage) and m.tool_call_id == change["id"]
    )
    assert messages[index + 1].content == "actually, wait"


# --- guards ------------------------------------------------------------------------------------


def test_graph_empty_answer_is_retried(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    model.extend(say(""), say("Here you go."))
    run(assistant.send(THREAD, "hello"))
    assert history(assistant)[-1].content == "Here you go."
    assert len(model.received) == 2


def test_graph_empty_answers_end_in_apology(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    model.extend(say(""), say(""), say(""))
    run(assistant.send(THREAD, "hello"))
    assert history(assistant)[-1].content == EMPTY_ANSWER_APOLOGY
    assert not model.script


def test_graph_malformed_tool_call_is_asked_again(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "search_flights",
                "args": '{"limit": ]',
                "id": "c1",
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
    )
    model.extend(broken, say("Fixed."))
    run(assistant.send(THREAD, "flights?"))
    # The problem is stated in the system prompt: a second customer message in a row
    # would be refused by strict chat templates.
    assert "could not be read" in system_prompt(model.received[1])
    assert model.received[1][1:] == model.received[0][1:]
    assert history(assistant)[-1].content == "Fixed."


def test_graph_step_limit_ends_politely(model: ScriptedChatModel, travel_db: Database) -> None:
    assistant = build_assistant(
        travel_db, model, retry_policy=NO_RETRY_DELAY, recursion_limit=STEP_RESERVE + 4
    )
    model.extend(
        *(say("", call("search_flights", {"departure_airport": "CDG"})) for _ in range(10))
    )
    run(assistant.send(THREAD, "search forever"))
    messages = history(assistant)
    assert messages[-1].content == STEP_LIMIT_APOLOGY
    assert_every_call_answered_once(messages)


def test_graph_provider_error_is_retried_then_raised(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    model.extend(*(openai.APITimeoutError(request=request) for _ in range(3)))
    with pytest.raises(ModelProviderError, match="did not answer in time") as raised:
        run(assistant.send(THREAD, "hello"))
    assert raised.value.retryable
    assert "Sending your message again may work" in str(raised.value)
    assert not model.script  # three attempts were made
    messages = history(assistant)
    assert messages[-2].content == "hello"  # the message is kept
    # ... and the turn is closed saying what cut it, not as the customer's cancel.
    assert "model server failed" in str(messages[-1].content)
    assert "the customer cancelled nothing" in str(messages[-1].content)
    model.extend(say("Back again."))
    run(assistant.send(THREAD, "hello?"))
    assert history(assistant)[-1].content == "Back again."


def test_graph_provider_error_recovers_within_retries(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    model.extend(openai.APITimeoutError(request=request), say("Made it."))
    run(assistant.send(THREAD, "hello"))
    assert history(assistant)[-1].content == "Made it."


# --- resume and drawing ------------------------------------------------------------------------


def test_graph_resume_pending_approval_from_new_saver(
    model: ScriptedChatModel, travel_db: Database, tmp_path: Path
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    first = build_assistant(
        travel_db, model, SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    )
    change = change_call(travel_db)
    enter_flights(first, model, change)
    assert first.pending_actions(THREAD)

    later = ScriptedChatModel(script=[say("Your flight is changed.")])
    second = build_assistant(
        travel_db, later, SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    )
    assert [p.tool_call_id for p in second.pending_actions(THREAD)] == [change["id"]]
    assert second.active_assistant(THREAD) == "update_flight"
    run(second.resolve(THREAD, {change["id"]: Decision(True)}))
    assert fixture_segment(travel_db).flight_id == change["args"]["new_flight_id"]
    assert history(second, THREAD)[-1].content == "Your flight is changed."


def test_graph_interrupts_before_every_sensitive_node(assistant: TravelAssistant) -> None:
    assert set(assistant.graph.interrupt_before_nodes) == {
        "update_flight_sensitive_tools",
        "book_car_rental_sensitive_tools",
        "book_hotel_sensitive_tools",
        "book_excursion_sensitive_tools",
    }


def test_graph_mermaid_matches_snapshot() -> None:
    drawing = draw_mermaid()
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(drawing)
    assert SNAPSHOT.exists(), "no snapshot: run UPDATE_SNAPSHOTS=1 pytest, review, commit"
    assert drawing == SNAPSHOT.read_text()


def test_graph_huge_integer_argument_keeps_the_conversation(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    # msgpack cannot store an integer past 64 bits: the saved step used to fail, and the
    # conversation with it.
    bogus = call("cancel_hotel", {"booking_id": 2**64})
    model.extend(
        say(
            "",
            call(
                "ToHotelBookingAssistant",
                {
                    "location": "Basel",
                    "checkin_date": "2026-05-10",
                    "checkout_date": "2026-05-11",
                    "request": "",
                },
            ),
        ),
        say("", bogus),
    )
    run(assistant.send(THREAD, "cancel my hotel"))
    (pending,) = assistant.pending_actions(THREAD)
    assert pending.args["booking_id"] == str(2**64)
    model.extend(say("That booking number is not valid."))
    run(assistant.resolve(THREAD, {pending.tool_call_id: Decision(True)}))
    answer = tool_answer(history(assistant), bogus["id"])
    assert answer.status == "error"
    assert len(str(answer.content)) <= 300
    model.extend(say("Anything else?"))
    run(assistant.send(THREAD, "ok"))
    assert history(assistant)[-1].content == "Anything else?"
