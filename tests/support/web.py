"""The HTTP service in tests: the app over a scripted model, uvicorn on 127.0.0.1, SSE.

``build_service`` wires a ``ConversationService`` the way ``travel-assistant serve`` does
(a SQLite checkpointer and a session registry on their own connections, in one file);
``LiveServer`` runs an app with uvicorn in a thread on a free loopback port;
``parse_sse`` reads an event stream; ``flight_then_hotel_script`` is the conversation of
the README (a flight change, then a hotel booking), as scripted model replies.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from sqlalchemy import select

from conversations.sessions import SessionRegistry
from db.engine import Database
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_TICKET_NO
from db.models import Flight, TicketFlight
from evaluation import Resolver
from server.app import create_app
from server.auth import TokenSigner
from server.limits import ServerLimits, uvicorn_config
from server.service import ConversationService
from server.startup import StartupApp
from tests.support.assistants import build_assistant
from tests.support.scripted import ScriptedChatModel, call, say

SECRET = "test-secret-" + "x" * 40
HOTEL_NAME = "Grand Hotel Drei Rosen"


def build_service(
    db: Database, model: Any, sessions_path: Path, **build: Any
) -> ConversationService:
    """Return the service over ``db`` and ``model``, saving conversations in ``sessions_path``."""
    sessions_path.parent.mkdir(parents=True, exist_ok=True)
    saver = SqliteSaver(sqlite3.connect(sessions_path, check_same_thread=False))
    saver.setup()
    assistant = build_assistant(db, model, saver, **build)
    return ConversationService(assistant, SessionRegistry.open(sessions_path))


def build_app(service: ConversationService, **options: Any) -> tuple[FastAPI, TokenSigner]:
    """Return the app over ``service`` (``options`` of ``create_app``) and its token signer."""
    signer = TokenSigner(SECRET)
    return create_app(service, signer, **options), signer


def auth(signer: TokenSigner, passenger_id: str) -> dict[str, str]:
    """Return the Authorization header of ``passenger_id``."""
    return {"Authorization": f"Bearer {signer.issue(passenger_id)}"}


@dataclass(frozen=True)
class Event:
    """One server-sent event: its name and its JSON data."""

    name: str
    data: dict[str, Any]


def parse_sse(text: str) -> list[Event]:
    """Return the events of an event stream (comments, such as pings, are skipped)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            events.append(Event(name, json.loads("\n".join(data))))
    return events


def free_port() -> int:
    """Return a TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LiveServer:
    """Run ``app`` with uvicorn on 127.0.0.1 in a thread, as a context manager.

    uvicorn is configured as ``travel-assistant serve`` configures it, under ``limits``;
    ``app`` is the application, or what ``serve`` listens with (``server.startup``).
    """

    def __init__(self, app: FastAPI | StartupApp, limits: ServerLimits | None = None) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        config = uvicorn_config(app, limits or ServerLimits(), log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.socket.close()


# --- the README's conversation -------------------------------------------------------------


@dataclass(frozen=True)
class Trip:
    """What the scripted assistant books: tomorrow's LX0112 and two nights in Basel."""

    new_flight_id: int
    hotel_id: int
    checkin: date
    checkout: date


def plan_trip(db: Database) -> Trip:
    """Return tomorrow's LX0112 of the fixture ticket and the Basel hotel stay."""
    resolve = Resolver(db)
    with db.session() as session:
        segment = session.scalars(
            select(TicketFlight).where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
        ).one()
        current = session.get(Flight, segment.flight_id)
        assert current is not None
        checkin = (current.scheduled_departure + timedelta(days=1)).date()
    tomorrow = resolve(f"{{flight:{FIXTURE_FLIGHT_NO}+1}}")
    hotel = resolve(f"{{hotel:{HOTEL_NAME}}}")
    return Trip(tomorrow, hotel, checkin, checkin + timedelta(days=2))


FLIGHT_REQUEST = "I'd like to fly to Basel tomorrow instead of today."
HOTEL_REQUEST = "Thanks! Can you also book me a luxury hotel in Basel for two nights?"
DECLINE_REASON = "Too expensive for me."


def flight_then_hotel_script(trip: Trip) -> list[AIMessage]:
    """Return the model's replies: move the flight (approved), book a hotel (declined)."""
    return [
        say("", call("ToFlightBookingAssistant", {"request": "Move to tomorrow's LX0112"})),
        say(
            "Tomorrow's LX0112 leaves at the same time and has Economy seats. I'll move you now.",
            call(
                "update_ticket_to_new_flight",
                {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id},
            ),
        ),
        say("Done: you are on tomorrow's LX0112."),
        say("", call("CompleteOrEscalate", {"cancel": False, "reason": "Customer wants a hotel."})),
        say(
            "",
            call(
                "ToHotelBookingAssistant",
                {
                    "location": "Basel",
                    "checkin_date": trip.checkin.isoformat(),
                    "checkout_date": trip.checkout.isoformat(),
                    "request": "luxury",
                },
            ),
        ),
        say(
            f"The {HOTEL_NAME} has rooms for those two nights.",
            call(
                "book_hotel",
                {
                    "hotel_id": trip.hotel_id,
                    "checkin_date": trip.checkin.isoformat(),
                    "checkout_date": trip.checkout.isoformat(),
                },
            ),
        ),
        say("No problem, I have not booked it. Would a cheaper hotel suit you?"),
    ]


class EchoModel(ScriptedChatModel):
    """A model that answers every message, for as long as it is asked: "Noted: <text>"."""

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.received.append(list(messages))
        last = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        text = str(last.content)[:40] if last is not None else ""
        return AIMessage(content=f"Noted: {text}")


def stream_events(lines: Iterator[str]) -> list[Event]:
    """Return the events of a stream read line by line."""
    return parse_sse("\n".join(lines) + "\n\n")


def hotel_bookings(db: Database, passenger_id: str) -> list[tuple[int, date, date]]:
    """Return the passenger's hotel stays: (hotel, check-in, check-out)."""
    from db.models import HotelBooking

    with db.session() as session:
        rows = session.execute(
            select(HotelBooking.hotel_id, HotelBooking.checkin_date, HotelBooking.checkout_date)
            .where(HotelBooking.passenger_id == passenger_id)
            .order_by(HotelBooking.id)
        ).all()
    return [(r[0], r[1], r[2]) for r in rows]


def as_replies(script: list[AIMessage]) -> list[Any]:
    """Return ``script`` as replies of the scripted OpenAI-compatible server."""
    from tests.support.fake_openai import Reply

    return [
        Reply(text=str(m.content), tool_calls=[(c["name"], c["args"]) for c in m.tool_calls])
        for m in script
    ]


def read_all(sock: socket.socket, timeout: float) -> bytes:
    """Return what the server sends on ``sock`` until it closes the connection (or ``timeout``)."""
    sock.settimeout(timeout)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return received
