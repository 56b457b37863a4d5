"""The service listens before its assistant is built (``server.startup``), over real HTTP.

uvicorn runs ``StartupApp`` in a thread (``LiveServer``), lifespan and all, as
``travel-assistant serve`` does; the application is the real one (``create_app`` without
its service) and the service is built over a scripted model. The build waits on an event
the test holds, so every moment of the start can be looked at. The command itself, with a
model endpoint that is slow or missing, is in ``tests/integration/test_serve_startup.py``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from server.app import create_app
from server.auth import TokenSigner
from server.service import ConversationService
from server.startup import (
    RETRY_SECONDS,
    START_FAILED,
    Startup,
    StartupApp,
    StartupError,
)
from tests.support.cli import run
from tests.support.scripted import ScriptedChatModel, say
from tests.support.waiting import wait_until
from tests.support.web import SECRET, LiveServer, auth, build_service, free_port

ROOT = Path(__file__).resolve().parents[2]


class Build:
    """A service build that waits for the test's go, and what it opened and closed."""

    def __init__(self, make: Callable[[], ConversationService]) -> None:
        self.make = make
        self.go = threading.Event()
        self.started = threading.Event()
        self.closed: list[str] = []

    def __call__(self, stack: ExitStack) -> ConversationService:
        self.started.set()
        stack.callback(self.closed.append, "database")
        assert self.go.wait(timeout=30), "the test never let the build finish"
        service = self.make()
        real_close = service.close

        def close(finish_by: float | None = None) -> None:
            self.closed.append("service")
            real_close(finish_by)

        service.close = close  # type: ignore[method-assign]
        return service


@pytest.fixture
def signer() -> TokenSigner:
    return TokenSigner(SECRET)


@pytest.fixture
def build(travel_db: Database, model: ScriptedChatModel, tmp_path: Path) -> Iterator[Build]:
    model.extend(say("Hello! How can I help?"))
    held = Build(lambda: build_service(travel_db, model, tmp_path / "sessions.sqlite"))
    yield held
    held.go.set()  # never leave a build thread waiting


def application(signer: TokenSigner) -> Callable[[], FastAPI]:
    return lambda: create_app(None, signer)


def test_server_startup_health_says_starting_until_the_assistant_is_built(
    build: Build, signer: TokenSigner
) -> None:
    startup = Startup(application(signer), build)
    with LiveServer(StartupApp(startup)) as server, httpx.Client(base_url=server.url) as client:
        starting = client.get("/api/v1/health")
        assert (starting.status_code, starting.json()) == (503, {"status": "starting"})
        assert starting.headers["retry-after"] == str(RETRY_SECONDS)
        assert starting.headers["x-content-type-options"] == "nosniff"
        wait_until(build.started.is_set)  # the application is loaded: the build runs
        assert client.get("/api/v1/health").status_code == 503
        build.go.set()
        wait_until(lambda: client.get("/api/v1/health").status_code == 200)
        assert client.get("/api/v1/health").json() == {"status": "ok"}
        assert startup.state == "ready"
    assert build.closed == ["service", "database"]  # the stop closed it, then what it used


def test_server_startup_a_request_made_while_starting_waits_and_then_succeeds(
    build: Build, signer: TokenSigner
) -> None:
    startup = Startup(application(signer), build)
    headers = auth(signer, FIXTURE_PASSENGER_ID)
    with (
        LiveServer(StartupApp(startup)) as server,
        httpx.Client(base_url=server.url, headers=headers, timeout=30) as client,
    ):
        wait_until(build.started.is_set)
        # What needs no assistant answers while it is built.
        assert client.get("/api/v1/me").json()["passenger_id"] == FIXTURE_PASSENGER_ID
        assert "Meridian Travel assistant" in client.get("/").text
        assert "/api/v1/conversations" in client.get("/openapi.json").json()["paths"]
        answers: list[httpx.Response] = []
        asking = threading.Thread(
            target=lambda: answers.append(client.post("/api/v1/conversations"))
        )
        asking.start()
        time.sleep(0.3)
        assert not answers, "the request did not wait for the assistant"
        build.go.set()
        asking.join(timeout=30)
        (created,) = answers
        assert created.status_code == 201, created.text
        conversation = created.json()["conversation_id"]
        reply = client.post(
            f"/api/v1/conversations/{conversation}/messages", json={"text": "Hi"}
        ).text
        assert "Hello! How can I help?" in reply


def test_server_startup_a_request_waits_at_most_the_bound_then_503(
    build: Build, signer: TokenSigner
) -> None:
    startup = Startup(application(signer), build)
    headers = auth(signer, FIXTURE_PASSENGER_ID)
    with (
        LiveServer(StartupApp(startup, wait=0.3)) as server,
        httpx.Client(base_url=server.url, headers=headers) as client,
    ):
        wait_until(build.started.is_set)
        began = time.monotonic()
        refused = client.get("/api/v1/conversations")
        assert time.monotonic() - began >= 0.3
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == str(RETRY_SECONDS)
        assert "still starting" in refused.json()["detail"]
        build.go.set()
        wait_until(lambda: startup.state == "ready")
        assert client.get("/api/v1/conversations").status_code == 200


def test_server_startup_a_failed_build_is_said_by_health_and_refuses_at_once(
    signer: TokenSigner,
) -> None:
    closed: list[str] = []

    def fails(stack: ExitStack) -> ConversationService:
        stack.callback(closed.append, "database")
        raise StartupError("Cannot reach http://127.0.0.1:9/v1: check OPENAI_BASE_URL.", 2)

    startup = Startup(application(signer), fails)
    headers = auth(signer, FIXTURE_PASSENGER_ID)
    with (
        LiveServer(StartupApp(startup)) as server,
        httpx.Client(base_url=server.url, headers=headers) as client,
    ):
        wait_until(startup.done.is_set)
        health = client.get("/api/v1/health")
        assert health.status_code == 503
        assert health.json() == {
            "status": "failed",
            "detail": "Cannot reach http://127.0.0.1:9/v1: check OPENAI_BASE_URL.",
        }
        began = time.monotonic()
        refused = client.post("/api/v1/conversations")
        assert time.monotonic() - began < 5  # no wait for what will never come
        assert (refused.status_code, refused.json()) == (503, {"detail": START_FAILED})
        assert "retry-after" not in refused.headers
        # The page and the token's check still answer: the page can say it cannot work.
        assert client.get("/").status_code == 200
        assert client.get("/api/v1/me").status_code == 200
        assert client.get("/api/v1/health").status_code == 503  # still answering
    assert closed == ["database"]  # what the failed build opened is closed at once
    assert startup.error is not None and startup.error.code == 2


def test_server_startup_an_unexpected_error_is_said_by_its_type(
    signer: TokenSigner, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(stack: ExitStack) -> ConversationService:
        raise RuntimeError("boom")

    startup = Startup(application(signer), broken)
    startup.start()
    assert startup.done.wait(timeout=30)
    assert startup.state == "failed"
    assert startup.error is not None and startup.error.message == "RuntimeError: boom"
    assert "The service failed to start" in caplog.text  # with its traceback, for the log


def test_server_startup_an_application_that_cannot_load_refuses_all_but_health() -> None:
    def load() -> FastAPI:
        raise StartupError("The service's code cannot be loaded.")

    def never(stack: ExitStack) -> ConversationService:
        raise AssertionError("built without an application")

    startup = Startup(load, never)
    with LiveServer(StartupApp(startup)) as server, httpx.Client(base_url=server.url) as client:
        wait_until(startup.done.is_set)
        assert client.get("/api/v1/health").json()["status"] == "failed"
        assert client.get("/").status_code == 503
        assert client.get("/api/v1/me").status_code == 503


def test_server_startup_a_stop_during_the_build_closes_what_it_built(
    build: Build, signer: TokenSigner
) -> None:
    startup = Startup(application(signer), build)
    startup.start()
    assert build.started.wait(timeout=30)
    startup.close()  # Ctrl-C while the assistant is built
    assert build.closed == []
    build.go.set()
    assert startup.done.wait(timeout=30)
    assert build.closed == ["service", "database"]
    assert startup.state == "starting"  # never served
    startup.close()  # once only
    assert build.closed == ["service", "database"]


def test_server_startup_a_stop_while_the_code_loads_builds_nothing(signer: TokenSigner) -> None:
    loading = threading.Event()
    go = threading.Event()
    built: list[bool] = []

    def load() -> FastAPI:
        loading.set()
        assert go.wait(timeout=30)
        return create_app(None, signer)

    def build(stack: ExitStack) -> ConversationService:
        built.append(True)
        raise AssertionError("built after the stop")

    startup = Startup(load, build)
    startup.start()
    assert loading.wait(timeout=30)
    startup.close()
    go.set()
    assert startup.done.wait(timeout=30)
    assert (built, startup.state, startup.error) == ([], "starting", None)


def test_server_startup_loads_and_builds_inside_its_loading_context(
    signer: TokenSigner,
) -> None:
    # ``serve`` passes ``collector.loading_code``: the collector pauses for both steps,
    # and resumes however the build ends.
    steps: list[str] = []

    @contextmanager
    def loading() -> Iterator[None]:
        steps.append("enter")
        try:
            yield
        finally:
            steps.append("exit")

    def load() -> FastAPI:
        steps.append("load")
        return create_app(None, signer)

    def build(stack: ExitStack) -> ConversationService:
        steps.append("build")
        raise StartupError("The database is missing.")

    startup = Startup(load, build, loading)
    startup.start()
    assert startup.done.wait(timeout=30)
    wait_until(lambda: steps[-1:] == ["exit"])
    assert steps == ["enter", "load", "build", "exit"]
    assert startup.state == "failed"


def test_server_startup_what_serve_does_before_it_listens_imports_no_langchain(
    db_path: Path, tmp_path: Path
) -> None:
    """The process listens after light imports only: LangChain comes in the background."""
    probe = f"""
import sys
import server.startup

def listen(app, host, port, limits=None, log_format="text"):
    heavy = ("langchain", "langgraph", "openai", "server.app")
    print(sorted(m for m in sys.modules if m.startswith(heavy)))

server.startup.serve = listen
import cli
code = cli.main(["--home", {str(tmp_path)!r}, "--db", {str(db_path)!r}, "serve", "--port", "1"])
assert code == 0, code
"""
    env = {"TRAVEL_ASSISTANT_SECRET": SECRET, "PATH": "", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert "The web chat:" in done.stderr


@pytest.mark.parametrize(
    ("arguments", "env", "said"),
    [
        (["--db", "{tmp}/missing.sqlite"], {}, "No travel database at"),
        ([], {"TRAVEL_ASSISTANT_SECRET": "short"}, "TRAVEL_ASSISTANT_SECRET"),
        (["--conversations", "mysql://nobody@127.0.0.1/x"], {}, "--conversations"),
    ],
)
def test_server_startup_problems_that_need_no_model_stop_serve_before_it_listens(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    arguments: list[str],
    env: dict[str, str],
    said: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def listen(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("serve listened")

    monkeypatch.setattr("server.startup.serve", listen)
    given = [a.replace("{tmp}", str(tmp_path)) for a in arguments]
    result = run(["--home", str(tmp_path), *given, "serve", "--port", str(free_port())])
    assert (result.code, result.out) == (2, "")
    assert said in result.err
    assert "The web chat:" not in result.err
