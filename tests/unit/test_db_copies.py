"""Throw-away copies of a travel database (db.copies), on the engine of the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from db.copies import create_copy, database_copies, is_postgresql, temporary_database
from db.engine import Database, url_for
from db.models import HotelBooking


def _exists(url: str) -> bool:
    """Tell whether the database of ``url`` is there (a file, or a PostgreSQL database)."""
    parsed = make_url(url_for(url))
    if not is_postgresql(url):
        return Path(parsed.database or "").exists()
    server = create_engine(parsed.set(database="postgres"))
    try:
        with server.connect() as connection:
            found = connection.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"),
                {"name": parsed.database},
            ).first()
    finally:
        server.dispose()
    return found is not None


def _bookings(db: Database) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(HotelBooking)) or 0


def test_copies_are_private_and_removed_afterwards(db_url: str, tmp_path: Path) -> None:
    template = db_url if is_postgresql(db_url) else Path(db_url)
    with database_copies(template, tmp_path, ["agent.sqlite", "gold.sqlite"]) as (agent, gold):
        urls = [agent.engine.url.render_as_string(hide_password=False)]
        urls.append(gold.engine.url.render_as_string(hide_password=False))
        assert len(set(urls)) == 2 and db_url not in urls
        before = _bookings(gold)
        with agent.transaction() as session:
            session.execute(HotelBooking.__table__.delete())  # type: ignore[attr-defined]
        assert _bookings(agent) == 0 and _bookings(gold) == before > 0
    if is_postgresql(db_url):
        assert not any(_exists(url) for url in urls)
    assert _exists(db_url)


def test_postgresql_temporary_database_and_a_failed_copy(engine_name: str) -> None:
    if engine_name != "postgresql":
        pytest.skip("PostgreSQL only (--engine postgresql)")
    from tests.support import postgres

    with temporary_database(postgres.server_url(), "copies") as empty:
        assert _exists(empty)
        assert not Database.from_url(empty).has_schema()
        missing = make_url(empty).set(database="ta_test_no_such_template").render_as_string()
        with pytest.raises(Exception, match="does not exist"):
            create_copy(missing, "agent")
    assert not _exists(empty)
