"""Fixtures the in-process tests share: the terminal's home, a scripted model, a database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from db.clock import fixed_clock
from db.engine import Database
from tests.conftest import FIXED_NOW
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
