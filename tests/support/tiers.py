"""Which tests a run takes: the quick suite by default, the slower tiers when asked for.

Three tiers are left out of a plain ``pytest`` (they count as deselected, and the run's
summary says how many and how to run them):

- ``e2e``: the program as it is used, in processes of its own: the console script in a
  pty, the service over HTTP, the web page in Chromium, several workers on PostgreSQL,
  whole database builds. Every test under ``tests/integration/`` is marked so; a test
  elsewhere that starts the program or builds a whole database marks itself.
- ``exhaustive``: the long tail of a test matrix (``tests/support/exhaustive.py``).
- ``langgraph_server``: the assistant under LangGraph's own server, which installs
  ``langgraph-cli`` into ``.cache/`` on first use.

A tier runs when the marker expression names it (``pytest -m e2e``; pytest's own ``-m``
then chooses), with ``--all`` (every test but ``langgraph_server``'s), with
``--exhaustive`` (the exhaustive tier), or when the command line names the test, its file
or a folder holding it (``pytest tests/integration``; an exhaustive case only by its node
id, ``path::test[id]``). ``.ci/run`` runs every tier.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.shared import run_folder, worker_id

# In order of precedence: a test with two tiers' marks belongs to the first (an exhaustive
# case of an e2e matrix runs with the exhaustive tier, not twice).
TIERS = {
    "exhaustive": "pytest -m exhaustive",
    "langgraph_server": "pytest -m langgraph_server",
    "e2e": "pytest -m e2e",
}
INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
_LEFT_OUT = pytest.StashKey[dict[str, int]]()


def mark_e2e(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/integration/`` as ``e2e``."""
    for item in items:
        if INTEGRATION in item.path.resolve().parents:
            item.add_marker(pytest.mark.e2e)


def _named(config: pytest.Config) -> list[tuple[Path, str]]:
    """Return what the command line names: a path (file or folder) and a node id's rest."""
    root = Path(config.invocation_params.dir)
    testpaths = {(root / p).resolve() for p in config.getini("testpaths")}
    named = []
    for arg in config.args:
        path, _, rest = str(arg).partition("::")
        resolved = (root / path).resolve()
        if resolved not in testpaths and resolved != config.rootpath:
            named.append((resolved, rest))
    return named


def _asked_for(config: pytest.Config) -> set[str]:
    """Return the tiers the run takes whole."""
    expression = config.getoption("markexpr") or ""
    asked = {tier for tier in TIERS if tier in expression}
    if config.getoption("--all"):
        asked |= {"e2e", "exhaustive"}
    if config.getoption("--exhaustive"):
        asked.add("exhaustive")
    return asked


def deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tiers not asked for (see the module's docstring)."""
    asked = _asked_for(config)
    named = _named(config)

    def tier_of(item: pytest.Item) -> str | None:
        """Return the tier the test belongs to when the run leaves that tier out."""
        for tier in TIERS:
            if item.get_closest_marker(tier) is not None:
                return None if tier in asked else tier
        return None

    def is_named(item: pytest.Item, tier: str) -> bool:
        """Tell whether the command line names the test (the exhaustive tier by node id)."""
        path = item.path.resolve()
        rest = item.nodeid.partition("::")[2]
        if tier == "exhaustive":
            return any(path == p and r and rest.startswith(r) for p, r in named)
        return any((path == p and rest.startswith(r)) or p in path.parents for p, r in named)

    left_out: dict[str, int] = {}
    kept, dropped = [], []
    for item in items:
        tier = tier_of(item)
        if tier is None or is_named(item, tier):
            kept.append(item)
        else:
            dropped.append(item)
            left_out[tier] = left_out.get(tier, 0) + 1
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    config.stash[_LEFT_OUT] = left_out
    if hasattr(config, "workerinput"):  # tell the main process, which collects nothing
        folder = run_folder(config._tmp_path_factory)  # type: ignore[attr-defined]
        counts = ",".join(f"{tier}={n}" for tier, n in left_out.items())
        (folder / f"tiers-left-out-{worker_id()}.txt").write_text(counts)


def summary(config: pytest.Config) -> str | None:
    """Say how many tests of each tier this run left out, and how to run them."""
    if config.getoption("markexpr"):  # the run chose by marks itself
        return None
    left_out = config.stash.get(_LEFT_OUT, {})
    if not left_out and not hasattr(config, "workerinput"):
        factory = getattr(config, "_tmp_path_factory", None)
        folder = Path(factory.getbasetemp()) if factory is not None else None
        for said in folder.glob("tiers-left-out-*.txt") if folder is not None else ():
            for part in filter(None, said.read_text().split(",")):
                tier, _, count = part.partition("=")
                left_out[tier] = max(left_out.get(tier, 0), int(count))
    if not left_out:
        return None
    parts = [f"{n} {tier} ({TIERS[tier]})" for tier, n in left_out.items()]
    return f"left out: {', '.join(parts)}; pytest --all runs all but langgraph_server's"
