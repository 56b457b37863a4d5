"""The HTTP service end to end: a real HTTP client against uvicorn on 127.0.0.1.

The model is the real langchain-openai client talking to the scripted OpenAI-compatible
server of the tests; the travel database is a generated one. The last test runs the
real command, ``travel-assistant serve``, with a token from ``travel-assistant token``.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assistants.models import ModelSettings, build_chat_models
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from server.auth import SECRET_FILE
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import ticket_flight
from tests.support.web import (
    DECLINE_REASON,
    FLIGHT_REQUEST,
    HOTEL_REQUEST,
    Event,
    LiveServer,
    as_replies,
    auth,
    build_app,
    build_service,
    flight_then_hotel_script,
    free_port,
    hotel_bookings,
    parse_sse,
    plan_trip,
)


def models_for(fake: FakeOpenAI) -> Any:
    return build_chat_models(
        ModelSettings(model="scripted", api_key="test", base_url=fake.base_url)
    )


def stream(client: httpx.Client, path: str, body: dict[str, Any]) -> list[Event]:
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        return parse_sse(response.read().decode())


def test_server_e2e_flight_approved_hotel_declined_over_http(
    travel_db: Database, tmp_path: Path
) -> None:
    trip = plan_trip(travel_db)
    stays_before = hotel_bookings(travel_db, FIXTURE_PASSENGER_ID)
    with FakeOpenAI(as_replies(flight_then_hotel_script(trip))) as fake:
        service = build_service(travel_db, models_for(fake), tmp_path / "sessions.sqlite")
        app, signer = build_app(service)
        with (
            LiveServer(app) as server,
            httpx.Client(
                base_url=server.url, headers=auth(signer, FIXTURE_PASSENGER_ID), timeout=30
            ) as client,
        ):
            conversation = client.post("/api/v1/conversations").json()["conversation_id"]
            base = f"/api/v1/conversations/{conversation}"
            events = stream(client, f"{base}/messages", {"text": FLIGHT_REQUEST})
            assert [e.name for e in events][-2:] == ["pending", "done"]
            tokens = "".join(e.data["text"] for e in events if e.name == "token")
            assert tokens.startswith("Tomorrow's LX0112")  # the real client streamed pieces
            (flight,) = client.get(f"{base}/pending").json()["actions"]
            events = stream(
                client,
                f"{base}/decisions",
                {"decisions": [{"tool_call_id": flight["tool_call_id"], "approved": True}]},
            )
            assert events[-1].name == "done"
            events = stream(client, f"{base}/messages", {"text": HOTEL_REQUEST})
            (hotel,) = events[-2].data["actions"]
            assert hotel["preview"]["title"] == "Book hotel"
            events = stream(
                client,
                f"{base}/decisions",
                {
                    "decisions": [
                        {
                            "tool_call_id": hotel["tool_call_id"],
                            "approved": False,
                            "reason": DECLINE_REASON,
                        }
                    ]
                },
            )
            assert [e.data["text"] for e in events if e.name == "message"] == [
                "No problem, I have not booked it. Would a cheaper hotel suit you?"
            ]
            items = client.get(f"{base}/messages").json()["items"]
    assert ticket_flight(travel_db) == trip.new_flight_id
    assert hotel_bookings(travel_db, FIXTURE_PASSENGER_ID) == stays_before
    outcomes = [(i["title"], i["outcome"], i["reason"]) for i in items if i["type"] == "action"]
    assert outcomes == [
        ("Change flight", "approved", None),
        ("Book hotel", "declined", DECLINE_REASON),
    ]
    last = fake.requests[-1]["messages"]
    assert any(m["role"] == "tool" and DECLINE_REASON in str(m["content"]) for m in last)


def test_server_e2e_reply_streams_while_the_turn_runs(travel_db: Database, tmp_path: Path) -> None:
    """Events reach the client as they happen; a second message meanwhile is refused."""
    seen_first_reply = threading.Event()
    waited = {"timed_out": False}

    def second_reply(body: dict[str, Any]) -> Reply:
        # The model's second answer waits until the client has seen the first one.
        waited["timed_out"] = not seen_first_reply.wait(timeout=15)
        return Reply(text="Here are the flights.")

    script = [
        Reply(text="Let me look.", tool_calls=[("search_flights", {"arrival_airport": "BSL"})]),
        second_reply,
    ]
    with FakeOpenAI(script) as fake:
        service = build_service(travel_db, models_for(fake), tmp_path / "sessions.sqlite")
        app, signer = build_app(service)
        with (
            LiveServer(app) as server,
            httpx.Client(
                base_url=server.url, headers=auth(signer, FIXTURE_PASSENGER_ID), timeout=30
            ) as client,
        ):
            conversation = client.post("/api/v1/conversations").json()["conversation_id"]
            path = f"/api/v1/conversations/{conversation}/messages"
            names: list[str] = []
            with client.stream("POST", path, json={"text": "Flights to Basel?"}) as response:
                lines: list[str] = []
                for line in response.iter_lines():
                    lines.append(line)
                    events = parse_sse("\n".join(lines) + "\n\n")
                    names = [e.name for e in events]
                    if "status" in names and not seen_first_reply.is_set():
                        busy = client.post(path, json={"text": "hello?"})
                        assert busy.status_code == 409, busy.text
                        seen_first_reply.set()
    assert not waited["timed_out"], "the first events only arrived after the turn ended"
    # The message first (the history's line for it), then the reply's pieces as they come.
    assert names[:2] == ["record", "token"] and names[-1] == "done"
    assert "message" in names


def program() -> list[str]:
    script = Path(sys.executable).parent / "travel-assistant"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


@pytest.fixture
def served(db_path: Path, tmp_path: Path) -> Iterator[tuple[str, Path, FakeOpenAI, str]]:
    """``travel-assistant serve`` on a free port, over the scripted model server."""
    home = tmp_path / "home-folder"
    with FakeOpenAI([Reply(text="Hello! How can I help?")]) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
        env.update(
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY="test",
            TRAVEL_ASSISTANT_MODEL="scripted",
            TRAVEL_ASSISTANT_HOME=str(home),
            TRAVEL_ASSISTANT_DB=str(db_path),
        )
        port = free_port()
        process = subprocess.Popen(
            [*program(), "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The token is issued while the service starts (each start imports for seconds).
        issuing = subprocess.Popen(
            [*program(), "token", "--passenger-id", FIXTURE_PASSENGER_ID],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                assert process.poll() is None, process.communicate()
                try:
                    if httpx.get(f"{url}/api/v1/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
            out, err = issuing.communicate(timeout=60)
            assert issuing.returncode == 0, err
            token = out.strip()
            yield url, home, fake, token
            process.send_signal(signal.SIGINT)  # Ctrl-C: a graceful stop
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()


def test_server_e2e_the_serve_command(served: tuple[str, Path, FakeOpenAI, str]) -> None:
    url, home, fake, token = served
    assert stat.S_IMODE((home / SECRET_FILE).stat().st_mode) == 0o600
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/api/v1/me").json()["passenger_id"] == FIXTURE_PASSENGER_ID
        assert "Meridian Travel assistant" in client.get("/").text
        conversation = client.post("/api/v1/conversations").json()["conversation_id"]
        events = stream(client, f"/api/v1/conversations/{conversation}/messages", {"text": "hi"})
        assert [e.data["text"] for e in events if e.name == "message"] == ["Hello! How can I help?"]
        items = client.get(f"/api/v1/conversations/{conversation}/messages").json()["items"]
        assert [i["type"] for i in items] == ["customer", "assistant"]
        assert httpx.get(f"{url}/api/v1/me").status_code == 401
    assert fake.requests and all(r.get("stream") for r in fake.requests)


def test_server_e2e_turn_goes_on_when_the_client_leaves(
    travel_db: Database, tmp_path: Path
) -> None:
    client_gone = threading.Event()

    def after_the_client_left(body: dict[str, Any]) -> Reply:
        client_gone.wait(timeout=15)
        return Reply(text="Here are the flights to Basel.")

    script = [
        Reply(text="Let me look.", tool_calls=[("search_flights", {"arrival_airport": "BSL"})]),
        after_the_client_left,
    ]
    with FakeOpenAI(script) as fake:
        service = build_service(travel_db, models_for(fake), tmp_path / "sessions.sqlite")
        app, signer = build_app(service)
        with (
            LiveServer(app) as server,
            httpx.Client(
                base_url=server.url, headers=auth(signer, FIXTURE_PASSENGER_ID), timeout=30
            ) as client,
        ):
            conversation = client.post("/api/v1/conversations").json()["conversation_id"]
            base = f"/api/v1/conversations/{conversation}"
            with client.stream("POST", f"{base}/messages", json={"text": "To Basel?"}) as response:
                for line in response.iter_lines():
                    if line.startswith("event: status"):
                        break  # the customer closes the tab mid-turn
            client_gone.set()
            deadline = time.monotonic() + 20
            while client.get(base).json()["busy"]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            items = client.get(f"{base}/messages").json()["items"]
    assert items[-1]["type"] == "assistant"
    assert items[-1]["text"] == "Here are the flights to Basel."


def test_server_e2e_serve_stops_at_start_up_without_the_policy(
    db_path: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "reference"
    empty.mkdir()  # no policy.md in it
    port = free_port()
    with FakeOpenAI([]) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
        env.update(
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY="test",
            TRAVEL_ASSISTANT_MODEL="scripted",
            TRAVEL_ASSISTANT_HOME=str(tmp_path / "home-folder"),
            TRAVEL_ASSISTANT_DB=str(db_path),
            TRAVEL_ASSISTANT_DATA=str(empty),
        )
        done = subprocess.run(
            [*program(), "serve", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"{empty / 'policy.md'} does not exist" in " ".join(done.stderr.split())
    assert "The web chat:" not in done.stdout + done.stderr  # it never offered to listen
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1)
