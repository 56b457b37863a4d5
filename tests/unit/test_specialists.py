"""Specialists are data: a fifth one registered from this module runs end to end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.types import RetryPolicy
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from assistants.approvals import Amount, facts_of
from assistants.specialists import SPECIALISTS, Specialist, build_crew
from conversations.assistant import Decision, Thread
from db.engine import Database
from db.errors import InvalidInputError
from db.fixtures import FIXTURE_PASSENGER_ID
from graph import draw_mermaid
from tests.support.assistants import build_assistant
from tests.support.scripted import ScriptedChatModel, call, say
from tools import DomainTools, Preview

NO_RETRY = RetryPolicy(max_attempts=1)
THREAD = Thread("lounge-1", FIXTURE_PASSENGER_ID)
LOUNGES = {1: ("Aspire Lounge Basel", 3900), 2: ("Skyview Lounge Paris", 4500)}


class ToLoungeAssistant(BaseModel):
    """Hand the conversation to the lounge specialist to book airport lounge access."""

    request: str = Field(description="Which airport and when the customer wants a lounge.")


@dataclass(frozen=True)
class LoungeQuote:
    lounge_id: int
    amount_kind = "pay"

    @property
    def amount_cents(self) -> int:
        return LOUNGES[self.lounge_id][1]

    def lines(self) -> list[str]:
        name, cents = LOUNGES[self.lounge_id]
        return [f"Lounge: {name}", f"To pay: EUR {cents / 100:.2f}"]


def quote_lounge(session: Session, passenger: str, args: Mapping[str, Any], now: datetime) -> Any:
    lounge_id = int(args["lounge_id"])
    if lounge_id not in LOUNGES:
        raise InvalidInputError(f"No lounge {lounge_id}.")
    return LoungeQuote(lounge_id)


def lounge_specialist(booked: list[int]) -> Specialist:
    def make_lounge_tools(db: Database) -> DomainTools:
        @tool
        def search_lounges() -> list[dict[str, Any]]:
            """List the airport lounges with their price."""
            return [{"lounge_id": k, "name": n, "price": c} for k, (n, c) in LOUNGES.items()]

        @tool
        def book_lounge(lounge_id: int) -> str:
            """Book lounge access for the customer."""
            booked.append(lounge_id)
            return f"Booked lounge {lounge_id}."

        return DomainTools(
            safe=(search_lounges,),
            sensitive=(book_lounge,),
            previews={"book_lounge": Preview("Book lounge", quote_lounge)},
        )

    return Specialist(
        name="book_lounge",
        title="lounge specialist",
        duty="You book airport lounge access.",
        hand_over="book airport lounge access.",
        routing_tool=ToLoungeAssistant,
        make_tools=make_lounge_tools,
        label="lounges",
    )


def test_specialists_a_fifth_specialist_runs_end_to_end(travel_db: Database) -> None:
    booked: list[int] = []
    crew = build_crew(travel_db, (*SPECIALISTS, lounge_specialist(booked)))
    model = ScriptedChatModel()
    assistant = build_assistant(travel_db, model, crew=crew, retry_policy=NO_RETRY)
    hand_over = call("ToLoungeAssistant", {"request": "a lounge in Basel"})
    search = call("search_lounges")
    book = call("book_lounge", {"lounge_id": 1})
    model.extend(say("", hand_over), say("", search), say("", book))
    list(assistant.send(THREAD, "Can I get lounge access in Basel?"))

    # Entered: the stack holds the new specialist, which ran its safe tool and stopped
    # before its write.
    assert assistant.active_assistant(THREAD) == "book_lounge"
    primary_prompt = model.received[0][0]
    assert isinstance(primary_prompt, SystemMessage)
    assert "- ToLoungeAssistant: book airport lounge access." in str(primary_prompt.content)
    assert "lounge specialist" in str(model.received[1][0].content)
    (pending,) = assistant.pending_actions(THREAD)
    assert (pending.name, pending.assistant) == ("book_lounge", "book_lounge")
    preview = assistant.preview(THREAD, pending)
    assert preview.title == "Book lounge"
    assert preview.lines == ["Lounge: Aspire Lounge Basel", "To pay: EUR 39.00"]
    assert preview.amount == Amount("pay", 3900)
    assert booked == []
    assert assistant.call_kind("ToLoungeAssistant") == "routing"
    assert assistant.call_kind("book_lounge") == "sensitive"
    assert assistant.label("book_lounge") == "lounges"

    leave = call("CompleteOrEscalate", {"cancel": True, "reason": "lounge booked"})
    model.extend(say("", leave), say("Your lounge is booked."))
    list(assistant.resolve(THREAD, {pending.tool_call_id: Decision(True)}))
    assert booked == [1]
    assert assistant.active_assistant(THREAD) == "primary_assistant"
    messages = assistant.messages(THREAD)
    answers = {m.tool_call_id: facts_of(m) for m in messages if m.type == "tool"}
    assert answers[hand_over["id"]].hand_over == "enter"
    assert answers[hand_over["id"]].specialist == "book_lounge"
    assert answers[search["id"]].ran and answers[book["id"]].ran
    assert answers[leave["id"]].hand_over == "leave"
    assert answers[leave["id"]].specialist == "book_lounge"
    assert isinstance(messages[-1], AIMessage)
    assert messages[-1].content == "Your lounge is booked."


def test_specialists_fifth_specialist_gets_its_four_nodes(travel_db: Database) -> None:
    crew = build_crew(travel_db, (*SPECIALISTS, lounge_specialist([])))
    drawing = draw_mermaid(travel_db, crew)
    for node in ("enter_book_lounge", "book_lounge_safe_tools", "book_lounge_sensitive_tools"):
        assert node in drawing
    assistant = build_assistant(travel_db, crew=crew)
    assert "book_lounge_sensitive_tools" in assistant.graph.interrupt_before_nodes
    assert len(assistant.graph.interrupt_before_nodes) == 5
