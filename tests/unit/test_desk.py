"""Handing a conversation to a person (issue 29): the desk's queue and the protocol around it.

The queue is checked on both engines, across two stores (two processes' worth of
connections to one file or database); the protocol with a scripted model: while a person
has the conversation the assistant is never called, what the person writes is part of the
history, and the note they leave is read by the model but never shown to the customer.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from conversations.assistant import Thread, TravelAssistant
from conversations.desk import CheckAmountDisagreesError, DeskError
from conversations.protocol import Answer, Conversation, Conversations
from conversations.records import (
    ActionRecord,
    AssistantLine,
    CustomerLine,
    Notice,
    Outcome,
    TurnEnd,
)
from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from tests.support.conversation_stores import scratch_conversations
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.terminal import PROGRAM
from tests.support.web import plan_trip
from tools.handoff import HANDOFF_TOOL

NOW = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with scratch_conversations(request.param, tmp_path) as location:
        yield location


def test_desk_queue_oldest_first_and_one_open_handoff_per_conversation(where: str) -> None:
    with ConversationStore.open(where) as first, ConversationStore.open(where) as second:
        first.desk.request("t-2", "p", by="customer", reason="late", summary="", now=NOW)
        earlier = NOW - timedelta(minutes=5)
        second.desk.request(
            "t-1", "p", by="assistant", reason="complaint", summary="s", now=earlier
        )
        # Asking again while it waits changes nothing: the first request stands.
        again = second.desk.request("t-2", "p", by="assistant", reason="other", summary="", now=NOW)
        assert (again.reason, again.requested_by) == ("late", "customer")
        assert [h.thread_id for h in first.desk.queue()] == ["t-1", "t-2"]
        assert (first.desk.position("t-1"), first.desk.position("t-2")) == (1, 2)
        assert first.desk.position("t-3") is None


def test_desk_a_conversation_is_never_held_by_two_people(where: str) -> None:
    with ConversationStore.open(where) as first, ConversationStore.open(where) as second:
        first.desk.request("t-1", "p", by="customer", reason="", summary="", now=NOW)
        results: list[str] = []
        start = threading.Barrier(2)

        def take(store: ConversationStore, agent: str) -> None:
            start.wait()
            try:
                results.append(store.desk.take("t-1", agent, NOW).agent)
            except DeskError as refused:
                results.append(f"refused: {refused}")

        threads = [
            threading.Thread(target=take, args=(first, "Ana")),
            threading.Thread(target=take, args=(second, "Ben")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        holder = first.desk.current("t-1")
        assert holder is not None and holder.status == "held"
        assert sorted(results) == sorted(
            [holder.agent, f"refused: {holder.agent} already holds conversation t-1."]
        )
        assert first.desk.queue() == []
        # Only the holder can end it; then the conversation can be handed off anew.
        other = "Ben" if holder.agent == "Ana" else "Ana"
        with pytest.raises(DeskError, match=f"{holder.agent} holds"):
            second.desk.end("t-1", other, NOW)
        ended = second.desk.end("t-1", holder.agent, NOW, note="sorted out")
        assert (ended.status, ended.note) == ("returned", "sorted out")
        assert first.desk.current("t-1") is None
        with pytest.raises(DeskError, match="not waiting"):
            first.desk.take("t-1", "Ana", NOW)
        assert first.desk.request("t-1", "p", by="customer", reason="", summary="", now=NOW).open


def test_desk_a_withdrawn_request_leaves_the_queue_but_a_held_one_stays(where: str) -> None:
    with ConversationStore.open(where) as store:
        store.desk.request("t-1", "p", by="customer", reason="", summary="", now=NOW)
        store.desk.request("t-2", "p", by="customer", reason="", summary="", now=NOW)
        store.desk.take("t-2", "Ana", NOW)
        assert store.desk.cancel("t-1", NOW)
        assert not store.desk.cancel("t-2", NOW)
        assert store.desk.current("t-1") is None
        held = store.desk.current("t-2")
        assert held is not None and held.agent == "Ana"


def test_desk_needs_a_name_the_customer_can_see() -> None:
    store = ConversationStore.in_memory()
    store.desk.request("t-1", "p", by="customer", reason="", summary="", now=NOW)
    with pytest.raises(DeskError, match="name"):
        store.desk.take("t-1", "   ", NOW)


# --- the protocol --------------------------------------------------------------------------


@pytest.fixture
def conversations(make_assistant: Callable[..., TravelAssistant]) -> Iterator[Conversations]:
    store = ConversationStore.in_memory()
    yield Conversations(make_assistant(checkpointer=store.saver), store.registry, desk=store.desk)
    store.close()


def _send(conversation: Conversation, text: str) -> list[Outcome]:
    with conversation.claim() as turn:
        return list(turn.send(text))


def test_handoff_while_a_person_holds_it_the_assistant_never_answers(
    conversations: Conversations, model: ScriptedChatModel
) -> None:
    conversation = conversations.get(Thread("t-1", FIXTURE_PASSENGER_ID))
    model.script = [say("Hello! How can I help?")]
    _send(conversation, "Hi")
    told = conversation.ask_for_person("I want to complain about my last flight")
    assert "number 1 in the queue" in told.text
    calls_before = len(model.received)
    outcomes = _send(conversation, "Are you there?")
    assert [o.text for o in outcomes if isinstance(o, Notice)] == [told.text]
    conversation.take("Ana Lima")
    outcomes = _send(conversation, "My bag was lost.")
    notices = [o.text for o in outcomes if isinstance(o, Notice)]
    assert notices == [
        "Ana Lima from our customer-service team has your conversation and will answer here."
    ]
    conversation.person_says("Ana Lima", "I am sorry. I have opened a claim for your bag.")
    assert len(model.received) == calls_before  # nobody called the model meanwhile
    history = conversation.history()
    assert [(type(r).__name__, getattr(r, "text", "")) for r in history] == [
        ("CustomerLine", "Hi"),
        ("AssistantLine", "Hello! How can I help?"),
        (
            "CustomerLine",
            "I would like to talk to a person: I want to complain about my last flight",
        ),
        ("CustomerLine", "Are you there?"),
        ("CustomerLine", "My bag was lost."),
        ("AssistantLine", "I am sorry. I have opened a claim for your bag."),
    ]
    person = history[-1]
    assert isinstance(person, AssistantLine) and person.person == "Ana Lima"
    assert isinstance(history[0], CustomerLine)
    # Handed back with a note: the assistant answers again and reads the note; the
    # customer never sees it.
    conversation.hand_back("Ana Lima", "Claim 4411 opened; the customer wants an update by mail.")
    assert conversation.handoff() is None
    model.script = [say("Anything else I can do for you?")]
    _send(conversation, "Thanks!")
    sent = model.received[-1]
    said = " ".join(str(m.content) for m in sent)
    assert "Claim 4411 opened" in said and "I have opened a claim for your bag" in said
    assert "My bag was lost." in said
    assert not any("Claim 4411" in getattr(r, "text", "") for r in conversation.history())


@pytest.mark.parametrize("note", ["Refund of the car deposit sent.", ""])
def test_after_a_hand_back_the_primary_assistant_answers_not_the_specialist_before(
    conversations: Conversations, model: ScriptedChatModel, note: str
) -> None:
    # The car-rental specialist had the conversation when the customer asked for a
    # person; after the person hands it back, a flight question goes to the primary.
    conversation = conversations.get(Thread("t-back", FIXTURE_PASSENGER_ID))
    model.script = [
        say("", call("ToBookCarRental", {"location": "Basel", "request": "a small car"})),
        say("Which dates would you like the car for?"),
    ]
    _send(conversation, "I need a car in Basel")
    assert conversation.assistant_name() == "book_car_rental"
    conversation.ask_for_person("the deposit was charged twice")
    conversation.take("Ana Lima")
    conversation.hand_back("Ana Lima", note)
    assert conversation.assistant_name() == "primary_assistant"
    model.script = [say("Your flight leaves at 09:00.")]
    outcomes = _send(conversation, "What time is my flight?")
    [line] = [o for o in outcomes if isinstance(o, AssistantLine)]
    assert line.assistant == "primary_assistant"
    sent = " ".join(str(m.content) for m in model.received[-1])
    assert (note in sent) if note else "Ana Lima" not in sent


def test_handoff_by_the_assistant_queues_it_with_the_model_s_reason(
    conversations: Conversations, model: ScriptedChatModel
) -> None:
    conversation = conversations.get(Thread("t-9", FIXTURE_PASSENGER_ID))
    model.script = [
        say("", call(HANDOFF_TOOL, {"reason": "complaint", "summary": "Lost bag on LX0112."})),
        say("A colleague from our team will answer you here shortly."),
    ]
    outcomes = _send(conversation, "This is the third time you lose my bag. I want a person.")
    notices = [o.text for o in outcomes if isinstance(o, Notice)]
    assert notices and "number 1 in the queue" in notices[-1]
    handoff = conversation.handoff()
    assert handoff is not None
    assert (handoff.requested_by, handoff.reason, handoff.summary) == (
        "assistant",
        "complaint",
        "Lost bag on LX0112.",
    )
    assert [h.thread_id for h in conversations.desk.queue()] == ["t-9"]


def test_handoff_only_the_holder_writes_and_never_two_people(
    conversations: Conversations, model: ScriptedChatModel
) -> None:
    conversation = conversations.get(Thread("t-1", FIXTURE_PASSENGER_ID))
    with pytest.raises(DeskError, match="take it first"):
        conversation.person_says("Ana", "Hello")
    conversation.ask_for_person()
    conversation.take("Ana")
    with pytest.raises(DeskError, match="Ana already holds"):
        conversation.take("Ben")
    with pytest.raises(DeskError, match="Ana holds"):
        conversation.person_says("Ben", "Hello")
    with pytest.raises(DeskError, match="Ana holds"):
        conversation.hand_back("Ben")
    assert not any(
        isinstance(m, AIMessage) and m.content == "Hello"
        for m in conversation.assistant.messages(conversation.thread)
    )


def test_desk_signals_each_change_to_another_process_on_postgresql(tmp_path: Path) -> None:
    # A reader on PostgreSQL sleeps on LISTEN and is woken by every change another
    # store makes (a process of its own would hold such a store), with nothing to read
    # while nothing happens.
    with (
        scratch_conversations("postgresql", tmp_path) as location,
        ConversationStore.open(location) as reader,
        ConversationStore.open(location) as writer,
    ):
        assert reader.desk.notifies
        listener = reader.desk.listener()
        try:
            assert listener.wait(0.2) is False  # nothing happened
            changes: list[Callable[[], object]] = [
                lambda: writer.desk.request(
                    "t-1", "p", by="customer", reason="why", summary="", now=NOW
                ),
                lambda: writer.desk.take("t-1", "Ana", NOW),
                lambda: writer.desk.bump("t-1"),
                lambda: writer.desk.end("t-1", "Ana", NOW, note="done"),
                lambda: writer.desk.ask_checks(
                    "t-1", "p", [("c1", "Book", "EUR 9", 900)], "{}", NOW
                ),
                lambda: writer.desk.decide_check(
                    writer.desk.checks_waiting()[0].id, "Ana", NOW, approved=True
                ),
                lambda: writer.desk.end_checks("t-1", "used"),
            ]
            for change in changes:
                change()
                assert listener.wait(10.0), change  # woken, not timed out
                while listener.wait(0.05):  # drain what the change said twice, if any
                    pass
        finally:
            listener.close()


def test_desk_on_sqlite_is_polled_not_signalled(tmp_path: Path) -> None:
    with ConversationStore.open(str(tmp_path / "c" / "sessions.sqlite")) as store:
        assert not store.desk.notifies
        listener = store.desk.listener()
        assert listener.connection is None and listener.wait(0.01) is False
        listener.close()


def test_a_person_proposes_an_action_the_customer_approves_and_the_assistant_stays_silent(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    conversation = conversations.get(Thread("t-7", FIXTURE_PASSENGER_ID))
    trip = plan_trip(travel_db)
    before = ticket_flight(travel_db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    with pytest.raises(DeskError, match="take it first"):
        conversation.person_proposes("Ana Lima", "update_ticket_to_new_flight", change)
    conversation.ask_for_person("move my flight please")
    conversation.take("Ana Lima")
    with pytest.raises(DeskError, match="not an action"):
        conversation.person_proposes("Ana Lima", "drop_table", {})
    with pytest.raises(DeskError, match="Not possible"):
        conversation.person_proposes(
            "Ana Lima", "update_ticket_to_new_flight", {**change, "ticket_no": "0000"}
        )
    assert conversation.approvals() == []

    approval = conversation.person_proposes("Ana Lima", "update_ticket_to_new_flight", change)
    assert approval.title == "Change flight" and approval.amount is not None
    assert conversation.approvals() == [approval]
    with pytest.raises(DeskError, match="already waits"):
        conversation.person_proposes("Ana Lima", "update_ticket_to_new_flight", change)
    model.script = []  # the assistant must not be asked anything while Ana holds it
    with conversation.claim() as turn:
        outcomes = list(turn.resolve({approval.tool_call_id: Answer(True)}))
    assert isinstance(outcomes[-1], TurnEnd) and outcomes[-1].approvals == ()
    assert ticket_flight(travel_db) == trip.new_flight_id != before
    assert model.received == []
    proposal, record = conversation.history()[-2:]
    assert isinstance(proposal, AssistantLine) and proposal.person == "Ana Lima"
    assert proposal.text == (
        "I propose this for you: Change flight. Please check it and answer yes or no."
    )
    assert isinstance(record, ActionRecord) and record.outcome == "approved"
    # Handed back, the assistant answers the next message, knowing what was done.
    conversation.hand_back("Ana Lima", "")
    model.script = [say("You are on tomorrow's flight now. Anything else?")]
    _send(conversation, "Thanks, all good?")
    told = " ".join(str(m.content) for m in model.received[-1])
    assert "held the conversation when this action was decided" in told


def test_a_person_writing_while_their_proposal_waits_leaves_it_to_the_customer(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    # The proposal stays the last thing said, still to be decided: what the person
    # writes meanwhile goes before it.
    conversation = conversations.get(Thread("t-explain", FIXTURE_PASSENGER_ID))
    trip = plan_trip(travel_db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    conversation.ask_for_person("move my flight please")
    conversation.take("Ana Lima")
    approval = conversation.person_proposes("Ana Lima", "update_ticket_to_new_flight", change)
    conversation.person_says("Ana Lima", "It is the 09:00 flight; please say yes below.")
    assert [a.tool_call_id for a in conversation.approvals()] == [approval.tool_call_id]
    said = [r.text for r in conversation.history() if isinstance(r, AssistantLine)]
    assert said[-2:] == [
        "It is the 09:00 flight; please say yes below.",
        "I propose this for you: Change flight. Please check it and answer yes or no.",
    ]
    with conversation.claim() as turn:
        list(turn.resolve({approval.tool_call_id: Answer(True)}))
    assert ticket_flight(travel_db) == trip.new_flight_id


def test_a_hand_back_while_an_action_waits_ends_it_as_not_done_and_withdraws_its_check(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    conversation = conversations.get(Thread("t-dropped", FIXTURE_PASSENGER_ID))
    trip = plan_trip(travel_db)
    before = ticket_flight(travel_db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    conversation.ask_for_person("move my flight please")
    conversation.take("Ana Lima")
    approval = conversation.person_proposes("Ana Lima", "update_ticket_to_new_flight", change)
    conversations.check_above = 1  # the customer's yes waits for a check
    with conversation.claim() as turn:
        list(turn.resolve({approval.tool_call_id: Answer(True)}))
    (check,) = conversation.checks()
    # Said before it is done, and recorded as it happened: the customer had said yes.
    assert conversation.would_end() == [
        "Change flight: the customer approved it and it waits for a staff check; it is "
        "withdrawn, not done"
    ]
    conversation.hand_back("Ana Lima", "Could not reach the airline.")
    assert conversation.approvals() == [] and conversation.checks() == []
    assert conversations.desk.check(check.id).status == "withdrawn"  # type: ignore[union-attr]
    (record,) = [r for r in conversation.history() if isinstance(r, ActionRecord)]
    assert record.outcome == "not_done"
    assert record.reason == (
        "you approved; withdrawn when customer service handed back, before the check"
    )
    model.script = [say("Your flight is unchanged. Anything else?")]
    _send(conversation, "So is my flight moved?")  # a well-formed conversation for the model
    told = " ".join(str(m.content) for m in model.received[-1])
    assert "handed the conversation back before our staff's check" in told
    assert "Could not reach the airline." in told
    assert ticket_flight(travel_db) == before


def test_a_proposal_the_customer_approved_is_never_orphaned_by_their_next_message(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    # A person proposes, the customer approves, a check waits; the customer writes
    # "hello again". The action stays in one state everywhere:
    # approved by the customer and waiting for its check; staff approve, it runs once.
    conversation = conversations.get(Thread("t-orphan", FIXTURE_PASSENGER_ID))
    trip = plan_trip(travel_db)
    before = ticket_flight(travel_db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    conversation.ask_for_person("move my flight please")
    conversation.take("Ana Lima")
    approval = conversation.person_proposes("Ana Lima", "update_ticket_to_new_flight", change)
    conversations.check_above = 1
    with conversation.claim() as turn:
        list(turn.resolve({approval.tool_call_id: Answer(True)}))
    (check,) = conversation.checks()
    with conversation.claim() as turn:
        ended = list(turn.send("hello again", if_pending="supersede"))[-1]
    assert isinstance(ended, TurnEnd) and [a.check for a in ended.approvals] == [check]
    (pending,) = conversation.approvals()
    assert pending.tool_call_id == approval.tool_call_id and pending.check == check
    assert conversations.desk.checks_waiting() == [check]
    assert not [r for r in conversation.history() if isinstance(r, ActionRecord)]
    conversation.decide_check("Bruno Costa", check.id, approved=True)
    conversation.apply_checked()
    (record,) = [r for r in conversation.history() if isinstance(r, ActionRecord)]
    assert (record.outcome, record.checked_by) == ("approved", "Bruno Costa")
    assert ticket_flight(travel_db) != before and conversation.approvals() == []


def test_a_refused_proposal_names_the_argument_and_why(conversations: Conversations) -> None:
    conversation = conversations.get(Thread("t-args", FIXTURE_PASSENGER_ID))
    conversation.ask_for_person("cancel my hotel")
    conversation.take("Ana Lima")
    propose = partial(conversation.person_proposes, "Ana Lima", "cancel_hotel")
    with pytest.raises(DeskError, match="cancel_hotel takes booking_id; hotel_id is not one"):
        propose({"hotel_id": 3})
    with pytest.raises(DeskError, match=r"takes booking_id\. booking_id: Field required"):
        propose({})
    with pytest.raises(DeskError, match="booking_id: Input should be a valid integer"):
        propose({"booking_id": "the blue one"})
    # Strictly, as the model's arguments are checked: no booleans or digits in text for
    # an id (lax parsing would take true as booking 1).
    for loose in (True, "3", 3.0):
        with pytest.raises(DeskError, match="booking_id: Input should be a valid integer"):
            propose({"booking_id": loose})
    with pytest.raises(DeskError, match=r"Not possible: .*999"):
        propose({"booking_id": 999})  # the rule's own words, which name the booking
    assert conversation.approvals() == []


def test_the_customer_may_ask_for_a_person_while_an_action_waits_and_it_ends_on_record(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> None:
    conversation = conversations.get(Thread("t-ask-now", FIXTURE_PASSENGER_ID))
    trip = plan_trip(travel_db)
    before = ticket_flight(travel_db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    model.script = [
        say("", call("ToFlightBookingAssistant", {"request": "move"})),
        say("Moving you.", call("update_ticket_to_new_flight", change)),
    ]
    _send(conversation, "Move me to tomorrow")
    assert conversation.approvals()
    notice = conversation.ask_for_person("I want to ask about the fare first")
    assert "number 1 in the queue" in notice.text
    assert conversation.approvals() == []
    (record,) = [r for r in conversation.history() if isinstance(r, ActionRecord)]
    assert record.outcome == "not_done"
    assert record.reason == "you asked for a person instead of answering"
    assert [h.thread_id for h in conversations.desk.queue()] == ["t-ask-now"]
    conversation.take("Ana Lima")
    conversation.hand_back("Ana Lima", "The fare was explained.")
    model.script = [say("Shall I move you after all?")]
    _send(conversation, "OK, thanks")  # a conversation the model can read
    told = " ".join(str(m.content) for m in model.received[-1])
    assert "asked for a person from customer service instead of deciding" in told
    assert ticket_flight(travel_db) == before


def test_the_customer_withdraws_a_request_for_a_person_and_the_assistant_answers_again(
    conversations: Conversations, model: ScriptedChatModel
) -> None:
    conversation = conversations.get(Thread("t-never-mind", FIXTURE_PASSENGER_ID))
    with pytest.raises(DeskError, match="not waiting for a person"):
        conversation.withdraw_person_request()
    conversation.ask_for_person("my bag")
    notice = conversation.withdraw_person_request()
    assert (
        notice.text == "You left the queue for a person; the assistant answers your next message."
    )
    assert conversation.handoff() is None and conversations.desk.queue() == []
    with pytest.raises(DeskError, match="not waiting for a person"):
        conversation.withdraw_person_request()
    model.script = [say("I can help with your bag.")]
    _send(conversation, "Actually, can you help me?")
    told = " ".join(str(m.content) for m in model.received[-1])
    assert "no longer waits for a person" in told  # the model knows
    shown = " ".join(getattr(r, "text", "") for r in conversation.history())
    assert "no longer waits for a person" not in shown  # the customer reads no note

    conversation.ask_for_person("my bag again")
    conversation.take("Ana Lima")
    with pytest.raises(DeskError, match="Ana Lima from our customer-service team has your"):
        conversation.withdraw_person_request()
    assert conversation.handoff() is not None


def test_one_second_approval_amount_for_every_process_on_a_store(where: str) -> None:
    with ConversationStore.open(where) as first, ConversationStore.open(where) as second:
        assert first.desk.agree_check_above(None) is None  # nothing kept: off
        assert first.desk.agree_check_above(100_000) == 100_000  # the first one keeps it
        assert second.desk.agree_check_above(None) == 100_000  # started without: uses it
        assert second.desk.agree_check_above(100_000) == 100_000
        with pytest.raises(CheckAmountDisagreesError) as refused:
            second.desk.agree_check_above(50_000)
        assert (refused.value.stored, refused.value.given) == (100_000, 50_000)
        second.desk.set_check_above(50_000)  # changed for all, on purpose
        assert first.desk.agree_check_above(None) == 50_000
        first.desk.set_check_above(None)
        assert second.desk.agree_check_above(None) is None


@pytest.mark.e2e  # runs the program in processes of its own
def test_a_process_started_with_another_amount_refuses_to_start(tmp_path: Path) -> None:
    home = tmp_path / "home"

    def run(*args: str, above: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAVEL_ASSISTANT")}
        # A model that is never asked: the chat stops before its first turn.
        env.update(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="unused")
        if above is not None:
            env["TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE"] = above
        command = [str(PROGRAM), *args, "--home", str(home)]
        return subprocess.run(
            command, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120
        )

    home.mkdir(exist_ok=True)
    with ConversationStore.open(str(home / "sessions.sqlite")) as store:
        store.desk.set_check_above(100_000)  # as a supervisor's desk second-approval keeps it
    refused = run("chat", "--passenger-id", FIXTURE_PASSENGER_ID, "--no-check", above="EUR 500")
    assert refused.returncode == 2
    assert "check actions above EUR 1,000.00" in refused.stderr
    assert "started with EUR 500.00" in refused.stderr
    assert "desk second-approval AMOUNT" in refused.stderr
    # A mistyped amount is said as the arguments are read, before any service is asked.
    bad = run("desk", "second-approval", "a lot")
    assert bad.returncode == 2 and "'a lot' is not an amount" in bad.stderr


def test_processes_opening_a_new_store_at_once_all_get_the_desk(tmp_path: Path) -> None:
    # Two terminals started together on a new home both create the desk's tables; a
    # look-then-create lost the race about two times in three (CI: "table travel_checks
    # already exists"). Threads with their own connections race the same way.
    from conversations.desk import Desk

    for round_ in range(8):
        url = f"sqlite:///{tmp_path / f'store-{round_}.sqlite'}"
        start = threading.Barrier(6)
        errors: list[Exception] = []

        def open_desk(
            url: str = url, start: threading.Barrier = start, errors: list[Exception] = errors
        ) -> None:
            start.wait()
            try:
                desk = Desk.open(url)
                desk.queue()  # the tables are there to read
                desk.engine.dispose()
            except Exception as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=open_desk) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [], errors
