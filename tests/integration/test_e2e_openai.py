"""End to end through the real client path: ``travel-assistant chat`` in a pseudo-terminal,
talking to a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from tests.support.fake_openai import FakeOpenAI, Reply, customer_text
from tests.support.flights import ticket_flight, tomorrow_flight

pexpect = pytest.importorskip("pexpect")


def program() -> list[str]:
    script = Path(sys.executable).parent / "travel-assistant"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def env_for(home: Path, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
    env.update(
        TRAVEL_ASSISTANT_HOME=str(home),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="test-key",
        TRAVEL_ASSISTANT_MODEL="scripted",
        PROMPT_TOOLKIT_NO_CPR="1",
        TERM="xterm",
        NO_COLOR="1",
    )
    return env


def test_e2e_delegation_approval_and_resume(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home, "http://127.0.0.1:9/v1")
    subprocess.run(
        [*program(), "db", "init"], env=env, check=True, capture_output=True, timeout=120
    )
    database = Database.from_url(str(home / "travel.sqlite"))
    new_flight = tomorrow_flight(database)
    change = (
        "update_ticket_to_new_flight",
        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": new_flight},
    )

    with FakeOpenAI(
        [
            Reply(tool_calls=[("ToFlightBookingAssistant", {"request": "fly tomorrow"})]),
            Reply(text="I will move you to tomorrow's flight.", tool_calls=[change]),
            Reply(text="Done: your ticket is on tomorrow's LX0112."),
        ]
    ) as server:
        env = env_for(home, server.base_url)
        first = pexpect.spawn(
            program()[0],
            [*program()[1:], "chat", "--passenger-id", FIXTURE_PASSENGER_ID],
            env=env,
            encoding="utf-8",
            timeout=60,
            dimensions=(40, 200),
        )
        first.expect(r"Session (\S+) for passenger")
        thread_id = first.match.group(1)
        first.expect("you>")
        first.sendline("Please move my flight to tomorrow")
        first.expect("I will move you to tomorrow")
        first.expect("Approval needed")
        first.expect("Approve")
        # The process dies mid-approval as a crash does: no signal it could handle, so no
        # chance to decline; the approval must still be pending in the new process.
        first.kill(signal.SIGKILL)
        first.wait()
        assert ticket_flight(database) != new_flight

        second = pexpect.spawn(
            program()[0],
            [
                *program()[1:],
                "chat",
                "--passenger-id",
                FIXTURE_PASSENGER_ID,
                "--thread-id",
                thread_id,
            ],
            env=env,
            encoding="utf-8",
            timeout=60,
            dimensions=(40, 200),
        )
        second.expect("Please move my flight to tomorrow")  # the last exchange is shown
        second.expect("Approve")
        second.sendline("y")
        second.expect("Done: your ticket is on tomorrow")
        second.expect("you>")
        second.sendline("exit")
        second.expect(re.escape("--thread-id " + thread_id))
        second.expect(pexpect.EOF)
        second.close()
        assert second.exitstatus == 0

    assert ticket_flight(database) == new_flight
    # The real client sent the tools and streamed; the tool result reached the model.
    assert all(request.get("stream") for request in server.requests)
    last = server.requests[-1]["messages"]
    assert any(m["role"] == "tool" and "LX0112" in str(m.get("content")) for m in last)
    database.dispose()


def test_e2e_unreachable_endpoint_fails_before_prompt(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home, "http://127.0.0.1:9/v1")  # nothing listens on port 9
    result = subprocess.run(
        [*program(), "chat", "--passenger-id", FIXTURE_PASSENGER_ID],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "Cannot reach http://127.0.0.1:9/v1" in result.stderr
    assert "you>" not in result.stdout


def test_e2e_piped_input_with_invalid_utf8(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with FakeOpenAI([Reply(text="Hello! How can I help?")]) as server:
        result = subprocess.run(
            [*program(), "chat", "--passenger-id", FIXTURE_PASSENGER_ID],
            env=env_for(home, server.base_url),
            input=b"hi \xff\xfe there\nexit\n",
            capture_output=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert b"Hello! How can I help?" in result.stdout
    sent = server.requests[0]["messages"][-1]["content"]
    assert customer_text(sent) == "hi ?? there"  # after its time and the bookings
