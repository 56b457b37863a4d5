"""The HTTP API in-process (Starlette's TestClient): a whole conversation, and bad input."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import TypeAdapter

from assistants.approvals import ActionPreview, Amount
from conversations.records import approval_of
from conversations.words import CUT_NOTICES
from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID, FULL_FLIGHT_DAY_OFFSET
from server import service as server_service
from server.schemas import MAX_MESSAGE_CHARS, StreamEvent
from server.service import ConversationService
from tests.support.assistants import build_assistant
from tests.support.flights import change_call, ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.web import (
    DECLINE_REASON,
    FLIGHT_REQUEST,
    HOTEL_REQUEST,
    Event,
    auth,
    build_app,
    build_service,
    flight_then_hotel_script,
    hotel_bookings,
    parse_sse,
    plan_trip,
)

EVENTS: TypeAdapter[Any] = TypeAdapter(StreamEvent)


@pytest.fixture
def service(travel_db: Database, model: ScriptedChatModel, tmp_path: Path) -> ConversationService:
    return build_service(travel_db, model, tmp_path / "sessions.sqlite", retry_policy=None)


@pytest.fixture
def client(service: ConversationService) -> Iterator[TestClient]:
    app, signer = build_app(service)
    with TestClient(app) as test_client:
        test_client.headers.update(auth(signer, FIXTURE_PASSENGER_ID))
        yield test_client


def turn(client: TestClient, path: str, body: dict[str, Any]) -> list[Event]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    for event in events:  # every event is documented: its name is its data's type
        EVENTS.validate_python(event.data)
        assert event.name == event.data["type"]
    return events


def new_conversation(client: TestClient) -> str:
    response = client.post("/api/v1/conversations")
    assert response.status_code == 201, response.text
    conversation_id: str = response.json()["conversation_id"]
    return conversation_id


def test_server_flight_approved_hotel_declined(
    client: TestClient, model: ScriptedChatModel, travel_db: Database
) -> None:
    trip = plan_trip(travel_db)
    model.extend(*flight_then_hotel_script(trip))
    stays_before = hotel_bookings(travel_db, FIXTURE_PASSENGER_ID)
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"

    events = turn(client, f"{base}/messages", {"text": FLIGHT_REQUEST})
    names = [e.name for e in events]
    assert "token" in names and names[-2:] == ["pending", "done"]
    assert any(e.name == "status" and "takes over" in e.data["text"] for e in events)
    (action,) = events[-2].data["actions"]
    assert action["tool"] == "update_ticket_to_new_flight"
    preview = action["preview"]
    assert preview["title"] == "Change flight"
    assert preview["error"] is None
    assert any("->" in line for line in preview["lines"])
    assert preview["amount"] == preview["lines"][-1] and preview["amount"].startswith("To pay:")
    assert preview["amount_kind"] == "pay"
    assert client.get(f"{base}/pending").json()["actions"] == [action]
    assert ticket_flight(travel_db) != trip.new_flight_id  # nothing happens before the yes

    events = turn(
        client,
        f"{base}/decisions",
        {"decisions": [{"tool_call_id": action["tool_call_id"], "approved": True}]},
    )
    assert any(e.name == "status" and e.data["text"] == "Change flight: done." for e in events)
    assert [e.data["text"] for e in events if e.name == "message"] == [
        "Done: you are on tomorrow's LX0112."
    ]
    assert events[-1].data == {
        "type": "done",
        "pending_actions": 0,
        "assistant": "update_flight",
        "label": "flights",
    }
    assert ticket_flight(travel_db) == trip.new_flight_id

    events = turn(client, f"{base}/messages", {"text": HOTEL_REQUEST})
    (hotel,) = events[-2].data["actions"]
    assert hotel["preview"]["title"] == "Book hotel"
    events = turn(
        client,
        f"{base}/decisions",
        {
            "decisions": [
                {"tool_call_id": hotel["tool_call_id"], "approved": False, "reason": DECLINE_REASON}
            ]
        },
    )
    assert events[-1].data["pending_actions"] == 0
    assert hotel_bookings(travel_db, FIXTURE_PASSENGER_ID) == stays_before
    denial = [
        m for m in model.received[-1] if getattr(m, "tool_call_id", None) == hotel["tool_call_id"]
    ]
    assert DECLINE_REASON in str(denial[0].content)

    items = client.get(f"{base}/messages").json()["items"]
    kinds = [item["type"] for item in items]
    assert kinds.count("customer") == 2 and "action" in kinds
    approved, declined = [item for item in items if item["type"] == "action"]
    assert approved["outcome"] == "approved" and approved["title"] == "Change flight"
    assert approved["lines"] == preview["lines"] and approved["amount"] == preview["amount"]
    assert declined["outcome"] == "declined" and declined["reason"] == DECLINE_REASON
    # Raw tool results never reach the history: only words for the customer.
    assert not any("{" in str(item.get("text", "")) for item in items)
    summary = client.get(base).json()
    assert summary["title"] == FLIGHT_REQUEST and summary["pending_actions"] == 0
    listed = client.get("/api/v1/conversations").json()["conversations"]
    assert [c["conversation_id"] for c in listed] == [conversation]


def test_server_rejects_bad_input_and_changes_nothing(
    client: TestClient, model: ScriptedChatModel, travel_db: Database
) -> None:
    trip = plan_trip(travel_db)
    model.extend(*flight_then_hotel_script(trip)[:2])
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    turn(client, f"{base}/messages", {"text": FLIGHT_REQUEST})
    (pending,) = client.get(f"{base}/pending").json()["actions"]
    before = (client.get(f"{base}/messages").json(), ticket_flight(travel_db), len(model.script))

    too_long = "x" * (MAX_MESSAGE_CHARS + 1)
    refused = [
        (client.post(f"{base}/messages", json={"text": too_long}), 422, "4000"),
        (client.post(f"{base}/messages", json={"text": "   "}), 422, "empty"),
        (client.post(f"{base}/messages", json={"text": "hi", "role": "system"}), 422, "role"),
        (client.post(f"{base}/messages", json={"message": "hi"}), 422, "text"),
        (client.post(f"{base}/messages", json=["hi"]), 422, ""),
        (
            client.post(
                f"{base}/messages",
                content=b'{"text": "hi"',
                headers={"Content-Type": "application/json"},
            ),
            422,
            "JSON",
        ),
        (client.post(f"{base}/messages", json={"text": "y" * 70_000}), 413, "larger"),
        (client.post("/api/v1/conversations/nope-123/messages", json={"text": "hi"}), 404, "No"),
        (client.post("/api/v1/conversations/..%2Fetc/messages", json={"text": "hi"}), 404, ""),
        (client.post("/api/v1/conversations/a%20b/messages", json={"text": "hi"}), 422, ""),
        (client.get("/api/v1/conversations/nope-123/pending"), 404, "No conversation"),
        (
            client.post(
                f"{base}/decisions",
                json={"decisions": [{"tool_call_id": "call_999", "approved": True}]},
            ),
            409,
            "call_999",
        ),
        (
            client.post(
                f"{base}/decisions",
                json={"decisions": [{"tool_call_id": pending["tool_call_id"], "approved": "yes"}]},
            ),
            422,
            "bool",
        ),
        (
            client.post(
                f"{base}/decisions",
                json={
                    "decisions": [
                        {"tool_call_id": pending["tool_call_id"], "approved": True},
                        {"tool_call_id": pending["tool_call_id"], "approved": False},
                    ]
                },
            ),
            422,
            "More than one decision",
        ),
        (client.post(f"{base}/decisions", json={"decisions": []}), 422, ""),
        (
            client.post(
                f"{base}/decisions",
                json={
                    "decisions": [
                        {"tool_call_id": pending["tool_call_id"], "approved": False, "why": "x"}
                    ]
                },
            ),
            422,
            "why",
        ),
    ]
    for response, status, words in refused:
        assert response.status_code == status, (response.request.url, response.text)
        assert words in response.text, response.text
    after = (client.get(f"{base}/messages").json(), ticket_flight(travel_db), len(model.script))
    assert after == before
    assert client.get(f"{base}/pending").json()["actions"] == [pending]


def test_server_decisions_must_cover_every_pending_action(
    client: TestClient, model: ScriptedChatModel
) -> None:
    model.extend(say("Hello!"))
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    turn(client, f"{base}/messages", {"text": "hi"})
    nothing = client.post(
        f"{base}/decisions", json={"decisions": [{"tool_call_id": "call_1", "approved": True}]}
    )
    assert nothing.status_code == 409
    assert "Nothing in this conversation is waiting" in nothing.json()["detail"]


def _refused_then_free(client: TestClient, base: str, body: Any, status: int, words: str) -> None:
    """A refused set of decisions answers ``status`` and leaves the conversation free."""
    response = client.post(f"{base}/decisions", json=body)
    assert response.status_code == status, (body, response.text)
    assert words in response.text, response.text
    assert client.get(base).json()["busy"] is False, body


def test_server_refused_decisions_leave_the_conversation_free(
    client: TestClient, model: ScriptedChatModel, travel_db: Database
) -> None:
    # A refused request never ran a turn, so it must not keep the conversation claimed:
    # the customer fixes the request and sends it again, and is not told to wait for a
    # turn that does not exist.
    trip = plan_trip(travel_db)
    model.extend(*flight_then_hotel_script(trip)[:3])
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    turn(client, f"{base}/messages", {"text": FLIGHT_REQUEST})
    (pending,) = client.get(f"{base}/pending").json()["actions"]
    call_id = pending["tool_call_id"]
    malformed = [
        {"decisions": [{"tool_call_id": call_id, "approved": "yes"}]},
        {"decisions": [{"tool_call_id": call_id, "approved": True}] * 2},
        {"decisions": []},
        {"decisions": [{"tool_call_id": call_id, "approved": True, "why": "x"}]},
    ]
    for body in malformed:
        _refused_then_free(client, base, body, 422, "")
    unknown = {"decisions": [{"tool_call_id": "call_999", "approved": True}]}
    _refused_then_free(client, base, unknown, 409, "call_999")
    decided = {"decisions": [{"tool_call_id": call_id, "approved": True}]}
    events = turn(client, f"{base}/decisions", decided)
    assert [e.data["text"] for e in events if e.name == "message"][-1] == (
        "Done: you are on tomorrow's LX0112."
    )
    assert ticket_flight(travel_db) == trip.new_flight_id
    # Nothing is pending any more: refused again, and the next message is answered.
    _refused_then_free(client, base, decided, 409, "Nothing in this conversation is waiting")
    model.extend(say("Anything else?"))
    events = turn(client, f"{base}/messages", {"text": "thanks"})
    assert [e.data["text"] for e in events if e.name == "message"] == ["Anything else?"]


def test_server_decisions_missing_an_action_leave_the_conversation_free(
    client: TestClient, model: ScriptedChatModel, travel_db: Database
) -> None:
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move"})),
        say("Two options.", change_call(travel_db, 1), change_call(travel_db, 3)),
        say("I left your flight as it is."),
    )
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    turn(client, f"{base}/messages", {"text": "Move my flight"})
    first, second = (a["tool_call_id"] for a in client.get(f"{base}/pending").json()["actions"])
    one = {"decisions": [{"tool_call_id": first, "approved": False}]}
    _refused_then_free(client, base, one, 409, second)
    both = {"decisions": [{"tool_call_id": i, "approved": False} for i in (first, second)]}
    events = turn(client, f"{base}/decisions", both)
    assert [e.data["text"] for e in events if e.name == "message"] == [
        "I left your flight as it is."
    ]


def test_server_message_of_exactly_the_limit_is_answered_and_one_more_is_refused(
    client: TestClient, model: ScriptedChatModel
) -> None:
    model.extend(say("That is a long message."))
    conversation = new_conversation(client)
    path = f"/api/v1/conversations/{conversation}/messages"
    at_limit = "a" * (MAX_MESSAGE_CHARS - 1) + "z"
    events = turn(client, path, {"text": at_limit})
    assert [e.data["text"] for e in events if e.name == "message"] == ["That is a long message."]
    refused = client.post(path, json={"text": "b" * (MAX_MESSAGE_CHARS + 1)})
    assert refused.status_code == 422
    assert f"the limit is {MAX_MESSAGE_CHARS}" in refused.text
    items = client.get(f"{path}").json()["items"]
    assert [i["text"] for i in items if i["type"] == "customer"] == [at_limit]


def test_server_refuses_a_second_turn_while_one_runs(
    client: TestClient, service: ConversationService
) -> None:
    conversation = new_conversation(client)
    service.runner.claim(conversation)  # as a turn in progress does
    try:
        response = client.post(
            f"/api/v1/conversations/{conversation}/messages", json={"text": "hi"}
        )
        assert response.status_code == 409
        assert "still answering" in response.json()["detail"]
        assert client.get(f"/api/v1/conversations/{conversation}").json()["busy"] is True
    finally:
        service.runner.release(conversation)
    assert client.get(f"/api/v1/conversations/{conversation}").json()["busy"] is False


def test_server_model_failure_is_an_error_event_and_the_conversation_goes_on(
    client: TestClient, model: ScriptedChatModel
) -> None:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    model.extend(openai.APIConnectionError(request=request), say("Back again."))
    conversation = new_conversation(client)
    path = f"/api/v1/conversations/{conversation}/messages"
    events = turn(client, path, {"text": "hello?"})
    assert events[-1].name == "error"
    assert "send your message again" in events[-1].data["detail"]
    events = turn(client, path, {"text": "hello again"})
    assert [e.data["text"] for e in events if e.name == "message"] == ["Back again."]
    items = client.get(f"/api/v1/conversations/{conversation}/messages").json()["items"]
    assert [i["text"] for i in items if i["type"] == "customer"] == ["hello?", "hello again"]


def test_server_bug_in_a_turn_is_a_generic_error_and_is_closed(
    client: TestClient, model: ScriptedChatModel
) -> None:
    model.extend(RuntimeError("boom: internal detail"), say("All good now."))
    conversation = new_conversation(client)
    path = f"/api/v1/conversations/{conversation}/messages"
    events = turn(client, path, {"text": "first"})
    assert events[-1].name == "error"
    assert "boom" not in events[-1].data["detail"]  # internals stay in the server's log
    events = turn(client, path, {"text": "second"})
    assert events[-1].name == "done"
    items = client.get(f"/api/v1/conversations/{conversation}/messages").json()["items"]
    # Recorded as what it was (the turn failed), never as the customer's cancel.
    assert {"type": "notice", "text": CUT_NOTICES["crash"]} in items


def test_server_unknown_passenger_cannot_start_a_conversation(service: ConversationService) -> None:
    app, signer = build_app(service)
    with TestClient(app) as client:
        response = client.post("/api/v1/conversations", headers=auth(signer, "0000 000000"))
    assert response.status_code == 403
    assert "not in the travel database" in response.json()["detail"]


def test_server_page_is_served_with_a_strict_policy(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/static/app.js"' in page.text
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/api/v1/health").json() == {"status": "ok"}


def test_server_other_passenger_token_sees_own_list_only(
    client: TestClient, service: ConversationService
) -> None:
    mine = new_conversation(client)
    app, signer = build_app(service)
    with TestClient(app) as other:
        other.headers.update(auth(signer, BUSINESS_PASSENGER_ID))
        theirs = new_conversation(other)
        listed = [
            c["conversation_id"] for c in other.get("/api/v1/conversations").json()["conversations"]
        ]
    assert listed == [theirs]
    assert [
        c["conversation_id"] for c in client.get("/api/v1/conversations").json()["conversations"]
    ] == [mine]


def test_server_new_message_drops_pending_actions(
    client: TestClient, model: ScriptedChatModel, travel_db: Database
) -> None:
    trip = plan_trip(travel_db)
    model.extend(*flight_then_hotel_script(trip)[:2], say("Fine, let us talk about it."))
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    turn(client, f"{base}/messages", {"text": FLIGHT_REQUEST})
    events = turn(client, f"{base}/messages", {"text": "Wait, what does it cost?"})
    assert events[-1].data["pending_actions"] == 0
    assert client.get(f"{base}/pending").json()["actions"] == []
    assert ticket_flight(travel_db) != trip.new_flight_id
    (action,) = [i for i in client.get(f"{base}/messages").json()["items"] if i["type"] == "action"]
    assert action["outcome"] == "not_done"
    assert action["reason"] == "you sent a new message instead of answering"


def test_server_action_that_cannot_be_done_is_never_run(
    client: TestClient, model: ScriptedChatModel, travel_db: Database
) -> None:
    full = change_call(travel_db, FULL_FLIGHT_DAY_OFFSET)  # every Economy seat is sold
    model.extend(
        say("", call("ToFlightBookingAssistant", {"request": "move"})),
        say("Moving you.", full),
        say("That flight is full; shall I look at another day?"),
    )
    before = ticket_flight(travel_db)
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    events = turn(client, f"{base}/messages", {"text": "Move me to the full flight"})
    (action,) = events[-2].data["actions"]
    assert action["preview"]["lines"] == [] and action["preview"]["amount"] is None
    assert action["preview"]["error"].startswith("This cannot be done: ")
    assert "call_" not in action["preview"]["error"]  # words for the customer, no ids
    events = turn(
        client,
        f"{base}/decisions",
        {"decisions": [{"tool_call_id": action["tool_call_id"], "approved": True}]},
    )
    assert ticket_flight(travel_db) == before
    (item,) = [i for i in client.get(f"{base}/messages").json()["items"] if i["type"] == "action"]
    assert item["outcome"] == "refused"
    assert item["reason"] == action["preview"]["error"]


def test_server_refuses_a_turn_running_in_another_process(
    travel_db: Database, model: ScriptedChatModel, tmp_path: Path
) -> None:
    """The store's turn lock, held elsewhere (a terminal, another worker), answers 409."""
    from conversations.store import ConversationStore

    path = tmp_path / "sessions.sqlite"
    with ConversationStore.open(path) as store, ConversationStore.open(path) as elsewhere:
        assistant = build_assistant(travel_db, model, store.saver, retry_policy=None)
        app, signer = build_app(ConversationService.over_store(assistant, store))
        with TestClient(app) as client:
            client.headers.update(auth(signer, FIXTURE_PASSENGER_ID))
            conversation = new_conversation(client)
            base = f"/api/v1/conversations/{conversation}"
            lease = elsewhere.acquire(conversation)
            try:
                refused = client.post(f"{base}/messages", json={"text": "hi"})
                assert refused.status_code == 409
                assert "busy in another window, terminal or server" in refused.json()["detail"]
                assert client.get(base).json()["busy"] is True
                decisions = {"decisions": [{"tool_call_id": "call_1", "approved": True}]}
                refused = client.post(f"{base}/decisions", json=decisions)
                assert refused.status_code == 409
                assert "another window" in refused.json()["detail"]
            finally:
                lease.release()
            assert client.get(base).json()["busy"] is False
            assert client.get(f"{base}/messages").json()["items"] == []  # nothing half-done
            model.extend(say("Hello!"))
            events = turn(client, f"{base}/messages", {"text": "hi"})
            assert [e.data["text"] for e in events if e.name == "message"] == ["Hello!"]
            assert not elsewhere.busy(conversation)  # the turn let go of the lock


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (Amount("pay", 7_500), ("To pay: EUR 75.00", "pay")),
        (Amount("refund", 4_000), ("Refund: EUR 40.00", "refund")),
        (Amount("pay", 0), ("To pay: EUR 0.00", "pay")),  # free: still stated
        (None, (None, None)),  # the words alone never make an amount
    ],
)
def test_approval_takes_the_amount_from_the_preview_numbers(
    amount: Amount | None, expected: tuple[str | None, str | None]
) -> None:
    last = expected[0] or "To pay: EUR 75.00"
    preview = ActionPreview("a_tool", "A title", ["Before -> after", last], amount=amount)
    out = approval_of(preview, "call-1", "update_flight", "flights")
    assert (out.amount, out.amount_kind) == expected
    assert out.lines == ("Before -> after", last)


def test_server_stream_starts_with_the_message_under_the_id_the_history_gives_it(
    client: TestClient, model: ScriptedChatModel
) -> None:
    # A page that reloads while the reply runs follows the turn from its start: the
    # message is there before the graph has saved it, and no second copy appears after.
    model.extend(say("Hello! How can I help?"))
    conversation = new_conversation(client)
    events = turn(client, f"/api/v1/conversations/{conversation}/messages", {"text": "Hi"})
    first = events[0]
    assert (first.name, first.data["item"]["type"], first.data["item"]["text"]) == (
        "record",
        "customer",
        "Hi",
    )
    items = client.get(f"/api/v1/conversations/{conversation}/messages").json()["items"]
    (saved,) = [i for i in items if i["type"] == "customer"]
    assert saved["id"] == first.data["item"]["id"]


def test_server_stream_wire_format(client: TestClient, model: ScriptedChatModel) -> None:
    # What EventSource and the web chat read, byte for byte: a comment at once, then each
    # event's name, its data as one JSON line and its id (``<turn>.<n>``).
    model.extend(say("Hello!"))
    conversation = new_conversation(client)
    response = client.post(f"/api/v1/conversations/{conversation}/messages", json={"text": "Hi"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    text = response.text
    assert text.startswith(": accepted\n\n")
    frames = text.removeprefix(": accepted\n\n").removesuffix("\n\n").split("\n\n")
    turn_ids = set()
    for number, frame in enumerate(frames, start=1):
        name, data, event_id = frame.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        turn_id, _, count = event_id.removeprefix("id: ").partition(".")
        assert int(count) == number
        turn_ids.add(turn_id)
        assert EVENTS.validate_json(data.removeprefix("data: ")).type == name.removeprefix(
            "event: "
        )
    assert len(turn_ids) == 1
    assert frames[-1].startswith("event: done\n")


def test_server_stream_says_it_is_alive_while_the_model_is_silent(
    client: TestClient, model: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_service, "KEEPALIVE_SECONDS", 0.2)

    def slow(messages: list[BaseMessage]) -> AIMessage:
        time.sleep(1.0)  # a model still reading a long prompt
        return say("Here I am.")

    model.extend(slow)
    conversation = new_conversation(client)
    response = client.post(f"/api/v1/conversations/{conversation}/messages", json={"text": "Hi"})
    assert response.status_code == 200
    text = response.text
    assert text.count(": ping\n\n") >= 2
    # The pings come between whole events, and the events are all there, in order.
    events = parse_sse(text.replace(": ping\n\n", ""))
    assert [e.name for e in events][-1] == "done"
    assert "Here I am." in "".join(e.data.get("text", "") for e in events if e.name == "token")
    # Once the turn is over the stream ends: no ping after the last event.
    assert not text.endswith(": ping\n\n")
