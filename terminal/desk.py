"""The desk in the terminal: a member of staff works the service's desk with their token.

``DeskSession`` is the loop of ``travel-assistant desk --server URL --token TOKEN``: a
client of the running service's staff API (``terminal.desk_api``), as ``gh`` is of
GitHub. The queue of conversations waiting for a person, taking one, reading all of it
as the people behind the desk see it (every message, tool call and raw result,
hand-over, and approval with its amount), writing to the customer, proposing an action,
handing it back with a note (or closing it), and, with a supervisor's token, the staff
checks: each is a request to the service, which alone decides who may do what, under
the login the token proves. What the customer writes meanwhile, and what becomes of a
proposal, is shown above the prompt within a second (the service is polled twice a
second, ``terminal.live.Watch``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from conversations import words
from conversations.records import PRIMARY
from conversations.words import CONFIRM_END, MAX_MESSAGE_CHARS
from terminal.desk_api import DeskApiError
from terminal.live import Watch
from terminal.prompter import EXIT_WORDS, Prompter, clean_input
from terminal.render import DETAIL_CHARS, GLYPHS

if TYPE_CHECKING:
    from terminal.console import Console
    from terminal.desk_api import DeskApi

# How often the desk asks the service what changed (the queue, the conversation held).
POLL_SECONDS = 0.5
# How long the desk follows the action a decision lets run before it leaves it to the service.
APPLY_WAIT = 60.0

DESK_HELP = """\
Write to take the next step; what you type goes to the customer of the conversation you hold.
Commands:
  /queue          the conversations waiting for a person, longest waiting first
  /take [N|ID]    take conversation N of /queue (or by id; the first one without either)
  /show [N|ID]    the whole conversation: messages, tool calls and results, approvals;
                  the one you hold, or N of /queue, or one you may read by id
  /back [NOTE]    hand it back to the assistant; the assistant reads NOTE, the customer not
  /close [NOTE]   the same, recording that you finished the matter yourself
  /propose [ACTION JSON]  put an action to the customer for their y/n, e.g.
                  /propose cancel_hotel {"booking_id": 3}; without arguments, the actions
  /checks         large actions customers approved that wait for a check (supervisors)
  /approve N      approve check N of /checks (the last one runs the action at once)
  /refuse N WHY   refuse check N; the customer and the assistant are told WHY
  /help           this help
  /exit           leave (the conversations you hold stay yours until you hand them back)"""

Row = dict[str, Any]


class DeskInputError(Exception):
    """A command the desk cannot send as typed; the message says how to type it."""


def _moment(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def queue_lines(queue: Sequence[Row], now: datetime) -> list[str]:
    """Return the queue as numbered lines: passenger, minutes waited, who asked, why, id."""
    lines = []
    for number, handoff in enumerate(queue, start=1):
        minutes = max(0, int((now - _moment(handoff["requested_at"])).total_seconds() // 60))
        by = "asked by the customer" if handoff["requested_by"] == "customer" else "the assistant"
        lines.append(
            f"{number}. passenger {handoff['passenger_id']}, waiting {minutes} min, {by}: "
            f"{handoff['reason'] or '(no reason given)'}  [{handoff['conversation_id']}]"
        )
        if handoff.get("summary"):
            lines.append(f"     summary: {handoff['summary']}")
    return lines


def tab_lines(queue: Sequence[Row], now: datetime) -> list[str]:
    """Return the queue for scripts: id, passenger, minutes, by, reason, tab-separated."""
    lines = []
    for handoff in queue:
        minutes = max(0, int((now - _moment(handoff["requested_at"])).total_seconds() // 60))
        reason = " ".join(str(handoff["reason"]).split())
        fields = (handoff["conversation_id"], handoff["passenger_id"], str(minutes))
        lines.append("\t".join((*fields, handoff["requested_by"], reason)))
    return lines


def show_step(console: Console, step: Mapping[str, Any]) -> None:
    """Print one step of a conversation's timeline (as the service's view gives it)."""
    kind = step.get("type")
    if kind == "customer":
        console.line(f"customer> {step['text']}")
    elif kind == "reply" and step.get("person"):
        console.line(f"{step['person']} ({words.STAFF_LABEL})> {step['text']}")
    elif kind == "reply":
        primary = step.get("assistant") in (None, "", PRIMARY)
        label = "" if primary else f" ({step.get('assistant_title') or step['assistant']})"
        console.line(f"assistant{label}> {step['text']}")
    elif kind == "tool_call":
        arguments = json.dumps(step.get("arguments", {}), ensure_ascii=False, default=str)
        console.line(f"  → {step['tool']} {arguments}")
        if step.get("result") is None:
            console.line("    ← (no answer yet: waiting for the customer's approval)")
        else:
            content = " ".join(str(step["result"]).split())
            if len(content) > DETAIL_CHARS:
                content = content[:DETAIL_CHARS] + "…"
            console.line(f"    ← [{step.get('outcome')}] {content}")
    elif kind == "hand_over":
        before, after = step.get("from_assistant"), step.get("to_assistant")
        console.line(f"  ⇄ {before or 'primary'} → {after or 'primary'}")
    elif kind == "approval":
        moved = " (money moved)" if step.get("moved") else ""
        console.line(f"  {GLYPHS.get(step['outcome'], '·')} {step['text']}{moved}")
    else:
        console.line(f"  · {step.get('text', '')}")


def _step_key(step: Mapping[str, Any]) -> tuple[str, ...]:
    """Return what tells one step from another, to show only what is new."""
    if step.get("type") == "approval":
        return ("approval", str(step.get("tool_call_id")), str(step.get("outcome")))
    return (str(step.get("type")), str(step.get("text", "")))


class DeskSession:
    """One member of staff at the desk, working through the service's API."""

    def __init__(
        self, api: DeskApi, me: Mapping[str, Any], console: Console, prompter: Prompter
    ) -> None:
        """Work on ``api``'s desk as the member of staff ``me`` (the service's ``/me``)."""
        self.api = api
        self.me = dict(me)
        self.supervisor = self.me.get("role") == "supervisor"
        self.console = console
        self.prompter = prompter
        self.holding: Row | None = None
        self.listed: list[Row] = []
        self.checks: list[Row] = []
        self.watch: Watch | None = None

    def run(self) -> int:
        """Work until the member of staff leaves; return the exit code."""
        who = self.me["name"]
        if self.me["login"] != who:
            who = f"{who} ({self.me['login']})"
        self.console.status(f"Desk of {who}, {self.me['role']}. Type /help for commands.")
        try:
            held = self.api.queue()["yours"]
        except DeskApiError as error:
            self.console.error(str(error))
            return 1
        if held:
            self.hold(held[0])
            others = [h["conversation_id"] for h in held[1:]]
            if others:
                self.console.status("You also hold: " + ", ".join(others) + " (/take ID).")
            if self.supervisor:  # what waits for a supervisor, numbered for /approve N
                self.checks = self.api.checks()
                self._print_checks(self.checks)
        else:
            self.show_queue()
        try:
            while True:
                try:
                    text = clean_input(self.prompter.message(self.prompt()))
                except (EOFError, KeyboardInterrupt):
                    return self.leave()
                if not text:
                    continue
                if text.lower() in EXIT_WORDS:
                    return self.leave()
                try:
                    if text.startswith("/"):
                        self.command(text)
                    else:
                        self.write(text)
                except (DeskApiError, DeskInputError) as refused:
                    self.console.error(str(refused))
        finally:
            self.stop_watching()

    def prompt(self) -> str:
        """Return the prompt: which conversation the next line goes to."""
        if self.holding is None:
            return "desk> "
        return f"to {self.holding['passenger_id']}> "

    def leave(self) -> int:
        """Say what stays held, and leave."""
        try:
            held = self.api.queue()["yours"]
        except DeskApiError:
            held = []
        if held:
            self.console.status(
                f"You still hold {len(held)} conversation(s); the customers wait for you. "
                "Come back with the same sign-in: travel-assistant desk --server "
                f"{self.api.server} --token TOKEN"
            )
        return 0

    # Commands ---------------------------------------------------------------------------

    def command(self, text: str) -> None:
        """Run one slash command (a refusal of the service raises ``DeskApiError``)."""
        name, _, rest = text.partition(" ")
        name, rest = name.lower(), rest.strip()
        if name == "/help":
            self.console.status(DESK_HELP)
        elif name == "/queue":
            self.show_queue()
        elif name == "/take":
            self.take(rest)
        elif name == "/show":
            self.show(rest)
        elif name in ("/back", "/close"):
            self.end(rest, close=name == "/close")
        elif name == "/propose":
            self.propose(rest)
        elif name == "/checks":
            self.show_checks()
        elif name in ("/approve", "/refuse"):
            self.decide_check(rest, approved=name == "/approve")
        else:
            self.console.error(f"Unknown command {name}. Type /help for the list.")

    def show_queue(self) -> None:
        """List the conversations waiting (and the checks, for a supervisor)."""
        self.listed = self.api.queue()["waiting"]
        if self.supervisor:
            self.checks = self.api.checks()
            self._print_checks(self.checks)
        self._print_people(self.listed)
        if self.holding is None:
            self.watch_queue()

    def propose(self, rest: str) -> None:
        """Put an action to the customer of the conversation held, or list the actions."""
        action, _, given = rest.partition(" ")
        if not action:
            self.console.status("Actions you can propose (/propose ACTION JSON):")
            for found in self.api.actions():
                fields = ", ".join(found["arguments"].get("properties", {}))
                self.console.status(f"  {found['name']} {{{fields}}}")
            return
        if self.holding is None:
            raise DeskInputError("You hold no conversation: /take one first.")
        try:
            args = json.loads(given or "{}")
        except ValueError as error:
            raise DeskInputError(f"The arguments are not JSON: {error}.") from None
        if not isinstance(args, dict):
            raise DeskInputError('Give the arguments as a JSON object, e.g. {"booking_id": 3}.')
        try:
            approval = self.api.propose(self.holding["conversation_id"], action, args)
        except DeskApiError as refused:
            raise DeskApiError(f"{refused} Nothing was proposed.", refused.status) from None
        preview = approval["preview"]
        self.console.status(f"Proposed to the customer: {preview['title']}")
        for line in preview.get("lines", ()):
            self.console.status(f"  {line}")
        self.console.status("The customer answers y/n in their window; you will see it here.")

    def show_checks(self) -> None:
        """List the checks waiting, numbered for ``/approve N`` and ``/refuse N``."""
        self.checks = self.api.checks()
        self._print_checks(self.checks, empty=True)

    def _print_checks(self, checks: Sequence[Row], *, empty: bool = False) -> None:
        if not checks:
            if empty:
                self.console.status("No action waits for a check.")
            return
        self.console.status(f"Waiting for your check ({len(checks)}):")
        for number, check in enumerate(checks, start=1):
            self.console.status(
                f"{number}. passenger {check['passenger_id']}: {check['title']}, "
                f"{check['amount']}  [{check['conversation_id']}]"
            )
            for line in check.get("lines", ()):
                self.console.status(f"     {line}")
        self.console.status("Decide with /approve N or /refuse N WHY; read it with /show ID.")

    def decide_check(self, rest: str, *, approved: bool) -> None:
        """Approve or refuse a waiting check, by its number in /checks."""
        which, _, reason = rest.partition(" ")
        checks = self.checks or self.api.checks()
        if not which.isdigit() or not 1 <= int(which) <= len(checks):
            raise DeskInputError(
                f"Say which check: /{'approve' if approved else 'refuse'} N, N from /checks."
            )
        check = checks[int(which) - 1]
        if not approved and not reason.strip():
            raise DeskInputError(
                "Say why (/refuse N WHY): the customer and the assistant are told."
            )
        self.console.thinking.start()
        try:
            self.api.decide(check["check_id"], approved=approved, reason=reason.strip())
        finally:
            self.console.thinking.stop()
            self.checks = []
        decided = "Approved" if approved else "Refused"
        self.console.status(f"{decided}: {check['title']}, {check['amount']}.")
        self._say_outcome(check)

    def _say_outcome(self, check: Mapping[str, Any]) -> None:
        """Say what became of ``check``'s action once the service has applied it.

        The last decision lets the customer's turn go on at the service at once; the
        desk follows it (the conversation's ``busy``) until the action's end is in the
        history, or says what it still waits for.
        """
        deadline = time.monotonic() + APPLY_WAIT
        self.console.thinking.start()
        try:
            while True:
                try:
                    detail = self.api.conversation(check["conversation_id"])
                except DeskApiError:
                    return  # decided; this token may not read the conversation any more
                ended = [
                    s
                    for s in detail.get("steps", ())
                    if s.get("type") == "approval"
                    and s.get("tool_call_id") == check.get("tool_call_id")
                ]
                if ended:
                    break
                if not detail["conversation"].get("busy") or time.monotonic() > deadline:
                    others = [
                        c
                        for c in (self.api.checks() if self.supervisor else [])
                        if c["conversation_id"] == check["conversation_id"]
                    ]
                    self.console.thinking.stop()
                    self.console.status(
                        "It runs once the customer's other checks are decided too."
                        if others
                        else "The decision is kept: the service applies it shortly."
                    )
                    return
                time.sleep(POLL_SECONDS / 2)
        finally:
            self.console.thinking.stop()
        step = ended[-1]
        self.console.status(words.desk_outcome(step["title"], step["outcome"], step["reason"]))

    def _print_people(self, queue: Sequence[Row]) -> None:
        if not queue:
            self.console.status("Nobody is waiting for a person.")
            return
        self.console.status(f"Waiting for a person ({len(queue)}):")
        for line in queue_lines(queue, datetime.now(UTC)):
            self.console.status(line)
        self.console.status("Take one with /take N.")

    def take(self, which: str) -> None:
        """Take a waiting conversation: by number of /queue, by id, or the first."""
        queue = self.listed or self.api.queue()["waiting"]
        if not which:
            queue = self.api.queue()["waiting"]
            chosen = queue[0]["conversation_id"] if queue else None
        elif which.isdigit() and 1 <= int(which) <= len(queue):
            chosen = queue[int(which) - 1]["conversation_id"]
        else:
            chosen = which
        if chosen is None:
            self.console.status("Nobody is waiting for a person.")
            return
        handoff = self.api.take(chosen)
        self.listed = []
        self.hold(handoff)

    def hold(self, handoff: Row) -> None:
        """Make ``handoff``'s conversation the one written to, show it, watch it."""
        self.stop_watching()
        self.holding = handoff
        self.console.status(
            f"You hold the conversation of passenger {handoff['passenger_id']} "
            f"[{handoff['conversation_id']}]. Why: {handoff['reason'] or '(no reason given)'}"
        )
        if handoff.get("summary"):
            self.console.status(f"Summary: {handoff['summary']}")
        detail = self.api.conversation(handoff["conversation_id"])
        for step in detail["steps"]:
            show_step(self.console, step)
        if detail.get("pending"):
            self.console.status(
                f"{len(detail['pending'])} action(s) wait for the customer's decision in "
                "their window."
            )
        self.watch_customer(handoff, detail["steps"])

    def show(self, which: str = "") -> None:
        """Show a whole conversation, step by step: the one held, or one staff may read.

        ``which`` is a number of /queue or the id of a conversation; the service says
        whether the token may read it, and records the look in its audit log.
        """
        if not which:
            if self.holding is None:
                self.console.status("You hold no conversation: /take one, or /show N or ID.")
                return
            conversation_id = self.holding["conversation_id"]
        else:
            queue = self.listed or self.api.queue()["waiting"]
            if which.isdigit() and 1 <= int(which) <= len(queue):
                conversation_id = queue[int(which) - 1]["conversation_id"]
            else:
                conversation_id = which
        try:
            detail = self.api.conversation(conversation_id)
        except DeskApiError as error:
            if error.status in (404, 422):
                raise DeskInputError(
                    f"{which} is neither a number of /queue nor a conversation you may read."
                ) from None
            raise
        if which:
            self.console.status(
                f"Conversation of passenger {detail['conversation']['passenger_id']} "
                f"[{conversation_id}]:"
            )
        for step in detail["steps"]:
            show_step(self.console, step)

    def write(self, text: str) -> None:
        """Send ``text`` to the customer of the conversation held."""
        if self.holding is None:
            raise DeskInputError("You hold no conversation: /take one first (see /queue).")
        if len(text) > MAX_MESSAGE_CHARS:
            raise DeskInputError(
                f"Your message is {len(text)} characters long; the limit is {MAX_MESSAGE_CHARS}."
            )
        try:
            self.api.write(self.holding["conversation_id"], text)
        except DeskApiError as refused:
            raise DeskApiError(f"{refused} Your message was not sent.", refused.status) from None

    def end(self, note: str, *, close: bool) -> None:
        """Hand the conversation held back to the assistant (``close``: finished)."""
        if self.holding is None:
            raise DeskInputError("You hold no conversation.")
        held = self.holding["conversation_id"]
        try:
            self.api.hand_back(held, note, close=close)
        except DeskApiError as refused:
            # What it would end is said first; the person decides knowing it.
            if refused.status != 409 or not str(refused).endswith(CONFIRM_END):
                raise
            answer = clean_input(self.prompter.answer(f"{refused} [y/N] "))
            if answer.lower() not in ("y", "yes"):
                self.console.status("You still hold the conversation; nothing was ended.")
                return
            self.api.hand_back(held, note, close=close, end_pending=True)
        self.stop_watching()
        self.console.status(
            "Closed; the assistant answers the customer's next message."
            if close
            else "Handed back to the assistant" + (" with your note." if note else ".")
        )
        self.holding = None
        held = self.api.queue()["yours"]
        if held:
            self.hold(held[0])
        else:
            self.show_queue()

    # What changes meanwhile ------------------------------------------------------------------

    def watch_customer(self, handoff: Row, steps: Sequence[Mapping[str, Any]]) -> None:
        """Show what the customer writes, and what becomes of actions, as it comes."""
        conversation_id = handoff["conversation_id"]
        seen = Counter(_step_key(s) for s in steps)
        shown = {"count": handoff.get("messages", 0)}

        def look() -> bool:
            if self.holding is None or self.holding["conversation_id"] != conversation_id:
                return False
            try:
                held = {h["conversation_id"]: h for h in self.api.queue()["yours"]}
                now = held.get(conversation_id)
                if now is None:  # handed back elsewhere (another tab, the supervisor page)
                    return False
                if now["messages"] == shown["count"]:
                    return True
                shown["count"] = now["messages"]
                steps = self.api.conversation(conversation_id)["steps"]
            except DeskApiError:
                return True  # the service is away for a moment: the next look tries again
            new = []
            counts: Counter[tuple[str, ...]] = Counter()
            for step in steps:
                key = _step_key(step)
                counts[key] += 1
                if counts[key] > seen[key]:
                    seen[key] += 1
                    if step.get("type") in ("customer", "approval"):
                        new.append(step)
            if new:
                self.prompter.show(partial(self._show_customer, new))
            return True

        self.watch = Watch(look, None, name="desk-customer", every=POLL_SECONDS)

    def watch_queue(self) -> None:
        """While nothing is held, show the queue again when it changes (and the checks)."""
        self.stop_watching()
        known_checks = {c["check_id"] for c in self.checks}

        def look() -> bool:
            if self.holding is not None:
                return False
            try:
                queue = self.api.queue()["waiting"]
                checks = self.api.checks() if self.supervisor else []
            except DeskApiError:
                return True
            # What changed, whoever changed it (a newcomer, another person taking one,
            # a check decided elsewhere): the numbers of /take and /approve follow.
            ids = [h["conversation_id"] for h in queue]
            queue_moved = ids != [h["conversation_id"] for h in self.listed]
            checks_moved = {c["check_id"] for c in checks} != known_checks
            if not (queue_moved or checks_moved):
                return True
            self.listed = queue
            known_checks.clear()
            known_checks.update(c["check_id"] for c in checks)
            if checks_moved:
                self.checks = checks
            self.prompter.show(
                partial(
                    self._print_changes,
                    queue if queue_moved else None,
                    checks if checks_moved else None,
                )
            )
            return True

        self.watch = Watch(look, None, name="desk-queue", every=POLL_SECONDS)

    def _print_changes(self, queue: Sequence[Row] | None, checks: Sequence[Row] | None) -> None:
        if checks is not None:
            self._print_checks(checks, empty=True)
        if queue is not None:
            self._print_people(queue)

    def _show_customer(self, steps: Sequence[Mapping[str, Any]]) -> None:
        for step in steps:
            if step.get("type") == "approval":
                self.console.status(f"· {step['text']}")
            else:
                self.console.line(f"customer> {step['text']}")

    def stop_watching(self) -> None:
        """Stop showing the customer's messages (or the queue's changes)."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
