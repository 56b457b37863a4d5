"""Waiting in a test for something another thread or process makes true."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], seconds: float = 20) -> None:
    """Return once ``condition()`` is true, asking every fiftieth of a second.

    Raises:
        AssertionError: It was still false after ``seconds``.
    """
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
