"""Scratch PostgreSQL databases for tests, on the server the test run was pointed at.

The server is named by ``TRAVEL_ASSISTANT_TEST_POSTGRES`` (a SQLAlchemy URL of a database
the tests may connect to for administration, for example
``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``). Every database made here is
named ``ta_test_…`` and is dropped when its context ends, even if the test failed; a run
that was killed leaves them behind, and ``drop_leftovers`` removes them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

SERVER_ENV = "TRAVEL_ASSISTANT_TEST_POSTGRES"
DEFAULT_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PREFIX = "ta_test_"


def server_url() -> str:
    """Return the administration URL of the test server (the environment, or the default)."""
    return os.environ.get(SERVER_ENV) or DEFAULT_SERVER


def _libpq(url: str) -> str:
    """Turn a SQLAlchemy URL (``postgresql+psycopg://``) into one psycopg accepts."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _database_url(name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(server_url()).set(database=name).render_as_string(hide_password=False)


def _admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(_libpq(server_url()), autocommit=True) as connection:
        connection.execute(statement)  # type: ignore[arg-type]


def create_database(template: str | None = None) -> tuple[str, str]:
    """Create a new scratch database (a copy of ``template`` if given).

    Returns:
        Its name and its SQLAlchemy URL.
    """
    name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
    suffix = f" TEMPLATE {template}" if template else ""
    _admin(f"CREATE DATABASE {name}{suffix}")
    return name, _database_url(name)


def drop_database(name: str) -> None:
    """Drop a scratch database, closing whatever is still connected to it."""
    if not name.startswith(PREFIX):
        raise ValueError(f"refusing to drop {name!r}: not a scratch database")
    _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def scratch_database(template: str | None = None) -> Iterator[str]:
    """Yield the URL of a new scratch database, dropped afterwards."""
    name, url = create_database(template)
    try:
        yield url
    finally:
        drop_database(name)


def database_name(url: str) -> str:
    """Return the database name of a URL made here."""
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    assert name is not None
    return name


def drop_leftovers() -> list[str]:
    """Drop every scratch database a killed run left behind; return their names."""
    import psycopg

    with psycopg.connect(_libpq(server_url()), autocommit=True) as connection:
        rows = connection.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (PREFIX + "%",)
        ).fetchall()
    names = [row[0] for row in rows]
    for name in names:
        drop_database(name)
    return names
