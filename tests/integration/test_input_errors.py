"""Every command says an input error at once: before anything slow is loaded (issue 49).

The installed program, as a plain process, in a home that has a conversations store
and a travel database (as any home that has chatted has): each input error is its
one-line message and exit code 2, and the run imported none of the slow modules
(LangChain, LangGraph, the OpenAI client, uvicorn and FastAPI; SQLAlchemy too where
nothing needs it), by Python's own ``-X importtime`` list. That list is what made these
errors take seconds (``sessions delete`` of an unknown id waited for the checkpointer,
``eval`` for the whole evaluation); how long they take now is in BENCHMARKS.md
(``scripts/bench_startup.py``), not asserted here.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conversations.store import ConversationStore
from tests.support.terminal import PROGRAM

SLOW = ("langchain", "langgraph", "openai", "uvicorn", "fastapi")
DATABASE = ("sqlalchemy",)


@pytest.fixture
def home(built_db: Path, tmp_path: Path) -> Path:
    """A home with its travel database and a conversations store."""
    home = tmp_path / "chatted"
    home.mkdir()
    shutil.copyfile(built_db, home / "travel.sqlite")
    ConversationStore.open(home / "sessions.sqlite").close()
    return home


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def _refused(home: Path, args: list[str], code: int = 2) -> tuple[str, list[str]]:
    """Run ``travel-assistant --home HOME ARGS``; return what it said, what it imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TRAVEL_"))}
    env.update(
        PYTHONPROFILEIMPORTTIME="1",
        TRAVEL_ASSISTANT_SECRET="input-errors-secret-input-errors-secret",
        NO_COLOR="1",
    )
    done = subprocess.run(
        [str(PROGRAM), "--home", str(home), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == code, done.stderr
    lines = done.stderr.splitlines()
    imported = [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]
    assert "cli" in imported  # the list is there
    said = " ".join([done.stdout, *(line for line in lines if not line.startswith("import time:"))])
    return " ".join(said.split()), imported


@pytest.mark.parametrize(
    ("args", "said", "slow"),
    [
        (
            ["sessions", "delete", "nope"],
            "No saved session 'nope'. List them with: travel-assistant sessions",
            SLOW + DATABASE,
        ),
        (["sessions", "show", "nope"], "No saved session 'nope'.", SLOW + DATABASE),
        (["chat", "-t", "nope"], "No saved session 'nope'.", SLOW + DATABASE),
        (["audit", "--limit", "0"], "--limit must be between 1 and 10000.", SLOW + DATABASE),
        (
            ["token", "-p", "1111 111111"],
            "No passenger with id '1111 111111' in",
            SLOW + DATABASE,
        ),
        (
            ["token", "-p", "3442 587242", "--hours", "0"],
            "--hours must be between 1/60 and 720 hours.",
            SLOW + DATABASE,
        ),
        (["eval", "--trials", "0"], "--trials must be at least 1.", SLOW + DATABASE),
        (["eval", "--scenario", "nope"], "No scenario named ['nope'].", SLOW + DATABASE),
        (
            ["eval", "--category", "nope"],
            "No category ['nope']; the categories are ['cancellation',",
            SLOW + DATABASE,
        ),
        (["serve", "--port", "0"], "--port must be between 1 and 65535.", SLOW + DATABASE),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_input_error_is_said_before_anything_slow_is_loaded(
    home: Path, args: list[str], said: str, slow: tuple[str, ...]
) -> None:
    text, imported = _refused(home, args)
    assert said in text, text
    assert not [name for name in imported if name.startswith(slow)]


def test_serve_on_a_busy_port_says_so_and_names_the_fix(home: Path, busy_port: int) -> None:
    text, imported = _refused(home, ["serve", "--port", str(busy_port)])
    assert f"port {busy_port} is in use: choose another with --port" in text
    assert "Errno" not in text and "Traceback" not in text
    assert not [name for name in imported if name.startswith(SLOW)]


def test_audit_reads_its_log_without_loading_the_conversations(home: Path) -> None:
    text, imported = _refused(home, ["audit", "--supervisor", "nobody"], code=0)
    assert "No supervisor has looked at any conversation." in text
    assert not [name for name in imported if name.startswith(SLOW)]
