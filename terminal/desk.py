"""The desk in the terminal: a member of staff takes conversations handed to a person.

``DeskSession`` is the loop of ``travel-assistant desk``: the queue of conversations
waiting for a person (``conversations.desk``), taking one, reading all of it as the
people behind the desk see it (every message, tool call and raw result, hand-over, and
approval with its amount: ``Conversation.timeline``), writing to the customer, and
handing it back to the assistant with a note (or closing it). What the customer writes
meanwhile is shown above the prompt as it arrives (``terminal.live``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from conversations import words
from conversations.audit import record_action
from conversations.desk import Check, DeskError, Handoff
from conversations.events import Thread
from conversations.protocol import (
    ActionStep,
    Conversation,
    DecisionsError,
    HandOverStep,
    Step,
    ToolCallDetail,
    TurnRefusedError,
)
from conversations.records import ActionRecord, AssistantLine, CustomerLine, TurnFailure
from conversations.words import MAX_MESSAGE_CHARS
from terminal.live import Watch
from terminal.prompter import EXIT_WORDS, Prompter, clean_input
from terminal.render import DETAIL_CHARS, GLYPHS

if TYPE_CHECKING:
    from conversations.audit import AuditLog, Looked
    from conversations.protocol import Conversations
    from terminal.console import Console

DESK_HELP = """\
Write to take the next step; what you type goes to the customer of the conversation you hold.
Commands:
  /queue          the conversations waiting for a person, longest waiting first
  /take [N|ID]    take conversation N of /queue (or by id; the first one without either)
  /show [N|ID]    the whole conversation: messages, tool calls and results, approvals;
                  the one you hold, or N of /queue, or any waiting or checked one by id
  /back [NOTE]    hand it back to the assistant; the assistant reads NOTE, the customer not
  /close [NOTE]   the same, recording that you finished the matter yourself
  /propose [ACTION JSON]  put an action to the customer for their y/n, e.g.
                  /propose cancel_hotel {"booking_id": 3}; without arguments, the actions
  /checks         large actions customers approved that wait for your check
  /approve N      approve check N of /checks (the last one runs the action at once)
  /refuse N WHY   refuse check N; the customer and the assistant are told WHY
  /help           this help
  /exit           leave (the conversations you hold stay yours until you hand them back)"""


def _key(record: object) -> str:
    """Return what tells one record of the history from another, for what is new."""
    if isinstance(record, ActionRecord):
        return f"a:{record.tool_call_id}:{record.outcome}"
    return f"m:{getattr(record, 'id', None)}:{getattr(record, 'text', '')}"


def queue_lines(queue: Sequence[Handoff], now: datetime) -> list[str]:
    """Return the queue as numbered lines: passenger, minutes waited, who asked, why, id."""
    lines = []
    for number, handoff in enumerate(queue, start=1):
        minutes = max(0, int((now - handoff.requested_at).total_seconds() // 60))
        by = "asked by the customer" if handoff.requested_by == "customer" else "the assistant"
        lines.append(
            f"{number}. passenger {handoff.passenger_id}, waiting {minutes} min, {by}: "
            f"{handoff.reason or '(no reason given)'}  [{handoff.thread_id}]"
        )
        if handoff.summary:
            lines.append(f"     summary: {handoff.summary}")
    return lines


def show_step(console: Console, step: Step) -> None:
    """Print one step of a conversation's timeline for the people behind the desk."""
    if isinstance(step, CustomerLine):
        console.line(f"customer> {step.text}")
    elif isinstance(step, AssistantLine) and step.person:
        console.line(f"{step.person} ({words.STAFF_LABEL})> {step.text}")
    elif isinstance(step, AssistantLine):
        console.line(f"assistant{f' ({step.label})' if step.label else ''}> {step.text}")
    elif isinstance(step, ToolCallDetail):
        arguments = json.dumps(dict(step.arguments), ensure_ascii=False, default=str)
        console.line(f"  → {step.tool} {arguments}")
        if step.answer is None:
            console.line("    ← (no answer yet: waiting for the customer's approval)")
        else:
            content = " ".join(step.answer.split())
            if len(content) > DETAIL_CHARS:
                content = content[:DETAIL_CHARS] + "…"
            console.line(f"    ← [{step.outcome}] {content}")
    elif isinstance(step, HandOverStep):
        console.line(f"  ⇄ {step.from_label or 'primary'} → {step.to_label or 'primary'}")
    elif isinstance(step, ActionStep):
        record = step.record
        moved = " (money moved)" if step.moved else ""
        console.line(f"  {GLYPHS[record.outcome]} {record.line}{moved}")
    else:
        console.line(f"  · {step.text}")


class DeskSession:
    """One member of staff at the desk."""

    def __init__(
        self,
        conversations: Conversations,
        agent: str,
        console: Console,
        prompter: Prompter,
        audit: AuditLog | None = None,
        *,
        applies: bool = True,
    ) -> None:
        """Work as ``agent`` on ``conversations``' desk.

        ``agent`` is the name customers see, and the login the desk compares (who holds a
        conversation, who proposed an action) and the audit log records.

        Each action (take, hand back, close, propose, approve, refuse) is recorded in
        ``audit`` (the store's audit log), as the supervisor's page records them. With
        ``applies`` (a model is configured), the last decision on a customer's checks
        lets their turn go on here at once; otherwise their side goes on with it.
        """
        self.audit = audit
        self.applies = applies
        self.conversations = conversations
        self.desk = conversations.desk
        self.agent = " ".join(agent.split())
        self.console = console
        self.prompter = prompter
        self.holding: Conversation | None = None
        self.listed: list[Handoff] = []
        self.checks: list[Check] = []
        self.watch: Watch | None = None

    def run(self) -> int:
        """Work until the member of staff leaves; return the exit code."""
        self.console.status(f"Desk of {self.agent}. Type /help for commands.")
        held = self.desk.held_by(self.agent)
        if held:
            self.hold(held[0])
            others = [h.thread_id for h in held[1:]]
            if others:
                self.console.status("You also hold: " + ", ".join(others) + " (/take ID).")
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
                if text.startswith("/"):
                    self.command(text)
                    continue
                self.write(text)
        finally:
            self.stop_watching()

    def prompt(self) -> str:
        """Return the prompt: which conversation the next line goes to."""
        if self.holding is None:
            return "desk> "
        return f"to {self.holding.thread.passenger_id}> "

    def leave(self) -> int:
        """Say what stays held, and leave."""
        held = self.desk.held_by(self.agent)
        if held:
            self.console.status(
                f"You still hold {len(held)} conversation(s); the customers wait for you. "
                "Come back with: travel-assistant desk --agent " + json.dumps(self.agent)
            )
        return 0

    # Commands ---------------------------------------------------------------------------

    def command(self, text: str) -> None:
        """Run one slash command."""
        name, _, rest = text.partition(" ")
        name, rest = name.lower(), rest.strip()
        try:
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
        except DeskError as refused:
            self.console.error(str(refused))

    def show_queue(self) -> None:
        """List the conversations waiting, numbered for ``/take N``."""
        self.listed = self.desk.queue()
        self._print_queue(self.listed)
        if self.holding is None:
            self.watch_queue()

    def propose(self, rest: str) -> None:
        """Put an action to the customer of the conversation held, or list the actions."""
        crew = self.conversations.assistant.crew
        tools = {t.name: t for t in crew.all_tools() if t.name in crew.sensitive_names}
        action, _, given = rest.partition(" ")
        if not action:
            self.console.status("Actions you can propose (/propose ACTION JSON):")
            for name in sorted(tools):
                fields = ", ".join(tools[name].args)
                self.console.status(f"  {name} {{{fields}}}")
            return
        if self.holding is None:
            raise DeskError("You hold no conversation: /take one first.")
        try:
            args = json.loads(given or "{}")
        except ValueError as error:
            raise DeskError(f"The arguments are not JSON: {error}.") from None
        if not isinstance(args, dict):
            raise DeskError('Give the arguments as a JSON object, e.g. {"booking_id": 3}.')
        try:
            approval = self.holding.person_proposes(self.agent, action, args)
        except TurnRefusedError as refused:
            raise DeskError(f"{refused.failure.text} Nothing was proposed.") from None
        self._record("proposed", self.holding.thread)
        self.console.status(f"Proposed to the customer: {approval.title}")
        for line in approval.lines:
            self.console.status(f"  {line}")
        self.console.status("The customer answers y/n in their window; you will see it here.")

    def show_checks(self) -> None:
        """List the checks waiting, numbered for ``/approve N`` and ``/refuse N``."""
        self.checks = self.desk.checks_waiting()
        self._print_checks(self.checks, empty=True)

    def _print_checks(self, checks: Sequence[Check], *, empty: bool = False) -> None:
        if not checks:
            if empty:
                self.console.status("No action waits for a check.")
            return
        self.console.status(f"Waiting for your check ({len(checks)}):")
        for number, check in enumerate(checks, start=1):
            self.console.status(
                f"{number}. passenger {check.passenger_id}: {check.title}, {check.amount}  "
                f"[{check.thread_id}]"
            )
            for line in self._preview(check):
                self.console.status(f"     {line}")
        self.console.status("Decide with /approve N or /refuse N WHY; read it with /show ID.")

    def _preview(self, check: Check) -> tuple[str, ...]:
        """Return what ``check``'s action would do, as the customer saw it before saying yes."""
        conversation = self.conversations.get(Thread(check.thread_id, check.passenger_id))
        for approval in conversation.approvals():
            if approval.tool_call_id == check.tool_call_id:
                return approval.lines
        return ()

    def decide_check(self, rest: str, *, approved: bool) -> None:
        """Approve or refuse a waiting check, by its number in /checks."""
        which, _, reason = rest.partition(" ")
        checks = self.checks or self.desk.checks_waiting()
        if not which.isdigit() or not 1 <= int(which) <= len(checks):
            raise DeskError(
                f"Say which check: /{'approve' if approved else 'refuse'} N, N from /checks."
            )
        check = checks[int(which) - 1]
        if not approved and not reason.strip():
            raise DeskError("Say why (/refuse N WHY): the customer and the assistant are told.")
        conversation = self.conversations.get(Thread(check.thread_id, check.passenger_id))
        conversation.decide_check(self.agent, check.id, approved=approved, reason=reason)
        self._record("approved" if approved else "refused", conversation.thread)
        self.checks = []
        decided = "Approved" if approved else "Refused"
        self.console.status(f"{decided}: {check.title}, {check.amount}.")
        if not self.applies:
            self.console.status(words.APPLIED_BY_CUSTOMER)
        elif conversation.checks_decided():  # the last decision: what waited for it runs now
            self.go_on(conversation)
        else:
            self.console.status("It runs once the customer's other checks are decided too.")

    def go_on(self, conversation: Conversation) -> None:
        """Apply the decided checks of ``conversation`` now, and say what became of them."""
        self.console.thinking.start()
        try:
            outcomes = conversation.apply_checked()
        except TurnRefusedError as refused:
            self.console.status(f"{refused.failure.text} {words.APPLIED_LATER}")
            return
        except DecisionsError:
            self.console.status(words.APPLIED_ELSEWHERE)
            return
        except Exception as error:  # the decision is kept: the customer's side goes on
            self.console.error(words.apply_failed(f"{type(error).__name__}: {error}"))
            return
        finally:
            self.console.thinking.stop()
        for outcome in outcomes:
            if isinstance(outcome, ActionRecord):
                said = words.desk_outcome(outcome.title, outcome.outcome, outcome.reason)
                self.console.status(said)
            elif isinstance(outcome, TurnFailure):
                self.console.error(outcome.text)

    def _print_changes(self, queue: Sequence[Handoff] | None, checks: bool) -> None:
        if checks:
            self.show_checks()
        if queue is not None:
            self._print_people(queue)

    def _print_queue(self, queue: Sequence[Handoff]) -> None:
        self._print_checks(self.desk.checks_waiting())
        self._print_people(queue)

    def _print_people(self, queue: Sequence[Handoff]) -> None:
        if not queue:
            self.console.status("Nobody is waiting for a person.")
            return
        self.console.status(f"Waiting for a person ({len(queue)}):")
        for line in queue_lines(queue, self.conversations.now()):
            self.console.status(line)
        self.console.status("Take one with /take N.")

    def take(self, which: str) -> None:
        """Take a waiting conversation: by number of /queue, by id, or the first."""
        queue = self.listed or self.desk.queue()
        chosen: str | None = None
        if not which:
            queue = self.desk.queue()
            chosen = queue[0].thread_id if queue else None
        elif which.isdigit() and 1 <= int(which) <= len(queue):
            chosen = queue[int(which) - 1].thread_id
        else:
            chosen = which
        if chosen is None:
            self.console.status("Nobody is waiting for a person.")
            return
        current = self.desk.current(chosen)
        if current is None:
            raise DeskError(f"Conversation {chosen} is not waiting for a person.")
        conversation = self._conversation(current)
        handoff = conversation.take(self.agent)
        self._record("took", conversation.thread)
        self.listed = []
        self.hold(handoff)

    def hold(self, handoff: Handoff) -> None:
        """Make ``handoff``'s conversation the one written to, show it, watch it."""
        self.stop_watching()
        self.holding = self._conversation(handoff)
        self.console.status(
            f"You hold the conversation of passenger {handoff.passenger_id} "
            f"[{handoff.thread_id}]. Why: {handoff.reason or '(no reason given)'}"
        )
        if handoff.summary:
            self.console.status(f"Summary: {handoff.summary}")
        self.show()
        approvals = self.holding.approvals()
        if approvals:
            self.console.status(
                f"{len(approvals)} action(s) wait for the customer's decision in their window."
            )
        self.watch_customer()

    def show(self, which: str = "") -> None:
        """Show a whole conversation, step by step: the one held, or one staff may read.

        ``which`` is a number of /queue or the id of a conversation that waits for a
        person or has a check; reading it is recorded in the audit log.
        """
        if not which:
            if self.holding is None:
                self.console.status("You hold no conversation: /take one, or /show N or ID.")
                return
            conversation = self.holding
        else:
            conversation = self._readable(which)
            self._record("conversation", conversation.thread)
            self.console.status(
                f"Conversation of passenger {conversation.thread.passenger_id} "
                f"[{conversation.thread_id}]:"
            )
        for step in conversation.timeline():
            show_step(self.console, step)

    def _readable(self, which: str) -> Conversation:
        """Return the conversation ``which`` names, if staff may read it from the desk."""
        queue = self.listed or self.desk.queue()
        if which.isdigit() and 1 <= int(which) <= len(queue):
            return self._conversation(queue[int(which) - 1])
        current = self.desk.current(which)
        if current is not None:
            return self._conversation(current)
        for check in self.desk.checks_of(which):
            return self.conversations.get(Thread(check.thread_id, check.passenger_id))
        raise DeskError(
            f"{which} is neither a number of /queue nor a conversation that waits for a "
            "person or has a check."
        )

    def write(self, text: str) -> None:
        """Send ``text`` to the customer of the conversation held."""
        if self.holding is None:
            self.console.error("You hold no conversation: /take one first (see /queue).")
            return
        if len(text) > MAX_MESSAGE_CHARS:
            self.console.error(
                f"Your message is {len(text)} characters long; the limit is {MAX_MESSAGE_CHARS}."
            )
            return
        try:
            self.holding.person_says(self.agent, text)
        except TurnRefusedError as refused:
            self.console.error(f"{refused.failure.text} Your message was not sent.")

    def end(self, note: str, *, close: bool) -> None:
        """Hand the conversation held back to the assistant (``close``: finished)."""
        if self.holding is None:
            self.console.error("You hold no conversation.")
            return
        self.holding.hand_back(self.agent, note, close=close)
        self._record("closed" if close else "handed back", self.holding.thread)
        self.stop_watching()
        self.console.status(
            "Closed; the assistant answers the customer's next message."
            if close
            else "Handed back to the assistant" + (" with your note." if note else ".")
        )
        self.holding = None
        held = self.desk.held_by(self.agent)
        if held:
            self.hold(held[0])
        else:
            self.show_queue()

    def _record(self, what: Looked, thread: Thread) -> None:
        if self.audit is not None:
            record_action(self.audit, self.agent, what, thread.thread_id, thread.passenger_id)

    def _conversation(self, handoff: Handoff) -> Conversation:
        return self.conversations.get(Thread(handoff.thread_id, handoff.passenger_id))

    # What the customer writes meanwhile ------------------------------------------------------

    def watch_customer(self) -> None:
        """Show the customer's messages to the conversation held as they come."""
        conversation = self.holding
        if conversation is None:
            return
        handoff = conversation.handoff()
        seen = {_key(r) for r in conversation.history()}
        shown = {"count": handoff.messages if handoff is not None else 0}

        def look() -> bool:
            now = self.desk.current(conversation.thread_id)
            if now is None:
                return False
            if now.messages != shown["count"]:
                shown["count"] = now.messages
                lines = [
                    r
                    for r in conversation.history()
                    if isinstance(r, CustomerLine | ActionRecord) and _key(r) not in seen
                ]
                seen.update(_key(r) for r in lines)
                if lines:
                    self.prompter.show(partial(self._show_customer, lines))
            return True

        self.watch = Watch(look, self.desk)

    def watch_queue(self) -> None:
        """While nothing is held, show the queue again when someone new joins it."""
        self.stop_watching()
        known_checks = {c.id for c in self.desk.checks_waiting()}

        def look() -> bool:
            if self.holding is not None:
                return False
            queue = self.desk.queue()
            checks = self.desk.checks_waiting()
            # What changed, whoever changed it (a newcomer, another person taking one,
            # a check decided elsewhere): the numbers of /take and /approve follow.
            queue_moved = [h.thread_id for h in queue] != [h.thread_id for h in self.listed]
            checks_moved = {c.id for c in checks} != known_checks
            if not (queue_moved or checks_moved):
                return True
            self.listed = queue
            known_checks.clear()
            known_checks.update(c.id for c in checks)
            if checks_moved:
                self.checks = []
            self.prompter.show(
                partial(self._print_changes, queue if queue_moved else None, checks_moved)
            )
            return True

        self.watch = Watch(look, self.desk)

    def _show_customer(self, lines: Sequence[CustomerLine | ActionRecord]) -> None:
        for line in lines:
            if isinstance(line, ActionRecord):
                self.console.status(f"· {line.line}")
            else:
                self.console.line(f"customer> {line.text}")

    def stop_watching(self) -> None:
        """Stop showing the customer's messages (or the queue's newcomers)."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
