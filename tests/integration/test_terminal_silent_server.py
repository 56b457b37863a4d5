"""Ctrl-C in the installed terminal while the model server sends nothing at all.

A llama.cpp server processing a long prompt on a CPU sends no byte, not even its
headers, for a long time. Ctrl-C must still give the prompt back within a second, and
the conversation must go on (issue 10).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.cli import chat_args
from tests.support.fake_openai import FakeOpenAI, Reply, Silent
from tests.support.terminal import PASSENGER_ID, TerminalLog, roles, spawn

pexpect = pytest.importorskip("pexpect")


def test_terminal_ctrl_c_while_the_server_is_silent_cancels_at_once(
    files: tuple[Path, Path],
) -> None:
    home, db = files
    script = [Silent(Reply(text="Too late."), seconds=6), Reply(text="Here I am now.")]
    with FakeOpenAI(script) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        child.expect("you>")
        child.send("hello\r")
        child.expect("Thinking")
        while not server.requests:  # the request reached the server, which says nothing
            time.sleep(0.05)
        pressed = time.monotonic()
        child.sendintr()
        child.expect("Turn cancelled", timeout=5)
        waited = time.monotonic() - pressed
        child.expect("you>")
        child.send("are you there?\r")
        child.expect("Here I am now")
        child.expect("you>")
        child.sendcontrol("d")
        child.expect("Resume it with: ")
        child.expect(pexpect.EOF)
        child.close()
    assert waited < 2, f"Ctrl-C took {waited:.1f} s against a silent server"
    assert child.exitstatus == 0
    log: TerminalLog = child.logfile_read
    assert "Traceback" not in log.text
    assert "Too late" not in log.text
    assert roles(server.requests[-1]) == ["user", "assistant", "user"]
