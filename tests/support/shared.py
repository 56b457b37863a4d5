"""What the processes of one test run share: a folder, and databases built once in it.

With pytest-xdist (the default run uses it, see ``pyproject.toml``) the tests run in
several worker processes. A database every test copies is built once per run, by the
first worker that needs it, while the others wait on a file lock; then each worker
copies the same file. Without xdist the run's own temporary folder is used.

Nothing here is kept from one run to the next: every run builds afresh.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def worker_id() -> str:
    """Return this process's xdist worker id (``gw0``, ``gw1``…) or ``main`` without xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a folder every process of this run sees, and no other run does.

    An xdist worker's temporary folder is ``<the run's folder>/<worker id>``, so its
    parent is the run's; without xdist the run's folder is this process's own.
    """
    base = tmp_path_factory.getbasetemp()
    return base.parent if "PYTEST_XDIST_WORKER" in os.environ else base


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) across processes."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """Return ``<run folder>/<name>/travel.sqlite``, calling ``build`` the first time.

    ``build`` writes a new SQLite file at the path it is given; the file is renamed into
    place only when it returns, so a failed build is retried by the next caller rather
    than leaving a half-built database for the others.
    """
    folder = run_folder(tmp_path_factory) / name
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "travel.sqlite"
    with locked(folder / "build.lock"):
        if not done.exists():
            partial = folder / f"building-{worker_id()}.sqlite"
            partial.unlink(missing_ok=True)
            build(partial)
            partial.rename(done)
    return done
