"""Exactly-once writes are keyed by conversation, tool call id and arguments.

A repeat of the same call (same thread, id and arguments) answers with the stored result
and writes nothing; the same id with other arguments is refused; the same id in another
conversation is another call and gets its own answer, never the first call's. Two
deliveries of one call at once write once and both answer with the stored result, also
where writers are not serialised up front (as on PostgreSQL). A database built before
the key changed is upgraded in place on its first write.

A call whose write committed before the process died (and before the conversation was
saved) is never asked again: it is answered with its stored result, marked recovered,
whatever decision comes, whether the run resumes, a new message comes or the turn is
cancelled; a record of the same id with other arguments is not that call's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from sqlalchemy import func, inspect, select, text

import db.writes
from assistants.approvals import facts_of
from conversations.assistant import Decision, MessageEvent, Thread, TravelAssistant
from db import reservations
from db.engine import Database
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    FIXTURE_EXCURSION_BOOKING_ID,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_PASSENGER_ID,
)
from db.models import ExcursionBooking, Hotel, HotelBooking, ToolCallRecord
from db.writes import NO_THREAD, arguments_digest, find_stored_result, key_part
from tests.support.assistants import build_assistant
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, say
from tests.support.scripted import call as scripted_call
from tests.support.tools import call, dump, error_text, payload, run_one
from tools.excursions import make_excursion_tools
from tools.hotels import make_hotel_tools


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


@pytest.fixture
def tools(travel_db: Database) -> list[BaseTool]:
    hotel_tools = make_hotel_tools(travel_db)
    return [*hotel_tools.safe, *hotel_tools.sensitive]


def _hotel_ids(db: Database, count: int) -> list[int]:
    with db.session() as session:
        return list(session.scalars(select(Hotel.id).order_by(Hotel.id).limit(count)))


def _bookings(db: Database) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(HotelBooking)) or 0


def _stay(hotel_id: int, first: int = 20) -> dict[str, Any]:
    return {"hotel_id": hotel_id, "checkin_date": day(first), "checkout_date": day(first + 2)}


def test_the_same_call_twice_in_a_thread_writes_once_and_answers_alike(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    (hotel_id,) = _hotel_ids(travel_db, 1)
    first = run_one(
        tools, "book_hotel", _stay(hotel_id), BUSINESS_PASSENGER_ID, "c1", thread_id="t"
    )
    after = dump(travel_db)
    again = run_one(
        tools, "book_hotel", _stay(hotel_id), BUSINESS_PASSENGER_ID, "c1", thread_id="t"
    )
    assert payload(again) == payload(first)
    assert dump(travel_db) == after
    with travel_db.session() as session:
        record = session.get(ToolCallRecord, ("t", "c1"))
        assert record is not None
        assert record.args_sha256 == arguments_digest(_stay(hotel_id))


def test_the_same_id_with_other_arguments_is_refused_and_writes_nothing(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    first_hotel, other_hotel = _hotel_ids(travel_db, 2)
    booked = payload(
        run_one(tools, "book_hotel", _stay(first_hotel), BUSINESS_PASSENGER_ID, "c1", thread_id="t")
    )
    before = dump(travel_db)
    refused = run_one(
        tools, "book_hotel", _stay(other_hotel), BUSINESS_PASSENGER_ID, "c1", thread_id="t"
    )
    text_ = error_text(refused)
    assert "already used" in text_ and "other arguments" in text_
    assert "nothing was done" in text_
    assert str(booked["booking_id"]) not in text_  # never the first call's answer
    assert dump(travel_db) == before


def test_the_same_id_moving_an_excursion_to_another_date_is_refused(
    travel_db: Database,
) -> None:
    # The new date is the whole of a date change: a repeat of the call id with another
    # date is another request, and must not be answered "moved to <the first date>".
    excursion_tools = make_excursion_tools(travel_db)
    tools = [*excursion_tools.safe, *excursion_tools.sensitive]

    def move(to: str) -> ToolMessage:
        args = {"booking_id": FIXTURE_EXCURSION_BOOKING_ID, "date": to}
        return run_one(tools, "update_excursion", args, FIXTURE_PASSENGER_ID, "c1", thread_id="t")

    moved = payload(move(day(9)))
    assert moved["after"] == {"date": day(9)}
    after = dump(travel_db)
    assert payload(move(day(9))) == moved  # the very same call: its stored answer
    text_ = error_text(move(day(11)))
    assert "other arguments" in text_ and "nothing was done" in text_
    assert dump(travel_db) == after
    with travel_db.session() as session:
        booking = session.get(ExcursionBooking, FIXTURE_EXCURSION_BOOKING_ID)
        assert booking is not None and booking.date.isoformat() == day(9)


def test_the_same_id_in_another_thread_is_its_own_call(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    # Providers that number their calls reuse ids in every conversation: a call in
    # another conversation runs as itself and is answered with its own result.
    first_hotel, other_hotel = _hotel_ids(travel_db, 2)
    mine = payload(
        run_one(tools, "book_hotel", _stay(first_hotel), BUSINESS_PASSENGER_ID, "c1", thread_id="a")
    )
    theirs = payload(
        run_one(tools, "book_hotel", _stay(other_hotel), BUSINESS_PASSENGER_ID, "c1", thread_id="b")
    )
    assert theirs["booking_id"] != mine["booking_id"]
    assert theirs["hotel"]["hotel_id"] == other_hotel
    with travel_db.session() as session:
        assert session.get(HotelBooking, theirs["booking_id"]) is not None


def test_a_repeated_cancel_in_another_thread_is_not_told_it_succeeded(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    args = {"booking_id": FIXTURE_HOTEL_BOOKING_ID}
    done = run_one(tools, "cancel_hotel", args, FIXTURE_PASSENGER_ID, "c9", thread_id="a")
    assert payload(done)["status"] == "cancelled"
    before = dump(travel_db)
    again = run_one(tools, "cancel_hotel", args, FIXTURE_PASSENGER_ID, "c9", thread_id="b")
    assert "already cancelled" in error_text(again)
    assert dump(travel_db) == before


def test_a_direct_invocation_without_a_thread_still_runs_once(travel_db: Database) -> None:
    book = make_hotel_tools(travel_db).tool("book_hotel")
    (hotel_id,) = _hotel_ids(travel_db, 1)
    config: Any = {"configurable": {"passenger_id": BUSINESS_PASSENGER_ID}}
    first = book.invoke(call("book_hotel", _stay(hotel_id), "direct-1"), config)
    after = dump(travel_db)
    again = book.invoke(call("book_hotel", _stay(hotel_id), "direct-1"), config)
    assert isinstance(first, ToolMessage) and isinstance(again, ToolMessage)
    assert json.loads(str(again.content)) == json.loads(str(first.content))
    assert dump(travel_db) == after
    with travel_db.session() as session:
        assert session.get(ToolCallRecord, (NO_THREAD, "direct-1")) is not None


def test_long_and_odd_ids_are_stored_as_digests(travel_db: Database, tools: list[BaseTool]) -> None:
    (hotel_id,) = _hotel_ids(travel_db, 1)
    odd_id = "call-\x00-" + "x" * 5_000
    first = run_one(tools, "book_hotel", _stay(hotel_id), BUSINESS_PASSENGER_ID, odd_id)
    after = dump(travel_db)
    again = run_one(tools, "book_hotel", _stay(hotel_id), BUSINESS_PASSENGER_ID, odd_id)
    assert payload(again) == payload(first)
    assert dump(travel_db) == after
    assert key_part("call_1") == "call_1"
    assert key_part(odd_id).startswith("sha256:") and len(key_part(odd_id)) == 71
    assert key_part("\ud800").startswith("sha256:")


def _deliver_twice_at_once(
    travel_db: Database, tools: list[BaseTool], args: dict[str, Any]
) -> list[ToolMessage]:
    """Deliver one call from two threads at once, each through its own tool node."""
    barrier = threading.Barrier(2)
    answers: list[ToolMessage] = []
    failures: list[BaseException] = []

    def deliver() -> None:
        try:
            barrier.wait()
            answers.append(
                run_one(tools, "book_hotel", args, BUSINESS_PASSENGER_ID, "dup", thread_id="t")
            )
        except BaseException as error:  # reported below, in the test's thread
            failures.append(error)

    workers = [threading.Thread(target=deliver) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not failures, failures
    return answers


def test_two_deliveries_of_one_call_at_once_write_once(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    (hotel_id,) = _hotel_ids(travel_db, 1)
    before = _bookings(travel_db)
    answers = _deliver_twice_at_once(travel_db, tools, _stay(hotel_id))
    assert [a.status for a in answers] == ["success", "success"]
    assert payload(answers[0]) == payload(answers[1])
    assert _bookings(travel_db) == before + 1


def test_a_duplicate_that_loses_the_insert_race_answers_with_the_stored_result(
    travel_db: Database, tools: list[BaseTool], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fallback behind the up-front locks: with neither SQLite's write lock nor the
    # per-call lock, both deliveries find no record, both write, and the second one's
    # record insert conflicts with the first one's.
    monkeypatch.setattr(db.writes, "begin_write", lambda session: None)
    monkeypatch.setattr(db.writes, "_wait_for_other_deliveries", lambda session, key: None)
    both_looked = threading.Barrier(2)
    original: Callable[..., dict[str, Any]] = reservations.book

    def book_after_both_looked(*args: Any, **kwargs: Any) -> dict[str, Any]:
        both_looked.wait(timeout=30)
        return original(*args, **kwargs)

    monkeypatch.setattr(reservations, "book", book_after_both_looked)
    (hotel_id,) = _hotel_ids(travel_db, 1)
    before = _bookings(travel_db)
    answers = _deliver_twice_at_once(travel_db, tools, _stay(hotel_id))
    assert [a.status for a in answers] == ["success", "success"], [a.content for a in answers]
    assert payload(answers[0]) == payload(answers[1])
    assert _bookings(travel_db) == before + 1
    with travel_db.session() as session:
        assert session.scalar(select(func.count()).select_from(ToolCallRecord)) == 1


_OLD_RECORDS = """
CREATE TABLE tool_call_records (
    tool_call_id VARCHAR(120) NOT NULL PRIMARY KEY,
    tool_name VARCHAR(60) NOT NULL,
    passenger_id VARCHAR(20) NOT NULL,
    result_json TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL
)
"""


def test_a_database_built_before_the_new_key_is_upgraded_on_its_first_write(
    db_url: str, tools: list[BaseTool]
) -> None:
    old = Database.from_url(db_url)
    with old.engine.begin() as connection:
        connection.execute(text("DROP TABLE tool_call_records"))
        connection.execute(text(_OLD_RECORDS))
        connection.execute(
            text(
                "INSERT INTO tool_call_records VALUES "
                "('c1', 'cancel_hotel', :p, '{\"status\": \"cancelled\"}', '2026-05-01 10:00:00')"
            ),
            {"p": FIXTURE_PASSENGER_ID},
        )
    old.dispose()
    # ``tools`` write through the test's own Database over the same file.
    args = {"booking_id": FIXTURE_HOTEL_BOOKING_ID}
    answer = run_one(tools, "cancel_hotel", args, FIXTURE_PASSENGER_ID, "c1", thread_id="t")
    assert payload(answer)["status"] == "cancelled"
    check = Database.from_url(db_url)
    columns = {c["name"] for c in inspect(check.engine).get_columns("tool_call_records")}
    assert {"thread_id", "args_sha256"} <= columns
    with check.session() as session:
        legacy = session.get(ToolCallRecord, (NO_THREAD, "c1"))
        assert legacy is not None and legacy.args_sha256 == ""
        assert session.get(ToolCallRecord, ("t", "c1")) is not None
    # The old record is nobody's answer: the same id outside a thread is refused.
    again = run_one(tools, "cancel_hotel", args, FIXTURE_PASSENGER_ID, "c1")
    assert "other arguments" in error_text(again)
    check.dispose()


# A write that committed before a crash -------------------------------------------------------
#
# The process that ran an approved call can die after the write's commit and before the
# conversation is saved (tests/integration/test_crash_consistency.py kills real processes
# there). Here the same state is made in one process: the graph stops for approval, then
# the tool runs the very call (same conversation, id and arguments) as the dead process did.


def test_find_stored_result_answers_only_for_the_very_call(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    (hotel_id,) = _hotel_ids(travel_db, 1)
    booked = payload(
        run_one(tools, "book_hotel", _stay(hotel_id), BUSINESS_PASSENGER_ID, "c1", thread_id="t")
    )
    key: dict[str, Any] = {
        "thread_id": "t",
        "tool_call_id": "c1",
        "tool_name": "book_hotel",
        "passenger_id": BUSINESS_PASSENGER_ID,
        "args": _stay(hotel_id),
    }
    assert find_stored_result(travel_db, **key) == booked
    others = [
        {"thread_id": "other"},
        {"tool_call_id": "c2"},
        {"tool_call_id": None},
        {"tool_name": "cancel_hotel"},
        {"passenger_id": FIXTURE_PASSENGER_ID},
        {"args": _stay(hotel_id, first=21)},
    ]
    for other in others:
        assert find_stored_result(travel_db, **{**key, **other}) is None, other
    empty = Database.from_url("sqlite://")  # no tables at all, as `sessions` opens one
    assert find_stored_result(empty, **key) is None


def _assistant_at_approval(
    db: Database, stay: dict[str, Any], call_id: str, *replies: AIMessage
) -> tuple[TravelAssistant, ScriptedChatModel]:
    hand_over = scripted_call(
        "ToHotelBookingAssistant",
        {"location": "Basel", "checkin_date": stay["checkin_date"], "request": "", **stay},
    )
    model = ScriptedChatModel(
        script=[say("", hand_over), say("", scripted_call("book_hotel", stay, call_id)), *replies]
    )
    assistant = build_assistant(db, model, retry_policy=None)
    list(assistant.send(CRASHED, "Book me that hotel."))
    assert [a.tool_call_id for a in assistant.pending_actions(CRASHED)] == [call_id]
    return assistant, model


CRASHED = Thread("crashed", BUSINESS_PASSENGER_ID)


@pytest.mark.parametrize("decision", [Decision(False, "Too expensive."), Decision(True), None])
def test_a_write_done_before_a_crash_is_not_asked_again_and_reported_done(
    travel_db: Database, tools: list[BaseTool], decision: Decision | None
) -> None:
    (hotel_id,) = _hotel_ids(travel_db, 1)
    stay = {"hotel_id": hotel_id, "checkin_date": day(20), "checkout_date": day(22)}
    assistant, model = _assistant_at_approval(travel_db, stay, "c-crash", say("Booked."))
    done = payload(
        run_one(tools, "book_hotel", stay, BUSINESS_PASSENGER_ID, "c-crash", thread_id="crashed")
    )
    bookings = _bookings(travel_db)
    assert assistant.pending_actions(CRASHED) == []
    assert [a.tool_call_id for a in assistant.recovered_actions(CRASHED)] == ["c-crash"]
    assert not assistant.interrupted(CRASHED)
    # A stale decision (or none) changes nothing: the write was done.
    decisions = {"c-crash": decision} if decision is not None else {}
    events = list(assistant.resolve(CRASHED, decisions))
    (answer,) = [
        e.message
        for e in events
        if isinstance(e, MessageEvent) and isinstance(e.message, ToolMessage)
    ]
    facts = facts_of(answer)
    assert facts.ran and facts.recovered and facts.approved and answer.status == "success"
    assert json.loads(str(answer.content)) == done
    assert [m.content for m in model.received[-1] if isinstance(m, ToolMessage)][-1] == (
        answer.content
    )
    assert _bookings(travel_db) == bookings
    assert assistant.recovered_actions(CRASHED) == []


def test_a_new_message_after_a_crash_keeps_the_write_done(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    (hotel_id,) = _hotel_ids(travel_db, 1)
    stay = {"hotel_id": hotel_id, "checkin_date": day(20), "checkout_date": day(22)}
    assistant, _ = _assistant_at_approval(travel_db, stay, "c-crash", say("Anything else?"))
    run_one(tools, "book_hotel", stay, BUSINESS_PASSENGER_ID, "c-crash", thread_id="crashed")
    list(assistant.send(CRASHED, "And what about breakfast?"))
    (answer,) = [
        m
        for m in assistant.messages(CRASHED)
        if isinstance(m, ToolMessage) and m.tool_call_id == "c-crash"
    ]
    assert facts_of(answer).recovered and facts_of(answer).not_run is None


def test_a_cancelled_turn_after_a_crash_keeps_the_write_done(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    (hotel_id,) = _hotel_ids(travel_db, 1)
    stay = {"hotel_id": hotel_id, "checkin_date": day(20), "checkout_date": day(22)}
    assistant, _ = _assistant_at_approval(travel_db, stay, "c-crash")
    run_one(tools, "book_hotel", stay, BUSINESS_PASSENGER_ID, "c-crash", thread_id="crashed")
    assert assistant.cancel_turn(CRASHED)
    (answer,) = [
        m
        for m in assistant.messages(CRASHED)
        if isinstance(m, ToolMessage) and m.tool_call_id == "c-crash"
    ]
    assert facts_of(answer).recovered and answer.status == "success"


def test_a_record_of_other_arguments_leaves_the_call_to_the_customer(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    # Only the very call counts: the same id with other arguments was never this call.
    first_hotel, other_hotel = _hotel_ids(travel_db, 2)
    stay = {"hotel_id": first_hotel, "checkin_date": day(20), "checkout_date": day(22)}
    assistant, _ = _assistant_at_approval(travel_db, stay, "c-crash", say("Not booked."))
    other = {**stay, "hotel_id": other_hotel}
    run_one(tools, "book_hotel", other, BUSINESS_PASSENGER_ID, "c-crash", thread_id="crashed")
    assert [a.tool_call_id for a in assistant.pending_actions(CRASHED)] == ["c-crash"]
    assert assistant.recovered_actions(CRASHED) == []
    events = list(assistant.resolve(CRASHED, {"c-crash": Decision(False, "No.")}))
    (answer,) = [
        e.message
        for e in events
        if isinstance(e, MessageEvent) and isinstance(e.message, ToolMessage)
    ]
    assert facts_of(answer).declined and not facts_of(answer).recovered
