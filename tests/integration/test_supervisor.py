"""The supervisor's view over HTTP: a real client against uvicorn, on SQLite and PostgreSQL.

A passenger moves a flight (approved) and asks for a hotel (left waiting), another's
turn fails on the model server; a supervisor reads both conversations: the specialist at
work, the hand-overs, each tool call with its arguments and raw result, each approval
with the lines and amount the customer was shown, the money moved and the errors. The
supervisor's token changes nothing, a passenger's reads nothing of the supervisor's,
and every look is in the store's audit log, which outlives the service and
``travel-assistant audit`` prints.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from assistants.providers import ModelProviderError
from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from server.app import create_app
from server.auth import SUPERVISOR, TokenSigner
from server.service import ConversationService
from tests.support.assistants import build_assistant
from tests.support.cli import run
from tests.support.conversation_stores import scratch_conversations
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel, say
from tests.support.web import (
    FLIGHT_REQUEST,
    HOTEL_REQUEST,
    SECRET,
    LiveServer,
    flight_then_hotel_script,
    hotel_bookings,
    parse_sse,
    plan_trip,
)

SUPERVISOR_NAME = "ana.lopez@meridian.example"
MODEL_DOWN = "Cannot reach the model server: connection refused."


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where the conversations and the audit log live, on each engine."""
    with scratch_conversations(request.param, tmp_path) as where:
        yield where


@contextmanager
def served(
    travel_db: Database, location: str, model: ScriptedChatModel
) -> Iterator[tuple[str, TokenSigner, ConversationService]]:
    """``travel-assistant serve``'s service over the store at ``location``, on a free port."""
    with ConversationStore.open(location) as store:
        assistant = build_assistant(travel_db, model, store.saver, retry_policy=None)
        service = ConversationService.over_store(assistant, store)
        signer = TokenSigner(SECRET)
        with LiveServer(create_app(service, signer)) as server:
            yield server.url, signer, service


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def turn(client: httpx.Client, path: str, body: dict[str, Any]) -> list[Any]:
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        return parse_sse(response.read().decode())


def test_supervisor_sees_every_conversation_step_by_step_and_changes_nothing(
    travel_db: Database, location: str
) -> None:
    trip = plan_trip(travel_db)
    stays = hotel_bookings(travel_db, FIXTURE_PASSENGER_ID)
    model = ScriptedChatModel(
        script=[*flight_then_hotel_script(trip)[:-1], ModelProviderError(MODEL_DOWN)]
    )
    with served(travel_db, location, model) as (url, signer, _service):
        customer = httpx.Client(
            base_url=url, headers=bearer(signer.issue(FIXTURE_PASSENGER_ID)), timeout=30
        )
        other = httpx.Client(
            base_url=url, headers=bearer(signer.issue(BUSINESS_PASSENGER_ID)), timeout=30
        )
        desk = httpx.Client(
            base_url=url,
            headers=bearer(signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)),
            timeout=30,
        )
        with customer, other, desk:
            mine = customer.post("/api/v1/conversations").json()["conversation_id"]
            base = f"/api/v1/conversations/{mine}"
            turn(customer, f"{base}/messages", {"text": FLIGHT_REQUEST})
            (flight,) = customer.get(f"{base}/pending").json()["actions"]
            turn(
                customer,
                f"{base}/decisions",
                {"decisions": [{"tool_call_id": flight["tool_call_id"], "approved": True}]},
            )
            turn(customer, f"{base}/messages", {"text": HOTEL_REQUEST})
            (hotel,) = customer.get(f"{base}/pending").json()["actions"]
            theirs = other.post("/api/v1/conversations").json()["conversation_id"]
            failed = turn(other, f"/api/v1/conversations/{theirs}/messages", {"text": "Hello?"})
            assert failed[-1].name == "error"

            assert desk.get("/api/v1/supervisor/me").json()["name"] == SUPERVISOR_NAME
            listed = desk.get("/api/v1/supervisor/conversations").json()["conversations"]
            assert {(c["passenger_id"], c["conversation_id"]) for c in listed} == {
                (FIXTURE_PASSENGER_ID, mine),
                (BUSINESS_PASSENGER_ID, theirs),
            }
            row = next(c for c in listed if c["conversation_id"] == mine)
            assert (row["assistant_title"], row["pending_actions"], row["turns"]) == (
                "hotel specialist",
                1,
                2,
            )

            detail = desk.get(f"/api/v1/supervisor/conversations/{mine}").json()
            steps = detail["steps"]
            hand_overs = [
                (s["from_title"], s["to_title"]) for s in steps if s["type"] == "hand_over"
            ]
            assert hand_overs == [
                ("primary assistant", "flights specialist"),
                ("flights specialist", "primary assistant"),
                ("primary assistant", "hotel specialist"),
            ]
            assert [a["name"] for a in detail["assistants"] if a["active"]] == [
                detail["conversation"]["assistant"]
            ]
            calls = {s["tool"]: s for s in steps if s["type"] == "tool_call"}
            change = calls["update_ticket_to_new_flight"]
            assert change["arguments"] == {
                "ticket_no": FIXTURE_TICKET_NO,
                "new_flight_id": trip.new_flight_id,
            }
            assert change["outcome"] == "ok" and FIXTURE_TICKET_NO in change["result"]
            assert change["assistant_title"] == "flights specialist"
            # The hotel booking waits: no answer yet, and the customer's card is shown.
            assert calls["book_hotel"]["outcome"] is None
            assert calls["book_hotel"]["result"] is None
            assert detail["pending"] == [hotel]
            (approval,) = [s for s in steps if s["type"] == "approval"]
            # What the customer was shown when approving, line for line, and its amount.
            assert approval["lines"] == flight["preview"]["lines"]
            assert approval["amount"] == flight["preview"]["amount"]
            assert (approval["outcome"], approval["moved"]) == ("approved", True)
            assert approval["amount_kind"] == "pay" and approval["amount_cents"] > 0
            assert detail["money"]["charged_cents"] == approval["amount_cents"]
            assert detail["money"]["charged"] in approval["amount"]
            assert detail["money"]["refunded_cents"] == 0
            assert [s["text"] for s in steps if s["type"] == "customer"] == [
                FLIGHT_REQUEST,
                HOTEL_REQUEST,
            ]
            assert detail["errors"] == []

            broken = desk.get(f"/api/v1/supervisor/conversations/{theirs}").json()
            (error,) = broken["errors"]
            assert (error["source"], error["kind"]) == ("turn", "model")
            assert MODEL_DOWN in (error["detail"] or error["text"])
            assert desk.get("/api/v1/supervisor/conversations/no-such-thing").status_code == 404

            # Read-only: the supervisor can neither decide the hotel nor write anything.
            decide = {"decisions": [{"tool_call_id": hotel["tool_call_id"], "approved": True}]}
            for method, path, body in [
                ("POST", f"{base}/decisions", decide),
                ("POST", f"{base}/messages", {"text": "Book it."}),
                ("POST", "/api/v1/conversations", None),
                ("GET", f"{base}/messages", None),
                ("GET", "/api/v1/conversations", None),
            ]:
                refused = desk.request(method, path, json=body)
                assert refused.status_code == 403, (method, path, refused.text)
            for path in ("/me", "/conversations", f"/conversations/{mine}", "/audit"):
                refused = customer.get(f"/api/v1/supervisor{path}")
                assert refused.status_code == 403, (path, refused.text)
            assert customer.get(f"{base}/pending").json()["actions"] == [hotel]
    assert hotel_bookings(travel_db, FIXTURE_PASSENGER_ID) == stays
    assert ticket_flight(travel_db) == trip.new_flight_id


def test_supervisor_looks_are_audited_durably(travel_db: Database, location: str) -> None:
    with served(travel_db, location, ScriptedChatModel()) as (url, signer, _service):
        conversation = httpx.post(
            f"{url}/api/v1/conversations",
            headers=bearer(signer.issue(FIXTURE_PASSENGER_ID)),
            timeout=30,
        ).json()["conversation_id"]
        with httpx.Client(
            base_url=url,
            headers=bearer(signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)),
            timeout=30,
        ) as desk:
            started = datetime.now(UTC)
            for _ in range(3):  # a page refreshing: one entry per look within minutes
                assert desk.get("/api/v1/supervisor/conversations").status_code == 200
                assert desk.get(f"/api/v1/supervisor/conversations/{conversation}").is_success
            entries = desk.get("/api/v1/supervisor/audit").json()["entries"]
            mine = desk.get(
                "/api/v1/supervisor/audit", params={"conversation_id": conversation}
            ).json()["entries"]
    assert [(e["supervisor"], e["looked_at"], e["passenger_id"]) for e in entries] == [
        (SUPERVISOR_NAME, "conversation", FIXTURE_PASSENGER_ID),
        (SUPERVISOR_NAME, "conversations", ""),
    ]
    assert [e["looked_at"] for e in mine] == ["conversation"]
    when = datetime.fromisoformat(entries[0]["at"])
    assert started - timedelta(seconds=1) <= when <= datetime.now(UTC)

    # Kept in the store: a new process reads it, and a look minutes later is a new entry.
    with ConversationStore.open(location) as store:
        assert len(store.audit.entries()) == 2
        later = when + timedelta(minutes=6)
        assert store.audit.record(SUPERVISOR_NAME, "conversations", later)
        assert not store.audit.record(SUPERVISOR_NAME, "conversations", later)
        assert store.audit.record("someone.else", "conversations", later)
        assert len(store.audit.entries(supervisor=SUPERVISOR_NAME)) == 3
    printed = run(["--conversations", location, "audit", "--conversation", conversation])
    assert printed.code == 0, printed.err
    assert SUPERVISOR_NAME in printed.out and conversation in printed.out
    assert "someone.else" not in printed.out


def test_supervisor_list_version_moves_with_what_the_view_shows(
    travel_db: Database, location: str
) -> None:
    # Each conversation of the list has a version, which a page showing it compares to
    # read it again only when it moved: reading moves nothing; a turn, a request for a
    # person, a person taking it (no message saved), writing and handing it back each do.
    model = ScriptedChatModel(script=[say("Hello, how can I help?")])
    with served(travel_db, location, model) as (url, signer, _service):
        customer = httpx.Client(
            base_url=url, headers=bearer(signer.issue(FIXTURE_PASSENGER_ID)), timeout=30
        )
        desk = httpx.Client(
            base_url=url,
            headers=bearer(signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)),
            timeout=30,
        )
        with customer, desk:
            conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
            base = f"/api/v1/conversations/{conversation}"
            staff = f"/api/v1/supervisor/desk/{conversation}"

            def version() -> str:
                (row,) = desk.get("/api/v1/supervisor/conversations").json()["conversations"]
                detail = desk.get(f"/api/v1/supervisor/conversations/{conversation}").json()
                assert detail["conversation"] == row  # the view's head is the list's row
                return str(row["version"])

            versions = [version()]
            assert version() == versions[0]  # reading moves nothing
            turn(customer, f"{base}/messages", {"text": "Hello"})
            versions.append(version())
            customer.post(f"{base}/person", json={"reason": "lost bag"}).raise_for_status()
            versions.append(version())
            desk.post(f"{staff}/take").raise_for_status()
            versions.append(version())
            desk.post(f"{staff}/messages", json={"text": "Ana here."}).raise_for_status()
            versions.append(version())
            desk.post(f"{staff}/hand-back", json={"note": ""}).raise_for_status()
            versions.append(version())
            assert version() == versions[-1]
            (row,) = desk.get("/api/v1/supervisor/conversations").json()["conversations"]
            # Hello, its reply, the request for a person, the person's message.
            assert row["messages"] == customer.get(base).json()["messages"] == 4
    assert len(set(versions)) == len(versions), versions
