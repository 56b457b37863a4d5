"""Fixtures the process and server tests share: the databases a program in a terminal reads,
and the one every scenario copies."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import build_sqlite
from tests.support.shared import built_once


@pytest.fixture(scope="session")
def real_clock_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small travel database (seed 42) built at the real clock, once per run; tests copy it.

    For the installed program in a terminal, which reads the real time. Built at the
    start of the run rather than of each module: a run is minutes long, and the data is
    laid out days around the moment it was built.
    """
    return built_once(tmp_path_factory, "real-clock", lambda path: build_sqlite(path, seed=42))


@pytest.fixture(scope="module")
def built_db(real_clock_db: Path) -> Path:
    """A travel database built at the real clock (the program reads the real time)."""
    return real_clock_db  # built once per run (above); tests copy it


@pytest.fixture
def files(built_db: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A home folder and a private copy of the database, outside the home."""
    home = tmp_path / "home"
    db = tmp_path / "data" / "travel.sqlite"
    db.parent.mkdir()
    shutil.copyfile(built_db, db)
    yield home, db


@pytest.fixture(scope="module")
def postgres_template(request: pytest.FixtureRequest) -> Iterator[str]:
    """The name of a built PostgreSQL travel database to copy: the run's own, or one built here.

    Skips the test when no PostgreSQL server is reachable.
    """
    from db.clock import fixed_clock
    from tests.support import postgres
    from tests.support.conversation_stores import postgres_unreachable
    from tests.support.databases import FIXED_NOW, build_url

    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(reason)
    if request.config.getoption("--engine") == "postgresql":
        yield str(request.getfixturevalue("template_db_url"))
        return
    name, url = postgres.create_database()
    try:
        build_url(url, seed=7, clock=fixed_clock(FIXED_NOW))  # small, as template_db_url
        yield name
    finally:
        postgres.drop_database(name)


@pytest.fixture(scope="session")
def template(
    engine_name: str, template_db_path: Path, template_db_url: str
) -> Iterator[Path | str]:
    """The database every scenario copies: the SQLite file, or the PostgreSQL template."""
    if engine_name == "sqlite":
        yield template_db_path
        return
    from tests.support import postgres

    yield postgres.database_url(template_db_url)
