"""One fork server per test process, for the racers and the crash children alike.

``multiprocessing`` starts one fork server per process and takes the modules it
preloads from the first module to start a child: ``test_races.py`` and
``test_crash_consistency.py`` each asked for their own, and whichever ran second got
children that imported its helper (and LangGraph under it) afresh, seconds of CPU each.
Both now ask for the same context, preloading everything either needs, so the program is
imported once per test process (each xdist worker has its own server).
"""

from __future__ import annotations

import multiprocessing
from typing import Any

PRELOAD = [
    # The main module too: a child re-runs it unless the server already holds it.
    "__main__",
    "tests.support.crash_child",
    "tests.support.race_child",
    "conversations",
    "graph",
    "tests.support.scripted",
    "langgraph.checkpoint.sqlite",
    "langgraph.checkpoint.postgres",
]


def context() -> Any:
    """Return the forkserver context, its server preloading ``PRELOAD``."""
    found = multiprocessing.get_context("forkserver")
    found.set_forkserver_preload(PRELOAD)
    return found
