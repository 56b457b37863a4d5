"""A login is one identity, however it is spelled (issue 48).

Logins are compared and recorded in one canonical form (``canonical_login``: NFKC,
case-folded, blanks collapsed), where tokens are verified and wherever the desk keeps or
compares one: a supervisor token for ``ANA@example.com`` cannot decide the check of an
action ``ana@example.com`` proposed, a conversation taken as ``Ana@Example.com`` is
written to as ``ana@example.com``, and the audit log records one login for all. The name
customers see keeps its spelling.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from conversations.desk_rows import Staff, canonical_login, login_of, staff_of
from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from server.auth import AGENT, SUPERVISOR, TokenSigner
from server.service import ConversationService
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel
from tests.support.web import build_app, plan_trip
from tests.unit.test_server_staff_roles import (
    DESK,
    bearer,
    change,
    customer_says_yes,
    handed_to_a_person,
    settled,
    the_check,
)

SPELLINGS = ("ana@example.com", "ANA@example.com", "Ana@Example.COM", "ＡＮＡ@example.com")


def test_every_spelling_of_a_login_is_one_canonical_login() -> None:
    assert {canonical_login(s) for s in SPELLINGS} == {"ana@example.com"}
    assert canonical_login("  Straße  Müller ") == "strasse müller"
    assert canonical_login("Ｂｒｕｎｏ") == "bruno"  # full-width letters (NFKC)
    # The desk keeps the canonical login and the name as spelled.
    assert staff_of(Staff("ANA@example.com", "Ana Lima")) == Staff("ana@example.com", "Ana Lima")
    assert staff_of("Ana Lima") == Staff("ana lima", "Ana Lima")
    assert login_of(Staff("Ana@Example.COM", "x")) == "ana@example.com"


@given(st.text(max_size=40))
def test_the_canonical_form_is_its_own_canonical_form(login: str) -> None:
    once = canonical_login(login)
    assert canonical_login(once) == once
    assert canonical_login(login.upper()) == canonical_login(login.lower()) or not login.isascii()


@pytest.fixture
def served(
    make_assistant: Any, model: ScriptedChatModel
) -> Iterator[tuple[TestClient, TokenSigner, ConversationService]]:
    store = ConversationStore.in_memory()
    assistant = make_assistant(checkpointer=store.saver, retry_policy=None)
    service = ConversationService.over_store(assistant, store, check_above=1000)
    app, signer = build_app(service)
    with TestClient(app) as client:
        yield client, signer, service
    store.close()


def test_four_eyes_hold_across_spellings_of_one_login(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    trip, before = plan_trip(travel_db), ticket_flight(travel_db)
    conversation = handed_to_a_person(client, customer)
    ana = bearer(signer, "ana@example.com", SUPERVISOR, "Ana Lima")
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    proposed = client.post(f"{DESK}/{conversation}/proposals", json=change(trip), headers=ana)
    assert proposed.status_code == 200, proposed.text
    customer_says_yes(client, customer, conversation)
    check_id = the_check(client, ana)
    for spelling in SPELLINGS[1:]:
        other = bearer(signer, spelling, SUPERVISOR, "Ana")
        own = client.post(f"{DESK}/checks/{check_id}", json={"approved": True}, headers=other)
        assert own.status_code == 409, (spelling, own.text)
        assert "another member of staff must decide" in own.json()["detail"]
    assert the_check(client, ana) == check_id and ticket_flight(travel_db) == before
    bruno = bearer(signer, "Bruno@Example.com", SUPERVISOR, "Bruno Costa")
    decided = client.post(f"{DESK}/checks/{check_id}", json={"approved": True}, headers=bruno)
    assert decided.status_code == 200, decided.text
    assert (decided.json()["staff_login"], decided.json()["staff"]) == (
        "bruno@example.com",
        "Bruno Costa",
    )
    settled(client, customer, conversation)
    assert ticket_flight(travel_db) == trip.new_flight_id


def test_who_holds_and_the_audit_log_go_by_one_login_across_spellings(
    served: tuple[TestClient, TokenSigner, ConversationService],
) -> None:
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    conversation = handed_to_a_person(client, customer)
    took = client.post(
        f"{DESK}/{conversation}/take", headers=bearer(signer, "Ana@Example.COM", AGENT, "Ana Lima")
    )
    assert took.status_code == 200, took.text
    assert (took.json()["agent_login"], took.json()["agent"]) == ("ana@example.com", "Ana Lima")
    for spelling in SPELLINGS:
        same = bearer(signer, spelling, AGENT, "Ana Lima")
        (yours,) = client.get(f"{DESK}/queue", headers=same).json()["yours"]
        assert yours["conversation_id"] == conversation
        wrote = client.post(
            f"{DESK}/{conversation}/messages", json={"text": f"Hi ({spelling})"}, headers=same
        )
        assert wrote.status_code == 200, (spelling, wrote.text)
        read = client.get(f"/api/v1/supervisor/conversations/{conversation}", headers=same)
        assert read.status_code == 200, (spelling, read.text)
    someone = bearer(signer, "anna@example.com", AGENT, "Ana Lima")
    refused = client.post(f"{DESK}/{conversation}/messages", json={"text": "x"}, headers=someone)
    assert refused.status_code == 409, refused.text
    # Customers read the name, as spelled.
    person = client.get(f"/api/v1/conversations/{conversation}/person", headers=customer).json()
    assert person["agent"] == "Ana Lima"
    # One person in the audit log, found by any spelling.
    boss = bearer(signer, "boss@example.com", SUPERVISOR)
    entries = client.get(
        "/api/v1/supervisor/audit", params={"supervisor": "ANA@EXAMPLE.COM"}, headers=boss
    ).json()["entries"]
    assert {e["supervisor"] for e in entries} == {"ana@example.com"}
    assert {"took", "conversation"} <= {e["looked_at"] for e in entries}
    me = client.get("/api/v1/supervisor/me", headers=bearer(signer, "ＡＮＡ@example.com", AGENT))
    assert me.json()["login"] == "ana@example.com"
