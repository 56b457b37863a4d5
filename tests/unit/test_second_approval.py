"""A second approval above an amount (issue 29): the customer's yes, then a member of staff's.

With ``check_above`` set, an action the customer approved that moves more waits, with
nothing written, until a member of staff decides its check; then the customer's side goes
on with the kept answers. A staff yes runs it exactly once, and the history names both
approvals; a staff no runs nothing and the model is told the reason. A new message drops
the action and withdraws its check. Cheaper actions, and a conversation without the
setting, are not checked at all.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator

import pytest

from conversations import words
from conversations.assistant import Thread, TravelAssistant
from conversations.desk import DeskError
from conversations.protocol import (
    Answer,
    Conversation,
    Conversations,
    DecisionsError,
    PendingPolicy,
    TurnRefusedError,
)
from conversations.records import ActionRecord, Notice, Outcome, TurnEnd
from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from db.rules import parse_money
from server.service import ConversationService
from terminal import Console
from terminal.chat import ChatSession
from terminal.prompter import Prompter
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.web import FLIGHT_REQUEST, HOTEL_REQUEST, flight_then_hotel_script, plan_trip

ANA = "Ana Lima"


@pytest.fixture
def store() -> Iterator[ConversationStore]:
    opened = ConversationStore.in_memory()
    yield opened
    opened.close()


def conversations_over(
    make_assistant: Callable[..., TravelAssistant], store: ConversationStore, above: int | None
) -> Conversations:
    assistant = make_assistant(checkpointer=store.saver)
    return Conversations(assistant, store.registry, desk=store.desk, check_above=above)


def change_flight(
    conversation: Conversation, model: ScriptedChatModel, travel_db: Database
) -> TurnEnd:
    """Ask to move the fixture ticket to tomorrow: the change waits for the customer."""
    model.script = flight_then_hotel_script(plan_trip(travel_db))[:3]
    with conversation.claim() as turn:
        outcomes = list(turn.send(FLIGHT_REQUEST))
    ended = outcomes[-1]
    assert isinstance(ended, TurnEnd) and len(ended.approvals) == 1, outcomes
    return ended


def approve(conversation: Conversation, ended: TurnEnd) -> list[Outcome]:
    (action,) = ended.approvals
    with conversation.claim() as turn:
        return list(turn.resolve({action.tool_call_id: Answer(True)}))


def resume(conversation: Conversation) -> list[Outcome]:
    with conversation.claim() as turn:
        return list(turn.resume_checked())


def test_second_approval_staff_yes_runs_the_action_once_and_both_yeses_are_recorded(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    conversations = conversations_over(make_assistant, store, above=parse_money("EUR 10"))
    conversation = conversations.get(Thread("t-1", FIXTURE_PASSENGER_ID))
    before = ticket_flight(travel_db)
    ended = change_flight(conversation, model, travel_db)
    (action,) = ended.approvals
    assert action.amount is not None and action.check is None

    outcomes = approve(conversation, ended)
    told = [o.text for o in outcomes if isinstance(o, Notice)]
    assert len(told) == 1 and "moves more than EUR 10.00" in told[0]
    assert "Nothing is charged" in told[0]
    assert ticket_flight(travel_db) == before  # nothing written before the staff's yes
    waiting = outcomes[-1]
    assert isinstance(waiting, TurnEnd)
    (still,) = waiting.approvals
    assert still.check is not None and still.check.status == "waiting"
    with pytest.raises(DecisionsError, match="checks it too before it is done"):
        resume(conversation)  # too early: staff have not decided
    with conversation.claim() as turn:
        kept = list(turn.send("Hello?", if_pending="refuse"))
    # Talking while the check waits withdraws nothing: the message is kept, the check
    # still waits, and the card still says so.
    assert [o.text for o in kept if isinstance(o, Notice)] == [words.KEPT_WHILE_CHECKED]
    waiting = kept[-1]
    assert isinstance(waiting, TurnEnd)
    (still,) = waiting.approvals
    assert still.check is not None and still.check.status == "waiting"

    (check,) = store.desk.checks_waiting()
    assert (check.thread_id, check.title, check.amount) == ("t-1", action.title, action.amount)
    conversation.decide_check(ANA, check.id, approved=True)
    with pytest.raises(DeskError, match="already approved"):
        conversation.decide_check("Bruno", check.id, approved=False, reason="no")
    assert store.desk.checks_waiting() == []

    outcomes = resume(conversation)
    assert f"{ANA} of our customer-service team approved Change flight" in outcomes[0].text  # type: ignore[union-attr]
    assert ticket_flight(travel_db) != before  # done now, once
    (record,) = [o for o in outcomes if isinstance(o, ActionRecord)]
    assert (record.outcome, record.checked_by) == ("approved", ANA)
    (line,) = [r for r in conversation.history() if isinstance(r, ActionRecord)]
    assert line.line.startswith(f"Approved by you and by {ANA} (customer-service check): ")
    assert conversation.approvals() == [] and conversation.checks() == []
    (ever,) = store.desk.checks_ever("t-1")  # kept, as used, with who decided it
    assert (ever.id, ever.status, ever.staff) == (check.id, "used", ANA)
    with pytest.raises(DecisionsError):
        resume(conversation)  # exactly once: nothing is left to go on with


def test_second_approval_staff_no_runs_nothing_and_the_model_hears_why(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    conversations = conversations_over(make_assistant, store, above=parse_money("10.00"))
    conversation = conversations.get(Thread("t-2", FIXTURE_PASSENGER_ID))
    before = ticket_flight(travel_db)
    approve(conversation, change_flight(conversation, model, travel_db))
    (check,) = store.desk.checks_waiting()
    conversation.decide_check(ANA, check.id, approved=False, reason="fare rules need a manager")
    model.script = [say("I am sorry: our team could not approve the change.")]
    outcomes = resume(conversation)
    assert "did not approve Change flight. Their reason: fare rules need a manager" in (
        outcomes[0].text  # type: ignore[union-attr]
    )
    assert ticket_flight(travel_db) == before
    (record,) = [o for o in outcomes if isinstance(o, ActionRecord)]
    assert (record.outcome, record.checked_by) == ("declined", ANA)
    assert record.line.startswith(f"Refused by {ANA} (customer-service check) after your yes")
    told_model = " ".join(str(m.content) for m in model.received[-1])
    assert "fare rules need a manager" in told_model and ANA in told_model


@pytest.mark.parametrize("if_pending", ["refuse", "supersede"])
def test_second_approval_a_message_keeps_the_check_and_only_a_withdrawal_ends_it(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
    if_pending: PendingPolicy,
) -> None:
    # Whatever the front end asks for, talking while staff check what the customer
    # approved leaves the action and its check as they are; withdrawing is its own act,
    # recorded as such, and staff can no longer approve it then.
    conversations = conversations_over(make_assistant, store, above=parse_money("10"))
    conversation = conversations.get(Thread("t-3", FIXTURE_PASSENGER_ID))
    before = ticket_flight(travel_db)
    approve(conversation, change_flight(conversation, model, travel_db))
    (check,) = store.desk.checks_waiting()
    with conversation.claim() as turn:
        kept = list(turn.send("Thank you, I will wait.", if_pending=if_pending))
    ended = kept[-1]
    assert isinstance(ended, TurnEnd) and [a.check for a in ended.approvals] == [check], kept
    assert store.desk.checks_waiting() == [check]
    assert [a.check for a in conversation.approvals()] == [check]  # GET .../pending says so

    told = conversation.withdraw_actions()
    assert told.text == "Withdrawn: Change flight. Nothing was done or charged."
    assert store.desk.checks_waiting() == [] and conversation.approvals() == []
    assert [c.status for c in store.desk.checks_ever("t-3")] == ["withdrawn"]
    with pytest.raises(DeskError):
        conversation.decide_check(ANA, check.id, approved=True)
    (record,) = [r for r in conversation.history() if isinstance(r, ActionRecord)]
    assert (record.outcome, record.reason) == ("not_done", "you withdrew it")
    with pytest.raises(DecisionsError, match="nothing to withdraw"):
        conversation.withdraw_actions()
    model.script = [say("Your flight stays as it is.")]
    with conversation.claim() as turn:
        list(turn.send("So what now?"))
    told_model = " ".join(str(m.content) for m in model.received[-1])
    assert "Thank you, I will wait." in told_model
    assert "the customer withdrew this action" in told_model
    assert ticket_flight(travel_db) == before


@pytest.mark.parametrize("above", [None, "EUR 100000"])
def test_second_approval_is_not_asked_when_off_or_below_the_amount(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
    above: str | None,
) -> None:
    threshold = parse_money(above) if above is not None else None
    conversations = conversations_over(make_assistant, store, above=threshold)
    conversation = conversations.get(Thread("t-4", FIXTURE_PASSENGER_ID))
    before = ticket_flight(travel_db)
    outcomes = approve(conversation, change_flight(conversation, model, travel_db))
    assert ticket_flight(travel_db) != before
    assert not any(isinstance(o, Notice) and "checks it too" in o.text for o in outcomes)
    assert store.desk.checks_waiting() == []


@pytest.mark.parametrize(
    ("text", "cents"),
    [("EUR 1000", 100000), ("1,000.50", 100050), ("eur 0.5", 50), ("12", 1200)],
)
def test_parse_money_reads_amounts_in_the_company_currency(text: str, cents: int) -> None:
    assert parse_money(text) == cents


@pytest.mark.parametrize("text", ["USD 1000", "1000 EUR", "1.234", "-5", "", "EUR", "ten"])
def test_parse_money_refuses_anything_else_clearly(text: str) -> None:
    with pytest.raises(ValueError, match="an amount in EUR"):
        parse_money(text)


@pytest.mark.parametrize(("offset", "checked"), [(0, False), (-1, True)])
def test_second_approval_starts_one_cent_above_the_amount(
    make_assistant: Callable[..., TravelAssistant],
    model: ScriptedChatModel,
    travel_db: Database,
    offset: int,
    checked: bool,
) -> None:
    # Find the change's amount, then set the threshold at it (not checked: "more than")
    # and a cent below it (checked).
    with ConversationStore.in_memory() as probe:
        first = conversations_over(make_assistant, probe, above=None)
        ended = change_flight(first.get(Thread("probe", FIXTURE_PASSENGER_ID)), model, travel_db)
    (action,) = ended.approvals
    assert action.amount is not None
    cents = parse_money(action.amount.split(": ", 1)[1])
    assert cents > 0
    with ConversationStore.in_memory() as store:
        conversations = conversations_over(make_assistant, store, above=cents + offset)
        conversation = conversations.get(Thread("t-5", FIXTURE_PASSENGER_ID))
        approve(conversation, change_flight(conversation, model, travel_db))
        assert bool(store.desk.checks_waiting()) is checked


def test_second_approval_is_never_given_by_the_member_of_staff_who_proposed_the_action(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # Four eyes: Ana proposes a flight change above the amount, the customer says yes;
    # Ana cannot give the second approval, Bruno can, and the audit log names both.
    conversations = conversations_over(make_assistant, store, above=parse_money("EUR 10"))
    conversation = conversations.get(Thread("t-eyes", FIXTURE_PASSENGER_ID))
    trip = plan_trip(travel_db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    conversation.ask_for_person("move my flight please")
    conversation.take(ANA)
    proposed = conversation.person_proposes(ANA, "update_ticket_to_new_flight", change)
    with conversation.claim() as turn:
        list(turn.resolve({proposed.tool_call_id: Answer(True)}))
    (check,) = conversation.checks()
    for decision in (True, False):
        with pytest.raises(DeskError, match="another member of staff"):
            conversation.decide_check(f"  {ANA} ", check.id, approved=decision)
    assert not conversation.checks()[0].decided
    decided = conversation.decide_check("Bruno", check.id, approved=True)
    assert decided.staff == "Bruno" and decided.approved
    resume(conversation)
    assert ticket_flight(travel_db) == trip.new_flight_id


def test_second_approval_the_customers_no_while_the_check_waits_withdraws_it(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    conversations = conversations_over(make_assistant, store, above=parse_money("EUR 10"))
    conversation = conversations.get(Thread("t-no", FIXTURE_PASSENGER_ID))
    before = ticket_flight(travel_db)
    ended = change_flight(conversation, model, travel_db)
    approve(conversation, ended)
    (check,) = conversation.checks()
    (action,) = ended.approvals
    model.extend(say("Understood, I left your flight as it was."))
    with conversation.claim() as turn:
        outcomes = list(turn.resolve({action.tool_call_id: Answer(False, "changed my mind")}))
    [record] = [o for o in outcomes if isinstance(o, ActionRecord)]
    assert record.outcome == "declined"
    assert conversation.checks() == []  # no check waits for an action that cannot run
    assert store.desk.check(check.id).status == "withdrawn"  # type: ignore[union-attr]
    with pytest.raises(DeskError, match=r"no check|not waiting"):
        conversation.decide_check(ANA, check.id, approved=True)
    assert ticket_flight(travel_db) == before


def test_second_approval_deleting_the_conversation_withdraws_its_check(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    service = ConversationService.over_store(
        make_assistant(checkpointer=store.saver), store, check_above=parse_money("EUR 10")
    )
    thread = Thread("t-gone", FIXTURE_PASSENGER_ID)
    conversation = service.conversations.get(thread)
    approve(conversation, change_flight(conversation, model, travel_db))
    (check,) = conversation.checks()
    service.delete(thread)
    assert store.desk.check(check.id).status == "withdrawn"  # type: ignore[union-attr]


def test_second_approval_the_last_decision_is_applied_once_by_whoever_gives_it(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    conversations = conversations_over(make_assistant, store, above=parse_money("EUR 10"))
    conversation = conversations.get(Thread("t-desk", FIXTURE_PASSENGER_ID))
    before = ticket_flight(travel_db)
    approve(conversation, change_flight(conversation, model, travel_db))
    (check,) = conversation.checks()
    conversation.decide_check(ANA, check.id, approved=True)
    # The customer's window is in a turn: the desk waits for it, then leaves it be.
    with conversation.claim(), pytest.raises(TurnRefusedError):
        conversation.apply_checked(wait=0.1)
    assert ticket_flight(travel_db) == before

    outcomes = conversation.apply_checked()
    (record,) = [o for o in outcomes if isinstance(o, ActionRecord)]
    assert (record.outcome, record.checked_by) == ("approved", ANA)
    assert ticket_flight(travel_db) != before
    with pytest.raises(DecisionsError):
        conversation.apply_checked()  # exactly once


@pytest.mark.parametrize("approved", [True, False], ids=["approval", "refusal"])
def test_second_approval_a_decision_whose_decider_stopped_is_applied_by_the_service(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
    approved: bool,
) -> None:
    # A refusal too: left as it is, the customer's action would wait for ever.
    service = ConversationService.over_store(
        make_assistant(checkpointer=store.saver), store, check_above=parse_money("EUR 10")
    )
    conversation = service.conversations.get(Thread("t-left", FIXTURE_PASSENGER_ID))
    before = ticket_flight(travel_db)
    approve(conversation, change_flight(conversation, model, travel_db))
    (check,) = conversation.checks()
    conversation.decide_check(ANA, check.id, approved=approved, reason="Over budget.")
    assert ticket_flight(travel_db) == before  # ... and its decider stopped here
    if not approved:
        model.script = [say("Our team did not approve the change; your flight stays.")]

    service.start_background()  # as serve does when it starts
    try:
        waited = time.monotonic()
        while store.desk.check(check.id).status != "used" and time.monotonic() - waited < 10:  # type: ignore[union-attr]
            time.sleep(0.02)
    finally:
        service.close()
    assert store.desk.check(check.id).status == "used"  # type: ignore[union-attr]
    assert (ticket_flight(travel_db) != before) is approved
    (line,) = [r for r in conversation.history() if isinstance(r, ActionRecord)]
    if approved:
        assert line.line.startswith(f"Approved by you and by {ANA} (customer-service check): ")
    else:
        assert line.outcome == "declined" and conversation.approvals() == []


def test_second_approval_a_yes_again_while_the_check_waits_runs_nothing(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # The customer says yes again (a second window, a replayed request) while staff have
    # not decided: the check still holds, also for a process started without the setting.
    here = conversations_over(make_assistant, store, above=parse_money("EUR 10"))
    unset = conversations_over(make_assistant, store, above=None)
    thread = Thread("t-again", FIXTURE_PASSENGER_ID)
    before = ticket_flight(travel_db)
    ended = change_flight(here.get(thread), model, travel_db)
    approve(here.get(thread), ended)
    for window in (here.get(thread), unset.get(thread)):
        approve(window, ended)
        assert ticket_flight(travel_db) == before
        (check,) = store.desk.checks_waiting()
        assert check.status == "waiting"
        (action,) = window.approvals()
        assert action.check is not None and action.check.id == check.id


def test_second_approval_counts_what_the_conversation_moved_since_the_last_check(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # Two actions, neither over the amount alone, together over it: the second one is
    # checked. Splitting an amount does not avoid the check.
    conversations = conversations_over(make_assistant, store, above=None)
    conversation = conversations.get(Thread("t-split", FIXTURE_PASSENGER_ID))
    script = flight_then_hotel_script(plan_trip(travel_db))
    model.script = script[:3]
    with conversation.claim() as turn:
        ended = _ended(list(turn.send(FLIGHT_REQUEST)))
    flight = _cents_of(conversation)
    conversations.check_above = flight  # at the amount: no check
    outcomes = approve(conversation, ended)
    assert not [o for o in outcomes if isinstance(o, Notice)], outcomes
    assert store.desk.checks_waiting() == []

    model.script = script[3:6]
    with conversation.claim() as turn:
        ended = _ended(list(turn.send(HOTEL_REQUEST)))
    hotel = _cents_of(conversation)
    conversations.check_above = max(flight, hotel)
    approve(conversation, ended)
    (check,) = store.desk.checks_waiting()
    assert check.title == ended.approvals[0].title


def _ended(outcomes: list[Outcome]) -> TurnEnd:
    ended = outcomes[-1]
    assert isinstance(ended, TurnEnd), outcomes
    return ended


def _cents_of(conversation: Conversation) -> int:
    ((_, preview),) = conversation.previews()
    assert preview.amount is not None and preview.amount.cents > 0
    return preview.amount.cents


def test_second_approval_in_the_terminal_a_message_is_kept_and_withdraw_drops_the_action(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # The customer can talk while our team checks what they approved: nothing is asked,
    # nothing withdrawn; /withdraw is how they drop it, and it says what it did.
    conversations = conversations_over(make_assistant, store, above=parse_money("EUR 10"))
    thread = Thread("t-choice", FIXTURE_PASSENGER_ID)
    conversation = conversations.get(thread)
    before = ticket_flight(travel_db)
    approve(conversation, change_flight(conversation, model, travel_db))
    (check,) = store.desk.checks_waiting()
    typed = iter(["Thanks, I will wait for them.", "/withdraw", "/withdraw", "exit"])
    checks_seen: list[list[object]] = []

    def read(_: str) -> str:
        checks_seen.append(list(store.desk.checks_waiting()))
        return next(typed)

    def reply(question: str) -> str:
        raise AssertionError(f"nothing is asked while staff check: {question}")

    out, err = io.StringIO(), io.StringIO()
    session = ChatSession(
        conversations,
        thread,
        Console(out=out, err=err),
        Prompter(read, reply, lambda: False, lambda f: f()),
    )
    assert session.run(resumed=False) == 0
    said = err.getvalue()
    assert words.KEPT_WHILE_CHECKED in said
    assert checks_seen[1] == [check]  # still waiting after the message
    assert "Withdrawn: Change flight. Nothing was done or charged." in said
    assert words.NOTHING_TO_WITHDRAW in said  # the second /withdraw
    assert store.desk.checks_waiting() == []
    (record,) = [r for r in conversation.history() if isinstance(r, ActionRecord)]
    assert (record.outcome, record.reason) == ("not_done", "you withdrew it")
    assert ticket_flight(travel_db) == before


def test_second_approval_a_staff_refusal_covers_nothing_of_the_running_total(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # The flight runs unchecked; the hotel takes the total over the amount and staff
    # refuse it; the same hotel proposed again still takes the total over: checked
    # again. A refusal that reset the total would let it run on no staff yes.
    conversations = conversations_over(make_assistant, store, above=None)
    conversation = conversations.get(Thread("t-refused-total", FIXTURE_PASSENGER_ID))
    script = flight_then_hotel_script(plan_trip(travel_db))
    model.script = script[:3]
    with conversation.claim() as turn:
        ended = _ended(list(turn.send(FLIGHT_REQUEST)))
    flight = _cents_of(conversation)
    approve(conversation, ended)  # no amount yet: runs
    model.script = script[3:6]
    with conversation.claim() as turn:
        ended = _ended(list(turn.send(HOTEL_REQUEST)))
    hotel = _cents_of(conversation)
    conversations.check_above = max(flight, hotel)  # either alone is within it
    approve(conversation, ended)
    (check,) = store.desk.checks_waiting()
    conversation.decide_check(ANA, check.id, approved=False, reason="Over budget.")
    hotel_call = script[5]
    (booking,) = hotel_call.tool_calls
    model.script = [say(str(hotel_call.content), call(booking["name"], booking["args"]))]
    outcomes = resume(conversation)
    again = _ended(outcomes)
    assert len(again.approvals) == 1 and again.approvals[0].check is None, outcomes
    approve(conversation, again)
    (second,) = store.desk.checks_waiting()
    assert second.id != check.id and second.title == again.approvals[0].title


@pytest.mark.parametrize(
    ("status", "checked_by", "moved"),
    [
        ("success", None, 500 + 700),  # counts on
        ("error", None, 500),  # a failed write moved nothing
        ("success", ANA, 0),  # a staff yes that ran covers everything before it
        ("error", ANA, 500),  # ... a staff yes whose write failed covers nothing
    ],
)
def test_second_approval_the_running_total_counts_what_ran_since_a_staff_yes(
    status: str, checked_by: str | None, moved: int
) -> None:
    from langchain_core.messages import ToolMessage

    from assistants.decisions import Amount
    from conversations.turns import _moved_since_check

    def ran(call_id: str, cents: int, **facts: object) -> ToolMessage:
        artifact = {"approved": True, "amount": Amount("pay", cents).as_data(), **facts}
        return ToolMessage(content="{}", tool_call_id=call_id, artifact=artifact)

    last = ran("c-2", 700, **({"checked_by": checked_by} if checked_by else {}))
    messages = [ran("c-1", 500), last.model_copy(update={"status": status})]
    assert _moved_since_check(messages) == moved


def test_second_approval_a_new_amount_applies_to_running_processes_at_their_next_decision(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # A worker started with EUR 5,000; `travel-assistant desk second-approval 'EUR 10'`
    # keeps a new amount in the store while it runs: its next decision uses it. One
    # amount for every process at every moment, not one per process.
    running = conversations_over(make_assistant, store, above=parse_money("EUR 5000"))
    conversation = running.get(Thread("t-new-amount", FIXTURE_PASSENGER_ID))
    ended = change_flight(conversation, model, travel_db)
    store.desk.set_check_above(parse_money("EUR 10"))  # what the command does
    outcomes = approve(conversation, ended)
    told = [o.text for o in outcomes if isinstance(o, Notice)]
    assert len(told) == 1 and "moves more than EUR 10.00" in told[0], outcomes
    (check,) = store.desk.checks_waiting()
    assert check.thread_id == "t-new-amount"
    started_later = conversations_over(make_assistant, store, above=None)
    assert started_later.check_above == running.check_above == parse_money("EUR 10")


def test_second_approval_asking_for_a_person_while_the_check_waits_keeps_it(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # The person sees the action the customer approved, still waiting for its check.
    conversations = conversations_over(make_assistant, store, above=parse_money("10"))
    conversation = conversations.get(Thread("t-ask", FIXTURE_PASSENGER_ID))
    approve(conversation, change_flight(conversation, model, travel_db))
    (check,) = store.desk.checks_waiting()
    conversation.ask_for_person("Is my change going through?")
    assert store.desk.checks_waiting() == [check]
    assert [a.check for a in conversation.approvals()] == [check]
    assert not [r for r in conversation.history() if isinstance(r, ActionRecord)]


def test_second_approval_a_customer_who_comes_back_sees_what_staff_decided_first(
    make_assistant: Callable[..., TravelAssistant],
    store: ConversationStore,
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    # Approved while the customer was away: the summary (the web chat's list) carries the
    # outcome, and `chat --continue` says it before anything else; once they write again
    # it is no longer news.
    conversations = conversations_over(make_assistant, store, above=parse_money("EUR 10"))
    thread = Thread("t-back", FIXTURE_PASSENGER_ID)
    conversation = conversations.get(thread)
    approve(conversation, change_flight(conversation, model, travel_db))
    assert conversation.summary().checked is None  # still waiting
    (check,) = store.desk.checks_waiting()
    conversation.decide_check(ANA, check.id, approved=True)
    conversation.apply_checked()
    news = conversation.summary().checked
    assert news is not None and news.startswith(f"Approved by you and by {ANA}")

    out, err = io.StringIO(), io.StringIO()
    typed = iter(["exit"])
    session = ChatSession(
        conversations,
        thread,
        Console(out=out, err=err),
        Prompter(lambda _: next(typed), lambda q: "n", lambda: False, lambda f: f()),
    )
    assert session.run(resumed=True) == 0
    first = err.getvalue().splitlines()[0]
    assert first == f"Since your last message, our team decided: {news}"
    model.script = [say("You are welcome.")]
    with conversation.claim() as turn:
        list(turn.send("Thanks!"))
    assert conversation.summary().checked is None
