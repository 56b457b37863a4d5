"""The approval prompt: each pending action shown, then an explicit yes or a no with a reason.

Only ``y`` or ``yes`` (in any case) approves; Enter, anything else, Ctrl-D or Ctrl-C
declines, except ``/agent [why]``: a person is asked for once the action is decided (a
person cannot take a conversation while an action waits for the customer), and the
question is asked again. What was typed before the question showed (while the assistant
worked) is thrown away, never taken as the answer. An action the protocol already knows
cannot be done is not put to the customer: a box says why, and the protocol tells the
assistant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from conversations import words
from conversations.protocol import Answer
from terminal.prompter import clean_input

if TYPE_CHECKING:
    from conversations.records import Approval
    from terminal.console import Console

Read = Callable[[str], str]
Discard = Callable[[], bool]
# Notes ``/agent [why]`` typed at an approval, with the reason given (maybe empty);
# returns what the customer is told.
WantPerson = Callable[[str], str]
# The answers that approve (after outer blanks are dropped, in any case); README says so.
APPROVING = frozenset({"y", "yes"})
TYPED_AHEAD = "(What you typed while the assistant worked was not used: answer the question.)"


def ask_answers(
    console: Console,
    read: Read,
    approvals: Sequence[Approval],
    discard: Discard = lambda: False,
    want_person: WantPerson | None = None,
) -> dict[str, Answer]:
    """Show each action and read the customer's answer to it, in the assistant's order.

    ``want_person`` notes a person asked for (``/agent``); without it, the customer is
    told to answer first.
    """
    return {
        approval.tool_call_id: ask_one(
            console, read, approval, index, len(approvals), discard, want_person
        )
        for index, approval in enumerate(approvals, start=1)
    }


def ask_one(
    console: Console,
    read: Read,
    approval: Approval,
    index: int,
    total: int,
    discard: Discard = lambda: False,
    want_person: WantPerson | None = None,
) -> Answer:
    """Show what an action would do and get the customer's answer to it."""
    counter = f" ({index} of {total})" if total > 1 else ""
    if approval.refusal is not None:
        console.refusal_box(f"Not possible{counter}: {approval.title}", approval.refusal)
        console.status(
            "  Nothing was changed; the assistant is told why and can suggest something else."
        )
        return Answer(False)
    console.approval_box(f"Approval needed{counter}: {approval.title}", approval.lines)
    return ask_yes_no(console, read, discard, want_person)


def ask_yes_no(
    console: Console,
    read: Read,
    discard: Discard = lambda: False,
    want_person: WantPerson | None = None,
) -> Answer:
    """Ask y/n; only an explicit yes approves. A no asks for a reason.

    Keys typed before the question (``discard``) are thrown away first, and the customer
    is told so: an answer is only what was typed to the question. ``/agent [why]``
    answers neither: it is noted (``want_person``), said, and the question asked again;
    typed as the reason of a no, it is noted and the no has no reason.
    """
    if discard():
        console.status(TYPED_AHEAD)
    while True:
        try:
            answer = clean_input(read("Approve this action? [y/N] "))
        except (EOFError, KeyboardInterrupt):
            console.status("No answer: the action is declined.")
            return Answer(False, words.NO_ANSWER_REASON)
        person = _person_asked(answer)
        if person is None:
            break
        _note_person(console, person, want_person)
    if answer.lower() in APPROVING:
        return Answer(True)
    try:
        reason = clean_input(read("Why not? (optional, passed to the assistant) "))
    except (EOFError, KeyboardInterrupt):
        reason = ""
    person = _person_asked(reason)
    if person is not None:
        _note_person(console, person, want_person)
        reason = ""
    return Answer(False, reason or None)


def _person_asked(text: str) -> str | None:
    """Return the reason of ``/agent [why]`` typed as an answer, or ``None`` for another."""
    command, _, reason = text.partition(" ")
    return reason.strip() if command.lower() == "/agent" else None


def _note_person(console: Console, reason: str, want_person: WantPerson | None) -> None:
    console.status(words.PERSON_HOLDS_NO_APPROVAL if want_person is None else want_person(reason))
