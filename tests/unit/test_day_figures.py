"""The day's figures (issue 52): a scripted day whose figures are known, read back.

Four conversations on one day and one the day after, on SQLite and PostgreSQL: a flight
change the customer approved (charged), a question the assistant answered alone, a
customer handed to a person who took it 12 minutes later, and a change above the second
approval that staff refused. ``day_figures`` reads them from the store, and so does
``travel-assistant report`` in each of its formats.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from conversations.assistant import Thread, TravelAssistant
from conversations.day_figures import day_figures
from conversations.protocol import Answer, Conversation, Conversations
from conversations.records import TurnEnd
from conversations.store import ConversationStore
from conversations.timeline import ActionStep
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.cli import run
from tests.support.conversation_stores import scratch_conversations
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, say
from tests.support.web import FLIGHT_REQUEST, flight_then_hotel_script, plan_trip

DAY = FIXED_NOW.date()
OTHER = "8149 604011"  # another passenger, who only asks a question
THIRD = "5102 899977"  # and one who asks for a person


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with scratch_conversations(request.param, tmp_path) as location:
        yield location


def _started(conversations: Conversations, thread: Thread, hours: float) -> Conversation:
    """Register ``thread`` as started ``hours`` after the day's start (its created_at)."""
    start = FIXED_NOW.replace(hour=0, minute=0, second=0, microsecond=0)
    conversations.registry.touch(
        thread.thread_id, thread.passenger_id, start + timedelta(hours=hours)
    )
    return conversations.get(thread)


def _approve_change(
    conversation: Conversation, model: ScriptedChatModel, travel_db: Database, approved: bool
) -> None:
    model.script = flight_then_hotel_script(plan_trip(travel_db))[:3]
    with conversation.claim() as turn:
        ended = list(turn.send(FLIGHT_REQUEST))[-1]
    assert isinstance(ended, TurnEnd)
    (action,) = ended.approvals
    with conversation.claim() as turn:
        list(turn.resolve({action.tool_call_id: Answer(approved)}))


def scripted_day(
    conversations: Conversations, model: ScriptedChatModel, travel_db: Database
) -> int:
    """Play the day; return the cents the approved change charged."""
    store_desk = conversations.desk
    # Played in this order (the refused change first, so the ticket is still on its
    # flight for the approved one); each started at its own hour of the day.
    checked = _started(conversations, Thread("t-checked", FIXTURE_PASSENGER_ID), 11)
    conversations.check_above = 1
    _approve_change(checked, model, travel_db, approved=True)
    (check,) = checked.checks()
    checked.decide_check("Bruno Costa", check.id, approved=False, reason="Needs a manager.")
    model.script = [say("Our team did not approve the change.")]
    checked.apply_checked()
    conversations.check_above = None

    changed = _started(conversations, Thread("t-change", FIXTURE_PASSENGER_ID), 8)
    _approve_change(changed, model, travel_db, approved=True)
    (step,) = [s for s in changed.timeline() if isinstance(s, ActionStep)]
    assert step.moved and step.amount is not None
    charged = step.amount.cents

    asked = _started(conversations, Thread("t-question", OTHER), 9)
    model.script = [say("Economy includes one cabin bag of 8 kg.")]
    with asked.claim() as turn:
        list(turn.send("How much cabin baggage may I take?"))

    _started(conversations, Thread("t-tomorrow", THIRD), 30)  # the day after, no message
    person = _started(conversations, Thread("t-person-today", THIRD), 10)
    person.ask_for_person("My suitcase did not arrive.")
    requested = store_desk.current("t-person-today")
    assert requested is not None
    store_desk.take("t-person-today", "Ana Lima", requested.requested_at + timedelta(minutes=12))
    return charged


def test_day_figures_of_a_scripted_day_on_either_engine(
    where: str,
    make_assistant: Callable[..., TravelAssistant],
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    with ConversationStore.open(where) as store:
        conversations = Conversations(
            make_assistant(checkpointer=store.saver), store.registry, store.locks, store.desk
        )
        charged = scripted_day(conversations, model, travel_db)
        day, after = day_figures(conversations, DAY, DAY + timedelta(days=1))
    assert (day.day, after.day) == (DAY, DAY + timedelta(days=1))
    assert day.conversations == 4 and after.conversations == 1
    # The change, the question, the changed-and-refused: one customer message each (the
    # request for a person is not one of theirs to count).
    assert day.messages == 3
    # Alone: the question only (the first change's customer came back within the day;
    # the person's; the checked one had a member of staff).
    assert day.resolved_by_assistant == 1
    assert day.handed_to_person == 1 and day.wait_median == day.wait_p90 == 12.0
    assert dict(day.actions) == {"approved": 1, "declined": 1}
    assert (day.charged_cents, day.refunded_cents) == (charged, 0)
    assert charged > 0
    assert dict(day.checks) == {"refused": 1}
    assert day.model_errors == 0
    assert after.handed_to_person == 0 and after.resolved_by_assistant == 0


def test_report_prints_the_figures_as_a_table_json_and_csv(
    tmp_path: Path,
    make_assistant: Callable[..., TravelAssistant],
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    path = tmp_path / "figures" / "sessions.sqlite"
    path.parent.mkdir()
    with ConversationStore.open(str(path)) as store:
        conversations = Conversations(
            make_assistant(checkpointer=store.saver), store.registry, store.locks, store.desk
        )
        charged = scripted_day(conversations, model, travel_db)
    span = ["--since", DAY.isoformat(), "--until", DAY.isoformat(), "--conversations", str(path)]
    shown = run(["report", *span, "--format", "json", "--price-in", "2", "--price-out", "8"])
    assert shown.code == 0, shown.err
    (row,) = json.loads(shown.out)["days"]
    assert (row["conversations"], row["handed_to_person"], row["wait_minutes_median"]) == (
        4,
        1,
        12.0,
    )
    assert (row["actions_approved"], row["checks_refused"], row["charged_cents"]) == (1, 1, charged)
    assert row["cost"] == 0.0  # the scripted model reports no tokens
    as_csv = run(["report", *span, "--format", "csv"])
    (line,) = list(csv.DictReader(io.StringIO(as_csv.out)))
    assert line["day"] == DAY.isoformat() and line["resolved_by_assistant"] == "1"
    table = run(["report", *span])
    assert table.code == 0 and DAY.isoformat() in table.out and "12/12" in table.out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--since", "yesterday"], "--since takes a date as YYYY-MM-DD, not 'yesterday'."),
        (["--since", "2026-05-04", "--until", "2026-05-01"], "is before --since"),
        (["--since", "2024-01-01", "--until", "2026-01-01"], "at most 366 days"),
        (["--price-in", "2"], "Give both --price-in and --price-out"),
    ],
)
def test_report_refuses_a_bad_span_or_price_in_one_line(argv: list[str], said: str) -> None:
    refused = run(["report", *argv])
    assert refused.code == 2 and said in refused.err and "Traceback" not in refused.err


def test_the_supervisors_report_gives_the_same_figures_and_only_to_a_supervisor(
    make_assistant: Callable[..., TravelAssistant],
    model: ScriptedChatModel,
    travel_db: Database,
) -> None:
    from fastapi.testclient import TestClient

    from server.auth import AGENT, SUPERVISOR
    from server.service import ConversationService
    from tests.support.web import build_app

    store = ConversationStore.in_memory()
    service = ConversationService.over_store(make_assistant(checkpointer=store.saver), store)
    app, signer = build_app(service)
    charged = scripted_day(service.conversations, model, travel_db)
    query = {"since": DAY.isoformat(), "until": (DAY + timedelta(days=1)).isoformat()}
    with TestClient(app) as client:

        def read(token: str) -> Any:
            headers = {"Authorization": f"Bearer {token}"}
            return client.get("/api/v1/supervisor/report", params=query, headers=headers)

        shown = read(signer.issue("bruno@example.com", role=SUPERVISOR))
        assert shown.status_code == 200, shown.text
        day, after = shown.json()["days"]
        assert (day["day"], day["conversations"], after["conversations"]) == (
            DAY.isoformat(),
            4,
            1,
        )
        assert (day["handed_to_person"], day["wait_minutes_median"]) == (1, 12.0)
        assert (day["charged_cents"], day["checks_refused"]) == (charged, 1)
        assert read(signer.issue("ana@example.com", role=AGENT)).status_code == 403
        assert read(signer.issue(FIXTURE_PASSENGER_ID)).status_code == 403
        supervisor = {"Authorization": f"Bearer {signer.issue('b', role=SUPERVISOR)}"}
        for span, days in (({"since": "2026-05-05", "until": "2026-05-01"}, 0), ({}, 7)):
            got = client.get("/api/v1/supervisor/report", params=span, headers=supervisor)
            assert got.status_code == 200 and len(got.json()["days"]) == days
    store.close()
