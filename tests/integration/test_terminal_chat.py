"""The installed ``travel-assistant chat`` in a pseudo-terminal, as a desk agent uses it.

Against the scripted OpenAI-compatible server on 127.0.0.1 (made to stream slowly where
it matters): Ctrl-C while the assistant streams cancels the turn within a second and the
conversation goes on; Ctrl-C clears a half-typed line; the thinking indicator shows; a
Markdown reply is rendered; leaving prints a resume line that repeats ``--home`` and
``--db``; at 60 columns the approval box and the replies fit the width; a lost terminal
(SIGHUP) leaves the action pending and resuming asks it again.
"""

from __future__ import annotations

import re
import shlex
import signal
import time
from pathlib import Path

import pytest

from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.cli import chat_args
from tests.support.fake_openai import FakeOpenAI, Reply, customer_text
from tests.support.flights import ticket_flight
from tests.support.terminal import PASSENGER_ID, TerminalLog, change_script, roles, spawn

pexpect = pytest.importorskip("pexpect")


def test_terminal_ctrl_c_cancels_the_turn_and_the_chat_goes_on(
    files: tuple[Path, Path],
) -> None:
    home, db = files
    long_reply = " ".join(f"word{i}" for i in range(300))
    script = [Reply(text=long_reply), Reply(text="I am **still here**:\n\n- ask me\n- anything")]
    with FakeOpenAI(script, chunk_delay=0.05) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        child.expect("you>")
        child.send("cancel my ticket")
        child.sendcontrol("c")  # a half-typed line: cleared, nothing sent
        child.send("hello\r")
        child.expect("Thinking")  # the indicator shows until the first token
        child.expect("word3 ")
        pressed = time.monotonic()
        child.sendintr()  # Ctrl-C while the assistant streams
        child.expect("Turn cancelled")
        assert time.monotonic() - pressed < 1.5
        child.expect("you>")
        assert len(server.requests) == 1
        assert customer_text(server.requests[0]["messages"][-1]["content"]) == "hello"

        child.send("are you there?\r")
        child.expect("still here")
        child.expect("you>")
        child.sendcontrol("c")  # at an empty prompt: leave
        child.expect("Resume it with: ")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0
    log: TerminalLog = child.logfile_read
    command = shlex.split(log.text.split("Resume it with: ")[1].splitlines()[0])
    assert "Traceback" not in log.text
    assert "word100" not in log.text  # the stream stopped
    assert roles(server.requests[-1]) == ["user", "assistant", "user"]  # a valid conversation
    assert "I am still here:" in log.text and "\x1b[1m" in log.raw  # Markdown, rendered
    assert "• ask me" in log.text
    assert command[command.index("--home") + 1] == str(home)
    assert command[command.index("--db") + 1] == str(db)
    assert command[command.index("--passenger-id") + 1] == FIXTURE_PASSENGER_ID


def test_terminal_at_60_columns_everything_fits(files: tuple[Path, Path]) -> None:
    home, db = files
    reply = (
        "Tomorrow's LX0112 leaves at the same time and still has Economy seats; the change "
        "fee for your Economy ticket is EUR 75.00, and the fare difference is shown below."
    )
    script, new_flight = change_script(db, reply)
    with FakeOpenAI(script) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), columns=60, color=False)
        child.expect("you>")
        child.send("Please move my flight to tomorrow\r")
        child.expect("Approve this action")
        child.send("y\r")
        child.expect("Done: your ticket")
        child.expect("you>")
        child.send("exit\r")
        child.expect(pexpect.EOF)
        child.close()
    log: TerminalLog = child.logfile_read
    lines = log.text.split("\n")
    box = lines[
        next(i for i, line in enumerate(lines) if line.startswith("╭")) : next(
            i for i, line in enumerate(lines) if line.startswith("╰")
        )
        + 1
    ]
    assert len(box) >= 6
    assert all(len(line) <= 60 for line in box), box
    assert all(line.startswith("│") and line.endswith("│") for line in box[1:-1]), box
    assert any("To pay: EUR " in line for line in box)
    # The spinner names the specialist at work once the hand-over is done.
    assert re.search(r"Thinking… \d+s \(flights\)", log.text)
    # The spinner redraws its line in place; each drawing must fit, not their sum (the
    # more often it redraws during a slow turn, the longer that sum).
    for line in log.drawn_lines:
        # prompt_toolkit redraws its prompts in place; a command to copy stays whole.
        if not any(skip in line for skip in ("you>", "Approve this", "Resume it with")):
            assert len(line) <= 60, line
    for word in reply.split():
        assert word in log.text  # wrapped between words, never inside one
    assert ticket_flight(db) == new_flight


def test_terminal_lost_terminal_leaves_the_action_pending(files: tuple[Path, Path]) -> None:
    home, db = files
    before = ticket_flight(db)
    script, new_flight = change_script(db, "I will move you to tomorrow's flight.")
    with FakeOpenAI(script) as server:
        first = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        first.expect("you>")
        first.send("Please move my flight to tomorrow\r")
        first.expect("Approve this action")
        first.kill(signal.SIGHUP)  # the terminal went away
        first.expect(pexpect.EOF)
        first.close()
        assert ticket_flight(db) == before  # not run

        second = spawn(server, chat_args(db, PASSENGER_ID, "--continue", home=home))
        second.expect("Please move my flight to tomorrow")  # the last exchange
        second.expect("Approval needed")  # asked again
        second.expect("Approve this action")
        second.send("y\r")
        second.expect("Done: your ticket")
        second.expect("you>")
        second.send("exit\r")
        second.expect(pexpect.EOF)
        second.close()
    assert second.exitstatus == 0
    assert ticket_flight(db) == new_flight


def test_terminal_missing_policy_file_is_said_when_the_first_message_is_sent(
    files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, db = files
    empty = tmp_path / "reference"
    empty.mkdir()
    monkeypatch.setenv("TRAVEL_ASSISTANT_DATA", str(empty))  # no policy.md in it
    with FakeOpenAI([]) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), color=False)
        child.expect("you>")  # the policy is read in the background
        child.send("what is the refund policy?\r")
        child.expect(pexpect.EOF)
        child.close()
    text = " ".join(child.logfile_read.text.split())  # as one line, however it wrapped
    assert f"The company policy file {empty / 'policy.md'} does not exist" in text
    assert text.index("does not exist") > text.index("refund policy?")
    assert "Traceback" not in text
    assert server.requests == []  # at the first message, not at the first policy question
    assert child.exitstatus == 1
    # What was typed is kept: Up brings it back in the next session.
    history = (home / "history" / FIXTURE_PASSENGER_ID.replace(" ", "_")).read_text()
    assert "what is the refund policy?" in history


def test_terminal_mistyped_slash_command_names_the_nearest_one(files: tuple[Path, Path]) -> None:
    home, db = files
    with FakeOpenAI([]) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), color=False)
        child.expect("you>")
        child.send("/detials\r")
        child.expect("Unknown command /detials. Did you mean /details\\? Type /help")
        child.expect("you>")
        child.send("/zzz\r")
        child.expect("Unknown command /zzz. Type /help")  # nothing near: no guess
        child.expect("you>")
        child.send("exit\r")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0
    assert server.requests == []  # neither was sent to the assistant


def test_terminal_details_n_shows_the_tool_calls_of_turn_n(files: tuple[Path, Path]) -> None:
    home, db = files
    search = ("search_flights", {"departure_airport": "CDG", "arrival_airport": "BSL"})
    script = [
        Reply(tool_calls=[search]),
        Reply(text="There are flights every day."),
        Reply(text="Hello again."),
    ]
    with FakeOpenAI(script) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), color=False)
        child.expect("you>")
        child.send("flights to Basel?\r")
        child.expect("flights every day")
        child.expect("you>")
        child.send("hi\r")
        child.expect("Hello again")
        child.expect("you>")
        child.send("/details\r")  # alone: the last turn, as before
        child.expect("The last turn made no tool calls.")
        child.expect("you>")
        child.send("/details 1\r")
        child.expect('Tool calls of turn 1 of 2 \\("flights to Basel\\?"\\) \\(1\\):')
        child.expect('→ search_flights {"departure_airport": "CDG", "arrival_airport": "BSL"}')
        child.expect("← \\[ok\\]")
        child.expect("you>")
        child.send("/details 2\r")
        child.expect('Turn 2 of 2 \\("hi"\\) made no tool calls.')
        child.expect("you>")
        child.send("/details 3\r")
        child.expect("No turn 3 here. This conversation has turns 1 to 2: /details N shows turn N")
        child.expect("you>")
        child.send("exit\r")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0
    assert "Traceback" not in child.logfile_read.text
