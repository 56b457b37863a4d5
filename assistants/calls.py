"""One model call of a turn, bounded by the turn's cancel and its time limits.

A turn runs on an event loop (``conversations.TravelAssistant``), so waiting for a model
costs no thread: the call is a task, and this module races it against the turn's cancel
and the time left. Whichever comes first ends the wait; a call that lost the race is
cancelled, and a cancelled request closes its HTTP connection at once, headers or not,
so a server such as llama.cpp stops working on it.

The cancel is the turn's own event (``conversations.events.Cancel``, or any
``threading.Event``), set from any thread: by the customer's Stop, by Ctrl-C, by the
service stopping. It reaches the model calls of the turn through a context variable
(``cancelling``), which LangGraph copies into the tasks that run the nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from assistants.call_limits import ModelDeadlineError, TurnCancelledError, run_deadline

T = TypeVar("T")

_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "travel_assistant_turn_cancel", default=None
)
# How often an event without callbacks (a plain ``threading.Event``) is looked at.
_POLL_SECONDS = 0.05


@contextlib.contextmanager
def cancelling(cancel: threading.Event) -> Iterator[None]:
    """Let ``cancel`` stop the model calls made inside the block (``bounded``)."""
    token = _CANCEL.set(cancel)
    try:
        yield
    finally:
        _CANCEL.reset(token)


class Flag(threading.Event):
    """A ``threading.Event`` that calls back when it is set, from whichever thread.

    So the event loop awaits it without polling (``wait_set``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], object]] = []
        self._callbacks_lock = threading.Lock()

    def set(self) -> None:
        """Set the flag and call what ``when_set`` registered (from any thread)."""
        with self._callbacks_lock:
            super().set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def when_set(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` once the flag is set (now, if it is); return its undo.

        ``callback`` runs in the thread that sets the flag: it should only hand the
        news on (``loop.call_soon_threadsafe``).
        """
        with self._callbacks_lock:
            if not self.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], object]) -> None:
        with self._callbacks_lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)


async def wait_set(event: threading.Event) -> None:
    """Return once ``event`` is set, from whichever thread sets it.

    A ``Flag`` (a turn's ``Cancel`` is one) calls back (no polling); any other event is
    looked at every 50 ms.
    """
    if not isinstance(event, Flag):
        while not event.is_set():
            await asyncio.sleep(_POLL_SECONDS)
        return
    loop = asyncio.get_running_loop()
    fired = loop.create_future()

    def wake() -> None:
        if not fired.done():
            fired.set_result(None)

    undo = event.when_set(lambda: loop.call_soon_threadsafe(wake))
    try:
        await fired
    finally:
        undo()


async def bounded(call: Awaitable[T], reply_seconds: float | None = None) -> T:
    """Await ``call`` until it ends, the turn is cancelled, or its time is up.

    The time is the shorter of ``reply_seconds`` and what is left of the run's limit
    (``assistants.call_limits.time_limit``).

    Raises:
        TurnCancelledError: The turn's cancel was set first; ``call`` was cancelled.
        ModelDeadlineError: The time ran out first; ``call`` was cancelled.
    """
    cancel = _CANCEL.get()
    limit, whole_run = _time_left(reply_seconds)
    if limit is not None and limit <= 0:
        _close(call)
        raise ModelDeadlineError(_seconds(reply_seconds, whole_run), whole_run=whole_run)
    task = asyncio.ensure_future(call)
    stopped = asyncio.ensure_future(wait_set(cancel)) if cancel is not None else None
    try:
        waiting = {task} if stopped is None else {task, stopped}
        done, _ = await asyncio.wait(waiting, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the turn's own task was cancelled: the call goes with it
        task.cancel()
        raise
    finally:
        if stopped is not None:
            stopped.cancel()
    if task in done and not (cancel is not None and cancel.is_set()):
        return task.result()  # a reply that ended after the cancel is dropped, as cut
    await _cancel_and_wait(task)  # until the connection is closed
    if cancel is not None and cancel.is_set():
        raise TurnCancelledError("The turn was cancelled.")
    raise ModelDeadlineError(_seconds(reply_seconds, whole_run), whole_run=whole_run)


# How long a cancelled call is given to end before it is cancelled again.
_RECANCEL_SECONDS = 0.05


async def _cancel_and_wait(task: asyncio.Future[T]) -> None:
    """Cancel ``task`` and return once it has ended.

    One cancel is not always enough. On Python 3.11, ``asyncio.wait_for`` drops a
    cancel that arrives in the same loop pass as the result it waits for, and
    langchain-openai waits for every streamed chunk with it: a reply that streams fast
    kept running, after its cancel, to its end. So the call is cancelled again until it
    ends.
    """
    try:
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=_RECANCEL_SECONDS)
    except BaseException:  # the turn itself is cancelled while it waits
        task.cancel()
        raise
    if not task.cancelled():
        task.exception()  # looked at, so asyncio does not log it as never retrieved


def _time_left(reply_seconds: float | None) -> tuple[float | None, bool]:
    """Return the seconds a call may take now, and whether the run's limit sets them."""
    deadline = run_deadline()
    run_left = deadline[0] - time.monotonic() if deadline is not None else None
    if run_left is not None and (reply_seconds is None or run_left < reply_seconds):
        return run_left, True
    return reply_seconds, False


def _seconds(reply_seconds: float | None, whole_run: bool) -> float:
    deadline = run_deadline()
    if whole_run and deadline is not None:
        return deadline[1]
    return reply_seconds or 0.0


def _close(call: Awaitable[object]) -> None:
    """Close a coroutine that will never be awaited (no "never awaited" warning)."""
    close = getattr(call, "close", None)
    if callable(close):
        close()
