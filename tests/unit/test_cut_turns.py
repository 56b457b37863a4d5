"""A turn cut short is recorded for what cut it (issue 27): never as the customer's cancel.

For each cause (a cancel by the customer, the service stopping, a model-server failure,
a time limit, a program that died mid-turn, a turn that lost its lock), through the
protocol the terminal and the service use: what the customer is told as it happens,
what the model reads in the next request, and what ``/history`` shows.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, BaseMessage

from assistants.call_limits import ModelDeadlineError
from assistants.prompts import TURN_CUT_NOTES
from conversations import words
from conversations.assistant import Thread, TravelAssistant
from conversations.events import CUT_CAUSES, cut_cause
from conversations.locks import TurnLostError
from conversations.protocol import Conversation, Conversations
from conversations.records import Notice, Outcome, TurnFailure
from conversations.sessions import SessionRegistry
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.scripted import ScriptedChatModel, say

THREAD = Thread("t-cut", FIXTURE_PASSENGER_ID)


@pytest.fixture
def conversation(
    make_assistant: Callable[..., TravelAssistant], fixed_db: Database
) -> Iterator[Conversation]:
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    assistant = make_assistant(db=fixed_db, retry_policy=None)
    yield Conversations(assistant, SessionRegistry(connection)).get(THREAD)
    connection.close()


def bad_request() -> openai.BadRequestError:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx.Response(400, request=request, text="unknown sampler 'xyz'")
    return openai.BadRequestError(
        "unknown sampler 'xyz'", response=response, body={"message": "unknown sampler 'xyz'"}
    )


def run(conversation: Conversation, **kwargs: Any) -> list[Outcome]:
    with conversation.claim() as turn:
        return list(turn.send("Move my flight to tomorrow, please.", **kwargs))


def setting(event: threading.Event, reply: AIMessage) -> Any:
    def answer(_messages: list[BaseMessage]) -> AIMessage:
        event.set()  # the cancel arrives while the model answers
        return reply

    return answer


def cut_by(cause: str, conversation: Conversation, model: ScriptedChatModel) -> Iterator[Any]:
    """Cut a turn for ``cause``; yield what the customer was told as it happened."""
    cancel = threading.Event()
    if cause in ("cancelled", "service"):
        model.extend(setting(cancel, say("I will look for")))
        outcomes = run(
            conversation,
            cancel=cancel,
            cancelled_by="customer" if cause == "cancelled" else "service",
        )
    elif cause == "model":
        model.extend(bad_request())
        outcomes = run(conversation)
    elif cause == "time_limit":
        model.extend(ModelDeadlineError(300))
        outcomes = run(conversation)
    elif cause == "lost_claim":
        # What the fenced checkpoint saver raises when another window took the lock.
        model.extend(TurnLostError("the turn lock was taken over"))
        outcomes = run(conversation)
        # The window that lost the lock writes nothing; one that may close the turn
        # with this cause records it so.
        conversation.assistant.cancel_turn(THREAD, "lost_claim")
    else:  # crash: the program died mid-turn, and a new one opens the conversation
        model.extend(RuntimeError("the process died"))
        with pytest.raises(RuntimeError):
            run(conversation)
        assert conversation.assistant.interrupted(THREAD)
        with conversation.claim() as turn:
            outcomes = [o for o in [turn.close_cut_turn()] if o is not None]
    yield from outcomes


LIVE = {
    "cancelled": ("cancelled", words.CANCELLED["customer"]),
    "service": ("cancelled", words.CANCELLED["service"]),
    "model": ("model", "unknown sampler 'xyz'"),
    "time_limit": ("time_limit", "300 s"),
    "lost_claim": ("lost_claim", words.LOST_CLAIM),
}


@pytest.mark.parametrize("cause", CUT_CAUSES)
def test_a_cut_turn_says_what_cut_it_to_the_customer_the_model_and_the_history(
    cause: str, conversation: Conversation, model: ScriptedChatModel
) -> None:
    told = list(cut_by(cause, conversation, model))

    # The customer, as it happened.
    if cause == "crash":
        assert told == [Notice(words.CUT_TURN_CLOSED)]
        assert "interrupted" not in words.CUT_TURN_CLOSED
    else:
        failure = told[-1]
        assert isinstance(failure, TurnFailure)
        kind, text = LIVE[cause]
        assert failure.kind == kind
        assert text in failure.text
    if cause != "cancelled":
        assert not any("cancel" in getattr(o, "text", "").lower() for o in told if o)

    # The model, in the conversation it reads next.
    note = conversation.assistant.messages(THREAD)[-1]
    assert cut_cause(note) == cause
    assert note.content == TURN_CUT_NOTES[cause]
    if cause != "cancelled":
        assert "the customer cancelled nothing" in str(note.content)
    model.extend(say("Sorry about that: shall I look again?"))
    with conversation.claim() as turn:
        list(turn.send("Are you there?"))
    seen = [str(m.content) for m in model.received[-1]]
    assert TURN_CUT_NOTES[cause] in seen

    # The history.
    notices = [r for r in conversation.history() if isinstance(r, Notice)]
    assert notices == [Notice(words.CUT_NOTICES[cause])]
    if cause != "cancelled":
        assert "cancel" not in words.CUT_NOTICES[cause]


def test_an_action_left_by_a_cut_turn_is_not_done_for_that_reason() -> None:
    assert words.not_done_reason("cancelled", "model") == "the model server failed during the turn"
    assert words.not_done_reason("cancelled", None) == "the turn was cancelled"
    assert words.not_done_reason("cancelled", "cancelled") == "the turn was cancelled"
