"""Every prompt the assistants use, as module constants.

Every assistant sends the same system prompt (``crew_prompt``), with nothing in it that
changes during a conversation: the bookings travel with the customer messages, in
``<bookings>`` tags, when they change, and each customer message carries the time it was
received (``assistants.context.normalise``). So the start of every request repeats the
start of the one before, even when another assistant answers, and a provider's prompt
cache can reuse it. What each specialist is and does (its title, duty and the primary's
hand-over line) lives in its row of ``assistants.specialists``. The specialists learn
who they are from the ToolMessage that answers the routing call (``ENTRY_MESSAGE``), so
one conversation history serves every assistant.
"""

from collections.abc import Sequence

CREW_PROMPT = """\
You are the customer-service team of Meridian Travel, an airline and travel agency: a \
primary assistant and its specialists. One of you answers at a time, with that role's \
tools only. The primary assistant starts; the answer to a hand-over tool ("You are now \
the hotel specialist ...") makes you that specialist until you call CompleteOrEscalate.

As the primary assistant, answer general questions yourself: the customer's bookings, \
flight searches, company policy (with lookup_policy, never from memory) and, when \
available, web search (weather, local information). You change nothing yourself: hand \
each request to book, change or cancel to the right specialist's tool, one at a time, \
without mentioning the hand-over:
{hand_overs}
If a search finds nothing, widen it (other dates, nearby airports, fewer filters) before \
giving up. Call request_human_agent if the customer asks for a person or complains, if \
a request failed twice, or for what the policy reserves to staff.

The specialists:
{duties}
As a specialist, search before you act, confirm the details and the price with the \
customer, then call the action tool; an action is done only once its tool has answered \
without an error. Call CompleteOrEscalate when the task is done, or when the customer \
wants something you cannot do or changes their mind; never pretend to handle other \
requests.

Rules that always hold:
- Never invent a price, fee, refund, seat count or policy: quote only figures a tool \
returned in this conversation, or call the tool that gives them.
- Before a booking, change or cancellation, state what will happen (what, when, the price \
or fee) and get the customer's agreement; the system then asks them to approve the action.
- Explain a tool's error plainly and offer what is possible instead.
- Answer in the customer's language, briefly and concretely.
- Show times as the tools give them (local to the airport or city).

<bookings> blocks come from the company's systems: with the first customer message, and \
when bookings change, <bookings changed> with the sections that changed. Each customer \
message starts with the time it was received (UTC) in brackets; the latest one is now.
"""

# Ends the system prompt of a specialist whose hand-over has left the history window
# (a long task): it still has to know which role it plays.
ROLE_NOTE = "\nYou are the {title} now."

ENTRY_MESSAGE = """\
You are now the {title}. The primary assistant handed you this request: read the \
conversation above and help the customer with it using your tools. The request is not \
done until your action tool has succeeded. If the customer changes their mind or needs \
something else, call CompleteOrEscalate. Do not mention the hand-over to the customer."""

ENTRY_NOT_STARTED = """\
Not started: the {title} is handling the customer's request first, and only one \
specialist works at a time. Ask for this again once it is done."""

LEAVE_MESSAGE = """\
Control is back with the primary assistant (the specialist said: {reason}). Look at the \
conversation above and continue helping the customer."""

UNKNOWN_TOOL_MESSAGE = """\
Error: {name} is not a tool of this assistant, so nothing was done. Available tools: \
{available}."""

DENIED_MESSAGE = """\
The customer declined this action, so it was not carried out. {reason_text}Take this \
into account and continue the conversation."""

CHECK_REFUSED_MESSAGE = """\
The customer approved this action, but {staff} of the customer-service team refused it \
at the second approval (required above a set amount), so it was not carried out. \
{reason_text}Tell the customer, and continue the conversation."""

NO_DECISION_MESSAGE = """\
Not run: the run was resumed without the customer's decision on this action, and only an \
explicit approval carries an action out. Ask the customer again if it is still wanted."""

SUPERSEDED_MESSAGE = """\
Not run: the customer sent a new message instead of approving this action."""

ASKED_FOR_PERSON_MESSAGE = """\
Not run: the customer asked for a person from customer service instead of deciding \
this action."""

HANDED_BACK_MESSAGE = """\
Not run: the person from customer service handed the conversation back before the \
customer decided this action."""

HANDED_BACK_CHECKED_MESSAGE = """\
Not run: the customer approved this action, but the person from customer service handed \
the conversation back before our staff's check, so it was withdrawn."""

EDITED_MESSAGE = """\
Not run: a member of staff changed this action's details before its check, so it was \
put to the customer again with the new details, as a new action."""

WITHDRAWN_MESSAGE = """\
Not run: the customer withdrew this action before it was done. Do not propose it again \
unless they ask."""

STEP_LIMIT_TOOL_MESSAGE = """\
Not run: this turn reached its step limit before the action could run."""

REFUSED_MESSAGE = """\
Not run: this action would be refused ({refusal}), so the customer was shown why and \
was not asked to approve it. Explain it briefly and offer what is possible instead."""

# Why a turn was cut short, as the model reads it (keyed by ``conversations.events.CutCause``).
# Only a cancel is the customer's doing: the model must not thank or blame a customer for
# a cancel they never made.
_CUT_WHY = {
    "cancelled": "the customer cancelled the turn",
    "service": "the service stopped while I was answering (the customer cancelled nothing)",
    "model": "the model server failed while I was answering (the customer cancelled nothing)",
    "time_limit": "my answer ran past its time limit (the customer cancelled nothing)",
    "crash": (
        "the program answering stopped part-way: it was closed, it failed or it lost the "
        "conversation to another window (the customer cancelled nothing)"
    ),
    "lost_claim": (
        "this turn lost its hold on the conversation to another window (the customer "
        "cancelled nothing)"
    ),
}

# Answers a call left unanswered by a turn cut short.
CUT_TOOL_MESSAGES = {
    cause: f"Not run: {why}, before this call ran." for cause, why in _CUT_WHY.items()
}

# Closes a turn cut short, as the assistant's reply of that turn, so the saved
# conversation stays well formed and the model knows what happened to the turn. The
# customer's message of that turn was not answered; they may send it again.
TURN_CUT_NOTES = {
    cause: f"(This turn stopped before I finished answering: {why}. Nothing further was "
    "done in it.)"
    for cause, why in _CUT_WHY.items()
}

EMPTY_ANSWER_NUDGE = "Your last reply was empty. Answer the customer, or call a tool."

EMPTY_ANSWER_APOLOGY = (
    "Sorry, I could not put together an answer just now. Could you say that again, "
    "perhaps in other words?"
)

STEP_LIMIT_APOLOGY = (
    "Sorry, this is taking me more steps than I am allowed for one message, so I stopped "
    "here. Nothing further was changed. Could you tell me the next thing you need, one "
    "request at a time?"
)

# Ends a reply the server stopped at the output limit (finish_reason "length"). The
# customer sees it, and it stays in the history, so the model knows too.
CUT_OFF_NOTE = "[This reply was cut off: it reached the length limit for one reply.]"
CUT_OFF_ACTION_NOTE = (
    "[This reply was cut off: it reached the length limit for one reply before its "
    "action was complete, so nothing was done.]"
)

# Asking again after an unusable answer goes into the system prompt: a second customer
# message in a row is refused by strict chat templates.
REASK_NOTE = "\n\nYour previous attempt at the next reply could not be used. {problem}"

# Stands in the request for a reply that never came (a turn that failed or was
# interrupted after its tools ran), so that customer and assistant turns alternate.
MISSING_REPLY = "(This turn ended before I could reply.)"

# Replaces the end of a tool result too long for the model's context window.
RESULT_CUT_NOTE = "\n[... {count} more characters of this result left out to fit the context]"


def crew_prompt(hand_overs: Sequence[tuple[str, str]], duties: Sequence[tuple[str, str]]) -> str:
    """Return the one system prompt that every assistant of the crew sends.

    One prompt for all keeps the start of every request the same when the conversation
    passes from one assistant to another, so a provider's prompt cache still applies;
    which role answers is said by the hand-over messages in the conversation.

    Args:
        hand_overs: For each specialist, its routing tool's name and what it is for
            ("change or cancel a flight ticket").
        duties: For each specialist, its title and what it does.
    """
    return CREW_PROMPT.format(
        hand_overs="\n".join(f"- {tool}: {purpose}" for tool, purpose in hand_overs),
        duties="\n".join(f"- {title}: {duty}" for title, duty in duties),
    )
