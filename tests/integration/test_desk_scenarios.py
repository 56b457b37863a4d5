"""The desk's scenarios, broken on purpose: the judge must fail the trial, through the graph.

The ``desk`` scenarios of data/scenarios script what people do between the customer's
turns (``tests/integration/test_scenarios.py`` runs them as written). Here each is run
with the expected end taken away, by changing the script or the protocol under it: the
customer never withdraws, a hand-back leaves the specialist answering, the action a
person proposed runs instead of being handed back, the desk lets a member of staff
approve the check of their own proposal. ``tests/unit/test_judge_desk.py`` tests the same
checks on hand-built transcripts.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conversations.assistant import TravelAssistant
from conversations.protocol import Conversation
from evaluation import (
    DeskStep,
    load_scenarios,
    trial_record,
)
from tests.support.scenarios import run_scripted as run

SCENARIOS = {s.id: s for s in load_scenarios()}


def test_judge_fails_a_withdrawal_that_never_happened(template: Path | str) -> None:
    withdraw = SCENARIOS["desk_withdraw_request"]
    first, second = withdraw.turns
    result = run(replace(withdraw, turns=(replace(first, desk=()), second)), template)
    # The request stays in the queue, so the next message waits for a person instead of
    # being answered: the assistant never says the flight's time, and its two scripted
    # replies are never asked for.
    assert result.failures == (
        "never said 'LX0112'",
        "never said '15:00'",
        "the hand-off ended waiting, not withdrawn",
        "turn 2: nobody answered the customer's message, not primary_assistant",
        "2 scripted replies were never used",
    )


def test_judge_fails_a_hand_back_that_leaves_the_specialist_answering(
    template: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A protocol whose hand-back keeps the active specialist: the hotel specialist, which
    # proposed the booking before the person took over, answers the next message.
    append = TravelAssistant.append

    def keeps_the_specialist(self: TravelAssistant, *args: Any, **kwargs: Any) -> None:
        append(self, *args, **{**kwargs, "to_primary": False})

    monkeypatch.setattr(TravelAssistant, "append", keeps_the_specialist)
    result = run(SCENARIOS["desk_hand_back_pending_action"], template)
    assert result.failures == (
        "turn 3: book_hotel answered the customer's message, not primary_assistant",
    )


def test_judge_fails_a_proposal_that_ran_instead_of_being_handed_back(
    template: Path | str,
) -> None:
    # The customer says yes to Ana's proposal before she hands the conversation back: the
    # booking is made, which the scenario's end (handed back, never run) forbids.
    back = SCENARIOS["desk_hand_back_pending_action"]
    first, second, third = back.turns
    *proposing, hand_back = second.desk
    turns = (
        first,
        replace(second, desk=tuple(proposing), decisions=("y",)),
        replace(second, customer=None, answered_by="", desk=(hand_back,)),
        third,
    )
    failures = run(replace(back, turns=turns), template).failures
    # The booking and its payment are rows the gold database lacks.
    assert [f.split(":")[1].strip() for f in failures if f.startswith("database:")] == [
        "hotel_bookings",
        "payments",
    ], failures
    assert [f for f in failures if not f.startswith("database:")] == [
        "the actions put to the customer ended ['book_hotel: asked_for_person', "
        "'book_hotel: done'], not ['book_hotel: asked_for_person', 'book_hotel: handed_back']",
    ]


def test_judge_fails_a_check_approved_by_the_member_of_staff_who_proposed_it(
    template: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A desk without four eyes: the proposer's own approval goes through and runs the
    # booking, and the second member of staff finds nothing left to check.
    def no_four_eyes(
        self: Conversation, staff: str, check_id: int, *, approved: bool, reason: str = ""
    ) -> Any:
        now = self.owner.now()
        return self.owner.desk.decide_check(check_id, staff, now, approved=approved, reason=reason)

    monkeypatch.setattr(Conversation, "decide_check", no_four_eyes)
    result = run(SCENARIOS["desk_four_eyes_second_approval"], template)
    assert result.failures == (
        "Ana Lima proposed Book hotel (To pay: EUR 578.00) and decided its check too: a "
        "second approval needs a second person",
        "turn 2: Ana Lima approves the check, and the desk let it, though it must refuse it "
        "('another member of staff must decide')",
        "turn 2: Bruno Costa approves the check, but the desk refused: No check waits in this "
        "conversation.",
    )


def test_judge_fails_a_trial_that_ends_before_its_desk_steps(template: Path | str) -> None:
    # The people's turn comes after the customer's next message: the check waits, the
    # customer can only wait too, and the trial ends there, its last steps never run.
    four_eyes = SCENARIOS["desk_four_eyes_second_approval"]
    first, people, last = four_eyes.turns
    failures = run(replace(four_eyes, turns=(first, last, people)), template).failures
    # Nothing is booked, and the customer's message is never sent (a check waits).
    expected = [
        "the hand-off ended held, not returned",
        "a member of staff's check of Book hotel (To pay: EUR 578.00) was left waiting: the "
        "scenario scripts no staff answer for it",
        "3 scripted desk steps never ran (the trial ended before them): ['Ana Lima approves "
        "the check', 'Bruno Costa approves the check', 'Ana Lima hands the conversation back']",
        "turn 2: the customer's message is not in the conversation",
        "the actions put to the customer ended ['book_hotel: unanswered'], not "
        "['book_hotel: done']",
    ]
    assert [f for f in failures if f in expected] == expected, failures
    assert any(f.startswith("database: hotel_bookings") for f in failures), failures


def test_a_refuse_step_is_judged_as_a_scripted_staff_refusal(template: Path | str) -> None:
    # Bruno refuses the check instead: nothing is booked, the assistant is told why, and
    # the trial's record keeps his answer as it keeps a scripted one.
    four_eyes = SCENARIOS["desk_four_eyes_second_approval"]
    first, people, last = four_eyes.turns
    why = "company bookings above EUR 500 need the travel manager's approval"
    refusing = (
        people.desk[0],
        DeskStep("refuse", by="Bruno Costa", text=why),
        DeskStep("hand_back", by="Ana Lima", text="Bruno Costa refused the booking: " + why),
    )
    reply = {"text": "No: our team could not approve it, as " + why + ". Nothing was booked."}
    scenario = replace(
        four_eyes,
        turns=(first, replace(people, desk=refusing), replace(last, replies=(reply,))),
        gold_actions=(),
        must_say=("Nothing was booked",),
        tool_facts=(),
        action_ends=("book_hotel: declined",),
    )
    result = run(scenario, template)
    assert result.passed, result.failures
    (check,) = trial_record(result, 1)["checks"]
    assert check == {
        "action": "Book hotel",
        "amount": "To pay: EUR 578.00",
        "status": "used",
        "staff": f"refuse: {why}",
    }
