"""docs/RULES.md names, for every rule, the tests and mutants that guard it: keep it true.

A test renamed or removed, or a mutant of ``scripts/mutants.py`` added without its rule
being written down, fails here rather than leaving the document quietly wrong.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "RULES.md"
MUTANTS = ROOT / "scripts" / "mutants.py"
# ``tests/unit/test_x.py::test_name`` (a parametrized test is named without its ids).
_NODE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
# A table row's last cell: the mutants, each in backticks (``rule-*`` for a family).
_MUTANT_CELL = re.compile(r"\|\s*((?:`[a-z0-9*-]+`(?:,\s*)?)+)\s*\|\s*$")
_MUTANT_ID = re.compile(r'(?:Mutant|_constant)\(\s*"([a-z0-9-]+)"')


def _mutants_named_in_the_document(text: str) -> set[str]:
    named: set[str] = set()
    for line in text.splitlines():
        cell = _MUTANT_CELL.search(line)
        if cell is not None:
            named.update(re.findall(r"`([a-z0-9*-]+)`", cell.group(1)))
    return named


def test_rules_document_names_only_tests_that_exist() -> None:
    nodes = _NODE.findall(RULES.read_text(encoding="utf-8"))
    assert len(nodes) > 100
    missing = []
    for path, name in nodes:
        source = ROOT / path
        text = source.read_text(encoding="utf-8") if source.exists() else ""
        if not re.search(rf"^(async )?def {name}\(", text, re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == []


def test_rules_document_and_the_mutation_script_name_the_same_mutants() -> None:
    defined = set(_MUTANT_ID.findall(MUTANTS.read_text(encoding="utf-8")))
    named = _mutants_named_in_the_document(RULES.read_text(encoding="utf-8"))
    assert len(defined) > 90
    unknown = sorted(n for n in named if not fnmatch.filter(defined, n))
    unlisted = sorted(d for d in defined if not any(fnmatch.fnmatch(d, n) for n in named))
    assert (unknown, unlisted) == ([], [])
