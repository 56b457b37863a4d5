"""The installed ``travel-assistant`` in a pseudo-terminal, as a desk agent uses it.

``spawn`` starts the program (``PROGRAM``) in a pty with its model at the scripted
OpenAI-compatible server on 127.0.0.1 and logs what it drew (``TerminalLog``);
``PASSENGER_ID`` is the fixture passenger as a desk agent types it (without its space);
``change_script`` is the server's replies that move the fixture ticket to tomorrow;
``roles`` reads a request the server received. The arguments of ``chat`` are
``tests.support.cli.chat_args`` (with ``home=``); the fixture ``files`` (a home and a
private copy of the database) is in ``tests/integration/conftest.py``.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import DatabaseLike, tomorrow_flight

_STYLES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
ESCAPES = re.compile(rf"{_STYLES.pattern}|\r")  # styles, and the carriage returns too
PROGRAM = Path(sys.executable).parent / "travel-assistant"
# The passenger id without its space, as typed at a desk.
PASSENGER_ID = FIXTURE_PASSENGER_ID.replace(" ", "")


def spawn(
    server: FakeOpenAI,
    args: list[str],
    *,
    columns: int = 100,
    color: bool = True,
    cpr_hint: bool = True,
    env: Mapping[str, str] | None = None,
    model: bool = True,
) -> Any:
    """Start the installed program with ``args`` in a pty, its model at ``server``.

    The pty never answers a cursor-position request; ``cpr_hint`` tells prompt_toolkit
    so (``PROMPT_TOOLKIT_NO_CPR``), which a real terminal of that kind does not. The
    child's ``logfile_read`` is a ``TerminalLog`` of everything it drew. ``env`` adds
    variables (the program's settings). Without ``model`` no model is configured.
    """
    import pexpect  # only the tests that run the program in a terminal need it

    extra = dict(env or {})
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI", "TAVILY", "NO_COLOR", "PROMPT_TOOLKIT"))
    }
    env.update(extra)
    env["TERM"] = "xterm-256color"
    if model:
        env.update(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test-key",
            TRAVEL_ASSISTANT_MODEL="scripted",
        )
    if cpr_hint:
        env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    if not color:
        env["NO_COLOR"] = "1"
    child = pexpect.spawn(
        str(PROGRAM),
        args,
        env=env,
        encoding="utf-8",
        timeout=20,
        dimensions=(40, columns),
        preexec_fn=_default_signals,
    )
    child.logfile_read = TerminalLog()
    return child


def _default_signals() -> None:
    """Give the program the signals' default actions, as a terminal starting it does.

    Dispositions set to "ignore" are inherited: under ``nohup``, or started in the
    background by a script, the test run ignores SIGHUP (or SIGINT), and so would the
    program, which then outlives the terminal it lost.
    """
    for number in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)


class TerminalLog:
    """Everything the terminal received (the ``logfile_read`` of a spawned program)."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)

    def flush(self) -> None:
        return

    @property
    def text(self) -> str:
        return ESCAPES.sub("", "".join(self.parts))

    @property
    def raw(self) -> str:
        return "".join(self.parts)

    @property
    def drawn_lines(self) -> list[str]:
        """Each line as drawn: a carriage return starts the line again (a redraw)."""
        return re.split(r"[\r\n]", _STYLES.sub("", self.raw))


def roles(request: dict[str, Any]) -> list[str]:
    """Return the roles of a request's messages, the system prompt left out."""
    return [m["role"] for m in request["messages"] if m["role"] != "system"]


def change_script(db: DatabaseLike, reply: str) -> tuple[list[Reply], int]:
    """A hand-over, a change of the fixture ticket to tomorrow, an answer; and the flight."""
    new_flight = tomorrow_flight(db)
    change = (
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": new_flight},
    )
    return [
        Reply(tool_calls=[("ToFlightBookingAssistant", {"request": "fly tomorrow"})]),
        Reply(text=reply, tool_calls=[change]),
        Reply(text="Done: your ticket is on tomorrow's flight."),
    ], new_flight
