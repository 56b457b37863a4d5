"""Tool-level tests of what only the excursion tools have: the search by keywords.

The behaviours excursions share with hotels and car rentals are in
``test_tools_reservations.py``.
"""

from __future__ import annotations

from db.engine import Database
from tests.support.reservation_domains import EXCURSIONS
from tests.support.tools import payload, run_one


def test_search_trip_recommendations_by_keywords(travel_db: Database) -> None:
    data = payload(
        run_one(
            EXCURSIONS.tools(travel_db),
            "search_trip_recommendations",
            {"location": "basel", "keywords": "art,river"},
            None,
        )
    )
    assert data["trip_recommendations"]
    for item in data["trip_recommendations"]:
        assert item["location"] == "Basel"
        assert "art" in item["keywords"].lower() or "river" in item["keywords"].lower()
