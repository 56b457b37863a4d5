"""Tests that share an expensive module-scoped fixture run on one pytest-xdist worker.

xdist's own ``--dist loadgroup`` (``xdist_group`` marks) renames each marked test's node
id, which pytest 9.2 no longer lets it do: the marks are read and ignored, and every
worker that gets one of those tests sets the fixture up again. So the grouping is done
here: each worker, when it has collected the tests, writes which of them use one of the
fixtures of ``GROUPS`` to a file in the run's shared folder; the scheduler of the main
process (``GroupScheduling``, made by ``pytest_xdist_make_scheduler`` in
``tests/conftest.py``) reads those files and sends each group to one worker as a single
unit, the largest first, and every other test on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.shared import run_folder, worker_id

# The fixture's name, and the group its tests go to.
GROUPS = {
    # The racers and the crash children fork from one server (tests/support/forkserver.py):
    # in one worker it imports the program once.
    "racers": "forkserver",  # six forked racers and a PostgreSQL template (test_races.py)
    "children": "forkserver",  # the crash children (test_crash_consistency.py)
    "travel_template": "postgres-cli",  # `db init` on PostgreSQL (test_postgres_cli.py)
    "other_seed_build": "other-seed-build",  # a second build (test_db_generate.py)
    # `langgraph dev` servers, one at a time (test_langgraph_server.py)
    "langgraph_cli": "langgraph-server",
}


def group_of(item: pytest.Item) -> str | None:
    """Return the group of a collected test, or ``None`` when it can run anywhere."""
    names = getattr(item, "fixturenames", ())
    groups = sorted({group for fixture, group in GROUPS.items() if fixture in names})
    if len(groups) > 1:
        raise pytest.UsageError(f"{item.nodeid} is in two xdist groups: {groups}")
    return groups[0] if groups else None


def _file(folder: Path, worker: str) -> Path:
    return folder / f"xdist-groups-{worker}.json"


def record(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: write the group of each grouped test for the scheduler."""
    if not hasattr(config, "workerinput"):
        return
    folder = run_folder(config._tmp_path_factory)  # type: ignore[attr-defined]
    found = {item.nodeid: group for item in items if (group := group_of(item)) is not None}
    _file(folder, worker_id()).write_text(json.dumps(found))


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Return the main process's scheduler: xdist's ``loadscope`` with our groups.

    Only for ``--dist load`` (what ``-n`` alone means) and ``loadgroup``; any other
    ``--dist`` keeps xdist's own scheduler.
    """
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    folder = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """Each group is one unit of work, every other test is a unit of its own."""

        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = {}
                for found in sorted(folder.glob("xdist-groups-*.json")):
                    self._groups.update(json.loads(found.read_text()))
            group = self._groups.get(nodeid)
            return f"group:{group}" if group else nodeid

    return GroupScheduling(config, log)
