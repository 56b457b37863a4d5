"""The supervisor page's forms over HTTP: actions, a proposal's preview, bookings, edit, respond.

Staff propose from a form built from each action's own argument schema
(``GET …/desk/actions``), see the preview the customer will see before sending it
(``POST …/proposals/preview``, which changes nothing and refuses what sending would), and
fill an id from the customer's bookings searched by name (``GET …/bookings?q=``). At a
check, a supervisor edits the action's arguments (the customer is asked again, with the
new preview: their yes was for the old ones) or responds (a message; the check waits).
Arguments are checked strictly, as the model's are, and four eyes hold: nobody edits the
check of what they proposed, and an edit keeps the action.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from server.auth import AGENT, SUPERVISOR, TokenSigner
from server.service import ConversationService
from tests.support.scripted import ScriptedChatModel
from tests.support.web import build_app, plan_trip
from tests.unit.test_server_staff_roles import (
    ANA_LOGIN,
    ANA_NAME,
    BRUNO_LOGIN,
    BRUNO_NAME,
    CHECK_ABOVE,
    DESK,
    bearer,
    customer_says_yes,
    handed_to_a_person,
    settled,
    the_check,
)


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


def hotel(travel_db: Database, nights: int = 2) -> dict[str, Any]:
    """A proposal of the Basel hotel for ``nights`` nights (above EUR 10)."""
    trip = plan_trip(travel_db)
    checkout = trip.checkin.toordinal() + nights
    return {
        "action": "book_hotel",
        "args": {
            "hotel_id": trip.hotel_id,
            "checkin_date": trip.checkin.isoformat(),
            "checkout_date": type(trip.checkin).fromordinal(checkout).isoformat(),
        },
    }


def test_the_actions_are_the_crews_sensitive_tools_with_their_own_schemas(
    served: tuple[TestClient, TokenSigner, ConversationService],
) -> None:
    client, signer, service = served
    listed = client.get(f"{DESK}/actions", headers=bearer(signer, ANA_LOGIN, AGENT, ANA_NAME))
    assert listed.status_code == 200, listed.text
    actions = {a["name"]: a for a in listed.json()["actions"]}
    assert set(actions) == set(service.conversations.assistant.crew.sensitive_names)
    cancel = actions["cancel_hotel"]
    assert cancel["title"] == "Cancel hotel"
    assert cancel["arguments"]["properties"]["booking_id"]["type"] == "integer"
    assert cancel["arguments"]["required"] == ["booking_id"]
    for action in actions.values():  # what is injected is never a field of the form
        assert not {"config", "tool_call_id"} & set(action["arguments"]["properties"])
    customer = client.get(f"{DESK}/actions", headers=bearer(signer, FIXTURE_PASSENGER_ID))
    assert customer.status_code == 403, customer.text


def test_a_preview_is_what_the_customer_then_sees_and_changes_nothing(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    ana = bearer(signer, ANA_LOGIN, AGENT, ANA_NAME)
    conversation = handed_to_a_person(client, customer)
    base = f"/api/v1/conversations/{conversation}"
    proposal = hotel(travel_db)
    preview = f"{DESK}/{conversation}/proposals/preview"
    # Not held: what sending would answer.
    refused = client.post(preview, json=proposal, headers=ana)
    assert refused.status_code == 409, refused.text
    assert "take it first" in refused.json()["detail"]
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    before = client.get(f"{base}/messages", headers=customer).json()

    shown = client.post(preview, json=proposal, headers=ana)
    assert shown.status_code == 200, shown.text
    assert shown.json()["title"] == "Book hotel"
    assert shown.json()["amount"].startswith("To pay: EUR ")
    assert client.get(f"{base}/pending", headers=customer).json()["actions"] == []
    assert client.get(f"{base}/messages", headers=customer).json() == before

    sent = client.post(f"{DESK}/{conversation}/proposals", json=proposal, headers=ana)
    assert sent.status_code == 200, sent.text
    (pending,) = client.get(f"{base}/pending", headers=customer).json()["actions"]
    assert pending["preview"] == shown.json()  # word for word what staff saw
    again = client.post(preview, json=proposal, headers=ana)
    assert again.status_code == 409, again.text
    assert "already waits" in again.json()["detail"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"booking_id": True}, "booking_id"),
        ({"booking_id": "3"}, "booking_id"),
        ({"booking_id": 3, "hotel_id": 1}, "hotel_id is not one of its arguments"),
        ({}, "booking_id"),
    ],
    ids=["true-for-an-id", "text-for-an-id", "unknown", "missing"],
)
def test_a_preview_checks_arguments_strictly_as_the_models_are(
    served: tuple[TestClient, TokenSigner, ConversationService],
    args: dict[str, Any],
    named: str,
) -> None:
    client, signer, _service = served
    ana = bearer(signer, ANA_LOGIN, AGENT, ANA_NAME)
    conversation = handed_to_a_person(client, bearer(signer, FIXTURE_PASSENGER_ID))
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    refused = client.post(
        f"{DESK}/{conversation}/proposals/preview",
        json={"action": "cancel_hotel", "args": args},
        headers=ana,
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"].startswith("cancel_hotel takes booking_id"), refused.text
    assert named in refused.json()["detail"]


def test_the_customers_bookings_are_searched_by_name_to_fill_an_id(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, _service = served
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    ana = bearer(signer, ANA_LOGIN, AGENT, ANA_NAME)
    bruno = bearer(signer, BRUNO_LOGIN, SUPERVISOR, BRUNO_NAME)
    conversation = handed_to_a_person(client, customer)
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    bookings = f"{DESK}/{conversation}/bookings"

    found = client.get(bookings, headers=ana)
    assert found.status_code == 200, found.text
    every = found.json()["bookings"]
    (ticket,) = [b for b in every if b["value"] == FIXTURE_TICKET_NO]
    assert (ticket["kind"], ticket["argument"]) == ("ticket", "ticket_no")
    assert {"cancel_ticket", "update_ticket_to_new_flight"} <= set(ticket["actions"])
    hotels = [b for b in every if b["kind"] == "hotel"]
    assert hotels, every
    stay = hotels[0]
    assert (stay["argument"], stay["actions"]) == ("booking_id", ["update_hotel", "cancel_hotel"])
    # By words of its name, any case, every word: the stay and nothing else.
    words = stay["label"].split(": ", 1)[1].split(",")[0].upper()
    named = client.get(bookings, params={"q": words}, headers=ana).json()["bookings"]
    assert stay in named and ticket not in named
    both = client.get(bookings, params={"q": f"{words} zzzz"}, headers=ana).json()["bookings"]
    assert both == []
    # A supervisor reads any; an agent one that waits or is theirs (as the conversation).
    other = bearer(signer, "carla@example.com", AGENT, "Carla")
    assert client.get(bookings, headers=other).status_code == 403
    assert client.get(bookings, headers=bruno).status_code == 200
    unknown = client.get(f"{DESK}/nope-0/bookings", headers=bruno)
    assert unknown.status_code == 404, unknown.text


def checked_hotel(
    client: TestClient, signer: TokenSigner, travel_db: Database
) -> tuple[str, int, dict[str, str]]:
    """Ana (an agent) proposes the hotel, the customer says yes: a check waits."""
    customer = bearer(signer, FIXTURE_PASSENGER_ID)
    ana = bearer(signer, ANA_LOGIN, AGENT, ANA_NAME)
    conversation = handed_to_a_person(client, customer)
    assert client.post(f"{DESK}/{conversation}/take", headers=ana).status_code == 200
    sent = client.post(f"{DESK}/{conversation}/proposals", json=hotel(travel_db), headers=ana)
    assert sent.status_code == 200, sent.text
    customer_says_yes(client, customer, conversation)
    return conversation, the_check(client, bearer(signer, BRUNO_LOGIN, SUPERVISOR)), customer


def test_an_edit_at_a_check_asks_the_customer_again_with_the_new_preview(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, service = served
    bruno = bearer(signer, BRUNO_LOGIN, SUPERVISOR, BRUNO_NAME)
    ana_supervisor = bearer(signer, ANA_LOGIN, SUPERVISOR, ANA_NAME)
    conversation, check_id, customer = checked_hotel(client, signer, travel_db)
    base = f"/api/v1/conversations/{conversation}"
    (seen,) = client.get(f"{DESK}/checks", headers=bruno).json()["checks"]
    assert (seen["tool"], seen["args"]) == ("book_hotel", hotel(travel_db)["args"])
    (old,) = client.get(f"{base}/pending", headers=customer).json()["actions"]

    longer = hotel(travel_db, nights=3)
    edited = client.post(f"{DESK}/checks/{check_id}/edit", json=longer, headers=bruno)
    assert edited.status_code == 200, edited.text
    new = edited.json()
    # The customer is asked again: the new preview, no check yet, proposed by the editor.
    (pending,) = client.get(f"{base}/pending", headers=customer).json()["actions"]
    assert pending == new
    assert pending["tool_call_id"] != old["tool_call_id"]
    assert pending["check"] is None and pending["proposed_by"] == BRUNO_NAME
    assert pending["preview"]["lines"] != old["preview"]["lines"]
    assert pending["preview"]["amount"] != old["preview"]["amount"]
    assert client.get(f"{DESK}/checks", headers=bruno).json()["checks"] == []
    assert service.conversations.desk.check(check_id).status == "withdrawn"  # type: ignore[union-attr]
    texts = [i["text"] for i in client.get(f"{base}/messages", headers=customer).json()["items"]]
    assert any("customer service changed its details, so you were asked again" in t for t in texts)
    # Approving the old one is no longer possible.
    stale = client.post(f"{DESK}/checks/{check_id}", json={"approved": True}, headers=bruno)
    assert stale.status_code == 409, stale.text

    # Their fresh yes makes a fresh check: the editor's own, so another supervisor's.
    customer_says_yes(client, customer, conversation)
    fresh = the_check(client, bruno)
    own = client.post(f"{DESK}/checks/{fresh}", json={"approved": True}, headers=bruno)
    assert own.status_code == 409, own.text
    yes = {"approved": True}
    approved = client.post(f"{DESK}/checks/{fresh}", json=yes, headers=ana_supervisor)
    assert approved.status_code == 200, approved.text
    settled(client, customer, conversation)
    items = client.get(f"{base}/messages", headers=customer).json()["items"]
    (done,) = [i for i in items if i["type"] == "action" and "Approved by you" in i["text"]]
    assert longer["args"]["checkout_date"] in " ".join(done.get("lines", [])) + done["text"]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            {"action": "cancel_ticket", "args": {"ticket_no": FIXTURE_TICKET_NO}},
            "cancel_ticket is another action",
        ),
        ({"action": "book_hotel", "args": {"hotel_id": True}}, "hotel_id"),
    ],
    ids=["another-action-whose-arguments-fit", "true-for-an-id"],
)
def test_an_edit_keeps_the_action_and_its_arguments_strict(
    served: tuple[TestClient, TokenSigner, ConversationService],
    travel_db: Database,
    edit: dict[str, Any],
    said: str,
) -> None:
    client, signer, _service = served
    bruno = bearer(signer, BRUNO_LOGIN, SUPERVISOR, BRUNO_NAME)
    conversation, check_id, customer = checked_hotel(client, signer, travel_db)
    if edit["action"] == "book_hotel":
        edit = {"action": "book_hotel", "args": {**hotel(travel_db)["args"], **edit["args"]}}
    before = client.get(f"/api/v1/conversations/{conversation}/pending", headers=customer).json()
    refused = client.post(f"{DESK}/checks/{check_id}/edit", json=edit, headers=bruno)
    assert refused.status_code == 409, refused.text
    assert said in refused.json()["detail"]
    # Nothing changed: the check waits, the customer's yes stands.
    assert the_check(client, bruno) == check_id
    after = client.get(f"/api/v1/conversations/{conversation}/pending", headers=customer).json()
    assert after == before


def test_nobody_edits_the_check_of_what_they_proposed_and_agents_do_not_edit(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, _service = served
    conversation, check_id, _customer = checked_hotel(client, signer, travel_db)
    ana_supervisor = bearer(signer, ANA_LOGIN, SUPERVISOR, "A. Lima")
    longer = hotel(travel_db, nights=3)
    own = client.post(f"{DESK}/checks/{check_id}/edit", json=longer, headers=ana_supervisor)
    assert own.status_code == 409, own.text
    assert own.json()["detail"].startswith("You proposed Book hotel"), own.text
    agent = bearer(signer, "carla@example.com", AGENT, "Carla")
    for path, body in (("edit", longer), ("respond", {"text": "Hello"})):
        answer = client.post(f"{DESK}/checks/{check_id}/{path}", json=body, headers=agent)
        assert answer.status_code == 403, (path, answer.text)
    assert the_check(client, bearer(signer, BRUNO_LOGIN, SUPERVISOR)) == check_id
    assert conversation


def test_a_response_at_a_check_reaches_the_customer_and_the_check_waits(
    served: tuple[TestClient, TokenSigner, ConversationService], travel_db: Database
) -> None:
    client, signer, _service = served
    bruno = bearer(signer, BRUNO_LOGIN, SUPERVISOR, BRUNO_NAME)
    conversation, check_id, customer = checked_hotel(client, signer, travel_db)
    base = f"/api/v1/conversations/{conversation}"
    text = "I am checking the hotel's rate with them; back in ten minutes."
    answered = client.post(f"{DESK}/checks/{check_id}/respond", json={"text": text}, headers=bruno)
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "waiting"
    items = client.get(f"{base}/messages", headers=customer).json()["items"]
    (said,) = [i for i in items if i["text"] == text]
    assert said["person"] == BRUNO_NAME
    (pending,) = client.get(f"{base}/pending", headers=customer).json()["actions"]
    assert pending["check"]["status"] == "waiting"
    assert the_check(client, bruno) == check_id
    audit = client.get(
        "/api/v1/supervisor/audit", params={"conversation_id": conversation}, headers=bruno
    ).json()["entries"]
    assert (BRUNO_LOGIN, "responded") in {(e["supervisor"], e["looked_at"]) for e in audit}
    # Once decided, nothing more is said about it.
    decided = client.post(f"{DESK}/checks/{check_id}", json={"approved": True}, headers=bruno)
    assert decided.status_code == 200, decided.text
    settled(client, customer, conversation)
    late = client.post(f"{DESK}/checks/{check_id}/respond", json={"text": "x"}, headers=bruno)
    assert late.status_code == 409, late.text
