"""The endpoints the web chat needs beyond a turn: rename, delete, Stop, following a turn,
replies as sanitized HTML, and failures told with a reference instead of the detail."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import openai
import pytest
from fastapi.testclient import TestClient
from langchain_core.messages import AIMessage

from conversations import words
from db.engine import Database
from db.fixtures import BUSINESS_PASSENGER_ID, FIXTURE_PASSENGER_ID, MULTI_SEGMENT_PASSENGER_ID
from server.auth import SUPERVISOR
from server.markdown import ALLOWED_TAGS, reply_html
from server.service import ConversationService
from tests.support.scripted import ScriptedChatModel, say
from tests.support.web import auth, build_app, build_service, parse_sse

# Model output a hostile page or a prompt injection could produce.
HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](java\tscript:alert(1))",
    "[data](data:text/html;base64,PHNjcmlwdD4=)",
    "[rel](/api/v1/me)",
    "[vb](vbscript:msgbox(1))",
    '<a href="https://e.example" onclick="steal()">x</a>',
    "![pixel](https://tracker.example/p.png)",
    "<iframe src=https://e.example></iframe>",
    '<svg onload="alert(1)">',
    "<style>body{display:none}</style>",
    '[x](https://e.example "t\\" onmouseover=\\"alert(1)")',
    "<https://e.example/auto> and <javascript:alert(1)>",
    "```html\n<script>alert(1)</script>\n```",
    "<form action=https://e.example><button>Pay</button></form>",
]


class Tags(HTMLParser):
    """Every element the HTML really has, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


@pytest.mark.parametrize("text", HOSTILE)
def test_reply_html_keeps_nothing_hostile(text: str) -> None:
    parser = Tags()
    parser.feed(reply_html(text))
    for tag, attributes in parser.found:
        assert tag in ALLOWED_TAGS
        assert not [name for name in attributes if name.startswith("on")]
        if tag == "a" and "href" in attributes:
            assert str(attributes["href"]).startswith(("http://", "https://", "mailto:"))
            assert attributes["rel"] == "noopener noreferrer nofollow"


def test_reply_html_renders_markdown_and_safe_links() -> None:
    html = reply_html(
        "**Flight LX0112** leaves at *09:00*:\n\n- seat 12A\n- EUR 75.00\n\n"
        "[Policy](https://example.com/policy) or [write](mailto:help@example.com)"
    )
    assert "<strong>Flight LX0112</strong>" in html and "<em>09:00</em>" in html
    assert "<li>seat 12A</li>" in html
    links = re.findall(r"<a [^>]*>", html)
    assert len(links) == 2
    for link in links:
        assert 'rel="noopener noreferrer nofollow"' in link and 'target="_blank"' in link


@pytest.fixture
def service(travel_db: Database, model: ScriptedChatModel, tmp_path: Path) -> ConversationService:
    return build_service(travel_db, model, tmp_path / "sessions.sqlite", retry_policy=None)


@pytest.fixture
def app_client(service: ConversationService) -> Iterator[tuple[TestClient, dict[str, str]]]:
    app, signer = build_app(service)
    with TestClient(app) as client:
        client.headers.update(auth(signer, FIXTURE_PASSENGER_ID))
        yield client, auth(signer, BUSINESS_PASSENGER_ID)


def new_conversation(client: TestClient) -> str:
    response = client.post("/api/v1/conversations")
    assert response.status_code == 201, response.text
    return str(response.json()["conversation_id"])


def test_reply_arrives_as_markdown_html_live_and_in_the_history(
    app_client: tuple[TestClient, dict[str, str]], model: ScriptedChatModel
) -> None:
    client, _ = app_client
    model.extend(say("**Yes.** <script>alert(1)</script> [x](javascript:alert(1))"))
    conversation = new_conversation(client)
    response = client.post(f"/api/v1/conversations/{conversation}/messages", json={"text": "hi"})
    (message,) = [e for e in parse_sse(response.text) if e.name == "message"]
    items = client.get(f"/api/v1/conversations/{conversation}/messages").json()["items"]
    (reply,) = [i for i in items if i["type"] == "assistant"]
    assert reply["html"] == message.data["html"]
    assert "<strong>Yes.</strong>" in reply["html"]
    parser = Tags()
    parser.feed(reply["html"])
    assert [tag for tag, _ in parser.found] == ["p", "strong"]  # the rest is plain text
    assert "&lt;script&gt;" in reply["html"]


def test_rename_and_delete_are_the_owners_only(
    app_client: tuple[TestClient, dict[str, str]], model: ScriptedChatModel
) -> None:
    client, other = app_client
    model.extend(say("Hello."))
    conversation = new_conversation(client)
    path = f"/api/v1/conversations/{conversation}"
    client.post(f"{path}/messages", json={"text": "first words"})
    assert client.patch(path, json={"title": "x"}, headers=other).status_code == 404
    assert client.delete(path, headers=other).status_code == 404
    assert client.patch(path, json={"title": "  "}).status_code == 422
    assert client.patch(path, json={"title": "t" * 201}).status_code == 422
    renamed = client.patch(path, json={"title": "  Basel   trip "})
    assert renamed.status_code == 200 and renamed.json()["title"] == "Basel trip"
    listed = client.get("/api/v1/conversations").json()["conversations"]
    assert [c["title"] for c in listed] == ["Basel trip"]
    assert client.delete(path).status_code == 204
    assert client.get(path).status_code == 404
    assert client.get(f"{path}/messages").status_code == 404
    assert client.get("/api/v1/conversations").json()["conversations"] == []
    assert client.delete(path).status_code == 404


def test_delete_and_stop_while_a_turn_runs(
    app_client: tuple[TestClient, dict[str, str]], service: ConversationService
) -> None:
    client, other = app_client
    conversation = new_conversation(client)
    path = f"/api/v1/conversations/{conversation}"
    stop = client.post(f"{path}/stop")
    assert stop.status_code == 409 and "not answering" in stop.json()["detail"]
    cancel = service.runner.claim(conversation)  # as a turn in progress does
    try:
        assert client.delete(path).status_code == 409
        assert client.post(f"{path}/stop", headers=other).status_code == 404
        assert not cancel.is_set()
        assert client.post(f"{path}/stop").json() == {"stopping": True}
        assert cancel.is_set() and service.runner.stopped(conversation)
    finally:
        service.runner.release(conversation)
    assert client.get(path).status_code == 200


def test_a_customers_stop_is_not_listed_to_staff_as_a_failure(
    app_client: tuple[TestClient, dict[str, str]],
    service: ConversationService,
    model: ScriptedChatModel,
) -> None:
    client, _ = app_client
    asked, answer = threading.Event(), threading.Event()

    def slow(_messages: object) -> AIMessage:
        asked.set()
        answer.wait(30)  # the model takes its time; the customer presses Stop meanwhile
        return say("Too late.")

    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    model.extend(slow, openai.APIConnectionError(request=request))
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    streamed: list[str] = []
    sender = threading.Thread(
        target=lambda: streamed.append(client.post(f"{base}/messages", json={"text": "hi"}).text)
    )
    sender.start()
    try:
        assert asked.wait(30)
        assert client.post(f"{base}/stop").json() == {"stopping": True}
    finally:
        answer.set()
        sender.join(30)
    [error] = [e for e in parse_sse(streamed[0]) if e.name == "error"]
    assert error.data["kind"] == "stopped"
    assert service.failures.of(conversation) == []  # staff see no error for a Stop
    # A real failure is listed.
    client.post(f"{base}/messages", json={"text": "again"})
    assert [f.kind for f in service.failures.of(conversation)] == ["model"]


def test_follow_answers_204_when_no_turn_ran_here(
    app_client: tuple[TestClient, dict[str, str]],
) -> None:
    client, other = app_client
    conversation = new_conversation(client)
    events = f"/api/v1/conversations/{conversation}/events"
    assert client.get(events).status_code == 204
    assert client.get(events, headers=other).status_code == 404


def test_follow_replays_a_finished_turn_after_the_last_event_id(
    app_client: tuple[TestClient, dict[str, str]], model: ScriptedChatModel
) -> None:
    client, _ = app_client
    model.extend(say("One reply."))
    conversation = new_conversation(client)
    base = f"/api/v1/conversations/{conversation}"
    sent = client.post(f"{base}/messages", json={"text": "hi"})
    ids = re.findall(r"^id: (.+)$", sent.text, re.MULTILINE)
    assert len(ids) == len(parse_sse(sent.text)) and len(set(ids)) == len(ids)
    again = client.get(f"{base}/events")
    assert [e.name for e in parse_sse(again.text)] == [e.name for e in parse_sse(sent.text)]
    after = client.get(f"{base}/events", headers={"Last-Event-ID": ids[-2]})
    assert [e.name for e in parse_sse(after.text)] == ["done"]
    stranger = client.get(f"{base}/events", headers={"Last-Event-ID": "other.3"})
    assert len(parse_sse(stranger.text)) == len(ids)  # another turn's id: from the start


def test_model_failure_gives_a_reference_not_the_operator_detail(
    app_client: tuple[TestClient, dict[str, str]],
    model: ScriptedChatModel,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, _ = app_client
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    model.extend(openai.APIConnectionError(request=request))
    conversation = new_conversation(client)
    with caplog.at_level(logging.WARNING, logger="server.service"):
        response = client.post(
            f"/api/v1/conversations/{conversation}/messages", json={"text": "hello?"}
        )
    error = parse_sse(response.text)[-1]
    assert error.name == "error" and error.data["kind"] == "model"
    reference = error.data["reference"]
    assert re.fullmatch(r"[0-9a-f]{8}", reference)
    assert reference in error.data["detail"]
    for operator_words in ("OPENAI", "Cannot reach", "Errno", "model server"):
        assert operator_words not in error.data["detail"]
    logged = [r.getMessage() for r in caplog.records if reference in r.getMessage()]
    assert len(logged) == 1 and "OPENAI_BASE_URL" in logged[0]  # the operator's detail


def test_conversation_address_serves_the_page(
    app_client: tuple[TestClient, dict[str, str]],
) -> None:
    client, _ = app_client
    page = client.get("/c/0b7c6a3e-2f7e-4a51-9c55-1d2e3f405162")
    assert page.status_code == 200 and '<script src="/static/app.js"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/c/..%2Fsecret").status_code in (404, 422)


@pytest.mark.parametrize(
    ("passenger_id", "questions"),
    [
        (
            FIXTURE_PASSENGER_ID,
            [
                "What time does my flight LX0112 to Basel leave?",
                "Change my flight LX0112",
                "Book a hotel in Basel",
                "Rent a car in Basel",
            ],
        ),
        (  # two legs: the first one's flight, the trip's end for the stay
            MULTI_SEGMENT_PASSENGER_ID,
            [
                "What time does my flight LH2012 to Frankfurt leave?",
                "Change my flight LH2012",
                "Book a hotel in New York",
                "Rent a car in New York",
            ],
        ),
        ("0000 000000", list(words.GENERAL_QUESTIONS)),  # no flight ahead
    ],
)
def test_suggestions_are_drawn_from_the_passengers_next_flight(
    service: ConversationService, passenger_id: str, questions: list[str]
) -> None:
    app, signer = build_app(service)
    with TestClient(app) as client:
        response = client.get("/api/v1/suggestions", headers=auth(signer, passenger_id))
        staff = {"Authorization": f"Bearer {signer.issue('Ana Lima', role=SUPERVISOR)}"}
        refused = client.get("/api/v1/suggestions", headers=staff)
    assert response.status_code == 200, response.text
    assert response.json() == {"greeting": words.WELCOME, "questions": questions}
    assert refused.status_code == 403
