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
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


# The file, in the run's shared folder, naming a PostgreSQL template the run built
# (``postgres-template.name``, ``postgres-template-<kind>.name``).
_RUN_TEMPLATE = "postgres-template"


@contextmanager
def run_template(
    tmp_path_factory: Any, build: Callable[[str], None], kind: str = ""
) -> Iterator[str]:
    """Yield the name of this run's template database, built by ``build(url)`` once.

    Without xdist: made, built and dropped here. In an xdist worker: the first worker to
    get here builds it (under a lock in the run's shared folder) and names it in a file
    there; the others reuse it; ``drop_run_templates`` in the main process drops it when
    the run ends, since no worker knows it is the last to use it. Each ``kind`` (``""``,
    the small template; ``"full"``, the full-load one) is a template of its own.
    """
    from tests.support.shared import locked, run_folder

    if "PYTEST_XDIST_WORKER" not in os.environ:
        name, url = create_database()
        try:
            build(url)
            yield name
        finally:
            drop_database(name)
        return
    folder = run_folder(tmp_path_factory)
    stem = f"{_RUN_TEMPLATE}-{kind}" if kind else _RUN_TEMPLATE
    named = folder / f"{stem}.name"
    with locked(folder / f"{stem}.name.lock"):
        if not named.exists():
            name, url = create_database()
            try:
                build(url)
            except BaseException:
                drop_database(name)
                raise
            named.write_text(name)
    yield named.read_text()


def drop_run_templates(config: Any) -> None:
    """Drop the templates the xdist workers of this run built, if they built any."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    for named in sorted(Path(factory.getbasetemp()).glob(f"{_RUN_TEMPLATE}*.name")):
        drop_database(named.read_text().strip())
        named.unlink()
