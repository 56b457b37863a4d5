"""The customer's web chat in Debian's Chromium (Playwright), on a desktop and on phones.

Each test drives the page as a customer would, against the service under uvicorn on
127.0.0.1 with a scripted model, checks the screens with axe-core (no serious or
critical violation), and writes screenshots to ``screenshots/web-chat/`` for a person
to look at (``tests/support/browser.py``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from assistants.models import ModelSettings, build_chat_models
from conversations.events import Thread
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from server.service import ConversationService
from tests.support.axe import axe_script, serious_violations
from tests.support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    PHONE,
    SMALL_PHONE,
    CuttableProxy,
    horizontal_overflow,
    screenshot,
)
from tests.support.fake_openai import Endless, FakeOpenAI
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.web import (
    DECLINE_REASON,
    FLIGHT_REQUEST,
    HOTEL_REQUEST,
    LiveServer,
    auth,
    build_app,
    build_service,
    flight_then_hotel_script,
    hotel_bookings,
    plan_trip,
)

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason="no chromium binary (install Debian's: apt-get install -y chromium)",
)

FORMS = {"desktop": DESKTOP, "phone": PHONE}
MARKDOWN_DONE = (
    "Done: **you are on tomorrow's LX0112.**\n\n- Same seat, same time\n"
    "- See [our change policy](https://example.com/policy)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def axe() -> str:
    """axe-core's script (installed on first use; the test skips, saying why, without npm)."""
    return str(axe_script())


class Site:
    """The service on a free port with a page for one customer; problems the page logged."""

    def __init__(self, browser: Any, service: ConversationService, form: dict[str, Any]) -> None:
        self.service = service
        app, self.signer = build_app(service)
        self.token = self.signer.issue(FIXTURE_PASSENGER_ID)
        self.server = LiveServer(app)
        self.context = browser.new_context(**form)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("pageerror", lambda error: self.problems.append(str(error)))
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(m.text)
                if m.type == "error" and "net::" not in m.text and "Failed to load" not in m.text
                else None
            ),
        )

    @property
    def url(self) -> str:
        return self.server.url

    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers=auth(self.signer, FIXTURE_PASSENGER_ID), timeout=30
        )

    def sign_in(self, path: str = "/") -> Any:
        from playwright.sync_api import expect

        self.page.goto(f"{self.url}{path}#token={self.token}")
        expect(self.page.locator("#who")).to_be_visible()
        return self.page

    def send(self, text: str) -> None:
        box = self.page.get_by_label("Your message")
        box.fill(text)
        self.page.get_by_role("button", name="Send", exact=True).click()


@pytest.fixture
def site_for(
    browser: Any, travel_db: Database, tmp_path: Path
) -> Iterator[Callable[[Any, dict[str, Any]], Site]]:
    sites: list[Site] = []

    def make(model: Any, form: dict[str, Any]) -> Site:
        path = tmp_path / f"s{len(sites)}.sqlite"
        service = build_service(travel_db, model, path, retry_policy=None)
        site = Site(browser, service, form)
        site.server.__enter__()
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.context.close()
        site.server.__exit__(None, None, None)
    for site in sites:
        assert site.problems == [], site.problems


def no_serious_violations(page: Any, axe: str, screen: str) -> None:
    found = serious_violations(page, tags=None)  # every rule axe runs by default
    assert found == [], f"{screen}: {found}"


def gated(text: str) -> tuple[threading.Event, Callable[[list[BaseMessage]], AIMessage]]:
    """Return a gate and a model reply that waits for it (at most 30 s)."""
    gate = threading.Event()

    def reply(messages: list[BaseMessage]) -> AIMessage:
        gate.wait(timeout=30)
        return say(text)

    return gate, reply


# --- signing in ------------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_sign_in_shows_only_the_form_then_the_chat(
    site_for: Callable[..., Site], axe: str, form: str
) -> None:
    from playwright.sync_api import expect

    site = site_for(ScriptedChatModel(), FORMS[form])
    page = site.page
    page.goto(site.url)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    for hidden in ("#chat", "#who", "#menu", "#composer", "#conversation-list"):
        expect(page.locator(hidden)).to_be_hidden()
    expect(page.get_by_label("Access token")).to_be_focused()
    no_serious_violations(page, axe, "sign-in")
    screenshot(page, f"{form}-1-sign-in")

    page.get_by_label("Access token").fill(site.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_label("Your message")).to_be_focused()  # ready to type
    expect(page.get_by_role("heading", name="Sign in")).to_be_hidden()
    assert horizontal_overflow(page) == 0
    no_serious_violations(page, axe, "empty chat")
    screenshot(page, f"{form}-2-new-conversation")
    if form == "desktop":
        expect(page.get_by_text(f"Passenger {FIXTURE_PASSENGER_ID}")).to_be_visible()
        expect(page.get_by_text("No conversations yet.")).to_be_visible()
        expect(page.locator("#message-help")).to_contain_text("Shift+Enter")
        expect(page.locator("#conversation-list")).to_be_visible()
        return
    # A phone: one line of header, the list behind a menu, no keyboard hint.
    header = page.locator("header").bounding_box()
    assert header is not None and header["height"] < 64
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    expect(page.get_by_text("Shift+Enter")).to_be_hidden()
    menu = page.get_by_role("button", name="Conversations")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_role("button", name="New conversation")).to_be_focused()
    expect(page.locator("#sidebar")).to_be_in_viewport()
    no_serious_violations(page, axe, "phone menu")
    screenshot(page, f"{form}-3-menu")
    page.keyboard.press("Escape")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(menu).to_be_focused()


def test_token_link_opened_in_a_tab_that_has_the_page(site_for: Callable[..., Site]) -> None:
    from playwright.sync_api import expect

    site = site_for(ScriptedChatModel(), DESKTOP)
    page = site.page
    page.goto(site.url)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto(f"{site.url}/#token={site.token}")  # the same document: only the hash changes
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    assert "token" not in page.url
    expect(page.get_by_label("Your message")).to_be_focused()


# --- a whole conversation --------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_conversation_live_and_reopened_read_the_same(
    site_for: Callable[..., Site], axe: str, travel_db: Database, form: str
) -> None:
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    stays_before = hotel_bookings(travel_db, FIXTURE_PASSENGER_ID)
    script = flight_then_hotel_script(trip)
    script[2] = say(MARKDOWN_DONE)
    site = site_for(ScriptedChatModel(script=script), FORMS[form])
    page = site.sign_in()
    page.evaluate(
        "window.said = []; new MutationObserver(() => { const t = "
        "document.getElementById('announcer').textContent; if (t) window.said.push(t); })"
        ".observe(document.getElementById('announcer'), {childList: true, subtree: true, "
        "characterData: true})"
    )
    site.send(FLIGHT_REQUEST)
    card = page.get_by_role("article")
    heading = card.get_by_role("heading", name="Approval needed: Change flight")
    expect(heading).to_be_focused()  # keyboard users land on the decision
    amount = card.locator(".amount")
    expect(amount).to_have_text(re.compile(r"^To pay: EUR [\d,]+\.\d\d$"))
    assert amount.evaluate("e => e.getClientRects().length") == 1
    box = amount.bounding_box()
    assert box is not None and box["height"] < 60  # one line, not "EUR / 108.00"
    assert horizontal_overflow(page) == 0
    no_serious_violations(page, axe, "approval")
    screenshot(page, f"{form}-4-approval")

    card.get_by_role("button", name="Approve").click()
    log = page.locator("#log")
    expect(log.locator(".record.approved")).to_contain_text("Approved: Change flight")
    expect(log.locator(".record.approved .nowrap")).to_have_text(re.compile("^To pay: EUR"))
    expect(log.locator("strong")).to_have_text("you are on tomorrow's LX0112.")
    link = log.get_by_role("link", name="our change policy")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(link).to_have_attribute("href", "https://example.com/policy")
    expect(page.get_by_role("article")).to_have_count(0)
    expect(page.get_by_label("Your message")).to_be_focused()  # focus after a decision
    assert ticket_flight(travel_db) == trip.new_flight_id
    # Each reply is announced once, whole and as read (no Markdown signs); the log itself
    # is not a live region, so streamed pieces are not read out one by one. The region is
    # emptied, then filled a moment later (so a repeated text is read again): wait for it.
    page.wait_for_function("() => window.said.filter(s => s.includes('LX0112')).length >= 2")
    said = page.evaluate("window.said")
    assert [s for s in said if "LX0112" in s] == [
        "Assistant (flights): Tomorrow's LX0112 leaves at the same time and has Economy "
        "seats. I'll move you now.",
        "Assistant (flights): Done: you are on tomorrow's LX0112. Same seat, same time "
        "See our change policy",
    ]
    assert log.get_attribute("aria-live") is None

    site.send(HOTEL_REQUEST)
    card = page.get_by_role("article")
    expect(card.get_by_role("heading", name="Approval needed: Book hotel")).to_be_focused()
    card.get_by_label(re.compile("Reason if you decline")).fill(DECLINE_REASON)
    card.get_by_role("button", name="Decline").click()
    expect(log).to_contain_text("No problem, I have not booked it.")
    declined = log.locator(".record.declined")
    expect(declined).to_contain_text("Declined: Book hotel (To pay: EUR")
    expect(declined).to_contain_text(f"Reason: {DECLINE_REASON}")
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible()
    live = log.inner_text()
    live_items = log.locator("li").count()
    # The page never scrolls as a whole; the message box stays at the bottom.
    assert page.evaluate("document.scrollingElement.scrollTop") == 0
    message_box = page.get_by_label("Your message").bounding_box()
    height = FORMS[form]["viewport"]["height"]
    assert (
        message_box is not None
        and height - 200 < message_box["y"] + message_box["height"] <= height
    )
    no_serious_violations(page, axe, "conversation")
    screenshot(page, f"{form}-5-conversation")

    # Its address keeps the customer in it across a reload, drawn from the history the same.
    assert re.search(r"/c/[0-9a-f-]{36}$", page.url)
    page.reload()
    expect(declined).to_contain_text(f"Reason: {DECLINE_REASON}")
    expect(log.locator("li")).to_have_count(live_items)
    assert log.inner_text() == live
    expect(page.locator("#conversation-heading")).to_have_text(FLIGHT_REQUEST)
    assert hotel_bookings(travel_db, FIXTURE_PASSENGER_ID) == stays_before


@pytest.mark.parametrize("form", FORMS)
def test_message_over_a_waiting_approval_asks_first(
    site_for: Callable[..., Site], travel_db: Database, form: str
) -> None:
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    script = [*flight_then_hotel_script(trip)[:2], say("Fine, I left your flight as it is.")]
    site = site_for(ScriptedChatModel(script=script), FORMS[form])
    page = site.sign_in()
    site.send(FLIGHT_REQUEST)
    expect(page.get_by_role("article")).to_be_visible()
    site.send("Actually, never mind.")
    warning = page.locator("#pending-warning")
    expect(warning).to_be_visible()
    expect(page.get_by_role("button", name="Send anyway")).to_be_focused()
    page.get_by_role("button", name="Back to the decision").click()
    expect(page.get_by_role("heading", name="Approval needed: Change flight")).to_be_focused()
    expect(warning).to_be_hidden()
    site.send("Actually, never mind.")
    page.get_by_role("button", name="Send anyway").click()
    log = page.locator("#log")
    expect(log.locator(".record.not_done")).to_contain_text("Not done: Change flight")
    expect(log).to_contain_text("Fine, I left your flight as it is.")
    expect(page.get_by_role("article")).to_have_count(0)
    assert ticket_flight(travel_db) != trip.new_flight_id


# --- a reply that goes on while the page is away -------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_reload_during_a_reply_follows_it_to_the_end(
    site_for: Callable[..., Site], axe: str, form: str
) -> None:
    from playwright.sync_api import expect

    gate, reply = gated("Here is **your answer**, after a while.")
    site = site_for(ScriptedChatModel(script=[reply]), FORMS[form])
    page = site.sign_in()
    site.send("Can you check something for me?")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(page.locator("#status")).to_have_text("The assistant is writing…")
    page.reload()
    expect(page.locator("#log")).to_contain_text("Can you check something for me?")
    expect(stop).to_be_visible()  # still answering, and the page knows it
    no_serious_violations(page, axe, "answering")
    screenshot(page, f"{form}-6-answering-after-reload")
    gate.set()
    expect(page.locator("#log strong")).to_have_text("your answer")
    expect(stop).to_be_hidden()
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible()
    expect(page.locator("#log .assistant")).to_have_count(1)


def test_turn_running_elsewhere_is_waited_for(site_for: Callable[..., Site]) -> None:
    """A turn run by another worker (or the terminal): the page asks until it is over.

    With several workers a reloaded page may land on one that does not run the turn (the
    events endpoint answers 204); the page then polls the conversation's busy flag and
    reads the history when it clears.
    """
    from playwright.sync_api import expect

    site = site_for(ScriptedChatModel(script=[say("Answered elsewhere.")]), DESKTOP)
    with site.api() as client:
        conversation = client.post("/api/v1/conversations").json()["conversation_id"]
    elsewhere = site.service.conversations.get(Thread(conversation, FIXTURE_PASSENGER_ID))
    turn = elsewhere.claim()  # the conversation's lock, as another process holds it
    try:
        page = site.sign_in(f"/c/{conversation}")
        expect(page.locator("#status")).to_contain_text("The assistant is answering")
        expect(page.get_by_role("button", name="Stop")).to_be_visible()
        list(turn.send("A question asked elsewhere"))
    finally:
        turn.release()
    expect(page.locator("#log")).to_contain_text("Answered elsewhere.")
    expect(page.locator("#log")).to_contain_text("A question asked elsewhere")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.locator("#status")).to_have_text("")


@pytest.mark.parametrize("form", FORMS)
def test_stop_cancels_the_reply_as_ctrl_c_does(site_for: Callable[..., Site], form: str) -> None:
    from playwright.sync_api import expect

    with FakeOpenAI([Endless(word="more", interval=0.05)]) as fake:
        models = build_chat_models(
            ModelSettings(model="scripted", api_key="test", base_url=fake.base_url)
        )
        site = site_for(models, FORMS[form])
        page = site.sign_in()
        site.send("Tell me everything.")
        expect(page.locator("#log .assistant .bubble")).to_contain_text("more more")
        stop = page.get_by_role("button", name="Stop")
        stop.click()
        log = page.locator("#log")
        expect(log.locator(".notice")).to_contain_text("Turn cancelled")
        expect(stop).to_be_hidden()
        expect(page.get_by_label("Your message")).to_be_focused()
        screenshot(page, f"{form}-7-stopped")
        with site.api() as client:
            path = f"/api/v1/conversations/{page.url.rsplit('/', 1)[-1]}"
            assert client.get(path).json()["busy"] is False
            items = client.get(f"{path}/messages").json()["items"]
        assert {
            "type": "notice",
            "text": "This turn was cancelled; nothing more was done.",
        } in items


# --- failures the customer can act on --------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_model_down_is_said_once_without_operator_words_and_can_be_sent_again(
    site_for: Callable[..., Site], axe: str, form: str
) -> None:
    from playwright.sync_api import expect

    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    model = ScriptedChatModel(
        script=[openai.APIConnectionError(request=request), say("Back again.")]
    )
    site = site_for(model, FORMS[form])
    page = site.sign_in()
    site.send("hello?")
    problem = page.locator("#log .problem")
    expect(problem).to_contain_text("The assistant cannot answer right now")
    expect(problem).to_contain_text(re.compile(r"Reference [0-9a-f]{8}"))
    body = page.locator(".app").inner_text()  # what is on screen (not the announcer)
    for operator_words in ("OPENAI", "Cannot reach", "Errno", "127.0.0.1", "Failed to fetch"):
        assert operator_words not in body
    assert body.count("cannot answer right now") == 1  # once, not in the status line too
    no_serious_violations(page, axe, "problem")
    screenshot(page, f"{form}-8-model-down")
    problem.get_by_role("button", name="Send again").click()
    expect(page.locator("#log")).to_contain_text("Back again.")
    expect(problem).to_have_count(0)


@pytest.mark.parametrize("form", FORMS)
def test_lost_connection_reconnects_and_unsent_message_can_be_retried(
    site_for: Callable[..., Site], axe: str, form: str
) -> None:
    from playwright.sync_api import expect

    gate, slow = gated("The slow answer arrived.")
    site = site_for(ScriptedChatModel(script=[slow, say("Now I hear you.")]), FORMS[form])
    proxy = CuttableProxy(site.server.port)  # the page reaches the service through it
    try:
        page = site.page
        page.goto(f"{proxy.url}/#token={site.token}")
        expect(page.locator("#who")).to_be_visible()
        site.send("First question")
        expect(page.get_by_role("button", name="Stop")).to_be_visible()
        expect(page).to_have_url(re.compile(r"/c/[0-9a-f-]{36}$"))
        running = page.url.rsplit("/", 1)[-1]
        deadline = time.monotonic() + 10
        while not site.service.runner.busy(running) and time.monotonic() < deadline:
            time.sleep(0.05)
        proxy.cut()  # the stream breaks mid-reply; the service goes on
        connection = page.locator("#connection")
        expect(connection).to_contain_text("Reconnecting")
        no_serious_violations(page, axe, "reconnecting")
        screenshot(page, f"{form}-9-reconnecting")
        gate.set()
        proxy.restore()
        expect(page.locator("#log")).to_contain_text("The slow answer arrived.", timeout=20_000)
        expect(connection).to_have_text("", timeout=10_000)
        expect(page.locator("#log .assistant")).to_have_count(1)

        proxy.cut()
        site.send("Second question")
        unsent = page.locator("#log .customer.not-sent")
        expect(unsent).to_contain_text("Second question")
        expect(unsent).to_contain_text("Not sent. No connection to the service.")
        assert "Failed to fetch" not in page.locator(".app").inner_text()
        screenshot(page, f"{form}-10-not-sent")
        proxy.restore()
        # Back: the page checks the history (the message is not there), then offers Retry.
        expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible(timeout=20_000)
        expect(unsent).to_have_count(1)
        unsent.get_by_role("button", name="Retry").click()
        expect(page.locator("#log")).to_contain_text("Now I hear you.")
        expect(unsent).to_have_count(0)
        expect(page.locator("#log .customer")).to_have_count(2)
    finally:
        proxy.close()


# --- the list: addresses, rename, delete -----------------------------------------------------


@pytest.mark.parametrize("form", {**FORMS, "small-phone": SMALL_PHONE})
def test_list_renames_and_deletes_and_each_conversation_has_an_address(
    site_for: Callable[..., Site], axe: str, form: str
) -> None:
    from playwright.sync_api import expect

    long = "Please check booking EUR 1,040.00 " + "x" * 80
    model = ScriptedChatModel(script=[say("About Basel."), say(f"About Zurich: {long}")])
    site = site_for(model, {**FORMS, "small-phone": SMALL_PHONE}[form])
    page = site.sign_in()
    site.send("Trip to Basel")
    expect(page.locator("#log")).to_contain_text("About Basel.")
    basel = page.url
    page.locator("#new-conversation").evaluate("b => b.click()")
    expect(page.locator("#conversation-heading")).to_have_text("New conversation")
    assert page.url.endswith("/")
    site.send(f"Trip to Zurich {long}")
    expect(page.locator("#log")).to_contain_text("About Zurich")
    assert horizontal_overflow(page) == 0  # long words wrap, nothing slides sideways
    page.goto(basel)  # a conversation's address opens it
    expect(page.locator("#log")).to_contain_text("About Basel.")
    phone = form != "desktop"
    if phone:
        page.get_by_role("button", name="Conversations").click()
    entries = page.locator("#conversation-list > li")
    expect(entries).to_have_count(2)
    page.get_by_role("button", name="Rename “Trip to Basel”").click()
    field = page.get_by_label("New title")
    expect(field).to_be_focused()
    field.fill("Basel weekend")
    field.press("Enter")
    expect(page.get_by_role("link", name=re.compile("^Basel weekend"))).to_be_focused()
    expect(page.locator("#conversation-heading")).to_have_text("Basel weekend")
    no_serious_violations(page, axe, "list")
    screenshot(page, f"{form}-11-list")
    page.get_by_role("button", name=re.compile("^Delete “Trip to Zurich")).click()
    page.get_by_role("button", name="Delete for good").click()
    expect(entries).to_have_count(1)
    expect(page.get_by_role("button", name="New conversation")).to_be_focused()
    with site.api() as client:
        listed = client.get("/api/v1/conversations").json()["conversations"]
    assert [c["title"] for c in listed] == ["Basel weekend"]
    page.get_by_role("button", name="Delete “Basel weekend”").click()
    page.get_by_role("button", name="Delete for good").click()
    expect(page.locator("#conversation-heading")).to_have_text("New conversation")
    assert page.url.endswith("/")
    expect(page.get_by_text("No conversations yet.")).to_be_attached()
    page.goto(basel)  # a deleted conversation's address says so
    expect(page.locator("#status")).to_contain_text("does not exist or was deleted")


# --- the customer's experience (issue 42) ---------------------------------------------------

# What the fixture passenger is offered: their next flight, and where it goes.
SUGGESTED = [
    "What time does my flight LX0112 to Basel leave?",
    "Change my flight LX0112",
    "Book a hotel in Basel",
    "Rent a car in Basel",
]


def staff_of(site: Site) -> httpx.Client:
    """Return a client of the desk for Ana Lima, a member of staff."""
    from server.auth import SUPERVISOR

    token = site.signer.issue("Ana Lima", role=SUPERVISOR)
    return httpx.Client(base_url=site.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def take_conversation(site: Site, staff: httpx.Client) -> str:
    """Have the page ask for a person and Ana take the conversation; return its desk path."""
    from playwright.sync_api import expect

    page = site.page
    page.get_by_role("button", name="Talk to a person").click()
    page.get_by_role("button", name="Ask for a person").click()
    expect(page.locator("#person")).to_contain_text("in the queue")
    (waiting,) = staff.get("/api/v1/supervisor/desk/queue").json()["waiting"]
    desk = f"/api/v1/supervisor/desk/{waiting['conversation_id']}"
    assert staff.post(f"{desk}/take").status_code == 200
    return desk


@pytest.mark.parametrize("form", FORMS)
def test_welcome_offers_questions_from_the_bookings_and_a_click_asks_one(
    site_for: Callable[..., Site], axe: str, form: str
) -> None:
    from playwright.sync_api import expect

    model = ScriptedChatModel(script=[say("LX0112 leaves Paris at 15:00.")])
    site = site_for(model, FORMS[form])
    page = site.sign_in()
    welcome = page.locator("#welcome")
    expect(welcome.get_by_role("heading", name="Hello! How can I help?")).to_be_visible()
    expect(welcome).to_contain_text("change or cancel your flights")
    questions = welcome.get_by_role("button")
    expect(questions).to_have_text(SUGGESTED)
    expect(page.locator("#handler")).to_have_text("With: the assistant")
    expect(page.get_by_label("Your message")).to_be_focused()
    assert horizontal_overflow(page) == 0
    # The product's name is whole in the header, on a phone too (not "Meridian…").
    title = page.locator("header h1")
    expect(title).to_have_text(re.compile(r"^Meridian Travel\b"), use_inner_text=True)
    assert title.evaluate("h => h.scrollWidth <= h.clientWidth"), title.evaluate(
        "h => [h.scrollWidth, h.clientWidth]"
    )
    no_serious_violations(page, axe, "welcome")
    screenshot(page, f"{form}-welcome")

    questions.nth(0).click()  # sent as the customer's message
    log = page.locator("#log")
    expect(log.locator(".customer .bubble")).to_have_text([SUGGESTED[0]])
    expect(log.locator(".assistant")).to_contain_text("LX0112 leaves Paris at 15:00.")
    expect(welcome).to_be_hidden()
    expect(page).to_have_url(re.compile(r"/c/[0-9a-f-]{36}$"))
    (asked,) = [m for m in model.received[0] if isinstance(m, HumanMessage)]
    assert str(asked.content).endswith(f"] {SUGGESTED[0]}")  # word for word, after the time
    expect(page.get_by_label("Your message")).to_be_focused()


def test_the_page_says_who_handles_the_conversation(
    site_for: Callable[..., Site], axe: str
) -> None:
    from playwright.sync_api import expect

    script = [
        say("", call("ToFlightBookingAssistant", {"request": "Move the customer's flight"})),
        say("Which day would you like to fly instead?"),
    ]
    site = site_for(ScriptedChatModel(script=script), DESKTOP)
    page = site.sign_in()
    handler = page.locator("#handler")
    expect(handler).to_have_text("With: the assistant")
    site.send(FLIGHT_REQUEST)
    expect(page.locator("#log .assistant")).to_contain_text("Which day would you like")
    expect(handler).to_have_text("With: the flights specialist")  # as the turn ended
    page.reload()  # the conversation's summary says so too
    expect(page.locator("#log .assistant")).to_contain_text("Which day would you like")
    expect(handler).to_have_text("With: the flights specialist")

    with staff_of(site) as staff:
        page.get_by_role("button", name="Talk to a person").click()
        page.get_by_role("button", name="Ask for a person").click()
        expect(handler).to_have_text("Waiting for a person from customer service")
        (waiting,) = staff.get("/api/v1/supervisor/desk/queue").json()["waiting"]
        desk = f"/api/v1/supervisor/desk/{waiting['conversation_id']}"
        assert staff.post(f"{desk}/take").status_code == 200
        expect(handler).to_have_text("With: Ana Lima (customer service)")  # by itself
        no_serious_violations(page, axe, "with a person")
        screenshot(page, "desktop-with-person-line")
        assert staff.post(f"{desk}/hand-back", json={"note": "All set."}).is_success
    expect(page.locator("#person")).to_be_hidden()
    with site.api() as client:
        (summary,) = client.get("/api/v1/conversations").json()["conversations"]
    label = summary["assistant_label"]
    expect(handler).to_have_text(
        f"With: the {label} specialist" if label else "With: the assistant"
    )


def test_reload_with_an_approval_waiting_puts_the_focus_on_its_card(
    site_for: Callable[..., Site], travel_db: Database
) -> None:
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:2]), DESKTOP)
    page = site.sign_in()
    site.send(FLIGHT_REQUEST)
    heading = page.get_by_role("heading", name="Approval needed: Change flight")
    expect(heading).to_be_focused()
    reason = page.get_by_role("article").get_by_label(re.compile("Reason if you decline"))
    expect(reason).to_have_accessible_name(
        "Reason if you decline (optional, passed to the assistant)"
    )
    page.reload()  # the conversation's address: what waits has the focus, not the box
    expect(heading).to_be_focused()
    expect(page.get_by_label("Your message")).not_to_be_focused()
    expect(page.locator("#welcome")).to_be_hidden()


def test_a_persons_proposal_says_a_decline_reason_goes_to_them(
    site_for: Callable[..., Site], axe: str
) -> None:
    from playwright.sync_api import expect

    model = ScriptedChatModel()
    site = site_for(model, DESKTOP)
    page = site.sign_in()
    trip = plan_trip(site.service.assistant.db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    with staff_of(site) as staff:
        desk = take_conversation(site, staff)
        proposed = staff.post(
            f"{desk}/proposals", json={"action": "update_ticket_to_new_flight", "args": change}
        )
        assert proposed.status_code == 200, proposed.text
        card = page.get_by_role("article")
        reason = card.get_by_label(re.compile("Reason if you decline"))
        expect(reason).to_have_accessible_name(
            "Reason if you decline (optional, passed to Ana Lima)"
        )
        no_serious_violations(page, axe, "a person's proposal")
        screenshot(page, "desktop-person-proposal")
        with site.api() as client:
            conversation = page.url.rsplit("/", 1)[-1]
            (action,) = client.get(f"/api/v1/conversations/{conversation}/pending").json()[
                "actions"
            ]
        assert action["proposed_by"] == "Ana Lima"
        reason.fill("Not that day.")
        card.get_by_role("button", name="Decline").click()
        declined = page.locator("#log .record.declined")
        expect(declined).to_contain_text("Reason: Not that day.")
    assert model.received == []  # the person has it: the assistant stays silent


# --- a person from customer service (issue 29) ----------------------------------------------


def test_a_proposal_saved_while_the_tab_looks_after_its_own_message_gets_its_card(
    site_for: Callable[..., Site],
) -> None:
    # The tab's look after its own message (the summary and /person) is held until a
    # person's proposal is saved: both then already say so, and the card must still come.
    from playwright.sync_api import Route, expect

    from server.auth import SUPERVISOR

    site = site_for(ScriptedChatModel(script=[]), DESKTOP)
    page = site.sign_in()
    page.get_by_role("button", name="Talk to a person").click()
    page.get_by_role("button", name="Ask for a person").click()
    expect(page.locator("#person")).to_contain_text("number 1 in the queue")
    token = site.signer.issue("Ana Lima", role=SUPERVISOR)
    with httpx.Client(
        base_url=site.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as staff:
        (waiting,) = staff.get("/api/v1/supervisor/desk/queue").json()["waiting"]
        conversation = waiting["conversation_id"]
        desk = f"/api/v1/supervisor/desk/{conversation}"
        assert staff.post(f"{desk}/take").status_code == 200
        expect(page.locator("#person")).to_contain_text("Ana Lima from our customer-service team")

        held: list[Route] = []
        looks = re.compile(rf".*/api/v1/conversations/{conversation}(/person)?$")
        page.route(looks, lambda route: held.append(route))
        site.send("My seat was broken on my last flight.")
        deadline = time.monotonic() + 20
        while not any(r.request.url.endswith(conversation) for r in held):
            assert time.monotonic() < deadline, "the tab never looked after its message"
            page.wait_for_timeout(50)
        trip = plan_trip(site.service.assistant.db)
        change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
        proposed = staff.post(
            f"{desk}/proposals", json={"action": "update_ticket_to_new_flight", "args": change}
        )
        assert proposed.status_code == 200, proposed.text
        for route in held:
            route.continue_()
        page.unroute(looks)
        card = page.get_by_role("article")
        expect(card.get_by_role("heading")).to_have_text("Approval needed: Change flight")


def test_a_person_answers_in_the_page_and_hands_back_to_the_assistant(
    site_for: Callable[..., Site], axe: str
) -> None:
    from playwright.sync_api import expect

    from server.auth import SUPERVISOR

    model = ScriptedChatModel(script=[say("Your refund is on its way.")])
    site = site_for(model, DESKTOP)
    page = site.sign_in()
    page.get_by_role("button", name="Talk to a person").click()
    page.get_by_label("What would you like to talk about? (optional)").fill("a broken seat")
    no_serious_violations(page, axe, "asking for a person")
    page.get_by_role("button", name="Ask for a person").click()
    expect(page.locator("#person")).to_contain_text("number 1 in the queue")
    expect(page.locator("#person")).to_be_focused()  # what comes next is said there
    expect(page.get_by_role("button", name="Waiting for a person")).to_be_disabled()
    expect(page.locator("#log")).to_contain_text("I would like to talk to a person")
    expect(page.locator("#log")).to_contain_text("a broken seat")
    no_serious_violations(page, axe, "waiting for a person")

    staff = httpx.Client(
        base_url=site.url,
        headers={"Authorization": f"Bearer {site.signer.issue('Ana Lima', role=SUPERVISOR)}"},
        timeout=30,
    )
    with staff:
        (waiting,) = staff.get("/api/v1/supervisor/desk/queue").json()["waiting"]
        desk = f"/api/v1/supervisor/desk/{waiting['conversation_id']}"
        assert staff.post(f"{desk}/take").status_code == 200
        # Nobody touches the page: it learns of the person and of their message by itself.
        expect(page.locator("#person")).to_contain_text("Ana Lima from our customer-service team")
        staff.post(f"{desk}/messages", json={"text": "Hello, Ana here. How can I help?"})
        said = page.locator("#log .person")
        expect(said).to_contain_text("Ana Lima (customer service)")
        expect(said).to_contain_text("Hello, Ana here. How can I help?")
        screenshot(page, "desktop-person")

        site.send("My seat was broken on my last flight.")
        expect(page.locator("#log .customer").last).to_contain_text("My seat was broken")
        assert model.received == []  # the person has it: the assistant stays silent

        # Ana proposes moving the flight: the card appears by itself; the customer's yes
        # runs it, and still the assistant says nothing.
        trip = plan_trip(site.service.assistant.db)
        change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
        proposed = staff.post(
            f"{desk}/proposals", json={"action": "update_ticket_to_new_flight", "args": change}
        )
        assert proposed.status_code == 200, proposed.text
        card = page.get_by_role("article")
        expect(card.get_by_role("heading")).to_have_text("Approval needed: Change flight")
        card.get_by_role("button", name="Approve").click()
        expect(page.locator("#log .record.approved")).to_contain_text("Approved: Change flight")
        assert ticket_flight(site.service.assistant.db) == trip.new_flight_id
        assert model.received == []
        staff.post(f"{desk}/hand-back", json={"note": "Seat refund approved."})

    expect(page.locator("#log")).to_contain_text("handed the conversation back to the assistant")
    expect(page.locator("#person")).to_be_hidden()
    expect(page.get_by_role("button", name="Talk to a person", exact=True)).to_be_enabled()
    site.send("Thanks. What now?")
    expect(page.locator("#log .assistant").last).to_contain_text("Your refund is on its way.")
    assert len(model.received) == 1


def test_the_customer_leaves_the_queue_for_a_person_and_the_assistant_answers(
    site_for: Callable[..., Site],
) -> None:
    from playwright.sync_api import expect

    site = site_for(ScriptedChatModel(script=[say("Happy to help with that.")]), DESKTOP)
    page = site.sign_in()
    page.get_by_role("button", name="Talk to a person").click()
    page.get_by_role("button", name="Ask for a person").click()
    expect(page.locator("#person")).to_contain_text("number 1 in the queue")
    page.get_by_role("button", name="Leave the queue").click()
    expect(page.locator("#person")).to_be_hidden()
    expect(page.locator("#log")).to_contain_text("You left the queue for a person")
    expect(page.get_by_role("button", name="Talk to a person", exact=True)).to_be_enabled()
    expect(page.get_by_role("button", name="Leave the queue")).to_be_hidden()
    site.send("Never mind, can you help me here?")
    expect(page.locator("#log .assistant").last).to_contain_text("Happy to help with that.")
    expect(page.locator("#log")).not_to_contain_text("handed the conversation back")
    token = site.signer.issue(FIXTURE_PASSENGER_ID)
    with httpx.Client(base_url=site.url, headers={"Authorization": f"Bearer {token}"}) as api:
        (conversation,) = api.get("/api/v1/conversations").json()["conversations"]
        again = api.delete(f"/api/v1/conversations/{conversation['conversation_id']}/person")
    assert again.status_code == 409 and "not waiting for a person" in again.json()["detail"]


def test_a_large_change_waits_for_a_staff_check_then_the_page_goes_on(
    site_for: Callable[..., Site], travel_db: Database, axe: str
) -> None:
    # The second approval in the page (issue 29): after the customer's yes the card says
    # it waits for staff; once a member of staff approves over the API the page goes on
    # by itself and the change is done once.
    from playwright.sync_api import expect

    from server.auth import SUPERVISOR

    trip = plan_trip(travel_db)
    before = ticket_flight(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:3]), DESKTOP)
    site.service.conversations.check_above = 1  # anything over EUR 0.01
    page = site.sign_in()
    site.send(FLIGHT_REQUEST)
    card = page.get_by_role("article")
    card.get_by_role("button", name="Approve").click()
    waiting = page.get_by_role("article")
    expect(waiting.get_by_role("heading")).to_have_text("Waiting for a check: Change flight")
    expect(waiting).to_contain_text("checks it too before it is done")
    expect(waiting.get_by_role("button")).to_have_text(["Withdraw"])
    no_serious_violations(page, axe, "waiting for a check")
    screenshot(page, "desktop-check-waiting")
    assert ticket_flight(travel_db) == before
    # A message meanwhile goes, and withdraws nothing: the card still waits for our team.
    site.send("Is it done yet?")
    expect(page.locator("#log .customer").last).to_contain_text("Is it done yet?")
    expect(page.locator("#log")).to_contain_text("Your message is kept.")
    expect(page.locator("#pending-warning")).to_be_hidden()
    expect(page.get_by_role("article").get_by_role("heading")).to_have_text(
        "Waiting for a check: Change flight"
    )
    expect(page.locator("#conversation-list")).to_contain_text("Waiting for our team's check")

    staff = httpx.Client(
        base_url=site.url,
        headers={"Authorization": f"Bearer {site.signer.issue('Ana Lima', role=SUPERVISOR)}"},
        timeout=30,
    )
    with staff:
        (check,) = staff.get("/api/v1/supervisor/desk/checks").json()["checks"]
        assert staff.post(
            f"/api/v1/supervisor/desk/checks/{check['check_id']}", json={"approved": True}
        ).is_success
    log = page.locator("#log")
    expect(log.locator(".record.approved")).to_contain_text(
        "Approved by you and by Ana Lima", timeout=15_000
    )
    expect(page.get_by_role("article")).to_have_count(0)
    expect(log).to_contain_text("Done: you are on tomorrow's LX0112.")
    assert ticket_flight(travel_db) == trip.new_flight_id


def test_a_customer_withdraws_an_action_waiting_for_a_staff_check_with_its_button(
    site_for: Callable[..., Site], travel_db: Database
) -> None:
    # Withdrawing is the customer's own act: the card's button, then nothing is done, the
    # log says they withdrew it, and staff no longer see the check.
    from playwright.sync_api import expect

    from server.auth import SUPERVISOR

    trip = plan_trip(travel_db)
    before = ticket_flight(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:3]), DESKTOP)
    site.service.conversations.check_above = 1
    page = site.sign_in()
    site.send(FLIGHT_REQUEST)
    page.get_by_role("article").get_by_role("button", name="Approve").click()
    waiting = page.get_by_role("article")
    expect(waiting.get_by_role("heading")).to_have_text("Waiting for a check: Change flight")
    waiting.get_by_role("button", name="Withdraw").click()
    expect(page.get_by_role("article")).to_have_count(0)
    expect(page.locator("#status")).to_have_text(
        "Withdrawn: Change flight. Nothing was done or charged."
    )
    expect(page.locator("#log")).to_contain_text("you withdrew it")
    staff = httpx.Client(
        base_url=site.url,
        headers={"Authorization": f"Bearer {site.signer.issue('Ana Lima', role=SUPERVISOR)}"},
        timeout=30,
    )
    with staff:
        assert staff.get("/api/v1/supervisor/desk/checks").json()["checks"] == []
    assert ticket_flight(travel_db) == before


@pytest.mark.parametrize("ended_by", ["withdrawn in another tab", "handed back by staff"])
def test_a_card_whose_action_was_ended_elsewhere_leaves_every_open_tab(
    site_for: Callable[..., Site], travel_db: Database, ended_by: str
) -> None:
    # However the action ends (the customer's other tab, a person handing the
    # conversation back), no open tab keeps offering it.
    from playwright.sync_api import expect

    from server.auth import SUPERVISOR

    trip = plan_trip(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:3]), DESKTOP)
    staff = httpx.Client(
        base_url=site.url,
        headers={"Authorization": f"Bearer {site.signer.issue('Ana Lima', role=SUPERVISOR)}"},
        timeout=30,
    )
    first = site.sign_in()
    if ended_by == "withdrawn in another tab":
        site.service.conversations.check_above = 1
        site.send(FLIGHT_REQUEST)
        first.get_by_role("article").get_by_role("button", name="Approve").click()
        heading = "Waiting for a check: Change flight"
    else:
        with site.api() as customer:
            conversation = customer.post("/api/v1/conversations").json()["conversation_id"]
            customer.post(f"/api/v1/conversations/{conversation}/person", json={"reason": "x"})
        desk = f"/api/v1/supervisor/desk/{conversation}"
        assert staff.post(f"{desk}/take").status_code == 200
        change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
        proposal = {"action": "update_ticket_to_new_flight", "args": change}
        assert staff.post(f"{desk}/proposals", json=proposal).status_code == 200
        first.goto(f"{site.url}/c/{conversation}#token={site.token}")
        heading = "Approval needed: Change flight"
    expect(first.get_by_role("article").get_by_role("heading")).to_have_text(heading)
    other = site.context.new_page()
    other.goto(f"{first.url.split('#')[0]}#token={site.token}")
    expect(other.get_by_role("article").get_by_role("heading")).to_have_text(heading)
    if ended_by == "withdrawn in another tab":
        other.get_by_role("article").get_by_role("button", name="Withdraw").click()
    else:
        ended = {"note": "Done by phone.", "end_pending": True}
        assert staff.post(f"{desk}/hand-back", json=ended).is_success
    for page in (first, other):
        expect(page.get_by_role("article")).to_have_count(0, timeout=10_000)
    staff.close()


def test_a_customer_who_comes_back_lands_on_what_staff_decided_while_they_were_away(
    site_for: Callable[..., Site], travel_db: Database
) -> None:
    # The page was closed when the check was decided: coming back to the start page opens
    # that conversation (once), with its outcome, and the list marks it.
    from playwright.sync_api import expect

    from server.auth import SUPERVISOR

    trip = plan_trip(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:3]), DESKTOP)
    site.service.conversations.check_above = 1
    page = site.sign_in()
    site.send(FLIGHT_REQUEST)
    page.get_by_role("article").get_by_role("button", name="Approve").click()
    expect(page.get_by_role("article").get_by_role("heading")).to_have_text(
        "Waiting for a check: Change flight"
    )
    page.goto("about:blank")  # the customer leaves
    with httpx.Client(
        base_url=site.url,
        headers={"Authorization": f"Bearer {site.signer.issue('Ana Lima', role=SUPERVISOR)}"},
        timeout=30,
    ) as staff:
        (check,) = staff.get("/api/v1/supervisor/desk/checks").json()["checks"]
        assert staff.post(
            f"/api/v1/supervisor/desk/checks/{check['check_id']}", json={"approved": True}
        ).is_success
    with site.api() as customer:
        waited = time.monotonic()
        while time.monotonic() - waited < 20 and not any(
            c["checked"] for c in customer.get("/api/v1/conversations").json()["conversations"]
        ):
            time.sleep(0.1)
    page.goto(f"{site.url}/#token={site.token}")
    log = page.locator("#log")
    expect(log.locator(".record.approved")).to_contain_text("Approved by you and by Ana Lima")
    expect(page.locator("#conversation-list")).to_contain_text("Our team decided")
    assert "/c/" in page.url
    page.goto(f"{site.url}/#token={site.token}")  # once: the next visit starts anew
    expect(page.locator("#log .record.approved")).to_have_count(0)
    assert "/c/" not in page.url


def test_two_tabs_of_a_conversation_show_what_happens_in_either(
    site_for: Callable[..., Site], travel_db: Database
) -> None:
    # A message, its reply and an approval card in one tab appear in the other by
    # themselves; a decision in the other one shows in the first.
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    script = [*flight_then_hotel_script(trip)[:3], say("You are welcome, have a good trip!")]
    site = site_for(ScriptedChatModel(script=script), DESKTOP)
    first = site.sign_in()
    site.send(FLIGHT_REQUEST)
    expect(first.get_by_role("article")).to_have_count(1)
    other = site.context.new_page()
    other.goto(f"{first.url}#token={site.token}")  # the conversation's own address
    expect(other.get_by_role("article")).to_have_count(1)

    other.get_by_role("article").get_by_role("button", name="Approve").click()
    expect(other.locator("#log .record.approved")).to_contain_text("Change flight")
    # The first tab, untouched, follows as soon as it is looked at again.
    first.bring_to_front()
    expect(first.get_by_role("article")).to_have_count(0, timeout=10_000)
    expect(first.locator("#log .record.approved")).to_contain_text("Change flight")
    expect(first.locator("#log")).to_contain_text("Done: you are on tomorrow's LX0112.")
    assert ticket_flight(travel_db) == trip.new_flight_id
    site.send("Thanks a lot!")  # in the first tab: the other one shows it and the reply
    other.bring_to_front()
    expect(other.locator("#log .customer").last).to_contain_text("Thanks a lot!")
    expect(other.locator("#log .assistant").last).to_contain_text("have a good trip")
    assert not site.problems, site.problems


def api_requests(page: Any) -> list[str]:
    """Record the page's requests to the API from now on, each as "METHOD /path"."""
    made: list[str] = []
    page.on(
        "request",
        lambda r: made.append(f"{r.method} {urlparse(r.url).path}") if "/api/" in r.url else None,
    )
    return made


def over_ticks(page: Any, made: list[str], probe: str, ticks: int = 3) -> list[str]:
    """Return the API requests ``page`` made (``made``) in ``ticks`` ticks of its watcher.

    ``probe`` ("GET /path") is what the page asks once a tick: from one probe to the
    ``ticks``-th after it (that one included), waited for as the page makes them. The
    first probe seen is let go by: the page may have read the same just before, for
    what it did itself.
    """

    def probing(request: Any) -> bool:
        return f"{request.method} {urlparse(request.url).path}" == probe

    for _ in range(2):
        page.wait_for_event("request", predicate=probing, timeout=10_000)
    start = len(made)  # the recorder runs first: the probe is in ``made`` already
    for _ in range(ticks):
        page.wait_for_event("request", predicate=probing, timeout=10_000)
    return made[start:]


def set_visibility(page: Any, state: str) -> None:
    """Make the page's document say it is ``state`` ("hidden", "visible"), as a tab does."""
    page.evaluate(
        "state => { Object.defineProperty(document, 'visibilityState', "
        "{value: state, configurable: true}); "
        "document.dispatchEvent(new Event('visibilitychange')); }",
        state,
    )


def test_a_tab_asks_one_thing_a_tick_and_nothing_out_of_view(
    site_for: Callable[..., Site], travel_db: Database
) -> None:
    # One watcher per open conversation: a tab in view makes one request a tick, the
    # conversation's summary, while an action waits for a staff check too; while a person
    # is waited for, the person's state instead (the summary does not say who has it). A
    # tab out of view asks nothing, and asks at once when it is looked at again.
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:3]), DESKTOP)
    site.service.conversations.check_above = 1  # anything over EUR 0.01
    first = site.sign_in()
    site.send(FLIGHT_REQUEST)
    first.get_by_role("article").get_by_role("button", name="Approve").click()
    checking = "Waiting for a check: Change flight"
    expect(first.get_by_role("article").get_by_role("heading")).to_have_text(checking)
    conversation = urlparse(first.url).path.rsplit("/", 1)[-1]
    summary = f"GET /api/v1/conversations/{conversation}"
    asked_first = api_requests(first)
    other = site.context.new_page()
    asked_other = api_requests(other)
    other.goto(f"{first.url}#token={site.token}")
    expect(other.get_by_role("article").get_by_role("heading")).to_have_text(checking)
    assert over_ticks(first, asked_first, summary) == [summary] * 3
    assert over_ticks(other, asked_other, summary) == [summary] * 3

    set_visibility(other, "hidden")
    hidden_from = len(asked_other)
    over_ticks(first, asked_first, summary)  # three ticks of the tab in view
    assert asked_other[hidden_from:] == []
    with other.expect_request(lambda r: urlparse(r.url).path.endswith(conversation)):
        set_visibility(other, "visible")

    # A person is asked for (in the first tab): from then on each tab asks for the
    # person's state alone, once a tick.
    first.get_by_role("button", name="Talk to a person").click()
    first.get_by_role("button", name="Ask for a person").click()
    for page in (first, other):
        expect(page.locator("#person")).to_contain_text("number 1 in the queue")
    person = f"{summary}/person"
    assert over_ticks(first, asked_first, person) == [person] * 3
    assert over_ticks(other, asked_other, person) == [person] * 3


def test_two_tabs_follow_a_check_and_a_person_in_either(
    site_for: Callable[..., Site], travel_db: Database
) -> None:
    # What one tab does, what a member of staff decides and what a person does show in
    # every open tab of the conversation by themselves: an approval that now waits for a
    # check, the check's outcome, a request for a person, the person taking it, their
    # message and the customer's, the hand-back.
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:3]), DESKTOP)
    site.service.conversations.check_above = 1  # anything over EUR 0.01
    first = site.sign_in()
    site.send(FLIGHT_REQUEST)
    expect(first.get_by_role("article")).to_have_count(1)
    other = site.context.new_page()
    other.goto(f"{first.url}#token={site.token}")
    tabs = (first, other)
    heading = other.get_by_role("article").get_by_role("heading")
    expect(heading).to_have_text("Approval needed: Change flight")

    first.get_by_role("article").get_by_role("button", name="Approve").click()
    expect(heading).to_have_text("Waiting for a check: Change flight")  # in the other tab
    with staff_of(site) as staff:
        (check,) = staff.get("/api/v1/supervisor/desk/checks").json()["checks"]
        assert staff.post(
            f"/api/v1/supervisor/desk/checks/{check['check_id']}", json={"approved": True}
        ).is_success
        for page in tabs:
            expect(page.locator("#log .record.approved")).to_contain_text(
                "Approved by you and by Ana Lima", timeout=15_000
            )
            expect(page.get_by_role("article")).to_have_count(0)
            expect(page.locator("#log")).to_contain_text("Done: you are on tomorrow's LX0112.")
        assert ticket_flight(travel_db) == trip.new_flight_id

        other.get_by_role("button", name="Talk to a person").click()
        other.get_by_role("button", name="Ask for a person").click()
        expect(first.locator("#person")).to_contain_text("number 1 in the queue")
        expect(first.get_by_role("button", name="Waiting for a person")).to_be_disabled()
        expect(first.locator("#log .customer").last).to_contain_text("talk to a person")
        (waiting,) = staff.get("/api/v1/supervisor/desk/queue").json()["waiting"]
        desk = f"/api/v1/supervisor/desk/{waiting['conversation_id']}"
        assert staff.post(f"{desk}/take").status_code == 200
        for page in tabs:
            expect(page.locator("#person")).to_contain_text("Ana Lima from our customer-service")
            expect(page.locator("#handler")).to_have_text("With: Ana Lima (customer service)")
        staff.post(f"{desk}/messages", json={"text": "Hello, Ana here. How can I help?"})
        for page in tabs:
            expect(page.locator("#log .person")).to_contain_text("Hello, Ana here.")
        site.send("My bag did not arrive.")  # in the first tab
        expect(other.locator("#log .customer").last).to_contain_text("My bag did not arrive.")
        assert staff.post(f"{desk}/hand-back", json={"note": ""}).is_success
    for page in tabs:
        expect(page.locator("#log")).to_contain_text("handed the conversation back")
        expect(page.locator("#person")).to_be_hidden()
        expect(page.get_by_role("button", name="Talk to a person", exact=True)).to_be_enabled()


def test_checks_decided_that_nobody_went_on_with_are_gone_on_with_by_the_page(
    site_for: Callable[..., Site], travel_db: Database
) -> None:
    # Staff decided the check but the service did not go on with it (it stopped in
    # between): the page says the check's outcome, then goes on with it itself, once.
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    site = site_for(ScriptedChatModel(script=flight_then_hotel_script(trip)[:3]), DESKTOP)
    site.service.conversations.check_above = 1  # anything over EUR 0.01

    async def away(thread: Thread) -> bool:
        return False  # as if the service had stopped before going on

    site.service.apply_checked = away  # type: ignore[method-assign]
    page = site.sign_in()
    site.send(FLIGHT_REQUEST)
    page.get_by_role("article").get_by_role("button", name="Approve").click()
    card = page.get_by_role("article")
    expect(card.get_by_role("heading")).to_have_text("Waiting for a check: Change flight")
    asked = api_requests(page)
    with staff_of(site) as staff:
        (check,) = staff.get("/api/v1/supervisor/desk/checks").json()["checks"]
        assert staff.post(
            f"/api/v1/supervisor/desk/checks/{check['check_id']}", json={"approved": True}
        ).is_success
    expect(page.locator("#log .record.approved")).to_contain_text(
        "Approved by you and by Ana Lima", timeout=15_000
    )
    expect(page.locator("#log")).to_contain_text("Done: you are on tomorrow's LX0112.")
    expect(card).to_have_count(0)
    assert ticket_flight(travel_db) == trip.new_flight_id
    assert [r for r in asked if r.startswith("POST")] == [
        f"POST {urlparse(page.url).path.replace('/c/', '/api/v1/conversations/')}/resume"
    ]
