"""Search text is data, never a pattern: ``%`` and ``_`` match themselves, and a long text
gets a clear error instead of SQLite's "LIKE or GLOB pattern too complex"."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool

from assistants.specialists import build_crew
from db import flights, reservations
from db.car_rentals import CAR_RENTAL
from db.engine import Database
from db.errors import InvalidInputError
from db.excursions import EXCURSION
from db.fixtures import FIXTURE_LOCATION, FIXTURE_PASSENGER_ID
from db.hotels import HOTEL
from db.models import CarRental, Hotel
from db.values import MAX_SEARCH_CHARS, MAX_SEARCH_WORDS
from tests.support.databases import FIXED_NOW
from tests.support.tools import error_text, payload, run_one

NOW = FIXED_NOW


@pytest.fixture
def tools(travel_db: Database) -> list[BaseTool]:
    return build_crew(travel_db).all_tools()


def _add_hotel(db: Database, name: str) -> int:
    with db.transaction() as session:
        hotel = Hotel(
            name=name,
            location=FIXTURE_LOCATION,
            price_tier="Midscale",
            nightly_rate_cents=10_000,
            rooms=5,
        )
        session.add(hotel)
        session.flush()
        return hotel.id


def _names(tools: list[BaseTool], name: str, args: dict[str, Any], key: str) -> list[str]:
    result = payload(run_one(tools, name, args, FIXTURE_PASSENGER_ID))
    return [str(item["name"]) for item in result[key]]


def test_a_percent_sign_matches_a_literal_percent_only(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    # Were "%" a wildcard, it would match every hotel.
    assert _names(tools, "search_hotels", {"name": "%"}, "hotels") == []
    _add_hotel(travel_db, "Hotel 100% Rhein")
    assert _names(tools, "search_hotels", {"name": "%"}, "hotels") == ["Hotel 100% Rhein"]
    assert _names(tools, "search_hotels", {"name": "100%"}, "hotels") == ["Hotel 100% Rhein"]
    assert _names(tools, "search_hotels", {"name": "10%Rhein"}, "hotels") == []


def test_an_underscore_matches_a_literal_underscore_only(
    travel_db: Database, tools: list[BaseTool]
) -> None:
    assert _names(tools, "search_hotels", {"location": FIXTURE_LOCATION}, "hotels")
    # Were "_" a wildcard, "B_sel" would find every hotel and car in Basel.
    assert _names(tools, "search_hotels", {"location": "B_sel"}, "hotels") == []
    assert _names(tools, "search_car_rentals", {"location": "B_sel"}, "car_rentals") == []
    with travel_db.transaction() as session:
        session.add(
            CarRental(
                name="Rent_a_Car",
                location=FIXTURE_LOCATION,
                price_tier="Economy",
                car_class="Compact",
                daily_rate_cents=4_000,
                fleet_size=3,
            )
        )
    assert _names(tools, "search_car_rentals", {"name": "t_a_c"}, "car_rentals") == ["Rent_a_Car"]
    assert _names(tools, "search_car_rentals", {"name": "tXaXc"}, "car_rentals") == []


def test_wildcards_in_excursion_keywords_and_airports_are_literal(
    tools: list[BaseTool],
) -> None:
    found = payload(
        run_one(tools, "search_trip_recommendations", {"keywords": "museum"}, FIXTURE_PASSENGER_ID)
    )
    assert found["trip_recommendations"]
    for keywords in ("m_seum", "%", "mus%um, _"):
        result = payload(
            run_one(
                tools, "search_trip_recommendations", {"keywords": keywords}, FIXTURE_PASSENGER_ID
            )
        )
        assert result["trip_recommendations"] == [], keywords
    # A city name gets airport suggestions; the same name with "_" in it gets none.
    assert "Matching airports: CDG" in error_text(
        run_one(tools, "search_flights", {"departure_airport": "Paris"}, FIXTURE_PASSENGER_ID)
    )
    assert "Matching airports" not in error_text(
        run_one(tools, "search_flights", {"departure_airport": "P_ris"}, FIXTURE_PASSENGER_ID)
    )


@pytest.mark.parametrize(
    ("name", "argument"),
    [
        ("search_hotels", "location"),
        ("search_hotels", "name"),
        ("search_car_rentals", "location"),
        ("search_trip_recommendations", "keywords"),
        ("search_flights", "departure_airport"),
        ("search_flights", "arrival_airport"),
    ],
)
@pytest.mark.parametrize("length", [MAX_SEARCH_CHARS + 1, 60_000])
def test_a_long_search_text_gets_a_clear_short_error(
    tools: list[BaseTool], name: str, argument: str, length: int
) -> None:
    text = error_text(
        run_one(tools, name, {argument: ("%_" * length)[:length]}, FIXTURE_PASSENGER_ID)
    )
    assert argument in text
    assert f"at most {MAX_SEARCH_CHARS} characters" in text
    assert len(text) <= 300


def test_a_search_text_as_long_as_allowed_finds_nothing_quietly(tools: list[BaseTool]) -> None:
    result = payload(
        run_one(tools, "search_hotels", {"location": "x" * MAX_SEARCH_CHARS}, FIXTURE_PASSENGER_ID)
    )
    assert result["hotels"] == []
    assert "No hotel matches" in result["message"]


def test_too_many_keywords_get_a_clear_error(tools: list[BaseTool]) -> None:
    words = ",".join(f"w{i}" for i in range(MAX_SEARCH_WORDS + 1))
    text = error_text(
        run_one(tools, "search_trip_recommendations", {"keywords": words}, FIXTURE_PASSENGER_ID)
    )
    assert f"at most {MAX_SEARCH_WORDS}" in text


def test_the_queries_refuse_long_text_themselves(travel_db: Database) -> None:
    # The db functions are an edge too (the evaluation and scripts call them directly).
    long = "a" * 100_000
    with travel_db.session() as session:
        for search in (
            lambda: reservations.search(session, HOTEL, NOW, location=long),
            lambda: reservations.search(session, CAR_RENTAL, NOW, name=long),
            lambda: reservations.search(session, EXCURSION, NOW, keywords=long),
            lambda: flights.search_flights(session, NOW, arrival_airport=long),
        ):
            with pytest.raises(InvalidInputError, match="too long"):
                search()
