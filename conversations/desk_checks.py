"""Staff checks of large actions: the second approval of what the customer approved.

One row per action in ``travel_checks``; a member of staff says yes or no to each once,
recorded by their login (``staff``) with the name the customer is told (``staff_name``).
The amount above which an action is checked is one of the desk's settings
(``conversations.desk_settings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa

from conversations.desk_rows import NOTE_CHARS, DeskError, Staff, metadata, staff_of, utc, with_utc
from conversations.desk_signals import DeskSignals

if TYPE_CHECKING:
    from collections.abc import Sequence

# Second approvals: an action the customer approved that moves more than the set amount
# waits here for a member of staff's yes or no. One row per action; ``answers`` keeps
# the customer's answers to the whole set of actions decided with it (JSON), so the
# conversation can go on with them once every check is decided.
CheckStatus = Literal["waiting", "approved", "refused", "used", "withdrawn"]
CHECK_OPEN: tuple[CheckStatus, ...] = ("waiting", "approved", "refused")

CHECKS = sa.Table(
    "travel_checks",
    metadata,
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
    # The decider's name as the customer is told it (``staff`` is their login); added
    # later: an older table gains it, empty, when the desk opens.
    sa.Column("staff_name", sa.Text, nullable=False, server_default=""),
    sa.Index("ux_travel_checks_call", "thread_id", "tool_call_id", unique=True),
    sa.Index("ix_travel_checks_status", "status", "asked_at"),
)


@dataclass(frozen=True)
class Check:
    """A member of staff's check of one action the customer approved (a second approval).

    ``staff`` is the name the customer is told of who decided it, ``staff_login`` their
    login (the same in checks decided before names existed).
    """

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
    staff_login: str = ""

    @property
    def decider(self) -> Staff:
        """Return the member of staff who decided it (empty while it waits)."""
        return Staff(self.staff_login or self.staff, self.staff)

    @property
    def decided(self) -> bool:
        """Tell whether a member of staff said yes or no."""
        return self.status in ("approved", "refused")

    @property
    def approved(self) -> bool:
        """Tell whether a member of staff said yes."""
        return self.status == "approved"


class StaffChecks(DeskSignals):
    """The checks staff are asked for, and their yes or no."""

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
                            asked_at=utc(now),
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
        with self.engine.connect() as connection:
            rows = connection.execute(_OPEN_CHECKS, {"thread_id": thread_id}).mappings()
            return [_check(row) for row in rows]

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

    def checks_to_apply(self, decided_before: datetime | None = None) -> list[Check]:
        """Return the checks staff decided whose actions were not yet run or refused.

        Whoever decided the last check of a conversation applies them at once; what is
        left here was not (the process stopped in between). ``decided_before`` keeps out
        the ones decided since then, which their decider is still applying.
        """
        query = CHECKS.select().where(CHECKS.c.status.in_(("approved", "refused")))
        if decided_before is not None:
            query = query.where(CHECKS.c.decided_at < utc(decided_before))
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
        self,
        check_id: int,
        staff: str | Staff,
        now: datetime,
        *,
        approved: bool,
        reason: str = "",
    ) -> Check:
        """Record ``staff``'s yes or no on a waiting check (once: a decided one stays).

        Raises:
            DeskError: No such check, or it is not waiting any more.
        """
        decider = staff_of(staff)
        update = (
            CHECKS.update()
            .where(CHECKS.c.id == check_id, CHECKS.c.status == "waiting")
            .values(
                status="approved" if approved else "refused",
                staff=decider.login,
                staff_name=decider.name,
                decided_at=utc(now),
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
                raise DeskError(f"{found.decider} already {found.status} check {check_id}.")
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


# Every decision and every turn with an action pending asks it: built once.
_OPEN_CHECKS = (
    CHECKS.select()
    .where(CHECKS.c.thread_id == sa.bindparam("thread_id"), CHECKS.c.status.in_(CHECK_OPEN))
    .order_by(CHECKS.c.id)
)


def _check(row: Any) -> Check:
    values = with_utc(row, ("asked_at", "decided_at"))
    # The ``staff`` column keeps the login; the customer is told the name, or the login
    # in checks decided before names existed.
    login, name = values.pop("staff"), values.pop("staff_name")
    return Check(**values, staff=name or login, staff_login=login)
