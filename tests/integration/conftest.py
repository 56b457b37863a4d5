"""Fixtures the process and server tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import build_sqlite
from tests.support.shared import built_once


@pytest.fixture(scope="session")
def real_clock_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A travel database (seed 42) built at the real clock, once per run; tests copy it.

    For the installed program in a terminal, which reads the real time. Built at the
    start of the run rather than of each module: a run is minutes long, and the data is
    laid out days around the moment it was built.
    """
    return built_once(tmp_path_factory, "real-clock", lambda path: build_sqlite(path, seed=42))
