"""Nobody gets in where they do not belong: every endpoint, from the OpenAPI document.

The operations are read from the app's own OpenAPI document, so an endpoint added later
is checked too: without a valid token it answers 401; for another passenger's
conversation it answers 404 exactly as for one that does not exist, and changes nothing.
A passenger's token is refused (403) on every supervisor's endpoint, and a supervisor's
on every passenger's endpoint, reading or writing. An agent's token is refused on every
passenger's endpoint and on what only a supervisor may do: each staff endpoint has its
answer for an agent here, so one added later must be decided.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from fastapi.testclient import TestClient

from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID
from server.auth import AGENT, ALGORITHM, AUDIENCE, ISSUER, SUPERVISOR, TokenSigner
from server.service import ConversationService
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel
from tests.support.web import (
    FLIGHT_REQUEST,
    SECRET,
    auth,
    build_app,
    build_service,
    flight_then_hotel_script,
    hotel_bookings,
    parse_sse,
    plan_trip,
)

PUBLIC = {("get", "/api/v1/health")}
SUPERVISOR_PATHS = "/api/v1/supervisor/"
DESK_PATH = "/api/v1/supervisor/desk/"


@pytest.fixture
def service(travel_db: Database, model: ScriptedChatModel, tmp_path: Path) -> ConversationService:
    return build_service(travel_db, model, tmp_path / "sessions.sqlite", retry_policy=None)


@pytest.fixture
def setup(
    service: ConversationService, model: ScriptedChatModel, travel_db: Database
) -> Iterator[tuple[TestClient, TokenSigner, str, str]]:
    """Passenger A's conversation, stopped at a flight change waiting for approval."""
    app, signer = build_app(service)
    model.extend(*flight_then_hotel_script(plan_trip(travel_db)))
    with TestClient(app) as client:
        headers = auth(signer, FIXTURE_PASSENGER_ID)
        conversation = client.post("/api/v1/conversations", headers=headers).json()[
            "conversation_id"
        ]
        response = client.post(
            f"/api/v1/conversations/{conversation}/messages",
            json={"text": FLIGHT_REQUEST},
            headers=headers,
        )
        assert parse_sse(response.text)[-1].data["pending_actions"] == 1
        pending = client.get(f"/api/v1/conversations/{conversation}/pending", headers=headers)
        call_id = pending.json()["actions"][0]["tool_call_id"]
        yield client, signer, conversation, call_id


def operations(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    document = client.get("/openapi.json").json()
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            found.append((method, path, operation))
    assert len(found) >= 8, found
    return found


def body_for(operation: dict[str, Any], call_id: str) -> dict[str, Any] | None:
    """A valid body for the operation, so that only who asks decides the answer."""
    if "requestBody" not in operation:
        return None
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    bodies = {
        "MessageIn": {"text": "cancel everything"},
        "DecisionsIn": {"decisions": [{"tool_call_id": call_id, "approved": True}]},
        "TitleIn": {"title": "renamed by someone else"},
        "PersonIn": {"reason": "someone else wants a person"},
        "StaffMessageIn": {"text": "written by someone else"},
        "HandBackIn": {"note": "handed back by someone else", "close": False},
        "CheckDecisionIn": {"approved": True},
        "ProposalIn": {"action": "cancel_hotel", "args": {"hotel_id": 1}},
        "CheckEditIn": {"action": "cancel_hotel", "args": {"booking_id": 1}},
        "CheckRespondIn": {"text": "written by someone else"},
        "SecondApprovalIn": {"amount": "off"},
    }
    name = ref.rsplit("/", 1)[-1]
    assert name in bodies, f"no test body for {name}: add one"
    return bodies[name]


def state(client: TestClient, signer: TokenSigner, conversation: str, db: Database) -> Any:
    headers = auth(signer, FIXTURE_PASSENGER_ID)
    base = f"/api/v1/conversations/{conversation}"
    return (
        client.get(f"{base}/messages", headers=headers).json(),
        client.get(f"{base}/pending", headers=headers).json(),
        ticket_flight(db),
        hotel_bookings(db, FIXTURE_PASSENGER_ID),
    )


def call(
    client: TestClient, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
) -> Any:
    return client.request(method.upper(), path, json=body, headers=headers)


def test_server_another_passenger_gets_404_from_every_conversation_endpoint(
    setup: tuple[TestClient, TokenSigner, str, str], travel_db: Database
) -> None:
    client, signer, conversation, call_id = setup
    before = state(client, signer, conversation, travel_db)
    other = auth(signer, BUSINESS_PASSENGER_ID)
    checked = 0
    for method, path, operation in operations(client):
        if "{conversation_id}" not in path or path.startswith(SUPERVISOR_PATHS):
            continue
        body = body_for(operation, call_id)
        theirs = call(
            client, method, path.format(conversation_id=conversation, check_id=1), body, other
        )
        unknown = call(client, method, path.format(conversation_id="no-such-thing"), body, other)
        assert theirs.status_code == 404, (method, path, theirs.text)
        # Word for word the answer about a conversation that does not exist.
        assert theirs.json()["detail"].replace(conversation, "X") == unknown.json()[
            "detail"
        ].replace("no-such-thing", "X")
        checked += 1
    assert checked >= 5
    assert state(client, signer, conversation, travel_db) == before
    listed = client.get("/api/v1/conversations", headers=other).json()["conversations"]
    assert listed == []


def bad_tokens(signer: TokenSigner) -> dict[str, str]:
    now = datetime.now(UTC)
    good = signer.issue(FIXTURE_PASSENGER_ID)
    header, _payload, signature = good.split(".")
    forged_payload = jwt.encode(
        {"sub": BUSINESS_PASSENGER_ID, "iat": now, "exp": now + timedelta(hours=1)},
        "another-secret-" + "y" * 40,
        algorithm=ALGORITHM,
    ).split(".")[1]
    claims = {"sub": FIXTURE_PASSENGER_ID, "iss": ISSUER, "aud": AUDIENCE, "iat": now}
    return {
        "garbage": "not-a-token",
        "expired": signer.issue(FIXTURE_PASSENGER_ID, now=now - timedelta(days=2)),
        "other secret": TokenSigner("another-secret-" + "z" * 40).issue(FIXTURE_PASSENGER_ID),
        "payload swapped": f"{header}.{forged_payload}.{signature}",
        "alg none": jwt.encode(
            {**claims, "exp": now + timedelta(hours=1)}, key=None, algorithm="none"
        ),
        "no expiry": jwt.encode(claims, SECRET, algorithm=ALGORITHM),
        "other audience": jwt.encode(
            {**claims, "aud": "someone-else", "exp": now + timedelta(hours=1)},
            SECRET,
            algorithm=ALGORITHM,
        ),
        # The right secret and audience, but issued by someone else who holds the secret
        # (another service of the same deployment): not a token of this service.
        "other issuer": jwt.encode(
            {**claims, "iss": "someone-else", "exp": now + timedelta(hours=1)},
            SECRET,
            algorithm=ALGORITHM,
        ),
        # Each claim a token carries is required, one missing at a time.
        **{
            f"no {name}": jwt.encode(
                {
                    key: value
                    for key, value in {**claims, "exp": now + timedelta(hours=1)}.items()
                    if key != name
                },
                SECRET,
                algorithm=ALGORITHM,
            )
            for name in ("sub", "iat", "iss", "aud")
        },
        "blank subject": jwt.encode(
            {**claims, "sub": "  ", "exp": now + timedelta(hours=1)}, SECRET, algorithm=ALGORITHM
        ),
    }


def test_server_every_endpoint_needs_a_valid_token(
    setup: tuple[TestClient, TokenSigner, str, str], travel_db: Database
) -> None:
    client, signer, conversation, call_id = setup
    before = state(client, signer, conversation, travel_db)
    tokens = bad_tokens(signer)
    for method, path, operation in operations(client):
        url = path.format(conversation_id=conversation, check_id=1)
        body = body_for(operation, call_id)
        if (method, path) in PUBLIC:
            assert call(client, method, url, body, {}).status_code == 200
            continue
        missing = call(client, method, url, body, {})
        assert missing.status_code == 401, (method, path, missing.text)
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert "travel-assistant token" in missing.json()["detail"]
        for name, token in tokens.items():
            response = call(client, method, url, body, {"Authorization": f"Bearer {token}"})
            assert response.status_code == 401, (name, method, path, response.text)
        basic = call(client, method, url, body, {"Authorization": "Basic dXNlcjpwYXNz"})
        assert basic.status_code == 401
    assert (
        "expired"
        in call(
            client,
            "get",
            "/api/v1/me",
            None,
            {"Authorization": f"Bearer {tokens['expired']}"},
        ).json()["detail"]
    )
    assert state(client, signer, conversation, travel_db) == before


def test_server_roles_keep_customers_and_supervisors_to_their_own_endpoints(
    setup: tuple[TestClient, TokenSigner, str, str], travel_db: Database
) -> None:
    client, signer, conversation, call_id = setup
    before = state(client, signer, conversation, travel_db)
    customer = auth(signer, FIXTURE_PASSENGER_ID)
    # A supervisor named like a passenger still acts for no passenger.
    supervisor = {"Authorization": f"Bearer {signer.issue(FIXTURE_PASSENGER_ID, role=SUPERVISOR)}"}
    supervised = passengers = 0
    for method, path, operation in operations(client):
        if (method, path) in PUBLIC:
            continue
        url = path.format(conversation_id=conversation, check_id=1)
        body = body_for(operation, call_id)
        if path.startswith(SUPERVISOR_PATHS):
            refused = call(client, method, url, body, customer)
            assert refused.status_code == 403, (method, path, refused.text)
            assert "supervisor" in refused.json()["detail"]
            answer = call(client, method, url, body, supervisor)
            if path == f"{DESK_PATH}second-approval" and method == "put":
                # A supervisor's one write that is not to a conversation: the amount.
                assert answer.status_code == 200, (method, path, answer.text)
            elif path.startswith(DESK_PATH) and method != "get":
                # The desk's are a supervisor's only writes, and only on a conversation
                # handed to a person: this one never was.
                assert answer.status_code == 404, (method, path, answer.text)
            else:
                assert method == "get", f"a supervisor's endpoint that writes: {method} {path}"
                assert answer.status_code == 200, (method, path, answer.text)
            supervised += 1
        else:
            refused = call(client, method, url, body, supervisor)
            assert refused.status_code == 403, (method, path, refused.text)
            assert "cannot act for a passenger" in refused.json()["detail"]
            passengers += 1
    assert supervised >= 8 and passengers >= 9
    # Nothing a refused supervisor sent was run: the change still waits for approval.
    assert state(client, signer, conversation, travel_db) == before
    for method in ("post", "put", "patch", "delete"):
        url = f"/api/v1/supervisor/conversations/{conversation}"
        assert call(client, method, url, {}, supervisor).status_code == 405


# What an agent's token gets from each staff endpoint, on a conversation never handed to
# a person: the desk's writes find nothing handed (404), its own reads answer, and what
# only a supervisor may do is refused (403).
AGENT_ANSWERS = {
    ("get", "/api/v1/supervisor/me"): 200,
    ("get", "/api/v1/supervisor/conversations"): 200,  # only the queue and theirs
    ("get", "/api/v1/supervisor/conversations/{conversation_id}"): 403,  # neither
    ("get", "/api/v1/supervisor/audit"): 403,
    ("get", "/api/v1/supervisor/report"): 403,
    ("get", "/api/v1/supervisor/desk/queue"): 200,
    ("post", "/api/v1/supervisor/desk/{conversation_id}/take"): 404,
    ("post", "/api/v1/supervisor/desk/{conversation_id}/messages"): 404,
    ("post", "/api/v1/supervisor/desk/{conversation_id}/hand-back"): 404,
    ("post", "/api/v1/supervisor/desk/{conversation_id}/proposals"): 404,
    ("get", "/api/v1/supervisor/desk/checks"): 403,
    ("post", "/api/v1/supervisor/desk/checks/{check_id}"): 403,
    ("get", "/api/v1/supervisor/desk/actions"): 200,
    ("post", "/api/v1/supervisor/desk/{conversation_id}/proposals/preview"): 404,
    ("get", "/api/v1/supervisor/desk/{conversation_id}/bookings"): 403,  # neither
    ("post", "/api/v1/supervisor/desk/checks/{check_id}/edit"): 403,
    ("post", "/api/v1/supervisor/desk/checks/{check_id}/respond"): 403,
    ("get", "/api/v1/supervisor/desk/second-approval"): 200,
    ("put", "/api/v1/supervisor/desk/second-approval"): 403,
}


def test_server_an_agent_works_the_desk_and_nothing_only_a_supervisor_may(
    setup: tuple[TestClient, TokenSigner, str, str], travel_db: Database
) -> None:
    client, signer, conversation, call_id = setup
    before = state(client, signer, conversation, travel_db)
    # An agent named like a passenger still acts for no passenger.
    agent = {"Authorization": f"Bearer {signer.issue(FIXTURE_PASSENGER_ID, role=AGENT)}"}
    staff_endpoints = set()
    for method, path, operation in operations(client):
        if (method, path) in PUBLIC:
            continue
        url = path.format(conversation_id=conversation, check_id=1)
        answer = call(client, method, url, body_for(operation, call_id), agent)
        if path.startswith(SUPERVISOR_PATHS):
            staff_endpoints.add((method, path))
            assert (method, path) in AGENT_ANSWERS, f"decide what an agent gets: {method} {path}"
            assert answer.status_code == AGENT_ANSWERS[method, path], (method, path, answer.text)
            if answer.status_code == 403:
                assert answer.json()["detail"].startswith("This is an agent's token")
        else:
            assert answer.status_code == 403, (method, path, answer.text)
            assert "an agent's token" in answer.json()["detail"]
            assert "cannot act for a passenger" in answer.json()["detail"]
    assert staff_endpoints == set(AGENT_ANSWERS)
    listed = client.get("/api/v1/supervisor/conversations", headers=agent).json()
    assert listed["conversations"] == []  # nothing waits for a person, and nothing is theirs
    assert state(client, signer, conversation, travel_db) == before
