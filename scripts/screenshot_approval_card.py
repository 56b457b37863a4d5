"""Save a screenshot of the web chat's approval card for the README (docs/approval-card.png).

The page, service, graph, tools and preview are the real ones, in Debian's headless
Chromium; the model's replies are scripted and the database is generated at a fixed
moment, so the picture is the same on every run:

    python scripts/screenshot_approval_card.py [--out docs/approval-card.png]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.sync_api import expect, sync_playwright

from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from db.generate import build_database
from tests.conftest import FIXED_NOW
from tests.integration.test_web_chat import CHROMIUM_ARGS
from tests.support.scripted import ScriptedChatModel
from tests.support.web import (
    FLIGHT_REQUEST,
    LiveServer,
    build_app,
    build_service,
    flight_then_hotel_script,
    plan_trip,
)

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "approval-card.png")
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        print("No chromium: apt-get install -y chromium", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        db = Database.from_url(str(Path(folder) / "travel.sqlite"), clock=fixed_clock(FIXED_NOW))
        build_database(db, seed=42)
        model = ScriptedChatModel(script=flight_then_hotel_script(plan_trip(db)))
        service = build_service(db, model, Path(folder) / "sessions.sqlite")
        app, signer = build_app(service)
        with LiveServer(app) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 960, "height": 900}, device_scale_factor=1)
            page.goto(f"{server.url}/#token={signer.issue(FIXTURE_PASSENGER_ID)}")
            message = page.get_by_label("Your message")
            message.fill(FLIGHT_REQUEST)
            message.press("Enter")
            card = page.get_by_role("article")
            expect(card).to_be_visible()
            expect(page.locator("#status")).to_have_text("Waiting for your decision.")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.locator(".conversation").screenshot(path=str(args.out))
            browser.close()
        db.dispose()
    print(f"Saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
