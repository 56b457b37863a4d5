"""A customer and a person from the desk over HTTP, on two workers of one store (issue 29).

Two services over one conversation store (SQLite file, or PostgreSQL), each behind its
own uvicorn, as two ``serve`` workers are: the customer talks to one, the person at the
desk to the other. The customer asks for a person; the desk's queue shows it with their
place; one person takes it and a second cannot; what the person writes is in the
customer's history with their name; what the customer writes meanwhile reaches the
person and the model is not called; handed back with a note, the assistant answers the
next message having read the note, which the customer never sees. The supervisor's view
says who answers all along (waiting, held by whom, the assistant again), and a staff
check carries the lines the customer said yes to. Tokens of the wrong side are refused,
and each staff action is in the audit log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from conversations.desk_rows import canonical_login
from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from server.app import create_app
from server.auth import SUPERVISOR, TokenSigner
from server.service import ConversationService
from tests.support.assistants import build_assistant
from tests.support.conversation_stores import scratch_conversations
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel, say
from tests.support.web import (
    FLIGHT_REQUEST,
    SECRET,
    LiveServer,
    flight_then_hotel_script,
    parse_sse,
    plan_trip,
)

ANA = "Ana Lima"
BRUNO = "Bruno Costa"
NOTE = "Refund of EUR 80.00 for the broken seat approved; reference R-2231."
ANSWER = "The refund for your seat is on its way (reference R-2231)."


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with scratch_conversations(request.param, tmp_path) as where:
        yield where


@contextmanager
def two_workers(
    travel_db: Database, location: str, model: ScriptedChatModel, check_above: int | None = None
) -> Iterator[tuple[str, str, TokenSigner]]:
    """Two services over the store at ``location``, each on a port of its own."""
    signer = TokenSigner(SECRET)
    with ExitStack() as stack:
        urls = []
        for _ in range(2):
            store = stack.enter_context(ConversationStore.open(location))
            assistant = build_assistant(travel_db, model, store.saver, retry_policy=None)
            service = ConversationService.over_store(assistant, store, check_above=check_above)
            server = stack.enter_context(LiveServer(create_app(service, signer)))
            urls.append(server.url)
        yield urls[0], urls[1], signer


def client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def answers(staff: httpx.Client, conversation: str) -> tuple[str, str, str]:
    """Return who answers ``conversation`` as the supervisor's view and its list say."""
    detail = staff.get(f"/api/v1/supervisor/conversations/{conversation}")
    assert detail.status_code == 200, detail.text
    head = detail.json()["conversation"]
    listed = staff.get("/api/v1/supervisor/conversations").json()["conversations"]
    (row,) = [c for c in listed if c["conversation_id"] == conversation]
    said = (head["answers"], head["person"], head["answers_text"])
    assert (row["answers"], row["person"], row["answers_text"]) == said
    return said


def turn(http: httpx.Client, path: str, body: dict[str, Any]) -> list[Any]:
    with http.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        return parse_sse(response.read().decode())


def test_a_customer_and_a_person_talk_over_two_workers(travel_db: Database, location: str) -> None:
    model = ScriptedChatModel(script=[say(ANSWER)])
    with two_workers(travel_db, location, model) as (front, back, signer):
        customer = client(front, signer.issue(FIXTURE_PASSENGER_ID))
        ana = client(back, signer.issue(ANA, role=SUPERVISOR))
        bruno = client(front, signer.issue(BRUNO, role=SUPERVISOR))
        with customer, ana, bruno:
            conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
            base = f"/api/v1/conversations/{conversation}"
            assert customer.get(f"{base}/person").json()["status"] == "assistant"

            asked = customer.post(f"{base}/person", json={"reason": "my seat was broken"})
            assert asked.status_code == 200, asked.text
            assert asked.json()["status"] == "waiting"
            assert asked.json()["place"] == 1
            assert "number 1 in the queue" in asked.json()["text"]

            assert answers(ana, conversation) == ("waiting", "", "Waiting for a person")
            queue = ana.get("/api/v1/supervisor/desk/queue").json()
            (waiting,) = queue["waiting"]
            assert waiting["conversation_id"] == conversation
            assert (waiting["reason"], waiting["requested_by"]) == (
                "my seat was broken",
                "customer",
            )
            assert waiting["place"] == 1
            assert queue["yours"] == []

            # Waiting: the customer's message is kept for the person; the model is not asked.
            events = turn(customer, f"{base}/messages", {"text": "Is anyone there?"})
            assert [e.name for e in events][-1] == "done"
            assert model.received == []

            taken = ana.post(f"/api/v1/supervisor/desk/{conversation}/take")
            assert taken.status_code == 200, taken.text
            assert (taken.json()["status"], taken.json()["agent"]) == ("held", ANA)
            refused = bruno.post(f"/api/v1/supervisor/desk/{conversation}/take")
            assert refused.status_code == 409
            assert ANA in refused.json()["detail"]
            person = customer.get(f"{base}/person").json()
            assert (person["status"], person["agent"]) == ("with_person", ANA)
            # Who holds it, on either worker, for any supervisor.
            assert answers(bruno, conversation) == ("person", ANA, f"Held by {ANA}")

            wrote = ana.post(
                f"/api/v1/supervisor/desk/{conversation}/messages",
                json={"text": "Hello, I am Ana. I see the broken seat on your last flight."},
            )
            assert wrote.status_code == 200, wrote.text
            assert (
                bruno.post(
                    f"/api/v1/supervisor/desk/{conversation}/messages", json={"text": "Hi"}
                ).status_code
                == 409
            )
            assert customer.get(f"{base}/person").json()["messages"] > person["messages"]

            items = customer.get(f"{base}/messages").json()["items"]
            said = [
                (i["type"], i.get("person", ""), i["text"]) for i in items if i["type"] != "notice"
            ]
            assert said == [
                ("customer", "", "I would like to talk to a person: my seat was broken"),
                ("customer", "", "Is anyone there?"),
                ("assistant", ANA, "Hello, I am Ana. I see the broken seat on your last flight."),
            ]
            turn(customer, f"{base}/messages", {"text": "Thank you, Ana."})
            assert model.received == []

            back_again = ana.post(
                f"/api/v1/supervisor/desk/{conversation}/hand-back", json={"note": NOTE}
            )
            assert back_again.status_code == 200, back_again.text
            assert (back_again.json()["status"], back_again.json()["note"]) == ("returned", NOTE)
            assert customer.get(f"{base}/person").json()["status"] == "assistant"
            assert ana.get("/api/v1/supervisor/desk/queue").json() == {"waiting": [], "yours": []}
            assert answers(bruno, conversation) == (
                "assistant",
                "",
                "With the assistant (primary assistant)",
            )

            events = turn(customer, f"{base}/messages", {"text": "So where is my refund?"})
            assert [e.name for e in events][-1] == "done"
            (prompt,) = model.received
            assert any(NOTE in str(m.content) for m in prompt), "the model never read the note"
            shown = customer.get(f"{base}/messages").json()["items"]
            assert not any(NOTE in i["text"] for i in shown), "the note reached the customer"
            assert shown[-1]["text"] == ANSWER and shown[-1]["person"] == ""

            audit = ana.get("/api/v1/supervisor/audit", params={"conversation_id": conversation})
            done = [(e["supervisor"], e["looked_at"]) for e in audit.json()["entries"]]
            # The audit log records the login in its one canonical form.
            login = canonical_login(ANA)
            assert (login, "took") in done and (login, "handed back") in done


def test_each_side_keeps_to_its_own_routes(travel_db: Database, tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[])
    with two_workers(travel_db, str(tmp_path / "conversations" / "sessions.sqlite"), model) as (
        front,
        _,
        signer,
    ):
        customer = client(front, signer.issue(FIXTURE_PASSENGER_ID))
        staff = client(front, signer.issue(ANA, role=SUPERVISOR))
        with customer, staff:
            conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
            assert customer.get("/api/v1/supervisor/desk/queue").status_code == 403
            assert customer.post(f"/api/v1/supervisor/desk/{conversation}/take").status_code == 403
            base = f"/api/v1/conversations/{conversation}"
            assert staff.post(f"{base}/person", json={}).status_code == 403
            # Not handed to anyone: nothing to take, and nobody to write as.
            assert staff.post(f"/api/v1/supervisor/desk/{conversation}/take").status_code == 404
            customer.post(f"{base}/person", json={})
            not_held = staff.post(
                f"/api/v1/supervisor/desk/{conversation}/messages", json={"text": "Hi"}
            )
            assert not_held.status_code == 409
            assert "take it first" in not_held.json()["detail"]


def test_a_large_amount_waits_for_a_staff_yes_on_another_worker(
    travel_db: Database, location: str
) -> None:
    # The second approval over HTTP: the customer's yes on one worker, the staff's on
    # the other; nothing is written before both, and the customer's side goes on once.
    trip = plan_trip(travel_db)
    model = ScriptedChatModel(script=flight_then_hotel_script(trip)[:3])
    before = ticket_flight(travel_db)
    with two_workers(travel_db, location, model, check_above=1000) as (front, back, signer):
        customer = client(front, signer.issue(FIXTURE_PASSENGER_ID))
        ana = client(back, signer.issue(ANA, role=SUPERVISOR))
        with customer, ana:
            conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
            base = f"/api/v1/conversations/{conversation}"
            turn(customer, f"{base}/messages", {"text": FLIGHT_REQUEST})
            (action,) = customer.get(f"{base}/pending").json()["actions"]
            assert action["check"] is None
            decision = {"tool_call_id": action["tool_call_id"], "approved": True}
            events = turn(customer, f"{base}/decisions", {"decisions": [decision]})
            records = [e.data["item"]["text"] for e in events if e.name == "record"]
            assert any("checks it too" in text for text in records), records
            (waiting,) = customer.get(f"{base}/pending").json()["actions"]
            assert waiting["check"]["status"] == "waiting"
            assert ticket_flight(travel_db) == before
            early = customer.post(f"{base}/resume")
            assert early.status_code == 409 and "checks it too" in early.json()["detail"]

            (check,) = ana.get("/api/v1/supervisor/desk/checks").json()["checks"]
            assert (check["conversation_id"], check["amount"]) == (
                conversation,
                action["preview"]["amount"],
            )
            # What the customer said yes to, word for word, on the other worker too.
            assert check["lines"] == action["preview"]["lines"]
            assert check["lines"][-1] == check["amount"] and len(check["lines"]) > 1
            decided = ana.post(
                f"/api/v1/supervisor/desk/checks/{check['check_id']}", json={"approved": True}
            )
            assert decided.status_code == 200, decided.text
            assert decided.json()["lines"] == action["preview"]["lines"]
            again = ana.post(
                f"/api/v1/supervisor/desk/checks/{check['check_id']}", json={"approved": False}
            )
            assert again.status_code == 409
            # The last approval came from staff: the action runs now, on the worker that
            # took it, though the customer's page never asks it to go on.
            waited = time.monotonic()
            while time.monotonic() - waited < 20 and (
                ticket_flight(travel_db) == before or customer.get(base).json()["busy"]
            ):
                time.sleep(0.05)
            assert ticket_flight(travel_db) == trip.new_flight_id
            assert customer.post(f"{base}/resume").status_code == 409  # once
            assert customer.get(f"{base}/pending").json()["actions"] == []
            lines = [i["text"] for i in customer.get(f"{base}/messages").json()["items"]]
            assert any(t.startswith(f"Approved by you and by {ANA}") for t in lines), lines
            audit = ana.get("/api/v1/supervisor/audit", params={"conversation_id": conversation})
            assert (canonical_login(ANA), "approved") in [
                (e["supervisor"], e["looked_at"]) for e in audit.json()["entries"]
            ]
