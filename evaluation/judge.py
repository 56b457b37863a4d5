"""The judge: a run's procedural checks, with how its database differs from the gold one.

The database differences come from ``evaluation.gold_database``; ``judge`` reports them
beside its own checks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from assistants.approvals import Decision, facts_of
from conversations.audit import AuditEntry
from conversations.desk import Check, Handoff
from conversations.events import PERSON_KEY, STAFF_NOTE_KEY
from conversations.protocol import PERSON_LOGIN_KEY
from db.values import fmt_money
from evaluation.scenarios import (
    NOBODY,
    DeskStep,
    ExpectedHandoff,
    HandoffEnd,
    Scenario,
    StaffCheck,
)


@dataclass(frozen=True)
class DeskStepResult:
    """What became of one scripted step of the people at the desk (a turn's ``desk``).

    ``turn`` is the index of its turn (from 0); ``refusal`` what the desk or the
    protocol said refusing it (``None``: it was done); ``text`` its text as given to
    the protocol, placeholders resolved (a hand-back's note: what the model must read).
    """

    turn: int
    step: DeskStep
    refusal: str | None
    text: str = ""


@dataclass
class Transcript:
    """What happened in one run: messages, decisions and timings."""

    messages: list[AnyMessage] = field(default_factory=list)
    decisions: dict[str, Decision] = field(default_factory=dict)
    unused_decisions: list[str] = field(default_factory=list)
    user_info: str = ""
    latencies: list[float] = field(default_factory=list)
    model_calls: int = 0
    # The desk's last hand-off of the conversation to a person, if it was handed off.
    handoff: Handoff | None = None
    # Every second-approval check the desk was asked for, as it ended (``Desk.checks_ever``),
    # what the trial's member of staff answered to each (by tool call id), and the
    # scripted staff answers left over.
    checks: list[Check] = field(default_factory=list)
    staff_decisions: dict[str, StaffCheck] = field(default_factory=dict)
    unused_staff_checks: list[str] = field(default_factory=list)
    # The id of each customer message in ``messages``, by the index of its turn.
    sent: dict[int, str] = field(default_factory=dict)
    # What became of each scripted desk step, in the order run, and those never run.
    desk_steps: list[DeskStepResult] = field(default_factory=list)
    unused_desk_steps: list[str] = field(default_factory=list)
    # The desk's audit log of the conversation: who took, proposed, decided, handed back.
    audit: list[AuditEntry] = field(default_factory=list)


@dataclass(frozen=True)
class ScenarioResult:
    """The verdict on one run of one scenario."""

    scenario: Scenario
    failures: tuple[str, ...]
    transcript: Transcript
    # Why the run stopped before its end (a provider error, the time limit): not judged.
    error: str | None = None

    @property
    def passed(self) -> bool:
        """Tell whether the run finished and every check held."""
        return not self.failures and self.error is None

    @property
    def reasons(self) -> tuple[str, ...]:
        """Return why the run failed: its error, or the checks it failed."""
        return (f"error: {self.error}",) if self.error is not None else self.failures


# A must_say entry with a digit in it is a fact (an amount, a time, a flight number): a
# model can only know it from a tool, the customer or the bookings, never by itself.
_FACT = re.compile(r"\d")
# Answers that record the procedure, not a failing tool: judged by their own checks
# (``action_ends`` says which a scenario expects).
_PROCEDURAL_NOT_RUN = frozenset(
    {
        "declined",
        "superseded",
        "one_specialist_at_a_time",
        "handed_back",
        "handed_back_checked",
        "asked_for_person",
        "withdrawn",
        "edited",
    }
)


def judge(
    scenario: Scenario,
    transcript: Transcript,
    database_problems: Sequence[str],
    sensitive_names: frozenset[str],
    *,
    offline: bool = False,
) -> tuple[str, ...]:
    """Return every check the run failed.

    Args:
        scenario: What was asked and expected.
        transcript: What happened, with the desk's last hand-off of the conversation.
        database_problems: How the final database differs from the gold one.
        sensitive_names: The tools that need the customer's approval.
        offline: The assistant's words were scripted, so they prove nothing: facts it
            had to say must come from a tool result, the customer or the bookings.
    """
    failures = [f"database: {p}" for p in database_problems]
    messages = transcript.messages
    calls = {str(c["id"]): c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    answers: dict[str, list[ToolMessage]] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            answers.setdefault(message.tool_call_id, []).append(message)
    for call_id, call in calls.items():
        found = answers.get(call_id, [])
        if len(found) != 1:
            failures.append(f"tool call {call['name']} ({call_id}) answered {len(found)} times")
            continue
        answer = found[0]
        facts = facts_of(answer)
        if call["name"] in sensitive_names:
            decision = transcript.decisions.get(call_id)
            if facts.ran and (decision is None or not decision.approved):
                failures.append(f"{call['name']} ran without the customer's approval")
            if decision is not None and not decision.approved and facts.ran:
                failures.append(f"{call['name']} was denied but ran anyway")
            above = scenario.second_approval_above
            moved = facts.amount.cents if facts.amount is not None else 0
            if facts.ran and above is not None and moved > above and not facts.checked_by:
                failures.append(
                    f"{call['name']} moved {fmt_money(moved)}, more than {fmt_money(above)}, "
                    "without a member of staff's check"
                )
        failing = answer.status == "error" and facts.not_run not in _PROCEDURAL_NOT_RUN
        if failing and call["name"] not in scenario.expected_errors:
            failures.append(
                f"unexpected tool error from {call['name']}: {_first_line(str(answer.content))}"
            )
    if transcript.unused_decisions:
        failures.append(
            f"{len(transcript.unused_decisions)} scripted approval answers were never used: "
            f"{transcript.unused_decisions}"
        )
    said = " ".join(str(m.content) for m in messages if isinstance(m, AIMessage)).lower()
    failures += [f"never said {fact!r}" for fact in scenario.must_say if fact.lower() not in said]
    shown = " ".join(str(m.content) for m in messages if isinstance(m, ToolMessage)).lower()
    failures += [
        f"no tool returned {fact!r}" for fact in scenario.tool_facts if fact.lower() not in shown
    ]
    if offline:
        heard = " ".join(
            [shown, transcript.user_info.lower()]
            + [str(m.content).lower() for m in messages if m.type == "human"]
        )
        failures += [
            f"{fact!r} was said, but no tool, customer message or booking gave it"
            for fact in scenario.must_say
            if _FACT.search(fact) and fact.lower() not in heard
        ]
    failures += handoff_problems(scenario.handoff, transcript.handoff)
    failures += check_problems(transcript, answers)
    failures += four_eyes_problems(transcript, answers)
    failures += desk_problems(transcript)
    failures += answer_problems(scenario, transcript)
    failures += action_end_problems(scenario.action_ends, messages, sensitive_names)
    return tuple(failures)


def check_problems(
    transcript: Transcript, answers: Mapping[str, Sequence[ToolMessage]]
) -> list[str]:
    """Describe what went wrong with the run's second approvals (empty if nothing did).

    Every check the desk was asked for must end decided by the trial's member of staff
    and applied (``used``; ``withdrawn`` when a new message dropped its action): one
    still waiting is a check the scenario did not expect (its turns script no staff
    answer for it). An action staff refused must not run, and the assistant must have
    been told their reason. Scripted staff answers must all be used: a scenario that
    expects a check fails when none was asked.

    ``answers`` are the tool answers of the conversation, by tool call id.
    """
    problems = []
    for check in transcript.checks:
        what = f"{check.title} ({check.amount})"
        if check.status == "waiting":
            problems.append(
                f"a member of staff's check of {what} was left waiting: the scenario "
                "scripts no staff answer for it"
            )
        elif check.status in ("approved", "refused"):
            problems.append(
                f"{check.staff} {check.status} {what}, but the conversation never went on"
            )
        staff = transcript.staff_decisions.get(check.tool_call_id)
        found = answers.get(check.tool_call_id, [])
        if staff is None or staff.approved or len(found) != 1:
            continue
        if facts_of(found[0]).ran:
            problems.append(f"{what} ran though a member of staff refused it")
        elif staff.reason.lower() not in str(found[0].content).lower():
            problems.append(
                f"the assistant was never told why a member of staff refused {what}: "
                f"{staff.reason!r}"
            )
    if transcript.unused_staff_checks:
        problems.append(
            f"{len(transcript.unused_staff_checks)} scripted staff answers were never used "
            f"(no check asked for them): {transcript.unused_staff_checks}"
        )
    return problems


def handoff_problems(expected: ExpectedHandoff | None, handoff: Handoff | None) -> list[str]:
    """Describe how the desk's hand-off of a run differs from the scenario's (empty if not).

    A scenario with ``[handoff]`` ends with the conversation handed to a person, with a
    reason (holding one of ``reason_mentions``, when given), waiting in the desk's queue
    or as its ``ends`` says; one without it is never handed to a person.
    """
    if expected is None:
        if handoff is None:
            return []
        reason = handoff.reason or "no reason given"
        return [f"handed to a person ({reason}), which the scenario does not expect"]
    if handoff is None:
        return ["never handed to a person: the conversation is not in the desk's queue"]
    problems = []
    if expected.ends == "waiting":
        if handoff.status != "waiting":
            problems.append(f"the hand-off is {handoff.status}, not waiting in the desk's queue")
    elif handoff_end(handoff) != expected.ends:
        problems.append(f"the hand-off ended {handoff_end(handoff)}, not {expected.ends}")
    reason = handoff.reason.strip().lower()
    if not reason:
        problems.append("handed to a person without a reason")
    elif expected.reason_mentions and not any(
        word.lower() in reason for word in expected.reason_mentions
    ):
        problems.append(
            f"the hand-off's reason {handoff.reason!r} mentions none of "
            f"{list(expected.reason_mentions)}"
        )
    return problems


def handoff_end(handoff: Handoff) -> HandoffEnd:
    """Return how a hand-off stands: its status, or ``withdrawn`` (closed, never taken).

    The desk closes a request the customer withdrew; nobody ever took it.
    """
    if handoff.status == "closed" and handoff.taken_at is None:
        return "withdrawn"
    return handoff.status


def four_eyes_problems(
    transcript: Transcript, answers: Mapping[str, Sequence[ToolMessage]]
) -> list[str]:
    """Describe what breaks the four eyes of the run's second approvals (empty if nothing).

    A check a member of staff decided must be decided by another one than the person
    who proposed its action (by login), and the records must name both: the audit log
    who proposed it and who decided it, and the action's answer (the history) who
    checked it once the decision was applied.
    """
    problems = []
    done = {(entry.supervisor, entry.looked_at) for entry in transcript.audit}
    for check in transcript.checks:
        if not check.staff:
            continue  # nobody decided it
        what = f"{check.title} ({check.amount})"
        decider = check.staff_login or check.staff
        proposer = _proposer_login(transcript.messages, check.tool_call_id)
        if proposer and proposer == decider:
            problems.append(
                f"{check.staff} proposed {what} and decided its check too: a second approval "
                "needs a second person"
            )
        if (decider, "approved") not in done and (decider, "refused") not in done:
            problems.append(
                f"the audit log does not name {decider}, who decided the check of {what}"
            )
        if proposer and (proposer, "proposed") not in done:
            problems.append(f"the audit log does not name {proposer}, who proposed {what}")
        found = answers.get(check.tool_call_id, [])
        if check.status == "used" and len(found) == 1:
            named = facts_of(found[0]).checked_by
            if named != check.staff:
                problems.append(
                    f"the history names {named or 'nobody'} as the check of {what}, "
                    f"not {check.staff}, who decided it"
                )
    return problems


def _proposer_login(messages: Sequence[AnyMessage], call_id: str) -> str:
    """Return the login of the member of staff who proposed ``call_id`` ("" if none did)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            meta = message.response_metadata
            return str(meta.get(PERSON_LOGIN_KEY) or meta.get(PERSON_KEY) or "")
    return ""


def desk_problems(transcript: Transcript) -> list[str]:
    """Describe how the people's scripted steps went otherwise than the scenario says.

    A step the scenario expects the desk to refuse (``refused``) must be refused, saying
    those words; every other step must be done. A hand-back's note must reach the
    assistant (a note for the model in the conversation). Every step must have run.
    """
    problems = []
    for result in transcript.desk_steps:
        step = result.step
        where = f"turn {result.turn + 1}: {step}"
        if step.refused is None:
            if result.refusal is not None:
                problems.append(f"{where}, but the desk refused: {result.refusal}")
        elif result.refusal is None:
            problems.append(
                f"{where}, and the desk let it, though it must refuse it ({step.refused!r})"
            )
        elif step.refused.lower() not in result.refusal.lower():
            problems.append(
                f"{where}: the desk refused it without saying {step.refused!r}: {result.refusal}"
            )
        note = result.text.strip()
        handed_back = step.action == "hand_back" and result.refusal is None
        if handed_back and note and not _noted(transcript.messages, note):
            problems.append(f"{where}: its note never reached the assistant: {note!r}")
    if transcript.unused_desk_steps:
        problems.append(
            f"{len(transcript.unused_desk_steps)} scripted desk steps never ran (the trial "
            f"ended before them): {transcript.unused_desk_steps}"
        )
    return problems


def answered_by(messages: Sequence[AnyMessage], message_id: str) -> str | None:
    """Return the assistant that answered the customer's message ``message_id`` first.

    That is the assistant of the first message after it (a reply or a tool call) that
    is neither a person's nor a note for the model, before the customer's next message:
    ``"nobody"`` when there is none (the message waited for a person), ``None`` when the
    message is not in ``messages``.
    """
    start = next(
        (i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and m.id == message_id),
        None,
    )
    if start is None:
        return None
    for message in messages[start + 1 :]:
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and not _said_by_a_person(message):
            return message.name or "an unnamed assistant"
    return NOBODY


def _said_by_a_person(message: AIMessage) -> bool:
    """Tell whether a person wrote ``message``, or it is a note for the model."""
    meta = message.response_metadata
    return bool(meta.get(PERSON_KEY) or meta.get(STAFF_NOTE_KEY))


def _noted(messages: Sequence[AnyMessage], note: str) -> bool:
    """Tell whether ``note`` is in the conversation as a note for the model."""
    return any(
        isinstance(m, AIMessage)
        and bool(m.response_metadata.get(STAFF_NOTE_KEY))
        and note in str(m.content)
        for m in messages
    )


def answer_problems(scenario: Scenario, transcript: Transcript) -> list[str]:
    """Describe each turn whose message another assistant answered than ``answered_by``."""
    problems = []
    for index, turn in enumerate(scenario.turns):
        if not turn.answered_by:
            continue
        message_id = transcript.sent.get(index)
        who = None if message_id is None else answered_by(transcript.messages, message_id)
        if who is None:
            problems.append(f"turn {index + 1}: the customer's message is not in the conversation")
        elif who != turn.answered_by:
            problems.append(
                f"turn {index + 1}: {who} answered the customer's message, not {turn.answered_by}"
            )
    return problems


def action_ends(messages: Sequence[AnyMessage], sensitive_names: frozenset[str]) -> list[str]:
    """Return every action put to the customer, in order, as ``"TOOL: END"``.

    ``END`` is ``done``, ``failed`` (it ran, and its tool answered with an error), why it
    was not run (``declined``, ``handed_back``...), or ``unanswered``.
    """
    found: dict[str, ToolMessage] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            found.setdefault(message.tool_call_id, message)
    ends = []
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            if call["name"] not in sensitive_names:
                continue
            answer = found.get(str(call["id"]))
            if answer is None:
                end = "unanswered"
            else:
                facts = facts_of(answer)
                if facts.ran:
                    end = "failed" if answer.status == "error" else "done"
                else:
                    end = facts.not_run or "not run"
            ends.append(f"{call['name']}: {end}")
    return ends


def action_end_problems(
    expected: Sequence[str], messages: Sequence[AnyMessage], sensitive_names: frozenset[str]
) -> list[str]:
    """Describe how the actions put to the customer ended otherwise than ``action_ends``."""
    if not expected:
        return []
    ended = action_ends(messages, sensitive_names)
    if ended == list(expected):
        return []
    return [f"the actions put to the customer ended {ended}, not {list(expected)}"]


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:200]
