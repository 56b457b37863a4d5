"""The people behind the desk over HTTP: agents and supervisors, logins and names.

An agent's token works the desk (the queue, take, write, propose, hand back) but never
decides a staff check, nor reads what only supervisors read (403, saying why). A
supervisor decides checks, never one they proposed: four eyes go by the login, whatever
name a token carries. Who holds a conversation is compared by login too. Customers only
ever read the name a member of staff goes by, never their login (an e-mail address here),
in the history, the pending actions, where they stand, and the events of a turn; the
audit log records logins.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from fastapi.testclient import TestClient

from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from server.auth import (
    AGENT,
    ALGORITHM,
    AUDIENCE,
    ISSUER,
    MAX_SUBJECT_CHARS,
    SUPERVISOR,
    Role,
    TokenSigner,
)
from server.service import ConversationService
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel
from tests.support.web import SECRET, Trip, build_app, parse_sse, plan_trip

ANA_LOGIN, ANA_NAME = "ana.lima@example.com", "Ana Lima"
BRUNO_LOGIN, BRUNO_NAME = "bruno.costa@example.com", "Bruno Costa"
LOGINS = (ANA_LOGIN, BRUNO_LOGIN, "ana.lima", "bruno.costa")
DESK = "/api/v1/supervisor/desk"
# EUR 10.00: every flight change of the fixture moves more, and waits for a staff check.
CHECK_ABOVE = 1000


@pytest.fixture
def served(
    make_assistant: Any, model: ScriptedChatModel
) -> Iterator[tuple[TestClient, TokenSigner, ConversationService]]:
    """The service over a store of its own, with the second approval above EUR 10."""
    store = ConversationStore.in_memory()
    assistant = make_assistant(checkpointer=store.saver, retry_policy=None)
    service = ConversationService.over_store(assistant, store, check_above=CHECK_ABOVE)
    app, signer = build_app(service)
    with TestClient(app) as client:
        yield client, signer, service
    store.close()


def bearer(
    signer: TokenSigner, subject: str, role: Role | None = None, name: str | None = None
) -> dict[str, str]:
    token = signer.issue(subject, role=role, name=name) if role else signer.issue(subject)
    return {"Authorization": f"Bearer {token}"}


def handed_to_a_person(client: TestClient, customer: dict[str, str]) -> str:
    """A new conversation of the customer, waiting in the desk's queue."""
    conversation = client.post("/api/v1/conversations", headers=customer).json()["conversation_id"]
    asked = client.post(
        f"/api/v1/conversations/{conversation}/person",
        json={"reason": "move my flight please"},
        headers=customer,
    )
    assert asked.status_code == 200, asked.text
    return str(conversation)


def change(trip: Trip) -> dict[str, Any]:
    """A proposal to move the fixture ticket to tomorrow's flight (above EUR 10)."""
    return {
        "action": "update_ticket_to_new_flight",
        "args": {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id},
    }


def customer_says_yes(client: TestClient, customer: dict[str, str], conversation: str) -> str:
    """The customer approves the action a person proposed; return what the stream said."""
    base = f"/api/v1/conversations/{conversation}"
    (action,) = client.get(f"{base}/pending", headers=customer).json()["actions"]
    decision = {"tool_call_id": action["tool_call_id"], "approved": True}
    answered = client.post(f"{base}/decisions", json={"decisions": [decision]}, headers=customer)
    assert answered.status_code == 200, answered.text
    assert any("checks it too" in json.dumps(e.data) for e in parse_sse(answered.text))
    return answered.text


def the_check(client: TestClient, supervisor: dict[str, str]) -> int:
    (check,) = client.get(f"{DESK}/checks", headers=supervisor).json()["checks"]
    assert check["status"] == "waiting"
    return int(check["check_id"])


def settled(client: TestClient, customer: dict[str, str], conversation: str) -> None:
    """Wait until no turn of the conversation runs (the staff's decision applied)."""
    started = time.monotonic()
    while client.get(f"/api/v1/conversations/{conversation}", headers=customer).json()["busy"]:
        assert time.monotonic() - started < 20, "the checked action never ran"
        time.sleep(0.05)


def test_an_agents_token_works_the_desk_but_never_decides_a_check(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    agent = bearer(signer, ANA_LOGIN, AGENT, ANA_NAME)
    supervisor = bearer(signer, BRUNO_LOGIN, SUPERVISOR, BRUNO_NAME)
    trip, before = plan_trip(travel_db), ticket_flight(travel_db)
    # Another passenger's conversation, never handed to a person: not the agent's to read.
    other = bearer(signer, BUSINESS_PASSENGER_ID)
    elsewhere = client.post("/api/v1/conversations", headers=other).json()["conversation_id"]
    conversation = handed_to_a_person(client, customer)

    # The desk: the queue, the conversation waiting in it, take, write, propose.
    me = client.get("/api/v1/supervisor/me", headers=agent).json()
    assert (me["role"], me["login"], me["name"]) == (AGENT, ANA_LOGIN, ANA_NAME)
    (waiting,) = client.get(f"{DESK}/queue", headers=agent).json()["waiting"]
    assert waiting["conversation_id"] == conversation
    read = client.get(f"/api/v1/supervisor/conversations/{conversation}", headers=agent)
    assert read.status_code == 200, read.text
    taken = client.post(f"{DESK}/{conversation}/take", headers=agent)
    assert taken.status_code == 200, taken.text
    assert (taken.json()["agent"], taken.json()["agent_login"]) == (ANA_NAME, ANA_LOGIN)
    held = client.get(f"/api/v1/supervisor/conversations/{conversation}", headers=agent)
    assert held.status_code == 200, held.text  # theirs now
    wrote = client.post(f"{DESK}/{conversation}/messages", json={"text": "Hi"}, headers=agent)
    assert wrote.status_code == 200, wrote.text
    proposed = client.post(f"{DESK}/{conversation}/proposals", json=change(trip), headers=agent)
    assert proposed.status_code == 200, proposed.text
    customer_says_yes(client, customer, conversation)

    # What only a supervisor may: the checks, every conversation, the audit log.
    check_id = the_check(client, supervisor)
    for method, path, body in (
        ("GET", f"{DESK}/checks", None),
        ("POST", f"{DESK}/checks/{check_id}", {"approved": True}),
        ("POST", f"{DESK}/checks/{check_id}", {"approved": False, "reason": "no"}),
        ("GET", "/api/v1/supervisor/audit", None),
        ("GET", f"/api/v1/supervisor/conversations/{elsewhere}", None),
    ):
        refused = client.request(method, path, json=body, headers=agent)
        assert refused.status_code == 403, (method, path, refused.text)
        detail = refused.json()["detail"]
        assert detail.startswith("This is an agent's token"), detail
        assert "supervisor's token" in detail
    decide = client.post(f"{DESK}/checks/{check_id}", json={"approved": True}, headers=agent)
    assert "Only a supervisor's token decides staff checks" in decide.json()["detail"]
    # The agent's list holds only what waits for a person or is theirs.
    listed = client.get("/api/v1/supervisor/conversations", headers=agent).json()
    assert [c["conversation_id"] for c in listed["conversations"]] == [conversation]
    everything = client.get("/api/v1/supervisor/conversations", headers=supervisor).json()
    assert {c["conversation_id"] for c in everything["conversations"]} == {
        conversation,
        elsewhere,
    }

    # Nothing an agent sent decided the check: it waits, and nothing was written.
    assert the_check(client, supervisor) == check_id
    assert ticket_flight(travel_db) == before
    decided = client.post(f"{DESK}/checks/{check_id}", json={"approved": True}, headers=supervisor)
    assert decided.status_code == 200, decided.text
    settled(client, customer, conversation)
    assert ticket_flight(travel_db) == trip.new_flight_id
    back = client.post(f"{DESK}/{conversation}/hand-back", json={"note": ""}, headers=agent)
    assert back.status_code == 200, back.text


def test_a_supervisor_never_decides_the_check_of_an_action_they_proposed(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    # Four eyes go by the login: Ana's own login under another name is still Ana, and
    # another login under Ana's name is another person.
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    ana = bearer(signer, ANA_LOGIN, SUPERVISOR, ANA_NAME)
    ana_renamed = bearer(signer, ANA_LOGIN, SUPERVISOR, "A. Lima")
    namesake = bearer(signer, BRUNO_LOGIN, SUPERVISOR, ANA_NAME)
    trip, before = plan_trip(travel_db), ticket_flight(travel_db)
    conversation = handed_to_a_person(client, customer)
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    proposed = client.post(f"{DESK}/{conversation}/proposals", json=change(trip), headers=ana)
    assert proposed.status_code == 200, proposed.text
    customer_says_yes(client, customer, conversation)
    check_id = the_check(client, ana)
    # The check says who proposed it and that the customer said yes; it is marked as
    # Ana's own for Ana (under either name), and not for the namesake.
    for who, yours in ((ana, True), (ana_renamed, True), (namesake, False)):
        (seen,) = client.get(f"{DESK}/checks", headers=who).json()["checks"]
        assert (seen["proposed_by"], seen["proposed_by_login"]) == (ANA_NAME, ANA_LOGIN)
        assert (seen["customer_approved"], seen["yours"]) == (True, yours)
    for who in (ana, ana_renamed):
        for decision in ({"approved": True}, {"approved": False, "reason": "no"}):
            own = client.post(f"{DESK}/checks/{check_id}", json=decision, headers=who)
            assert own.status_code == 409, own.text
            detail = own.json()["detail"]
            # What the person sees (the action, its amount, the passenger), not a number.
            assert detail.startswith("You proposed Change flight (To pay: EUR "), detail
            assert FIXTURE_PASSENGER_ID in detail and f"check {check_id}" not in detail
            assert "another member of staff must decide" in detail
    assert the_check(client, ana) == check_id  # still waiting
    assert ticket_flight(travel_db) == before
    decided = client.post(f"{DESK}/checks/{check_id}", json={"approved": True}, headers=namesake)
    assert decided.status_code == 200, decided.text
    assert (decided.json()["staff"], decided.json()["staff_login"]) == (ANA_NAME, BRUNO_LOGIN)
    settled(client, customer, conversation)
    assert ticket_flight(travel_db) == trip.new_flight_id


def test_who_holds_a_conversation_is_compared_by_login_not_by_name(
    served: tuple[TestClient, TokenSigner, ConversationService],
) -> None:
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    ana = bearer(signer, ANA_LOGIN, AGENT, ANA_NAME)
    ana_renamed = bearer(signer, ANA_LOGIN, AGENT, "Ana")
    namesake = bearer(signer, BRUNO_LOGIN, AGENT, ANA_NAME)
    conversation = handed_to_a_person(client, customer)
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    base = f"/api/v1/conversations/{conversation}"

    # Another login under the same name holds nothing: it cannot take, write, propose,
    # hand back, nor read the conversation, and its queue holds nothing of Ana's.
    for path, body in (
        ("take", None),
        ("messages", {"text": "Written by someone else"}),
        ("proposals", {"action": "cancel_hotel", "args": {"hotel_id": 1}}),
        ("hand-back", {"note": "handed back by someone else"}),
    ):
        refused = client.post(f"{DESK}/{conversation}/{path}", json=body, headers=namesake)
        assert refused.status_code == 409, (path, refused.text)
        assert ANA_LOGIN in refused.json()["detail"]  # staff are told who, by login too
    assert client.get(f"{DESK}/queue", headers=namesake).json() == {"waiting": [], "yours": []}
    read = client.get(f"/api/v1/supervisor/conversations/{conversation}", headers=namesake)
    assert read.status_code == 403, read.text
    texts = [i["text"] for i in client.get(f"{base}/messages", headers=customer).json()["items"]]
    assert "Written by someone else" not in texts
    assert client.get(f"{base}/person", headers=customer).json()["status"] == "with_person"

    # Ana under another name is Ana: she writes, sees it in her queue, and hands it back.
    (yours,) = client.get(f"{DESK}/queue", headers=ana_renamed).json()["yours"]
    assert yours["conversation_id"] == conversation
    wrote = client.post(
        f"{DESK}/{conversation}/messages", json={"text": "Hello"}, headers=ana_renamed
    )
    assert wrote.status_code == 200, wrote.text
    back = client.post(f"{DESK}/{conversation}/hand-back", json={"note": ""}, headers=ana_renamed)
    assert back.status_code == 200, back.text
    assert client.get(f"{base}/person", headers=customer).json()["status"] == "assistant"


def test_customers_see_the_name_of_staff_never_their_login(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    agent = bearer(signer, ANA_LOGIN, AGENT, ANA_NAME)
    supervisor = bearer(signer, BRUNO_LOGIN, SUPERVISOR, BRUNO_NAME)
    trip = plan_trip(travel_db)
    conversation = handed_to_a_person(client, customer)
    base = f"/api/v1/conversations/{conversation}"
    seen: list[str] = []  # every answer the customer read

    def read(path: str) -> Any:
        answer = client.get(f"{base}{path}", headers=customer)
        assert answer.status_code == 200, answer.text
        seen.append(answer.text)
        return answer.json()

    client.post(f"{DESK}/{conversation}/take", headers=agent).raise_for_status()
    person = read("/person")
    assert (person["status"], person["agent"]) == ("with_person", ANA_NAME)
    assert person["text"].startswith(f"{ANA_NAME} from our customer-service team")
    client.post(
        f"{DESK}/{conversation}/messages", json={"text": "Hello, I'm Ana."}, headers=agent
    ).raise_for_status()
    client.post(
        f"{DESK}/{conversation}/proposals", json=change(trip), headers=agent
    ).raise_for_status()
    (action,) = read("/pending")["actions"]
    assert action["proposed_by"] == ANA_NAME
    seen.append(customer_says_yes(client, customer, conversation))
    decided = client.post(
        f"{DESK}/checks/{the_check(client, supervisor)}",
        json={"approved": True},
        headers=supervisor,
    )
    assert decided.status_code == 200, decided.text
    settled(client, customer, conversation)
    # The turn the staff's yes ran, as the customer's page follows it.
    followed = client.get(f"{base}/events", headers=customer)
    assert followed.status_code == 200, followed.text
    seen.append(followed.text)
    events = " ".join(json.dumps(e.data) for e in parse_sse(followed.text))
    assert f"Approved by you and by {BRUNO_NAME}" in events, events
    items = read("/messages")["items"]
    assert [i["person"] for i in items if i.get("person")] == [ANA_NAME, ANA_NAME]
    texts = " ".join(i["text"] for i in items)
    assert f"Approved by you and by {BRUNO_NAME}" in texts
    client.post(
        f"{DESK}/{conversation}/hand-back", json={"note": "moved the flight"}, headers=agent
    ).raise_for_status()
    assert read("/person")["text"].startswith(f"{ANA_NAME} handed the conversation back")
    read("")
    read("/messages")
    listed = client.get("/api/v1/conversations", headers=customer)
    seen.append(listed.text)

    for login in LOGINS:
        assert not any(login in text for text in seen), login
    # Staff compare and record logins: the audit log names Ana and Bruno by theirs.
    audit = client.get(
        "/api/v1/supervisor/audit", params={"conversation_id": conversation}, headers=supervisor
    ).json()["entries"]
    acts = {(e["supervisor"], e["looked_at"]) for e in audit}
    assert {
        (ANA_LOGIN, "took"),
        (ANA_LOGIN, "proposed"),
        (BRUNO_LOGIN, "approved"),
        (ANA_LOGIN, "handed back"),
    } <= acts
    assert not {who for who, _ in acts} & {ANA_NAME, BRUNO_NAME}


@pytest.mark.parametrize(
    "name",
    ["Ana\x00Lima", "\ud800", "Ana\nLima", "x" * (MAX_SUBJECT_CHARS + 1), " ", 42, None],
    ids=["nul", "lone-surrogate", "newline", "too-long", "blank", "a-number", "null"],
)
def test_a_staff_token_whose_name_cannot_be_one_gets_401_never_500(
    served: tuple[TestClient, TokenSigner, ConversationService], name: object
) -> None:
    # Signed with the service's own secret, so only the name is wrong.
    client, _signer, _service = served
    now = datetime.now(UTC)
    claims = {"sub": ANA_LOGIN, "role": AGENT, "name": name, "iss": ISSUER, "aud": AUDIENCE}
    token = jwt.encode(
        {**claims, "iat": now, "exp": now + timedelta(hours=1)}, SECRET, algorithm=ALGORITHM
    )
    for path in ("/api/v1/supervisor/me", f"{DESK}/queue"):
        answer = client.get(path, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 401, (path, answer.text)
        assert answer.json()["detail"] == "The token is not valid."


def test_a_hand_back_over_a_pending_action_says_what_it_ends_before_it_ends_it(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    # Refused once with what it would end (the customer approved it; a check waits), so
    # the person decides knowing it; confirmed, it ends it as the record says.
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    ana = bearer(signer, ANA_LOGIN, SUPERVISOR, ANA_NAME)
    trip, before = plan_trip(travel_db), ticket_flight(travel_db)
    conversation = handed_to_a_person(client, customer)
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    assert client.post(
        f"{DESK}/{conversation}/proposals", json=change(trip), headers=ana
    ).is_success
    customer_says_yes(client, customer, conversation)
    back = f"{DESK}/{conversation}/hand-back"
    refused = client.post(back, json={"note": "Done."}, headers=ana)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"] == (
        "Handing back now ends what is pending: Change flight: the customer approved it and "
        "it waits for a staff check; it is withdrawn, not done. Confirm to go on."
    )
    base = f"/api/v1/conversations/{conversation}"
    assert len(client.get(f"{base}/pending", headers=customer).json()["actions"]) == 1
    done = client.post(back, json={"note": "Done.", "end_pending": True}, headers=ana)
    assert done.status_code == 200, done.text
    items = client.get(f"{base}/messages", headers=customer).json()["items"]
    (action,) = [i for i in items if i["type"] == "action"]
    assert (
        "you approved; withdrawn when customer service handed back, before the check"
        in (action["text"])
    )
    assert ticket_flight(travel_db) == before
