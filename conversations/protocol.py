"""The conversation protocol every front end drives: conversations, and what staff do in them.

``Conversations`` holds the assistant, the session registry, the turn locks and the
desk. ``Conversation`` is one thread of one passenger: its history, the actions waiting
for a decision (``Approval``), a summary, and what the people behind the desk do in it
(take it, write, propose an action, decide a check and apply it, hand it back).
``Conversation.claim`` takes it for one turn and returns a ``Turn``
(``conversations.turns``: a message or the decisions, from start to end, as
``conversations.records`` outcomes); ``Conversation.timeline`` and ``details`` read it
step by step (``conversations.timeline``). A front end reads input and renders outcomes.
"""

from __future__ import annotations

from collections.abc import (
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ValidationError

from assistants.approvals import (
    ActionPreview,
    PendingAction,
    describe_action,
    facts_of,
)
from conversations import words
from conversations.assistant import DropCause, Thread, TravelAssistant
from conversations.desk import Check, Desk, DeskError, Handoff, RequestedBy
from conversations.desk_rows import Staff, login_of, staff_of
from conversations.events import (
    ASKED_FOR_PERSON_KEY,
    PERSON_KEY,
    STAFF_NOTE_KEY,
)
from conversations.locks import (
    ConversationBusyError,
    ConversationStoreError,
    LocalTurnLocks,
    TurnLocks,
)
from conversations.records import (
    PRIMARY,
    ActionRecord,
    Approval,
    Describer,
    Notice,
    Outcome,
    Record,
    TurnFailure,
    approval_of,
    message_text,
)
from conversations.timeline import (
    ActionStep,
    HandOverStep,
    Step,
    ToolCallDetail,
    details_of,
    last_customer_message,
    timeline_of,
)
from conversations.turns import (
    Answer,
    CancelledBy,
    DecisionsError,
    PendingPolicy,
    Turn,
    TurnRefusedError,
)
from db.passengers import next_flight
from tools.common import argument_problems, validate_strictly

if TYPE_CHECKING:
    from assistants.specialists import Crew
    from conversations.sessions import SessionRecord, SessionRegistry

__all__ = [
    "ActionStep",
    "Answer",
    "CancelledBy",
    "Conversation",
    "Conversations",
    "DecisionsError",
    "DeskError",
    "HandOverStep",
    "PendingPolicy",
    "Step",
    "Summary",
    "ToolCallDetail",
    "Turn",
    "TurnRefusedError",
]

# The login of the member of staff who proposed an action, kept with the proposal's
# message beside their name (``PERSON_KEY``, what the customer reads): four eyes compare
# logins. A proposal made before logins were kept has the name only, which was the login.
PERSON_LOGIN_KEY = "person_login"


@dataclass(frozen=True)
class Summary:
    """What a list of conversations shows of one."""

    assistant: str
    label: str
    pending_actions: int
    turns: int
    title: str
    checks_waiting: int = 0
    messages: int = 0
    # What a member of staff's check decided since the customer last wrote (the history's
    # line), for a customer who comes back: ``None`` when nothing was.
    checked: str | None = None


class Conversations:
    """Every conversation over one ``TravelAssistant``, its registry and its turn locks."""

    def __init__(
        self,
        assistant: TravelAssistant,
        registry: SessionRegistry,
        locks: TurnLocks | None = None,
        desk: Desk | None = None,
        *,
        check_above: int | None = None,
    ) -> None:
        """Drive ``assistant``; ``registry`` records who owns which conversation.

        ``locks`` keep one turn at a time per conversation beyond this process (the
        store's, ``ConversationStore.locks``); without them, within this process only.
        ``desk`` is the queue of conversations handed to a person (the store's,
        ``ConversationStore.desk``); without it, one in memory. ``check_above`` (cents):
        an approved action that moves more needs a member of staff's yes too (a second
        approval, ``TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE``); the desk keeps it for
        every process (``Desk.agree_check_above``: another amount kept there is refused).

        Raises:
            CheckAmountDisagreesError: The desk keeps another amount than ``check_above``.
        """
        self.assistant = assistant
        self.registry = registry
        self.locks: TurnLocks = locks if locks is not None else LocalTurnLocks()
        self.desk = desk if desk is not None else Desk.in_memory()
        if check_above is not None:
            self.desk.agree_check_above(check_above)
        self.describer = Describer(assistant.crew)

    @property
    def check_above(self) -> int | None:
        """Return the second approval's amount (cents) the desk keeps now (``None``: none).

        Read at every decision, never kept here: a change made by another process (the
        desk's ``second-approval``) applies to this one's next decision.
        """
        return self.desk.check_above()

    @check_above.setter
    def check_above(self, cents: int | None) -> None:
        self.desk.set_check_above(cents)

    def now(self) -> datetime:
        """Return "now" as the travel database's clock says."""
        return self.assistant.db.clock()

    def check_passenger(self, passenger_id: str) -> bool:
        """Tell whether ``passenger_id`` is a known passenger."""
        return self.assistant.check_passenger(passenger_id)

    def first_questions(self, passenger_id: str) -> list[str]:
        """Return what a new conversation offers to ask, from the passenger's next flight.

        General questions when no flight is ahead (or the passenger is not known).
        """
        db = self.assistant.db
        with db.rows() as rows:
            flight = next_flight(rows, passenger_id, db.clock())
        if flight is None:
            return list(words.GENERAL_QUESTIONS)
        return words.first_questions(flight.flight_no, flight.arrival_city, flight.destination_city)

    def get(self, thread: Thread) -> Conversation:
        """Return the conversation ``thread`` (it need not be saved yet)."""
        return Conversation(self, thread)

    def owned(self, passenger_id: str, thread_id: str) -> Conversation | None:
        """Return the registered conversation ``thread_id`` if it is ``passenger_id``'s."""
        record = self.registry.get(thread_id)
        if record is None or record.passenger_id != passenger_id:
            return None
        return self.get(Thread(record.thread_id, record.passenger_id))

    def register(self, thread: Thread, title: str = "") -> None:
        """Record ``thread`` in the registry, or mark it used now."""
        self.registry.touch(thread.thread_id, thread.passenger_id, self.now(), title)

    def records(self, passenger_id: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Return the registry's records, most recently used first."""
        return self.registry.list(passenger_id, limit)


class Conversation:
    """One conversation of one passenger."""

    def __init__(self, owner: Conversations, thread: Thread) -> None:
        """Read and run ``thread`` through ``owner``."""
        self.owner = owner
        self.thread = thread
        self.assistant = owner.assistant
        self.describer = owner.describer

    @property
    def thread_id(self) -> str:
        """Return the conversation's id."""
        return self.thread.thread_id

    # Reading ----------------------------------------------------------------------------

    def has_messages(self) -> bool:
        """Tell whether the conversation has anything saved."""
        return bool(self.assistant.messages(self.thread))

    def history(self) -> list[Record]:
        """Return the conversation as the customer saw it."""
        return self.describer.records(self.assistant.messages(self.thread))

    def last_exchange(self) -> list[Record]:
        """Return the last customer message and what followed it."""
        messages = self.assistant.messages(self.thread)
        last = last_customer_message(messages)
        return [] if last is None else self.describer.records(messages[last:])

    def assistant_name(self) -> str:
        """Return the assistant that answers the next message."""
        return self.assistant.active_assistant(self.thread)

    def summary(self) -> Summary:
        """Return what a list of conversations shows of this one."""
        messages = self.assistant.messages(self.thread)
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        name = self.assistant_name()
        pending = len(self.assistant.pending_actions(self.thread))
        # A check waits only for a pending action: no query of the desk without one (a
        # tab reads the summary every 1.5 s).
        waiting = sum(1 for c in self.checks() if not c.decided) if pending else 0
        return Summary(
            assistant=name,
            label=self.describer.label(name),
            pending_actions=pending,
            turns=len(humans),
            title=message_text(humans[0]) if humans else "",
            checks_waiting=waiting,
            messages=len(messages),
            checked=self.checked_since_last_message(messages),
        )

    def checked_since_last_message(
        self, messages: Sequence[AnyMessage] | None = None
    ) -> str | None:
        """Return what a staff check decided since the customer last wrote, as history says.

        The newest such action's line ("Approved by you and by Ana Lima (customer-service
        check): …"), or ``None``: for a customer who comes back after it was decided.
        """
        messages = self.assistant.messages(self.thread) if messages is None else messages
        since = messages[last_customer_message(messages) or 0 :]
        checked = [
            m for m in since if isinstance(m, ToolMessage) and facts_of(m).checked_by is not None
        ]
        if not checked:
            return None
        records = self.describer.records(since)
        lines = [r for r in records if isinstance(r, ActionRecord) and r.checked_by]
        return lines[-1].line if lines else None

    def approvals(self) -> list[Approval]:
        """Return the actions waiting for a decision, each with what it would do.

        An action the customer approved that waits for a member of staff's check (or
        whose check is decided and not yet applied) carries it: it is not asked again.
        One a person from customer service proposed names them (``proposed_by``).
        """
        label = self.describer.label
        previews = list(self.previews())
        if not previews:  # most turns end so: no query of the desk for checks
            return []
        checks = {c.tool_call_id: c for c in self.checks()}
        messages = self.assistant.messages(self.thread)
        return [
            replace(
                approval_of(
                    preview, action.tool_call_id, action.assistant, label(action.assistant)
                ),
                check=checks.get(action.tool_call_id),
                proposed_by=_proposer(messages, action.tool_call_id),
            )
            for action, preview in previews
        ]

    def checks(self) -> list[Check]:
        """Return the open second-approval checks of this conversation's pending actions."""
        return self.owner.desk.checks_of(self.thread_id)

    def checks_decided(self) -> bool:
        """Tell whether staff decided every check the pending actions wait for."""
        checks = self.checks()
        return bool(checks) and all(c.decided for c in checks)

    def decide_check(
        self, staff: str | Staff, check_id: int, *, approved: bool, reason: str = ""
    ) -> Check:
        """Record ``staff``'s yes or no on a check of this conversation.

        The customer's side applies it (``Turn.resume_checked``): the action runs, or
        the assistant is told staff refused it.

        Four eyes: the member of staff who proposed the action (the same login, whatever
        name they go by) cannot give its second approval (nor refuse it in the check's
        place); another one decides.

        Raises:
            DeskError: No such check here, it was decided already, or ``staff`` proposed
                the action.
        """
        found = self.owner.desk.check(check_id)
        if found is None or found.thread_id != self.thread_id:
            raise DeskError(f"There is no check {check_id} in conversation {self.thread_id}.")
        pending = {a.tool_call_id for a in self.assistant.pending_actions(self.thread)}
        if found.tool_call_id not in pending:
            self.owner.desk.end_checks(self.thread_id, "withdrawn")
            raise DeskError(f"Check {check_id} is not waiting any more: the action was dropped.")
        decider = staff_of(staff)
        proposer = _proposer_login(self.assistant.messages(self.thread), found.tool_call_id)
        if proposer and login_of(proposer) == decider.login:
            raise DeskError(words.own_proposal(found.title, found.amount, found.passenger_id))
        decided = self.owner.desk.decide_check(
            check_id, decider, self.owner.now(), approved=approved, reason=reason
        )
        self.owner.desk.bump(self.thread_id)
        return decided

    def apply_checked(self, wait: float = 5.0) -> list[Outcome]:
        """Go on with the actions staff decided, here and now; return what it did.

        Whoever gives the last decision calls it (the desk, the service), so that an
        approved action runs then, whether or not the customer's window is open. Exactly
        once: under the conversation's claim, and only while decided checks are left.

        Raises:
            TurnRefusedError: A turn of the conversation still ran after ``wait``
                seconds (it goes on with them; the service's sweep does otherwise).
            DecisionsError: Nothing is left to apply, or a check still waits.
        """
        with self.claim(wait) as turn:
            return list(turn.resume_checked(cancelled_by="service"))

    def waiting(self) -> bool:
        """Tell whether the run must be resumed: actions to decide, or writes to report.

        A write that committed before an interruption needs no decision, but the run
        must go on to report it (``resolve`` with no answers does).
        """
        return bool(
            self.assistant.pending_actions(self.thread)
            or self.assistant.recovered_actions(self.thread)
        )

    def details(self) -> list[ToolCallDetail]:
        """Return the tool calls of the last turn with their raw answers."""
        return details_of(self)

    def timeline(self) -> list[Step]:
        """Return the whole conversation step by step (``conversations.timeline``)."""
        return timeline_of(self)

    # Turns ------------------------------------------------------------------------------

    def claim(self, wait: float = 0.0) -> Turn:
        """Take the conversation for one turn, trying for up to ``wait`` seconds.

        Taking it may wait on the network (PostgreSQL locks): not on an event loop.

        Raises:
            TurnRefusedError: A turn of it runs elsewhere (``busy``), or where the locks
                live cannot be reached (``unavailable``).
        """
        try:
            lease = self.owner.locks.acquire(self.thread_id, wait)
        except ConversationBusyError as error:
            raise TurnRefusedError(TurnFailure("busy", words.BUSY_ELSEWHERE)) from error
        except ConversationStoreError as error:
            raise TurnRefusedError(TurnFailure("unavailable", str(error))) from error
        return Turn(self, lease)

    def busy(self) -> bool:
        """Tell whether a turn of this conversation runs anywhere (a hint: it can change)."""
        return self.owner.locks.busy(self.thread_id)

    # A person from the customer-service team ------------------------------------------------

    def handoff(self) -> Handoff | None:
        """Return the open hand-off to a person (waiting or held), if any."""
        return self.owner.desk.current(self.thread_id)

    def person_notice(self, handoff: Handoff | None = None) -> Notice | None:
        """Return what the customer is told about the person who has or will have this."""
        handoff = handoff if handoff is not None else self.handoff()
        if handoff is None:
            return None
        if handoff.status == "held":
            return Notice(words.with_person(handoff.agent))
        return Notice(words.waiting_for_person(self.owner.desk.position(self.thread_id)))

    def ask_for_person(
        self, reason: str = "", summary: str = "", *, by: RequestedBy = "customer"
    ) -> Notice:
        """Put the conversation in the queue for a person; return what the customer is told.

        The customer may ask at any time. An action still waiting for their decision
        ends then as not done (in their history, and for the model), as a new message
        would end it: the person can propose it again. One they approved that waits for
        a member of staff's check stays as it is.

        Raises:
            TurnRefusedError: A turn of the conversation runs (it cannot be written now).
        """
        asked_text = words.asked_for_person(reason)
        # A conversation that starts with the request is named after it.
        self.owner.register(self.thread, asked_text if by == "customer" else "")
        if by == "customer":
            # Kept as their message: what the person and the customer write next then
            # follows a customer message, as every chat template wants.
            asked = HumanMessage(content=asked_text, additional_kwargs={ASKED_FOR_PERSON_KEY: True})
            if self.handoff() is None:
                pending = self.assistant.pending_actions(self.thread)
                # What the customer approved and staff check stays: the person sees it.
                checked = self._checked(pending)
                drop: DropCause | None = None if checked else "asked_for_person"
                with self.claim(5.0):
                    self.assistant.append(self.thread, [asked], drop_pending=drop)
        handoff = self.owner.desk.request(
            self.thread_id,
            self.thread.passenger_id,
            by=by,
            reason=reason or ("The customer asked for a person." if by == "customer" else ""),
            summary=summary,
            now=self.owner.now(),
        )
        notice = self.person_notice(handoff)
        assert notice is not None
        return notice

    def withdraw_person_request(self) -> Notice:
        """Take the conversation out of the queue for a person: the assistant answers again.

        The model is told (the customer's request is in what it reads); the customer is
        told the assistant answers their next message.

        Raises:
            DeskError: Nobody was asked for, or a person has the conversation already.
        """
        handoff = self.handoff()
        if handoff is not None and handoff.status == "held":
            raise DeskError(words.held_cannot_withdraw(handoff.agent))
        if handoff is None or not self.owner.desk.cancel(self.thread_id, self.owner.now()):
            raise DeskError(words.NOT_IN_QUEUE)
        note = AIMessage(content=words.WITHDRAWN_NOTE, response_metadata={STAFF_NOTE_KEY: True})
        with self.claim(5.0):
            self.assistant.append(self.thread, [note])
        return Notice(words.LEFT_QUEUE)

    def take(self, agent: str | Staff) -> Handoff:
        """Give the waiting conversation to ``agent`` and tell the customer (their name).

        Raises:
            DeskError: It does not wait for a person, or someone else holds it.
        """
        handoff = self.owner.desk.take(self.thread_id, agent, self.owner.now())
        self.owner.desk.bump(self.thread_id)
        return handoff

    def person_says(self, agent: str | Staff, text: str, *, wait: float = 5.0) -> None:
        """Write ``agent``'s message to the customer into the conversation, with their name.

        Raises:
            DeskError: ``agent`` does not hold the conversation.
            TurnRefusedError: A turn of it is running (it cannot be written now).
        """
        staff = self._held_by(agent)
        reply = AIMessage(content=text, response_metadata={PERSON_KEY: staff.name})
        with self.claim(wait):
            self.assistant.append(self.thread, [reply])
        self.owner.desk.bump(self.thread_id)

    def hand_back(self, agent: str | Staff, note: str = "", *, close: bool = False) -> Handoff:
        """End ``agent``'s hold: the primary assistant answers again, having read ``note``.

        ``close`` records that the person finished the matter rather than handing it
        back; the assistant answers the next message either way.

        Raises:
            DeskError: ``agent`` does not hold the conversation.
        """
        staff = self._held_by(agent)
        said: list[AnyMessage] = []
        if note.strip():
            said.append(
                AIMessage(
                    content=words.staff_note(staff.name, note.strip()),
                    response_metadata={PERSON_KEY: staff.name, STAFF_NOTE_KEY: True},
                )
            )
        # The primary assistant goes on, having read the note: whichever specialist was
        # active before the hand-off knew nothing of what the person did since. An
        # action still pending ends as not done, its checks withdrawn, and the record
        # says whether the customer had approved it (``would_end`` says so beforehand).
        pending = self.assistant.pending_actions(self.thread)
        checked = self._checked(pending)
        if said or pending or self.assistant.active_assistant(self.thread) != PRIMARY:
            cause: DropCause = "handed_back_checked" if checked else "handed_back"
            with self.claim(5.0):
                self.assistant.append(self.thread, said, to_primary=True, drop_pending=cause)
        if pending:
            self.owner.desk.end_checks(self.thread_id, "withdrawn")
        self.owner.desk.bump(self.thread_id)
        return self.owner.desk.end(self.thread_id, staff, self.owner.now(), note=note, close=close)

    def would_end(self) -> list[str]:
        """Return what handing back or closing now would end, a sentence per action.

        For staff, before they do it: each pending action and how it stands (waiting for
        the customer, or approved by them and waiting for a check).
        """
        pending = self.assistant.pending_actions(self.thread)
        checked = self._checked(pending)
        titles = {a.tool_call_id: a.title for a in self.approvals()}
        return [
            words.would_end(titles.get(a.tool_call_id, a.name), approved=a.tool_call_id in checked)
            for a in pending
        ]

    def withdraw_actions(self) -> Notice:
        """Withdraw every pending action at the customer's word: none is done, on record.

        An action they approved that waits for a member of staff's check is theirs to
        withdraw (a message does not withdraw it); its check ends as withdrawn, so staff
        can no longer approve it.

        Raises:
            DecisionsError: Nothing is pending.
            TurnRefusedError: A turn of it is running (it cannot be written now).
        """
        with self.claim(5.0):
            approvals = self.approvals()
            if not approvals:
                raise DecisionsError(words.NOTHING_TO_WITHDRAW)
            self.assistant.append(self.thread, [], drop_pending="withdrawn")
            self.owner.desk.end_checks(self.thread_id, "withdrawn")
        self.owner.desk.bump(self.thread_id)
        return Notice(words.withdrawn(", ".join(a.title for a in approvals)))

    def proposer(self, tool_call_id: str) -> Staff | None:
        """Return the member of staff who proposed ``tool_call_id`` (``None``: the assistant)."""
        messages = self.assistant.messages(self.thread)
        login = _proposer_login(messages, tool_call_id)
        if not login:
            return None
        return Staff(login, _proposer(messages, tool_call_id) or login)

    def _checked(self, pending: Sequence[PendingAction]) -> dict[str, Check]:
        """Return the open checks of ``pending`` (the customer approved those), by call."""
        if not pending:
            return {}
        calls = {a.tool_call_id for a in pending}
        return {c.tool_call_id: c for c in self.checks() if c.tool_call_id in calls}

    def person_proposes(self, agent: str | Staff, name: str, args: Mapping[str, Any]) -> Approval:
        """Put ``agent``'s proposal of an action before the customer, for their ``y/n``.

        The action goes through the same preview and approval as the assistant's (a
        second approval too, when its amount needs one); decided, it runs without the
        assistant answering, since the person still holds the conversation.

        Raises:
            DeskError: ``agent`` does not hold it, ``name`` is not an action, an action
                already waits for the customer, or the preview says it cannot be done.
            TurnRefusedError: A turn of it is running.
        """
        staff = self._held_by(agent)
        preview = self._proposable(name, args)
        message = AIMessage(
            content=words.person_proposes(preview.title),
            response_metadata={PERSON_KEY: staff.name, PERSON_LOGIN_KEY: staff.login},
        )
        with self.claim(5.0):
            self.assistant.propose(self.thread, name, args, message)
        self.owner.desk.bump(self.thread_id)
        (approval,) = self.approvals()
        return approval

    def preview_proposal(
        self, agent: str | Staff, name: str, args: Mapping[str, Any]
    ) -> ActionPreview:
        """Return what proposing ``name`` with ``args`` would show the customer, doing nothing.

        The same checks as ``person_proposes`` (who holds it, the action, its arguments
        strictly, nothing else waiting, the preview's refusal), so what staff see before
        sending is what sending does.

        Raises:
            DeskError: As ``person_proposes`` would.
        """
        self._held_by(agent)
        return self._proposable(name, args)

    def _proposable(self, name: str, args: Mapping[str, Any]) -> ActionPreview:
        """Return the preview of a new proposal ``name(args)``, if one can be made now.

        Raises:
            DeskError: As ``_possible``, or an action already waits for the customer.
        """
        self._valid(name, args)
        if self.assistant.pending_actions(self.thread):
            raise DeskError("An action already waits for the customer's decision.")
        return self._possible(name, args)

    def _valid(self, name: str, args: Mapping[str, Any]) -> None:
        """Refuse ``name(args)`` unless it is an action with its arguments, strictly.

        Raises:
            DeskError: ``name`` is not an action, or an argument is wrong (strictly, as
                the model's are: no ``true`` for an id).
        """
        crew = self.assistant.crew
        if name not in crew.sensitive_names:
            actions = ", ".join(sorted(crew.sensitive_names))
            raise DeskError(f"{name} is not an action the customer can approve; one of: {actions}.")
        _check_arguments(crew, name, args)

    def _possible(self, name: str, args: Mapping[str, Any]) -> ActionPreview:
        """Return the preview of a member of staff's ``name(args)``, if it can be done.

        Raises:
            DeskError: ``name`` is not an action, an argument is wrong (strictly, as the
                model's are), or the preview says it cannot be done.
        """
        crew = self.assistant.crew
        self._valid(name, args)
        preview = describe_action(
            self.assistant.db, self.thread.passenger_id, name, args, crew.previews
        )
        if preview.error:  # staff read the rule's own words, which name what is wrong
            raise DeskError(f"Not possible: {preview.error}")
        return preview

    def edit_checked(
        self, staff: str | Staff, check_id: int, name: str, args: Mapping[str, Any]
    ) -> Approval:
        """Replace the arguments of a checked action and ask the customer again.

        Agent Inbox's "edit" on a staff check. The customer's yes was for the old
        arguments, so the edit approves nothing: the action as it was ends as not done
        (``edited``), its check is withdrawn, and the edited call is put to the customer
        as ``staff``'s proposal, with its new preview, for a fresh yes (and a fresh
        check, when its amount needs one: another member of staff decides it). Only the
        arguments change: ``name`` must be the pending action's own tool.

        Four eyes: the member of staff who proposed the action does not edit it.

        Raises:
            DeskError: No such check here, it was decided or its action dropped, ``name``
                is another action, the arguments are wrong or not possible, several
                actions wait together, or ``staff`` proposed it.
            TurnRefusedError: A turn of the conversation is running.
        """
        editor = staff_of(staff)
        found = self.owner.desk.check(check_id)
        if found is None or found.thread_id != self.thread_id:
            raise DeskError(f"There is no check {check_id} in conversation {self.thread_id}.")
        with self.claim(5.0):
            pending = self.assistant.pending_actions(self.thread)
            action = next((a for a in pending if a.tool_call_id == found.tool_call_id), None)
            if action is None:
                raise DeskError(
                    f"Check {check_id} is not waiting any more: the action was dropped."
                )
            if found.decided or found.status != "waiting":
                raise DeskError(f"Check {check_id} is not waiting any more ({found.status}).")
            if name != action.name:
                raise DeskError(
                    f"An edit changes the arguments of {action.name}, the action checked; "
                    f"{name} is another action: refuse this one and propose it instead."
                )
            if len(pending) > 1:
                raise DeskError(
                    f"{len(pending)} actions wait together here: approve or refuse them; an "
                    "edit replaces one action alone."
                )
            proposer = _proposer_login(self.assistant.messages(self.thread), found.tool_call_id)
            if proposer and proposer == editor.login:
                raise DeskError(words.own_proposal(found.title, found.amount, found.passenger_id))
            preview = self._possible(name, args)
            # Claims the check first (a conditional update: an approval given meanwhile
            # elsewhere wins and this edit is refused), then withdraws it with the action.
            self.owner.desk.decide_check(
                check_id, editor, self.owner.now(), approved=False, reason=words.EDITED_CHECK
            )
            message = AIMessage(
                content=words.person_edits(preview.title),
                response_metadata={PERSON_KEY: editor.name, PERSON_LOGIN_KEY: editor.login},
            )
            self.assistant.append(self.thread, [], drop_pending="edited")
            self.owner.desk.end_checks(self.thread_id, "withdrawn")
            self.assistant.propose(self.thread, name, args, message)
        self.owner.desk.bump(self.thread_id)
        (approval,) = self.approvals()
        return approval

    def respond_to_check(self, staff: str | Staff, check_id: int, text: str) -> None:
        """Write ``staff``'s message to the customer about a check, leaving it waiting.

        Agent Inbox's "respond", where the action stays: the customer reads it with the
        name of the member of staff (and the assistant reads it with the history), the
        action stays approved by the customer and waiting for its check. A refusal with
        its reason is ``decide_check``. Whoever may decide the check writes, also while
        another person holds the conversation (the customer reads who wrote).

        Raises:
            DeskError: No such check here, or it is not waiting.
            TurnRefusedError: A turn of the conversation is running.
        """
        writer = staff_of(staff)
        found = self.owner.desk.check(check_id)
        if found is None or found.thread_id != self.thread_id:
            raise DeskError(f"There is no check {check_id} in conversation {self.thread_id}.")
        if found.status != "waiting":
            raise DeskError(f"Check {check_id} is not waiting any more ({found.status}).")
        reply = AIMessage(content=text, response_metadata={PERSON_KEY: writer.name})
        with self.claim(5.0):
            self.assistant.append(self.thread, [reply])
        self.owner.desk.bump(self.thread_id)

    def _held_by(self, agent: str | Staff) -> Staff:
        """Return ``agent`` as the desk keeps them, if they hold the conversation (by login).

        Raises:
            DeskError: Nobody holds it, or someone else does.
        """
        staff = staff_of(agent)
        handoff = self.handoff()
        if handoff is None or handoff.status != "held":
            raise DeskError(f"Nobody holds conversation {self.thread_id}: take it first.")
        if login_of(handoff.agent_login) != staff.login:
            raise DeskError(f"{handoff.holder} holds conversation {self.thread_id}, not {staff}.")
        return staff

    def previews(self, *, deciding: bool = False) -> Iterator[tuple[PendingAction, ActionPreview]]:
        """Yield each action waiting for a decision with what it would do.

        A read shortly after the turn shares its previews (``deciding``: for a decision).
        """
        for action in self.assistant.pending_actions(self.thread):
            yield action, self.assistant.preview(self.thread, action, deciding=deciding)


def _check_arguments(crew: Crew, name: str, args: Mapping[str, Any]) -> None:
    """Refuse arguments ``name`` does not take, or lacks, naming each and why.

    Raises:
        DeskError: An argument is unknown, missing, or not of its kind.
    """
    (tool,) = [t for t in crew.all_tools() if t.name == name]
    schema = tool.tool_call_schema
    if not isinstance(schema, type) or not issubclass(schema, BaseModel):
        return
    takes = ", ".join(schema.model_fields)
    unknown = [key for key in args if key not in schema.model_fields]
    if unknown:
        raise DeskError(f"{name} takes {takes}; {', '.join(unknown)} is not one of its arguments.")
    try:
        validate_strictly(schema, args)
    except ValidationError as error:
        problems = argument_problems(error.errors(), name)
        raise DeskError(f"{name} takes {takes}. {problems}.") from None


def _proposal(messages: Sequence[AnyMessage], call_id: str) -> AIMessage | None:
    """Return the message that proposed the call ``call_id``."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            return message
    return None


def _proposer(messages: Sequence[AnyMessage], call_id: str) -> str | None:
    """Return the name of the member of staff who proposed ``call_id``, if a person did."""
    message = _proposal(messages, call_id)
    person = message.response_metadata.get(PERSON_KEY) if message is not None else None
    return str(person) if person else None


def _proposer_login(messages: Sequence[AnyMessage], call_id: str) -> str | None:
    """Return the login of the member of staff who proposed ``call_id``, if a person did."""
    message = _proposal(messages, call_id)
    if message is None:
        return None
    meta = message.response_metadata
    person = meta.get(PERSON_LOGIN_KEY) or meta.get(PERSON_KEY)
    return str(person) if person else None
