"""Tests of the tools package: the tool contract of SPEC section 4, grouping and previews."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt.tool_node import ToolInvocationError
from pydantic import BaseModel

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
from tests.conftest import FIXED_NOW
from tests.unit.tools_support import dump, full_flight, lx0112, payload, run_one
from tools import (
    SENSITIVE_TOOL_NAMES,
    TOOL_ERRORS,
    ActionPreview,
    ToolSet,
    build_tools,
    describe_action,
)
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


def _schema(item: BaseTool) -> dict[str, Any]:
    """Return the JSON schema the model sees for a tool's arguments."""
    model = item.tool_call_schema
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model.model_json_schema()


def day(offset: int) -> str:
    return (FIXED_NOW.date() + timedelta(days=offset)).isoformat()


@pytest.fixture
def toolset(travel_db: Database) -> ToolSet:
    return build_tools(travel_db, tavily_api_key="tvly-test")


def test_build_tools_matches_the_spec_contract(toolset: ToolSet) -> None:
    tools = {t.name: t for t in toolset.all_tools()}
    assert set(tools) == set(SPEC_TOOLS)
    for name, (required, optional) in SPEC_TOOLS.items():
        schema = _schema(tools[name])
        properties = schema.get("properties", {})
        assert set(properties) == required | optional, name
        assert set(schema.get("required", [])) == required, name


def test_every_model_visible_argument_is_described(toolset: ToolSet) -> None:
    for item in toolset.all_tools():
        schema = _schema(item)
        for argument, spec in schema.get("properties", {}).items():
            assert spec.get("description"), f"{item.name}.{argument} has no description"
        assert "{" not in item.description, f"unfilled placeholder in {item.name}"
        assert "config" not in schema.get("properties", {})
        assert "tool_call_id" not in schema.get("properties", {})


def test_date_arguments_state_their_format(toolset: ToolSet) -> None:
    for item in toolset.all_tools():
        properties = _schema(item).get("properties", {})
        for argument, spec in properties.items():
            if argument.endswith("date"):
                assert "YYYY-MM-DD" in spec["description"], f"{item.name}.{argument}"
            if argument.endswith("airport"):
                assert "3-letter IATA" in spec["description"], f"{item.name}.{argument}"


def test_tool_descriptions_quote_the_rules(toolset: ToolSet) -> None:
    description = next(
        t for t in toolset.flights_sensitive if t.name == "update_ticket_to_new_flight"
    ).description
    assert f"{MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE} hours" in description


def test_toolset_groups_tools_per_specialist(toolset: ToolSet) -> None:
    assert toolset.sensitive_names == SENSITIVE_TOOL_NAMES
    assert {t.name for t in toolset.flights_safe} == {
        "search_flights",
        "fetch_user_flight_information",
    }
    assert {t.name for t in toolset.flights_sensitive} == {
        "update_ticket_to_new_flight",
        "cancel_ticket",
    }
    assert [t.name for t in toolset.car_rentals_safe] == ["search_car_rentals"]
    assert [t.name for t in toolset.hotels_safe] == ["search_hotels"]
    assert [t.name for t in toolset.excursions_safe] == ["search_trip_recommendations"]
    assert toolset.lookup_policy is not None and toolset.lookup_policy.name == "lookup_policy"
    names = [t.name for t in toolset.all_tools()]
    assert len(names) == len(set(names))


def test_build_tools_binds_web_search_only_with_a_key(travel_db: Database) -> None:
    assert build_tools(travel_db).tavily_search is None
    assert build_tools(travel_db, tavily_api_key="  ").tavily_search is None


def test_build_tools_uses_the_given_policy_tool(travel_db: Database) -> None:
    @tool
    def lookup_policy(query: str) -> str:
        """Return a canned policy."""
        return "policy"

    assert build_tools(travel_db, lookup_policy=lookup_policy).lookup_policy is lookup_policy


def test_toolset_refuses_a_missing_sensitive_tool(toolset: ToolSet) -> None:
    with pytest.raises(ValueError, match="cancel_ticket"):
        ToolSet(
            fetch_user_flight_information=toolset.fetch_user_flight_information,
            search_flights=toolset.search_flights,
            lookup_policy=None,
            tavily_search=None,
            flights_safe=toolset.flights_safe,
            flights_sensitive=toolset.flights_sensitive[:1],
            car_rentals_safe=toolset.car_rentals_safe,
            car_rentals_sensitive=toolset.car_rentals_sensitive,
            hotels_safe=toolset.hotels_safe,
            hotels_sensitive=toolset.hotels_sensitive,
            excursions_safe=toolset.excursions_safe,
            excursions_sensitive=toolset.excursions_sensitive,
        )


def test_tool_errors_cover_business_failures_and_bad_arguments() -> None:
    assert TravelError in TOOL_ERRORS
    assert ToolInvocationError in TOOL_ERRORS


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


@pytest.mark.parametrize("tool_name", sorted(SENSITIVE_TOOL_NAMES))
def test_describe_action_previews_every_sensitive_tool(travel_db: Database, tool_name: str) -> None:
    args = _preview_cases(travel_db)[tool_name]
    before = dump(travel_db)
    preview = describe_action(travel_db, FIXTURE_PASSENGER_ID, tool_name, args)
    assert isinstance(preview, ActionPreview)
    assert preview.error is None, preview.error
    assert preview.tool_name == tool_name
    assert preview.title
    assert preview.lines
    assert any(line.startswith(("To pay:", "Refund:")) for line in preview.lines)
    assert dump(travel_db) == before


def test_describe_action_shows_what_the_write_charges(
    travel_db: Database, toolset: ToolSet
) -> None:
    args = _preview_cases(travel_db)["update_ticket_to_new_flight"]
    preview = describe_action(travel_db, FIXTURE_PASSENGER_ID, "update_ticket_to_new_flight", args)
    result = payload(
        run_one(toolset.all_tools(), "update_ticket_to_new_flight", args, FIXTURE_PASSENGER_ID)
    )
    assert f"To pay: {result['charged']}" in preview.lines
    assert any(result["new_flight"]["scheduled_departure"] in line for line in preview.lines)


def test_describe_action_reports_a_rule_that_would_refuse(travel_db: Database) -> None:
    preview = describe_action(
        travel_db,
        FIXTURE_PASSENGER_ID,
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": full_flight(travel_db).flight_id},
    )
    assert preview.title == "Change flight"
    assert preview.error is not None and "no Economy seat left" in preview.error
    assert f"ticket_no: {FIXTURE_TICKET_NO}" in preview.lines


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
    preview = describe_action(travel_db, passenger, tool_name, args)
    assert preview.error is not None and expected in preview.error


def test_describe_action_handles_an_unknown_tool(travel_db: Database) -> None:
    preview = describe_action(travel_db, FIXTURE_PASSENGER_ID, "teleport", {"to": "Mars"})
    assert preview == ActionPreview(
        tool_name="teleport", title="Run teleport", lines=["to: Mars"], error=None
    )
