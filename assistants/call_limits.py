"""Our own ends to a model call, besides the endpoint's failures: its limits and a cancel.

A prompt that cannot fit the model's context window is refused (``ContextBudgetError``).
Two time limits end a model call (``ModelDeadlineError``): the total time one reply may
take, since a server that keeps streaming never trips the client's timeout, which only
bounds the wait between two chunks; and ``time_limit``, a deadline the caller sets around
a whole run (the evaluation's time limit per scenario). A turn the caller cancelled ends
its call with ``TurnCancelledError``. What a limit means to the customer is told by
``assistants.providers.diagnose``.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator


class ModelDeadlineError(Exception):
    """A model call ran past one of our own time limits (not retried)."""

    def __init__(self, seconds: float, *, whole_run: bool = False) -> None:
        """Say which limit: ``seconds`` for one reply, or the run's (``whole_run``)."""
        self.seconds = seconds
        self.whole_run = whole_run
        what = "the time limit of this run" if whole_run else "the limit for one reply"
        super().__init__(f"The model's reply was not finished after {seconds:g} s ({what}).")


class ContextBudgetError(Exception):
    """The prompt cannot be made to fit the model's context window."""

    def __init__(self, needed: int, budget: int) -> None:
        """Say how many tokens the prompt needs at least and how many it may have."""
        self.needed = needed
        self.budget = budget
        super().__init__(
            f"The prompt needs about {needed} tokens even at its shortest, but the context "
            f"window leaves {budget} for it."
        )


# --- time limits ------------------------------------------------------------------------------

# The moment (time.monotonic) after which no model call of this context may go on, and the
# limit in seconds it came from. Context variables follow LangGraph into the worker
# threads that run the nodes.
_RUN_DEADLINE: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "travel_assistant_run_deadline", default=None
)


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Bound every model call made inside the block to ``seconds`` from now, in total.

    A call that is still streaming at the deadline stops with ``ModelDeadlineError``
    (``whole_run`` set), and so does every call that would start after it.
    """
    token = _RUN_DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _RUN_DEADLINE.reset(token)


def run_deadline() -> tuple[float, float] | None:
    """Return the enclosing ``time_limit``'s moment (``time.monotonic``) and its seconds."""
    return _RUN_DEADLINE.get()


def check_time_limit() -> None:
    """Raise ``ModelDeadlineError`` when the enclosing ``time_limit`` has passed."""
    deadline = _RUN_DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline[0]:
        raise ModelDeadlineError(deadline[1], whole_run=True)


class TurnCancelledError(Exception):
    """The caller cancelled the turn; the conversation was closed and can go on."""
