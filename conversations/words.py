"""What every caller (the terminal, the web chat) says to the customer about the assistant.

Text written for the model never reaches the customer: these are the customer's words for
what a tool is doing, why an action cannot be done, and why a call was not carried out,
keyed by the structured facts of ``assistants.approvals`` (never by matching text).
"""

from __future__ import annotations

import re
from typing import Any

# The longest customer message the assistant takes, in the terminal and over HTTP.
MAX_MESSAGE_CHARS = 4000

# What the customer is told a tool is doing (the tool names are SPEC's public names). A
# tool missing here is shown as "working on it".
TOOL_ACTIVITY = {
    "fetch_user_flight_information": "looking up your bookings",
    "search_flights": "searching flights",
    "lookup_policy": "checking our policy",
    "search_car_rentals": "searching rental cars",
    "search_hotels": "searching hotels",
    "search_trip_recommendations": "searching excursions",
    "tavily_search": "searching the web",
}

# Why an action cannot be done, in the customer's words, by the kind of refusal.
REFUSAL_WORDS = {
    "not_found": "what it refers to could not be found",
    "not_yours": "it concerns a booking that is not yours",
    "rules": "our rules do not allow it",
    "unavailable": "there is no availability for it",
    "invalid": "some of its details are not valid",
    "other": "it cannot be done",
}
# Refusals whose first sentence states a fact the customer can use ("Flight LX0112 ...
# has no Economy seat left."); the others name arguments, which the customer never sees.
REFUSALS_WITH_DETAIL = frozenset({"not_yours", "rules", "unavailable"})

# Why a call was not carried out, for /history.
NOT_DONE_WORDS = {
    "no_decision": "no answer was given",
    "superseded": "you sent a new message instead of answering",
    "handed_back": "customer service handed the conversation back before you decided",
    "asked_for_person": "you asked for a person instead of answering",
    "handed_back_checked": (
        "you approved; withdrawn when customer service handed back, before the check"
    ),
    "withdrawn": "you withdrew it",
    "edited": "you approved; customer service changed its details, so you were asked again",
    "step_limit": "the assistant ran out of steps",
    "cancelled": "the turn was cancelled",
    # A call left by a turn cut short for another reason than a cancel (``cut_reason``).
    "service": "the service stopped during the turn",
    "model": "the model server failed during the turn",
    "time_limit": "the turn ran past its time limit",
    "crash": "the program stopped during the turn",
    "lost_claim": "another window took over the conversation",
    "unknown_tool": "the assistant made a mistake",
    "one_specialist_at_a_time": "another specialist was busy",
}


def _first_sentence(text: str) -> str:
    """Return the first sentence of ``text`` (the rest of a refusal is for the model)."""
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text.strip(), maxsplit=1)[0]
    return first[:300]


def refusal_text(preview: Any) -> str:
    """Say, for the customer, why the action of ``preview`` cannot be done."""
    kind = preview.refusal or "other"
    text = f"This cannot be done: {REFUSAL_WORDS.get(kind, REFUSAL_WORDS['other'])}."
    if kind in REFUSALS_WITH_DETAIL and preview.error:
        text += f" {_first_sentence(preview.error)}"
    return text


# --- what a turn and the history say ---------------------------------------------------------

DONE_RESULT = "Done."
FAILED_RESULT = "It did not go through: our rules did not allow it when it ran."
# What ``/history`` says where a turn was cut short, by why (``CutCause``).
CUT_NOTICES = {
    "cancelled": "This turn was cancelled; nothing more was done.",
    "service": "This turn was cut short: the service stopped while the assistant was "
    "answering. Nothing more was done.",
    "model": "This turn was cut short: the model server failed. Nothing more was done.",
    "time_limit": "This turn was cut short: it ran past its time limit. Nothing more was done.",
    "crash": "This turn was cut short: the program answering it stopped part-way (it was "
    "closed, it failed, or another window took the conversation over). Nothing more was done.",
    "lost_claim": "This turn was cut short: another window took over the conversation. "
    "Nothing more was done.",
}
TURN_CANCELLED_NOTICE = CUT_NOTICES["cancelled"]
# Said when a conversation is opened, or a message sent, after a turn whose program died.
CUT_TURN_CLOSED = (
    "Your last message was not answered: the program answering it stopped before it "
    "finished (it was closed, or it failed). Send it again if you still need it."
)
# Said in the window whose turn lost the conversation to another one.
FIRST_MESSAGE_TAKEN_BACK = (
    "Turn cancelled before it started: your message was not sent (the assistant was still "
    "starting). Press Up to get it back."
)
LOST_CLAIM = (
    "This conversation was taken over by another window, terminal or server while the "
    "assistant was answering here, so this answer stopped and what it said after that "
    "point was not saved. Open the conversation again to see where it stands."
)
# Who cancelled a turn decides what the customer is told.
CANCELLED = {
    "customer": "Turn cancelled: the assistant stopped and nothing more was done. "
    "Your message stays in the conversation.",
    "service": "The service stopped while the assistant was answering; the turn was cut "
    "short and nothing more was done. Send your message again.",
}
CONVERSATION_SAVED = "Your conversation is saved."
BUSY_ELSEWHERE = (
    "This conversation is busy in another window, terminal or server: the assistant is "
    "answering there. Try again when it has answered."
)
ANSWER_FIRST = (
    "First, an action in this conversation is waiting for your decision. Your message "
    "was not sent: send it again after deciding."
)
DECIDED_ELSEWHERE = (
    "This conversation changed in another window while you decided: your answer was not used."
)
NOTHING_PENDING = "Nothing in this conversation is waiting for your decision."
NO_ANSWER_REASON = "The customer did not answer the approval prompt."


def tool_activity(tool: str) -> str:
    """Say what a safe tool is doing ("searching flights")."""
    return TOOL_ACTIVITY.get(tool, "working on it")


def takes_over(specialist_title: str) -> str:
    """Say that a specialist takes over ("the flights specialist takes over")."""
    return f"the {specialist_title} takes over"


def not_done_reason(not_run: str | None, cut: str | None = None) -> str:
    """Say why a call was not carried out (``cut``: why its turn was cut short, if it was)."""
    if not_run == "cancelled" and cut in NOT_DONE_WORDS:
        return NOT_DONE_WORDS[cut or ""]
    return NOT_DONE_WORDS.get(not_run or "", "it was not run")


def action_status(
    title: str, outcome: str, recovered: bool, result: str | None, reason: str | None
) -> str:
    """Say, as a turn goes on, what became of an action ("Change flight: done.")."""
    if outcome == "approved" and recovered:
        done = f"{title}: this was already done before the interruption."
        return f"{done} {result}" if result and result != DONE_RESULT else done
    if outcome == "approved":
        return f"{title}: done."
    if outcome == "failed":
        return f"{title}: it did not go through; the assistant will explain."
    if outcome == "declined":
        return f"{title}: declined."
    if outcome == "refused":
        return f"{title}: not possible; the assistant is told why."
    return f"{title}: not done ({reason or 'it was not run'})."


def action_line(
    title: str,
    outcome: str,
    lines: tuple[str, ...],
    result: str | None,
    reason: str | None,
    checked_by: str | None = None,
) -> str:
    """Say, in the history, what became of an action, with the amount the customer saw.

    ``checked_by`` names the member of staff whose second approval decided it with the
    customer's yes: both approvals are said.
    """
    amount = f" ({lines[-1]})" if lines else ""
    if outcome in ("approved", "failed") and checked_by:
        return f"Approved by you and by {checked_by} ({CHECK_LABEL}): {title}{amount}. " + (
            result or DONE_RESULT
        )
    if outcome in ("approved", "failed"):
        return f"Approved: {title}{amount}. {result or DONE_RESULT}"
    if outcome == "declined" and checked_by:
        return f"Refused by {checked_by} ({CHECK_LABEL}) after your yes: {title}{amount}. " + (
            f"Reason: {reason}" if reason else "No reason given."
        )
    if outcome == "declined":
        why = f" Reason: {reason}" if reason else " No reason given."
        return f"Declined: {title}{amount}.{why}"
    if outcome == "refused":
        return f"Not possible: {title}" + (f" ({reason})" if reason else "")
    return f"Not done: {title} ({reason or 'it was not run'})."


# What a web customer is told when the model server or the service failed: never the
# operator's detail, which goes to the service's log under ``reference``.
MODEL_UNAVAILABLE = (
    "The assistant cannot answer right now. Your conversation is saved; "
    "send your message again in a moment."
)
SERVICE_FAILED = "Something went wrong on our side. Your conversation is saved; please try again."
NOTHING_RUNNING = "The assistant is not answering in this conversation right now."
STOP_ELSEWHERE = (
    "The assistant is answering this conversation elsewhere (another window, terminal or "
    "server); stop it there, or wait for the reply."
)
DELETE_WHILE_BUSY = (
    "The assistant is answering in this conversation; stop it or wait before deleting it."
)


def with_reference(text: str, reference: str) -> str:
    """Add the reference a customer can quote to a failure's ``text``."""
    return f"{text} (Reference {reference}.)"


def model_failure(detail: str) -> str:
    """Say that the model server failed, and that nothing is lost."""
    return f"{detail} {CONVERSATION_SAVED}"


# --- a person from the customer-service team (``conversations.desk``) -------------------------

PERSON_HOLDS_NO_APPROVAL = (
    "An action is waiting for your decision: answer it first, then ask for a person."
)
PERSON_AFTER_DECISION = (
    "You will be put in the queue for a person as soon as you have answered: a person "
    "cannot take the conversation while an action waits for your decision."
)
STAFF_LABEL = "customer service"
LEFT_QUEUE = "You left the queue for a person; the assistant answers your next message."
NOT_IN_QUEUE = "You are not waiting for a person."
WITHDRAWN_NOTE = (
    "(The customer no longer waits for a person from customer service: answer them "
    "yourself from here on.)"
)


def held_cannot_withdraw(agent: str) -> str:
    """Return why a request a person already took cannot be withdrawn."""
    return (
        f"{agent} from our customer-service team has your conversation already; "
        "they hand it back to the assistant when you are done."
    )


def asked_for_person(reason: str) -> str:
    """Return the customer's request for a person as the history keeps it."""
    return "I would like to talk to a person" + (f": {reason}" if reason else ".")


def waiting_for_person(place: int | None) -> str:
    """Return what the customer is told while the conversation waits in the queue."""
    where = f" You are number {place} in the queue." if place else ""
    return (
        "A person from our customer-service team will answer here; the assistant will not "
        f"reply meanwhile.{where} You can keep writing: they will read it."
    )


def with_person(agent: str) -> str:
    """Return what the customer is told while a person holds the conversation."""
    return f"{agent} from our customer-service team has your conversation and will answer here."


ASSISTANT_ANSWERS = "The assistant answers your messages."


def back_with_assistant(agent: str) -> str:
    """Return what the customer is told when the person hands the conversation back."""
    return f"{agent} handed the conversation back to the assistant; it answers your next message."


# --- a second approval by staff, above an amount (``conversations.desk`` checks) -------------

CHECK_LABEL = "customer-service check"


def waits_for_check(titles: str, above: str) -> str:
    """Return what the customer is told when their yes waits for a member of staff's."""
    return (
        f"{titles}: moves more than {above}, so a member of our customer-service team checks "
        "it too before it is done. Nothing is charged until then; you will see their answer "
        "here, and the action is done at once if they agree."
    )


def check_decided(staff: str, title: str, approved: bool, reason: str) -> str:
    """Return what the customer is told when the check of their yes is decided."""
    if approved:
        return f"{staff} of our customer-service team approved {title}; it is being done now."
    why = f" Their reason: {reason}" if reason else ""
    return f"{staff} of our customer-service team did not approve {title}.{why}"


PRESS_ENTER_TO_GO_ON = "Press Enter to go on."
APPLIED_LATER = "The decision is kept: it is applied as soon as that turn ends."
APPLIED_ELSEWHERE = "The customer's side has applied the decision already."
APPLIED_BY_CUSTOMER = (
    "This desk has no model configured, so the customer's side applies the decision: "
    "their window at once, or the service."
)


def apply_failed(why: str) -> str:
    """Return what the desk is told when applying a decision failed there."""
    return (
        f"Applying the decision here failed ({why}); it is kept, and the customer's side "
        "goes on with it."
    )


def desk_outcome(title: str, outcome: str, reason: str | None) -> str:
    """Return what the desk is told became of an action once its checks were applied."""
    why = f": {reason}" if reason else "."
    if outcome == "approved":
        return f"{title}: done. The customer sees it in their conversation."
    if outcome == "failed":
        return f"{title}: the rules refused it when it ran{why}"
    return f"{title}: not done{why}"


NOTHING_CHECKED = "No action waits for a check by our customer-service team here."
CHECK_WAITING = (
    "You said yes; a member of our customer-service team checks it too before it is done. "
    "Nothing is charged until then."
)


def own_proposal(title: str, amount: str, passenger_id: str) -> str:
    """Return why a member of staff cannot decide the check of what they proposed."""
    moves = f" ({amount})" if amount else ""
    return (
        f"You proposed {title}{moves} for passenger {passenger_id}, so another member of "
        "staff must decide its check: a second approval needs a second person."
    )


NOTHING_TO_WITHDRAW = "No action waits in this conversation: there is nothing to withdraw."


def withdrawn(titles: str) -> str:
    """Return what the customer is told when they withdraw the pending actions."""
    return f"Withdrawn: {titles}. Nothing was done or charged."


def would_end(title: str, *, approved: bool) -> str:
    """Return how a pending action stands, for staff about to hand back or close.

    ``approved``: the customer said yes and a member of staff's check waits.
    """
    if not approved:
        return f"{title}: waiting for the customer's decision; it ends as not done"
    return (
        f"{title}: the customer approved it and it waits for a staff check; it is "
        "withdrawn, not done"
    )


# How a refusal that asks to confirm a hand-back ends (the terminal desk asks y/N on it).
CONFIRM_END = "Confirm to go on."


def hand_back_would_end(ending: list[str], *, close: bool) -> str:
    """Return what a hand-back (or close) over pending actions is refused with, beforehand."""
    act = "Closing" if close else "Handing back"
    return f"{act} now ends what is pending: {'; '.join(ending)}. {CONFIRM_END}"


KEPT_WHILE_CHECKED = (
    "Your message is kept. An action you approved waits for a member of our "
    "customer-service team to check it; the assistant answers once they have. To drop the "
    "action instead, withdraw it (/withdraw)."
)


def person_proposes(title: str) -> str:
    """Return what the customer reads with an action a person proposes for their approval."""
    return f"I propose this for you: {title}. Please check it and answer yes or no."


def person_edits(title: str) -> str:
    """Return what the customer reads with an action a member of staff changed at its check."""
    return (
        f"Our team changed the details of {title} before approving it. Please check the new "
        "details and answer yes or no."
    )


# The reason kept on a check its edit withdrew (never shown to the customer as a refusal).
EDITED_CHECK = "Edited at the check: the customer is asked again with the new details."

PERSON_PROPOSED = "An action waits for your decision. Press Enter to see it and answer."


def person_action_note(agent: str) -> str:
    """Return the note for the model after an action a person put to the customer ran."""
    return (
        f"[Note for the assistant, not shown to the customer: {agent} of the customer-service "
        "team held the conversation when this action was decided; they proposed it or "
        "oversaw it, and the customer's decision and the result are above.]"
    )


def staff_note(agent: str, note: str) -> str:
    """Return a person's note for the model, written when they hand the conversation back."""
    return (
        f"[Note from {agent} of the customer-service team to the assistant, not shown to the "
        f"customer] {note}"
    )


# --- a new conversation in the web chat ------------------------------------------------------

WELCOME = (
    "I can look up your bookings, change or cancel your flights, and book hotels, rental "
    "cars and excursions. Nothing is booked or changed until you say yes."
)
# The questions a new conversation offers a passenger without a flight ahead.
GENERAL_QUESTIONS = (
    "What are my bookings?",
    "Find me a flight",
    "Book a hotel",
    "What can I change or cancel?",
)


def first_questions(flight_no: str, arrival_city: str, destination_city: str) -> list[str]:
    """Return the questions a new conversation offers, from the passenger's next flight."""
    return [
        f"What time does my flight {flight_no} to {arrival_city} leave?",
        f"Change my flight {flight_no}",
        f"Book a hotel in {destination_city}",
        f"Rent a car in {destination_city}",
    ]
