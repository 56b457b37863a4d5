"""The terminal desk as a client of the service (issue 48): one proven identity, one enforcer.

``DeskSession`` works through the service's staff API (``terminal.desk_api``), here the
real application behind FastAPI's ``TestClient`` (an ``httpx.Client``): every look and
act is a request with a member of staff's token, so the desk is exactly what the token
may do, under the login it proves. Its own state follows what it and others do (a
hand-back, a conversation another person took), and an agent's token is told in one
line that only a supervisor decides checks. ``tests/integration/test_desk_terminal.py``
runs the installed program in a pty against a running ``serve``.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conversations.assistant import Thread, TravelAssistant
from conversations.protocol import Answer, Conversations
from conversations.records import AssistantLine, TurnEnd
from conversations.store import ConversationStore
from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from server.auth import AGENT, SUPERVISOR, TokenSigner
from server.service import ConversationService
from terminal import Console
from terminal.desk import DeskSession
from terminal.desk_api import DeskApi, DeskApiError
from terminal.prompter import Prompter
from tests.support.scripted import ScriptedChatModel, call, say
from tests.support.web import build_app, plan_trip

ANA = ("ana.lima@example.com", "Ana Lima")
# Deciding a check passes its own timeout, which the TestClient warns about.
pytestmark = pytest.mark.filterwarnings("ignore:You should not use the .timeout. argument")


class Desk:
    """The service behind a test client, and desks signed in to it."""

    def __init__(self, client: TestClient, signer: TokenSigner, service: ConversationService):
        self.client, self.signer, self.service = client, signer, service
        self.conversations: Conversations = service.conversations

    def api(self, login: str, name: str, role: Any = AGENT) -> DeskApi:
        token = self.signer.issue(login, role=role, name=name)
        self.client.headers["Authorization"] = f"Bearer {token}"
        return DeskApi(self.client, "http://testserver")

    def session(
        self, lines: Callable[[str], str], *, role: Any = AGENT, who: tuple[str, str] = ANA
    ) -> tuple[DeskSession, io.StringIO, io.StringIO]:
        api = self.api(*who, role=role)
        out, err = io.StringIO(), io.StringIO()
        prompter = Prompter(lines, lines, lambda: False, lambda draw: draw())
        return DeskSession(api, api.me(), Console(out=out, err=err), prompter), out, err


@pytest.fixture
def desk(make_assistant: Callable[..., TravelAssistant]) -> Iterator[Desk]:
    store = ConversationStore.in_memory()
    assistant = make_assistant(checkpointer=store.saver, retry_policy=None)
    service = ConversationService.over_store(assistant, store, check_above=1)
    app, signer = build_app(service)
    with TestClient(app) as client:
        yield Desk(client, signer, service)
    store.close()


@pytest.mark.parametrize("command", ["/back Thanks, all sorted.", "/close Refund sent."])
def test_desk_after_back_or_close_holds_nothing_and_writes_nothing(
    desk: Desk, command: str
) -> None:
    # The desk's own state follows the hand-back: the next line goes nowhere (and says
    # so), not to the customer it no longer holds.
    conversation = desk.conversations.get(Thread("t-end", FIXTURE_PASSENGER_ID))
    conversation.ask_for_person("my bag is lost")
    typed = iter(["/take 1", command, "One more thing about your bag.", "/exit"])
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        return next(typed)

    session, _out, err = desk.session(read)
    assert session.run() == 0
    assert prompts == ["desk> ", f"to {FIXTURE_PASSENGER_ID}> ", "desk> ", "desk> "]
    assert "You hold no conversation" in err.getvalue()
    said = [r.text for r in conversation.history() if isinstance(r, AssistantLine)]
    assert "One more thing about your bag." not in said
    assert desk.conversations.desk.held_by(ANA[0]) == []
    # Taken and handed back under the token's login: the store says so.
    latest = desk.conversations.desk.latest("t-end")
    assert latest is not None and (latest.agent_login, latest.agent) == ANA


def test_desk_reads_waiting_and_checked_conversations_and_decides_as_its_token(
    desk: Desk, model: ScriptedChatModel, travel_db: Database
) -> None:
    conversations = desk.conversations
    waiting = conversations.get(Thread("t-queue", FIXTURE_PASSENGER_ID))
    model.script = [say("Let me find someone for you.")]
    with waiting.claim() as turn:
        list(turn.send("My seat was broken on the way here."))
    waiting.ask_for_person("broken seat")
    checked = conversations.get(Thread("t-check", FIXTURE_PASSENGER_ID))
    trip = plan_trip(travel_db)
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": trip.new_flight_id}
    model.script = [
        say("", call("ToFlightBookingAssistant", {"request": "move"})),
        say("Moving you.", call("update_ticket_to_new_flight", change)),
    ]
    with checked.claim() as turn:
        ended = list(turn.send("Move me to tomorrow"))[-1]
    assert isinstance(ended, TurnEnd)
    (approval,) = ended.approvals
    with checked.claim() as turn:
        list(turn.resolve({approval.tool_call_id: Answer(True)}))
    # An agent's token: the queue and what waits in it, never the checks.
    typed = iter(["/show 1", "/checks", "/approve 1", "/show t-nobody", "/exit"])
    session, out, err = desk.session(lambda _: next(typed))
    assert session.run() == 0
    shown = out.getvalue() + err.getvalue()
    assert "customer> My seat was broken on the way here." in shown
    assert err.getvalue().count("Only a supervisor's token decides staff checks") == 2
    assert "This is an agent's token: it reads a conversation only while it waits" in shown
    assert "Traceback" not in shown
    # A supervisor's: the check with what the customer said yes to, decided as Bruno.
    model.script = [say("Done: you are on tomorrow's flight.")]
    typed = iter(["/checks", "/show t-check", "/show t-nobody", "/approve 1", "/exit"])
    bruno = ("bruno.costa@example.com", "Bruno Costa")
    session, out, err = desk.session(lambda _: next(typed), role=SUPERVISOR, who=bruno)
    assert session.run() == 0
    shown = out.getvalue() + err.getvalue()
    for line in approval.lines:
        assert line in shown
    assert "customer> Move me to tomorrow" in shown
    assert "t-nobody is neither a number of /queue nor a conversation you may read" in shown
    assert "Approved: Change flight" in shown
    assert "Change flight: done. The customer sees it in their conversation." in shown
    (check,) = conversations.desk.checks_ever("t-check")
    assert (check.staff_login, check.staff) == bruno
    assert conversations.desk.held_by(bruno[0]) == []  # reading takes nothing


def test_desk_queue_follows_what_others_do_without_a_key_pressed(desk: Desk) -> None:
    # Another member of staff takes the only waiting conversation: this desk's list is
    # redrawn by itself, so /take 1 never names a conversation that left the queue.
    conversation = desk.conversations.get(Thread("t-gone-by", FIXTURE_PASSENGER_ID))
    conversation.ask_for_person("my flight was cancelled")
    lines = iter(["/exit"])
    said = io.StringIO()

    def read(prompt: str) -> str:
        conversation.take("bruno.costa@example.com")
        waited = time.monotonic()
        while "Nobody is waiting for a person." not in said.getvalue():
            assert time.monotonic() - waited < 10, said.getvalue()
            time.sleep(0.05)
        return next(lines)

    session, _out, err = desk.session(read)
    said = err
    assert session.run() == 0
    text = err.getvalue()
    assert text.index("Waiting for a person (1):") < text.index("Nobody is waiting for a person.")
    assert session.listed == []


def test_the_desks_refusals_are_one_line_each() -> None:
    # A service that is not there, and one that refuses the token: one line each.
    import httpx

    unreachable = DeskApi.connect("http://127.0.0.1:9", "token")
    with pytest.raises(DeskApiError, match=r"^Cannot reach the service at http://127.0.0.1:9 "):
        unreachable.me()
    with pytest.raises(DeskApiError, match="--server takes the service's address"):
        DeskApi.connect("127.0.0.1:8000", "token")

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"detail": "Your token has expired; ask for a new one."})

    client = httpx.Client(base_url="http://service", transport=httpx.MockTransport(refuse))
    with pytest.raises(DeskApiError) as refused:
        DeskApi(client).queue()
    said = str(refused.value)
    assert said.startswith("The service refused your token: Your token has expired")
    assert "\n" not in said and refused.value.status == 401


def test_only_a_supervisor_changes_the_second_approval_amount(desk: Desk) -> None:
    agent = desk.api("ana@example.com", "Ana Lima")
    desk.conversations.desk.set_check_above(1)  # as serve keeps the amount it starts with
    assert agent.second_approval() == {"amount": "EUR 0.01", "cents": 1}
    with pytest.raises(DeskApiError) as refused:
        agent.set_second_approval("EUR 5000")
    assert refused.value.status == 403
    assert "supervisor" in str(refused.value)
    supervisor = desk.api("bruno@example.com", "Bruno Costa", role=SUPERVISOR)
    with pytest.raises(DeskApiError) as mistyped:
        supervisor.set_second_approval("a lot")
    assert mistyped.value.status == 422 and "amount" in str(mistyped.value)
    assert desk.conversations.check_above == 1  # nothing changed
    assert supervisor.set_second_approval("EUR 500") == {"amount": "EUR 500.00", "cents": 50_000}
    # Kept with the conversations, and used by this worker at once.
    assert desk.conversations.desk.agree_check_above(None) == 50_000
    assert desk.conversations.check_above == 50_000
    assert supervisor.set_second_approval(None) == {"amount": None, "cents": None}
    assert desk.conversations.check_above is None


@pytest.mark.parametrize("answer", ["n", "y"])
def test_desk_back_over_a_pending_action_says_what_it_ends_and_asks_first(
    desk: Desk, travel_db: Database, answer: str
) -> None:
    # The service refuses the hand-back once, naming the action; the desk asks y/N on
    # it: no keeps the conversation and the action, yes ends it, as the record says.
    conversation = desk.conversations.get(Thread("t-back-pending", FIXTURE_PASSENGER_ID))
    conversation.ask_for_person("move my flight")
    conversation.take(ANA[0])
    change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": plan_trip(travel_db).new_flight_id}
    conversation.person_proposes(ANA[0], "update_ticket_to_new_flight", change)
    typed = iter(["/take", "/back Done by phone.", answer, "/exit"])
    asked: list[str] = []

    def read(prompt: str) -> str:
        asked.append(prompt)
        return next(typed)

    session, _out, err = desk.session(read, role=SUPERVISOR)
    assert session.run() == 0
    (question,) = [p for p in asked if p.endswith("[y/N] ")]
    assert question.startswith("Handing back now ends what is pending: Change flight: waiting")
    pending = conversation.approvals()
    if answer == "n":
        assert "nothing was ended" in err.getvalue() and len(pending) == 1
        assert desk.conversations.desk.held_by(ANA[0]) != []
    else:
        assert pending == [] and desk.conversations.desk.held_by(ANA[0]) == []
