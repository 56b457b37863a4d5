"""How the chat reads the customer, and the commands it tells them to type.

Light on purpose: ``cli`` imports it before it knows whether a chat will run.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prompt_toolkit.key_binding import KeyPress

    from terminal.live import Interrupter
    from terminal.signals import CtrlC

# What leaves the chat when typed at ``you>``.
EXIT_WORDS = frozenset({"exit", "quit", "q", ":q", "/exit", "/quit"})


@dataclass
class Prompter:
    """How the chat reads the customer.

    Attributes:
        message: Reads a message at ``you>``; kept in the passenger's input history.
        answer: Reads an approval answer or a reason; never kept anywhere.
        discard: Throws away what was typed and not read yet (typed while the assistant
            worked); tells whether there was any. Piped input keeps it: a script's
            lines are its answers. No default: a prompter built from another one must
            pass it on, or type-ahead would answer an approval.
        show: Prints what arrives from elsewhere (a person's message) above the prompt
            being read, from any thread (``terminal.live.above_prompt``).
        interrupter: Ends the prompt ``message`` reads, from any thread, for what must
            be asked at once (``terminal.live.Interrupter``); ``message`` then raises
            ``terminal.live.Interrupted``. ``None`` where a prompt cannot be ended (piped
            input): what arrives is then shown and waits for the next line.
        ctrl_c: The chat's Ctrl-C (``terminal.signals.CtrlC``) the reads report to, or
            ``None`` for the chat to make its own (reads that know nothing of it).
    """

    message: Callable[[str], str]
    answer: Callable[[str], str]
    discard: Callable[[], bool]
    show: Callable[[Callable[[], None]], None]
    interrupter: Interrupter | None = None
    ctrl_c: CtrlC | None = None


class PromptReads:
    """Read lines with a prompt_toolkit ``PromptSession``, under the chat's Ctrl-C.

    The prompt leaves SIGINT to ``ctrl_c`` (``handle_sigint=False``), which is told how
    to end the read (``CtrlC.reading``): a SIGINT while the prompt reads ends it as its
    Ctrl-C key would; one after Enter (the prompt still drawing its end, the terminal
    about to leave raw mode) is the cancel of what the line starts. At a ``terminal``, a
    Ctrl-C typed so soon after Enter that it was read as a key is found once the prompt
    returned (``ctrl_c_typed_ahead``); a script's keys (a pipe) are its lines in order,
    so there a Ctrl-C after a line is one at the next prompt.
    """

    def __init__(self, session: Any, ctrl_c: CtrlC, *, terminal: bool) -> None:
        """Read with ``session``; ``terminal``: its keys are typed by a person."""
        self.session = session
        self.ctrl_c = ctrl_c
        self.terminal = terminal

    def __call__(
        self, message: str, *, pre_run: Callable[[], None] | None = None, **options: Any
    ) -> str:
        """Read a line at ``message`` (``options`` are the prompt's)."""
        started = False

        def on_start() -> None:
            nonlocal started
            started = True
            if pre_run is not None:
                pre_run()

        def ends() -> bool:
            if not started:
                return True  # before the prompt is drawn: nothing typed, nothing to cancel
            app = self.session.app
            future, loop = app.future, app.loop
            if future is None or future.done() or loop is None:
                return False  # entered: the cancel of what the line starts
            loop.call_soon_threadsafe(_interrupt, app)
            return True

        with self.ctrl_c.reading(ends):
            line: str = self.session.prompt(
                message, pre_run=on_start, handle_sigint=False, **options
            )
        if self.terminal and ctrl_c_typed_ahead(self.session.input):
            self.ctrl_c.typed()
        return line


def _interrupt(app: Any) -> None:
    """End the prompt ``app`` as its Ctrl-C key does (in its loop's thread)."""
    if app.future is not None and not app.future.done():
        app.exit(exception=KeyboardInterrupt, style="class:aborting")


def ctrl_c_typed_ahead(pt_input: Any) -> bool:
    """Tell whether Ctrl-C was typed after a prompt's Enter, while it was still reading keys.

    Such a Ctrl-C is a key, not a signal: prompt_toolkit keeps the keys it read past
    Enter (its type-ahead), and when the standard input is a terminal the bytes that
    came before the prompt left raw mode wait in it. Both are looked at. The keys after
    the last Ctrl-C are kept for the next prompt; it and those before it are dropped
    (Ctrl-C would have cleared them at a prompt).
    """
    from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead
    from prompt_toolkit.keys import Keys

    keys = list(get_typeahead(pt_input))  # reading it empties it
    keys += _keys_in_the_terminal()
    cuts = [index for index, key in enumerate(keys) if key.key == Keys.ControlC]
    if cuts:
        keys = keys[cuts[-1] + 1 :]
    if keys:
        store_typeahead(pt_input, keys)
    return bool(cuts)


def _keys_in_the_terminal() -> list[KeyPress]:
    """Read the bytes waiting in this process's terminal, as keys (none when it is not one)."""
    try:
        import fcntl
        import termios
    except ImportError:  # no POSIX terminal (Windows)
        return []
    data = b""
    with suppress(AttributeError, ValueError, OSError):
        descriptor = sys.stdin.fileno()
        if not os.isatty(descriptor):
            return []
        waiting = bytearray(4)
        fcntl.ioctl(descriptor, termios.FIONREAD, waiting)
        count = int.from_bytes(waiting, sys.byteorder)
        if count > 0:  # so that the read does not wait
            data = os.read(descriptor, count)
    if not data:
        return []
    from prompt_toolkit.input.vt100_parser import Vt100Parser

    keys: list[KeyPress] = []
    parser = Vt100Parser(keys.append)
    parser.feed(data.decode("utf-8", "replace"))
    parser.flush()
    return keys


def discard_typeahead(pt_input: Any) -> bool:
    """Throw away the keys typed and not read yet, on the terminal and in prompt_toolkit.

    The terminal holds what was typed while the assistant worked; prompt_toolkit keeps
    keys it read past the end of the last prompt (its type-ahead). Returns whether any
    key was thrown away.
    """
    from prompt_toolkit.input.typeahead import get_typeahead

    found = bool(get_typeahead(pt_input))  # reading it empties it
    try:
        import fcntl
        import termios
    except ImportError:  # no POSIX terminal (Windows)
        return found
    with suppress(AttributeError, ValueError, OSError):
        descriptor = sys.stdin.fileno()
        if os.isatty(descriptor):
            waiting = bytearray(4)
            fcntl.ioctl(descriptor, termios.FIONREAD, waiting)
            found = found or int.from_bytes(waiting, sys.byteorder) > 0
            termios.tcflush(descriptor, termios.TCIFLUSH)
    return found


def clean_input(text: str) -> str:
    """Drop bytes that are not valid UTF-8 (they arrive as surrogates) and outer blanks."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\ufffd", "?").strip()


def new_session_line(thread_id: str, passenger_id: str) -> str:
    """Return the line that opens a new conversation."""
    return (
        f"Session {thread_id} for passenger {passenger_id}. Type /help for commands, exit to leave."
    )


def sessions_command(resume_options: Sequence[str], passenger_id: str | None = None) -> str:
    """Return the command that lists the saved sessions kept where these options say.

    ``resume_options`` are a resume command's (``_resume_options``); the listing repeats
    the ones that say where conversations are kept, so it finds the same ones.
    """
    words = ["travel-assistant", "sessions"]
    for name, value in zip(resume_options[::2], resume_options[1::2], strict=True):
        if name in ("--home", "--conversations"):
            words += [name, value]
    if passenger_id:
        words += ["--passenger-id", passenger_id]
    return " ".join(shlex.quote(word) for word in words)
