"""The long tail of a test matrix: marked ``exhaustive``, left out of the default run.

A matrix (every crash point of every write tool, every scenario) keeps a representative
part in the default run, chosen so that each of its dimensions is still met there (every
crash point, every domain, both answers; every scenario category), and marks the rest
``exhaustive``, a tier the default run leaves out (``tests/support/tiers.py``):
``pytest -m exhaustive`` runs only them (``.ci/run`` does, as a stage of its own).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import pytest

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
