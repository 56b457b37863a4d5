"""The desk's queue: conversations handed to a person, waiting for one, and who holds each.

One row per hand-off in ``travel_handoffs``. A conversation has at most one open hand-off
(waiting or held: a partial unique index says so), and taking one is a single
conditional update, so two members of staff never hold the same conversation. Who holds
it is their login (``agent``, what the desk compares); ``agent_name`` is the name the
customer sees (empty in rows written before names existed: the login is shown).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from conversations.desk_rows import (
    NOTE_CHARS,
    DeskError,
    Staff,
    login_of,
    metadata,
    staff_of,
    utc,
    with_utc,
)
from conversations.desk_signals import DeskSignals
from db.handoff_limits import REASON_CHARS, SUMMARY_CHARS

if TYPE_CHECKING:
    from collections.abc import Sequence

Status = Literal["waiting", "held", "returned", "closed"]
OPEN: tuple[Status, ...] = ("waiting", "held")
RequestedBy = Literal["customer", "assistant"]

_open = sa.text("status IN ('waiting', 'held')")
HANDOFFS = sa.Table(
    "travel_handoffs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("thread_id", sa.Text, nullable=False),
    sa.Column("passenger_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("requested_by", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("summary", sa.Text, nullable=False, server_default=""),
    sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
    # The holder's login, what is compared; and the name the customer sees (added later:
    # an older table gains it, empty, when the desk opens).
    sa.Column("agent", sa.Text, nullable=False, server_default=""),
    sa.Column("taken_at", sa.DateTime(timezone=True)),
    sa.Column("ended_at", sa.DateTime(timezone=True)),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    # Bumped by every message written while it is open: what a waiting reader polls.
    sa.Column("messages", sa.Integer, nullable=False, server_default="0"),
    sa.Column("agent_name", sa.Text, nullable=False, server_default=""),
    sa.Index(
        "ux_travel_handoffs_open",
        "thread_id",
        unique=True,
        sqlite_where=_open,
        postgresql_where=_open,
    ),
    sa.Index("ix_travel_handoffs_status", "status", "requested_at"),
)


@dataclass(frozen=True)
class Handoff:
    """One hand-off of a conversation to a person.

    ``agent`` is the name the customer sees of the person who holds (or held) it, and
    ``agent_login`` their login, which the desk compares (the same in hand-offs taken
    before names existed, and by the terminal desk's ``--agent NAME``).
    """

    id: int
    thread_id: str
    passenger_id: str
    status: Status
    requested_by: RequestedBy
    reason: str
    summary: str
    requested_at: datetime
    agent: str
    taken_at: datetime | None
    ended_at: datetime | None
    note: str
    messages: int
    agent_login: str = ""

    @property
    def open(self) -> bool:
        """Tell whether a person has it or will: the assistant does not answer."""
        return self.status in OPEN

    @property
    def holder(self) -> Staff:
        """Return the member of staff who holds (or held) it: their login and name."""
        return Staff(self.agent_login or self.agent, self.agent)


class HandoffQueue(DeskSignals):
    """The conversations handed to a person: the queue, and who holds each."""

    # Reading ----------------------------------------------------------------------------

    def current(self, thread_id: str) -> Handoff | None:
        """Return the open hand-off of ``thread_id`` (waiting or held), if any."""
        with self.engine.connect() as connection:
            row = connection.execute(_CURRENT, {"thread_id": thread_id}).mappings().first()
        return _handoff(row) if row else None

    def latest(self, thread_id: str) -> Handoff | None:
        """Return the last hand-off of ``thread_id``, open or ended."""
        query = (
            HANDOFFS.select()
            .where(HANDOFFS.c.thread_id == thread_id)
            .order_by(HANDOFFS.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        return _handoff(row) if row else None

    def queue(self) -> list[Handoff]:
        """Return the conversations waiting for a person, the longest waiting first."""
        query = (
            HANDOFFS.select()
            .where(HANDOFFS.c.status == "waiting")
            .order_by(HANDOFFS.c.requested_at, HANDOFFS.c.id)
        )
        with self.engine.connect() as connection:
            return [_handoff(row) for row in connection.execute(query).mappings()]

    def held_by(self, agent: str | Staff) -> list[Handoff]:
        """Return the conversations ``agent`` (by their login) holds, the earliest taken first."""
        query = (
            HANDOFFS.select()
            .where(HANDOFFS.c.status == "held", HANDOFFS.c.agent == login_of(agent))
            .order_by(HANDOFFS.c.taken_at, HANDOFFS.c.id)
        )
        with self.engine.connect() as connection:
            return [_handoff(row) for row in connection.execute(query).mappings()]

    def position(self, thread_id: str) -> int | None:
        """Return the place of ``thread_id`` in the queue (1 is next), or ``None``."""
        for place, handoff in enumerate(self.queue(), start=1):
            if handoff.thread_id == thread_id:
                return place
        return None

    # Writing ----------------------------------------------------------------------------

    def request(
        self,
        thread_id: str,
        passenger_id: str,
        *,
        by: RequestedBy,
        reason: str,
        summary: str,
        now: datetime,
    ) -> Handoff:
        """Put ``thread_id`` in the queue; an open hand-off of it is returned as it is."""
        existing = self.current(thread_id)
        if existing is not None:
            return existing
        values = {
            "thread_id": thread_id,
            "passenger_id": passenger_id,
            "status": "waiting",
            "requested_by": by,
            "reason": reason.strip()[:REASON_CHARS],
            "summary": summary.strip()[:SUMMARY_CHARS],
            "requested_at": utc(now),
        }
        try:
            with self.engine.begin() as connection:
                connection.execute(HANDOFFS.insert().values(**values))
                self._changed(connection, thread_id)
        except sa.exc.IntegrityError:
            pass  # another process queued it a moment ago: theirs stands
        found = self.current(thread_id)
        if found is None:  # pragma: no cover - it was just written, or closed at once
            raise DeskError(f"The hand-off of {thread_id} could not be recorded.")
        return found

    def take(self, thread_id: str, agent: str | Staff, now: datetime) -> Handoff:
        """Give the waiting conversation ``thread_id`` to ``agent``.

        Taking one already held by the same login returns it as it is.

        Raises:
            DeskError: It is not waiting (held by someone, or not handed off at all).
        """
        staff = staff_of(agent)
        update = (
            HANDOFFS.update()
            .where(HANDOFFS.c.thread_id == thread_id, HANDOFFS.c.status == "waiting")
            .values(status="held", agent=staff.login, agent_name=staff.name, taken_at=utc(now))
        )
        with self.engine.begin() as connection:
            taken = connection.execute(update).rowcount == 1
            self._changed(connection, thread_id)
        found = self.current(thread_id)
        if taken and found is not None:
            return found
        if found is not None and found.status == "held":
            if found.agent_login == staff.login:
                return found
            raise DeskError(f"{found.holder} already holds conversation {thread_id}.")
        raise DeskError(f"Conversation {thread_id} is not waiting for a person.")

    def end(
        self,
        thread_id: str,
        agent: str | Staff,
        now: datetime,
        *,
        note: str = "",
        close: bool = False,
    ) -> Handoff:
        """End ``agent``'s hold of ``thread_id``: back to the assistant, or ``close`` it.

        Raises:
            DeskError: ``agent`` (by their login) does not hold it.
        """
        staff = staff_of(agent)
        status: Status = "closed" if close else "returned"
        current = self.current(thread_id)
        update = (
            HANDOFFS.update()
            .where(
                HANDOFFS.c.thread_id == thread_id,
                HANDOFFS.c.status == "held",
                HANDOFFS.c.agent == staff.login,
            )
            .values(status=status, ended_at=utc(now), note=note.strip()[:NOTE_CHARS])
        )
        with self.engine.begin() as connection:
            ended = connection.execute(update).rowcount == 1
            self._changed(connection, thread_id)
        if not ended or current is None:
            if current is not None and current.status == "held":
                raise DeskError(f"{current.holder} holds conversation {thread_id}, not {staff}.")
            raise DeskError(f"Nobody holds conversation {thread_id}: take it first.")
        found = self.latest(thread_id)
        assert found is not None  # it was just updated
        return found

    def cancel(self, thread_id: str, now: datetime) -> bool:
        """Take ``thread_id`` out of the queue (the customer no longer waits).

        Only a waiting hand-off can be withdrawn; one a person holds stays theirs.
        """
        update = (
            HANDOFFS.update()
            .where(HANDOFFS.c.thread_id == thread_id, HANDOFFS.c.status == "waiting")
            .values(status="closed", ended_at=utc(now), note="withdrawn by the customer")
        )
        with self.engine.begin() as connection:
            self._changed(connection, thread_id)
            return connection.execute(update).rowcount == 1

    def bump(self, thread_id: str) -> None:
        """Count one more message in the open hand-off of ``thread_id`` (readers poll it)."""
        update = (
            HANDOFFS.update()
            .where(HANDOFFS.c.thread_id == thread_id, HANDOFFS.c.status.in_(OPEN))
            .values(messages=HANDOFFS.c.messages + 1)
        )
        with self.engine.begin() as connection:
            connection.execute(update)
            self._changed(connection, thread_id)


# Every turn asks it: built once (building a statement costs more than running it).
_CURRENT = HANDOFFS.select().where(
    HANDOFFS.c.thread_id == sa.bindparam("thread_id"), HANDOFFS.c.status.in_(OPEN)
)


def _handoff(row: Any) -> Handoff:
    values = with_utc(row, ("requested_at", "taken_at", "ended_at"))
    # The ``agent`` column keeps the login; the customer sees the name, or the login in
    # rows from before names existed.
    login, name = values.pop("agent"), values.pop("agent_name")
    return Handoff(**values, agent=name or login, agent_login=login)


def describe_queue(queue: Sequence[Handoff], now: datetime) -> list[str]:
    """Return one line per waiting conversation: id, passenger, minutes waited, reason."""
    lines = []
    for handoff in queue:
        minutes = max(0, int((utc(now) - handoff.requested_at).total_seconds() // 60))
        lines.append(
            f"{handoff.thread_id}\t{handoff.passenger_id}\t{minutes} min\t"
            f"{handoff.requested_by}\t{handoff.reason or '-'}"
        )
    return lines
