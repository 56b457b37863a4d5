"""``serve --log-format json`` (issue 52): one JSON line per event, polls kept out of it.

The installed ``travel-assistant serve`` over the scripted model server: a turn, the
page's polls, a refused request and a failing model; the console then has a line for
each request that changed something or was refused (with its request id, the client's
when it sent one, and the conversation's id), a line for each turn's end with its
outcome, none for the polls, and the model's failure with its cause.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx

from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.web import free_port
from tests.support.workers import clean_env, serve, token, wait_healthy


def test_serve_json_logs_a_line_per_event_with_its_ids_and_no_polls(
    db_path: Path, tmp_path: Path
) -> None:
    with FakeOpenAI([Reply(text="Hello! How can I help?")]) as fake:
        env = clean_env(
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY="test",
            TRAVEL_ASSISTANT_MODEL="scripted",
            TRAVEL_ASSISTANT_HOME=str(tmp_path / "home"),
            TRAVEL_ASSISTANT_DB=str(db_path),
        )
        issued = token(env, FIXTURE_PASSENGER_ID)
        port = free_port()
        process = serve(port, env, "--no-check", "--log-format", "json")
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, process)
            headers = {"Authorization": f"Bearer {issued}"}
            with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
                conversation = client.post("/api/v1/conversations").json()["conversation_id"]
                base = f"/api/v1/conversations/{conversation}"
                sent = client.post(
                    f"{base}/messages", json={"text": "hi"}, headers={"X-Request-ID": "req-42"}
                )
                assert sent.status_code == 200 and sent.headers["x-request-id"] == "req-42"
                for _ in range(5):  # what an open tab asks every second or two
                    assert client.get(base).status_code == 200
                assert client.get("/api/v1/conversations/nope-1").status_code == 404
        finally:
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert fake.requests  # the turn reached the model
    assert events, err
    for event in events:
        assert {"time", "level", "logger", "message"} <= set(event), event
    requests = [e for e in events if e["logger"] == "travel_assistant.requests"]
    (message,) = [
        e for e in requests if e["message"].startswith("POST ") and "messages" in e["message"]
    ]
    assert message["request_id"] == "req-42" and message["conversation_id"] == conversation
    assert (message["level"], message["status"]) == ("INFO", 200)
    (refused,) = [e for e in requests if e["status"] == 404]
    assert refused["conversation_id"] == "nope-1" and refused["request_id"]
    # The polls are not on the console at the default level.
    assert not [e for e in requests if e["message"].startswith("GET ") and e["status"] == 200]
    (ended,) = [e for e in events if e["message"].startswith("turn ended")]
    assert (ended["outcome"], ended["conversation_id"]) == ("done", conversation)
    assert ended["request_id"] == "req-42"  # the turn's line carries the request that began it
    # Nothing of uvicorn's own access log.
    assert not [e for e in events if e["logger"] == "uvicorn.access"]
