"""How a conversation is stored: each step's writes, compressed, and replayed the same way."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from assistants.state import _with_ids, add_message_batches, update_dialog_stack
from conversations.assistant import Decision, Thread, TravelAssistant
from conversations.checkpoint_serde import CompressingSerializer
from conversations.store import sqlite_checkpointer
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.assistants import build_assistant
from tests.support.scripted import ScriptedChatModel, call, say


def test_messages_without_ids_get_the_same_ids_on_every_replay() -> None:
    first = [HumanMessage("hi"), AIMessage("hello")]
    second = [HumanMessage("again")]
    once = add_message_batches([], [first, second])
    again = add_message_batches(add_message_batches([], [first]), [second])
    assert [m.id for m in once] == [m.id for m in again]
    assert len({m.id for m in once}) == 3 and all(m.id for m in once)
    # The writes themselves are left as they were given (a replay reads them again).
    assert first[0].id is None


def test_a_removed_message_stays_removed_and_a_later_one_gets_a_fresh_id() -> None:
    kept = add_message_batches([], [[HumanMessage("hi"), AIMessage("draft")]])
    draft = kept[-1]
    after = add_message_batches(kept, [[RemoveMessage(id=str(draft.id))], [AIMessage("final")]])
    assert [m.content for m in after] == ["hi", "final"]
    assert len({m.id for m in after}) == 2


# Ids from a small pool, so that batches often reuse one: a replacement, or a removal.
_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_MESSAGE = st.one_of(
    st.builds(lambda i, t: HumanMessage(t, id=i), st.none() | _IDS, st.text(max_size=3)),
    st.builds(lambda i, t: AIMessage(t, id=i), st.none() | _IDS, st.text(max_size=3)),
    st.builds(lambda i: ToolMessage("ok", tool_call_id="c", id=i), st.none() | _IDS),
    st.builds(lambda i: AIMessageChunk("part", id=i), _IDS),
    st.builds(lambda i: RemoveMessage(id=i), _IDS),
)


def _folded(left: list[BaseMessage], batches: list[list[BaseMessage]]) -> list[BaseMessage]:
    """The reducer as it was: ``add_messages`` over each batch, ids made deterministic."""
    merged: Any = list(left)
    for batch in batches:
        merged = add_messages(merged, _with_ids(merged, batch))  # type: ignore[arg-type]
    return list(merged)


def _shape(messages: list[Any]) -> list[tuple[str, str | None, Any]]:
    return [(type(m).__name__, m.id, m.content) for m in messages]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.builds(lambda i: HumanMessage("x", id=i), _IDS), max_size=3, unique_by=lambda m: m.id
    ),
    st.lists(st.lists(_MESSAGE, max_size=4), max_size=5),
)
def test_batches_applied_give_what_add_messages_gives(
    left: list[BaseMessage], batches: list[list[BaseMessage]]
) -> None:
    # Appending the batches that only add messages is a shortcut; whatever the batches
    # hold (replacements, removals, chunks, ids repeated within a batch), the result,
    # or the error, must be exactly what folding add_messages over them gives.
    try:
        expected: list[Any] | type[BaseException] = _shape(_folded(left, batches))
    except ValueError as error:  # removing an id that is not there
        expected = type(error)
    try:
        got: list[Any] | type[BaseException] = _shape(
            add_message_batches(list(left), batches)  # type: ignore[arg-type]
        )
    except ValueError as error:
        got = type(error)
    assert got == expected


def test_a_message_without_an_id_already_in_the_state_gets_one_as_add_messages_gives() -> None:
    # add_messages gives it a random id; a shortcut that appended beside it would not.
    merged = add_message_batches([HumanMessage("x")], [[AIMessage("y", id="n")]])
    assert [m.content for m in merged] == ["x", "y"] and all(m.id for m in merged)


def test_the_serializer_compresses_large_values_and_reads_old_ones() -> None:
    serde = CompressingSerializer()
    value = {"messages": ["the same words again " * 200]}
    kind, data = serde.dumps_typed(value)
    assert kind.endswith("+zlib") and len(data) < 500
    assert serde.loads_typed((kind, data)) == value
    small = serde.dumps_typed({"a": 1})
    assert not small[0].endswith("+zlib") and serde.loads_typed(small) == {"a": 1}
    # A value stored before compression (plain msgpack) still reads.
    plain = SqliteSaver(sqlite3.connect(":memory:")).serde.dumps_typed(value)
    assert serde.loads_typed(plain) == value


class _SavedBefore(TypedDict):
    """The state as the program stored it before delta channels: whole, every step."""

    messages: Annotated[list[AnyMessage], add_messages]
    user_info: str
    dialog_state: Annotated[list[str], update_dialog_stack]


def test_a_conversation_saved_by_the_previous_layout_resumes(
    tmp_path: Path, travel_db: Database
) -> None:
    path = tmp_path / "sessions.sqlite"
    thread = Thread("older", FIXTURE_PASSENGER_ID)
    config: Any = {"configurable": {"thread_id": thread.thread_id}}
    with sqlite3.connect(path, check_same_thread=False) as connection:
        saver = SqliteSaver(connection)  # LangGraph's own serializer: nothing compressed
        saver.setup()

        def primary_assistant(state: _SavedBefore) -> dict[str, Any]:
            return {"messages": [AIMessage("Hello from before.")], "user_info": '{"name": "X"}'}

        older = (
            StateGraph(_SavedBefore)
            .add_node("primary_assistant", primary_assistant)
            .add_edge(START, "primary_assistant")
            .compile(checkpointer=saver)
        )
        older.invoke({"messages": [HumanMessage("hi", id="h-1")]}, config)

    connection = sqlite3.connect(path, check_same_thread=False)
    try:
        model = ScriptedChatModel(script=[say("Welcome back.")])
        assistant = build_assistant(travel_db, model, sqlite_checkpointer(connection))
        assert [m.content for m in assistant.messages(thread)] == ["hi", "Hello from before."]
        list(assistant.send(thread, "again"))
        assert [m.content for m in assistant.messages(thread)] == [
            "hi",
            "Hello from before.",
            "again",
            "Welcome back.",
        ]
        # The old turn reached the model, and the new message carries the bookings.
        request = [str(m.content) for m in model.received[0] if m.type == "human"]
        assert request[0].startswith("<bookings>\n") and request[0].endswith("hi")
        assert "<bookings" not in request[1]  # the same bookings are not shown twice
        assert "Elena Novak" in assistant.user_info(thread)
    finally:
        connection.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Callable[[], sqlite3.Connection]]:
    """Connections to one conversation store, each as another process would open it."""
    opened: list[sqlite3.Connection] = []

    def connect() -> sqlite3.Connection:
        opened.append(sqlite3.connect(tmp_path / "sessions.sqlite", check_same_thread=False))
        return opened[-1]

    yield connect
    for connection in opened:
        connection.close()


def assistant_on(
    connection: sqlite3.Connection, db: Database, model: ScriptedChatModel
) -> TravelAssistant:
    """An assistant over the store behind ``connection``, sharing nothing in memory."""
    return build_assistant(db, model, sqlite_checkpointer(connection))


def test_a_state_is_read_once_per_checkpoint_and_again_when_another_process_wrote(
    store: Callable[[], sqlite3.Connection], travel_db: Database
) -> None:
    thread = Thread("shared", FIXTURE_PASSENGER_ID)
    here = assistant_on(store(), travel_db, ScriptedChatModel(script=[say("First answer.")]))
    # Another terminal on the same conversation store.
    there = assistant_on(store(), travel_db, ScriptedChatModel(script=[say("Second answer.")]))
    list(here.send(thread, "one"))

    reads: list[object] = []
    replay = here.graph.get_state

    def counted(config: Any, **kwargs: Any) -> Any:
        reads.append(config)
        return replay(config, **kwargs)

    here.graph.get_state = counted  # type: ignore[method-assign]
    assert here.pending_actions(thread) == []
    assert here.active_assistant(thread) == "primary_assistant"
    assert [m.content for m in here.messages(thread)] == ["one", "First answer."]
    assert not here.interrupted(thread)
    assert reads == []  # the run left its last state: nothing to replay

    list(there.send(thread, "two"))
    assert [m.content for m in here.messages(thread)][-2:] == ["two", "Second answer."]
    assert here.active_assistant(thread) == "primary_assistant"
    assert len(reads) == 1  # read once, for two questions about the new checkpoint
    # The caller's list is its own: changing it changes nothing that is read later.
    here.messages(thread).clear()
    assert len(here.messages(thread)) == 4 and len(reads) == 1


def test_what_a_run_leaves_remembered_is_what_a_new_process_reads(
    store: Callable[[], sqlite3.Connection], travel_db: Database
) -> None:
    # After each run the assistant keeps the state of its last checkpoint as the run
    # streamed it; a new process (another assistant on its own connection, remembering
    # nothing) must read exactly the same from the store.
    thread = Thread("remembered", FIXTURE_PASSENGER_ID)
    cancel = call("cancel_hotel", {"booking_id": 1})
    model = ScriptedChatModel(
        script=[
            say("Hello."),
            say("", call("ToHotelBookingAssistant", {"request": "cancel my hotel"})),
            say("", cancel),
            say("Your hotel booking is cancelled."),
        ]
    )
    here = assistant_on(store(), travel_db, model)
    elsewhere = store()

    def same_as_a_new_process() -> None:
        fresh = assistant_on(elsewhere, travel_db, ScriptedChatModel(script=[]))
        assert here.messages(thread) == fresh.messages(thread)
        assert here.pending_actions(thread) == fresh.pending_actions(thread)
        assert here.active_assistant(thread) == fresh.active_assistant(thread)
        assert here.interrupted(thread) == fresh.interrupted(thread)
        assert here.user_info(thread) == fresh.user_info(thread)

    list(here.send(thread, "hi"))
    same_as_a_new_process()
    list(here.send(thread, "please cancel my hotel"))
    assert [p.name for p in here.pending_actions(thread)] == ["cancel_hotel"]
    same_as_a_new_process()
    list(here.resolve(thread, {str(cancel["id"]): Decision(True)}))
    assert here.pending_actions(thread) == []
    assert here.active_assistant(thread) == "book_hotel"
    same_as_a_new_process()
