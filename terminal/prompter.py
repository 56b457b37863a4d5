"""How the chat reads the customer, and the commands it tells them to type.

Light on purpose: ``cli`` imports it before it knows whether a chat will run.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# What leaves the chat when typed at ``you>``.
EXIT_WORDS = frozenset({"exit", "quit", "q", ":q", "/exit", "/quit"})


@dataclass
class Prompter:
    """How the chat reads the customer.

    Attributes:
        message: Reads a message at ``you>``; kept in the passenger's input history.
        answer: Reads an approval answer or a reason; never kept anywhere.
    """

    message: Callable[[str], str]
    answer: Callable[[str], str]


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
