"""The catalogue searches (hotels, car rentals, excursions) count every match, not a page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from db import reservations
from db.car_rentals import CAR_RENTAL
from db.engine import Database
from db.excursions import EXCURSION
from db.hotels import HOTEL
from db.models import CarRental, Hotel, TripRecommendation
from tests.support.databases import FIXED_NOW

Search = Callable[..., dict[str, Any]]
CASES = [
    pytest.param(
        lambda s, **kw: reservations.search(s, HOTEL, FIXED_NOW, **kw), Hotel, "hotels", id="hotels"
    ),
    pytest.param(
        lambda s, **kw: reservations.search(s, CAR_RENTAL, FIXED_NOW, **kw),
        CarRental,
        "car_rentals",
        id="car_rentals",
    ),
    pytest.param(
        lambda s, **kw: reservations.search(s, EXCURSION, FIXED_NOW, **kw),
        TripRecommendation,
        "trip_recommendations",
        id="excursions",
    ),
]


@pytest.mark.parametrize(("search", "model", "key"), CASES)
@pytest.mark.parametrize("limit", [0, 1, 2, 1000])
def test_matches_counts_every_entry_of_the_city_whatever_the_limit(
    travel_db: Database, search: Search, model: Any, key: str, limit: int
) -> None:
    with travel_db.session() as session:
        in_basel = session.scalar(
            select(func.count()).select_from(model).where(func.lower(model.location) == "basel")
        )
        everything = search(session, location="basel", limit=1000)[key]
        result = search(session, location="basel", limit=limit)
    assert in_basel is not None and in_basel > 2  # the page is smaller than the matches
    assert result["matches"] == in_basel
    assert result[key] == everything[:limit]  # the same order, cut at the limit


@pytest.mark.parametrize(("search", "model", "key"), CASES)
def test_nothing_found_counts_zero(
    travel_db: Database, search: Search, model: Any, key: str
) -> None:
    with travel_db.session() as session:
        result = search(session, location="Atlantis")
    assert result["matches"] == 0 and result[key] == []
