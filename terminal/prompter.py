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
    from terminal.live import Interrupter

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
    """

    message: Callable[[str], str]
    answer: Callable[[str], str]
    discard: Callable[[], bool]
    show: Callable[[Callable[[], None]], None]
    interrupter: Interrupter | None = None


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
