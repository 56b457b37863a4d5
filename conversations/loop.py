"""The event loop every turn of this process runs on, and sync code that drives a turn.

A turn is async (``TravelAssistant.asend``): waiting for the model costs no thread. One
event loop runs every turn of a process, because the model client keeps its pooled
connections on the loop that opened them. In ``serve`` that loop is the server's own
(``use_turn_loop`` at start-up); elsewhere (the terminal, the desk, the evaluation) it
is a loop in a daemon thread, started on first use.

Sync callers iterate a turn's events with ``iterate``: the turn runs as one task of that
loop, and after each event it waits until the caller has handled it, as a generator
would. So a cancel set on seeing an event stops the turn before its next step.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None
# How long a waiting caller sleeps before waiting again: a signal handler (Ctrl-C in the
# terminal) runs at the latest this often.
_WAIT_SECONDS = 0.2
_ITEM, _END, _ERROR = "item", "end", "error"


def use_turn_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run this process's turns on ``loop`` (the server's, which must keep running)."""
    global _loop
    with _lock:
        _loop = (os.getpid(), loop)


def turn_loop() -> asyncio.AbstractEventLoop:
    """Return the loop this process's turns run on, starting one if there is none.

    A forked child starts its own: its parent's loop thread did not come along.
    """
    global _loop
    with _lock:
        if _loop is not None and _loop[0] == os.getpid() and not _loop[1].is_closed():
            return _loop[1]
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="turns", daemon=True).start()
        _loop = (os.getpid(), loop)
        atexit.register(_close_clients, loop)
        return loop


# How long the process waits at exit for the models' HTTP clients to close.
_CLOSE_SECONDS = 2.0


def _close_clients(loop: asyncio.AbstractEventLoop) -> None:
    """Close the models' HTTP clients on the turn loop, as the process exits."""
    if loop.is_closed() or not loop.is_running():
        return
    from assistants.models import close_http_clients

    closing = asyncio.run_coroutine_threadsafe(close_http_clients(), loop)
    with contextlib.suppress(Exception):  # leaving anyway
        closing.result(_CLOSE_SECONDS)


def _check_not_on(loop: asyncio.AbstractEventLoop) -> None:
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return
    if running is loop:
        raise RuntimeError(
            "A turn's sync API was called on the loop turns run on; await its async form."
        )


def run(make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make()`` on the turn loop and return its result (sync callers)."""
    loop = turn_loop()
    _check_not_on(loop)

    async def call() -> T:
        return await make()

    future = asyncio.run_coroutine_threadsafe(call(), loop)
    while True:
        try:
            return future.result(_WAIT_SECONDS)
        except TimeoutError:
            continue


def iterate(make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Yield the items of the async iterator ``make()``, run on the turn loop.

    The iterator goes on only once the caller asks for the next item. A caller that stops
    early (``close``, or an exception) closes it, so its ``finally`` blocks run.
    """
    loop = turn_loop()
    _check_not_on(loop)
    items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    go_on: asyncio.Queue[bool] = asyncio.Queue()

    async def pump() -> None:
        source = make()
        try:
            async for item in source:
                items.put((_ITEM, item))
                if not await go_on.get():
                    break
        except BaseException as error:  # raised in the caller's thread
            items.put((_ERROR, error))
        else:
            items.put((_END, None))
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    def tell(more: bool) -> None:
        loop.call_soon_threadsafe(go_on.put_nowait, more)

    done = asyncio.run_coroutine_threadsafe(pump(), loop)
    finished = False
    try:
        while True:
            kind, value = _next(items)
            if kind == _END:
                finished = True
                return
            if kind == _ERROR:
                finished = True
                raise value
            yield value
            tell(True)
    finally:
        if not finished:
            tell(False)
        while not done.done():  # the iterator's cleanup may still write: wait for it
            with contextlib.suppress(TimeoutError):
                done.result(_WAIT_SECONDS)


def _next(items: queue.SimpleQueue[tuple[str, Any]]) -> tuple[str, Any]:
    while True:
        try:
            return items.get(timeout=_WAIT_SECONDS)
        except queue.Empty:
            continue
