"""Ctrl-C in the installed terminal while the model server sends nothing at all.

A llama.cpp server processing a long prompt on a CPU sends no byte, not even its
headers, for a long time. Ctrl-C must still give the prompt back within a second, close
the connection at once so that the server stops working on the abandoned prompt (issue
27), and the conversation must go on (issue 10).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import chat_args
from tests.support.fake_openai import FakeOpenAI, Reply, Silent
from tests.support.flights import ticket_flight
from tests.support.terminal import PASSENGER_ID, TerminalLog, change_script, roles, spawn

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
        server.wait_for_requests()  # the request reached the server, which says nothing
        pressed = time.monotonic()
        child.sendintr()
        child.expect("Turn cancelled", timeout=5)
        waited = time.monotonic() - pressed
        child.expect("you>")
        # The server's handler looks at the socket every 50 ms: give it until a second
        # after the key was pressed (the assertion below wants the close within it).
        while not server.closed_while_silent and time.monotonic() < pressed + 1.5:
            time.sleep(0.02)
        closed = list(server.closed_while_silent)
        child.send("are you there?\r")
        child.expect("Here I am now")
        child.expect("you>")
        child.sendcontrol("d")
        child.expect("Resume it with: ")
        child.expect(pexpect.EOF)
        child.close()
    assert waited < 2, f"Ctrl-C took {waited:.1f} s against a silent server"
    # The server saw the connection close before the prompt came back, within a second.
    assert closed, "the cancelled request's connection was left open"
    assert closed[0] - pressed < 1
    assert child.exitstatus == 0
    log: TerminalLog = child.logfile_read
    assert "Traceback" not in log.text
    assert "Too late" not in log.text
    assert roles(server.requests[-1]) == ["user", "assistant", "user"]


def test_terminal_ctrl_c_right_after_enter_cancels_where_no_cpr_is_answered(
    files: tuple[Path, Path],
) -> None:
    # A terminal that never answers cursor-position requests (serial consoles, `script`,
    # editors' shells), and says nothing about it: prompt_toolkit used to wait for the
    # answer in raw mode after Enter, so this Ctrl-C became typed input (issue 27).
    home, db = files

    def answer(request: dict[str, Any]) -> Reply | Silent:
        # The Ctrl-C may come before the first request is sent: answer by the message.
        last = [m for m in request["messages"] if m["role"] == "user"][-1]
        if "hello" in str(last["content"]):
            return Silent(Reply(text="Too late."), seconds=8)
        return Reply(text="Here I am now.")

    with FakeOpenAI(responder=answer) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), cpr_hint=False)
        child.timeout = 60  # a loaded machine starts it slowly
        child.expect("you>")
        child.send("hello\r")
        time.sleep(0.3)  # a person's quickest Ctrl-C after Enter: no reply drawn yet
        child.sendintr()
        # Either the turn had started (it is cancelled, the message kept) or the program
        # was still starting (the message is taken back, not sent).
        child.expect("Turn cancelled", timeout=10)
        taken_back = child.expect(["you>", "was not sent"]) == 1
        if taken_back:
            child.expect("you>")
        child.send("are you there?\r")
        child.expect("Here I am now")
        child.expect("you>")
        child.send("exit\r")
        child.expect("Resume it with: ")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0
    log: TerminalLog = child.logfile_read
    assert "\x1b[6n" not in log.raw  # no cursor-position request was sent
    assert "Too late" not in log.text
    expected = ["user"] if taken_back else ["user", "assistant", "user"]
    assert roles(server.requests[-1]) == expected


def test_terminal_type_ahead_never_answers_an_approval(files: tuple[Path, Path]) -> None:
    home, db = files
    before = ticket_flight(db)
    script, _ = change_script(db, "I can move you to tomorrow's flight.")
    script[0] = Silent(script[0], seconds=3)  # the assistant works a while first
    script[2] = Reply(text="All right, I left your ticket as it is.")
    with FakeOpenAI(script) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        child.timeout = 60  # a loaded machine starts it slowly
        child.expect("you>")
        child.send("Please move my flight to tomorrow\r")
        server.wait_for_requests()
        child.send("y\r")  # typed while the assistant works, before any question
        child.send("and quickly\r")
        child.expect("Approval needed")
        child.expect("not used: answer the question")
        child.expect("Approve this action")
        time.sleep(1)  # the question waits for its own answer
        assert "Change flight: done" not in child.logfile_read.text
        assert "Why not?" not in child.logfile_read.text
        child.send("n\r")
        child.expect("Why not?")
        child.send("I changed my mind\r")
        child.expect("left your ticket as it is")
        child.expect("you>")
        child.send("exit\r")
        child.expect(pexpect.EOF)
        child.close()
    assert ticket_flight(db) == before
    answers = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "I changed my mind" in answers[-1]["content"]
