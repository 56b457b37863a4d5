"""The desk: conversations handed to a person, the queue they wait in, and who holds each.

A conversation is handed to a person when the customer asks for one (``/agent`` in the
terminal) or the assistant decides it must (its ``request_human_agent`` tool). It then
waits in the queue, oldest first, until a member of staff takes it; while it waits or is
held, the assistant does not answer (``conversations.protocol``). The person gives it
back to the assistant with a note, or closes it.

One row per hand-off in ``travel_handoffs``, beside the conversations (the SQLite
sessions file, or the PostgreSQL database), through SQLAlchemy Core so that one
implementation serves both. A conversation has at most one open hand-off (waiting or
held: a partial unique index says so), and taking one is a single conditional update,
so two members of staff never hold the same conversation.

Every change (a request, a take, a message written, a hand-back, a check asked or
decided) is signalled to the other side: on PostgreSQL with ``NOTIFY travel_desk`` in the
same transaction, which a ``Listener`` (``LISTEN``, on a connection of its own) wakes on;
on SQLite a listener polls briefly (``POLL_SECONDS``). Either way a reader sees a change
within a second, and PostgreSQL readers ask the database nothing while nothing happens.
"""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast

import sqlalchemy as sa

from db.handoff_limits import REASON_CHARS as REASON_CHARS
from db.handoff_limits import SUMMARY_CHARS as SUMMARY_CHARS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

Status = Literal["waiting", "held", "returned", "closed"]
OPEN: tuple[Status, ...] = ("waiting", "held")
RequestedBy = Literal["customer", "assistant"]
NOTE_CHARS = 2000
AGENT_CHARS = 80

_metadata = sa.MetaData()
_open = sa.text("status IN ('waiting', 'held')")
HANDOFFS = sa.Table(
    "travel_handoffs",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("thread_id", sa.Text, nullable=False),
    sa.Column("passenger_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("requested_by", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("summary", sa.Text, nullable=False, server_default=""),
    sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("agent", sa.Text, nullable=False, server_default=""),
    sa.Column("taken_at", sa.DateTime(timezone=True)),
    sa.Column("ended_at", sa.DateTime(timezone=True)),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    # Bumped by every message written while it is open: what a waiting reader polls.
    sa.Column("messages", sa.Integer, nullable=False, server_default="0"),
    sa.Index(
        "ux_travel_handoffs_open",
        "thread_id",
        unique=True,
        sqlite_where=_open,
        postgresql_where=_open,
    ),
    sa.Index("ix_travel_handoffs_status", "status", "requested_at"),
)


# Second approvals: an action the customer approved that moves more than the set amount
# waits here for a member of staff's yes or no. One row per action; ``answers`` keeps
# the customer's answers to the whole set of actions decided with it (JSON), so the
# conversation can go on with them once every check is decided.
CheckStatus = Literal["waiting", "approved", "refused", "used", "withdrawn"]
CHECK_OPEN: tuple[CheckStatus, ...] = ("waiting", "approved", "refused")

CHECKS = sa.Table(
    "travel_checks",
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("thread_id", sa.Text, nullable=False),
    sa.Column("passenger_id", sa.Text, nullable=False),
    sa.Column("tool_call_id", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("amount", sa.Text, nullable=False),
    sa.Column("cents", sa.BigInteger, nullable=False),
    sa.Column("answers", sa.Text, nullable=False),
    sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("staff", sa.Text, nullable=False, server_default=""),
    sa.Column("decided_at", sa.DateTime(timezone=True)),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Index("ux_travel_checks_call", "thread_id", "tool_call_id", unique=True),
    sa.Index("ix_travel_checks_status", "status", "asked_at"),
)


# What every process on these conversations must agree on, kept with them.
SETTINGS = sa.Table(
    "travel_desk_settings",
    _metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
_CHECK_ABOVE = "second_approval_above_cents"


CHANNEL = "travel_desk"
# How often a SQLite reader looks for changes; on PostgreSQL, how often a listener looks
# anyway (a notification lost while its connection was being replaced).
POLL_SECONDS = 0.5
LISTEN_FALLBACK_SECONDS = 10.0


class DeskError(Exception):
    """A desk action that cannot be done now; the message says why, for staff."""


class CheckAmountDisagreesError(DeskError):
    """A process was started with another second-approval amount than the store keeps."""

    def __init__(self, stored: int, given: int) -> None:
        """Say both amounts (cents)."""
        super().__init__(f"{stored} != {given}")
        self.stored = stored
        self.given = given


class DeskStoreError(Exception):
    """The desk's table cannot be read or set up."""


@dataclass(frozen=True)
class Handoff:
    """One hand-off of a conversation to a person."""

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

    @property
    def open(self) -> bool:
        """Tell whether a person has it or will: the assistant does not answer."""
        return self.status in OPEN


@dataclass(frozen=True)
class Check:
    """A member of staff's check of one action the customer approved (a second approval)."""

    id: int
    thread_id: str
    passenger_id: str
    tool_call_id: str
    title: str
    amount: str
    cents: int
    answers: str
    asked_at: datetime
    status: CheckStatus
    staff: str
    decided_at: datetime | None
    reason: str

    @property
    def decided(self) -> bool:
        """Tell whether a member of staff said yes or no."""
        return self.status in ("approved", "refused")

    @property
    def approved(self) -> bool:
        """Tell whether a member of staff said yes."""
        return self.status == "approved"


class Desk:
    """The hand-off queue of one conversation store, usable from many threads."""

    def __init__(self, engine: sa.Engine) -> None:
        """Use ``engine`` (SQLite or PostgreSQL) and create the table if it is missing."""
        self.engine = engine
        try:
            _metadata.create_all(engine, checkfirst=True)
        except sa.exc.SQLAlchemyError as error:
            # Two processes starting at once both find no table and both create it: the
            # loser's error is harmless if the table is there now.
            try:
                there = sa.inspect(engine).has_table(HANDOFFS.name)
            except sa.exc.SQLAlchemyError:
                there = False
            if not there:
                engine.dispose()
                raise DeskStoreError(str(getattr(error, "orig", None) or error)) from error

    @classmethod
    def open(cls, url: str) -> Desk:
        """Open the desk at a SQLAlchemy URL (``sqlite:///path`` or a PostgreSQL URL)."""
        if url.startswith("sqlite"):
            engine = sa.create_engine(url, connect_args={"timeout": 30})
            sa.event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = sa.create_engine(url, pool_size=4, max_overflow=6, pool_pre_ping=True)
        return cls(engine)

    @classmethod
    def in_memory(cls) -> Desk:
        """Return a desk that keeps nothing after the process."""
        engine = sa.create_engine(
            "sqlite://",
            connect_args={"check_same_thread": False},
            poolclass=sa.pool.StaticPool,
        )
        return cls(engine)

    def close(self) -> None:
        """Close the connections."""
        self.engine.dispose()

    # Telling the other side -------------------------------------------------------------

    @property
    def notifies(self) -> bool:
        """Tell whether changes are signalled (PostgreSQL), not only found by polling."""
        return self.engine.dialect.name == "postgresql"

    def _changed(self, connection: sa.Connection, thread_id: str) -> None:
        """Signal a change of ``thread_id`` when the transaction of ``connection`` commits."""
        if self.notifies:
            connection.execute(
                sa.text("SELECT pg_notify(:channel, :thread)"),
                {"channel": CHANNEL, "thread": thread_id},
            )

    def listener(self) -> Listener:
        """Return a way to wait for the next change (close it when done).

        On PostgreSQL it listens on a connection of its own, which it opens again if the
        server closes it (``Listener.wait``).
        """
        if not self.notifies:
            return Listener(None)
        return Listener(self._listen(), reconnect=self._listen)

    def _listen(self) -> Any:
        """Return a new psycopg connection (autocommit) that listens on ``CHANNEL``."""
        import psycopg

        url = self.engine.url.set(drivername="postgresql")
        connection = psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)
        try:
            connection.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            connection.close()
            raise
        return connection

    # Reading ----------------------------------------------------------------------------

    def current(self, thread_id: str) -> Handoff | None:
        """Return the open hand-off of ``thread_id`` (waiting or held), if any."""
        query = HANDOFFS.select().where(
            HANDOFFS.c.thread_id == thread_id, HANDOFFS.c.status.in_(OPEN)
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
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

    def held_by(self, agent: str) -> list[Handoff]:
        """Return the conversations ``agent`` holds, the earliest taken first."""
        query = (
            HANDOFFS.select()
            .where(HANDOFFS.c.status == "held", HANDOFFS.c.agent == agent)
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
            "requested_at": _utc(now),
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

    def take(self, thread_id: str, agent: str, now: datetime) -> Handoff:
        """Give the waiting conversation ``thread_id`` to ``agent``.

        Raises:
            DeskError: It is not waiting (held by someone, or not handed off at all).
        """
        agent = _agent(agent)
        update = (
            HANDOFFS.update()
            .where(HANDOFFS.c.thread_id == thread_id, HANDOFFS.c.status == "waiting")
            .values(status="held", agent=agent, taken_at=_utc(now))
        )
        with self.engine.begin() as connection:
            taken = connection.execute(update).rowcount == 1
            self._changed(connection, thread_id)
        found = self.current(thread_id)
        if taken and found is not None:
            return found
        if found is not None and found.status == "held":
            if found.agent == agent:
                return found
            raise DeskError(f"{found.agent} already holds conversation {thread_id}.")
        raise DeskError(f"Conversation {thread_id} is not waiting for a person.")

    def end(
        self, thread_id: str, agent: str, now: datetime, *, note: str = "", close: bool = False
    ) -> Handoff:
        """End ``agent``'s hold of ``thread_id``: back to the assistant, or ``close`` it.

        Raises:
            DeskError: ``agent`` does not hold it.
        """
        agent = _agent(agent)
        status: Status = "closed" if close else "returned"
        current = self.current(thread_id)
        update = (
            HANDOFFS.update()
            .where(
                HANDOFFS.c.thread_id == thread_id,
                HANDOFFS.c.status == "held",
                HANDOFFS.c.agent == agent,
            )
            .values(status=status, ended_at=_utc(now), note=note.strip()[:NOTE_CHARS])
        )
        with self.engine.begin() as connection:
            ended = connection.execute(update).rowcount == 1
            self._changed(connection, thread_id)
        if not ended or current is None:
            if current is not None and current.status == "held":
                raise DeskError(f"{current.agent} holds conversation {thread_id}, not {agent}.")
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
            .values(status="closed", ended_at=_utc(now), note="withdrawn by the customer")
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

    # Second approvals ------------------------------------------------------------------

    def ask_checks(
        self,
        thread_id: str,
        passenger_id: str,
        actions: Sequence[tuple[str, str, str, int]],
        answers: str,
        now: datetime,
    ) -> list[Check]:
        """Ask staff to check ``actions`` (tool call id, title, amount line, cents).

        A check already asked for a call keeps its state (a decided one stays decided);
        ``answers`` replaces the customer's answers kept with the open checks.
        """
        with self.engine.begin() as connection:
            for tool_call_id, title, amount, cents in actions:
                found = connection.execute(
                    CHECKS.select().where(
                        CHECKS.c.thread_id == thread_id, CHECKS.c.tool_call_id == tool_call_id
                    )
                ).first()
                if found is None:
                    connection.execute(
                        CHECKS.insert().values(
                            thread_id=thread_id,
                            passenger_id=passenger_id,
                            tool_call_id=tool_call_id,
                            title=title,
                            amount=amount,
                            cents=cents,
                            answers=answers,
                            asked_at=_utc(now),
                            status="waiting",
                        )
                    )
            connection.execute(
                CHECKS.update()
                .where(CHECKS.c.thread_id == thread_id, CHECKS.c.status.in_(CHECK_OPEN))
                .values(answers=answers)
            )
            self._changed(connection, thread_id)
        return self.checks_of(thread_id)

    def checks_of(self, thread_id: str) -> list[Check]:
        """Return the open checks of ``thread_id`` (waiting, or decided and not yet used)."""
        query = (
            CHECKS.select()
            .where(CHECKS.c.thread_id == thread_id, CHECKS.c.status.in_(CHECK_OPEN))
            .order_by(CHECKS.c.id)
        )
        with self.engine.connect() as connection:
            return [_check(row) for row in connection.execute(query).mappings()]

    def checks_ever(self, thread_id: str) -> list[Check]:
        """Return every check ``thread_id`` was ever asked for, whatever its state, oldest first.

        What became of them (still waiting, decided, used, withdrawn): the evaluation
        judges a trial on it.
        """
        query = CHECKS.select().where(CHECKS.c.thread_id == thread_id).order_by(CHECKS.c.id)
        with self.engine.connect() as connection:
            return [_check(row) for row in connection.execute(query).mappings()]

    def checks_waiting(self) -> list[Check]:
        """Return every check waiting for staff, the oldest first."""
        query = CHECKS.select().where(CHECKS.c.status == "waiting").order_by(CHECKS.c.id)
        with self.engine.connect() as connection:
            return [_check(row) for row in connection.execute(query).mappings()]

    def agree_check_above(self, given: int | None) -> int | None:
        """Return the second approval's amount (cents) every process here must use.

        The amount is kept with the conversations: the first process started with one
        keeps it; a process started without one uses it; ``None`` while none is kept.

        Raises:
            CheckAmountDisagreesError: ``given`` is another amount than the one kept.
        """
        for _ in range(2):  # another process may keep one in between: read it then
            try:
                with self.engine.begin() as connection:
                    stored = self._check_above(connection)
                    if stored is None and given is not None:
                        insert = SETTINGS.insert().values(key=_CHECK_ABOVE, value=str(given))
                        connection.execute(insert)
                        return given
            except sa.exc.IntegrityError:
                continue
            if stored is None or given is None or given == stored:
                return stored
            raise CheckAmountDisagreesError(stored, given)
        raise DeskStoreError("The second approval's amount could not be kept; try again.")

    def set_check_above(self, cents: int | None) -> None:
        """Keep ``cents`` as the second approval's amount (``None``: no second approval).

        Processes already running keep the amount they started with.
        """
        with self.engine.begin() as connection:
            connection.execute(SETTINGS.delete().where(SETTINGS.c.key == _CHECK_ABOVE))
            if cents is not None:
                connection.execute(SETTINGS.insert().values(key=_CHECK_ABOVE, value=str(cents)))

    def _check_above(self, connection: sa.Connection) -> int | None:
        query = sa.select(SETTINGS.c.value).where(SETTINGS.c.key == _CHECK_ABOVE)
        value = connection.execute(query).scalar()
        return int(value) if value is not None else None

    def checks_to_apply(self, decided_before: datetime | None = None) -> list[Check]:
        """Return the checks staff decided whose actions were not yet run or refused.

        Whoever decided the last check of a conversation applies them at once; what is
        left here was not (the process stopped in between). ``decided_before`` keeps out
        the ones decided since then, which their decider is still applying.
        """
        query = CHECKS.select().where(CHECKS.c.status.in_(("approved", "refused")))
        if decided_before is not None:
            query = query.where(CHECKS.c.decided_at < _utc(decided_before))
        with self.engine.connect() as connection:
            rows = connection.execute(query.order_by(CHECKS.c.id)).mappings()
            return [_check(row) for row in rows]

    def check(self, check_id: int) -> Check | None:
        """Return one check, whatever its state."""
        with self.engine.connect() as connection:
            row = connection.execute(CHECKS.select().where(CHECKS.c.id == check_id)).mappings()
            found = row.first()
        return _check(found) if found else None

    def decide_check(
        self, check_id: int, staff: str, now: datetime, *, approved: bool, reason: str = ""
    ) -> Check:
        """Record ``staff``'s yes or no on a waiting check (once: a decided one stays).

        Raises:
            DeskError: No such check, or it is not waiting any more.
        """
        staff = _agent(staff)
        update = (
            CHECKS.update()
            .where(CHECKS.c.id == check_id, CHECKS.c.status == "waiting")
            .values(
                status="approved" if approved else "refused",
                staff=staff,
                decided_at=_utc(now),
                reason=reason.strip()[:NOTE_CHARS],
            )
        )
        with self.engine.begin() as connection:
            changed = connection.execute(update).rowcount == 1
            if changed:
                self._changed(connection, f"check:{check_id}")
        found = self.check(check_id)
        if found is None:
            raise DeskError(f"There is no check {check_id}.")
        if not changed:
            if found.decided:
                raise DeskError(f"{found.staff} already {found.status} check {check_id}.")
            raise DeskError(f"Check {check_id} is not waiting any more ({found.status}).")
        return found

    def end_checks(
        self,
        thread_id: str,
        status: Literal["used", "withdrawn"],
        only: Sequence[str] | None = None,
    ) -> int:
        """Close the open checks of ``thread_id`` (``only`` those of these tool calls).

        Their actions were decided (``used``) or dropped (``withdrawn``).
        """
        update = (
            CHECKS.update()
            .where(CHECKS.c.thread_id == thread_id, CHECKS.c.status.in_(CHECK_OPEN))
            .values(status=status)
        )
        if only is not None:
            if not only:
                return 0
            update = update.where(CHECKS.c.tool_call_id.in_(list(only)))
        with self.engine.begin() as connection:
            self._changed(connection, thread_id)
            return int(connection.execute(update).rowcount)


class Listener:
    """Waits for the desk's next change: a PostgreSQL ``LISTEN``, or a short sleep."""

    def __init__(self, connection: Any, reconnect: Callable[[], Any] | None = None) -> None:
        """Listen on ``connection`` (psycopg, autocommit, LISTENing), or poll without one.

        ``reconnect`` returns a new such connection, for when the server closes this one.
        """
        self.connection = connection
        self._reconnect = reconnect

    def wait(self, timeout: float) -> bool:
        """Wait until a change is signalled or ``timeout`` passes; return whether one was.

        Without notifications (SQLite) it sleeps ``POLL_SECONDS`` at most and answers
        ``False``: the caller looks anyway. A listening connection the server closed (a
        restart, ``pg_terminate_backend``) is replaced once, through ``reconnect``, and
        the answer is ``True``: a change may have come while nobody listened. When the
        new connection cannot be made either, its error is raised.
        """
        if self.connection is None:
            time.sleep(min(timeout, POLL_SECONDS))
            return False
        import psycopg

        try:
            for _ in self.connection.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.OperationalError:
            if self._reconnect is None:
                raise
            lost, self.connection = self.connection, None
            with suppress(Exception):
                lost.close()
            self.connection = self._reconnect()
            return True
        return False

    def close(self) -> None:
        """Stop listening."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _check(row: Any) -> Check:
    return Check(**_with_utc(row, ("asked_at", "decided_at")))


def _agent(agent: str) -> str:
    name = " ".join(agent.split())[:AGENT_CHARS]
    if not name:
        raise DeskError("Give the name the customer will see (--agent NAME).")
    return name


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def _handoff(row: Any) -> Handoff:
    return Handoff(**_with_utc(row, ("requested_at", "taken_at", "ended_at")))


def _with_utc(row: Any, moments: Sequence[str]) -> dict[str, Any]:
    """Return a row's values with its ``moments`` in UTC (SQLite gives them naive)."""
    values = dict(row)
    for name in moments:
        if values[name] is not None:
            values[name] = _utc(values[name])
    return cast("dict[str, Any]", values)


def describe_queue(queue: Sequence[Handoff], now: datetime) -> list[str]:
    """Return one line per waiting conversation: id, passenger, minutes waited, reason."""
    lines = []
    for handoff in queue:
        minutes = max(0, int((_utc(now) - handoff.requested_at).total_seconds() // 60))
        lines.append(
            f"{handoff.thread_id}\t{handoff.passenger_id}\t{minutes} min\t"
            f"{handoff.requested_by}\t{handoff.reason or '-'}"
        )
    return lines
