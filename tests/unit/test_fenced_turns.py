"""Fenced turns (conversations.fences): a turn that lost its claim can no longer write.

Two stores over one location stand for two workers. The second takes the conversation
while the first is still in its turn (as it can once the first one's lock is lost: see
tests/integration/test_fenced_workers.py for the real losses); the first turn is then
stopped at its next save and says so, nothing of it after that point is saved, and the
conversation goes on with the second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from conversations import words
from conversations.assistant import Thread, TravelAssistant
from conversations.fences import FencedTurnLocks, TurnClaimLostError
from conversations.protocol import Conversations
from conversations.records import AssistantLine, CustomerLine, Notice, TurnEnd, TurnFailure
from conversations.store import ConversationStore
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.conversation_stores import scratch_conversations
from tests.support.scripted import ScriptedChatModel, say

THREAD = Thread("t-fenced", FIXTURE_PASSENGER_ID)


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with scratch_conversations(request.param, tmp_path) as where:
        yield where


def _claim_elsewhere(store: ConversationStore, thread_id: str) -> int:
    """Take a claim on ``thread_id`` as another worker's turn would."""
    locks = store.locks
    assert isinstance(locks, FencedTurnLocks)
    claim: int = locks.claims(thread_id)
    return claim


def _texts(records: list[Any]) -> list[tuple[str, str]]:
    shown = []
    for record in records:
        if isinstance(record, CustomerLine | AssistantLine):
            shown.append((type(record).__name__, record.text))
    return shown


def test_a_turn_claimed_since_is_stopped_at_its_next_save_and_saves_nothing_more(
    location: str, make_assistant: Callable[..., TravelAssistant]
) -> None:
    with ConversationStore.open(location) as first, ConversationStore.open(location) as second:

        def taken_over_while_answering(messages: list[BaseMessage]) -> AIMessage:
            _claim_elsewhere(second, THREAD.thread_id)  # the other worker takes it now
            return say("An answer nobody will keep.")

        model = ScriptedChatModel(script=[taken_over_while_answering])
        here = Conversations(
            make_assistant(model=model, checkpointer=first.saver), first.registry, first.locks
        )
        with here.get(THREAD).claim() as turn:
            outcomes = list(turn.send("Which flight am I on?"))
        failure = outcomes[-1]
        assert isinstance(failure, TurnFailure), outcomes
        assert failure.kind == "lost_claim"
        assert failure.text == words.LOST_CLAIM
        # Its words were streamed as they came, but the turn never gives them as a
        # finished reply: the front end shows the failure instead.
        assert not any(isinstance(o, TurnEnd | AssistantLine) for o in outcomes)

        # The other worker reads the conversation: the customer's message (saved before
        # the claim was lost) and no trace of the answer the stopped turn produced.
        model_there = ScriptedChatModel(script=[say("You are on LX0112.")])
        there = Conversations(
            make_assistant(model=model_there, checkpointer=second.saver),
            second.registry,
            second.locks,
        )
        conversation = there.get(THREAD)
        assert "An answer nobody will keep." not in str(conversation.history())
        with conversation.claim() as turn:
            outcomes = list(turn.send("Hello?"))
        assert isinstance(outcomes[0], Notice)  # the stopped turn is closed first
        assert isinstance(outcomes[-1], TurnEnd), outcomes
        assert _texts(there.get(THREAD).history()) == [
            ("CustomerLine", "Which flight am I on?"),
            ("CustomerLine", "Hello?"),
            ("AssistantLine", "You are on LX0112."),
        ]


def test_the_fence_checks_every_write_of_the_claimed_thread_only(location: str) -> None:
    with ConversationStore.open(location) as first, ConversationStore.open(location) as second:
        saver = first.saver
        lease = first.acquire(THREAD.thread_id)
        try:
            config = {"configurable": {"thread_id": THREAD.thread_id, "checkpoint_ns": ""}}
            checkpoint = {
                "v": 1,
                "id": "1f000000-0000-6000-8000-000000000001",
                "ts": "2026-11-25T00:00:00+00:00",
                "channel_values": {},
                "channel_versions": {},
                "versions_seen": {},
            }
            saved = saver.put(config, checkpoint, {}, {})  # type: ignore[arg-type]
            saver.put_writes(saved, [("x", 1)], "task-1")
            _claim_elsewhere(second, THREAD.thread_id)
            later = {**checkpoint, "id": "1f000000-0000-6000-8000-000000000002"}
            with pytest.raises(TurnClaimLostError):
                saver.put(saved, later, {}, {})  # type: ignore[arg-type]
            with pytest.raises(TurnClaimLostError):
                saver.put_writes(saved, [("x", 2)], "task-2")
            stored = second.saver.get_tuple(config)  # type: ignore[arg-type]
            assert stored is not None
            assert stored.checkpoint["id"] == checkpoint["id"]  # the refused one is not there
            assert [(w[1], w[2]) for w in stored.pending_writes or []] == [("x", 1)]

            # Another conversation, not claimed by this turn, is written as before.
            other = {"configurable": {"thread_id": "t-other", "checkpoint_ns": ""}}
            saver.put(other, checkpoint, {}, {})  # type: ignore[arg-type]
        finally:
            lease.release()
        # Once the turn has let go, its saver no longer checks that conversation.
        saver.put(saved, later, {}, {})  # type: ignore[arg-type]


def test_postgres_a_new_claim_waits_for_a_save_in_flight(tmp_path: Path) -> None:
    # The claim's update must wait for a save that holds the row: the new turn then
    # reads the conversation after that save, and every later save of the old turn fails.
    with scratch_conversations("postgresql", tmp_path) as url, ConversationStore.open(url) as store:
        import psycopg

        from tests.support.postgres import _libpq

        first = _claim_elsewhere(store, THREAD.thread_id)
        with psycopg.connect(_libpq(url)) as saving:  # a transaction, as a save runs in
            saving.execute(
                "SELECT claim FROM turn_claims WHERE thread_id = %s FOR SHARE", (THREAD.thread_id,)
            )
            taken: list[int] = []
            claimer = threading.Thread(
                target=lambda: taken.append(_claim_elsewhere(store, THREAD.thread_id))
            )
            claimer.start()
            time.sleep(0.5)
            assert taken == []  # still waiting for the save
            saving.commit()
        claimer.join(timeout=10)
        assert taken == [first + 1]
