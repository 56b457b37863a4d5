"""``travel-assistant serve`` answers HTTP before its assistant is built, as a process.

The model server of the tests holds its answer to ``GET /v1/models``, which the start's
endpoint check asks, for as long as the test likes: the start is genuinely slow, at the
point where a real one is slow when its model server is still loading. A model server
that is not there at all makes the start fail, and the service says so while it runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from db.fixtures import FIXTURE_PASSENGER_ID
from server.startup import START_FAILED
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.terminal import PROGRAM
from tests.support.waiting import wait_until
from tests.support.web import SECRET, free_port, parse_sse
from tests.support.workers import token


def environment(base_url: str, home: Path, db_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
    env.update(
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="test",
        TRAVEL_ASSISTANT_MODEL="scripted",
        TRAVEL_ASSISTANT_HOME=str(home),
        TRAVEL_ASSISTANT_DB=str(db_path),
        TRAVEL_ASSISTANT_SECRET=SECRET,
    )
    return env


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, str]], tuple[subprocess.Popen[str], str]]]:
    """Start ``travel-assistant serve`` on a free port; kill it after the test if need be."""
    started: list[subprocess.Popen[str]] = []

    def start(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
        port = free_port()
        process = subprocess.Popen(
            [str(PROGRAM), "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process, f"http://127.0.0.1:{port}"

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def first_health(process: subprocess.Popen[str], url: str) -> httpx.Response:
    """Ask for the health check every 20 ms until the service answers at all."""
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()
        try:
            return httpx.get(f"{url}/api/v1/health", timeout=5)
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "serve did not answer"
        time.sleep(0.02)


def test_serve_says_starting_then_ok_and_holds_a_request_until_the_assistant_is_ready(
    serve: Callable[[dict[str, str]], tuple[subprocess.Popen[str], str]],
    db_path: Path,
    tmp_path: Path,
) -> None:
    gate = threading.Event()
    with FakeOpenAI([Reply(text="Hello! How can I help?")], models_gate=gate) as fake:
        try:
            env = environment(fake.base_url, tmp_path / "home", db_path)
            process, url = serve(env)
            health = first_health(process, url)
            assert (health.status_code, health.json()) == (503, {"status": "starting"})
            assert "retry-after" in health.headers
            headers = {"Authorization": f"Bearer {token(env, FIXTURE_PASSENGER_ID)}"}
            # The build has reached the endpoint check, which the model server holds.
            wait_until(lambda: fake.models_asked > 0, seconds=60)
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                assert client.get("/api/v1/health").json() == {"status": "starting"}
                # What needs no assistant answers meanwhile.
                assert client.get("/api/v1/me").json()["passenger_id"] == FIXTURE_PASSENGER_ID
                assert "Meridian Travel assistant" in client.get("/").text
                answers: list[httpx.Response] = []
                asking = threading.Thread(
                    target=lambda: answers.append(client.post("/api/v1/conversations"))
                )
                asking.start()
                time.sleep(0.5)
                assert not answers, "the request did not wait for the assistant"
                gate.set()  # the model server answers: the build goes on
                asking.join(timeout=60)
                (created,) = answers
                assert created.status_code == 201, created.text
                assert client.get("/api/v1/health").json() == {
                    "status": "ok",
                    "model_tools": "honoured",  # the server called the tool it was asked to
                }
                path = f"/api/v1/conversations/{created.json()['conversation_id']}/messages"
                with client.stream("POST", path, json={"text": "hi"}) as response:
                    events = parse_sse(response.read().decode())
                assert [e.data["text"] for e in events if e.name == "message"] == [
                    "Hello! How can I help?"
                ]
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 0
        finally:
            gate.set()
    _, err = process.communicate()
    assert "The assistant is ready" in err


def test_serve_whose_model_endpoint_is_missing_says_so_and_keeps_answering(
    serve: Callable[[dict[str, str]], tuple[subprocess.Popen[str], str]],
    db_path: Path,
    tmp_path: Path,
) -> None:
    closed = free_port()  # nothing listens there
    endpoint = f"http://127.0.0.1:{closed}/v1"
    process, url = serve(environment(endpoint, tmp_path / "home", db_path))
    first_health(process, url)

    def failed() -> bool:
        return httpx.get(f"{url}/api/v1/health", timeout=5).json()["status"] == "failed"

    wait_until(failed, seconds=60)
    health = httpx.get(f"{url}/api/v1/health", timeout=5)
    assert health.status_code == 503
    said = (
        f"Cannot reach {endpoint}: check OPENAI_BASE_URL and that the server is running "
        "(or pass --no-check)."
    )
    assert health.json() == {"status": "failed", "detail": said}
    refused = httpx.post(f"{url}/api/v1/conversations", timeout=5)
    assert (refused.status_code, refused.json()) == (503, {"detail": START_FAILED})
    time.sleep(0.5)
    assert process.poll() is None  # the process goes on answering
    assert httpx.get(f"{url}/api/v1/health", timeout=5).json()["detail"] == said
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 2  # the code serve stopped with before it listened
    _, err = process.communicate()
    assert said in " ".join(err.split())


def test_serve_over_a_model_server_that_drops_tools_says_so_and_in_its_health(
    serve: Callable[[dict[str, str]], tuple[subprocess.Popen[str], str]],
    db_path: Path,
    tmp_path: Path,
) -> None:
    with FakeOpenAI(
        [Reply(text="The hotel is now yours.")], apply_template=True, tools="dropped"
    ) as fake:
        process, url = serve(environment(fake.base_url, tmp_path / "home", db_path))
        first_health(process, url)

        def failed() -> bool:
            return httpx.get(f"{url}/api/v1/health", timeout=5).json()["status"] == "failed"

        wait_until(failed, seconds=60)
        health = httpx.get(f"{url}/api/v1/health", timeout=5)
        assert (health.status_code, health.json()["status"]) == (503, "failed")
        said = health.json()["detail"]
        assert said.startswith(f"The model server at {fake.base_url} drops tools: ")
        assert "start llama-server with a template that knows tools" in said.lower()
        assert "--chat-template-file" in said and "\n" not in said  # one line
        refused = httpx.post(f"{url}/api/v1/conversations", timeout=5)
        assert (refused.status_code, refused.json()) == (503, {"detail": START_FAILED})
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 2
        assert fake.requests == []  # no customer ever reached a model without tools
    _, err = process.communicate()
    assert said in " ".join(err.split())


@pytest.mark.parametrize(
    ("options", "found"),
    [((), "honoured"), (("--no-check",), "not checked")],
    ids=["checked", "no-check"],
)
def test_serve_health_says_whether_the_model_server_was_seen_to_honour_tools(
    db_path: Path, tmp_path: Path, options: tuple[str, ...], found: str
) -> None:
    # A template that knows tools, seen through llama.cpp's /apply-template; with
    # --no-check nothing is asked and the health check says so.
    with FakeOpenAI(apply_template=True) as fake:
        port = free_port()
        env = environment(fake.base_url, tmp_path / "home", db_path)
        process = subprocess.Popen(
            [str(PROGRAM), "serve", "--port", str(port), *options],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            first_health(process, url)
            wait_until(
                lambda: httpx.get(f"{url}/api/v1/health", timeout=5).status_code == 200,
                seconds=60,
            )
            health = httpx.get(f"{url}/api/v1/health", timeout=5).json()
            assert health == {"status": "ok", "model_tools": found}
            assert len(fake.template_requests) == (0 if options else 1)
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()
