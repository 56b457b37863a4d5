"""Every tool and every preview, driven with random and extreme arguments.

A model can send any JSON it likes. Whatever it sends, a tool answers with a clear, short
error or a correct result, never crashes the graph, never echoes a huge value back, and
never writes when it refuses; a preview of the same call never crashes either. The
property test draws a tool of the whole crew and arguments for it (huge and negative
integers, huge strings, wrong types, Unicode, nulls, ``%`` and ``_``, plus plausible
values so that some calls get through) and runs it through the graph's own tool node
with a checkpointer, so the answer must also survive being saved and read back.

The database comes from the ``edge_db`` fixture, so the same test can run on another
engine by overriding that one fixture.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from assistants.approvals import describe_action
from assistants.specialists import Crew, build_crew
from db.engine import Database
from db.fixtures import (
    FIXTURE_CAR_RENTAL_BOOKING_ID,
    FIXTURE_EXCURSION_BOOKING_ID,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_PASSENGER_ID,
    FIXTURE_TICKET_NO,
)
from tests.support.databases import FIXED_NOW
from tests.support.tools import call, dump, run_calls, run_one
from tools.common import storable_tool_calls
from tools.handoff import HANDOFF_TOOL

# "At most about 300 characters": what the model or the customer reads of an error.
MAX_ERROR_CHARS = 300

HUGE = "A" * 1_000_000
EXTREME_INTS = (
    0,
    -1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    2**64,
    -(10**20),
    10**23,
)
EXTREME_TEXT = (
    "",
    "   ",
    "%",
    "_",
    "%%",
    "Bas%",
    "B_sel",
    "\\",
    "\x00",
    "a\x00b",
    "\ud800",
    "😀" * 500,
    "é" * 5_000,
    HUGE,
    "%" * 100_000,
    "_ " * 20_000,
    ",".join(["x"] * 5_000),
    "9" * 400,
    "7240005432906569" * 1_000,
    "2026-05-20" * 10_000,
    "2026-05-20T10:00+02:00",
    "9999-12-31",
    "0001-01-01",
    "'; DROP TABLE hotels; --",
)


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


# Values a careful model would send, so that some drawn calls succeed and write.
PLAUSIBLE: dict[str, tuple[Any, ...]] = {
    "int": (1, 2, 3, FIXTURE_HOTEL_BOOKING_ID, FIXTURE_CAR_RENTAL_BOOKING_ID, 25),
    "date": (day(1), day(8), day(20), day(21), day(22)),
    "time": (day(1), f"{day(2)}T10:00", f"{day(3)}T08:00+02:00"),
    "airport": ("CDG", "BSL", "zrh", "Basel"),
    "text": ("Basel", "basel", "Hilton", "Luxury", "museum, art", "cancel a hotel"),
    "ticket": (FIXTURE_TICKET_NO, "7240 0054 3290 6569"),
}

_KIND_BY_NAME = {
    "ticket_no": "ticket",
    "departure_airport": "airport",
    "arrival_airport": "airport",
    "start_time": "time",
    "end_time": "time",
    "limit": "int",
}


def _kind(name: str) -> str:
    if name in _KIND_BY_NAME:
        return _KIND_BY_NAME[name]
    if name.endswith("_id"):
        return "int"
    if name.endswith("date") or name == "date":
        return "date"
    return "text"


hostile_values = st.one_of(
    st.sampled_from(EXTREME_INTS),
    st.integers(),
    st.sampled_from(EXTREME_TEXT),
    st.text(max_size=20),
    st.text(alphabet="%_\\ aB", max_size=12),
    st.none(),
    st.booleans(),
    st.floats(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _arguments(tool: BaseTool) -> list[str]:
    # The schema the model sees: injected arguments (config, tool_call_id) are not in it.
    schema = tool.tool_call_schema
    assert isinstance(schema, type)
    return list(schema.model_json_schema().get("properties", {}))


@st.composite
def tool_calls(draw: st.DrawFn, tools: list[BaseTool]) -> tuple[str, dict[str, Any]]:
    tool = draw(st.sampled_from(tools))
    args: dict[str, Any] = {}
    for name in _arguments(tool):
        choice = draw(st.sampled_from(("omit", "plausible", "hostile", "hostile")))
        if choice == "plausible":
            args[name] = draw(st.sampled_from(PLAUSIBLE[_kind(name)]))
        elif choice == "hostile":
            args[name] = draw(hostile_values)
    if draw(st.booleans()):
        args[draw(st.sampled_from(("unknown", "passenger_id", "config")))] = draw(hostile_values)
    return tool.name, args


@pytest.fixture
def edge_db(travel_db: Database) -> Iterator[Database]:
    """The database every test here runs on; override it to run them on another engine."""
    yield travel_db


@pytest.fixture
def crew(edge_db: Database) -> Crew:
    return build_crew(edge_db)


def _long_strings(args: dict[str, Any]) -> list[str]:
    return [v for v in args.values() if isinstance(v, str) and len(v) > MAX_ERROR_CHARS]


def check_answer(content: str, status: str, args: dict[str, Any]) -> None:
    """A clear short error, or a result that does not parrot a huge argument back."""
    assert status in ("success", "error")
    if status == "error":
        assert content.startswith("Error: "), content[:500]
        assert len(content) <= MAX_ERROR_CHARS, (len(content), content[:500])
        assert "Traceback" not in content and "sqlalchemy" not in content.lower()
    for value in _long_strings(args):
        assert value[:MAX_ERROR_CHARS] not in content, "a huge argument came back"


# Tools whose answer is guidance for the model, not data: the policy's sections, and the
# hand-off's "what to tell the customer now".
TEXT_ANSWERS = {"lookup_policy", HANDOFF_TOOL}


def check_result(name: str, content: str, args: dict[str, Any]) -> None:
    """Check what a successful answer can be checked for whatever the arguments."""
    if name in TEXT_ANSWERS:
        return
    result = json.loads(content)
    assert isinstance(result, dict)
    # Search text is data: everything found contains the text searched for, literally.
    listed = {
        "search_hotels": "hotels",
        "search_car_rentals": "car_rentals",
        "search_trip_recommendations": "trip_recommendations",
    }.get(name)
    if listed is None:
        return
    for field in ("location", "name"):
        needle = args.get(field)
        if isinstance(needle, str) and needle.strip():
            for item in result[listed]:
                assert needle.strip().lower() in str(item[field]).lower(), (needle, item)


def test_every_tool_answers_any_arguments_clearly(edge_db: Database) -> None:
    crew = build_crew(edge_db)
    tools = crew.all_tools()
    sensitive = set(crew.previews)

    # Fixtures stay outside the property: one database for all examples, as a long
    # conversation would use it, and a failure report that shows only the drawn call.
    @settings(max_examples=150, deadline=None, database=None)
    @given(drawn=tool_calls(tools))
    def property_holds(drawn: tuple[str, dict[str, Any]]) -> None:
        name, args = drawn
        check_call(edge_db, crew, tools, sensitive, name, args)

    property_holds()


def check_call(
    db: Database,
    crew: Crew,
    tools: list[BaseTool],
    sensitive: set[str],
    name: str,
    args: dict[str, Any],
) -> None:
    # What the assistant node stores of the model's message: it must survive the saver.
    (tool_call,) = storable_tool_calls([call(name, args)])
    before = dump(db)
    saver = InMemorySaver()
    (answer,) = run_calls(
        tools, [tool_call], FIXTURE_PASSENGER_ID, thread_id="hostile", checkpointer=saver
    )
    content = str(answer.content)
    check_answer(content, str(answer.status), args)
    if answer.status == "success":
        check_result(name, content, args)
    if name not in sensitive or answer.status == "error":
        assert dump(db) == before, f"{name}({args!r:.300}) wrote: {content[:300]}"
    elif name in sensitive:
        # A write that went through, delivered again, answers alike and writes nothing.
        after = dump(db)
        (again,) = run_calls(tools, [tool_call], FIXTURE_PASSENGER_ID, thread_id="hostile")
        assert again.status == "success"
        assert json.loads(str(again.content)) == json.loads(content)
        assert dump(db) == after
    # The conversation can be read back after the call.
    saved = saver.get_tuple({"configurable": {"thread_id": "hostile"}})
    assert saved is not None
    assert saved.checkpoint["channel_values"]["messages"][-1].content == answer.content

    if name in sensitive:
        before = dump(db)
        preview = describe_action(db, FIXTURE_PASSENGER_ID, name, args, crew.previews)
        assert dump(db) == before
        if preview.error is not None:
            assert len(preview.error) <= MAX_ERROR_CHARS, preview.error[:500]
        for line in preview.lines:
            assert len(line) <= MAX_ERROR_CHARS, line[:500]


# The cases the issue reported, one by one ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("cancel_hotel", {"booking_id": 2**63}),
        ("update_hotel", {"booking_id": 2**63, "checkout_date": day(9)}),
        ("cancel_car_rental", {"booking_id": -(10**20)}),
        ("book_car_rental", {"rental_id": -(10**20), "start_date": day(5), "end_date": day(6)}),
        ("book_hotel", {"hotel_id": 2**64, "checkin_date": day(5), "checkout_date": day(6)}),
        ("update_ticket_to_new_flight", {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": 2**64}),
        ("book_excursion", {"recommendation_id": 10**23, "date": day(5)}),
        ("cancel_excursion", {"booking_id": 2**31}),
        ("search_flights", {"limit": 10**23}),
        ("search_flights", {"limit": -(10**20)}),
        ("cancel_ticket", {"ticket_no": HUGE}),
        ("book_hotel", {"hotel_id": 1, "checkin_date": HUGE, "checkout_date": day(6)}),
        ("search_hotels", {"location": HUGE}),
        ("search_hotels", {"name": "%" * 100_000}),
        ("search_car_rentals", {"location": "_" * 100_000}),
        ("search_trip_recommendations", {"keywords": ",".join(["museum"] * 5_000)}),
        ("search_flights", {"departure_airport": HUGE}),
        ("search_flights", {"start_time": HUGE}),
        ("lookup_policy", {"query": HUGE}),
        ("cancel_hotel", {"booking_id": float("inf")}),
        ("cancel_ticket", {"ticket_no": "\ud800"}),
        ("search_hotels", {"location": "Bas\x00el"}),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_reported_values_get_a_short_error_and_write_nothing(
    edge_db: Database, crew: Crew, name: str, args: dict[str, Any]
) -> None:
    before = dump(edge_db)
    answer = run_one(crew.all_tools(), name, args, FIXTURE_PASSENGER_ID)
    content = str(answer.content)
    check_answer(content, str(answer.status), args)
    if answer.status == "success":
        assert name == "search_flights"  # an out-of-range limit is clamped, as documented
        assert len(json.loads(content)["flights"]) <= 50
    assert dump(edge_db) == before


def test_a_huge_argument_is_cut_with_an_ellipsis(edge_db: Database, crew: Crew) -> None:
    answer = run_one(
        crew.all_tools(),
        "book_hotel",
        {"hotel_id": 1, "checkin_date": HUGE, "checkout_date": day(6)},
        FIXTURE_PASSENGER_ID,
    )
    content = str(answer.content)
    assert answer.status == "error"
    assert "checkin_date" in content and "YYYY-MM-DD" in content
    assert "AAAA…" in content
    assert len(content) <= MAX_ERROR_CHARS


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("cancel_hotel", {"booking_id": 2**64}),
        ("update_car_rental", {"booking_id": -(10**20), "end_date": day(4)}),
        ("update_ticket_to_new_flight", {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": 2**64}),
        ("book_excursion", {"recommendation_id": 10**23, "date": HUGE}),
        ("cancel_ticket", {"ticket_no": HUGE}),
        ("book_hotel", {"hotel_id": float("nan"), "checkin_date": day(5), "checkout_date": day(6)}),
        ("cancel_excursion", {"booking_id": [1, 2]}),
        ("update_excursion", {"booking_id": FIXTURE_EXCURSION_BOOKING_ID, "date": {"y": 1}}),
    ],
)
def test_previews_of_bad_values_report_a_short_error(
    edge_db: Database, crew: Crew, name: str, args: dict[str, Any]
) -> None:
    preview = describe_action(edge_db, FIXTURE_PASSENGER_ID, name, args, crew.previews)
    assert preview.error is not None
    assert len(preview.error) <= MAX_ERROR_CHARS, preview.error[:500]


@pytest.mark.parametrize("value", [2**64, -(10**20), 10**23, -(2**63) - 1])
def test_tool_calls_with_integers_past_64_bits_can_be_saved(value: int) -> None:
    calls = storable_tool_calls([call("cancel_hotel", {"booking_id": value, "n": [value]})])
    serde = JsonPlusSerializer()
    restored = serde.loads_typed(serde.dumps_typed(AIMessage(content="", tool_calls=calls)))
    assert restored.tool_calls[0]["args"] == {"booking_id": str(value), "n": [str(value)]}


def test_storable_tool_calls_keeps_ordinary_arguments() -> None:
    original = call("book_hotel", {"hotel_id": 2**63 - 1, "checkin_date": "2026-05-20", "x": None})
    assert storable_tool_calls([original]) == [original]
