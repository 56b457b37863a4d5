"""Tests of the tools and the crew: the tool contract of SPEC section 4, grouping, previews."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel

from assistants.approvals import ActionPreview, Amount, describe_action
from assistants.specialists import Crew, build_crew
from db.engine import Database
from db.errors import MissingPassengerError, TravelError
from db.fixtures import (
    BUSINESS_PASSENGER_ID,
    FIXTURE_CAR_RENTAL_BOOKING_ID,
    FIXTURE_EXCURSION_BOOKING_ID,
    FIXTURE_HOTEL_BOOKING_ID,
    FIXTURE_PASSENGER_ID,
    FIXTURE_TICKET_NO,
    FLOWN_TICKET_NO,
)
from db.rules import MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE
from db.values import AmountKind, fmt_money
from tests.support.databases import FIXED_NOW
from tests.support.tools import dump, full_flight, lx0112, payload, run_one
from tools import DomainTools, Preview, build_primary_tools, make_hotel_tools, tool_error_message
from tools.common import passenger_id_from

# Tool name -> (required arguments, optional arguments) as fixed by SPEC section 4.
SPEC_TOOLS: dict[str, tuple[set[str], set[str]]] = {
    "fetch_user_flight_information": (set(), set()),
    "search_flights": (
        set(),
        {"departure_airport", "arrival_airport", "start_time", "end_time", "limit"},
    ),
    "lookup_policy": ({"query"}, set()),
    "search_car_rentals": (set(), {"location", "name", "price_tier", "start_date", "end_date"}),
    "search_hotels": (set(), {"location", "name", "price_tier", "checkin_date", "checkout_date"}),
    "search_trip_recommendations": (set(), {"location", "name", "keywords"}),
    "tavily_search": ({"query"}, set()),
    # Beyond SPEC: the primary assistant hands a conversation to a person (issue 29).
    "request_human_agent": ({"reason", "summary"}, set()),
    "update_ticket_to_new_flight": ({"ticket_no", "new_flight_id"}, set()),
    "cancel_ticket": ({"ticket_no"}, set()),
    "book_car_rental": ({"rental_id", "start_date", "end_date"}, set()),
    "update_car_rental": ({"booking_id"}, {"start_date", "end_date"}),
    "cancel_car_rental": ({"booking_id"}, set()),
    "book_hotel": ({"hotel_id", "checkin_date", "checkout_date"}, set()),
    "update_hotel": ({"booking_id"}, {"checkin_date", "checkout_date"}),
    "cancel_hotel": ({"booking_id"}, set()),
    "book_excursion": ({"recommendation_id", "date"}, set()),
    "update_excursion": ({"booking_id", "date"}, set()),
    "cancel_excursion": ({"booking_id"}, set()),
}


# The writes of SPEC section 4: each one must stop for the customer's approval.
SPEC_SENSITIVE = frozenset(
    {
        "update_ticket_to_new_flight",
        "cancel_ticket",
        "book_car_rental",
        "update_car_rental",
        "cancel_car_rental",
        "book_hotel",
        "update_hotel",
        "cancel_hotel",
        "book_excursion",
        "update_excursion",
        "cancel_excursion",
    }
)


def _schema(item: BaseTool) -> dict[str, Any]:
    """Return the JSON schema the model sees for a tool's arguments."""
    model = item.tool_call_schema
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model.model_json_schema()


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


@pytest.fixture
def crew(travel_db: Database) -> Crew:
    return build_crew(travel_db, tavily_api_key="tvly-test")


def names(tools: tuple[BaseTool, ...]) -> list[str]:
    return [t.name for t in tools]


def test_build_tools_matches_the_spec_contract(crew: Crew) -> None:
    tools = {t.name: t for t in crew.all_tools()}
    assert set(tools) == set(SPEC_TOOLS)
    for name, (required, optional) in SPEC_TOOLS.items():
        schema = _schema(tools[name])
        properties = schema.get("properties", {})
        assert set(properties) == required | optional, name
        assert set(schema.get("required", [])) == required, name


def test_every_model_visible_argument_is_described(crew: Crew) -> None:
    for item in crew.all_tools():
        schema = _schema(item)
        for argument, spec in schema.get("properties", {}).items():
            assert spec.get("description"), f"{item.name}.{argument} has no description"
        assert "{" not in item.description, f"unfilled placeholder in {item.name}"
        assert "config" not in schema.get("properties", {})
        assert "tool_call_id" not in schema.get("properties", {})


def test_date_arguments_state_their_format(crew: Crew) -> None:
    for item in crew.all_tools():
        properties = _schema(item).get("properties", {})
        for argument, spec in properties.items():
            if argument.endswith("date"):
                assert "YYYY-MM-DD" in spec["description"], f"{item.name}.{argument}"
            if argument.endswith("airport"):
                assert "3-letter IATA" in spec["description"], f"{item.name}.{argument}"


def test_tool_descriptions_quote_the_rules(crew: Crew) -> None:
    flights = crew.member("update_flight")
    assert flights is not None
    description = flights.tools.tool("update_ticket_to_new_flight").description
    assert f"{MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE} hours" in description


def test_crew_groups_tools_per_specialist(crew: Crew) -> None:
    assert crew.sensitive_names == SPEC_SENSITIVE
    tools = {m.name: (names(m.tools.safe), names(m.tools.sensitive)) for m in crew.members}
    assert tools == {
        "update_flight": (
            ["search_flights", "fetch_user_flight_information"],
            ["update_ticket_to_new_flight", "cancel_ticket"],
        ),
        "book_car_rental": (
            ["search_car_rentals"],
            ["book_car_rental", "update_car_rental", "cancel_car_rental"],
        ),
        "book_hotel": (["search_hotels"], ["book_hotel", "update_hotel", "cancel_hotel"]),
        "book_excursion": (
            ["search_trip_recommendations"],
            ["book_excursion", "update_excursion", "cancel_excursion"],
        ),
    }
    assert names(crew.primary_tools) == [
        "search_flights",
        "fetch_user_flight_information",
        "lookup_policy",
        "request_human_agent",
        "tavily_search",
    ]
    all_names = [t.name for t in crew.all_tools()]
    assert len(all_names) == len(set(all_names))


def test_crew_previews_every_sensitive_tool(crew: Crew) -> None:
    assert set(crew.previews) == crew.sensitive_names


def test_crew_tells_call_kinds(crew: Crew) -> None:
    assert crew.call_kind("search_hotels") == "safe"
    assert crew.call_kind("lookup_policy") == "safe"
    assert crew.call_kind("cancel_hotel") == "sensitive"
    assert crew.call_kind("ToHotelBookingAssistant") == "routing"
    assert crew.call_kind("CompleteOrEscalate") == "routing"
    assert crew.call_kind("teleport") == "unknown"
    assert crew.label("book_car_rental") == "car rental"
    assert crew.label("primary_assistant") == ""


def test_build_primary_tools_binds_web_search_only_with_a_key(travel_db: Database) -> None:
    assert "tavily_search" not in names(build_primary_tools(travel_db))
    assert "tavily_search" not in names(build_primary_tools(travel_db, tavily_api_key="  "))
    assert "tavily_search" in names(build_primary_tools(travel_db, tavily_api_key="tvly-x"))


def test_build_primary_tools_uses_the_given_policy_tool(travel_db: Database) -> None:
    @tool
    def lookup_policy(query: str) -> str:
        """Return a canned policy."""
        return "policy"

    assert lookup_policy in build_primary_tools(travel_db, lookup_policy=lookup_policy)


def test_domain_tools_refuse_a_sensitive_tool_without_preview(travel_db: Database) -> None:
    hotels = make_hotel_tools(travel_db)
    previews = {k: v for k, v in hotels.previews.items() if k != "cancel_hotel"}
    with pytest.raises(ValueError, match="cancel_hotel"):
        DomainTools(safe=hotels.safe, sensitive=hotels.sensitive, previews=previews)


def test_domain_tools_refuse_a_tool_both_safe_and_sensitive(travel_db: Database) -> None:
    hotels = make_hotel_tools(travel_db)
    with pytest.raises(ValueError, match="search_hotels"):
        DomainTools(
            safe=hotels.safe,
            sensitive=(*hotels.sensitive, *hotels.safe),
            previews={
                **hotels.previews,
                "search_hotels": Preview("x", hotels.previews["book_hotel"].quote),
            },
        )


def test_tool_error_message_is_the_text_the_model_reads(travel_db: Database) -> None:
    # run_one goes through tools.common.tool_node, the very ToolNode the graph uses.
    hotels = make_hotel_tools(travel_db).sensitive
    args = {"booking_id": FIXTURE_HOTEL_BOOKING_ID}
    refused = run_one(hotels, "cancel_hotel", args, BUSINESS_PASSENGER_ID)
    assert refused.status == "error"
    assert str(refused.content).startswith("Error: Hotel reservation")
    assert "does not belong" in str(refused.content)
    malformed = run_one(hotels, "cancel_hotel", {"booking_id": "one"}, FIXTURE_PASSENGER_ID)
    assert malformed.status == "error"
    assert str(malformed.content).startswith("Error: ")
    assert "booking_id" in str(malformed.content)
    for answer in (refused, malformed):
        assert "Please fix your mistakes" not in str(answer.content)
        assert "Error(" not in str(answer.content)
    assert tool_error_message(TravelError("Ticket 1 is gone.")) == "Error: Ticket 1 is gone."


@pytest.mark.parametrize(
    "config",
    [None, {}, {"configurable": {}}, {"configurable": {"passenger_id": "  "}}],
)
def test_passenger_id_from_requires_a_passenger(config: Any) -> None:
    with pytest.raises(MissingPassengerError, match="No passenger id is configured"):
        passenger_id_from(config)


def test_passenger_id_from_reads_the_config() -> None:
    assert passenger_id_from({"configurable": {"passenger_id": " 3442 587242 "}}) == "3442 587242"


# describe_action ------------------------------------------------------------------------------


def describe(db: Database, passenger: str, tool_name: str, args: dict[str, Any]) -> ActionPreview:
    return describe_action(db, passenger, tool_name, args, build_crew(db).previews)


def _preview_cases(db: Database) -> dict[str, dict[str, Any]]:
    return {
        "update_ticket_to_new_flight": {
            "ticket_no": FIXTURE_TICKET_NO,
            "new_flight_id": lx0112(db, 1).flight_id,
        },
        "cancel_ticket": {"ticket_no": FIXTURE_TICKET_NO},
        "book_car_rental": {"rental_id": 1, "start_date": day(20), "end_date": day(22)},
        "update_car_rental": {"booking_id": FIXTURE_CAR_RENTAL_BOOKING_ID, "end_date": day(8)},
        "cancel_car_rental": {"booking_id": FIXTURE_CAR_RENTAL_BOOKING_ID},
        "book_hotel": {"hotel_id": 1, "checkin_date": day(20), "checkout_date": day(22)},
        "update_hotel": {"booking_id": FIXTURE_HOTEL_BOOKING_ID, "checkout_date": day(9)},
        "cancel_hotel": {"booking_id": FIXTURE_HOTEL_BOOKING_ID},
        "book_excursion": {"recommendation_id": 1, "date": day(20)},
        "update_excursion": {"booking_id": FIXTURE_EXCURSION_BOOKING_ID, "date": day(21)},
        "cancel_excursion": {"booking_id": FIXTURE_EXCURSION_BOOKING_ID},
    }


@pytest.mark.parametrize("tool_name", sorted(SPEC_SENSITIVE))
def test_describe_action_previews_every_sensitive_tool(travel_db: Database, tool_name: str) -> None:
    args = _preview_cases(travel_db)[tool_name]
    before = dump(travel_db)
    preview = describe(travel_db, FIXTURE_PASSENGER_ID, tool_name, args)
    assert isinstance(preview, ActionPreview)
    assert preview.error is None, preview.error
    assert preview.tool_name == tool_name
    assert preview.title
    assert preview.lines
    assert any(line.startswith(("To pay:", "Refund:")) for line in preview.lines)
    # The numbers callers read and the words the customer reads say the same amount.
    assert preview.amount is not None
    label = {"pay": "To pay", "refund": "Refund"}[preview.amount.kind]
    assert preview.lines[-1] == preview.amount_line == f"{label}: {fmt_money(preview.amount.cents)}"
    assert dump(travel_db) == before


@pytest.mark.parametrize(
    ("tool_name", "kind", "free"),
    [
        ("update_ticket_to_new_flight", "pay", False),  # a paid change
        ("cancel_hotel", "refund", False),
        ("cancel_excursion", "pay", True),  # the fee keeps what was paid: nothing moves
    ],
)
def test_describe_action_states_the_amount_the_write_then_moves(
    travel_db: Database, crew: Crew, tool_name: str, kind: AmountKind, free: bool
) -> None:
    args = _preview_cases(travel_db)[tool_name]
    preview = describe(travel_db, FIXTURE_PASSENGER_ID, tool_name, args)
    result = payload(run_one(crew.all_tools(), tool_name, args, FIXTURE_PASSENGER_ID))
    charged, refunded = result.get("charged_cents", 0), result.get("refunded_cents", 0)
    assert preview.amount == Amount(kind, charged if kind == "pay" else refunded)
    assert preview.amount.free is free is (charged == refunded == 0)


def test_describe_action_shows_what_the_write_charges(travel_db: Database, crew: Crew) -> None:
    args = _preview_cases(travel_db)["update_ticket_to_new_flight"]
    preview = describe(travel_db, FIXTURE_PASSENGER_ID, "update_ticket_to_new_flight", args)
    result = payload(
        run_one(crew.all_tools(), "update_ticket_to_new_flight", args, FIXTURE_PASSENGER_ID)
    )
    assert f"To pay: {result['charged']}" in preview.lines
    assert any(result["new_flight"]["scheduled_departure"] in line for line in preview.lines)


def test_describe_action_reports_a_rule_that_would_refuse(travel_db: Database) -> None:
    preview = describe(
        travel_db,
        FIXTURE_PASSENGER_ID,
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": full_flight(travel_db).flight_id},
    )
    assert preview.title == "Change flight"
    assert preview.error is not None and "no Economy seat left" in preview.error
    assert f"ticket_no: {FIXTURE_TICKET_NO}" in preview.lines
    assert preview.amount is None and preview.amount_line is None


@pytest.mark.parametrize(
    ("passenger", "tool_name", "args", "expected"),
    [
        (
            BUSINESS_PASSENGER_ID,
            "cancel_ticket",
            {"ticket_no": FIXTURE_TICKET_NO},
            "does not belong",
        ),
        (FIXTURE_PASSENGER_ID, "cancel_ticket", {"ticket_no": FLOWN_TICKET_NO}, "does not belong"),
        (FIXTURE_PASSENGER_ID, "cancel_hotel", {"booking_id": "one"}, "whole number"),
        (FIXTURE_PASSENGER_ID, "book_hotel", {"hotel_id": 1}, "checkin_date is missing"),
        ("", "cancel_hotel", {"booking_id": 1}, "No passenger id"),
    ],
)
def test_describe_action_reports_errors(
    travel_db: Database, passenger: str, tool_name: str, args: dict[str, Any], expected: str
) -> None:
    preview = describe(travel_db, passenger, tool_name, args)
    assert preview.error is not None and expected in preview.error


def test_describe_action_handles_an_unknown_tool(travel_db: Database) -> None:
    preview = describe(travel_db, FIXTURE_PASSENGER_ID, "teleport", {"to": "Mars"})
    assert preview == ActionPreview(
        tool_name="teleport", title="Run teleport", lines=["to: Mars"], error=None
    )
