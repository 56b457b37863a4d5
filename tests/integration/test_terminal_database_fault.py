"""A database that stops answering under the terminal chat: one clear line, the prompt back.

The installed ``travel-assistant chat`` in a pseudo-terminal, its conversations on the
real PostgreSQL server (a scratch database), the model the scripted server on 127.0.0.1.
The database's connections are cut and new ones refused (``ALLOW_CONNECTIONS false``, as
a server restarting or failing over does): under a turn waiting for the model, and
before a message. Each time the program says so in one line, never a traceback, gives
the prompt back and goes on once the database answers again (issue 49). Skipped, saying
why, when the PostgreSQL server cannot be reached.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import postgres
from tests.support.cli import chat_args
from tests.support.conversation_stores import require_postgres
from tests.support.fake_openai import FakeOpenAI, Reply, Silent, customer_text
from tests.support.terminal import PASSENGER_ID, spawn

pexpect = pytest.importorskip("pexpect")

SAID = "The database stopped answering"


@pytest.fixture
def conversations_url() -> Iterator[str]:
    require_postgres()
    with postgres.scratch_database() as url:
        yield url


@contextmanager
def database_down(url: str) -> Iterator[None]:
    """Refuse new connections to the database of ``url`` and cut the ones it has."""
    import psycopg

    name = postgres.database_name(url)
    with psycopg.connect(postgres._libpq(postgres.server_url()), autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')  # type: ignore[arg-type]
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            deadline = time.monotonic() + 10
            while admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)
            ).fetchone() != (0,):
                assert time.monotonic() < deadline, "the connections are still there"
                time.sleep(0.05)
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')  # type: ignore[arg-type]


def _respond(body: dict[str, Any]) -> Reply | Silent:
    last = body["messages"][-1].get("content")
    text = customer_text(last) if isinstance(last, str) else ""
    if text == "slow":
        return Silent(Reply(text="the slow answer"), seconds=2)
    return Reply(text=f"answered {text}")


def test_terminal_database_that_stops_answering_gives_one_line_and_the_prompt_back(
    files: tuple[Path, Path], conversations_url: str
) -> None:
    home, db = files
    with FakeOpenAI(responder=_respond) as server:
        child = spawn(
            server,
            [*chat_args(db, PASSENGER_ID, home=home), "--conversations", conversations_url],
            color=False,
        )
        child.timeout = 90  # the store's pool waits for a connection before it gives up
        child.expect("you>")
        child.send("first\r")
        child.expect("answered first")
        child.expect("you>")

        # Before a message: the turn cannot even start.
        with database_down(conversations_url):
            child.send("hello\r")
            child.expect(SAID)
            child.expect("you>")
            assert child.isalive()
        child.send("again\r")
        child.expect("answered again")
        child.expect("you>")

        # Under a turn: the model answers while the database is gone.
        child.send("slow\r")
        server.wait_for_requests(3)
        with database_down(conversations_url):
            child.expect(SAID)
            child.expect("you>")
            assert child.isalive()
        child.send("once more\r")
        child.expect("answered once more")
        child.expect("you>")
        child.send("exit\r")
        child.expect(pexpect.EOF)
        child.close()
    text = child.logfile_read.text
    assert child.exitstatus == 0, text[-2000:]
    assert "Traceback" not in text and "--debug" not in text
