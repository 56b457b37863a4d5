"""Shared fixtures: an isolated environment, no network, and a generated database."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from db.clock import fixed_clock
from db.engine import Database
from tests.support import schema_cache, scratch
from tests.support.databases import FIXED_NOW, FULL_SCALE_MARK, build_sqlite, build_url
from tests.support.shared import built_once

schema_cache.install()


_ISOLATED_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "TAVILY_API_KEY",
    "TRAVEL_ASSISTANT_MODEL",
    "TRAVEL_ASSISTANT_DB",
    "TRAVEL_ASSISTANT_CONVERSATIONS",
    "TRAVEL_ASSISTANT_DATA",
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING_V2",
)


# The endpoint settings pytest was started with, before ``isolated_env`` removes them; only
# tests marked ``live`` get them back (through ``live_endpoint``).
_LIVE_ENV = {
    name: os.environ[name]
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "TRAVEL_ASSISTANT_MODEL")
    if os.environ.get(name)
}


@pytest.fixture
def live_endpoint(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Restore the real endpoint settings, or skip when none was configured."""
    if not {"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"} & set(_LIVE_ENV):
        pytest.skip("no model endpoint: set OPENAI_API_KEY or OPENAI_BASE_URL to run live tests")
    for name, value in _LIVE_ENV.items():
        monkeypatch.setenv(name, value)
    return dict(_LIVE_ENV)


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Give every test its own home and data folder and no credentials."""
    for name in _ISOLATED_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("TRAVEL_ASSISTANT_HOME", str(home / "travel-assistant"))
    yield home


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else address
    if (
        isinstance(host, str)
        and host not in ("127.0.0.1", "localhost", "::1")
        and not (self.family == socket.AF_UNIX)
    ):
        raise RuntimeError(f"tests may not reach the network (tried {address!r})")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Refuse any connection that leaves the machine (except in tests marked ``live``)."""
    if request.node.get_closest_marker("live") is None:
        monkeypatch.setattr(socket.socket, "connect", _loopback_only)


ENGINE_ENV = "TRAVEL_ASSISTANT_TEST_ENGINE"
ENGINES = ("sqlite", "postgresql")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exhaustive",
        action="store_true",
        help="also run the long tail of the test matrices (marked exhaustive), which the "
        "default run leaves out; -m exhaustive runs only them (tests/support/tiers.py)",
    )
    parser.addoption(
        "--all",
        action="store_true",
        help="run every tier the default run leaves out (e2e, exhaustive) with the quick "
        "suite; langgraph_server's tests still need -m langgraph_server",
    )
    parser.addoption(
        "--engine",
        choices=ENGINES,
        default=os.environ.get(ENGINE_ENV) or "sqlite",
        help="engine of the travel database behind ``travel_db`` and ``db_url`` "
        f"(default: ${ENGINE_ENV} or sqlite); PostgreSQL runs on the server named by "
        "$TRAVEL_ASSISTANT_TEST_POSTGRES (default postgres@127.0.0.1:5432)",
    )


@pytest.fixture(scope="session")
def engine_name(request: pytest.FixtureRequest) -> str:
    """The engine the travel database of this run lives on: ``sqlite`` or ``postgresql``."""
    return str(request.config.getoption("--engine"))


# The session time zone of every PostgreSQL connection in a run on PostgreSQL: far from
# UTC, so that a timestamp shifted by the session's zone anywhere shows as a failure.
POSTGRES_SESSION_ZONE = "America/New_York"


@pytest.fixture(scope="session", autouse=True)
def _postgres_session_zone(engine_name: str) -> Iterator[None]:
    """Connect to PostgreSQL with a session time zone other than UTC (libpq's ``PGTZ``)."""
    if engine_name != "postgresql" or os.environ.get("PGTZ"):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PGTZ", POSTGRES_SESSION_ZONE)
        yield


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{FULL_SCALE_MARK}: db_path, db_url and travel_db copy the full-load travel "
        "database instead of the small one every other test gets "
        "(tests/support/databases.py)",
    )


def _full_scale(request: pytest.FixtureRequest) -> bool:
    """Tell whether the requesting test is marked ``full_scale``."""
    return request.node.get_closest_marker(FULL_SCALE_MARK) is not None


def _sqlite_template(tmp_path_factory: pytest.TempPathFactory, full_scale: bool) -> Path:
    return built_once(
        tmp_path_factory,
        "template-full" if full_scale else "template",
        lambda path: build_sqlite(
            path, seed=7, clock=fixed_clock(FIXED_NOW), full_scale=full_scale
        ),
    )


@pytest.fixture(scope="session")
def template_db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the small database once per test run (shared by the xdist workers).

    Every test copies it (``db_path``, ``db_url``) unless marked ``full_scale``; nothing
    writes to it.
    """
    return _sqlite_template(tmp_path_factory, full_scale=False)


@pytest.fixture(scope="session")
def full_scale_template_db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the full-load database once per test run, the first time a test needs it.

    The tests marked ``full_scale`` copy it; nothing writes to it.
    """
    return _sqlite_template(tmp_path_factory, full_scale=True)


def _template_url(
    engine_name: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    full_scale: bool,
) -> Iterator[str]:
    if engine_name == "sqlite":
        name = "full_scale_template_db_path" if full_scale else "template_db_path"
        yield str(request.getfixturevalue(name))
        return
    from tests.support import postgres

    def build(url: str) -> None:
        build_url(url, seed=7, clock=fixed_clock(FIXED_NOW), full_scale=full_scale)

    kind = "full" if full_scale else ""
    with postgres.run_template(tmp_path_factory, build, kind) as name:
        yield name


@pytest.fixture(scope="session")
def template_db_url(
    engine_name: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The small database every test copies: the SQLite file, or a PostgreSQL template.

    The PostgreSQL template is built once per run too: by the first xdist worker that
    needs it (the others wait for it and copy it), dropped by the main process when the
    run ends; without xdist, by this fixture.
    """
    yield from _template_url(engine_name, request, tmp_path_factory, full_scale=False)


@pytest.fixture(scope="session")
def full_scale_template_db_url(
    engine_name: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Like ``template_db_url``, the full-load database the ``full_scale`` tests copy."""
    yield from _template_url(engine_name, request, tmp_path_factory, full_scale=True)


@pytest.fixture
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A private copy of the generated database for one test (always a SQLite file).

    The small database, or the full-load one for a test marked ``full_scale``.
    """
    path = tmp_path / "travel.sqlite"
    if not path.exists():  # ``db_url`` may have made it already
        full = _full_scale(request)
        name = "full_scale_template_db_path" if full else "template_db_path"
        shutil.copyfile(request.getfixturevalue(name), path)
    return path


@pytest.fixture(scope="session")
def _postgres_copies(engine_name: str, template_db_url: str) -> Iterator[Any]:
    """Copies of the PostgreSQL template, made ahead and dropped in the background."""
    if engine_name != "postgresql":
        yield None
        return
    from tests.support import postgres

    copies = postgres.ScratchCopies(template_db_url)
    try:
        yield copies
    finally:
        copies.close()


@pytest.fixture
def db_url(
    engine_name: str, request: pytest.FixtureRequest, tmp_path: Path, _postgres_copies: Any
) -> Iterator[str]:
    """The URL of a private copy of the generated database, on the engine of this run.

    The small database, or the full-load one for a test marked ``full_scale``.
    """
    full = _full_scale(request)
    template = "full_scale_template_db_url" if full else "template_db_url"
    if engine_name == "sqlite":
        path = tmp_path / "travel.sqlite"
        if not path.exists():
            shutil.copyfile(request.getfixturevalue(template), path)
        yield str(path)
        return
    if full:
        from tests.support import postgres

        with postgres.scratch_database(request.getfixturevalue(template)) as url:
            yield url
        return
    url = _postgres_copies.take()
    try:
        yield url
    finally:
        _postgres_copies.give_back(url)


@pytest.fixture
def travel_db(db_url: str) -> Iterator[Database]:
    """A ``Database`` over a private copy, with the clock fixed at ``FIXED_NOW``."""
    database = Database.from_url(db_url, clock=fixed_clock(FIXED_NOW))
    yield database
    database.dispose()


# The default run is the quick suite: the e2e, exhaustive and langgraph_server tiers are
# left out unless asked for (tests/support/tiers.py); tests that share an expensive
# module-scoped fixture run on one xdist worker, so that it is set up once per run rather
# than once per worker (tests/support/xdist_groups.py).


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection sees the e2e marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.support import tiers, xdist_groups

    tiers.mark_e2e(items)
    tiers.deselect(config, items)
    xdist_groups.record(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from tests.support import xdist_groups

    return xdist_groups.make_scheduler(config, log)


_CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_CALL_PASSED] = report.passed
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Remove a passed test's databases once its fixtures are torn down (a failed test's
    stay to look at): each is a copy (4 MB, 32 MB at full scale), and pytest keeps three
    runs' folders."""
    folder = getattr(item, "funcargs", {}).get("tmp_path")
    try:
        return (yield)
    finally:
        if isinstance(folder, Path) and item.stash.get(_CALL_PASSED, False):
            scratch.remove_databases(folder)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the main process: drop the PostgreSQL template the xdist workers shared."""
    if not hasattr(session.config, "workerinput"):
        from tests.support import postgres

        postgres.drop_run_templates(session.config)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say how many tests of each tier the run left out (xdist's summary does not)."""
    if hasattr(config, "workerinput"):
        return
    from tests.support import tiers

    said = tiers.summary(config)
    if said:
        terminalreporter.write_line(said)
