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
from concurrent.futures import Future, ThreadPoolExecutor
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


def database_url(name: str) -> str:
    """Return the SQLAlchemy URL of a database on the test server."""
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
    return name, database_url(name)


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


class ScratchCopies:
    """Copies of one template database, made one ahead and dropped in the background.

    Creating a copy and dropping one each take about a second, mostly the server
    waiting for its disk; a test that takes a copy gets one made while the previous test
    ran, and hands it back to be dropped while the next one runs. ``close`` waits for
    every drop and drops the copy made ahead.
    """

    def __init__(self, template: str) -> None:
        self._template = template
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="scratch-db")
        self._ahead: Future[tuple[str, str]] | None = None
        self._drops: list[Future[None]] = []

    def take(self) -> str:
        """Return the URL of a fresh copy of the template (the caller hands it back)."""
        ready = self._ahead or self._workers.submit(create_database, self._template)
        self._ahead = self._workers.submit(create_database, self._template)
        _, url = ready.result()
        return url

    def give_back(self, url: str) -> None:
        """Drop a copy ``take`` returned, in the background."""
        self._drops.append(self._workers.submit(drop_database, database_name(url)))

    def close(self) -> None:
        """Drop the copy made ahead and wait for every drop; raise the first failure."""
        try:
            if self._ahead is not None:
                name, _ = self._ahead.result()
                self._drops.append(self._workers.submit(drop_database, name))
            for drop in self._drops:
                drop.result()
        finally:
            self._workers.shutdown(wait=True)


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
