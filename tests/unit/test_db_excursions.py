"""Query-level tests of what only excursions have: the search by keywords.

The rules excursions share with hotels and car rentals are in ``test_db_reservations.py``.
"""

from __future__ import annotations

from db import reservations
from db.engine import Database
from db.excursions import EXCURSION
from tests.support.reservation_domains import NOW


def test_search_trip_recommendations_matches_any_keyword(travel_db: Database) -> None:
    with travel_db.session() as session:
        art = reservations.search(session, EXCURSION, NOW, keywords="museum")
        both = reservations.search(session, EXCURSION, NOW, keywords="museum, RIVER")
        none = reservations.search(session, EXCURSION, NOW, keywords="zzzz, qqqq")
    assert art["trip_recommendations"]
    assert all("museum" in e["keywords"].lower() for e in art["trip_recommendations"])
    art_ids = {e["recommendation_id"] for e in art["trip_recommendations"]}
    both_ids = {e["recommendation_id"] for e in both["trip_recommendations"]}
    assert art_ids < both_ids or both["matches"] > art["matches"]
    assert none["trip_recommendations"] == []
