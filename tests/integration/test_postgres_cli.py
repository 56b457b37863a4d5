"""Every command of the installed ``travel-assistant`` with PostgreSQL for everything (issue 14).

The travel data (``--db URL``) and the conversations (``--conversations URL``) each in a
PostgreSQL database of the test server; the model is the scripted OpenAI-compatible
server on 127.0.0.1. The module builds one travel database with ``db init --db URL``
(which creates the database on the server first) and gives each test a copy of it:

- ``chat`` in a pseudo-terminal: a flight change approved (the write lands in
  PostgreSQL), leave, resume in a new process with the printed command (which keeps both
  URLs), a cancellation declined with a reason; ``sessions`` lists the conversation,
  ``sessions delete`` removes it, and nothing was written to the home folder;
- ``serve`` twice over the same databases, as two workers: a conversation answered by
  one while the other refuses a second turn with 409, then continued on the other;
- ``graph``, ``eval`` and ``token`` accept the URL.

Skipped, saying why, when the PostgreSQL server cannot be reached.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from conversations.store import ConversationStore
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from tests.support import postgres
from tests.support.cli import run
from tests.support.conversation_stores import postgres_unreachable
from tests.support.fake_openai import FakeOpenAI, Reply, customer_text
from tests.support.flights import payments, ticket_flight
from tests.support.terminal import PROGRAM, change_script, spawn
from tests.support.workers import clean_env, stream, two_workers, workers_env

pexpect = pytest.importorskip("pexpect")

DECLINE_REASON = "I changed my mind about that"
BUSY = "busy in another window, terminal or server"


@pytest.fixture(scope="module")
def travel_template() -> Iterator[str]:
    """The name of a travel database built by ``travel-assistant db init --db URL``."""
    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(reason)
    name = f"{postgres.PREFIX}{uuid.uuid4().hex[:12]}"
    url = make_url(postgres.server_url()).set(database=name).render_as_string(hide_password=False)
    try:
        built = subprocess.run(
            [str(PROGRAM), "db", "init", "--db", url],
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert built.returncode == 0, built.stderr
        assert f"Created the PostgreSQL database {name}" in built.stderr
        assert "Done in" in built.stderr
        again = run(["db", "init", "--db", url])  # a second build must be asked for
        assert again.code == 2 and "already holds a travel database" in again.err
        assert "--force" in again.err
        yield name
    finally:
        postgres.drop_database(name)


@pytest.fixture
def stores(travel_template: str) -> Iterator[tuple[str, str]]:
    """A private copy of the travel database, and an empty conversations database."""
    with (
        postgres.scratch_database(template=travel_template) as travel,
        postgres.scratch_database() as conversations,
    ):
        yield travel, conversations


def test_postgres_cli_chat_approve_leave_resume_decline_and_sessions(
    stores: tuple[str, str], tmp_path: Path
) -> None:
    travel, conversations = stores
    home = tmp_path / "home"
    script, new_flight = change_script(travel, "I will move you to tomorrow's flight.")
    script += [
        Reply(
            text="I can cancel it.",
            tool_calls=[("cancel_ticket", {"ticket_no": FIXTURE_TICKET_NO})],
        ),
        Reply(text="All right, I have not cancelled it."),
    ]
    args = ["--db", travel, "--conversations", conversations, "--home", str(home)]
    with FakeOpenAI(script) as server:
        first = spawn(server, ["chat", "--passenger-id", FIXTURE_PASSENGER_ID, *args])
        first.expect("you>")
        first.send("Please move my flight to tomorrow\r")
        first.expect("Approve this action")
        first.send("y\r")
        first.expect("Done: your ticket")
        first.expect("you>")
        first.send("exit\r")
        first.expect(pexpect.EOF)
        first.close()
        assert first.exitstatus == 0
        assert ticket_flight(travel) == new_flight
        text = first.logfile_read.text
        command = shlex.split(text.split("Resume it with: ")[1].splitlines()[0])
        assert command[command.index("--db") + 1] == travel
        assert command[command.index("--conversations") + 1] == conversations
        thread = command[command.index("--thread-id") + 1]

        second = spawn(server, command[1:])  # the printed command, in a new process
        second.expect(f"Resuming session {thread}")
        second.expect("Please move my flight to tomorrow")  # the last exchange
        second.expect("you>")
        second.send("Cancel my ticket please\r")
        second.expect("Approve this action")
        second.send("n\r")
        second.expect("Why not")
        second.send(f"{DECLINE_REASON}\r")
        second.expect("I have not cancelled it")
        second.expect("you>")
        second.send("exit\r")
        second.expect(pexpect.EOF)
        second.close()
        assert second.exitstatus == 0
    assert ticket_flight(travel) == new_flight  # still there
    last = server.requests[-1]["messages"]
    assert any(m["role"] == "tool" and DECLINE_REASON in str(m["content"]) for m in last)
    assert [customer_text(m["content"]) for m in last if m["role"] == "user"] == [
        "Please move my flight to tomorrow",
        "Cancel my ticket please",
    ]

    listed = subprocess.run(
        [str(PROGRAM), "sessions", "--passenger-id", FIXTURE_PASSENGER_ID, *args],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if thread in line]
    assert " 2 " in row and "Please move my flight" in row
    assert not (home / "sessions.sqlite").exists()

    deleted = run(["sessions", "delete", thread, *args])
    assert deleted.code == 0, deleted.err
    assert run(["sessions", *args]).out.strip() == "No saved sessions."
    with ConversationStore.open(conversations) as store:
        assert store.saver.get_tuple({"configurable": {"thread_id": thread}}) is None


def test_postgres_cli_two_service_workers_take_turns(
    stores: tuple[str, str], tmp_path: Path
) -> None:
    travel, conversations = stores
    first_may_end = threading.Event()

    def held(body: dict[str, Any]) -> Reply:
        first_may_end.wait(timeout=60)
        return Reply(text="First answer.")

    with FakeOpenAI([held, Reply(text="Second answer.")]) as fake:
        env = workers_env(fake, tmp_path, travel, conversations)
        try:
            with two_workers(env) as workers:
                one, other = workers.one, workers.other
                base = workers.new_conversation()
                answered: list[Any] = []
                turn = threading.Thread(
                    target=lambda: answered.extend(stream(one, f"{base}/messages", {"text": "hi"}))
                )
                turn.start()
                deadline = time.monotonic() + 30
                while not fake.requests:  # the first worker's turn is running
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                refused = other.post(f"{base}/messages", json={"text": "hello?"})
                assert refused.status_code == 409, refused.text
                assert BUSY in refused.json()["detail"]
                assert other.get(base).json()["busy"] is True
                first_may_end.set()
                turn.join(timeout=60)
                assert [e.data["text"] for e in answered if e.name == "message"] == [
                    "First answer."
                ]

                events = stream(other, f"{base}/messages", {"text": "and now?"})
                assert [e.data["text"] for e in events if e.name == "message"] == ["Second answer."]
                items = one.get(f"{base}/messages").json()["items"]
                for worker in workers.processes:  # a clean stop
                    worker.send_signal(signal.SIGINT)
                for worker in workers.processes:
                    assert worker.wait(timeout=60) == 0
            assert [(i["type"], i.get("text")) for i in items] == [
                ("customer", "hi"),
                ("assistant", "First answer."),
                ("customer", "and now?"),
                ("assistant", "Second answer."),
            ]
            assert len(fake.requests) == 2  # the refused message never reached the model
        finally:
            first_may_end.set()


def test_postgres_cli_graph_and_eval_accept_the_url(
    stores: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    travel, conversations = stores
    drawn = run(["graph", "--db", travel, "--conversations", conversations])
    assert drawn.code == 0, drawn.err
    assert "fetch_user_info" in drawn.out
    # eval runs every trial on its own copy of the scenario data (the trials themselves
    # are tested in test_eval_cli.py); the URL is checked and said to be left alone.
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    listed = run(
        ["--home", str(tmp_path), "eval", "--db", travel, "--list", "--category", "policy"]
    )
    assert listed.code == 0, listed.err
    assert "policy_24_hour_cancel" in listed.out
    assert "is neither read nor changed" in listed.err

    # A real trial: its databases are made on the PostgreSQL server and dropped after.
    script = [
        Reply(tool_calls=[("lookup_policy", {"query": "cancel within 24 hours of booking"})]),
        Reply(text="Yes: within 24 hours of booking you can cancel without a fee."),
        Reply(text="###STOP###"),  # the simulated customer is satisfied
    ]
    before = _databases_like(travel)
    with FakeOpenAI(script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        ran = run(
            ["--home", str(tmp_path), "eval", "--db", travel, "--scenario", "policy_24_hour_cancel"]
        )
    assert ran.code == 0, ran.err
    assert "on its PostgreSQL server" in ran.err
    assert "policy_24_hour_cancel trial 1: pass" in ran.err
    assert len(fake.requests) == 3
    assert _databases_like(travel) == before  # the template and the copies are gone


def _databases_like(url: str) -> list[str]:
    """Return the databases on the server whose names start with ``url``'s database."""
    import psycopg

    name = make_url(url).database
    admin = make_url(url).set(drivername="postgresql", database="postgres")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as c:
        rows = c.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY 1", (f"{name}%",)
        ).fetchall()
    return [row[0] for row in rows]


def test_postgres_cli_approval_on_another_worker_then_that_worker_killed_mid_turn(
    stores: tuple[str, str], tmp_path: Path
) -> None:
    # A message on one worker, its approval on the other; the second worker is killed
    # (SIGKILL) after the change committed, while the model writes the reply. The first
    # worker then carries the conversation on: the change happened once, was charged
    # once, and nothing is asked again.
    travel, conversations = stores
    script, new_flight = change_script(travel, "I'll move you to tomorrow's flight.")
    reply_started = threading.Event()
    never = threading.Event()

    def hangs(body: dict[str, Any]) -> Reply:
        reply_started.set()
        never.wait(timeout=120)
        return Reply(text="Too late.")

    charges_before = payments(travel)
    with FakeOpenAI([*script[:2], hangs, Reply(text="Yes: your flight is changed.")]) as fake:
        env = workers_env(fake, tmp_path, travel, conversations)
        try:
            with two_workers(env) as workers:
                one, other = workers.one, workers.other
                base = workers.new_conversation()
                events = stream(one, f"{base}/messages", {"text": "Move me to tomorrow."})
                assert [e.name for e in events][-2:] == ["pending", "done"]
                (action,) = other.get(f"{base}/pending").json()["actions"]
                cut_off: list[Exception] = []

                def approve_on_the_other_worker() -> None:
                    decision = {"tool_call_id": action["tool_call_id"], "approved": True}
                    try:
                        stream(other, f"{base}/decisions", {"decisions": [decision]})
                    except httpx.HTTPError as error:  # the worker dies mid-stream
                        cut_off.append(error)

                decided = threading.Thread(target=approve_on_the_other_worker, daemon=True)
                decided.start()
                assert reply_started.wait(60), "the approved change never reached the model"
                workers.processes[1].kill()  # SIGKILL while the model writes the reply
                workers.processes[1].wait(timeout=30)
                decided.join(timeout=30)
                assert cut_off, "the stream should have broken off with its worker"
                assert ticket_flight(travel) == new_flight  # the change had committed

                assert one.get(f"{base}/pending").json()["actions"] == []  # not asked again
                events = stream(one, f"{base}/messages", {"text": "Did it work?"})
                assert [e.data["text"] for e in events if e.name == "message"] == [
                    "Yes: your flight is changed."
                ]
                items = one.get(f"{base}/messages").json()["items"]
            outcomes = [i["outcome"] for i in items if i["type"] == "action"]
            assert outcomes == ["approved"]
            assert ticket_flight(travel) == new_flight
            assert payments(travel) == charges_before + 1  # charged once
            assert len(fake.requests) == 4
        finally:
            never.set()
