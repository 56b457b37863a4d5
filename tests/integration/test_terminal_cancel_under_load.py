"""Ctrl-C is a cancel at any moment after Enter, with every core of the machine busy.

The installed ``travel-assistant chat`` in a pseudo-terminal, against the scripted
OpenAI-compatible server on 127.0.0.1, while one CPU burner per core runs (issue 49):
Ctrl-C right after Enter (0 ms), 50 ms and 200 ms later (before the model's first byte,
the server holding the request), and while the reply streams. Each time the turn is
cancelled, the model's request (if one was made) is closed, the prompt comes back and
the chat goes on; the program never ends on it. The first message of a chat, typed
while the chat is still loading, and a message of a chat that has answered already
take different paths: both are tried.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import chat_args
from tests.support.fake_openai import Endless, FakeOpenAI, Reply, Silent, customer_text
from tests.support.terminal import PASSENGER_ID, spawn

pexpect = pytest.importorskip("pexpect")

# When Ctrl-C is pressed after Enter: at once, before the model's first byte, later.
DELAYS = (0.0, 0.05, 0.2)


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Keep every core busy (one spinning process each) for the test."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _respond(body: dict[str, Any]) -> Reply | Silent | Endless:
    """Hold "hello" before its first byte, stream "stream" endlessly, answer the rest."""
    last = body["messages"][-1].get("content")
    text = customer_text(last) if isinstance(last, str) else ""
    if text == "hello":
        return Silent(Reply(text="too late"), seconds=30)
    if text == "stream":
        return Endless(word="flowing", interval=0.05)
    return Reply(text=f"answered {text}")


def _all_closed(server: FakeOpenAI, answered: int) -> bool:
    """Wait until every request but the ``answered`` ones was closed by the program."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if server.abandoned == len(server.requests) - answered:
            return True
        time.sleep(0.05)
    return False


def _cancel(child: Any, message: str, delay: float | None) -> None:
    """Send ``message``; press Ctrl-C ``delay`` s after Enter (``None``: as it streams)."""
    child.send(f"{message}\r")
    if delay is None:
        child.expect("flowing")
    elif delay:
        time.sleep(delay)
    child.sendintr()
    child.expect("Turn cancelled")
    child.expect("you>")
    assert child.isalive()


def _goes_on(child: Any, text: str) -> None:
    child.send(f"{text}\r")
    child.expect(f"answered {text}")
    child.expect("you>")


def _leave(child: Any) -> str:
    child.send("exit\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    text: str = child.logfile_read.text
    assert "Interrupted" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("delay", DELAYS, ids=["0ms", "50ms", "200ms"])
def test_terminal_ctrl_c_after_the_first_message_cancels_with_every_core_busy(
    files: tuple[Path, Path], busy_cores: None, delay: float
) -> None:
    # The first message, typed as soon as the prompt shows: the chat is still loading.
    home, db = files
    with FakeOpenAI(responder=_respond) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), color=False)
        child.expect("you>")
        _cancel(child, "hello", delay)
        _goes_on(child, "again")
        assert _all_closed(server, answered=1)
        text = _leave(child)
    assert "too late" not in text


def test_terminal_ctrl_c_cancels_every_turn_at_any_moment_with_every_core_busy(
    files: tuple[Path, Path], busy_cores: None
) -> None:
    home, db = files
    with FakeOpenAI(responder=_respond) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), color=False)
        child.expect("you>")
        _goes_on(child, "first")  # loaded: the turns from here are the chat's own
        answered = 1
        for _ in range(2):
            for delay in (*DELAYS, None):
                _cancel(child, "stream" if delay is None else "hello", delay)
                _goes_on(child, "again")
                answered += 1
                assert _all_closed(server, answered), (delay, server.abandoned)
        text = _leave(child)
    assert "too late" not in text
