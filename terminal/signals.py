"""Ctrl-C in the chat: at a prompt it means what the prompt says; after Enter it cancels.

The chat runs a turn on the process's turn loop, in a thread of its own
(``conversations.loop``), so the main thread stays free to take the signal and set the
turn's cancel; a model call waiting ends at once, the run stops before its next step,
and the conversation stays valid.

One handler (``CtrlC``) is installed for the whole chat, before its first prompt, and
never replaced by Python's default one (which raises ``KeyboardInterrupt`` wherever the
main thread is, and so ended the program when Ctrl-C came in the few milliseconds
between Enter and the turn's start). The prompts leave the signal to it
(``handle_sigint=False``): while a prompt reads, the terminal is in raw mode and Ctrl-C
is a key the prompt reads itself. From Enter on, every Ctrl-C is the cancel of what the
line started: the turn's, when it is running (``turn``), else kept for it (``arm``).
A Ctrl-C typed so soon after Enter that the prompt read it as a key, or the terminal
kept it as a byte, is found there (``terminal.prompter.ctrl_c_typed_ahead``) and counts
the same.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from conversations.events import Cancel

# A Ctrl-C again once a cancel has waited this long leaves the program at once: the
# model server, or the database, does not let the turn end.
LEAVE_AFTER_SECONDS = 3.0


class CtrlC:
    """The chat's Ctrl-C, from before its first prompt to its end (``installed``).

    A Ctrl-C (SIGINT) is, in this order:

    - the cancel of the running turn (``turn``); a second one, once the cancel has
      waited ``LEAVE_AFTER_SECONDS``, leaves at once, printing the resume command;
    - the end of the prompt reading a line (``reading``), as its own Ctrl-C key would
      (only a signal sent from elsewhere: at a prompt the key is read as a key);
    - otherwise the cancel of what the line just entered starts: kept until that turn
      takes its cancel (``arm``), forgotten when the next prompt starts.
    """

    def __init__(
        self, err: TextIO, cancelling: Callable[[], None], resume: Callable[[], str]
    ) -> None:
        """Say a cancel with ``cancelling``; on leaving at once, print ``resume()`` on ``err``."""
        self.err = err
        self.cancelling = cancelling
        self.resume = resume
        self._turn: threading.Event | None = None
        self._cancelled_at = 0.0
        self._pending = False
        self._ends_reading: Callable[[], bool] | None = None
        self._installed = 0

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Take SIGINT for the block (re-entrant); the terminal's ``^C`` echo off meanwhile."""
        if self._installed or threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self._on_interrupt)
        self._installed += 1
        try:
            with quiet_ctrl_c():
                yield
        finally:
            self._installed -= 1
            signal.signal(signal.SIGINT, previous)

    @property
    def is_installed(self) -> bool:
        """Tell whether the handler is in place (a test's check that it was not late)."""
        return bool(self._installed)

    def arm(self) -> Cancel:
        """Return the cancel of the turn the entered line starts; set if Ctrl-C came since."""
        from conversations.events import Cancel  # LangChain's messages: not before a chat

        cancel = Cancel()
        if self._pending:
            self._pending = False
            self._cancelled_at = time.monotonic()
            cancel.set()
            self.cancelling()
        return cancel

    @contextmanager
    def turn(self, cancel: threading.Event) -> Iterator[None]:
        """While the block runs, Ctrl-C sets ``cancel``."""
        previous, self._turn = self._turn, cancel
        try:
            yield
        finally:
            self._turn = previous

    @contextmanager
    def reading(self, ends: Callable[[], bool]) -> Iterator[None]:
        """While a line is read: a SIGINT calls ``ends``.

        ``ends`` ends the read as Ctrl-C at that prompt would and returns ``True``, or
        returns ``False`` when the line is entered already (the signal then cancels what
        it starts). The start of a read forgets a Ctrl-C kept for a line before.
        """
        self._pending = False
        previous, self._ends_reading = self._ends_reading, ends
        try:
            yield
        finally:
            self._ends_reading = previous

    def typed(self) -> None:
        """Count a Ctrl-C typed after Enter, found among the keys (not a signal)."""
        self._on_interrupt(signal.SIGINT, None)

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        cancel = self._turn
        if cancel is not None:
            if not cancel.is_set():
                self._cancelled_at = time.monotonic()
                cancel.set()
                self.cancelling()
            elif time.monotonic() - self._cancelled_at >= LEAVE_AFTER_SECONDS:
                # The turn does not end; do not keep the customer waiting.
                write_now(
                    self.err,
                    f"\nLeft without waiting. Resume the conversation with: {self.resume()}\n",
                )
                os._exit(130)
            return
        ends = self._ends_reading
        if ends is not None and ends():
            return
        self._pending = True


@contextmanager
def quiet_ctrl_c() -> Iterator[None]:
    """While the chat runs, keep Ctrl-C from garbling the screen.

    By default the terminal echoes ``^C`` and throws away output not yet shown when
    Ctrl-C is pressed, which cuts the cursor movements of the live reply in half. The
    prompts keep these settings: they restore the terminal's as they found them.
    """
    try:
        import termios
    except ImportError:  # no POSIX terminal (Windows)
        yield
        return
    try:
        descriptor = sys.stdin.fileno()
        if not os.isatty(descriptor):
            raise OSError("not a terminal")
        saved = termios.tcgetattr(descriptor)
        quiet = list(saved)
        quiet[3] = (quiet[3] | termios.NOFLSH) & ~termios.ECHOCTL
        termios.tcsetattr(descriptor, termios.TCSANOW, quiet)
    except (AttributeError, ValueError, OSError, termios.error):
        yield
        return
    try:
        yield
    finally:
        with suppress(OSError, termios.error):
            termios.tcsetattr(descriptor, termios.TCSANOW, saved)


def write_now(stream: TextIO, text: str) -> None:
    """Write from a signal handler: straight to the file descriptor when there is one."""
    try:
        os.write(stream.fileno(), text.encode("utf-8", "replace"))
    except (AttributeError, OSError, ValueError):
        stream.write(text)
        stream.flush()
