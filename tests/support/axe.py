"""axe-core in the browser tests: the npm package, installed once into an ignored cache.

``axe_script`` returns the path of ``axe.min.js``, installing the pinned ``axe-core``
with ``npm`` into ``<checkout>/.cache/axe-core`` (ignored by git) the first time, under a
file lock so that parallel workers install it once; without npm, or when the install
fails, the test skips and says why. ``serious_violations`` injects it into a page and
returns the serious and critical violations (of the WCAG 2 A/AA rules, or of every rule
axe runs by default), as readable lines. Both the web chat's and the supervisor's page
tests use it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.shared import locked

AXE_VERSION = "4.14.1"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "axe-core"
RULE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]


def axe_script() -> Path:
    """Return ``axe.min.js`` of ``axe-core`` ``AXE_VERSION``, installing it on first use."""
    script = CACHE / AXE_VERSION / "node_modules" / "axe-core" / "axe.min.js"
    if script.exists():
        return script
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (apt-get install -y npm): the axe-core check needs it")
    CACHE.mkdir(parents=True, exist_ok=True)
    with locked(CACHE / "install.lock"):
        if not script.exists():
            done = subprocess.run(
                [
                    npm,
                    "install",
                    "--no-save",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    str(CACHE / AXE_VERSION),
                    f"axe-core@{AXE_VERSION}",
                ],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if done.returncode != 0 or not script.exists():
                pytest.skip(f"npm could not install axe-core {AXE_VERSION}: {done.stderr[-500:]}")
    return script


def serious_violations(page: Any, tags: list[str] | None = RULE_TAGS) -> list[str]:
    """Return the serious and critical axe-core violations of ``page``, one line each.

    ``tags`` limits the rules to those tags; ``None`` runs axe's whole default set.
    """
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Evaluated through the browser's debugging protocol, which the page's
        # Content-Security-Policy (no inline script) does not apply to, unlike a <script>.
        page.evaluate(axe_script().read_text(encoding="utf-8") + "\n;undefined")
    result = page.evaluate(
        "tags => axe.run(document, tags ? {runOnly: {type: 'tag', values: tags}} : {})", tags
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at "
        + ", ".join(" ".join(n["target"]) for n in v["nodes"][:5])
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
