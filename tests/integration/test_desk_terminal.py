"""A customer in a terminal, a member of staff at the terminal desk, and the service (issue 48).

The installed program in ptys: the customer's ``chat`` over a home, ``serve`` over the
same home, and ``desk --server URL --token TOKEN``, a client of that service signed in
with a staff token. The customer asks for a person with ``/agent``; the desk, already
open, shows the newcomer by itself; ``desk queue`` lists it for scripts; the desk takes
it; what each side writes appears on the other side within seconds, above the prompt,
with nobody pressing a key; the model is not asked anything while the person holds the
conversation; handed back with a note, the assistant answers the next message and the
note is in what the model reads, never on the customer's screen. Every act of the desk
is the service's, under the login the token proves: a supervisor who proposed an action
cannot decide its check from the terminal under another spelling, nor under a typed
name (``--agent`` is gone), and another supervisor signed in with the company's identity
provider decides it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from tests.support.cli import chat_args
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import ticket_flight, tomorrow_flight
from tests.support.oidc import AUDIENCE, Provider
from tests.support.terminal import PASSENGER_ID, PROGRAM, TerminalLog, change_script, spawn
from tests.support.web import free_port
from tests.support.workers import SECRET, stop, wait_healthy

pexpect = pytest.importorskip("pexpect")

NOTE = "Claim 4411 opened for the lost bag; the customer wants an update by e-mail."
CHECK_ABOVE = {"TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE": "EUR 0.01"}


def _clean(extra: Mapping[str, str]) -> dict[str, str]:
    """This environment without the program's settings, plus ``extra``."""
    import os

    skipped = ("OPENAI", "TAVILY", "TRAVEL_ASSISTANT")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(skipped)}, **extra}


def _env(server: FakeOpenAI, home: Path, db: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = _clean({})
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="test-key",
        TRAVEL_ASSISTANT_MODEL="scripted",
        TRAVEL_ASSISTANT_HOME=str(home),
        TRAVEL_ASSISTANT_DB=str(db),
        TRAVEL_ASSISTANT_SECRET=SECRET,
        **extra,
    )
    return env


@contextmanager
def serving(
    server: FakeOpenAI, home: Path, db: Path, *flags: str, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Run the installed ``serve`` over ``home`` and ``db``; yield its address."""
    port = free_port()
    process = subprocess.Popen(
        [str(PROGRAM), "serve", "--port", str(port), *flags],
        env=_env(server, home, db, env or {}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield url
    finally:
        stop(process)


def staff_token(home: Path, role: str, login: str, name: str) -> str:
    """Issue a member of staff's token with the installed ``travel-assistant token``."""
    issued = subprocess.run(
        [str(PROGRAM), "token", f"--{role}", login, "--name", name, "--home", str(home)],
        env=_clean({"TRAVEL_ASSISTANT_SECRET": SECRET}),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return issued.stdout.strip().splitlines()[0]


def _desk(url: str, token: str) -> list[str]:
    return ["desk", "--server", url, "--token", token]


def test_desk_customer_and_person_talk_across_two_terminals(files: tuple[Path, Path]) -> None:
    home, db = files
    script = [Reply(text="Your bag claim is 4411; you will hear from us by e-mail.")]
    with FakeOpenAI(script) as server, serving(server, home, db) as url:
        token = staff_token(home, "agent", "Ana.Lima@Example.com", "Ana Lima")
        desk = spawn(server, _desk(url, token))
        desk.timeout = 60  # a loaded machine starts it slowly
        desk.expect("Desk of Ana Lima \\(ana.lima@example.com\\), agent")
        desk.expect("Nobody is waiting for a person.")
        desk.expect("desk>")
        customer = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        customer.timeout = 60
        customer.expect("you>")
        customer.send("/agent my bag was lost\r")
        customer.expect("number 1 in the queue")
        customer.expect("you>")

        # For scripts, signed in from the environment, as gh is.
        listed = subprocess.run(
            [str(PROGRAM), "desk", "queue"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env=_clean({"TRAVEL_ASSISTANT_SERVER": url, "TRAVEL_ASSISTANT_TOKEN": token}),
        )
        lines = listed.stdout.splitlines()
        assert len(lines) == 1, listed.stdout
        thread_id, passenger, _, by, reason = lines[0].split("\t")
        assert (passenger, by, reason) == (FIXTURE_PASSENGER_ID, "customer", "my bag was lost")

        # The desk sees the newcomer by itself, with nobody pressing a key there.
        desk.expect("Waiting for a person \\(1\\)", timeout=10)
        desk.expect("my bag was lost")
        desk.expect("desk>")
        desk.send("/take 1\r")
        desk.expect("You hold the conversation of passenger")
        desk.expect(f"to {FIXTURE_PASSENGER_ID}>")
        # The customer is told, with nobody pressing a key in their terminal.
        customer.expect("Ana Lima from our customer-service team has your conversation", timeout=10)

        desk.send("Hello, I am Ana. I am sorry about your bag.\r")
        customer.expect("Ana Lima \\(customer service\\)>", timeout=10)
        customer.expect("I am sorry about your bag", timeout=10)
        customer.send("Thank you, it is a blue suitcase.\r")
        customer.expect("has your conversation and will answer here")
        desk.expect("customer> Thank you, it is a blue suitcase.", timeout=10)
        assert server.requests == []  # the model was not asked anything meanwhile

        # Ana proposes an action; the customer decides it in their window (asked at once,
        # while half a line is typed, which is back afterwards), and still the model is
        # not asked anything.
        customer.expect("you>")
        customer.send("and my bag is")
        customer.expect("bag is")  # drawn: the prompt has it
        change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": tomorrow_flight(db)}
        desk.send(f"/propose update_ticket_to_new_flight {json.dumps(change)}\r")
        desk.expect("Proposed to the customer: Change flight")
        customer.expect("I propose this for you: Change flight", timeout=10)
        customer.expect("Approval needed: Change flight")
        customer.expect("Approve this action\\? \\[y/N\\]")
        customer.send("y\r")
        customer.expect("you>")
        desk.expect("Approved: Change flight", timeout=10)
        assert ticket_flight(db) == change["new_flight_id"]
        customer.send(" blue.\r")  # the end of the line typed before the question
        desk.expect("customer> and my bag is blue.", timeout=10)
        customer.expect("you>")
        assert server.requests == []

        desk.send(f"/back {NOTE}\r")
        desk.expect("Handed back to the assistant with your note.")
        customer.expect("handed the conversation back to the assistant", timeout=10)
        customer.send("Where is my claim now?\r")
        customer.expect("Your bag claim is 4411")
        customer.expect("you>")
        customer.sendcontrol("d")
        customer.expect(pexpect.EOF)
        desk.send("/exit\r")
        desk.expect(pexpect.EOF)
        for child in (customer, desk):
            child.close()
            assert child.exitstatus == 0
    seen: TerminalLog = customer.logfile_read
    assert "Claim 4411 opened" not in seen.text  # the note is for the assistant only
    assert "Traceback" not in seen.text + desk.logfile_read.text
    sent = " ".join(str(m.get("content")) for m in server.requests[-1]["messages"])
    assert NOTE in sent
    assert "I am sorry about your bag" in sent and "blue suitcase" in sent
    assert thread_id in seen.text  # the customer's conversation is the one queued
    # Each action at the desk is in the store's audit log, under Ana's one login.
    audit = subprocess.run(
        [str(PROGRAM), "audit", "--home", str(home), "--conversation", thread_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for action in ("took", "proposed", "handed back"):
        assert any(
            "ana.lima@example.com" in line and action in line for line in audit.stdout.splitlines()
        ), (
            action,
            audit.stdout,
        )


def test_desk_a_large_change_waits_for_the_staff_check_then_runs_once(
    files: tuple[Path, Path],
) -> None:
    # The second approval in two terminals: the customer's yes waits, the desk sees the
    # check by itself and approves it, and the change is done then, by the desk: the
    # customer's terminal shows how it went with nobody pressing a key there.
    home, db = files
    script, new_flight = change_script(db, "Tomorrow's LX0112 has seats. I'll move you.")
    before = ticket_flight(db)
    settings = CHECK_ABOVE
    with FakeOpenAI(script) as server, serving(server, home, db, env=settings) as url:
        token = staff_token(home, "supervisor", "ana@example.com", "Ana Lima")
        desk = spawn(server, _desk(url, token))
        desk.timeout = 60
        desk.expect("desk>")
        customer = spawn(server, chat_args(db, PASSENGER_ID, home=home), env=settings)
        customer.timeout = 60
        customer.expect("you>")
        customer.send("Please move my flight to tomorrow\r")
        customer.expect("Approve this action")
        customer.send("y\r")
        customer.expect("checks it too before it is done")
        customer.expect("you>")
        assert ticket_flight(db) == before

        desk.expect("Waiting for your check \\(1\\)", timeout=10)
        desk.expect("Change flight")
        desk.send("/approve 1\r")
        desk.expect("Approved: Change flight")
        desk.expect("Change flight: done. The customer sees it in their conversation.")
        desk.expect("desk>")
        assert ticket_flight(db) == new_flight
        customer.expect("Approved by you and by Ana Lima", timeout=10)
        customer.expect("Done: your ticket is on tomorrow's flight.", timeout=10)
        assert "Press Enter" not in customer.logfile_read.text
        customer.send("/history\r")
        customer.expect("Approved by you and by Ana Lima")
        customer.expect("you>")
        customer.sendcontrol("d")
        customer.expect(pexpect.EOF)
        desk.send("/exit\r")
        desk.expect(pexpect.EOF)
    assert "Traceback" not in customer.logfile_read.text + desk.logfile_read.text


def test_desk_no_typed_name_and_no_other_spelling_decides_a_check_one_proposed(
    files: tuple[Path, Path],
) -> None:
    # Issue 48's walk-around: Bruno proposes a change over the API, the customer says yes,
    # and Bruno tries to give the second approval himself from the terminal desk. A
    # typed name is no sign-in (--agent is gone), and his token under another spelling
    # is still Bruno: refused, nothing done. Ana, signed in with the company's identity
    # provider, decides it; the change runs once.
    home, db = files
    new_flight, before = tomorrow_flight(db), ticket_flight(db)
    idp = Provider()
    oidc = ["--oidc-issuer", idp.issuer, "--oidc-audience", AUDIENCE]
    try:
        with FakeOpenAI([]) as server, serving(server, home, db, *oidc, env=CHECK_ABOVE) as url:
            customer = spawn(server, chat_args(db, PASSENGER_ID, home=home), env=CHECK_ABOVE)
            customer.timeout = 60
            customer.expect("you>")
            customer.send("/agent I want tomorrow's flight\r")
            customer.expect("number 1 in the queue")
            customer.expect("you>")
            bruno = staff_token(home, "supervisor", "bruno@example.com", "Bruno Costa")
            api = httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {bruno}"}, timeout=30
            )
            with api:
                (waiting,) = api.get("/api/v1/supervisor/desk/queue").json()["waiting"]
                conversation = waiting["conversation_id"]
                assert api.post(f"/api/v1/supervisor/desk/{conversation}/take").status_code == 200
                change = {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": new_flight}
                body = {"action": "update_ticket_to_new_flight", "args": change}
                proposed = api.post(f"/api/v1/supervisor/desk/{conversation}/proposals", json=body)
                assert proposed.status_code == 200, proposed.text
            customer.expect("Approve this action\\? \\[y/N\\]", timeout=15)
            customer.send("y\r")
            customer.expect("checks it too")

            typed = subprocess.run(
                [str(PROGRAM), "desk", "--agent", "Bruno", "--server", url],
                capture_output=True,
                text=True,
                timeout=60,
                env=_clean({}),
            )
            assert typed.returncode == 2
            assert "desk --agent is gone" in typed.stderr and "Traceback" not in typed.stderr
            again = staff_token(home, "supervisor", "Bruno@Example.COM", "Bruno")
            desk = spawn(server, _desk(url, again))
            desk.timeout = 60
            desk.expect("Waiting for your check \\(1\\)")
            desk.expect(f"to {FIXTURE_PASSENGER_ID}>")  # he holds the conversation
            desk.send("/approve 1\r")
            desk.expect("You proposed Change flight")  # what he sees, not a check number
            desk.expect("a second approval needs a second person")
            desk.expect(f"to {FIXTURE_PASSENGER_ID}>")
            desk.send("/exit\r")
            desk.expect(pexpect.EOF)
            assert ticket_flight(db) == before

            ana = idp.token(email="Ana.Lima@Example.com", name="Ana Lima", roles=["supervisor"])
            other = spawn(server, _desk(url, ana))
            other.timeout = 60
            other.expect("Desk of Ana Lima \\(ana.lima@example.com\\), supervisor")
            other.expect("Waiting for your check \\(1\\)")
            other.expect("desk>")
            other.send("/approve 1\r")
            other.expect("Approved: Change flight")
            other.expect("Change flight: done.")
            other.expect("desk>")
            assert ticket_flight(db) == new_flight
            customer.expect("Approved by you and by Ana Lima", timeout=15)
            other.send("/exit\r")
            other.expect(pexpect.EOF)
            customer.sendcontrol("d")
            customer.expect(pexpect.EOF)
    finally:
        idp.close()
    for child in (customer, desk, other):
        assert "Traceback" not in child.logfile_read.text
    # Unreachable, and a token the service does not take: one line each, no traceback.
    gone = subprocess.run(
        [str(PROGRAM), "desk", "queue", "--server", url, "--token", again],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean({}),
    )
    assert gone.returncode == 1 and gone.stderr.startswith("error: Cannot reach the service")
    assert len(gone.stderr.strip().splitlines()) == 1


def test_desk_agent_typed_at_an_approval_asks_for_a_person_once_it_is_decided(
    files: tuple[Path, Path],
) -> None:
    # "/agent" at "Approve this action? [y/N]" is not a no: the customer is told a person
    # comes once the action is decided (a person cannot take a conversation while an
    # action waits for the customer), the question is asked again, and after the answer
    # the conversation is queued for a person with the reason given.
    home, db = files
    before = ticket_flight(db)
    script, _ = change_script(db, "Tomorrow's LX0112 has seats. I'll move you.")
    script[-1] = Reply(text="Understood: your ticket stays as it is.")
    with FakeOpenAI(script) as server:
        customer = spawn(server, chat_args(db, PASSENGER_ID, home=home), color=False)
        customer.timeout = 60
        customer.expect("you>")
        customer.send("Please move my flight to tomorrow\r")
        customer.expect("Approve this action")
        customer.send("/agent what would it cost me?\r")
        customer.expect("You will be put in the queue for a person as soon as you have answered")
        customer.expect("Approve this action")  # asked again: nothing was decided
        assert len(server.requests) == 2
        customer.send("n\r")
        customer.expect("Why not\\?")
        customer.send("\r")
        customer.expect("your ticket stays as it is")
        customer.expect("number 1 in the queue")
        customer.expect("you>")
        customer.sendcontrol("d")
        customer.expect(pexpect.EOF)
        customer.close()
    assert customer.exitstatus == 0
    assert ticket_flight(db) == before  # declined by the "n", not by "/agent"
    told = " ".join(str(m.get("content")) for m in server.requests[-1]["messages"])
    assert "/agent" not in told  # not the reason of the no
    with FakeOpenAI([]) as server, serving(server, home, db) as url:
        token = staff_token(home, "agent", "ana@example.com", "Ana Lima")
        listed = subprocess.run(
            [str(PROGRAM), "desk", "queue", "--server", url, "--token", token],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env=_clean({}),
        )
    (line,) = listed.stdout.splitlines()
    assert line.split("\t")[3:] == ["customer", "what would it cost me?"]
