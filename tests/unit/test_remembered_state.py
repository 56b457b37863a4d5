"""A run starts from the state the previous run of this process ended with.

(``conversations.remembered_state``.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from conversations.assistant import Decision, Thread, TravelAssistant
from conversations.checkpoint_serde import CompressingSerializer
from conversations.remembered_state import RememberingSqliteSaver
from conversations.store import sqlite_checkpointer
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.assistants import build_assistant
from tests.support.scripted import ScriptedChatModel, call, say


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Callable[[str], sqlite3.Connection]]:
    """Open a conversation store file by name, as a process of its own would."""
    opened: list[sqlite3.Connection] = []

    def open_store(name: str) -> sqlite3.Connection:
        opened.append(sqlite3.connect(tmp_path / name, check_same_thread=False))
        return opened[-1]

    yield open_store
    for connection in opened:
        connection.close()


def _script() -> list[AIMessage]:
    """A conversation with a tool, a hand-over, a refused write and a hand-back."""
    return [
        say("Hello."),
        say("", call("lookup_policy", {"query": "hotel cancellation"}, "c-policy")),
        say("Free until 24 hours before your stay."),
        say("", call("ToHotelBookingAssistant", {"request": "cancel my hotel"}, "c-hand")),
        say("", call("cancel_hotel", {"booking_id": 1}, "c-cancel")),
        say("", call("CompleteOrEscalate", {"cancel": True, "reason": "kept"}, "c-back")),
        say("I kept your hotel. Anything else?"),
        say("Goodbye."),
    ]


def _play(assistant: TravelAssistant, thread: Thread) -> None:
    list(assistant.send(thread, "hi"))
    list(assistant.send(thread, "can I cancel my hotel for free?"))
    list(assistant.send(thread, "then cancel it"))
    pending = assistant.pending_actions(thread)
    assert [p.name for p in pending] == ["cancel_hotel"]
    list(assistant.resolve(thread, {pending[0].tool_call_id: Decision(False, "I keep it")}))
    list(assistant.send(thread, "no, thanks"))


def _shape(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """A request without message ids (the scripted model's replies get random ones)."""
    return [
        (m.type, m.content, getattr(m, "tool_calls", None), getattr(m, "tool_call_id", None))
        for m in messages
    ]


def test_runs_started_from_the_remembered_state_send_what_runs_that_read_it_send(
    connect: Callable[[str], sqlite3.Connection], travel_db: Database
) -> None:
    thread = Thread("same", FIXTURE_PASSENGER_ID)
    reading = ScriptedChatModel(script=_script())
    plain = SqliteSaver(connect("read.sqlite"), serde=CompressingSerializer())
    _play(build_assistant(travel_db, reading, plain), thread)

    remembering = ScriptedChatModel(script=_script())
    saver = sqlite_checkpointer(connect("remembered.sqlite"))
    assert isinstance(saver, RememberingSqliteSaver)
    assistant = build_assistant(travel_db, remembering, saver)
    _play(assistant, thread)

    # Every run after the first started from memory (four messages and a decision).
    assert saver.remembered_reads == 4
    assert [_shape(r) for r in remembering.received] == [_shape(r) for r in reading.received]
    fresh = build_assistant(travel_db, ScriptedChatModel(script=[]), plain)
    assert _shape(assistant.messages(thread)) == _shape(fresh.messages(thread))


def test_a_newer_checkpoint_from_another_process_is_read_not_remembered(
    connect: Callable[[str], sqlite3.Connection], travel_db: Database
) -> None:
    thread = Thread("shared", FIXTURE_PASSENGER_ID)
    here_model = ScriptedChatModel(script=[say("First answer."), say("Third answer.")])
    here_saver = sqlite_checkpointer(connect("sessions.sqlite"))
    here = build_assistant(travel_db, here_model, here_saver)
    there = build_assistant(
        travel_db,
        ScriptedChatModel(script=[say("Second answer.")]),
        sqlite_checkpointer(connect("sessions.sqlite")),
    )
    list(here.send(thread, "one"))
    list(there.send(thread, "two"))  # another terminal on the same store
    list(here.send(thread, "three"))
    # The run here read the other process's turn from the store: the model saw it.
    latest = [str(m.content) for m in here_model.received[-1] if m.type in ("human", "ai")]
    assert "Second answer." in latest and any(text.endswith("two") for text in latest)
    assert here_saver.remembered_reads == 0
    assert [m.content for m in here.messages(thread)][-2:] == ["three", "Third answer."]


def test_a_remembered_state_is_a_fresh_list_for_every_read(tmp_path: Path) -> None:
    saver = RememberingSqliteSaver(sqlite3.connect(tmp_path / "s.sqlite"))
    saver.setup()
    message = HumanMessage("hi", id="h")
    saved: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}}
    saver.remember_state(saved, {"messages": [message], "user_info": "bookings"})

    first = saver.get_delta_channel_history(config=saved, channels=["messages", "user_info"])
    assert first == {
        "messages": {"seed": [message], "writes": []},
        "user_info": {"seed": "bookings", "writes": []},
    }
    first["messages"]["seed"].append(HumanMessage("changed by a run"))
    again = saver.get_delta_channel_history(config=saved, channels=["messages"])
    assert again["messages"]["seed"] == [message]
    assert saver.remembered_reads == 2

    # Another checkpoint of the thread, or a channel not remembered, is read from the store.
    other: Any = {"configurable": {**saved["configurable"], "checkpoint_id": "c0"}}
    assert (
        "seed"
        not in saver.get_delta_channel_history(config=other, channels=["messages"])["messages"]
    )
    saver.get_delta_channel_history(config=saved, channels=["messages", "dialog_state"])
    assert saver.remembered_reads == 2
