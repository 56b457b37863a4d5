"""The judge's checks of what people do between the customer's turns, on hand-built runs.

A scenario scripts, beside the customer's messages, the steps of the people at the desk
(a turn's ``desk``: ask for a person, withdraw the request, take, write, propose, decide
a check, hand back), which assistant answers a message (``answered_by``), how every
action put to the customer ends (``action_ends``) and how the hand-off ends
(``[handoff] ends``). The judge must fail a run where the expected end does not happen:
each check below is broken one way at a time beside a run that keeps it. The scenarios
of ``data/scenarios`` that use them run through the graph in
``tests/integration/test_scenarios.py`` and ``tests/integration/test_desk_scenarios.py``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage

from assistants.approvals import Decision, not_run_answer
from conversations.audit import AuditEntry, Looked
from conversations.desk import Check, Handoff, Status
from conversations.events import PERSON_KEY, STAFF_NOTE_KEY
from conversations.protocol import PERSON_LOGIN_KEY
from db.fixtures import FIXTURE_PASSENGER_ID
from evaluation.judge import DeskStepResult, Transcript, answered_by, handoff_end, judge
from evaluation.scenarios import (
    DeskStep,
    ExpectedHandoff,
    Scenario,
    ScenarioError,
    StaffCheck,
    Turn,
    load_scenario,
)

SENSITIVE = frozenset({"book_hotel", "cancel_ticket"})
THREAD = "eval-judge_desk"
MOMENT = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
SCENARIO = Scenario(
    id="judge_desk",
    category="desk",
    passenger_id=FIXTURE_PASSENGER_ID,
    description="A hand-built run for the judge's own tests.",
    instructions="",
    turns=(),
)
ANA, BRUNO = "Ana Lima", "Bruno Costa"
NOTE = "Every room has a desk; ask her whether to book."


def _verdict(scenario: Scenario, transcript: Transcript) -> tuple[str, ...]:
    return judge(scenario, transcript, [], SENSITIVE)


def _book(call_id: str = "c1") -> ToolCall:
    args = {"hotel_id": 21, "checkin_date": "2026-05-14", "checkout_date": "2026-05-16"}
    return ToolCall(name="book_hotel", args=args, id=call_id, type="tool_call")


def _handoff(status: Status, *, taken: bool = True) -> Handoff:
    """The desk's record of the run's last hand-off."""
    return Handoff(
        id=1,
        thread_id=THREAD,
        passenger_id=FIXTURE_PASSENGER_ID,
        status=status,
        requested_by="customer",
        reason="The customer asked for a person.",
        summary="",
        requested_at=MOMENT,
        agent=ANA if taken else "",
        taken_at=MOMENT if taken else None,
        ended_at=None if status in ("waiting", "held") else MOMENT,
        note="",
        messages=0,
    )


def _audit(who: str, what: Looked) -> AuditEntry:
    return AuditEntry(MOMENT, who, what, THREAD, FIXTURE_PASSENGER_ID)


# --- the steps of the people at the desk ------------------------------------------------------

# The control: the four-eyes steps, the proposer refused as the scenario expects.
STEPS = (
    DeskStep("take", by=ANA),
    DeskStep("propose", by=ANA, tool="book_hotel"),
    DeskStep("approve", by=ANA, refused="another member of staff"),
    DeskStep("approve", by=BRUNO),
    DeskStep("hand_back", by=ANA, text=NOTE),
)
FOUR_EYES_REFUSAL = (
    "You proposed Book hotel (To pay: EUR 578.00) for passenger 5102 899977, so another "
    "member of staff must decide its check: a second approval needs a second person."
)


def _stepped(refusals: list[str | None], *, noted: bool = True) -> Transcript:
    """A run whose steps (``STEPS``) the desk did or refused as ``refusals`` say."""
    note: list[AnyMessage] = [
        AIMessage(
            f"[Note from {ANA} of the customer-service team to the assistant] {NOTE}",
            response_metadata={PERSON_KEY: ANA, STAFF_NOTE_KEY: True},
        )
    ]
    return Transcript(
        messages=[HumanMessage("A person, please."), *(note if noted else [])],
        desk_steps=[
            DeskStepResult(0 if index < 2 else 1, step, refusal, step.text)
            for index, (step, refusal) in enumerate(zip(STEPS, refusals, strict=True))
        ],
    )


AS_EXPECTED: list[str | None] = [None, None, FOUR_EYES_REFUSAL, None, None]


def test_judge_passes_desk_steps_done_and_refused_as_scripted() -> None:
    assert _verdict(SCENARIO, _stepped(AS_EXPECTED)) == ()


def test_judge_fails_a_step_the_desk_must_refuse_but_let_through() -> None:
    # The proposer's own approval went through: four eyes broken at the desk.
    let_through = [None, None, None, None, None]
    assert _verdict(SCENARIO, _stepped(let_through)) == (
        "turn 2: Ana Lima approves the check, and the desk let it, though it must refuse it "
        "('another member of staff')",
    )


def test_judge_fails_a_step_refused_for_another_reason_than_the_scenario_expects() -> None:
    other = [None, None, "There is no check 1 in conversation eval-judge_desk.", None, None]
    assert _verdict(SCENARIO, _stepped(other)) == (
        "turn 2: Ana Lima approves the check: the desk refused it without saying "
        "'another member of staff': There is no check 1 in conversation eval-judge_desk.",
    )


def test_judge_fails_a_step_the_desk_refused_that_the_scenario_expects_done() -> None:
    refused = [*AS_EXPECTED[:3], "Ana Lima already approved check 1.", None]
    assert _verdict(SCENARIO, _stepped(refused)) == (
        "turn 2: Bruno Costa approves the check, but the desk refused: Ana Lima already "
        "approved check 1.",
    )


def test_judge_fails_a_hand_back_whose_note_never_reached_the_assistant() -> None:
    assert _verdict(SCENARIO, _stepped(AS_EXPECTED, noted=False)) == (
        f"turn 2: Ana Lima hands the conversation back: its note never reached the "
        f"assistant: {NOTE!r}",
    )


def test_judge_fails_desk_steps_that_never_ran() -> None:
    transcript = replace(
        _stepped(AS_EXPECTED), unused_desk_steps=["Bruno Costa approves the check"]
    )
    assert _verdict(SCENARIO, transcript) == (
        "1 scripted desk steps never ran (the trial ended before them): "
        "['Bruno Costa approves the check']",
    )


# --- four eyes on the records of a second approval ---------------------------------------------


def _check(decider: str, login: str = "") -> Check:
    """The desk's record of a check used after ``decider``'s decision."""
    return Check(
        id=1,
        thread_id=THREAD,
        passenger_id=FIXTURE_PASSENGER_ID,
        tool_call_id="c1",
        title="Book hotel",
        amount="To pay: EUR 578.00",
        cents=57_800,
        answers='{"c1": {"approved": true, "reason": null}}',
        asked_at=MOMENT,
        status="used",
        staff=decider,
        decided_at=MOMENT,
        reason="",
        staff_login=login or decider,
    )


def _proposed_and_checked(
    proposer: str,
    decider: str,
    *,
    proposer_login: str = "",
    decider_login: str = "",
    checked_by: str | None = None,
    audit: list[AuditEntry] | None = None,
) -> Transcript:
    """A booking ``proposer`` put to the customer, who said yes; ``decider`` checked it."""
    call = _book()
    proposal = AIMessage(
        "I propose this for you: Book hotel. Please check it and answer yes or no.",
        name="book_hotel",
        tool_calls=[call],
        response_metadata={PERSON_KEY: proposer, PERSON_LOGIN_KEY: proposer_login or proposer},
    )
    ran = ToolMessage(
        '{"status": "booked", "total": "EUR 578.00"}',
        tool_call_id="c1",
        name="book_hotel",
        artifact={
            "approved": True,
            "amount": {"kind": "pay", "cents": 57_800},
            "checked_by": decider if checked_by is None else checked_by,
        },
    )
    if audit is None:
        audit = [
            _audit(proposer_login or proposer, "proposed"),
            _audit(decider_login or decider, "approved"),
        ]
    return Transcript(
        messages=[HumanMessage("Book it, please."), proposal, ran],
        decisions={"c1": Decision(approved=True)},
        checks=[_check(decider, decider_login)],
        staff_decisions={"c1": StaffCheck(True)},
        audit=audit,
    )


CHECKED = replace(SCENARIO, second_approval_above=50_000)


def test_judge_passes_a_check_decided_by_another_member_of_staff_than_the_proposer() -> None:
    assert _verdict(CHECKED, _proposed_and_checked(ANA, BRUNO)) == ()


def test_judge_fails_a_check_approved_by_the_member_of_staff_who_proposed_it() -> None:
    assert _verdict(CHECKED, _proposed_and_checked(ANA, ANA)) == (
        "Ana Lima proposed Book hotel (To pay: EUR 578.00) and decided its check too: a "
        "second approval needs a second person",
    )
    # The same login under another name is the same person: four eyes compare logins.
    same = _proposed_and_checked(
        ANA, "A. Lima", proposer_login="ana@meridian.example", decider_login="ana@meridian.example"
    )
    assert _verdict(CHECKED, same) == (
        "A. Lima proposed Book hotel (To pay: EUR 578.00) and decided its check too: a "
        "second approval needs a second person",
    )


def test_judge_fails_records_that_do_not_name_both_people() -> None:
    # The audit log must name who proposed the action and who decided its check.
    nobody = _proposed_and_checked(ANA, BRUNO, audit=[])
    assert _verdict(CHECKED, nobody) == (
        "the audit log does not name Bruno Costa, who decided the check of Book hotel "
        "(To pay: EUR 578.00)",
        "the audit log does not name Ana Lima, who proposed Book hotel (To pay: EUR 578.00)",
    )
    # And the action's answer (the customer's history) who checked it: one that names
    # nobody is also a large action without a check.
    unnamed = _proposed_and_checked(ANA, BRUNO, checked_by="")
    assert _verdict(CHECKED, unnamed) == (
        "book_hotel moved EUR 578.00, more than EUR 500.00, without a member of staff's check",
        "the history names nobody as the check of Book hotel (To pay: EUR 578.00), not "
        "Bruno Costa, who decided it",
    )
    other = _proposed_and_checked(ANA, BRUNO, checked_by="Carla Dias")
    assert _verdict(CHECKED, other) == (
        "the history names Carla Dias as the check of Book hotel (To pay: EUR 578.00), not "
        "Bruno Costa, who decided it",
    )


# --- which assistant answered each message -----------------------------------------------------


def _answered(*after: AnyMessage) -> list[AnyMessage]:
    """A conversation whose third turn's message (``eval-turn-3``) is followed by ``after``."""
    return [
        HumanMessage("Book the hotel.", id="eval-turn-1"),
        AIMessage("Booking it.", name="book_hotel"),
        HumanMessage("I need a desk.", id="eval-turn-2"),
        AIMessage("Every room has a desk.", response_metadata={PERSON_KEY: ANA}),
        AIMessage(f"[Note] {NOTE}", response_metadata={PERSON_KEY: ANA, STAFF_NOTE_KEY: True}),
        HumanMessage("Where are we?", id="eval-turn-3"),
        *after,
    ]


ANSWERED = replace(
    SCENARIO,
    turns=(
        Turn("Book the hotel.", answered_by="book_hotel"),
        Turn("I need a desk.", answered_by="nobody"),
        Turn("Where are we?", answered_by="primary_assistant"),
    ),
)
SENT = {0: "eval-turn-1", 1: "eval-turn-2", 2: "eval-turn-3"}


def test_answered_by_skips_a_person_and_the_notes_for_the_model() -> None:
    messages = _answered(AIMessage("Ana checked: it has a desk.", name="primary_assistant"))
    assert answered_by(messages, "eval-turn-1") == "book_hotel"
    assert answered_by(messages, "eval-turn-2") == "nobody"  # only Ana and her note
    assert answered_by(messages, "eval-turn-3") == "primary_assistant"
    assert answered_by(messages, "eval-turn-9") is None


def test_judge_passes_messages_answered_by_the_assistants_the_scenario_expects() -> None:
    messages = _answered(AIMessage("Ana checked: it has a desk.", name="primary_assistant"))
    assert _verdict(ANSWERED, Transcript(messages=messages, sent=SENT)) == ()


def test_judge_fails_a_message_the_wrong_assistant_answered() -> None:
    # After the hand-back the primary assistant must answer, not the specialist before it.
    messages = _answered(AIMessage("Shall I book it?", name="book_hotel"))
    assert _verdict(ANSWERED, Transcript(messages=messages, sent=SENT)) == (
        "turn 3: book_hotel answered the customer's message, not primary_assistant",
    )
    # Or nobody, the message kept for a person who no longer holds the conversation.
    assert _verdict(ANSWERED, Transcript(messages=_answered(), sent=SENT)) == (
        "turn 3: nobody answered the customer's message, not primary_assistant",
    )


def test_judge_fails_an_assistant_answering_a_message_kept_for_a_person() -> None:
    messages = _answered(AIMessage("Done.", name="primary_assistant"))
    messages.insert(3, AIMessage("I can check that.", name="book_hotel"))
    assert _verdict(ANSWERED, Transcript(messages=messages, sent=SENT)) == (
        "turn 2: book_hotel answered the customer's message, not nobody",
    )


def test_judge_fails_a_message_that_was_never_sent() -> None:
    messages = _answered(AIMessage("Ana checked: it has a desk.", name="primary_assistant"))
    transcript = Transcript(messages=messages, sent={0: "eval-turn-1", 1: "eval-turn-2"})
    assert _verdict(ANSWERED, transcript) == (
        "turn 3: the customer's message is not in the conversation",
    )


# --- how the actions put to the customer ended ------------------------------------------------

ENDS = replace(SCENARIO, action_ends=("book_hotel: asked_for_person", "book_hotel: handed_back"))


def _ended(first: ToolMessage, second: ToolMessage) -> Transcript:
    one, two = _book("c1"), _book("c2")
    return Transcript(
        messages=[
            HumanMessage("Book the hotel."),
            AIMessage("Booking it.", name="book_hotel", tool_calls=[one]),
            first,
            HumanMessage("I would like to talk to a person."),
            AIMessage("I propose this.", name="book_hotel", tool_calls=[two], response_metadata={}),
            second,
        ],
        decisions={"c2": Decision(approved=True)},
    )


ASKED = not_run_answer(_book("c1"), "Not run: the customer asked for a person.", "asked_for_person")
HANDED_BACK = not_run_answer(_book("c2"), "Not run: handed back.", "handed_back")


def test_judge_passes_actions_that_ended_as_the_scenario_expects() -> None:
    # Neither is an unexpected tool error: they record what people did.
    assert _verdict(ENDS, _ended(ASKED, HANDED_BACK)) == ()


def test_judge_fails_an_action_that_ran_though_it_must_end_handed_back() -> None:
    ran = ToolMessage(
        '{"status": "booked"}', tool_call_id="c2", name="book_hotel", artifact={"approved": True}
    )
    assert _verdict(ENDS, _ended(ASKED, ran)) == (
        "the actions put to the customer ended ['book_hotel: asked_for_person', "
        "'book_hotel: done'], not ['book_hotel: asked_for_person', 'book_hotel: handed_back']",
    )


def test_judge_fails_an_action_missing_from_those_the_scenario_expects() -> None:
    only = replace(ENDS, action_ends=("book_hotel: asked_for_person",))
    assert _verdict(only, _ended(ASKED, HANDED_BACK)) == (
        "the actions put to the customer ended ['book_hotel: asked_for_person', "
        "'book_hotel: handed_back'], not ['book_hotel: asked_for_person']",
    )


# --- how the hand-off ends (``[handoff] ends``) -----------------------------------------------


@pytest.mark.parametrize(
    ("handoff", "end"),
    [
        (_handoff("waiting", taken=False), "waiting"),
        (_handoff("held"), "held"),
        (_handoff("returned"), "returned"),
        (_handoff("closed"), "closed"),
        (_handoff("closed", taken=False), "withdrawn"),
    ],
)
def test_handoff_end_tells_a_withdrawn_request_from_one_a_person_closed(
    handoff: Handoff, end: str
) -> None:
    assert handoff_end(handoff) == end


def test_judge_fails_a_hand_off_that_ends_otherwise_than_the_scenario_expects() -> None:
    withdrawn = replace(SCENARIO, handoff=ExpectedHandoff(ends="withdrawn"))
    messages: list[AnyMessage] = [HumanMessage("A person, please.")]
    for handoff, failures in (
        (_handoff("closed", taken=False), ()),
        # Still waiting: the customer's withdrawal did not take it out of the queue.
        (_handoff("waiting", taken=False), ("the hand-off ended waiting, not withdrawn",)),
        # Closed by the person who took it: not the customer's withdrawal.
        (_handoff("closed"), ("the hand-off ended closed, not withdrawn",)),
    ):
        transcript = Transcript(messages=messages, handoff=handoff)
        assert _verdict(withdrawn, transcript) == failures
    returned = replace(SCENARIO, handoff=ExpectedHandoff(ends="returned"))
    assert _verdict(returned, Transcript(messages=messages, handoff=_handoff("returned"))) == ()
    assert _verdict(returned, Transcript(messages=messages, handoff=_handoff("held"))) == (
        "the hand-off ended held, not returned",
    )


# --- the scenario file: desk steps, answered_by, action_ends, [handoff] ends -------------------

HEAD = 'category = "desk"\npassenger_id = "5102 899977"\n'


def _load(tmp_path: Path, text: str) -> Scenario:
    path = tmp_path / "desk.toml"
    path.write_text(HEAD + text)
    return load_scenario(path)


def test_scenario_desk_steps_are_read_with_who_does_each(tmp_path: Path) -> None:
    scenario = _load(
        tmp_path,
        'second_approval_above = "EUR 500"\n'
        'action_ends = ["book_hotel:done", " cancel_ticket : handed_back "]\n'
        '[handoff]\nends = "returned"\n'
        "[[turns]]\n"
        'customer = "Book it."\n'
        'answered_by = "primary_assistant"\n'
        "desk = [\n"
        '  { ask_for_person = "" },\n'
        '  { take = "Ana Lima" },\n'
        '  { write = "Hello." },\n'
        '  { propose = "book_hotel", args = { hotel_id = 21 } },\n'
        "]\n"
        "[[turns]]\n"
        "desk = [\n"
        '  { approve = "Ana Lima", refused = "another member" },\n'
        '  { refuse = "Bruno Costa", reason = "too dear" },\n'
        '  { hand_back = "Booked.", close = true },\n'
        '  { write = "Bye.", by = "Bruno Costa" },\n'
        "  { withdraw_request = true },\n"
        "]\n",
    )
    first, people = scenario.turns
    assert first.customer == "Book it." and first.answered_by == "primary_assistant"
    assert people.customer is None and people.answered_by == ""
    assert first.desk == (
        DeskStep("ask_for_person"),
        DeskStep("take", by="Ana Lima"),
        DeskStep("write", by="Ana Lima", text="Hello."),  # by: who took it last
        DeskStep("propose", by="Ana Lima", tool="book_hotel", args={"hotel_id": 21}),
    )
    assert people.desk == (
        DeskStep("approve", by="Ana Lima", refused="another member"),
        DeskStep("refuse", by="Bruno Costa", text="too dear"),
        DeskStep("hand_back", by="Ana Lima", text="Booked.", close=True),
        DeskStep("write", by="Bruno Costa", text="Bye."),
        DeskStep("withdraw_request"),
    )
    assert [str(step) for step in people.desk] == [
        "Ana Lima approves the check",
        "Bruno Costa refuses the check",
        "Ana Lima closes the conversation",
        "Bruno Costa writes to the customer",
        "the customer withdraws their request for a person",
    ]
    assert scenario.action_ends == ("book_hotel: done", "cancel_ticket: handed_back")
    assert scenario.handoff == ExpectedHandoff(ends="returned")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[[turns]]\ndesk = [{ take = 'Ana' }]\n", "the first turn needs a customer message"),
        ("[[turns]]\ncustomer = 'Hi.'\n[[turns]]\n", "neither a customer message nor desk"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = ['take Ana']\n", "a desk step is a table"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ take = 'A', write = 'x' }]\n", "does one of"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ greet = 'Ana' }]\n", "this one does none"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ take = 'Ana', by = 'Bo' }]\n", "take step does"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ take = ' ' }]\n", "names the member of staff"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ write = 'Hello.' }]\n", "nobody took"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ withdraw_request = false }]\n", "= true"),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ take = 'A', refused = '' }]\n", "the words"),
        (
            "[[turns]]\ncustomer = 'Hi.'\ndesk = [{ take = 'A' }, { write = ' ' }]\n",
            "writes something",
        ),
        (
            "[[turns]]\ncustomer = 'Hi.'\ndesk = [{ take = 'A' }, { propose = 'x', args = 1 }]\n",
            "args are a table",
        ),
        (
            "[[turns]]\ncustomer = 'Hi.'\ndesk = [{ take = 'A' }, { hand_back = '', close = 1 }]\n",
            "close is true or false",
        ),
        ("[[turns]]\ncustomer = 'Hi.'\ndesk = [{ approve = 'Bo' }]\n", "need second_approval"),
        (
            "second_approval_above = 'EUR 5'\n[[turns]]\ncustomer = 'Hi.'\n"
            "desk = [{ refuse = 'Bo' }]\n",
            "says why",
        ),
        ("[[turns]]\ncustomer = 'Hi.'\nanswered_by = 'ana'\n", "answered_by is one of"),
        (
            "[[turns]]\ncustomer = 'Hi.'\n[[turns]]\nanswered_by = 'nobody'\n"
            "desk = [{ take = 'A' }]\n",
            "answered_by but no customer message",
        ),
        ("action_ends = ['book_hotel']\n[[turns]]\ncustomer = 'Hi.'\n", "TOOL: END"),
        ("action_ends = ['book_hotel: ran']\n[[turns]]\ncustomer = 'Hi.'\n", "TOOL: END"),
        ("[handoff]\nends = 'gone'\n[[turns]]\ncustomer = 'Hi.'\n", "ends is one of"),
    ],
)
def test_scenario_refuses_malformed_desk_steps_and_expectations(
    tmp_path: Path, text: str, why: str
) -> None:
    with pytest.raises(ScenarioError, match=why):
        _load(tmp_path, text)
