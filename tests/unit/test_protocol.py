"""The conversation protocol both front ends drive (conversations.protocol).

One turn from claim to end, returned as records: the live view and the reopened history
agree, a waiting action is put first, a preview that cannot be done refuses the action
whatever the answer, and one turn at a time holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from conversations.assistant import Thread, TravelAssistant
from conversations.protocol import (
    Answer,
    Conversation,
    Conversations,
    DecisionsError,
    TurnRefusedError,
)
from conversations.records import (
    ActionRecord,
    Activity,
    AssistantLine,
    HandOver,
    Outcome,
    TurnEnd,
    TurnFailure,
)
from conversations.sessions import SessionRegistry
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FULL_FLIGHT_DAY_OFFSET
from tests.support.flights import change_call, ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say

DECLINE = "I would rather keep my seat by the window."


@pytest.fixture
def conversations(
    make_assistant: Callable[..., TravelAssistant],
) -> Iterable[Conversations]:
    import sqlite3

    connection = sqlite3.connect(":memory:", check_same_thread=False)
    yield Conversations(make_assistant(), SessionRegistry(connection))
    connection.close()


def _conversation(conversations: Conversations, name: str = "t-1") -> Conversation:
    return conversations.get(Thread(name, FIXTURE_PASSENGER_ID))


def _send(conversation: Conversation, text: str, **options: object) -> list[Outcome]:
    with conversation.claim() as turn:
        return list(turn.send(text, **options))  # type: ignore[arg-type]


def _ask_for_change(model: ScriptedChatModel, travel_db: Database, days: int = 1) -> None:
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move my flight"})),
        say("I can move you to tomorrow's flight.", change_call(travel_db, days)),
    )


def test_protocol_live_records_are_the_reopened_history(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    _ask_for_change(model, travel_db)
    conversation = _conversation(conversations)
    sent = _send(conversation, "Move me to tomorrow, please.")
    assert any(isinstance(o, HandOver) and o.text for o in sent)
    end = sent[-1]
    assert isinstance(end, TurnEnd)
    (approval,) = end.approvals
    assert approval.refusal is None and approval.amount and approval.lines[-1] == approval.amount
    model.extend(say("Fine, I left your flight as it is."))
    with conversation.claim() as turn:
        turn.check([approval.tool_call_id])
        live = list(turn.resolve({approval.tool_call_id: Answer(False, DECLINE)}))
    (record,) = [o for o in live if isinstance(o, ActionRecord)]
    assert record.outcome == "declined" and record.reason == DECLINE
    assert record.lines == approval.lines  # the preview the customer decided on
    assert DECLINE in record.line and record.line.startswith("Declined: ")
    # Reopened later, the conversation says exactly what the live turn said.
    history = conversation.history()
    assert [r for r in history if isinstance(r, ActionRecord)] == [record]
    replies = [o.text for o in live if isinstance(o, AssistantLine)]
    assert replies == ["Fine, I left your flight as it is."]
    assert replies[0] in [r.text for r in history if isinstance(r, AssistantLine)]


def test_protocol_refusal_wins_over_the_customers_yes(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    _ask_for_change(model, travel_db, FULL_FLIGHT_DAY_OFFSET)  # every Economy seat sold
    before = ticket_flight(travel_db)
    conversation = _conversation(conversations)
    end = _send(conversation, "Move me to the full flight.")[-1]
    assert isinstance(end, TurnEnd)
    (approval,) = end.approvals
    assert approval.refusal and approval.lines == () and approval.amount is None
    model.extend(say("That flight is full."))
    with conversation.claim() as turn:
        live = list(turn.resolve({approval.tool_call_id: Answer(True)}))
    (record,) = [o for o in live if isinstance(o, ActionRecord)]
    assert record.outcome == "refused" and record.reason == approval.refusal
    assert ticket_flight(travel_db) == before


def test_protocol_puts_a_waiting_action_first_or_supersedes_it(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    _ask_for_change(model, travel_db)
    conversation = _conversation(conversations)
    _send(conversation, "Move me to tomorrow, please.")
    refused = _send(conversation, "Actually, what is my seat?")
    assert isinstance(refused[-1], TurnFailure) and refused[-1].kind == "pending_first"
    assert conversation.approvals()  # nothing was sent: the action still waits
    model.extend(say("Your seat is 14E."))
    superseded = _send(conversation, "What is my seat?", if_pending="supersede")
    (record,) = [o for o in superseded if isinstance(o, ActionRecord)]
    assert record.outcome == "not_done"
    assert record.reason == "you sent a new message instead of answering"
    assert isinstance(superseded[-1], TurnEnd) and not superseded[-1].approvals


def test_protocol_one_turn_at_a_time_and_decisions_for_every_action(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    conversation = _conversation(conversations)
    with conversation.claim() as turn:
        with pytest.raises(TurnRefusedError) as busy:
            conversation.claim()
        assert busy.value.failure.kind == "busy"
        with pytest.raises(DecisionsError, match="Nothing in this conversation"):
            turn.check([])
    _ask_for_change(model, travel_db)
    end = _send(conversation, "Move me to tomorrow, please.")[-1]
    assert isinstance(end, TurnEnd)
    (approval,) = end.approvals
    with conversation.claim() as turn:
        with pytest.raises(DecisionsError, match="no decision was given"):
            turn.check([])
        with pytest.raises(DecisionsError, match="is not waiting"):
            turn.check([approval.tool_call_id, "call-unknown"])
    with conversation.claim():  # released after each refusal
        pass


def test_protocol_names_searches_in_the_customers_words(
    conversations: Conversations, model: ScriptedChatModel
) -> None:
    model.extend(
        say("", call("search_flights", {"departure_airport": "CDG"})),
        say("There are several flights."),
    )
    outcomes = _send(_conversation(conversations), "Which flights leave Paris?")
    assert Activity("searching flights", "search_flights") in outcomes
    assert isinstance(outcomes[-1], TurnEnd)


def test_protocol_an_actions_preview_is_worked_out_once_from_the_turns_end_to_its_run(
    conversations: Conversations,
    model: ScriptedChatModel,
    travel_db: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The turn's end shows the preview; the decision records that one (what the customer
    # was shown), and the node, which must show a request before it reads the answer,
    # takes it instead of working the same one out again.
    import importlib

    import assistants.approvals

    protocol_side = importlib.import_module("conversations.assistant")
    worked_out: list[str] = []
    real = assistants.approvals.describe_action

    def counted(*args: Any, **kwargs: Any) -> Any:
        preview = real(*args, **kwargs)
        worked_out.append(preview.title)
        return preview

    monkeypatch.setattr(assistants.approvals, "describe_action", counted)
    monkeypatch.setattr(protocol_side, "describe_action", counted)
    _ask_for_change(model, travel_db)
    conversation = _conversation(conversations)
    (approval,) = _send(conversation, "Move me to tomorrow, please.")[-1].approvals  # type: ignore[union-attr]
    assert len(worked_out) == 1  # the turn's end showed the card
    assert conversation.approvals() == [approval]  # a front end's read: the same state
    model.extend(say("You fly tomorrow."))
    with conversation.claim() as turn:
        live = list(turn.resolve({approval.tool_call_id: Answer(True)}))
    (record,) = [o for o in live if isinstance(o, ActionRecord)]
    assert record.outcome == "approved" and record.lines == approval.lines
    assert len(worked_out) == 1


def test_handed_previews_are_taken_once_and_only_while_recent() -> None:
    from assistants.approvals import ActionPreview, HandedPreviews

    preview = ActionPreview(tool_name="cancel_ticket", title="Cancel", lines=["a -> b"])
    handed = HandedPreviews(seconds=60)
    handed.give("t-1", "call-1", preview)
    assert handed.take("t-1", "call-2") is None and handed.take("t-2", "call-1") is None
    assert handed.take("t-1", "call-1") is preview
    assert handed.take("t-1", "call-1") is None
    stale = HandedPreviews(seconds=0)
    stale.give("t-1", "call-1", preview)
    assert stale.take("t-1", "call-1") is None
