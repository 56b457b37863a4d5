"""The garbage collector while the program loads its code.

Importing LangChain, LangGraph, the OpenAI client, SQLAlchemy and FastAPI creates about
240,000 objects that live as long as the process. Python's cyclic collector, started by
counts of allocations, walks them again and again while they are being created: on this
project's 2-core machine about 0.3 s of a 2 s load, most of it full collections.

``loading_code`` pauses the collector while the slow part of a command loads (the chat's
background load, the service's build), then moves everything alive to the collector's
permanent generation (``gc.freeze``), which later collections skip, and resumes it. The
objects are still freed as usual when nothing refers to them any more; what the
collector no longer finds are reference cycles among them that become garbage: the few
the imports leave behind (about 2,400 objects) stay for the life of the process, a fixed
cost, where collecting them first would take 0.2 s of the start.

Only the program's own process does this (``own_process``, called by the console
script's entry point): a process that calls ``cli.main`` (the tests) keeps its collector
as it is, so that its garbage is never frozen.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_owned = False
_loading = 0  # loads running now (the collector is paused while any is)
_resume = False  # whether the collector ran when the first of them began


def own_process() -> None:
    """Say that this process is the program's, so ``loading_code`` may pause its collector."""
    global _owned
    _owned = True


@contextmanager
def loading_code() -> Iterator[None]:
    """Pause the collector while the block runs, then freeze what is alive and resume it.

    Loads may overlap (from several threads): the collector resumes when the last ends.
    A process that is not the program's (see the module) is left as it is.
    """
    global _loading, _resume
    if not _owned:
        yield
        return
    with _lock:
        if _loading == 0:
            _resume = gc.isenabled()
            gc.disable()
        _loading += 1
    try:
        yield
    finally:
        with _lock:
            _loading -= 1
            if _loading == 0:
                gc.freeze()
                if _resume:
                    gc.enable()
