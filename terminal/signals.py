"""Ctrl-C while a turn runs: it cancels the turn, a second one leaves at once.

The chat runs a turn on the process's turn loop, in a thread of its own
(``conversations.loop``), so the main thread stays free to take the signal and set the
turn's cancel; a model call waiting ends at once, the run stops before its next step,
and the conversation stays valid.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TextIO


@contextmanager
def ctrl_c_cancels(
    cancel: threading.Event, err: TextIO, resume: str, cancelling: Callable[[], None]
) -> Iterator[None]:
    """While the block runs, Ctrl-C sets ``cancel``; a second Ctrl-C leaves at once.

    ``cancelling`` shows that the cancel was taken; leaving at once prints ``resume``
    (the command that resumes the conversation) on ``err``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        if cancel.is_set():
            # The model server does not answer; do not keep the customer waiting.
            write_now(err, f"\nLeft without waiting. Resume the conversation with: {resume}\n")
            os._exit(130)
        cancel.set()
        cancelling()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with quiet_ctrl_c():
            yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def quiet_ctrl_c() -> Iterator[None]:
    """While a turn streams, keep Ctrl-C from garbling the screen.

    By default the terminal echoes ``^C`` and throws away output not yet shown when
    Ctrl-C is pressed, which cuts the cursor movements of the live reply in half.
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
