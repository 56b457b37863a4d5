"""A new bookable domain is declarations only: lounge access, added from this module.

The "Adding a specialist" steps of docs/architecture.md, done here without touching
production code: two tables (on their own metadata, created in the test's database), a
``ReservationKind`` over them, a ``ReservationTools`` with the text the model reads, a
routing tool and a ``Specialist`` row. The scripted model then hands over to the sixth
specialist, which searches, books (stopping for approval), has the write approved and
returns with ``CompleteOrEscalate``.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import RetryPolicy
from pydantic import BaseModel, Field
from sqlalchemy import Date, DateTime, Integer, String, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from assistants.approvals import Amount, facts_of
from assistants.specialists import SPECIALISTS, Specialist, build_crew
from conversations.assistant import Decision, Thread, TravelAssistant
from db import reservations
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from db.models import Payment
from db.periods import Period
from db.reservation_kind import ReservationKind
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, call, say
from tools.reservations import ReservationTools

NO_RETRY = RetryPolicy(max_attempts=1)
THREAD = Thread("lounge-1", FIXTURE_PASSENGER_ID)
VISIT = (FIXED_NOW.date() + timedelta(days=5)).isoformat()


class LoungeBase(DeclarativeBase):
    """The new domain's tables, kept off the product's metadata."""


class Lounge(LoungeBase):
    __tablename__ = "test_lounges"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(80))
    location: Mapped[str] = mapped_column(String(80))
    price_cents: Mapped[int] = mapped_column(Integer)
    seats: Mapped[int] = mapped_column(Integer)


class LoungeBooking(LoungeBase):
    __tablename__ = "test_lounge_bookings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    passenger_id: Mapped[str] = mapped_column(String(20))
    lounge_id: Mapped[int] = mapped_column(Integer)
    date: Mapped[date] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(10))
    total_cents: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


LOUNGE = ReservationKind(
    kind="lounge",
    noun="lounge",
    label="Lounge reservation",
    payment_prefix="lounge",
    booking_model=LoungeBooking,
    catalogue_model=Lounge,
    catalogue_key="lounge_id",
    period=Period(fields=("date",)),
    free_hours=24,
    late_fee_what="the price paid is not refunded",
    late_fee_parts=lambda dates: 1,
    rate=Lounge.price_cents,
    capacity=Lounge.seats,
    shown=(Lounge.name, Lounge.location, Lounge.price_cents, Lounge.seats),
    full_message="{item.name} has no seat left on {day}.",
    missing_item="No lounge with id {id} exists. Use search_lounges to find the lounge_id.",
    missing_booking="No lounge reservation with id {id} exists.",
    unchanged="is already on {dates}",
    price_detail="1 visit x {rate}",
    change_detail=None,
    results_key="lounges",
    search_columns=(Lounge.location, Lounge.name),
    summary_key="lounge_reservations",
    summary_title="Lounges",
    summary_columns=(Lounge.name, Lounge.location),
    placeholder="lounge",
    placeholder_columns=(Lounge.name,),
)

LOUNGE_TOOLS = ReservationTools(
    kind=LOUNGE,
    search_name="search_lounges",
    search_doc="""Search airport lounges by city or name.

    Args:
        location: City, or part of it, e.g. "Basel".
        name: Lounge name, or part of it.
    """,
    book_doc="""Book a visit to an airport lounge for the customer and charge its price.

    Args:
        lounge_id: The lounge_id from search_lounges.
        date: The day of the visit, "YYYY-MM-DD".
    """,
    update_doc="""Move the customer's lounge visit to another day.

    Args:
        booking_id: The lounge reservation's booking_id.
        date: The new day, "YYYY-MM-DD".
    """,
    cancel_doc="""Cancel the customer's lounge visit and refund it.

    Args:
        booking_id: The lounge reservation's booking_id.
    """,
    no_match="No lounge matches.",
)


class ToLoungeAssistant(BaseModel):
    """Hand the conversation to the lounge specialist to book airport lounge access."""

    request: str = Field(description="Which airport and when the customer wants a lounge.")


LOUNGE_SPECIALIST = Specialist(
    name="book_lounge",
    title="lounge specialist",
    duty="You book, change and cancel airport lounge visits.",
    hand_over="book, change or cancel an airport lounge visit.",
    routing_tool=ToLoungeAssistant,
    make_tools=LOUNGE_TOOLS.build,
    label="lounges",
)


@pytest.fixture
def lounge_db(travel_db: Database) -> Database:
    LoungeBase.metadata.create_all(travel_db.engine)
    with travel_db.transaction() as session:
        session.add_all(
            [
                Lounge(id=1, name="Aspire Lounge", location="Basel", price_cents=3900, seats=2),
                Lounge(id=2, name="Skyview Lounge", location="Paris", price_cents=4500, seats=1),
            ]
        )
    return travel_db


def test_adding_a_specialist_declared_domain_books_through_the_graph(lounge_db: Database) -> None:
    crew = build_crew(lounge_db, (*SPECIALISTS, LOUNGE_SPECIALIST))
    model = ScriptedChatModel()
    assistant = TravelAssistant.build(
        model, InMemorySaver(), db=lounge_db, crew=crew, retry_policy=NO_RETRY
    )
    hand_over = call("ToLoungeAssistant", {"request": "a lounge in Basel"})
    search = call("search_lounges", {"location": "basel"})
    book = call("book_lounge", {"lounge_id": 1, "date": VISIT})
    model.extend(say("", hand_over), say("", search), say("", book))
    list(assistant.send(THREAD, "Can I get lounge access in Basel?"))

    # Handed over: the sixth specialist is on top of the stack, was told who it is, and
    # its search ran with the generic reservation search.
    assert assistant.active_assistant(THREAD) == "book_lounge"
    primary_prompt = model.received[0][0]
    assert isinstance(primary_prompt, SystemMessage)
    assert "- ToLoungeAssistant: book, change or cancel an airport lounge visit." in str(
        primary_prompt.content
    )
    assert "lounge specialist" in str(model.received[1][0].content)
    found = next(m for m in model.received[2] if getattr(m, "tool_call_id", "") == search["id"])
    assert '"lounge_id": 1' in str(found.content) and "Skyview" not in str(found.content)
    assert '"price": "EUR 39.00"' in str(found.content)

    # The write stopped for approval, with the card the declaration describes.
    (pending,) = assistant.pending_actions(THREAD)
    assert (pending.name, pending.assistant) == ("book_lounge", "book_lounge")
    preview = assistant.preview(THREAD, pending)
    assert preview.title == "Book lounge"
    assert preview.lines == [
        "Aspire Lounge, Basel",
        f"Dates: {VISIT}",
        "Price: 1 visit x EUR 39.00",
        "To pay: EUR 39.00",
    ]
    assert preview.amount == Amount("pay", 3900)
    assert assistant.call_kind("book_lounge") == "sensitive"
    assert assistant.call_kind("search_lounges") == "safe"
    assert assistant.label("book_lounge") == "lounges"
    with lounge_db.session() as session:
        assert session.scalars(select(LoungeBooking)).all() == []

    # Approved: the reservation is written and charged once; then the specialist leaves.
    leave = call("CompleteOrEscalate", {"cancel": False, "reason": "lounge booked"})
    model.extend(say("", leave), say("Your lounge visit is booked."))
    list(assistant.resolve(THREAD, {pending.tool_call_id: Decision(True)}))
    with lounge_db.session() as session:
        (booking,) = session.scalars(select(LoungeBooking)).all()
        assert (booking.passenger_id, booking.lounge_id, booking.date.isoformat()) == (
            FIXTURE_PASSENGER_ID,
            1,
            VISIT,
        )
        assert (booking.status, booking.total_cents) == ("confirmed", 3900)
        charged = session.scalars(
            select(Payment.amount_cents).where(Payment.reference == f"lounge-{booking.id}")
        ).all()
        assert charged == [3900]
    assert assistant.active_assistant(THREAD) == "primary_assistant"
    messages = assistant.messages(THREAD)
    answers = {m.tool_call_id: m for m in messages if m.type == "tool"}
    assert facts_of(answers[hand_over["id"]]).specialist == "book_lounge"
    assert facts_of(answers[book["id"]]).ran
    assert f"Lounge reservation {booking.id} (Aspire Lounge) is booked for {VISIT}." in str(
        answers[book["id"]].content
    )
    assert facts_of(answers[leave["id"]]).hand_over == "leave"
    assert isinstance(messages[-1], AIMessage)
    assert messages[-1].content == "Your lounge visit is booked."


def test_adding_a_specialist_declared_domain_keeps_the_shared_rules(lounge_db: Database) -> None:
    # The generic code enforces the rules for the new kind too: capacity, dates, ownership.
    now = FIXED_NOW
    with lounge_db.transaction() as session:
        reservations.book(session, LOUNGE, FIXTURE_PASSENGER_ID, 2, (VISIT,), now)
        with pytest.raises(Exception, match="Skyview Lounge has no seat left on"):
            reservations.quote_book(session, LOUNGE, FIXTURE_PASSENGER_ID, 2, (VISIT,), now)
        with pytest.raises(Exception, match="is in the past"):
            reservations.quote_book(session, LOUNGE, FIXTURE_PASSENGER_ID, 1, ("2020-01-01",), now)
        (booking_id,) = session.scalars(select(LoungeBooking.id)).all()
        with pytest.raises(Exception, match="does not belong to passenger"):
            reservations.quote_cancel(session, LOUNGE, "0000 000000", booking_id, now)
        refunded = reservations.cancel(session, LOUNGE, FIXTURE_PASSENGER_ID, booking_id, now)
    assert refunded["refunded_cents"] == 4500
    tools = LOUNGE_TOOLS.build(lounge_db)
    assert [t.name for t in tools.sensitive] == ["book_lounge", "update_lounge", "cancel_lounge"]
    schema: dict[str, Any] = tools.tool("book_lounge").tool_call_schema.model_json_schema()
    assert list(schema["properties"]) == ["lounge_id", "date"]
