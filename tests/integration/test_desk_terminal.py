"""A customer and a member of staff, each in a terminal of their own (issue 29).

The installed program twice, in two ptys over one home: the customer's ``chat`` asks for
a person with ``/agent``; the ``desk``, already open, shows the newcomer by itself;
``desk queue`` lists it for scripts; the ``desk`` takes it;
what each side writes appears on the other side within seconds, above the prompt, with
nobody pressing a key; the model is not asked anything while the person holds the
conversation; handed back with a note, the assistant answers the next message and the
note is in what the model reads, never on the customer's screen.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO
from tests.support.cli import chat_args
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import ticket_flight, tomorrow_flight
from tests.support.terminal import PASSENGER_ID, PROGRAM, TerminalLog, change_script, spawn

pexpect = pytest.importorskip("pexpect")

NOTE = "Claim 4411 opened for the lost bag; the customer wants an update by e-mail."


def _desk_args(home: Path, db: Path, *extra: str) -> list[str]:
    return ["desk", *extra, "--home", str(home), "--db", str(db)]


def test_desk_customer_and_person_talk_across_two_terminals(files: tuple[Path, Path]) -> None:
    home, db = files
    script = [Reply(text="Your bag claim is 4411; you will hear from us by e-mail.")]
    with FakeOpenAI(script) as server:
        desk = spawn(server, _desk_args(home, db, "--agent", "Ana Lima"))
        desk.timeout = 60  # a loaded machine starts it slowly
        desk.expect("Nobody is waiting for a person.")
        desk.expect("desk>")
        customer = spawn(server, chat_args(db, PASSENGER_ID, home=home))
        customer.timeout = 60
        customer.expect("you>")
        customer.send("/agent my bag was lost\r")
        customer.expect("number 1 in the queue")
        customer.expect("you>")

        listed = subprocess.run(
            [str(PROGRAM), *_desk_args(home, db, "queue")],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
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
    # Each action at the desk is in the store's audit log, with Ana's name.
    audit = subprocess.run(
        [str(PROGRAM), "audit", "--home", str(home), "--conversation", thread_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for action in ("took", "proposed", "handed back"):
        assert any("Ana Lima" in line and action in line for line in audit.stdout.splitlines()), (
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
    settings = {"TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE": "EUR 0.01"}
    with FakeOpenAI(script) as server:
        desk = spawn(server, _desk_args(home, db, "--agent", "Ana Lima"), env=settings)
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


def test_desk_without_a_model_leaves_the_change_to_the_customers_window(
    files: tuple[Path, Path],
) -> None:
    # A desk with no model configured records the decision; the customer's terminal,
    # watching, sees it decided and nobody going on with it, and goes on by itself.
    home, db = files
    script, new_flight = change_script(db, "Tomorrow's LX0112 has seats. I'll move you.")
    before = ticket_flight(db)
    settings = {"TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE": "EUR 0.01"}
    with FakeOpenAI(script) as server:
        desk = spawn(server, _desk_args(home, db, "--agent", "Ana Lima"), env=settings, model=False)
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

        desk.expect("Waiting for your check \\(1\\)", timeout=10)
        desk.send("/approve 1\r")
        desk.expect("This desk has no model configured")
        assert ticket_flight(db) == before
        customer.expect("Ana Lima of our customer-service team approved Change flight", timeout=10)
        customer.expect("Done: your ticket is on tomorrow's flight.", timeout=15)
        customer.expect("you>")
        assert ticket_flight(db) == new_flight
        assert "Press Enter" not in customer.logfile_read.text
        customer.sendcontrol("d")
        customer.expect(pexpect.EOF)
        desk.send("/exit\r")
        desk.expect(pexpect.EOF)
    assert "Traceback" not in customer.logfile_read.text + desk.logfile_read.text


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
    listed = subprocess.run(
        [str(PROGRAM), *_desk_args(home, db, "queue")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (line,) = listed.stdout.splitlines()
    assert line.split("\t")[3:] == ["customer", "what would it cost me?"]
