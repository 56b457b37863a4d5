"""Print a real terminal session of ``travel-assistant chat`` for the README.

The program, database, graph, tools and approval prompts are the real ones; the model's
replies come from the scripted OpenAI-compatible server of the tests, so the transcript
is reproducible without a key. It runs with ``NO_COLOR`` set, so it prints the plain-text
layout (the README says so):

    python scripts/demo_transcript.py
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pexpect
from sqlalchemy import select

from db.engine import Database
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_TICKET_NO
from db.models import Flight, TicketFlight
from db.ticket_quotes import quote_ticket_change
from db.values import fmt_money
from evaluation import Resolver
from tests.support.fake_openai import FakeOpenAI, Reply

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def main() -> int:
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
        env.update(TRAVEL_ASSISTANT_HOME=home, PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1", TERM="dumb")
        exe = str(Path(sys.executable).parent / "travel-assistant")
        subprocess.run([exe, "db", "init"], env=env, check=True, capture_output=True)
        db = Database.from_url(str(Path(home) / "travel.sqlite"))
        with db.session() as session:
            segment = session.scalars(
                select(TicketFlight).where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
            ).one()
            current = session.get(Flight, segment.flight_id)
            assert current is not None
            tomorrow = Resolver(db)(f"{{flight:{FIXTURE_FLIGHT_NO}+1}}")
            hotel_id = Resolver(db)("{hotel:Grand Hotel Drei Rosen}")
            # The scripted model quotes what the tools would tell a real one.
            quote = quote_ticket_change(
                session, "3442 587242", FIXTURE_TICKET_NO, tomorrow, db.clock()
            )
        fee, total = fmt_money(quote.change_fee_cents), fmt_money(quote.total_cents)
        checkin = (current.scheduled_departure + timedelta(days=1)).date().isoformat()
        checkout = (current.scheduled_departure + timedelta(days=3)).date().isoformat()
        script = [
            Reply(
                tool_calls=[("ToFlightBookingAssistant", {"request": "Move to tomorrow's LX0112"})]
            ),
            Reply(
                text=f"Tomorrow's {FIXTURE_FLIGHT_NO} leaves at the same time and has Economy "
                f"seats. The change fee for your Economy ticket is {fee}; with the fare "
                f"difference you pay {total}. I'll move you now.",
                tool_calls=[
                    (
                        "update_ticket_to_new_flight",
                        {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": tomorrow},
                    )
                ],
            ),
            Reply(text=f"Done: you are on tomorrow's LX0112 and {total} was charged."),
            Reply(
                tool_calls=[
                    ("CompleteOrEscalate", {"cancel": False, "reason": "Customer wants a hotel."})
                ]
            ),
            Reply(
                tool_calls=[
                    (
                        "ToHotelBookingAssistant",
                        {
                            "location": "Basel",
                            "checkin_date": checkin,
                            "checkout_date": checkout,
                            "request": "luxury",
                        },
                    )
                ]
            ),
            Reply(
                text="The Grand Hotel Drei Rosen has rooms for those two nights.",
                tool_calls=[
                    (
                        "book_hotel",
                        {"hotel_id": hotel_id, "checkin_date": checkin, "checkout_date": checkout},
                    )
                ],
            ),
            Reply(text="No problem, I have not booked it. Would a cheaper hotel suit you?"),
        ]
        with FakeOpenAI(script) as server:
            env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="demo")
            child = pexpect.spawn(
                exe,
                ["chat", "--passenger-id", "3442 587242"],
                env=env,
                encoding="utf-8",
                timeout=60,
                dimensions=(60, 100),
            )
            log = io.StringIO()
            child.logfile_read = log
            lines = [
                ("you>", "I'd like to fly to Basel tomorrow instead of today."),
                ("Approve", "y"),
                ("you>", "Thanks! Can you also book me a luxury hotel in Basel for two nights?"),
                ("Approve", "n"),
                ("Why not", "Too expensive for me."),
                ("you>", "exit"),
            ]
            for prompt, answer in lines:
                child.expect(prompt)
                child.sendline(answer)
            child.expect(pexpect.EOF)
            text = ANSI.sub("", log.getvalue())
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
