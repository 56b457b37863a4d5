"""Restarts lose nothing: a stopped worker finishes its turns, clients re-attach elsewhere.

A rolling deploy stops a worker with SIGTERM. The installed ``serve`` then takes no new
connection, lets the requests and the turns in flight finish within
``--graceful-timeout`` (those whose customer closed the tab too: a turn belongs to the
service) and exits 0. A client whose worker went away re-attaches to another one: it
waits while the conversation is busy, reads the history, and sends again only a message
that never arrived. Every turn is answered exactly once, and no answer is a 500.

The model is the scripted OpenAI-compatible server of ``tests.support.fake_openai``: it
answers "Answer to: <message>" after a pause, so that turns are in flight when the stop
comes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from db.fixtures import FIXTURE_PASSENGER_ID
from db.models import Passenger
from server.auth import TokenSigner
from tests.support import postgres
from tests.support.conversation_stores import require_postgres
from tests.support.fake_openai import FakeOpenAI, Reply, customer_text
from tests.support.terminal import PROGRAM
from tests.support.web import SECRET, free_port, parse_sse

pytestmark = pytest.mark.e2e  # runs the program in processes of its own

GRACEFUL = 60.0
MODEL_SECONDS = 1.0
# Customers arriving a second in the restart under load.
ARRIVALS = 10.0


def answering(count: int, seconds: float, alone: float | None = None) -> list[Any]:
    """The script of ``count`` answers, each "Answer to: <message>" after ``seconds``.

    With ``alone``, a message that says "alone" waits that long instead. (Script items
    run outside the fake server's lock, so the answers wait side by side.)
    """

    def respond(body: dict[str, Any]) -> Reply:
        last = next(m for m in reversed(body["messages"]) if m["role"] == "user")
        content = last["content"]
        if not isinstance(content, str):
            content = "".join(part.get("text", "") for part in content)
        text = customer_text(content).strip()
        time.sleep(alone if alone is not None and "alone" in text else seconds)
        return Reply(text=f"Answer to: {text}")

    return [respond] * count


class Worker:
    """One ``travel-assistant serve`` on a port of its own, restartable on the same port."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                [
                    str(PROGRAM),
                    "serve",
                    "--port",
                    str(self.port),
                    "--graceful-timeout",
                    str(GRACEFUL),
                ],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + 120
        while True:
            assert self.process is not None and self.process.poll() is None, self.said()
            try:
                if httpx.get(f"{self.url}/api/v1/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.2)

    def stop(self) -> float:
        """SIGTERM it; return the seconds it took to exit (asserting it exited 0)."""
        assert self.process is not None
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(GRACEFUL + 60)
        assert code == 0, self.said()
        return time.monotonic() - began

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def said(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def environment(
    fake: FakeOpenAI, tmp_path: Path, travel: Path, conversations: str
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
    env.update(
        OPENAI_BASE_URL=fake.base_url,
        OPENAI_API_KEY="test",
        TRAVEL_ASSISTANT_MODEL="scripted",
        TRAVEL_ASSISTANT_HOME=str(tmp_path / "home"),
        TRAVEL_ASSISTANT_SECRET=SECRET,
        TRAVEL_ASSISTANT_DB=str(travel),
        TRAVEL_ASSISTANT_CONVERSATIONS=conversations,
    )
    return env


def said_in(client: httpx.Client, url: str, conversation: str) -> list[tuple[str, str]]:
    """Return the customer's and the assistant's lines of ``conversation``, in order.

    A 503 (the database server out of connections for a moment) is asked again after its
    ``Retry-After``, as a client does.
    """
    for _ in range(10):
        answer = client.get(f"{url}/api/v1/conversations/{conversation}/messages")
        if answer.status_code != 503:
            break
        time.sleep(float(answer.headers["retry-after"]))
    assert answer.status_code == 200, answer.text
    return [(item["type"], item.get("text", "")) for item in answer.json()["items"]]


class Customer:
    """A customer who sends messages and, when their worker goes away, re-attaches.

    ``statuses`` counts every status answered to them; ``problems`` lists what no
    customer should ever see (a 500, a reply that is not the answer to their message).
    """

    def __init__(
        self, token: str, workers: list[Worker], statuses: Counter[int], problems: list[str]
    ) -> None:
        self.client = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        self.workers = workers
        self.statuses = statuses
        self.problems = problems
        self.conversation = ""

    def _count(self, answer: httpx.Response) -> None:
        self.statuses[answer.status_code] += 1
        if answer.status_code >= 500 and answer.status_code != 503:
            self.problems.append(f"{answer.request.url.path}: {answer.status_code}")

    def start(self, first: int) -> None:
        for turn in range(40):
            url = self.workers[(first + turn) % 2].url
            try:
                answer = self.client.post(f"{url}/api/v1/conversations")
            except httpx.TransportError:
                time.sleep(0.2)
                continue
            self._count(answer)
            if answer.status_code == 201:
                self.conversation = answer.json()["conversation_id"]
                return
            time.sleep(0.3)
        self.problems.append("no conversation could be started")

    def say(self, text: str, first: int) -> None:
        """Send ``text`` until it is answered: on ``first``'s worker, then wherever one is."""
        for attempt in range(60):
            url = self.workers[(first + attempt) % 2].url
            path = f"{url}/api/v1/conversations/{self.conversation}/messages"
            try:
                with self.client.stream("POST", path, json={"text": text}) as response:
                    body = response.read().decode()
                    self._count(response)
                    if response.status_code == 200:
                        events = parse_sse(body)
                        if events and events[-1].name == "done":
                            replies = [e.data["text"] for e in events if e.name == "message"]
                            if replies != [f"Answer to: {text}"]:
                                self.problems.append(f"{text!r} answered {replies!r}")
                            return
            except httpx.TransportError:
                pass  # the worker went away under the request or before it
            if self._answered_elsewhere(text):
                return
            time.sleep(0.3)
        self.problems.append(f"{text!r} was never answered")

    def _answered_elsewhere(self, text: str) -> bool:
        """Re-attach: wait while the conversation is busy; tell whether ``text`` got its answer.

        ``False`` when the message never arrived (it is sent again).
        """
        deadline = time.monotonic() + GRACEFUL + 30
        while time.monotonic() < deadline:
            for worker in self.workers:
                base = f"{worker.url}/api/v1/conversations/{self.conversation}"
                try:
                    state = self.client.get(base)
                    self._count(state)
                    if state.status_code != 200:
                        continue
                    if state.json()["busy"]:
                        break  # a turn still runs (on the worker that stops): wait for it
                    lines = said_in(self.client, worker.url, self.conversation)
                except httpx.TransportError:
                    continue
                if ("customer", text) not in lines:
                    return False
                after = lines[lines.index(("customer", text)) + 1 :]
                if after[:1] == [("assistant", f"Answer to: {text}")]:
                    return True
                self.problems.append(f"{text!r} arrived but was followed by {after[:1]!r}")
                return True
            time.sleep(0.3)
        self.problems.append(f"{text!r}: the conversation stayed busy")
        return True


@pytest.fixture
def travel(built_db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "travel.sqlite"
    shutil.copyfile(built_db, copy)
    return copy


@pytest.fixture
def conversations() -> Iterator[str]:
    require_postgres()
    with postgres.scratch_database() as url:
        yield url


def passengers(travel: Path, count: int) -> list[str]:
    from sqlalchemy import select

    from db.engine import Database

    database = Database.from_url(str(travel))
    try:
        with database.session() as session:
            found = list(session.scalars(select(Passenger.passenger_id).limit(count)))
    finally:
        database.dispose()
    assert len(found) == count
    return found


def test_a_sigterm_lets_every_turn_in_flight_finish_and_saves_each_reply_once(
    travel: Path, conversations: str, tmp_path: Path
) -> None:
    """Twenty turns in flight, half of them with no client any more: SIGTERM loses none.

    The turns whose customer left take longer than those still streamed, so they are
    still running when the last stream has ended and the server has no request left.
    """
    with FakeOpenAI(answering(20, 1.0, alone=5.0), strict=False) as fake:
        worker = Worker(environment(fake, tmp_path, travel, conversations), tmp_path / "w.log")
        worker.start()
        try:
            worker.wait_healthy()
            signer = TokenSigner(SECRET)
            headers = {"Authorization": f"Bearer {signer.issue(FIXTURE_PASSENGER_ID)}"}
            with httpx.Client(base_url=worker.url, headers=headers, timeout=60) as client:
                ids = [
                    client.post("/api/v1/conversations").json()["conversation_id"]
                    for _ in range(20)
                ]
            streams: list[str] = []
            taken = threading.Barrier(21)
            texts = [f"message {i}" + (" alone" if i % 2 else "") for i in range(20)]

            def talk(index: int) -> None:
                path = f"{worker.url}/api/v1/conversations/{ids[index]}/messages"
                with (
                    httpx.Client(headers=headers, timeout=GRACEFUL + 30) as http,
                    http.stream("POST", path, json={"text": texts[index]}) as response,
                ):
                    assert response.status_code == 200
                    lines = response.iter_lines()
                    assert next(lines) == ": accepted"  # the turn is taken
                    taken.wait(120)
                    if index % 2:
                        return  # the customer closed the tab: the turn goes on alone
                    streams.append("\n".join([*lines]))

            with ThreadPoolExecutor(20) as pool:
                talking = [pool.submit(talk, i) for i in range(20)]
                taken.wait(120)
                took = worker.stop()
                for future in talking:
                    future.result()
            assert took < GRACEFUL, took  # every turn ended well before the graceful time
            assert len(streams) == 10 and all("event: done" in s for s in streams)
            worker.start()
            worker.wait_healthy()
            with httpx.Client(headers=headers, timeout=60) as client:
                for index, conversation in enumerate(ids):
                    assert said_in(client, worker.url, conversation) == [
                        ("customer", texts[index]),
                        ("assistant", f"Answer to: {texts[index]}"),
                    ]
        finally:
            worker.kill()
    assert len(fake.requests) == 20  # each turn asked the model once: none ran twice


def test_two_postgres_workers_one_restarted_under_100_customers_answer_every_turn_once(
    travel: Path, conversations: str, tmp_path: Path
) -> None:
    turns = 2
    with FakeOpenAI(answering(100 * turns, MODEL_SECONDS), strict=False) as fake:
        env = environment(fake, tmp_path, travel, conversations)
        workers = [Worker(env, tmp_path / "a.log"), Worker(env, tmp_path / "b.log")]
        for worker in workers:
            worker.start()
        try:
            for worker in workers:
                worker.wait_healthy()
            signer = TokenSigner(SECRET)
            statuses: Counter[int] = Counter()
            problems: list[str] = []
            customers = [
                Customer(signer.issue(passenger), workers, statuses, problems)
                for passenger in passengers(travel, 100)
            ]
            restarted = threading.Event()
            stop_took: list[float] = []

            began = time.monotonic()

            def converse(index: int) -> None:
                # Ten customers arrive a second: about twenty turns are in flight at once.
                # (Each holds its conversation's lock on a PostgreSQL connection of its
                # own, and the server takes 100 connections; a hundred turns at once on
                # a shared server would be refused there, as 503s.)
                time.sleep(max(began + index / ARRIVALS - time.monotonic(), 0))
                customer = customers[index]
                customer.start(index)
                for turn in range(turns):
                    customer.say(f"customer {index} turn {turn}", index + turn)

            def restart() -> None:
                fake.wait_for_requests(60, timeout=240)  # a good part of the turns are on
                stop_took.append(workers[0].stop())
                workers[0].start()
                workers[0].wait_healthy()
                restarted.set()

            with ThreadPoolExecutor(101) as pool:
                restarting = pool.submit(restart)
                talking = [pool.submit(converse, i) for i in range(100)]
                for future in talking:
                    future.result()
                restarting.result()
            assert restarted.is_set() and stop_took[0] < GRACEFUL, stop_took
            assert not problems, (problems[:5], statuses)
            assert statuses[500] == 0, statuses
            with httpx.Client(timeout=60) as reader:
                for index, customer in enumerate(customers):
                    reader.headers["Authorization"] = customer.client.headers["Authorization"]
                    lines = said_in(reader, workers[1].url, customer.conversation)
                    expected = []
                    for turn in range(turns):
                        text = f"customer {index} turn {turn}"
                        expected += [("customer", text), ("assistant", f"Answer to: {text}")]
                    assert lines == expected, (index, lines)
        finally:
            for worker in workers:
                worker.kill()
            for customer in locals().get("customers", []):
                customer.client.close()
    # Each turn asked the model once: none ran twice, none was lost and run again.
    assert len(fake.requests) == 100 * turns
