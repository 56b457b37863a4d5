"""The web chat in a real headless Chromium (Playwright), against uvicorn on 127.0.0.1.

A customer opens the page with a token in the URL fragment, asks to move their flight
and approves the change from the keyboard, then asks for a hotel and declines it with a
reason; the database is checked afterwards, and the history after a reload.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel
from tests.support.web import (
    DECLINE_REASON,
    FLIGHT_REQUEST,
    HOTEL_REQUEST,
    LiveServer,
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


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def test_web_chat_flight_approved_hotel_declined(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    trip = plan_trip(travel_db)
    stays_before = hotel_bookings(travel_db, FIXTURE_PASSENGER_ID)
    model = ScriptedChatModel(script=flight_then_hotel_script(trip))
    service = build_service(travel_db, model, tmp_path / "sessions.sqlite")
    app, signer = build_app(service)
    token = signer.issue(FIXTURE_PASSENGER_ID)
    problems: list[str] = []
    with LiveServer(app) as server:
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(f"{server.url}/#token={token}")
        expect(page.get_by_text(f"Passenger {FIXTURE_PASSENGER_ID}")).to_be_visible()
        assert "token" not in page.url  # the fragment is cleared once read

        message = page.get_by_label("Your message")
        message.fill(FLIGHT_REQUEST)
        message.press("Enter")
        card = page.get_by_role("article")
        heading = card.get_by_role("heading", name="Approval needed: Change flight")
        expect(heading).to_be_visible()
        expect(heading).to_be_focused()  # keyboard users land on the decision
        (action,) = service.pending(service.owned(FIXTURE_PASSENGER_ID, _conversation(service)))
        preview = action.preview
        assert preview.amount is not None and preview.amount.startswith("To pay: EUR")
        expect(card.locator(".preview-lines li")).to_have_text(preview.lines[:-1])
        expect(card.locator(".amount")).to_have_text(preview.amount)
        assert card.locator(".amount").evaluate("e => getComputedStyle(e).fontWeight") == "700"
        shot = card.screenshot(path=str(tmp_path / "approval-card.png"))
        assert shot[:8] == b"\x89PNG\r\n\x1a\n"
        assert ticket_flight(travel_db) != trip.new_flight_id

        # Approve from the keyboard: Tab past the reason field to Approve, then Enter.
        page.keyboard.press("Tab")
        expect(card.get_by_label(re.compile("Reason if you decline"))).to_be_focused()
        page.keyboard.press("Tab")
        expect(card.get_by_role("button", name="Approve")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#log")).to_contain_text("Done: you are on tomorrow's LX0112.")
        expect(page.get_by_role("article")).to_have_count(0)
        assert ticket_flight(travel_db) == trip.new_flight_id

        message.fill(HOTEL_REQUEST)
        page.get_by_role("button", name="Send").click()
        card = page.get_by_role("article")
        expect(card.get_by_role("heading", name="Approval needed: Book hotel")).to_be_visible()
        card.get_by_label(re.compile("Reason if you decline")).fill(DECLINE_REASON)
        card.get_by_role("button", name="Decline").click()
        expect(page.locator("#log")).to_contain_text("No problem, I have not booked it.")
        expect(page.get_by_role("article")).to_have_count(0)

        # A reload keeps the sign-in (sessionStorage) and the conversation (its address),
        # and shows what became of each action.
        assert re.search(r"/c/[0-9a-f-]{36}$", page.url)
        page.reload()
        log = page.locator("#log")
        expect(log).to_contain_text("Approved: Change flight")
        expect(log).to_contain_text("Declined: Book hotel")
        expect(log).to_contain_text(f"Reason: {DECLINE_REASON}")
        expect(page.get_by_role("article")).to_have_count(0)
        page.close()
    assert hotel_bookings(travel_db, FIXTURE_PASSENGER_ID) == stays_before
    assert problems == []
    denial = [m for m in model.received[-1] if getattr(m, "tool_call_id", None)]
    assert DECLINE_REASON in str(denial[-1].content)


def _conversation(service: Any) -> str:
    (record,) = service.sessions.list(FIXTURE_PASSENGER_ID)
    conversation_id: str = record.thread_id
    return conversation_id


def test_web_chat_bad_token_asks_to_sign_in(
    browser: Any, travel_db: Database, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    service = build_service(travel_db, ScriptedChatModel(), tmp_path / "sessions.sqlite")
    app, _ = build_app(service)
    with LiveServer(app) as server:
        page = browser.new_page()
        page.goto(f"{server.url}/#token=forged")
        expect(page.get_by_role("alert")).to_have_text("The token is not valid.")
        field = page.get_by_label("Access token")
        expect(field).to_be_focused()
        assert page.evaluate("sessionStorage.length") == 0
        page.close()
