"""What the chat shows of others while the customer types: a person, and staff's checks.

While a person from customer service has (or will have) the conversation, what they
write and the hand-over appear above the prompt, and an action a person proposes is
asked at once. While an action the customer approved waits for staff's check, the
decision and how it went appear the same way, with nothing to press; a decision nobody
applied (its decider stopped first) is applied here. ``ChatSession`` (``terminal.chat``)
has these as methods, from ``OthersInTheChat``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

from conversations import words
from conversations.desk import DeskError
from conversations.protocol import DecisionsError, TurnRefusedError
from conversations.records import ActionRecord, AssistantLine, Notice, Outcome, Record, TurnEnd
from terminal.live import Watch
from terminal.render import show_record

if TYPE_CHECKING:
    from conversations.protocol import Conversation, Turn
    from conversations.records import Approval
    from terminal.console import Console
    from terminal.prompter import Prompter

# How long checks staff decided may wait for their decider to apply them before this
# window does it (their decider stopped first).
APPLY_GRACE_SECONDS = 3.0
BUSY_DECISION_NOT_SENT = (
    "Your answer was not sent; the action stays pending and is asked again before your next "
    "message goes out."
)


class _Chat(Protocol):
    """What these methods use of the chat (``terminal.chat.ChatSession``)."""

    conversation: Conversation
    console: Console
    prompter: Prompter
    watch: Watch | None
    check_watch: Watch | None
    checked: threading.Event

    def claim(self, not_sent: str) -> Turn | None:
        """Take the conversation for a turn, or say why not."""

    def play(
        self,
        outcomes: Callable[[threading.Event], Iterable[Outcome]],
        cancel: threading.Event | None = None,
    ) -> TurnEnd | None:
        """Draw a turn's outcomes; return its end."""

    def ask_pending_approvals(self, approvals: Sequence[Approval] | None = None) -> None:
        """Ask the customer about every pending action."""

    def show_last_exchange(self, *, header: bool = True) -> None:
        """Show the last exchange of the conversation."""

    def watch_person(self) -> None:
        """Show a person's messages as they come."""

    def apply_checked_here(self) -> None:
        """Apply the checks staff decided in this window."""

    def _tell(self, draw: Callable[[], None], *, ask: bool) -> None:
        """Show ``draw`` above the prompt, or end the prompt to ask."""

    def _show_person(self, lines: Sequence[AssistantLine], told: Sequence[Notice]) -> None:
        """Draw a person's lines and what the customer is told."""

    def _show_records(self, records: Sequence[Record]) -> None:
        """Draw records of the history."""

    def _show_told(self, told: Sequence[str]) -> None:
        """Draw status lines."""


class OthersInTheChat:
    """The chat's methods for what others do: a person, staff's checks."""

    # While a person has (or will have) the conversation: shows what they write.
    watch: Watch | None
    # While an approved action waits for a member of staff's check (second approval).
    check_watch: Watch | None

    # A person from the customer-service team ----------------------------------------------

    def ask_for_person(self: _Chat, reason: str) -> None:
        """Put the conversation in the queue for a person, and watch for their messages.

        An action still waiting for the customer's answer ends as not done: its record
        is shown first.
        """
        known = len(self.conversation.history())
        try:
            notice = self.conversation.ask_for_person(reason)
        except (DeskError, TurnRefusedError) as refused:
            text = refused.failure.text if isinstance(refused, TurnRefusedError) else refused
            self.console.error(str(text))
            return
        for record in self.conversation.history()[known:]:
            if isinstance(record, ActionRecord):
                show_record(self.console, record)
        self.console.status(notice.text)
        self.watch_person()

    def leave_queue(self: _Chat) -> None:
        """Withdraw the request for a person: the assistant answers the next message."""
        if self.watch is not None:  # not to be told a person handed it back
            self.watch.stop()
            self.watch = None
        try:
            notice = self.conversation.withdraw_person_request()
        except DeskError as refused:
            self.console.error(str(refused))
            self.watch_person()
            return
        self.console.status(notice.text)

    def watch_person(self: _Chat) -> None:
        """Show a person's messages as they come, while the conversation is handed off."""
        if self.watch is not None and self.watch.watching:
            return
        handoff = self.conversation.handoff()
        if handoff is None:
            return
        conversation = self.conversation
        shown = {"count": handoff.messages, "status": handoff.status}
        seen = {r.id for r in conversation.history() if isinstance(r, AssistantLine)}
        asked = {a.tool_call_id for a in conversation.approvals()}

        def look() -> bool:
            now = conversation.owner.desk.latest(conversation.thread_id)
            if now is None:
                return False
            if now.messages != shown["count"] or now.status != shown["status"]:
                lines = [
                    r
                    for r in conversation.history()
                    if isinstance(r, AssistantLine) and r.person and r.id not in seen
                ]
                seen.update(r.id for r in lines)
                told: list[Notice] = []
                proposed = {a.tool_call_id for a in conversation.approvals()} - asked
                asked.update(proposed)
                # Also when the person handed the conversation back right after: the
                # action still waits for the customer.
                interrupter = self.prompter.interrupter if proposed else None
                if proposed and interrupter is None:
                    told.append(Notice(words.PERSON_PROPOSED))
                    self.checked.set()
                if now.status != shown["status"]:
                    if now.status == "held":
                        told.append(Notice(words.with_person(now.agent)))
                    elif now.status in ("returned", "closed"):
                        told.append(Notice(words.back_with_assistant(now.agent or "A person")))
                shown.update(count=now.messages, status=now.status)
                if interrupter is not None:
                    # Shown and asked at once: the prompt ends, the chat draws and asks.
                    interrupter.request(partial(self._show_person, lines, told))
                elif lines or told:
                    self.prompter.show(partial(self._show_person, lines, told))
            return now.open

        self.watch = Watch(look, conversation.owner.desk)

    def ask_what_arrived(self: _Chat) -> None:
        """Show what ended the prompt (an action a person proposed), and ask it now."""
        interrupter = self.prompter.interrupter
        draws = interrupter.take() if interrupter is not None else []
        if not draws:
            return
        for draw in draws:
            draw()
        self.ask_pending_approvals()

    def _show_person(self: _Chat, lines: Sequence[AssistantLine], told: Sequence[Notice]) -> None:
        for line in lines:
            show_record(self.console, line)
        for notice in told:
            self.console.status(notice.text)

    def stop_watching(self: _Chat) -> None:
        """Stop showing a person's messages and checks (another conversation, or leaving)."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self.check_watch is not None:
            self.check_watch.stop()
            self.check_watch = None
        self.checked.clear()

    # A second approval: staff check the customer's yes ------------------------------------------

    def wait_for_check(self: _Chat) -> None:
        """Say the action waits for staff, and show what becomes of it as it happens.

        Whoever gives the last decision applies it at once (the desk, the service), and
        the watch shows its outcome above the prompt: nothing to press. Checks decided
        that nobody applied (their decider stopped first) are applied here: at once when
        the conversation is opened, after ``APPLY_GRACE_SECONDS`` while watching.
        """
        conversation = self.conversation
        if conversation.checks_decided():
            self.apply_checked_here()
            return
        if self.check_watch is not None and self.check_watch.watching:
            return
        self.console.status(words.CHECK_WAITING)
        known = len(conversation.history())
        decided: dict[str, float] = {}

        def look() -> bool:
            checks = conversation.checks()
            if not checks:  # applied (or dropped): show how it ended
                new = [
                    r
                    for r in conversation.history()[known:]
                    if not (isinstance(r, AssistantLine) and r.person)  # the person watch's
                ]
                self._tell(partial(self._show_records, new), ask=bool(conversation.approvals()))
                return False
            if not all(c.decided for c in checks):
                return True
            if "at" not in decided:
                decided["at"] = time.monotonic()
                told = [words.check_decided(c.staff, c.title, c.approved, c.reason) for c in checks]
                self.prompter.show(partial(self._show_told, told))
            elif time.monotonic() - decided["at"] > APPLY_GRACE_SECONDS:
                self._tell(self.apply_checked_here, ask=True)
                return False
            return True

        self.check_watch = Watch(
            look, conversation.owner.desk, name="check-watch", every=APPLY_GRACE_SECONDS
        )

    def apply_checked_here(self: _Chat) -> None:
        """Apply the checks staff decided in this window, as the rest of the turn."""
        turn = self.claim(BUSY_DECISION_NOT_SENT)
        if turn is None:
            return
        with turn:
            try:
                ended = self.play(partial(_resume_checked, turn))
            except DecisionsError:  # applied elsewhere meanwhile: show how it ended
                self.show_last_exchange(header=False)
                return
        if ended is not None and ended.approvals:
            self.ask_pending_approvals(ended.approvals)

    def _tell(self: _Chat, draw: Callable[[], None], *, ask: bool) -> None:
        """Show ``draw`` above the prompt; with ``ask``, end the prompt and ask after it.

        Without a prompt to end (piped input), the next line goes on with it.
        """
        interrupter = self.prompter.interrupter
        if not ask:
            self.prompter.show(draw)
        elif interrupter is not None:
            interrupter.request(draw)
        else:
            self.checked.set()
            self.prompter.show(partial(self._show_told, [words.PRESS_ENTER_TO_GO_ON]))

    def _show_records(self: _Chat, records: Sequence[Record]) -> None:
        for record in records:
            show_record(self.console, record)

    def _show_told(self: _Chat, told: Sequence[str]) -> None:
        for text in told:
            self.console.status(text)


def _resume_checked(turn: Turn, cancel: threading.Event) -> Iterator[Outcome]:
    return turn.resume_checked(cancel=cancel)
