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
    "step_limit": "the assistant ran out of steps",
    "cancelled": "the turn was cancelled",
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
