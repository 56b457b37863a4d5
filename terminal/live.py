"""What arrives while the customer (or a member of staff) is typing: shown above the prompt.

Once a person has a conversation, the two sides write at their own pace in two
processes: the customer in ``travel-assistant chat``, the person in ``travel-assistant
desk``. Each side watches the desk's row of the conversation (``conversations.desk``: a
counter bumped by every message, and the hand-off's state) in a thread of its own: it
wakes on the desk's notification on PostgreSQL (``LISTEN``), or polls briefly on SQLite,
and shows what is new above the prompt it is reading, without disturbing what is being
typed (prompt_toolkit's ``run_in_terminal``). What must be answered at once (an action a
person proposed) ends the prompt instead (``Interrupter``): the chat shows it and asks,
then puts back what was being typed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conversations.desk import Desk

# How long a watch's listener waits before it checks whether it was stopped.
STOP_SECONDS = 1.0


Show = Callable[[Callable[[], None]], None]


def above_prompt(session: Any | None) -> Show:
    """Return how to print from any thread above the prompt ``session`` is reading.

    Without a running prompt (piped input, between prompts) the printing runs at once,
    one at a time.
    """
    lock = threading.Lock()

    def show(draw: Callable[[], None]) -> None:
        app = getattr(session, "app", None)
        loop = getattr(app, "loop", None)
        if app is not None and loop is not None and app.is_running:
            from prompt_toolkit.application import run_in_terminal
            from prompt_toolkit.application.current import set_app

            def in_terminal() -> None:
                with set_app(app):
                    run_in_terminal(draw)

            loop.call_soon_threadsafe(in_terminal)
            return
        with lock:
            draw()

    return show


class Interrupted(Exception):
    """The message prompt was ended from another thread: something is to be asked first."""


class Interrupter:
    """End the message prompt from another thread, for something to be asked at once.

    ``request(draw)`` keeps ``draw`` and ends the prompt being read, or the next one as
    soon as it starts (its ``pre_run``, ``started``): the prompt then raises
    ``Interrupted``, and the chat ``take``s what to draw before it asks. What was typed
    is kept (``kept``) for the next prompt to start with, and the ended prompt's line is
    erased, so the screen reads as if the question had come between two keys.

    A ``request`` may come while the chat is not at its prompt (in a turn, at an
    approval): it waits for the next one, or for ``take`` before it.
    """

    def __init__(self) -> None:
        """Start with nothing to ask."""
        self._lock = threading.Lock()
        self._draws: list[Callable[[], None]] = []
        self._app: Any = None  # the prompt's application while it runs
        self.kept = ""

    def request(self, draw: Callable[[], None]) -> None:
        """Keep ``draw`` and end the prompt being read (from any thread)."""
        with self._lock:
            self._draws.append(draw)
            app = self._app
        if app is not None:
            # The prompt may have just ended, its loop closed: then the next prompt ends
            # as it starts, or the chat takes the draw before it.
            with suppress(AttributeError, RuntimeError):
                app.loop.call_soon_threadsafe(self._end, app)

    def started(self) -> None:
        """Note the prompt that runs (its ``pre_run``); end it at once if asked to."""
        from prompt_toolkit.application import get_app

        app = get_app()
        with self._lock:
            self._app = app
        self._end(app)

    def ended(self) -> None:
        """Note that the prompt has returned."""
        with self._lock:
            app, self._app = self._app, None
        if app is not None:
            app.erase_when_done = False

    def _end(self, app: Any) -> None:
        """End the prompt ``app`` with ``Interrupted``, if something waits (its loop's thread)."""
        with self._lock:
            if not self._draws or app is not self._app:
                return
            if app.future is None or app.future.done():
                return
            self.kept = app.current_buffer.text
            app.erase_when_done = True
            app.exit(exception=Interrupted())

    def take(self) -> list[Callable[[], None]]:
        """Return what was asked to be drawn since the last call, and forget it."""
        with self._lock:
            draws, self._draws = self._draws, []
        return draws


class Watch:
    """Call ``look`` in a daemon thread whenever the desk changes, until ``stop``.

    With a ``desk`` that notifies (PostgreSQL) the thread sleeps on its listener and
    looks when woken (and every ``every`` seconds anyway, ``LISTEN_FALLBACK_SECONDS``
    unless said); otherwise it looks every ``POLL_SECONDS``. ``look`` returns whether to
    go on watching; an error in it ends the watch (the next message or command shows the
    state anyway).
    """

    def __init__(
        self,
        look: Callable[[], bool],
        desk: Desk | None = None,
        name: str = "desk-watch",
        every: float | None = None,
    ) -> None:
        """Start watching at once."""
        self._look = look
        self._desk = desk
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Here, not at the top: the command line imports this module, and the desk's
        # SQLAlchemy only when a watch starts.
        from conversations.desk import LISTEN_FALLBACK_SECONDS, Listener

        try:
            listener = self._desk.listener() if self._desk is not None else Listener(None)
        except Exception:  # cannot listen: look now and then instead
            listener = Listener(None)
        every = self._every if self._every is not None else LISTEN_FALLBACK_SECONDS
        try:
            last = time.monotonic()
            while not self._stop.is_set():
                woke = listener.wait(min(STOP_SECONDS, every))
                if self._stop.is_set():
                    return
                quiet = listener.connection is not None and not woke
                if quiet and time.monotonic() - last < every:
                    continue
                last = time.monotonic()
                if not self._look():
                    return
        except Exception:  # the store went away: the prompt's next turn will say so
            return
        finally:
            listener.close()

    @property
    def watching(self) -> bool:
        """Tell whether the watch still runs."""
        return self._thread.is_alive() and not self._stop.is_set()

    def stop(self) -> None:
        """Stop watching (the thread ends within a second)."""
        self._stop.set()
