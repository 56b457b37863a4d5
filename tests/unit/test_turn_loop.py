"""Turns on an event loop: waiting for the model holds no thread, sync callers still drive them."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from assistants.models import ModelSettings, build_chat_models
from conversations.assistant import Thread, TravelAssistant
from conversations.events import Cancel
from conversations.loop import iterate, run, turn_loop
from conversations.protocol import Conversations
from conversations.records import AssistantLine, TurnEnd
from conversations.sessions import SessionRegistry
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.scripted import ScriptedChatModel, say


def test_iterate_hands_each_item_only_when_asked() -> None:
    made: list[int] = []

    async def numbers() -> AsyncIterator[int]:
        for number in range(3):
            made.append(number)
            yield number

    items = iterate(numbers)
    assert made == []  # nothing runs before the first item is asked for
    assert next(items) == 0
    time.sleep(0.1)
    assert made == [0]  # the iterator waits for the caller
    assert list(items) == [1, 2]


def test_a_caller_that_stops_early_runs_the_iterators_cleanup() -> None:
    cleaned = threading.Event()

    async def forever() -> AsyncIterator[int]:
        try:
            while True:
                yield 1
                await asyncio.sleep(0)
        finally:
            await asyncio.sleep(0.05)  # the cleanup may await (a turn closes itself)
            cleaned.set()

    items = iterate(forever)
    assert next(items) == 1
    items.close()
    assert cleaned.is_set()  # close returns once the cleanup is over


def test_an_error_reaches_the_caller() -> None:
    async def failing() -> AsyncIterator[int]:
        yield 1
        raise KeyError("broken")

    with pytest.raises(KeyError, match="broken"):
        list(iterate(failing))


def test_the_sync_api_refuses_to_run_on_the_loop_it_would_wait_for() -> None:
    async def inside() -> None:
        with pytest.raises(RuntimeError, match="await its async form"):
            list(iterate(lambda: _nothing()))

    run(inside)


async def _nothing() -> AsyncIterator[int]:
    return
    yield  # pragma: no cover


def test_a_cancel_calls_back_at_once_and_a_late_callback_runs_now() -> None:
    cancel = Cancel()
    called: list[str] = []
    undo = cancel.when_set(lambda: called.append("first"))
    forgotten = cancel.when_set(lambda: called.append("forgotten"))
    forgotten()
    cancel.set_by("cancelled")
    assert called == ["first"] and cancel.cause == "cancelled"
    cancel.when_set(lambda: called.append("late"))
    assert called == ["first", "late"]
    undo()  # after the fact: nothing to undo


def test_a_callers_own_sqlite_saver_saves_a_turn(
    make_assistant: Callable[..., TravelAssistant], model: ScriptedChatModel
) -> None:
    # The tutorial's way: the caller builds LangGraph's sync SqliteSaver and passes it in.
    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    assistant = make_assistant(checkpointer=saver)
    model.extend(say("Good morning."))
    thread = Thread("t-own-saver", FIXTURE_PASSENGER_ID)
    list(assistant.send(thread, "hello"))
    assert assistant.graph.checkpointer is saver
    assert saver.get_tuple(assistant.config(thread)) is not None  # saved through it
    assert assistant.messages(thread)[-1].content == "Good morning."


WAITING_TURNS = 40
ROOT = Path(__file__).resolve().parents[2]


def test_turns_waiting_for_the_model_hold_no_thread(fixed_db: Database) -> None:
    # Forty customers' turns wait for a model that answers none of them until all forty
    # requests have arrived: the turns wait together, on one loop, and the process's
    # threads do not grow with them; then every turn ends once with its own answer.
    gate = threading.Event()

    def held(number: int) -> Callable[[dict[str, object]], Reply]:
        def answer(body: dict[str, object]) -> Reply:
            gate.wait(60)  # the fake server's request thread waits, not ours
            return Reply(text=f"Answer {number}.")

        return answer

    with FakeOpenAI([held(n) for n in range(WAITING_TURNS)], strict=False) as fake:
        settings = ModelSettings(model="m", base_url=fake.base_url, api_key="k")
        models = build_chat_models(settings)
        assistant = TravelAssistant.build(models, InMemorySaver(), db=fixed_db)
        conversations = Conversations(
            assistant, SessionRegistry(sqlite3.connect(":memory:", check_same_thread=False))
        )
        threads = [Thread(f"t-wait-{n}", FIXTURE_PASSENGER_ID) for n in range(WAITING_TURNS)]
        turns = [conversations.get(thread).claim() for thread in threads]
        ours_before = _our_threads()

        async def one(turn_index: int) -> list[object]:
            turn = turns[turn_index]
            return [o async for o in turn.asend("When do I fly?", cancel=Cancel())]

        async def all_of_them() -> tuple[list[list[object]], int]:
            running = [asyncio.ensure_future(one(n)) for n in range(WAITING_TURNS)]
            while len(fake.requests) < WAITING_TURNS:  # every turn now waits for its reply
                await asyncio.sleep(0.05)
            waiting = _our_threads()
            gate.set()
            return list(await asyncio.gather(*running)), waiting

        try:
            outcomes, waiting = run(all_of_them)
        finally:
            gate.set()
            for turn in turns:
                turn.release()
    assert waiting - ours_before <= 8, (ours_before, waiting)  # not one per turn
    ended = [o for result in outcomes for o in result if isinstance(o, TurnEnd)]
    assert len(ended) == WAITING_TURNS
    said = [o.text for result in outcomes for o in result if isinstance(o, AssistantLine)]
    assert sorted(said) == sorted(f"Answer {n}." for n in range(WAITING_TURNS))
    assert turn_loop().is_running()


def _our_threads() -> int:
    """Threads of this process, less the fake model server's (one per request)."""
    return sum(1 for t in threading.enumerate() if "process_request_thread" not in (t.name or ""))


EXITING = """
import sys
from langchain_core.messages import HumanMessage, SystemMessage
from assistants.calls import bounded
from assistants.models import ModelSettings, build_chat_models
from conversations.loop import run

settings = ModelSettings(model="m", base_url=sys.argv[1], api_key="k")
model = build_chat_models(settings)["primary_assistant"]
request = [SystemMessage("s"), HumanMessage("hi")]
print(run(lambda: bounded(model.ainvoke(request), 10)).content)
"""


def test_a_process_that_used_the_model_exits_without_leaving_its_client_open(
    tmp_path: Path,
) -> None:
    # The models' aiohttp client is closed on the turn loop as the process exits; left
    # open, aiohttp complains on stderr (what a customer leaving the chat would see).
    script = tmp_path / "exiting.py"
    script.write_text(EXITING, encoding="utf-8")
    with FakeOpenAI([Reply(text="hello")], strict=False) as fake:
        done = subprocess.run(
            [sys.executable, str(script), fake.base_url],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello"
    assert "Unclosed" not in done.stderr, done.stderr
