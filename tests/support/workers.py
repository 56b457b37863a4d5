"""``serve`` workers as separate processes over shared stores, for the multi-worker tests."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.fake_openai import FakeOpenAI
from tests.support.terminal import PROGRAM
from tests.support.web import free_port, parse_sse

SECRET = "postgres-workers-secret-" + "x" * 40


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without model or search keys, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
    env.update(extra)
    return env


def workers_env(
    fake: FakeOpenAI, tmp_path: Path, travel: str, conversations: str
) -> dict[str, str]:
    """The environment of ``serve`` workers over the two stores and the model ``fake``."""
    return clean_env(
        OPENAI_BASE_URL=fake.base_url,
        OPENAI_API_KEY="test",
        TRAVEL_ASSISTANT_MODEL="scripted",
        TRAVEL_ASSISTANT_HOME=str(tmp_path / "home"),
        TRAVEL_ASSISTANT_SECRET=SECRET,
        TRAVEL_ASSISTANT_DB=travel,
        TRAVEL_ASSISTANT_CONVERSATIONS=conversations,
    )


def serve(port: int, env: dict[str, str], *options: str) -> subprocess.Popen[str]:
    """Start the installed ``travel-assistant serve`` on ``port`` (with ``options``)."""
    return subprocess.Popen(
        [str(PROGRAM), "serve", "--port", str(port), *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_healthy(url: str, process: subprocess.Popen[str]) -> None:
    """Wait until the worker at ``url`` answers its health check."""
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, process.communicate()
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "serve did not start"
        time.sleep(0.2)


def token(env: dict[str, str], passenger_id: str) -> str:
    """Issue a customer token with the installed ``travel-assistant token``."""
    return subprocess.run(
        [str(PROGRAM), "token", "--passenger-id", passenger_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()


def stream(client: httpx.Client, path: str, body: dict[str, Any]) -> list[Any]:
    """POST ``body`` to a streaming endpoint and return its events."""
    with client.stream("POST", path, json=body, timeout=60) as response:
        assert response.status_code == 200, response.read()
        return parse_sse(response.read().decode())


def stop(*processes: subprocess.Popen[str]) -> None:
    """Kill what still runs and collect its output."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate()


@dataclass
class Workers:
    """Two running workers and a client of each, signed in as the fixture passenger."""

    processes: list[subprocess.Popen[str]]
    one: httpx.Client
    other: httpx.Client

    def new_conversation(self) -> str:
        """Start a conversation on the first worker; return its path under the API."""
        conversation = self.one.post("/api/v1/conversations").json()["conversation_id"]
        return f"/api/v1/conversations/{conversation}"


@contextmanager
def two_workers(env: dict[str, str]) -> Iterator[Workers]:
    """Start two ``serve`` workers with ``env``; stop them (SIGKILL if need be) after."""
    ports = [free_port(), free_port()]
    processes = [serve(port, env) for port in ports]
    try:
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        for url, process in zip(urls, processes, strict=True):
            wait_healthy(url, process)
        headers = {"Authorization": f"Bearer {token(env, FIXTURE_PASSENGER_ID)}"}
        with (
            httpx.Client(base_url=urls[0], headers=headers, timeout=30) as one,
            httpx.Client(base_url=urls[1], headers=headers, timeout=30) as other,
        ):
            yield Workers(processes, one, other)
    finally:
        stop(*processes)
