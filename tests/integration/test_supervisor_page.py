"""The supervisor's page in Debian's Chromium (Playwright), at desktop and phone sizes.

A passenger's flight change was approved and a hotel booking waits; a supervisor signs
in, opens the conversation and sees the specialist at work, the hand-overs, the tool
calls with their arguments and results, the approval with the lines and amount the
customer was shown, and the booking waiting. When the customer declines it, the page
shows it without a reload. axe-core (the npm package, injected) finds no serious or
critical violation on any screen, and the page only ever reads. The screenshots go to
``.cache/screenshots/`` in the checkout, for a person to look at.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage

from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from server.app import create_app
from server.auth import SUPERVISOR, TokenSigner
from server.service import ConversationService
from tests.support.assistants import build_assistant
from tests.support.axe import serious_violations
from tests.support.scripted import ScriptedChatModel, say
from tests.support.web import (
    DECLINE_REASON,
    FLIGHT_REQUEST,
    HOTEL_REQUEST,
    SECRET,
    LiveServer,
    flight_then_hotel_script,
    parse_sse,
    plan_trip,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".cache" / "screenshots"
SUPERVISOR_NAME = "ana.lopez@meridian.example"
OTHER_SUPERVISOR = "Bruno Costa"
# The page refreshes every 2 s: what others do shows within that and a request or two.
LIVE_MS = 5_000
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason="no chromium binary (install Debian's: apt-get install -y chromium)",
)


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def stream(client: httpx.Client, path: str, body: dict[str, Any]) -> None:
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        assert parse_sse(response.read().decode())[-1].name in ("done", "pending")


class Watch:
    """What a page did that it should not: console errors, script errors, writes."""

    def __init__(self, page: Any) -> None:
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(str(error)))
        page.on(
            "request",
            lambda r: self.problems.append(f"{r.method} {r.url}") if r.method != "GET" else None,
        )

    def _console(self, message: Any) -> None:
        # The browser logs the refusal of the passenger's token, which the test provokes.
        if message.type == "error" and "status of 403" not in message.text:
            self.problems.append(message.text)


def approve_flight_change(customer: httpx.Client) -> tuple[str, dict[str, Any]]:
    """Start a conversation, ask for the flight change and approve it; return the
    conversation's id and the pending action as it was approved."""
    conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
    base = f"/api/v1/conversations/{conversation}"
    stream(customer, f"{base}/messages", {"text": FLIGHT_REQUEST})
    (flight,) = customer.get(f"{base}/pending").json()["actions"]
    decision = {"tool_call_id": flight["tool_call_id"], "approved": True}
    stream(customer, f"{base}/decisions", {"decisions": [decision]})
    return conversation, flight


def check(page: Any, name: str) -> None:
    """No serious axe-core violation, nothing wider than the screen; a screenshot."""
    assert serious_violations(page) == [], name
    width = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width, name
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    # What the screen shows, then everything: the panes scroll on their own on a desktop,
    # so the window is made as tall as the longest of them for the second picture.
    page.screenshot(path=str(SCREENSHOTS / f"supervisor-{name}.png"))
    size = page.viewport_size
    tallest = page.evaluate(
        "Math.max(document.documentElement.scrollHeight, ...[...document.querySelectorAll("
        "'.list, .detail')].map(e => e.offsetTop + e.scrollHeight))"
    )
    page.set_viewport_size({"width": size["width"], "height": min(max(tallest, 1), 6000)})
    page.screenshot(path=str(SCREENSHOTS / f"supervisor-{name}-whole.png"))
    page.set_viewport_size(size)


@contextmanager
def supervisor_site(
    travel_db: Database, model: ScriptedChatModel, tmp_path: Path, **options: Any
) -> Iterator[tuple[str, httpx.Client, ConversationStore, TokenSigner]]:
    """Serve the service over ``model`` (``options`` for it); yield its address, a
    client with the fixture passenger's token, the conversation store and the signer."""
    with ConversationStore.open(tmp_path / "sessions.sqlite") as store:
        service = ConversationService.over_store(
            build_assistant(travel_db, model, store.saver, retry_policy=None), store, **options
        )
        signer = TokenSigner(SECRET)
        with (
            LiveServer(create_app(service, signer)) as server,
            httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {signer.issue(FIXTURE_PASSENGER_ID)}"},
                timeout=30,
            ) as customer,
        ):
            yield server.url, customer, store, signer


def test_supervisor_page_desktop_and_phone(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    model = ScriptedChatModel(script=flight_then_hotel_script(trip))
    with supervisor_site(travel_db, model, tmp_path) as (url, customer, store, signer):
        customer_token = signer.issue(FIXTURE_PASSENGER_ID)
        supervisor_token = signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)
        conversation, flight = approve_flight_change(customer)
        base = f"/api/v1/conversations/{conversation}"
        stream(customer, f"{base}/messages", {"text": HOTEL_REQUEST})
        (hotel,) = customer.get(f"{base}/pending").json()["actions"]

        # Desktop: sign in, first with a passenger's token, which is refused.
        page = browser.new_page(viewport=DESKTOP)
        watch = Watch(page)
        page.goto(f"{url}/supervisor")
        field = page.get_by_label("Supervisor token")
        expect(field).to_be_focused()
        expect(page.get_by_role("navigation")).to_be_hidden()
        check(page, "sign-in")
        field.fill(customer_token)
        field.press("Enter")
        expect(page.get_by_role("alert")).to_contain_text("Only a supervisor's token")
        expect(field).to_be_focused()
        page.goto(f"{url}/supervisor#token={supervisor_token}")
        expect(page.get_by_text(f"Supervisor {SUPERVISOR_NAME}")).to_be_visible()
        assert "token" not in page.url

        entry = page.get_by_role("button", name=re.compile(re.escape(FLIGHT_REQUEST[:30])))
        expect(entry).to_contain_text(f"Passenger {FIXTURE_PASSENGER_ID}")
        expect(entry).to_contain_text("hotel specialist")
        expect(entry).to_contain_text("1 waiting")
        entry.click()
        heading = page.get_by_role("heading", name=FLIGHT_REQUEST)
        expect(heading).to_be_focused()
        assert f"conversation={conversation}" in page.url  # a link to come back to
        main = page.get_by_role("main")
        timeline = page.locator("#timeline")
        expect(timeline).to_contain_text("primary assistant → flights specialist")
        expect(timeline).to_contain_text("flights specialist → primary assistant")
        expect(timeline).to_contain_text("update_ticket_to_new_flight")
        expect(timeline).to_contain_text(str(trip.new_flight_id))  # its arguments
        approval = timeline.locator(".step-approval")
        expect(approval).to_contain_text("Change flight")
        expect(approval).to_contain_text("approved, done")
        expect(approval.locator(".preview-lines li")).to_have_text(flight["preview"]["lines"][:-1])
        expect(approval.locator(".amount")).to_have_text(f"{flight['preview']['amount']} charged")
        charged = flight["preview"]["amount"].removeprefix("To pay: ")
        expect(page.locator("#facts")).to_contain_text(f"Charged{charged}")
        waiting = main.get_by_role("article", name="Waiting: Book hotel")
        expect(waiting.locator(".amount")).to_have_text(hotel["preview"]["amount"])
        expect(page.locator("#crew .active")).to_contain_text("hotel specialist")
        check(page, "desktop")

        # Live: the customer declines; the page shows it without a reload.
        stream(
            customer,
            f"{base}/decisions",
            {
                "decisions": [
                    {
                        "tool_call_id": hotel["tool_call_id"],
                        "approved": False,
                        "reason": DECLINE_REASON,
                    }
                ]
            },
        )
        expect(timeline).to_contain_text(f"Reason: {DECLINE_REASON}", timeout=15_000)
        expect(main.get_by_role("article")).to_have_count(0)
        expect(timeline.locator(".step-approval").nth(1)).to_contain_text("declined")
        expect(timeline.locator(".step-approval").nth(1).locator(".amount")).to_contain_text(
            "not moved"
        )
        check(page, "desktop-after-decline")
        page.close()

        # A phone: the list first, then the conversation, and back.
        phone = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
        phone_watch = Watch(phone)
        phone.goto(f"{url}/supervisor#token={supervisor_token}")
        entry = phone.get_by_role("button", name=re.compile(re.escape(FLIGHT_REQUEST[:30])))
        expect(entry).to_be_visible()
        expect(phone.get_by_role("main")).to_be_hidden()
        check(phone, "phone-list")
        entry.tap()
        expect(phone.get_by_role("heading", name=FLIGHT_REQUEST)).to_be_focused()
        expect(phone.get_by_role("navigation")).to_be_hidden()
        expect(phone.locator("#timeline")).to_contain_text("update_ticket_to_new_flight")
        check(phone, "phone-detail")
        phone.get_by_role("button", name="Back to the list").tap()
        expect(entry).to_be_focused()
        phone.close()

        # Every look was recorded with the supervisor's name.
        looks = store.audit.entries(supervisor=SUPERVISOR_NAME)
        assert {e.looked_at for e in looks} == {"conversations", "conversation"}
    assert watch.problems == [] and phone_watch.problems == []


def test_supervisor_page_takes_a_waiting_customer_writes_and_hands_back(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # The desk in the page (issue 29): the queue, take, write, hand back with a note.
    from playwright.sync_api import expect

    model = ScriptedChatModel(script=[])
    with supervisor_site(travel_db, model, tmp_path) as (url, customer, store, signer):
        conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
        base = f"/api/v1/conversations/{conversation}"
        customer.post(f"{base}/person", json={"reason": "lost luggage"})

        page = browser.new_page(viewport=DESKTOP)
        page.goto(f"{url}/supervisor#token={signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)}")
        queue = page.locator("#queue")
        entry = queue.get_by_role("button", name=re.compile("lost luggage"))
        expect(entry).to_contain_text(f"1. Passenger {FIXTURE_PASSENGER_ID}")
        expect(entry).to_contain_text("asked by the customer")
        entry.click()
        panel = page.locator("#person-section")
        expect(panel).to_contain_text("Waiting for a person since")
        facts = page.locator("#facts")
        listed = page.locator("#conversation-list")
        expect(facts).to_contain_text("Who answersWaiting for a person")
        expect(listed).to_contain_text("Waiting for a person")
        check(page, "desk-waiting")
        page.get_by_role("button", name="Take this conversation").click()
        expect(page.get_by_label(re.compile("Your message to the customer"))).to_be_focused()
        expect(queue.get_by_role("button")).to_have_count(0)
        expect(page.locator("#yours")).to_contain_text("lost luggage")
        # Who holds it, in the conversation and in the list: not "answering next: the
        # primary assistant", which stays silent.
        expect(facts).to_contain_text(f"Who answersHeld by {SUPERVISOR_NAME}")
        expect(listed).to_contain_text(f"Held by {SUPERVISOR_NAME}")
        expect(page.locator("#crew")).not_to_contain_text("answers next")
        assert customer.get(f"{base}/person").json()["agent"] == SUPERVISOR_NAME

        page.get_by_label(re.compile("Your message to the customer")).fill("Hello, I am on it.")
        page.get_by_role("button", name="Send to the customer").click()
        expect(page.locator("#timeline")).to_contain_text(f"{SUPERVISOR_NAME} (customer service)")
        said = customer.get(f"{base}/messages").json()["items"]
        assert (said[-1]["person"], said[-1]["text"]) == (SUPERVISOR_NAME, "Hello, I am on it.")
        check(page, "desk-held")

        page.get_by_label(re.compile("Note for the assistant")).fill("Claim 4411 opened.")
        page.get_by_role("button", name="Hand back to the assistant").click()
        expect(panel).to_be_hidden()
        expect(facts).to_contain_text("Who answersWith the assistant (primary assistant)")
        expect(listed).to_contain_text("primary assistant")
        expect(page.locator("#yours")).to_be_empty()
        assert customer.get(f"{base}/person").json()["status"] == "assistant"
        assert model.received == []
        acted = {e.looked_at for e in store.audit.entries(supervisor=SUPERVISOR_NAME)}
        assert {"took", "handed back"} <= acted
        page.close()


def test_an_agent_uses_the_page_under_their_name_and_is_not_signed_out(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # An agent's token: the queue, take and write, under the display name, with no
    # checks asked for (their 403 would sign the page out).
    from playwright.sync_api import expect

    model = ScriptedChatModel(script=[])
    with supervisor_site(travel_db, model, tmp_path) as (url, customer, store, signer):
        conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
        base = f"/api/v1/conversations/{conversation}"
        customer.post(f"{base}/person", json={"reason": "lost luggage"})
        token = signer.issue("ana.lima@example.com", role="agent", name="Ana Lima")

        page = browser.new_page(viewport=DESKTOP)
        checks_asked: list[str] = []
        page.on("request", lambda r: "/desk/checks" in r.url and checks_asked.append(r.url))
        page.goto(f"{url}/supervisor#token={token}")
        expect(page.locator("#who-text")).to_have_text("Agent Ana Lima")
        page.locator("#queue").get_by_role("button", name=re.compile("lost luggage")).click()
        page.get_by_role("button", name="Take this conversation").click()
        expect(page.locator("#yours")).to_contain_text("lost luggage")
        page.get_by_label(re.compile("Your message to the customer")).fill("Hello, Ana here.")
        page.get_by_role("button", name="Send to the customer").click()
        expect(page.locator("#timeline")).to_contain_text("Ana Lima (customer service)")
        said = customer.get(f"{base}/messages").json()["items"]
        assert (said[-1]["person"], said[-1]["text"]) == ("Ana Lima", "Hello, Ana here.")
        expect(page.locator("#desk")).to_be_visible()  # still signed in
        assert checks_asked == []
        # The audit log records the login, not the name the customer saw.
        acted = {e.looked_at for e in store.audit.entries(supervisor="ana.lima@example.com")}
        assert "took" in acted
        page.close()


def test_supervisor_page_refuses_a_large_change_with_a_reason(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # The second approval in the page: the check appears by itself, a refusal needs a
    # reason, and the customer's side then declines the change with it.
    from playwright.sync_api import expect

    from tests.support.flights import ticket_flight
    from tests.support.scripted import say

    trip = plan_trip(travel_db)
    model = ScriptedChatModel(
        script=[*flight_then_hotel_script(trip)[:2], say("Our team could not approve it.")]
    )
    before = ticket_flight(travel_db)
    with supervisor_site(travel_db, model, tmp_path, check_above=1) as (
        url,
        customer,
        _store,
        signer,
    ):
        page = browser.new_page(viewport=DESKTOP)
        page.goto(f"{url}/supervisor#token={signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)}")
        expect(page.get_by_text(f"Supervisor {SUPERVISOR_NAME}")).to_be_visible()

        conversation, flight = approve_flight_change(customer)
        base = f"/api/v1/conversations/{conversation}"

        checks = page.locator("#checks")
        expect(checks).to_contain_text(f"Change flight, {flight['preview']['amount']}")
        check(page, "desk-check")
        page.get_by_role("button", name=re.compile("^Refuse Change flight")).click()
        expect(page.locator("#checks-error")).to_contain_text("Say why")
        page.get_by_label(re.compile("Reason, if you refuse")).fill("Fare needs a manager.")
        page.get_by_role("button", name=re.compile("^Refuse Change flight")).click()
        expect(checks.locator("li")).to_have_count(0)
        # The refusal is applied at once: the customer's window need not be open.
        waited = time.monotonic()
        while time.monotonic() - waited < 20 and (
            customer.get(f"{base}/pending").json()["actions"] or customer.get(base).json()["busy"]
        ):
            time.sleep(0.05)
        assert customer.post(f"{base}/resume").status_code == 409  # nothing left to go on with
        assert ticket_flight(travel_db) == before
        items = customer.get(f"{base}/messages").json()["items"]
        (action,) = [i for i in items if i["type"] == "action"]
        assert "Fare needs a manager." in action["text"], action
        told = " ".join(str(m.content) for m in model.received[-1])
        assert "Fare needs a manager." in told
        page.close()


def staff_client(url: str, signer: TokenSigner, name: str) -> httpx.Client:
    """Return a client with a supervisor's token for ``name``: another person at the desk."""
    token = signer.issue(name, role=SUPERVISOR)
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_supervisor_page_shows_what_a_check_decides_and_opens_its_conversation(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # Issue 41: a check shows the lines the customer said yes to, and opens its
    # conversation (a read, audited); decided elsewhere, it leaves the page by itself.
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    model = ScriptedChatModel(
        script=[*flight_then_hotel_script(trip)[:2], say("Our team could not approve it.")]
    )
    with (
        supervisor_site(travel_db, model, tmp_path, check_above=1) as (
            url,
            customer,
            store,
            signer,
        ),
        staff_client(url, signer, OTHER_SUPERVISOR) as other,
    ):
        conversation, flight = approve_flight_change(customer)
        page = browser.new_page(viewport=DESKTOP)
        watch = Watch(page)  # the page only reads: the other person decides
        page.goto(f"{url}/supervisor#token={signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)}")

        checks = page.locator("#checks")
        expect(checks).to_contain_text(f"Change flight, {flight['preview']['amount']}")
        # The preview as the customer saw it; its last line, the amount, is the title's.
        expect(checks.locator(".preview-lines li")).to_have_text(flight["preview"]["lines"][:-1])
        assert store.audit.entries(supervisor=SUPERVISOR_NAME, conversation_id=conversation) == []
        page.get_by_role("button", name=re.compile("^Open the conversation: Change flight")).click()
        expect(page.get_by_role("heading", name=FLIGHT_REQUEST)).to_be_focused()
        assert f"conversation={conversation}" in page.url
        expect(page.locator("#timeline")).to_contain_text("update_ticket_to_new_flight")
        expect(page.locator("#timeline")).to_contain_text(str(trip.new_flight_id))
        expect(page.locator("#facts")).to_contain_text(
            "Who answersWith the assistant (flights specialist)"
        )
        check(page, "desk-check-preview")
        looks = store.audit.entries(supervisor=SUPERVISOR_NAME, conversation_id=conversation)
        assert [e.looked_at for e in looks] == ["conversation"]

        # Another person refuses it over the API: it leaves this page without a click.
        (waiting,) = other.get("/api/v1/supervisor/desk/checks").json()["checks"]
        refused = other.post(
            f"/api/v1/supervisor/desk/checks/{waiting['check_id']}",
            json={"approved": False, "reason": "Fare needs a manager."},
        )
        assert refused.status_code == 200, refused.text
        expect(checks.locator("li")).to_have_count(0, timeout=LIVE_MS)
        expect(page.get_by_role("heading", name="Waiting for your check")).to_be_hidden()
        page.close()
    assert watch.problems == []


def test_supervisor_page_never_offers_a_supervisor_their_own_proposal_and_hands_back_knowingly(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # Four eyes in the page: the check of what Ana proposed says who proposed it and
    # that the customer approved it, and offers Ana no Approve (waiting for another
    # supervisor); Bruno's page offers it. The conversation says the customer approved.
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    with (
        supervisor_site(travel_db, ScriptedChatModel(script=[]), tmp_path, check_above=1) as (
            url,
            customer,
            _store,
            signer,
        ),
        staff_client(url, signer, SUPERVISOR_NAME) as ana,
    ):
        conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
        base = f"/api/v1/conversations/{conversation}"
        customer.post(f"{base}/person", json={"reason": "move my flight"})
        desk = f"/api/v1/supervisor/desk/{conversation}"
        assert ana.post(f"{desk}/take").status_code == 200
        change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
        proposed = ana.post(
            f"{desk}/proposals", json={"action": "update_ticket_to_new_flight", "args": change}
        )
        assert proposed.status_code == 200, proposed.text
        (action,) = customer.get(f"{base}/pending").json()["actions"]
        decision = {"tool_call_id": action["tool_call_id"], "approved": True}
        stream(customer, f"{base}/decisions", {"decisions": [decision]})

        page = browser.new_page(viewport=DESKTOP)
        page.goto(f"{url}/supervisor#token={signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)}")
        entry = page.locator("#checks li.check")
        expect(entry).to_contain_text(f"Proposed by {SUPERVISOR_NAME}; the customer approved it")
        expect(entry).to_contain_text("You proposed it: waiting for another supervisor.")
        expect(entry.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)
        entry.get_by_role("button", name=re.compile("^Open the conversation")).click()
        expect(page.locator("#pending-section")).to_contain_text(
            "The customer approved it; waiting for a staff check"
        )
        check(page, "desk-check-own-proposal")
        other = browser.new_page(viewport=DESKTOP)
        other.goto(f"{url}/supervisor#token={signer.issue(OTHER_SUPERVISOR, role=SUPERVISOR)}")
        expect(
            other.locator("#checks li.check").get_by_role("button", name=re.compile("^Approve"))
        ).to_have_count(1)
        other.close()
        # Handing back over it says first what it ends; the person confirms.
        page.get_by_role("button", name="Hand back to the assistant").click()
        expect(page.locator("#person-error")).to_have_text(
            "Handing back now ends what is pending: Change flight: the customer approved it "
            "and it waits for a staff check; it is withdrawn, not done. Confirm to go on."
        )
        assert len(customer.get(f"{base}/pending").json()["actions"]) == 1
        page.get_by_role("button", name="End it and go on").click()
        expect(page.locator("#person-section")).to_be_hidden()
        assert customer.get(f"{base}/pending").json()["actions"] == []
        page.close()


def test_supervisor_page_queue_follows_what_others_do(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # The queue is current: a conversation another person takes leaves it within a
    # couple of seconds, with no reload, and its view says who holds it now.
    from playwright.sync_api import expect

    model = ScriptedChatModel(script=[])
    with (
        supervisor_site(travel_db, model, tmp_path) as (url, customer, _store, signer),
        staff_client(url, signer, OTHER_SUPERVISOR) as other,
    ):
        page = browser.new_page(viewport=DESKTOP)
        watch = Watch(page)
        page.goto(f"{url}/supervisor#token={signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)}")
        expect(page.get_by_text(f"Supervisor {SUPERVISOR_NAME}")).to_be_visible()

        conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
        base = f"/api/v1/conversations/{conversation}"
        customer.post(f"{base}/person", json={"reason": "missed connection"})
        queue = page.locator("#queue")
        entry = queue.get_by_role("button", name=re.compile("missed connection"))
        expect(entry).to_be_visible(timeout=LIVE_MS)  # a newcomer appears by itself
        entry.click()
        facts = page.locator("#facts")
        expect(facts).to_contain_text("Who answersWaiting for a person")
        expect(page.get_by_role("button", name="Take this conversation")).to_be_visible()

        taken = other.post(f"/api/v1/supervisor/desk/{conversation}/take")
        assert taken.status_code == 200, taken.text
        expect(queue.get_by_role("button")).to_have_count(0, timeout=LIVE_MS)
        expect(page.locator("#queue-empty")).to_be_visible()
        expect(facts).to_contain_text(f"Who answersHeld by {OTHER_SUPERVISOR}", timeout=LIVE_MS)
        panel = page.locator("#person-section")
        expect(panel).to_contain_text(f"Held by {OTHER_SUPERVISOR}: only they write")
        expect(page.get_by_role("button", name="Take this conversation")).to_be_hidden()
        expect(page.locator("#person-form")).to_be_hidden()
        expect(page.locator("#conversation-list")).to_contain_text(f"Held by {OTHER_SUPERVISOR}")
        check(page, "desk-held-by-another")

        # Handed back elsewhere: the view says the assistant answers again.
        other.post(f"/api/v1/supervisor/desk/{conversation}/hand-back", json={"note": ""})
        expect(facts).to_contain_text(
            "Who answersWith the assistant (primary assistant)", timeout=LIVE_MS
        )
        expect(panel).to_be_hidden()
        page.close()
    assert watch.problems == []


def test_supervisor_page_follows_an_open_conversation_live(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # The open conversation follows live, from the list the page reads every refresh
    # anyway (each conversation's version there): a new customer message shows while its
    # reply is being written, as the turn saves it, then the reply, then who has it; and
    # while nothing changes the conversation is not read again.
    from playwright.sync_api import expect

    gate = threading.Event()

    def slow(messages: list[BaseMessage]) -> AIMessage:
        gate.wait(timeout=30)
        return say("Your bag is on the next flight to Basel.")

    model = ScriptedChatModel(script=[say("Hello, how can I help?"), slow])
    with supervisor_site(travel_db, model, tmp_path) as (url, customer, _store, signer):
        conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
        base = f"/api/v1/conversations/{conversation}"
        stream(customer, f"{base}/messages", {"text": "Hello"})
        deadline = time.monotonic() + 10
        while customer.get(base).json()["busy"] and time.monotonic() < deadline:
            time.sleep(0.05)  # the turn is over once its claim is let go

        page = browser.new_page(viewport=DESKTOP)
        watch = Watch(page)
        reads: list[str] = []
        page.on("request", lambda r: reads.append(urlparse(r.url).path))
        token = signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)
        page.goto(f"{url}/supervisor?conversation={conversation}#token={token}")
        timeline = page.locator("#timeline")
        facts = page.locator("#facts")
        expect(timeline).to_contain_text("Hello, how can I help?")
        detail = f"/api/v1/supervisor/conversations/{conversation}"

        def refreshed() -> None:
            """Wait for the page's next read of the list (one refresh)."""
            page.wait_for_event(
                "request",
                predicate=lambda r: urlparse(r.url).path == "/api/v1/supervisor/conversations",
                timeout=LIVE_MS,
            )

        for _ in range(3):
            refreshed()
        assert reads.count(detail) == 1  # nothing changed: read once, when it was opened

        sent: list[BaseException] = []

        def send() -> None:
            try:
                stream(customer, f"{base}/messages", {"text": "Where is my bag?"})
            except BaseException as error:  # the test says so below
                sent.append(error)

        customer_turn = threading.Thread(target=send)
        customer_turn.start()
        try:
            expect(timeline).to_contain_text("Where is my bag?", timeout=LIVE_MS)
            expect(facts).to_contain_text("Stateanswering now")
            expect(timeline).not_to_contain_text("next flight")
        finally:
            gate.set()
            customer_turn.join(30)
        assert sent == []
        expect(timeline).to_contain_text("Your bag is on the next flight", timeout=LIVE_MS)
        expect(facts).to_contain_text("Stateidle")
        expect(facts).to_contain_text("Customer messages2")
        customer.post(f"{base}/person", json={"reason": "lost bag"})
        expect(facts).to_contain_text("Who answersWaiting for a person", timeout=LIVE_MS)
        expect(timeline).to_contain_text("I would like to talk to a person")
        page.close()
    assert watch.problems == []


def test_supervisor_page_proposes_from_a_form_with_the_customers_preview(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # Issue 48: after Take, an action is proposed from a form built from its own argument
    # schema; the id comes from the customer's bookings, searched by name; the preview
    # the customer will see is shown before Send, and Send puts exactly that to them.
    from playwright.sync_api import expect

    model = ScriptedChatModel(script=[])
    with supervisor_site(travel_db, model, tmp_path) as (url, customer, _store, signer):
        conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
        base = f"/api/v1/conversations/{conversation}"
        customer.post(f"{base}/person", json={"reason": "cancel my hotel"})
        token = signer.issue(SUPERVISOR_NAME, role=SUPERVISOR)

        page = browser.new_page(viewport=DESKTOP)
        page.goto(f"{url}/supervisor?conversation={conversation}#token={token}")
        page.get_by_role("button", name="Take this conversation").click()
        form = page.locator("#propose-form")
        expect(form).to_be_visible()
        page.get_by_label("Action", exact=True).select_option("cancel_hotel")
        booking = form.get_by_label("booking id", exact=True)
        expect(booking).to_have_value("")
        # The id from the customer's bookings, by words of the hotel's name.
        form.get_by_label("Find the customer's booking by name").fill("spalentor")
        form.get_by_role("button", name=re.compile("^Search the customer's bookings")).click()
        found = form.get_by_role("button", name=re.compile("^Hotel booking 1: Hotel Spalentor"))
        expect(found).to_have_count(1)
        expect(form.get_by_role("button", name=re.compile("^Car rental booking"))).to_have_count(0)
        found.click()
        expect(booking).to_have_value("1")
        expect(booking).to_be_focused()

        page.get_by_role("button", name="Preview what the customer will see").click()
        shown = page.locator("#propose-shown")
        expect(shown).to_contain_text("Cancel hotel")
        expect(shown).to_contain_text("Hotel reservation 1: Hotel Spalentor Garden, Basel")
        expect(shown.locator(".amount")).to_contain_text("Refund: EUR")
        assert customer.get(f"{base}/pending").json()["actions"] == []  # nothing sent yet
        check(page, "desk-propose-preview")

        # Legible on a phone: the same form, the same preview.
        phone = browser.new_page(viewport=PHONE)
        phone.goto(f"{url}/supervisor?conversation={conversation}#token={token}")
        phone.get_by_label("Action", exact=True).select_option("cancel_hotel")
        phone.locator("#propose-form").get_by_label("booking id", exact=True).fill("1")
        phone.get_by_role("button", name="Preview what the customer will see").click()
        expect(phone.locator("#propose-shown")).to_contain_text("Refund: EUR")
        check(phone, "desk-propose-preview-phone")
        phone.close()

        # A field changed after the preview hides it: Send sends only what was shown.
        booking.fill("2")
        expect(shown).to_be_hidden()
        booking.fill("1")
        page.get_by_role("button", name="Preview what the customer will see").click()
        lines = shown.locator(".preview-lines li").all_inner_texts()
        amount = shown.locator(".amount").inner_text()
        page.get_by_role("button", name="Send to the customer for their yes or no").click()
        expect(shown).to_be_hidden()
        (pending,) = customer.get(f"{base}/pending").json()["actions"]
        assert pending["tool"] == "cancel_hotel"
        assert pending["proposed_by"] == SUPERVISOR_NAME
        assert (pending["preview"]["lines"][:-1], pending["preview"]["amount"]) == (lines, amount)
        expect(page.locator("#pending-section")).to_contain_text("Cancel hotel")

        # Strict arguments: what the service refuses is said on the form, nothing sent.
        page.get_by_label("Action", exact=True).select_option("cancel_car_rental")
        form.get_by_label("booking id", exact=True).fill("one")
        page.get_by_role("button", name="Preview what the customer will see").click()
        expect(page.locator("#propose-error")).to_contain_text("booking_id")
        page.close()


def test_supervisor_page_edits_a_check_and_responds(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    # Agent Inbox's edit and respond at a check. Respond: a message to the customer, the
    # check waits. Edit: the same action, other arguments; the customer's yes was for the
    # old ones, so they are asked again with the new preview and the check is withdrawn.
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    with (
        supervisor_site(travel_db, ScriptedChatModel(script=[]), tmp_path, check_above=1) as (
            url,
            customer,
            _store,
            signer,
        ),
        staff_client(url, signer, SUPERVISOR_NAME) as ana,
    ):
        conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
        base = f"/api/v1/conversations/{conversation}"
        customer.post(f"{base}/person", json={"reason": "a hotel in Basel"})
        desk = f"/api/v1/supervisor/desk/{conversation}"
        assert ana.post(f"{desk}/take").status_code == 200
        stay = {
            "hotel_id": trip.hotel_id,
            "checkin_date": trip.checkin.isoformat(),
            "checkout_date": trip.checkout.isoformat(),
        }
        proposed = ana.post(f"{desk}/proposals", json={"action": "book_hotel", "args": stay})
        assert proposed.status_code == 200, proposed.text
        (old,) = customer.get(f"{base}/pending").json()["actions"]
        decision = {"tool_call_id": old["tool_call_id"], "approved": True}
        stream(customer, f"{base}/decisions", {"decisions": [decision]})

        page = browser.new_page(viewport=DESKTOP)
        page.goto(f"{url}/supervisor#token={signer.issue(OTHER_SUPERVISOR, role=SUPERVISOR)}")
        entry = page.locator("#checks li.check")
        expect(entry).to_contain_text("Book hotel")

        text = "I am checking the rate with the hotel; back in ten minutes."
        entry.get_by_label(re.compile("^Message to the customer")).fill(text)
        entry.get_by_role("button", name=re.compile("^Respond about Book hotel")).click()
        expect(page.locator("#checks-status")).to_contain_text("the check still waits")
        said = customer.get(f"{base}/messages").json()["items"]
        assert [i["person"] for i in said if i["text"] == text] == [OTHER_SUPERVISOR]
        (waiting,) = customer.get(f"{base}/pending").json()["actions"]
        assert waiting["check"]["status"] == "waiting"  # the action still waits its check
        expect(entry).to_have_count(1)

        entry.get_by_role("button", name=re.compile("^Edit Book hotel")).click()
        checkout = entry.get_by_label("checkout date", exact=True)
        expect(checkout).to_have_value(trip.checkout.isoformat())
        expect(entry.get_by_label("hotel id", exact=True)).to_have_value(str(trip.hotel_id))
        later = (trip.checkout + (trip.checkout - trip.checkin)).isoformat()
        checkout.fill(later)
        check(page, "desk-check-edit")
        page.set_viewport_size(PHONE)
        check(page, "desk-check-edit-phone")
        page.set_viewport_size(DESKTOP)
        entry.get_by_role("button", name="Ask the customer again with these details").click()
        expect(page.locator("#checks-status")).to_contain_text("the customer is asked again")
        expect(page.locator("#checks li")).to_have_count(0)

        (new,) = customer.get(f"{base}/pending").json()["actions"]
        assert new["tool"] == "book_hotel" and new["check"] is None
        assert new["proposed_by"] == OTHER_SUPERVISOR
        assert any(later in line for line in new["preview"]["lines"]), new
        assert new["preview"]["amount"] != old["preview"]["amount"]
        items = customer.get(f"{base}/messages").json()["items"]
        assert any("customer service changed its details" in i["text"] for i in items)
        page.close()
