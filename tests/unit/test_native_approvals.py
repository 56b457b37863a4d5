"""Approvals the LangGraph way: ``interrupt`` requests and ``Command(resume=...)`` answers.

The graph is driven as a LangGraph client drives it (``graph.invoke`` with ``None`` or a
``Command``), over the scripted model and the generated database; the database says
whether an action ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall
from langgraph.types import Command, RetryPolicy

from assistants.approvals import facts_of, was_executed
from conversations.assistant import Thread, TravelAssistant
from db.engine import Database
from db.errors import MissingPassengerError
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.flights import change_call, fixture_segment
from tests.support.scripted import ScriptedChatModel, call, say

THREAD = Thread("native-1", FIXTURE_PASSENGER_ID)
NO_RETRY = RetryPolicy(max_attempts=1)


@pytest.fixture
def assistant(make_assistant: Callable[..., TravelAssistant]) -> TravelAssistant:
    return make_assistant(retry_policy=NO_RETRY)


def stop_before_change(
    assistant: TravelAssistant, model: ScriptedChatModel, change: dict[str, Any]
) -> None:
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})), say("", change)
    )
    list(assistant.send(THREAD, "Please move my flight to tomorrow"))
    assert [a.tool_call_id for a in assistant.pending_actions(THREAD)] == [change["id"]]


def requests(assistant: TravelAssistant) -> list[dict[str, Any]]:
    snapshot = assistant.graph.get_state(assistant.config(THREAD))
    (stop,) = snapshot.interrupts
    assert isinstance(stop.value, list)
    return stop.value


def answer(assistant: TravelAssistant, call_id: str) -> Any:
    return next(
        m
        for m in assistant.messages(THREAD)
        if getattr(m, "tool_call_id", None) == call_id and m.type == "tool"
    )


def test_native_resume_without_a_decision_asks_with_the_terminals_preview(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    before = fixture_segment(travel_db).flight_id

    assistant.graph.invoke(None, assistant.config(THREAD))  # no approvals in the config

    assert fixture_segment(travel_db).flight_id == before
    [pending] = assistant.pending_actions(THREAD)
    preview = assistant.preview(THREAD, pending)
    assert preview.amount is not None
    [request] = requests(assistant)
    assert request["action_request"] == {"action": change["name"], "args": change["args"]}
    assert request["config"] == {
        "allow_ignore": True,
        "allow_respond": True,
        "allow_edit": True,
        "allow_accept": True,
    }
    assert request["tool_call_id"] == change["id"]
    assert request["preview"]["lines"] == preview.lines
    assert request["preview"]["amount"] == preview.amount.as_data()
    assert all(line in request["description"] for line in preview.lines)


def test_native_accept_runs_the_action_as_shown(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    [pending] = assistant.pending_actions(THREAD)
    shown = assistant.preview(THREAD, pending)
    model.extend(say("Your flight is changed."))

    # Straight from the stop before the action, as Studio's resume sends it.
    assistant.graph.invoke(
        Command(resume=[{"type": "accept", "args": None}]), assistant.config(THREAD)
    )

    assert fixture_segment(travel_db).flight_id == change["args"]["new_flight_id"]
    done = answer(assistant, change["id"])
    assert was_executed(done)
    facts = facts_of(done)
    assert facts.approved and list(facts.shown) == shown.lines and facts.amount == shown.amount
    assert assistant.pending_actions(THREAD) == []


def test_native_response_declines_with_the_reason(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    model.extend(say("Fine, I left it."))
    assistant.graph.invoke(None, assistant.config(THREAD))
    assistant.graph.invoke(
        Command(resume={change["id"]: {"type": "response", "args": "too expensive"}}),
        assistant.config(THREAD),
    )
    assert fixture_segment(travel_db).flight_id == before
    facts = facts_of(answer(assistant, change["id"]))
    assert facts.declined and facts.reason == "too expensive"


def test_native_edit_runs_the_edited_call_and_the_history_shows_it(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    later = change_call(travel_db, days=3)["args"]
    stop_before_change(assistant, model, change)
    model.extend(say("Moved to the later flight."))
    edit = {"type": "edit", "args": {"action": change["name"], "args": later}}
    assistant.graph.invoke(Command(resume=edit), assistant.config(THREAD))
    ran = answer(assistant, change["id"])
    assert fixture_segment(travel_db).flight_id == later["new_flight_id"], ran.content
    calls = [
        c for m in assistant.messages(THREAD) if isinstance(m, AIMessage) for c in m.tool_calls
    ]
    assert [c["args"] for c in calls if c["id"] == change["id"]] == [later]
    assert was_executed(answer(assistant, change["id"]))


@pytest.mark.parametrize(
    "edit",
    [
        # Another action, with arguments the pending one would take: still refused.
        lambda change: {"action": "cancel_ticket", "args": change["args"]},
        # The same action, loosely typed: true is no flight id, "3" no number.
        lambda change: {
            "action": change["name"],
            "args": {**change["args"], "new_flight_id": True},
        },
        lambda change: {
            "action": change["name"],
            "args": {**change["args"], "new_flight_id": str(change["args"]["new_flight_id"])},
        },
    ],
    ids=["another-action", "boolean-id", "id-as-text"],
)
def test_native_edit_is_refused_unless_it_is_the_pending_action_strictly_typed(
    assistant: TravelAssistant,
    model: ScriptedChatModel,
    travel_db: Database,
    edit: Callable[[ToolCall], dict[str, Any]],
) -> None:
    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    assistant.graph.invoke(
        Command(resume={"type": "edit", "args": edit(change)}), assistant.config(THREAD)
    )
    [asked] = requests(assistant)
    assert asked["error"].startswith("Your answer could not be read, so nothing was done:")
    assert fixture_segment(travel_db).flight_id == before
    assert [a.tool_call_id for a in assistant.pending_actions(THREAD)] == [change["id"]]


@pytest.mark.parametrize(
    "resume",
    [
        "yes",
        [{"type": "accept", "args": None}, {"type": "accept", "args": None}],
        {"no-such-call": {"type": "accept", "args": None}},
        [{"type": "approve"}],
        {"type": "edit", "args": {"action": "cancel_ticket", "args": {}}},
        {"type": "edit", "args": {"action": "update_ticket_to_new_flight", "args": {}}},
    ],
)
def test_native_unreadable_resume_changes_nothing(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database, resume: Any
) -> None:
    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    assistant.graph.invoke(Command(resume=resume), assistant.config(THREAD))
    [asked] = requests(assistant)
    assert asked["error"].startswith("Your answer could not be read, so nothing was done:")
    assert asked["action_request"]["args"] == change["args"]
    assert fixture_segment(travel_db).flight_id == before
    assert [a.tool_call_id for a in assistant.pending_actions(THREAD)] == [change["id"]]
    model.extend(say("Done."))
    assistant.graph.invoke(
        Command(resume=[{"type": "accept", "args": None}]), assistant.config(THREAD)
    )
    assert fixture_segment(travel_db).flight_id == change["args"]["new_flight_id"]


def test_native_resume_without_a_passenger_keeps_the_action_pending(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    before = fixture_segment(travel_db).flight_id
    nobody = {"configurable": {"thread_id": THREAD.thread_id}}
    with pytest.raises(MissingPassengerError) as raised:
        assistant.graph.invoke(Command(resume={"type": "accept"}), nobody)
    assert "travel-assistant" not in str(raised.value)  # no terminal hint on a server
    assert fixture_segment(travel_db).flight_id == before
    assert [a.tool_call_id for a in assistant.pending_actions(THREAD)] == [change["id"]]


def test_native_retried_question_after_a_failed_run_is_kept_once(
    assistant: TravelAssistant, model: ScriptedChatModel
) -> None:
    config = assistant.config(THREAD)
    question = {"messages": [{"role": "user", "content": "Where do I fly?"}]}
    with pytest.raises(Exception):  # noqa: B017 - the scripted model has no reply
        assistant.graph.invoke(question, config)
    model.extend(say("To Basel."))
    assistant.graph.invoke(question, config)
    customer = [m.content for m in assistant.messages(THREAD) if isinstance(m, HumanMessage)]
    assert customer == ["Where do I fly?"]
    assert assistant.messages(THREAD)[-1].content == "To Basel."


def test_a_preview_is_worked_out_again_once_the_data_it_shows_changed(
    assistant: TravelAssistant, model: ScriptedChatModel, travel_db: Database
) -> None:
    # Same saved state, same call id: a committed write in between (a new fare here)
    # means the customer and the decision see the new figures, not the kept ones.
    from sqlalchemy import update

    from db.models import FlightFare

    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    (action,) = assistant.pending_actions(THREAD)
    shown = assistant.preview(THREAD, action)
    assert assistant.preview(THREAD, action) is shown  # kept while nothing moved
    with travel_db.transaction() as session:
        session.execute(
            update(FlightFare)
            .where(FlightFare.flight_id == change["args"]["new_flight_id"])
            .values(amount_cents=FlightFare.amount_cents + 50_000)
        )
    again = assistant.preview(THREAD, action)
    assert again.amount != shown.amount and again.lines != shown.lines


def test_a_preview_is_worked_out_again_once_the_saved_state_changed_under_its_call(
    assistant: TravelAssistant,
    model: ScriptedChatModel,
    travel_db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A message saved before the pending call (a person's, the customer's while a check
    # waits) keeps the call's id but is a new saved state: the preview is worked out again.
    import conversations.assistant as module

    worked_out: list[str] = []
    describe = module.describe_action

    def counted(*args: Any, **kwargs: Any) -> Any:
        worked_out.append(args[2])
        return describe(*args, **kwargs)

    monkeypatch.setattr(module, "describe_action", counted)
    change = change_call(travel_db)
    stop_before_change(assistant, model, change)
    (action,) = assistant.pending_actions(THREAD)
    assistant.preview(THREAD, action)
    assistant.preview(THREAD, action)
    assert len(worked_out) == 1
    assistant.append(THREAD, [HumanMessage("Is it done yet?")])
    (still,) = assistant.pending_actions(THREAD)
    assert still.tool_call_id == action.tool_call_id
    assistant.preview(THREAD, still)
    assert len(worked_out) == 2
