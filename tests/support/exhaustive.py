"""The long tail of a test matrix: marked ``exhaustive``, left out of the default run.

A matrix (every crash point of every write tool, every scenario) keeps a representative
part in the default run, chosen so that each of its dimensions is still met there (every
crash point, every domain, both answers; every scenario category), and marks the rest
``exhaustive``. ``pytest`` leaves the marked tests out (they count as deselected);
``pytest -m exhaustive`` runs only them (``.ci/run`` does, as a stage of its own);
``pytest --exhaustive`` runs everything. A marked test named on the command line
(``path::test[id]``) runs too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.shared import run_folder, worker_id

MARK = "exhaustive"
EXHAUSTIVE = pytest.mark.exhaustive
OPTION = "--exhaustive"
_LEFT_OUT = pytest.StashKey[int]()


def params(
    cases: Iterable[Any],
    representative: Collection[Any],
    *,
    ids: Sequence[str] | None = None,
    key: Callable[[Any], Any] = lambda case: case,
) -> list[Any]:
    """Return ``cases`` as parameters, those whose ``key`` is not representative marked.

    Raises:
        ValueError: A representative key matches no case (a renamed case would otherwise
            drop out of the default run unnoticed).
    """
    cases = list(cases)
    keys = [key(case) for case in cases]
    missing = [wanted for wanted in representative if wanted not in keys]
    if missing:
        raise ValueError(f"representative cases that are not in the matrix: {missing}")
    return [
        pytest.param(
            *(case if isinstance(case, tuple) else (case,)),
            marks=() if case_key in representative else EXHAUSTIVE,
            id=ids[index] if ids is not None else None,
        )
        for index, (case, case_key) in enumerate(zip(cases, keys, strict=True))
    ]


def _named(config: pytest.Config) -> list[tuple[Path, str]]:
    """Return the tests named on the command line by node id: their file and the rest."""
    named = []
    for arg in config.args:
        path, sep, rest = str(arg).partition("::")
        if sep:
            named.append(((Path(config.invocation_params.dir) / path).resolve(), rest))
    return named


def deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the exhaustive tests out unless asked for (see the module's docstring)."""
    if config.getoption(OPTION) or MARK in (config.getoption("markexpr") or ""):
        return
    named = _named(config)

    def wanted(item: pytest.Item) -> bool:
        if item.get_closest_marker(MARK) is None:
            return True
        rest = item.nodeid.partition("::")[2]
        return any(path == item.path.resolve() and rest.startswith(n) for path, n in named)

    kept = [item for item in items if wanted(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not wanted(item)])
        left_out = len(items) - len(kept)
        items[:] = kept
        config.stash[_LEFT_OUT] = left_out
        if hasattr(config, "workerinput"):  # tell the main process, which collects nothing
            folder = run_folder(config._tmp_path_factory)  # type: ignore[attr-defined]
            (folder / f"exhaustive-left-out-{worker_id()}.txt").write_text(str(left_out))


def summary(config: pytest.Config) -> str | None:
    """Say how many exhaustive tests this run left out, and how to run them."""
    left_out = config.stash.get(_LEFT_OUT, 0)
    if not left_out and not hasattr(config, "workerinput"):
        factory = getattr(config, "_tmp_path_factory", None)
        folder = Path(factory.getbasetemp()) if factory is not None else None
        if folder is not None:
            counts = [int(f.read_text()) for f in folder.glob("exhaustive-left-out-*.txt")]
            left_out = max(counts, default=0)
    if not left_out:
        return None
    return (
        f"{left_out} exhaustive tests left out (the long tail of the test matrices): "
        "pytest -m exhaustive runs them, pytest --exhaustive runs everything"
    )
