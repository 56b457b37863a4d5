"""How ``travel-assistant chat`` starts: the prompt first, the graph in the background.

The installed program in a pseudo-terminal (and, for the errors, as a plain process):
what is typed before the graph is ready is sent once it is; a problem the background
load finds (an endpoint that does not answer) is said when the first message is sent,
with the same words and exit code as when everything loaded before the prompt; and the
input errors that need no model (a conversation to resume that the store does not have
among them) are said before LangChain, LangGraph or SQLAlchemy is imported (Python's own
``-X importtime`` list of the modules a run imported).
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from conversations.store import ConversationStore
from tests.support.cli import chat_args
from tests.support.conversation_stores import scratch_conversations
from tests.support.fake_openai import FakeOpenAI, Reply, customer_text
from tests.support.terminal import PASSENGER_ID, PROGRAM, spawn

pexpect = pytest.importorskip("pexpect")

SLOW = ("langchain", "langgraph", "sqlalchemy", "openai")


def test_terminal_start_input_typed_before_the_prompt_is_sent(files: tuple[Path, Path]) -> None:
    home, db = files
    with FakeOpenAI([Reply(text="Hello, how can I help?")]) as server:
        child = spawn(server, chat_args(db, PASSENGER_ID, home=home), color=False)
        child.send("hel")  # before the program has drawn anything
        child.expect("you>")
        child.send("lo\r")  # the graph may still be loading
        child.expect("how can I help")
        child.expect("you>")
        child.send("exit\r")
        child.expect(pexpect.EOF)
        child.close()
    assert child.exitstatus == 0
    assert len(server.requests) == 1
    assert customer_text(server.requests[0]["messages"][-1]["content"]) == "hello"


def test_terminal_start_unreachable_endpoint_is_said_at_the_first_message(
    files: tuple[Path, Path],
) -> None:
    home, db = files
    with FakeOpenAI([]) as gone:
        pass  # stopped: its port answers no more
    child = spawn(gone, chat_args(db, PASSENGER_ID, home=home), color=False)
    child.expect("you>")
    child.send("hello\r")
    child.expect(pexpect.EOF)
    child.close()
    text = " ".join(child.logfile_read.text.split())
    assert f"Cannot reach {gone.base_url}: check OPENAI_BASE_URL" in text
    assert "Traceback" not in text
    assert child.exitstatus == 2


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--passenger-id", "1111 111111"], "No passenger with id '1111 111111'"),
        (["--db", "{tmp}/missing.sqlite"], "No travel database at"),
        (["--max-tokens", "x"], "must be a positive whole number"),
        (["--thread-id", "nope"], "No saved session 'nope'. List them with: travel-assistant"),
    ],
    ids=["unknown-passenger", "missing-db", "bad-value", "unknown-conversation"],
)
def test_terminal_start_input_errors_are_said_before_anything_slow_is_imported(
    files: tuple[Path, Path], tmp_path: Path, extra: list[str], said: str
) -> None:
    home, db = files
    args = [*chat_args(db, PASSENGER_ID, home=home), *extra]
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    lines, imported = _refused(args)
    assert any(said in line for line in lines), lines
    assert not [name for name in imported if name.startswith(SLOW)]


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_terminal_start_conversation_to_resume_is_checked_before_anything_slow_is_imported(
    files: tuple[Path, Path], tmp_path: Path, engine: str
) -> None:
    # The conversations store is asked before the model client and the graph are built:
    # a conversation it does not have, or another passenger's, is said at once.
    home, db = files
    with scratch_conversations(engine, tmp_path) as where:
        with ConversationStore.open(where) as store:
            store.registry.touch("theirs", "1111 111111", datetime.now(UTC), "hello")
        for thread_id, said in (
            ("nope", "No saved session 'nope'. List them with: travel-assistant sessions"),
            ("theirs", "Session 'theirs' belongs to another passenger; start a new one"),
        ):
            args = [
                *chat_args(db, PASSENGER_ID, home=home),
                *("--conversations", where, "--thread-id", thread_id),
            ]
            lines, imported = _refused(args)
            assert any(said in line for line in lines), lines
            # A PostgreSQL URL is read with SQLAlchemy's (``locations``), as before.
            slow = [n for n in SLOW if engine == "sqlite" or n != "sqlalchemy"]
            assert not [name for name in imported if name.startswith(tuple(slow))]


def _refused(args: list[str]) -> tuple[list[str], list[str]]:
    """Run ``travel-assistant ARGS``, refused with exit code 2; return its error lines and imports.

    The imports are Python's own ``-X importtime`` list of the modules the run imported.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    env.update(OPENAI_BASE_URL="http://127.0.0.1:9/v1", PYTHONPROFILEIMPORTTIME="1")
    done = subprocess.run(
        [str(PROGRAM), *args], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    imported = [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]
    assert "cli" in imported  # the list is there
    return [line for line in lines if not line.startswith("import time:")], imported


def test_terminal_start_a_mistyped_command_names_the_nearest_one(tmp_path: Path) -> None:
    with FakeOpenAI([]) as server:
        for typed, said in (
            (["chaat"], "No command 'chaat'. Did you mean 'chat'?"),
            (
                ["sessions", "delet", "x"],
                "No command 'sessions delet'. Did you mean 'sessions delete'?",
            ),
        ):
            child = spawn(server, ["--home", str(tmp_path), *typed], color=False)
            child.expect(pexpect.EOF)
            child.close()
            text = " ".join(child.logfile_read.text.split())
            assert said in text, text
            assert "choose from" not in text and "'graph'" not in text  # not every command
            assert child.exitstatus == 2
