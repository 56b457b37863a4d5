"""Fixtures the in-process tests share: the terminal's home, a scripted model, a database,
and the assistant over them (``make_assistant``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conversations.assistant import TravelAssistant
from db.clock import fixed_clock
from db.engine import Database
from tests.support.assistants import build_assistant
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The terminal's home folder (``--home``), not yet created."""
    return tmp_path / "app"


@pytest.fixture
def model() -> ScriptedChatModel:
    """A scripted chat model with nothing to say until a test gives it replies."""
    return ScriptedChatModel()


@pytest.fixture
def fixed_db(db_path: Path) -> Iterator[Database]:
    """The test's SQLite copy of the generated database, its clock at ``FIXED_NOW``."""
    database = Database.from_url(str(db_path), clock=fixed_clock(FIXED_NOW))
    yield database
    database.dispose()


@pytest.fixture
def make_assistant(
    model: ScriptedChatModel, request: pytest.FixtureRequest
) -> Callable[..., TravelAssistant]:
    """Build the assistant as ``tests.support.assistants.build_assistant`` does.

    By default over ``travel_db`` (the run's engine) and the test's ``model``; any
    argument of ``build_assistant`` may be given by keyword (``db=fixed_db`` for the
    SQLite copy the terminal tests read, ``checkpointer=...``, ``retry_policy=None``).
    ``travel_db`` is only set up when no ``db`` is given.
    """

    def make(**options: Any) -> TravelAssistant:
        if "db" not in options:
            options["db"] = request.getfixturevalue("travel_db")
        options.setdefault("model", model)
        return build_assistant(**options)

    return make
