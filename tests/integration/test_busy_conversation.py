"""Two terminals on one conversation: one turn at a time, across processes (issue 15).

The installed ``travel-assistant chat`` in pseudo-terminals, against the scripted
OpenAI-compatible server, whose replies wait until the test lets them go, so that a turn
is known to be running. With the conversations in the home's SQLite file and in
PostgreSQL (skipped, saying why, when the server cannot be reached):

- while the first terminal's turn runs, a second terminal opened on the same
  conversation is told it is busy, and so is the message it sends; the model never sees
  that message, the first turn ends normally, and the message sent again afterwards
  goes out with the whole conversation before it: nothing is lost;
- the first terminal is killed (SIGKILL) in the middle of a turn: the lock it held goes
  with it, the second terminal's next message gets in, and the cut turn is closed;
- two terminals at the same approval prompt: the first answer counts, the second is told
  the conversation changed, and the write happens once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import exhaustive
from tests.support.cli import chat_args, run
from tests.support.conversation_stores import scratch_conversations
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import ticket_flight
from tests.support.terminal import PASSENGER_ID, change_script, spawn
from tests.support.waiting import wait_until

pexpect = pytest.importorskip("pexpect")

# The longest a scripted reply holds its turn open (the test releases it sooner).
HOLD_SECONDS = 60
BUSY = "busy in another window, terminal or server"


# On PostgreSQL it is exhaustive (tests/support/exhaustive.py): the store's lock across
# processes and a SIGKILL on PostgreSQL is tested in tests/unit/test_conversation_store.py,
# and the terminal with its conversations there in test_postgres_cli.py.
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=exhaustive.EXHAUSTIVE)])
def conversations(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """The options naming the conversation store: none (the home's file), or a URL."""
    if request.param == "sqlite":
        yield []
        return
    with scratch_conversations("postgresql", tmp_path) as url:
        yield ["--conversations", url]


def held_reply(gate: threading.Event, text: str) -> Callable[[dict[str, Any]], Reply]:
    def reply(body: dict[str, Any]) -> Reply:
        gate.wait(timeout=HOLD_SECONDS)
        return Reply(text=text)

    return reply


def customer_words(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


def test_busy_conversation_second_terminal_waits_its_turn_and_survives_a_sigkill(
    files: tuple[Path, Path], conversations: list[str]
) -> None:
    home, db = files
    first_may_end, third_may_end = threading.Event(), threading.Event()
    script = [
        held_reply(first_may_end, "First answer."),
        Reply(text="Second answer."),
        held_reply(third_may_end, "Third answer."),
        Reply(text="Fourth answer."),
    ]
    with FakeOpenAI(script) as server:
        try:
            # Both start at once (each start takes seconds); the second then switches to
            # the first one's conversation, as a customer with two windows would.
            first = spawn(server, chat_args(db, PASSENGER_ID, *conversations, home=home))
            second = spawn(server, chat_args(db, PASSENGER_ID, *conversations, home=home))
            first.expect(r"Session (\S+) for passenger")
            thread = first.match.group(1)
            first.expect("you>")
            first.send("first question\r")
            wait_until(lambda: len(server.requests) == 1)  # its turn is running

            second.expect("you>")
            second.send(f"/switch {thread}\r")
            second.expect(f"Resuming session {thread}")
            second.expect(BUSY)
            second.expect("you>")
            second.send("second question\r")
            second.expect(BUSY)
            second.expect("Your message was not sent")
            second.expect("you>")
            assert len(server.requests) == 1  # the refused message never left

            first_may_end.set()
            first.expect("First answer.")
            first.expect("you>")
            second.send("second question\r")
            second.expect("Second answer.")
            second.expect("you>")
            words = customer_words(server.requests[1])  # the whole conversation went out
            assert len(words) == 2
            assert words[0].endswith("first question") and words[1].endswith("second question")
            assert any(m.get("content") == "First answer." for m in server.requests[1]["messages"])

            # The first terminal dies mid-turn, holding the lock; the second gets in.
            first.send("third question\r")
            wait_until(lambda: len(server.requests) == 3)
            first.kill(signal.SIGKILL)
            first.expect(pexpect.EOF)
            second.send("fourth question\r")
            second.expect("Your last message was not answered")
            second.expect("Fourth answer.")
            second.expect("you>")
            second.send("exit\r")
            second.expect(pexpect.EOF)
            second.close()
        finally:
            first_may_end.set()
            third_may_end.set()
    assert second.exitstatus == 0
    assert "Traceback" not in second.logfile_read.text
    assert customer_words(server.requests[3])[-1].endswith("fourth question")

    listed = run(["sessions", "--home", str(home), *conversations])
    assert listed.code == 0, listed.err
    (row,) = [line for line in listed.out.splitlines() if thread in line]
    assert " 4 " in row  # four customer messages, each in the saved conversation


def test_busy_conversation_two_terminals_at_one_approval(files: tuple[Path, Path]) -> None:
    home, db = files
    script, new_flight = change_script(db, "I will move you to tomorrow's flight.")
    with FakeOpenAI(script) as server:
        first = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        second = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        first.expect(r"Session (\S+) for passenger")
        thread = first.match.group(1)
        first.send("Please move my flight to tomorrow\r")
        first.expect("Approve this action")

        second.expect("you>")
        second.send(f"/switch {thread}\r")
        second.expect("Approve this action")  # the pending action, asked here too

        first.send("y\r")
        first.expect("Done: your ticket")
        first.expect("you>")
        second.send("n\r")
        second.expect("Why not")
        second.send("\r")
        second.expect("changed in another window while you decided")
        second.expect("you>")
        for child in (first, second):
            child.send("exit\r")
            child.expect(pexpect.EOF)
            child.close()
            assert child.exitstatus == 0
    assert ticket_flight(db) == new_flight
    assert len(server.requests) == 3  # the late "no" never reached the assistant
