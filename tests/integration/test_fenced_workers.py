"""Two ``serve`` workers and a lost turn lock: never two turns committed to one conversation.

Worker 1 runs a turn whose model reply is held back; its turn lock is then lost the
ways it is lost in production: on PostgreSQL the connection holding the advisory lock
is terminated (``pg_terminate_backend``, as a failover, a network cut or
``idle_session_timeout`` would); on SQLite the lock file beside the sessions file is
removed. Worker 2 can then take the conversation and answers. When worker 1's reply
arrives, its turn is stopped at its next save (``conversations.fences``) and its
customer is told that what it said was not saved; both workers then read one history,
holding worker 2's exchange and not worker 1's reply, and the conversation goes on.

With an approval in flight (the change approved on worker 1, its reply held), the
change is made and charged once, and the history records it once.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conversations import words
from conversations.store import lock_file_of
from tests.support import postgres
from tests.support.conversation_stores import require_postgres
from tests.support.exhaustive import EXHAUSTIVE
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import payments, ticket_flight
from tests.support.terminal import change_script
from tests.support.workers import stream, two_workers, workers_env

pytestmark = pytest.mark.xdist_group("fenced-workers")


class Stores:
    """Where both workers keep the travel data and the conversations, and how a lock is lost."""

    def __init__(self, travel: str, conversations: str, lose_lock: Callable[[], None]) -> None:
        self.travel = travel
        self.conversations = conversations
        self.lose_lock = lose_lock


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, built_db: Path, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "sqlite":
        travel = tmp_path / "travel.sqlite"
        shutil.copyfile(built_db, travel)
        sessions = tmp_path / "conversations" / "sessions.sqlite"

        def remove_lock_file() -> None:
            os.unlink(lock_file_of(sessions))  # the holder's lock stays on the old file

        yield Stores(str(travel), str(sessions), remove_lock_file)
        return
    require_postgres()
    with postgres.scratch_database() as conversations:
        travel = tmp_path / "travel.sqlite"
        shutil.copyfile(built_db, travel)

        def terminate_lock_backend() -> None:
            import psycopg

            from tests.support.postgres import _libpq

            with psycopg.connect(_libpq(conversations), autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() "
                    "AND application_name LIKE 'travel-assistant turn%'"
                ).fetchall()
            assert killed == [(True,)], killed  # exactly the one turn's lock connection

        yield Stores(str(travel), conversations, terminate_lock_backend)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _items(client: httpx.Client, base: str) -> list[tuple[str, Any]]:
    items = client.get(f"{base}/messages").json()["items"]
    return [(i["type"], i["outcome"] if i["type"] == "action" else i.get("text")) for i in items]


def test_a_turn_that_lost_its_lock_saves_nothing_and_says_so(
    stores: Stores, tmp_path: Path
) -> None:
    release_first = threading.Event()

    def held(body: dict[str, Any]) -> Reply:
        release_first.wait(timeout=60)
        return Reply(text="First answer, which must not be kept.")

    script = [held, Reply(text="Second answer."), Reply(text="Third answer.")]
    with FakeOpenAI(script) as fake:
        env = workers_env(fake, tmp_path, stores.travel, stores.conversations)
        try:
            with two_workers(env) as workers:
                one, other = workers.one, workers.other
                base = workers.new_conversation()
                first_events: list[Any] = []
                first = threading.Thread(
                    target=lambda: first_events.extend(
                        stream(one, f"{base}/messages", {"text": "hi"})
                    )
                )
                first.start()
                _wait_for(lambda: len(fake.requests) == 1, "no model call from worker 1")
                stores.lose_lock()

                second = stream(other, f"{base}/messages", {"text": "hello?"})
                assert [e.data["text"] for e in second if e.name == "message"] == ["Second answer."]
                assert second[-1].name == "done"

                release_first.set()
                first.join(timeout=60)
                names = [e.name for e in first_events]
                assert names[-1] == "error", names
                assert first_events[-1].data["detail"] == words.LOST_CLAIM
                assert "message" not in names and "done" not in names

                seen = _items(one, base)
                assert seen == _items(other, base)  # one history, whichever worker reads it
                said = [text for kind, text in seen if kind in ("customer", "assistant")]
                assert said == ["hi", "hello?", "Second answer."]

                third = stream(one, f"{base}/messages", {"text": "still there?"})
                assert [e.data["text"] for e in third if e.name == "message"] == ["Third answer."]
                said = [t for k, t in _items(other, base) if k in ("customer", "assistant")]
                assert said == ["hi", "hello?", "Second answer.", "still there?", "Third answer."]
        finally:
            release_first.set()


# The SQLite case of the approval is the long tail: the plain turn covers its lock loss.
@pytest.mark.parametrize(
    "stores", [pytest.param("sqlite", marks=EXHAUSTIVE), "postgresql"], indirect=True
)
def test_an_approval_in_flight_when_the_lock_is_lost_runs_once(
    stores: Stores, tmp_path: Path
) -> None:
    script, new_flight = change_script(stores.travel, "I'll move you to tomorrow's flight.")
    reply_started = threading.Event()
    release = threading.Event()

    def held(body: dict[str, Any]) -> Reply:
        reply_started.set()
        release.wait(timeout=60)
        return Reply(text="Worker 1's reply, which must not be kept.")

    charges_before = payments(stores.travel)
    with FakeOpenAI([*script[:2], held, Reply(text="Yes: your flight is changed.")]) as fake:
        env = workers_env(fake, tmp_path, stores.travel, stores.conversations)
        try:
            with two_workers(env) as workers:
                one, other = workers.one, workers.other
                base = workers.new_conversation()
                events = stream(one, f"{base}/messages", {"text": "Move me to tomorrow."})
                assert [e.name for e in events][-2:] == ["pending", "done"]
                (action,) = events[-2].data["actions"]
                decided: list[Any] = []
                decision = {"tool_call_id": action["tool_call_id"], "approved": True}
                approving = threading.Thread(
                    target=lambda: decided.extend(
                        stream(one, f"{base}/decisions", {"decisions": [decision]})
                    )
                )
                approving.start()
                assert reply_started.wait(60), "the approved change never reached the model"
                assert ticket_flight(stores.travel) == new_flight  # the change has committed
                stores.lose_lock()

                answered = stream(other, f"{base}/messages", {"text": "Did it work?"})
                assert [e.data["text"] for e in answered if e.name == "message"] == [
                    "Yes: your flight is changed."
                ]
                release.set()
                approving.join(timeout=60)
                assert decided[-1].name == "error"
                assert decided[-1].data["detail"] == words.LOST_CLAIM

                assert other.get(f"{base}/pending").json()["actions"] == []  # not asked again
                seen = _items(one, base)
                assert seen == _items(other, base)
            assert [text for kind, text in seen if kind == "action"] == ["approved"]
            assert "Worker 1's reply, which must not be kept." not in str(seen)
            assert ticket_flight(stores.travel) == new_flight
            assert payments(stores.travel) == charges_before + 1  # charged once
        finally:
            release.set()
