"""Property: whatever happened before, every request the model receives is a conversation
the strictest chat templates accept.

Random sequences of what happens in real use are played through the real graph, with a
scripted model, over a copy of the generated database: replies of every kind (text,
empty, unreadable tool calls, safe and parallel calls, a hand-over to a specialist with
an action to approve, replies cut at the output limit, with and without a cut tool call),
provider errors (before and after tools ran), a turn interrupted by a hard stop,
approvals given, refused or abandoned by a new message, and sessions resumed by a new
process. Every request the model received is checked with ``tests.support.strict_chat``;
and no sensitive call ever ran without the customer's approval.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from assistants.approvals import facts_of
from assistants.specialists import Crew, build_crew
from conversations.assistant import Decision, ModelProviderError, Thread, TravelAssistant
from db.clock import fixed_clock
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from tests.support.assistants import build_assistant
from tests.support.databases import FIXED_NOW
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.strict_chat import check

FALLBACK = 12  # plain replies after each event's own, so the script never runs dry
REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


class HardStop(Exception):
    """The process stops mid-turn (a kill, a lost terminal): nothing is closed.

    An error the turn does not know (neither a provider's nor a cancel) leaves the turn
    open as a dead process leaves it.
    """


def cut(text: str, *calls: dict[str, Any]) -> AIMessage:
    """A reply the server stopped at the output limit, its call arguments cut mid-way."""
    return AIMessage(
        content=text,
        invalid_tool_calls=[
            {
                "name": c["name"],
                "args": '{"ticket_no": "72400054',  # parses, partially: the danger
                "id": c["id"],
                "error": None,
                "type": "invalid_tool_call",
            }
            for c in calls
        ],
        response_metadata={"finish_reason": "length"},
    )


def unreadable() -> AIMessage:
    return AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "search_flights",
                "args": '{"limit": ]',
                "id": "bad1",
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
    )


def replies(kind: str) -> list[Any]:
    """The model's replies for one customer message of ``kind``."""
    cancel = call("cancel_ticket", {"ticket_no": FIXTURE_TICKET_NO})
    return {
        "text": [say("Sure.")],
        "empty_then_text": [say(""), say("Here you are.")],
        "empty_always": [say(""), say(""), say("")],
        "unreadable_call": [unreadable(), say("Fixed.")],
        "safe_call": [say("", call("fetch_user_flight_information")), say("You fly LX0112.")],
        "parallel_calls": [
            say(
                "Looking.",
                call("fetch_user_flight_information"),
                call("lookup_policy", {"query": "change fee"}),
            ),
            say("Done looking."),
        ],
        "action": [
            say("", call("ToFlightBookingAssistant", {"request": "cancel my ticket"})),
            say("I will cancel it.", cancel),
        ],
        "cut_text": [cut("The policy says that within twenty-four hours you")],
        "cut_call": [cut("", call("cancel_ticket"))],
        "error": [openai.APIConnectionError(request=REQUEST)],
        "error_after_tools": [
            say("", call("fetch_user_flight_information")),
            openai.APIConnectionError(request=REQUEST),
        ],
        "hard_stop": [HardStop()],
        "hard_stop_after_tools": [say("", call("fetch_user_flight_information")), HardStop()],
    }[kind]


MESSAGE_KINDS = [
    "text",
    "empty_then_text",
    "empty_always",
    "unreadable_call",
    "safe_call",
    "parallel_calls",
    "action",
    "cut_text",
    "cut_call",
    "error",
    "error_after_tools",
    "hard_stop",
    "hard_stop_after_tools",
]
events = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from(MESSAGE_KINDS)),
        st.tuples(st.just("approve"), st.sampled_from(MESSAGE_KINDS)),
        st.tuples(st.just("deny"), st.sampled_from(MESSAGE_KINDS)),
        st.tuples(st.just("resume"), st.just("")),
    ),
    min_size=1,
    max_size=7,
)


class Player:
    """Plays events against one new thread and remembers what was approved."""

    def __init__(self, db: Database, crew: Crew, thread: Thread) -> None:
        self.db = db
        self.crew = crew
        self.thread = thread
        self.model = ScriptedChatModel()
        self.saver = InMemorySaver()
        self.assistant = self.build()
        self.approved: set[str] = set()

    def build(self) -> TravelAssistant:
        # No retry policy: a provider error reaches the caller at once.
        return build_assistant(self.db, self.model, self.saver, crew=self.crew, retry_policy=None)

    def run(self, kind: str, start: Any) -> None:
        self.model.script[:] = [*replies(kind), *(say("OK.") for _ in range(FALLBACK))]
        with contextlib.suppress(ModelProviderError, HardStop):
            list(start())

    def play(self, event: str, kind: str) -> None:
        pending = self.assistant.pending_actions(self.thread)
        if event == "resume":
            self.assistant = self.build()  # a new process over the same saved sessions
        elif event in ("approve", "deny") and pending:
            decisions = {p.tool_call_id: Decision(event == "approve", "no") for p in pending}
            if event == "approve":
                self.approved |= set(decisions)
            self.run(kind, lambda: self.assistant.resolve(self.thread, decisions))
        else:  # a message; with an approval pending, it abandons the approval
            self.run(kind, lambda: self.assistant.send(self.thread, f"message ({kind})"))


@pytest.fixture(scope="module")
def shared(
    template_db_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Database, Crew]]:
    """One database and crew for every example (building a crew takes a quarter second).

    Each example talks on a thread of its own; an earlier example's approved cancellation
    only makes a later one's tool answer with an error, which is one more case.
    """
    path = tmp_path_factory.mktemp("property") / "travel.sqlite"
    shutil.copyfile(template_db_path, path)
    db = Database.from_url(str(path), clock=fixed_clock(FIXED_NOW))
    yield db, build_crew(db)
    db.dispose()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events)
def test_every_request_is_accepted_by_strict_templates(
    events: list[tuple[str, str]], shared: tuple[Database, Crew]
) -> None:
    db, crew = shared
    player = Player(db, crew, Thread(f"property-{uuid.uuid4()}", FIXTURE_PASSENGER_ID))
    for event, kind in events:
        player.play(event, kind)
    requests: list[list[BaseMessage]] = player.model.received
    for number, request in enumerate(requests):
        problems = check(request)
        assert not problems, (number, problems, [m.type for m in request])
    for message in player.assistant.messages(player.thread):
        if isinstance(message, ToolMessage) and message.name == "cancel_ticket":
            assert not facts_of(message).ran or message.tool_call_id in player.approved
