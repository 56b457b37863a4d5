"""How ``travel-assistant chat`` starts: the prompt first, the graph in the background.

The installed program in a pseudo-terminal (and, for the errors, as a plain process):
what is typed before the graph is ready is sent once it is; a problem the background
load finds (an endpoint that does not answer) is said when the first message is sent,
with the same words and exit code as when everything loaded before the prompt; and the
input errors that need no model are said before LangChain, LangGraph or SQLAlchemy is
imported (Python's own ``-X importtime`` list of the modules a run imported).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import chat_args
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
    ],
    ids=["unknown-passenger", "missing-db", "bad-value"],
)
def test_terminal_start_input_errors_are_said_before_anything_slow_is_imported(
    files: tuple[Path, Path], tmp_path: Path, extra: list[str], said: str
) -> None:
    home, db = files
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    env.update(OPENAI_BASE_URL="http://127.0.0.1:9/v1", PYTHONPROFILEIMPORTTIME="1")
    args = [*chat_args(db, PASSENGER_ID, home=home), *extra]
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    done = subprocess.run(
        [str(PROGRAM), *args], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert any(said in line for line in lines), done.stderr
    imported = [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]
    assert "cli" in imported  # the list is there
    assert not [name for name in imported if name.startswith(SLOW)]
