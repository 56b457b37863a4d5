"""What arrives while the customer (or a member of staff) is typing: shown above the prompt.

Once a person has a conversation, the two sides write at their own pace in two
processes: the customer in ``travel-assistant chat``, the person in ``travel-assistant
desk``. Each side watches the desk's row of the conversation (``conversations.desk``: a
counter bumped by every message, and the hand-off's state) in a thread of its own: it
wakes on the desk's notification on PostgreSQL (``LISTEN``), or polls briefly on SQLite,
and shows what is new above the prompt it is reading, without disturbing what is being
typed (prompt_toolkit's ``run_in_terminal``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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


class Watch:
    """Call ``look`` in a daemon thread whenever the desk changes, until ``stop``.

    With a ``desk`` that notifies (PostgreSQL) the thread sleeps on its listener and
    looks when woken (and every ``LISTEN_FALLBACK_SECONDS`` anyway); otherwise it looks
    every ``POLL_SECONDS``. ``look`` returns whether to go on watching; an error in it
    ends the watch (the next message or command shows the state anyway).
    """

    def __init__(
        self, look: Callable[[], bool], desk: Desk | None = None, name: str = "desk-watch"
    ) -> None:
        """Start watching at once."""
        self._look = look
        self._desk = desk
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
        try:
            last = time.monotonic()
            while not self._stop.is_set():
                woke = listener.wait(STOP_SECONDS)
                if self._stop.is_set():
                    return
                quiet = listener.connection is not None and not woke
                if quiet and time.monotonic() - last < LISTEN_FALLBACK_SECONDS:
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
