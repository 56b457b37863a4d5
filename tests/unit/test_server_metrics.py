"""``GET /metrics`` (issue 52): Prometheus's text format, a supervisor's token, no ids.

Driven through the real application with a scripted model: a turn, an approval, a
request for a person; the exposition then counts them under the route's template and
the outcome, and shows the desk's queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from conversations.assistant import TravelAssistant
from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from server.auth import AGENT, SUPERVISOR, TokenSigner
from server.service import ConversationService
from tests.support.scripted import ScriptedChatModel
from tests.support.web import FLIGHT_REQUEST, build_app, flight_then_hotel_script, plan_trip


@pytest.fixture
def served(
    make_assistant: Callable[..., TravelAssistant], model: ScriptedChatModel
) -> Iterator[tuple[TestClient, TokenSigner]]:
    store = ConversationStore.in_memory()
    service = ConversationService.over_store(make_assistant(checkpointer=store.saver), store)
    app, signer = build_app(service)
    with TestClient(app) as client:
        yield client, signer
    store.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Return every sample of an exposition by name and labels (parsed as Prometheus does)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_count_turns_actions_requests_and_the_queue_without_ids(
    served: tuple[TestClient, TokenSigner], model: ScriptedChatModel, travel_db: Database
) -> None:
    client, signer = served
    customer = {"Authorization": f"Bearer {signer.issue(FIXTURE_PASSENGER_ID)}"}
    model.script = flight_then_hotel_script(plan_trip(travel_db))[:3]
    conversation = client.post("/api/v1/conversations", headers=customer).json()["conversation_id"]
    base = f"/api/v1/conversations/{conversation}"
    assert client.post(
        f"{base}/messages", json={"text": FLIGHT_REQUEST}, headers=customer
    ).is_success
    (action,) = client.get(f"{base}/pending", headers=customer).json()["actions"]
    decision = {"tool_call_id": action["tool_call_id"], "approved": True}
    assert client.post(
        f"{base}/decisions", json={"decisions": [decision]}, headers=customer
    ).is_success
    other = client.post("/api/v1/conversations", headers=customer).json()["conversation_id"]
    client.post(f"/api/v1/conversations/{other}/person", json={"reason": "x"}, headers=customer)

    supervisor = {"Authorization": f"Bearer {signer.issue('bruno@example.com', role=SUPERVISOR)}"}
    scraped = client.get("/metrics", headers=supervisor)
    assert scraped.status_code == 200, scraped.text
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = samples(scraped.text)
    assert got[("travel_assistant_turns_total", (("outcome", "done"),))] == 2
    assert got[("travel_assistant_actions_total", (("outcome", "approved"),))] == 1
    route = "/api/v1/conversations/{conversation_id}/messages"
    key = (
        "travel_assistant_http_requests_total",
        (("method", "POST"), ("route", route), ("status", "200")),
    )
    assert got[key] == 1
    assert got[("travel_assistant_handoff_queue_length", ())] == 1
    assert got[("travel_assistant_turn_duration_seconds_count", ())] == 2
    # No label holds a conversation, a passenger or a member of staff.
    for text in (conversation, other, FIXTURE_PASSENGER_ID, "bruno@example.com"):
        assert text not in scraped.text


def test_metrics_are_for_a_supervisors_token_only(served: tuple[TestClient, TokenSigner]) -> None:
    client, signer = served
    assert client.get("/metrics").status_code == 401
    for token in (signer.issue(FIXTURE_PASSENGER_ID), signer.issue("ana", role=AGENT)):
        assert (
            client.get("/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 403
        )
