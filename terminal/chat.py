"""The chat in the terminal: read the customer, run turns through the protocol, render.

``ChatSession`` is the loop of ``travel-assistant chat``: messages and slash commands at
``you>``, each turn claimed and run by ``conversations.protocol`` (which decides what
happened), its outcomes drawn by ``terminal.render``, and every action waiting for a
decision put to the customer with ``terminal.approvals`` before the next message goes out.
"""

from __future__ import annotations

import difflib
import shlex
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from conversations import words
from conversations.events import Thread
from conversations.protocol import (
    DecisionsError,
    PendingPolicy,
    ToolCallDetail,
    TurnRefusedError,
)
from conversations.records import (
    CustomerLine,
    Outcome,
    TurnEnd,
    TurnFailure,
)
from conversations.words import MAX_MESSAGE_CHARS
from locations import first_line
from terminal.approvals import ask_answers
from terminal.live import Interrupted, Watch
from terminal.prompter import (
    EXIT_WORDS,
    Prompter,
    clean_input,
    new_session_line,
    sessions_command,
)
from terminal.render import (
    PRESS_UP,
    TurnView,
    session_table,
    show_details,
    show_record,
    turn_heading,
)
from terminal.signals import CtrlC
from terminal.waiting import BUSY_DECISION_NOT_SENT, OthersInTheChat

if TYPE_CHECKING:
    from conversations.protocol import Answer, Conversation, Conversations, Step, Turn
    from conversations.records import Approval
    from conversations.sessions import SessionRecord
    from terminal.console import Console

EXIT_OK = 0
# How long a turn waits for another window's turn of the same conversation to end.
BUSY_WAIT_SECONDS = 2.0
BUSY_MESSAGE_NOT_SENT = f"Your message was not sent. {PRESS_UP}"
BUSY_ON_OPEN = "Nothing is asked here until it has answered; then send your message."
DATABASE_FAULT = (
    "The database stopped answering ({problem}). Nothing more was done; what was saved "
    f"stays saved. Try again in a moment: {PRESS_UP}"
)

HELP_TEXT = """\
Talk to the assistant in your own words. Ctrl-C while it works cancels that turn.
Commands:
  /help       this help
  /new        start a new conversation (the current one stays saved)
  /sessions   list your saved conversations, numbered
  /switch N   continue conversation N of /sessions
  /history    show this conversation so far, with every approval and its amount
  /details [N]  show the tool calls of the last turn (or of turn N) and their results
  /agent [why]  ask for a person from our customer-service team; they answer here
  /assistant  leave the queue for a person: the assistant answers again
  /withdraw   withdraw an action you approved that waits for our team's check
  /exit       leave (so do exit, quit, q, Ctrl-D and Ctrl-C); the conversation is kept"""
# The slash commands, for the nearest one to a mistyped one.
SLASH_COMMANDS = (
    "/help",
    "/new",
    "/sessions",
    "/switch",
    "/history",
    "/details",
    "/agent",
    "/assistant",
    "/withdraw",
    "/exit",
    "/quit",
)


class ChatSession(OthersInTheChat):
    """One interactive conversation in the terminal."""

    def __init__(
        self,
        conversations: Conversations,
        thread: Thread,
        console: Console,
        prompter: Prompter,
        *,
        resume_options: Sequence[str] = (),
    ) -> None:
        """Talk on ``thread`` through ``conversations``; ``prompter`` reads the customer.

        ``resume_options`` are the options the resume command must repeat (``--home``,
        ``--db``, ``--conversations``).
        """
        self.conversations = conversations
        self.conversation: Conversation = conversations.get(thread)
        self.console = console
        self.prompter = prompter
        self.resume_options = list(resume_options)
        self.listed: list[SessionRecord] = []
        # Set when a message found an action waiting, to put it to the customer first.
        self.ask_first = False
        # While a person has (or will have) the conversation: shows what they write.
        self.watch: Watch | None = None
        # While an approved action waits for a member of staff's check (second approval).
        self.check_watch: Watch | None = None
        # Set by a watch when staff decided a check, or a person proposed an action and
        # the prompt cannot be ended for it (piped input): the next line (Enter will do)
        # first goes on with it.
        self.checked = threading.Event()
        # A person asked for (``/agent``) at an approval: asked once it is decided.
        self.person_wanted: str | None = None
        # Ctrl-C, from the first prompt to the last: a prompt's own, else a cancel.
        self.ctrl_c = prompter.ctrl_c or CtrlC(
            console.err, console.thinking.cancelling, self.resume_command
        )
        self.ctrl_c.resume = self.resume_command

    @property
    def thread(self) -> Thread:
        """Return the conversation being talked in."""
        return self.conversation.thread

    # The conversation loop -------------------------------------------------------------

    def run(self, resumed: bool, *, announced: bool = False) -> int:
        """Talk until the customer leaves; return the exit code.

        ``announced``: the new conversation's first line is already on the screen.
        """
        with self.ctrl_c.installed():
            return self._run(resumed, announced=announced)

    def _run(self, resumed: bool, *, announced: bool) -> int:
        try:
            if resumed:
                self.open_saved()
            elif not announced:
                self.console.status(
                    new_session_line(self.thread.thread_id, self.thread.passenger_id)
                )
            while True:
                try:
                    self.ask_what_arrived()
                    text = clean_input(self.prompter.message("you> "))
                except Interrupted:  # a person proposed an action: asked at the loop's top
                    continue
                except (EOFError, KeyboardInterrupt):
                    return self.leave()
                except Exception as error:
                    self.database_fault(error)
                    continue
                try:
                    if not self.take(text):
                        return self.leave()
                except Exception as error:
                    self.database_fault(error)
        except KeyboardInterrupt:  # between two prompts: leave as at the prompt
            self.console.thinking.stop()
            return self.leave()
        finally:
            self.stop_watching()

    def take(self, text: str) -> bool:
        """Act on a line typed at ``you>``: a message, a command; ``False`` to leave."""
        if self.checked.is_set():
            self.checked.clear()
            self.ask_pending_approvals()
        if not text:
            return True
        if text.lower() in EXIT_WORDS:
            return False
        if text.startswith("/"):
            return self.command(text)
        if len(text) > MAX_MESSAGE_CHARS:
            self.console.error(
                f"Your message is {len(text)} characters long; "
                f"the limit is {MAX_MESSAGE_CHARS}. Please shorten it. {PRESS_UP}"
            )
            return True
        ended = self.send(text)
        self.watch_person()
        if ended is not None or self.ask_first:
            self.ask_first = False
            self.ask_pending_approvals(ended.approvals if ended is not None else None)
        return True

    def database_fault(self, error: Exception) -> None:
        """Say a database that stopped answering in one line, and go on; re-raise the rest.

        Whatever the turn saved stays saved; one cut short is closed by the next turn, as
        after a crash. Anything else is a bug, said by the program's edge.
        """
        if not is_database_fault(error):
            raise error
        self.console.thinking.stop()
        self.console.error(DATABASE_FAULT.format(problem=first_line(error)))

    def open_saved(self) -> None:
        """Show where a saved conversation stopped, close a cut turn, re-ask approvals.

        When a turn of it is running in another window, it is left alone: nothing is
        closed and nothing is asked here.
        """
        # What our team decided while the customer was away comes first.
        checked = self.conversation.checked_since_last_message()
        if checked is not None:
            self.console.status(f"Since your last message, our team decided: {checked}")
        self.show_last_exchange()
        turn = self.claim(BUSY_ON_OPEN)
        if turn is None:
            return
        with turn:
            notice = turn.close_cut_turn()
        if notice is not None:
            self.console.status(notice.text)
        person = self.conversation.person_notice()
        if person is not None:
            self.console.status(person.text)
            self.watch_person()
        self.ask_pending_approvals()

    def has_messages(self) -> bool:
        """Tell whether the current conversation has anything saved."""
        return self.conversation.has_messages()

    def resume_command(self) -> str:
        """Return the command that resumes the current conversation."""
        parts = [
            "travel-assistant",
            "chat",
            "--passenger-id",
            self.thread.passenger_id,
            "--thread-id",
            self.thread.thread_id,
            *self.resume_options,
        ]
        return " ".join(shlex.quote(part) for part in parts)

    def leave(self) -> int:
        """Say how to come back, and leave."""
        if not self.has_messages():
            self.console.status(
                "Nothing to resume: this conversation has no message. Your earlier "
                "conversations are listed by: "
                + sessions_command(self.resume_options, self.thread.passenger_id)
            )
        else:
            self.console.status(
                f"Conversation saved. Resume it with: {self.resume_command()}", wrap=False
            )
        return EXIT_OK

    # Slash commands ---------------------------------------------------------------------

    def command(self, text: str) -> bool:
        """Run a slash command; return ``False`` when the customer leaves."""
        name, _, rest = text.partition(" ")
        name = name.lower()
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            self.console.status(HELP_TEXT)
        elif name == "/new":
            self.stop_watching()
            self.conversation = self.conversations.get(
                Thread(str(uuid.uuid4()), self.thread.passenger_id)
            )
            self.console.status(f"New conversation {self.thread.thread_id}.")
        elif name == "/sessions":
            self.list_sessions()
        elif name == "/switch":
            self.switch(rest.strip())
        elif name == "/history":
            for record in self.conversation.history():
                show_record(self.console, record)
        elif name == "/details":
            self.show_details(rest.strip())
        elif name == "/agent":
            self.ask_for_person(rest.strip())
        elif name == "/assistant":
            self.leave_queue()
        elif name == "/withdraw":
            self.withdraw()
        else:
            near = difflib.get_close_matches(name, SLASH_COMMANDS, n=1)
            guess = f" Did you mean {near[0]}?" if near else ""
            self.console.error(f"Unknown command {name}.{guess} Type /help for the list.")
        return True

    def withdraw(self) -> None:
        """Withdraw the pending actions (``/withdraw``): none is done, on record."""
        try:
            notice = self.conversation.withdraw_actions()
        except DecisionsError as nothing:
            self.console.error(nothing.text)
            return
        except TurnRefusedError as busy:
            self.console.error(busy.failure.text)
            return
        self.console.status(notice.text)

    def show_details(self, which: str) -> None:
        """Show the tool calls of the last turn, or of turn ``which`` (``/details N``).

        Turns are numbered from the conversation's first message, as ``/history`` lists
        them; a number out of range says which there are.
        """
        if not which:
            show_details(self.console, self.conversation.details())
            return
        turns = tool_calls_by_turn(self.conversation.timeline())
        if not (which.isdecimal() and 1 <= int(which) <= len(turns)):
            self.console.error(f"No turn {which} here. {turns_here(len(turns))}")
            return
        number = int(which)
        message, details = turns[number - 1]
        show_details(self.console, details, turn_heading(number, len(turns), message))

    def list_sessions(self) -> None:
        """List the passenger's saved conversations, numbered for ``/switch``."""
        self.listed = self.conversations.records(self.thread.passenger_id)
        if not self.listed:
            self.console.status("No saved conversations yet.")
            return
        headers, rows, wrap = session_table(
            self.conversations,
            self.listed,
            numbered=True,
            passenger_column=False,
            current=self.thread.thread_id,
        )
        self.console.table(headers, rows, err=True, wrap=wrap)
        here = any(r.thread_id == self.thread.thread_id for r in self.listed)
        self.console.status(
            "Switch to one with /switch N." + (" * marks this conversation." if here else "")
        )

    def switch(self, which: str) -> None:
        """Switch to the conversation numbered ``which`` in ``/sessions`` (or its id)."""
        records = self.listed or self.conversations.records(self.thread.passenger_id)
        chosen = None
        if which.isdigit() and 1 <= int(which) <= len(records):
            chosen = records[int(which) - 1]
        elif which:
            chosen = next((r for r in records if r.thread_id == which), None)
        if chosen is None:
            self.console.error(
                (f"No conversation {which} to switch to: " if which else "Which one? ")
                + "type /sessions, then /switch N with a number from the list."
            )
            return
        if chosen.thread_id == self.thread.thread_id:
            self.console.status("That is this conversation.")
            return
        self.stop_watching()
        self.conversation = self.conversations.get(
            Thread(chosen.thread_id, self.thread.passenger_id)
        )
        self.open_saved()

    def show_last_exchange(self, *, header: bool = True) -> None:
        """Show the last customer message and what followed it."""
        if header:
            self.console.status(f"Resuming session {self.thread.thread_id}. The last exchange:")
        for record in self.conversation.last_exchange():
            show_record(self.console, record)

    # Turns and approvals ------------------------------------------------------------------

    def claim(self, not_sent: str) -> Turn | None:
        """Take the conversation for a turn, or say why not and what became of the input."""
        try:
            return self.conversation.claim(BUSY_WAIT_SECONDS)
        except TurnRefusedError as refused:
            self.console.error(f"{refused.failure.text} {not_sent}")
            return None

    def play(
        self,
        outcomes: Callable[[threading.Event], Iterable[Outcome]],
        cancel: threading.Event | None = None,
    ) -> TurnEnd | None:
        """Draw a turn's outcomes while Ctrl-C cancels it; return its end, if it got there.

        ``cancel`` may have been set already (a Ctrl-C while the turn was being claimed);
        without it, the turn's cancel is set if Ctrl-C came since the last line was entered.
        """
        cancel = cancel if cancel is not None else self.ctrl_c.arm()
        view = TurnView(self.console)
        ended: TurnEnd | None = None
        with self.ctrl_c.turn(cancel):
            try:
                for outcome in outcomes(cancel):
                    view.show(outcome)
                    ended = outcome if isinstance(outcome, TurnEnd) else None
                    if isinstance(outcome, TurnFailure) and outcome.kind == "pending_first":
                        self.ask_first = True
            finally:
                view.end()
        return ended

    def send(self, text: str) -> TurnEnd | None:
        """Send a message; return the end of its turn, if it got there.

        Ctrl-C cancels the turn from the moment the message is entered (``CtrlC.arm``),
        also while the conversation is being claimed (the message is then kept, and the
        turn closed as cancelled at once).
        """
        # While staff check what the customer approved, the message is kept and the
        # action stays (``/withdraw`` drops it); one still theirs to decide comes first.
        if_pending: PendingPolicy = "refuse"
        cancel = self.ctrl_c.arm()
        with self.ctrl_c.turn(cancel):
            turn = self.claim(BUSY_MESSAGE_NOT_SENT)
            if turn is None:
                return None
            with turn:
                return self.play(
                    lambda stop: turn.send(text, cancel=stop, if_pending=if_pending), cancel
                )

    def ask_pending_approvals(self, approvals: Sequence[Approval] | None = None) -> None:
        """Ask the customer about every pending sensitive action, until none is left.

        ``approvals`` are those the turn just ended with (``TurnEnd``): their previews
        are not computed again; without them they are read from the conversation. A
        person asked for at an approval (``/agent``) is asked for once they are decided:
        a person cannot take a conversation while an action waits for the customer.
        """
        try:
            self._ask_until_decided(approvals)
            reason = self.person_wanted
        finally:
            self.person_wanted = None
        if reason is not None:
            self.ask_for_person(reason)

    def _want_person(self, reason: str) -> str:
        """Note ``/agent [reason]`` typed at an approval; return what the customer is told.

        A conversation a person has, or waits for, already is not queued again.
        """
        person = self.conversation.person_notice()
        if person is not None:
            return person.text
        self.person_wanted = reason or self.person_wanted or ""
        return words.PERSON_AFTER_DECISION

    def _ask_until_decided(self, approvals: Sequence[Approval] | None) -> None:
        while True:
            if approvals is None:
                approvals = self.conversation.approvals()
            if any(a.check is not None for a in approvals):
                # The customer answered already; a member of staff checks it too.
                self.wait_for_check()
                return
            # Calls done before a crash need no answer, but the run must go on to report them.
            if not approvals and not self.conversation.waiting():
                return
            answers = ask_answers(
                self.console,
                self.prompter.answer,
                approvals,
                self.prompter.discard,
                self._want_person,
            )
            turn = self.claim(BUSY_DECISION_NOT_SENT)
            if turn is None:
                return
            with turn:
                if approvals:
                    try:
                        turn.check(answers)
                    except DecisionsError:
                        # Another window decided them, or dropped them with a message.
                        self.console.error(f"{words.DECIDED_ELSEWHERE} The last exchange:")
                        self.show_last_exchange(header=False)
                        return
                ended = self.play(partial(_resolve, turn, answers))
            if ended is None:
                return
            approvals = ended.approvals


def is_database_fault(error: BaseException) -> bool:
    """Tell whether ``error`` (or what caused it) is a database that stopped answering.

    A connection lost or refused, a pool with no connection to give, a SQLite file
    locked too long: SQLAlchemy's ``OperationalError`` and ``InterfaceError``, and the
    drivers' own (psycopg, its pool, sqlite3).
    """
    import sqlite3

    import sqlalchemy.exc

    kinds: list[type[BaseException]] = [
        sqlalchemy.exc.OperationalError,
        sqlalchemy.exc.InterfaceError,
        sqlite3.OperationalError,
    ]
    try:
        import psycopg
        import psycopg_pool
    except ImportError:  # no PostgreSQL driver installed
        pass
    else:
        kinds += [psycopg.OperationalError, psycopg.InterfaceError, psycopg_pool.PoolTimeout]
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, tuple(kinds)):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def tool_calls_by_turn(steps: Iterable[Step]) -> list[tuple[str, list[ToolCallDetail]]]:
    """Split a conversation's timeline into turns: each customer message, its tool calls.

    A turn runs from a customer message to the next, as ``Conversation.details`` takes
    the last one; tool calls before the first message (there are none) are left out.
    """
    turns: list[tuple[str, list[ToolCallDetail]]] = []
    for step in steps:
        if isinstance(step, CustomerLine):
            turns.append((step.text, []))
        elif isinstance(step, ToolCallDetail) and turns:
            turns[-1][1].append(step)
    return turns


def turns_here(count: int) -> str:
    """Say which turns ``/details N`` can show in a conversation of ``count`` turns."""
    if count == 0:
        return "This conversation has no turns yet."
    if count == 1:
        return "This conversation has one turn: /details 1 (or /details) shows it."
    return (
        f"This conversation has turns 1 to {count}: /details N shows turn N (1 is the "
        "first), /details alone the last."
    )


def _resolve(
    turn: Turn, answers: Mapping[str, Answer], cancel: threading.Event
) -> Iterator[Outcome]:
    return turn.resolve(answers, cancel=cancel)
