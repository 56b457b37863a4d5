"""Who looked at what, when: the supervisors' audit log, kept beside the conversations.

A supervisor reads every passenger's conversations (``server.supervisor``); each look is
recorded here, durably, in the same file or database as the conversations, so that it
outlives the process and every worker of a deployment writes to one log. Looks are
coalesced: a page that refreshes every few seconds records one entry per supervisor and
thing looked at per ``within`` (a few minutes), not one per refresh.

One implementation, through SQLAlchemy Core, serves a SQLite file and a PostgreSQL
database alike (``AuditLog``), with the table every existing home has: on SQLite its
moments are ISO 8601 text in UTC, on PostgreSQL ``TIMESTAMPTZ``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Literal

import sqlalchemy as sa

from conversations.tables import Moment, StoredTable, without_nul

# What a supervisor looked at (the list of every conversation, or one conversation), or
# what they did as a person at the desk (``server.handoff``) to a conversation.
Looked = Literal[
    "conversations",
    "conversation",
    "took",
    "handed back",
    "closed",
    "approved",
    "refused",
    "proposed",
    "edited",
    "responded",
]
# One entry per supervisor and thing looked at within this time.
COALESCE = timedelta(minutes=5)

_metadata = sa.MetaData()
AUDIT = sa.Table(
    "travel_audit",
    _metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
    # Text with a fixed number of digits on SQLite: the one format these entries have.
    sa.Column("at", Moment(timespec="microseconds"), nullable=False),
    sa.Column("supervisor", sa.Text, nullable=False),
    sa.Column("looked_at", sa.Text, nullable=False),
    sa.Column("conversation_id", sa.Text, nullable=False, server_default=""),
    sa.Column("passenger_id", sa.Text, nullable=False, server_default=""),
    sqlite_autoincrement=True,
)
_WHO = sa.Index(
    "ix_travel_audit_who",
    AUDIT.c.supervisor,
    AUDIT.c.looked_at,
    AUDIT.c.conversation_id,
    AUDIT.c.at,
)


@dataclass(frozen=True)
class AuditEntry:
    """One look: who, at what (a conversation, and whose, or the list of them), when."""

    at: datetime
    supervisor: str
    looked_at: Looked
    conversation_id: str
    passenger_id: str


def record_action(
    audit: AuditLog, staff: str, what: Looked, thread_id: str, passenger_id: str
) -> None:
    """Record what ``staff`` did to a conversation at the desk, now.

    Every action is kept, however close to the last (looks are coalesced, actions not).
    """
    audit.record(
        staff,
        what,
        datetime.now(UTC),
        conversation_id=thread_id,
        passenger_id=passenger_id,
        within=timedelta(0),
    )


class AuditLog(StoredTable):
    """The supervisors' audit log: the ``travel_audit`` table, on SQLite or PostgreSQL."""

    table = AUDIT
    indexes: ClassVar[dict[str, tuple[sa.Index, ...]]] = {
        "sqlite": (_WHO, sa.Index("ix_travel_audit_at", AUDIT.c.at)),
        "postgresql": (_WHO, sa.Index("ix_travel_audit_at", AUDIT.c.at.desc())),
    }

    def record(
        self,
        supervisor: str,
        looked_at: Looked,
        at: datetime,
        *,
        conversation_id: str = "",
        passenger_id: str = "",
        within: timedelta = COALESCE,
    ) -> bool:
        """Record a look at ``at``, unless the same one was recorded ``within`` before it.

        One statement, so that the check and the entry go together. Returns whether an
        entry was added.
        """
        entry = {
            "at": at,
            "supervisor": without_nul(supervisor),
            "looked_at": looked_at,
            "conversation_id": without_nul(conversation_id),
            "passenger_id": without_nul(passenger_id),
        }
        same = sa.select(AUDIT.c.id).where(
            AUDIT.c.supervisor == entry["supervisor"],
            AUDIT.c.looked_at == looked_at,
            AUDIT.c.conversation_id == entry["conversation_id"],
            AUDIT.c.at > at - within,
        )
        values = sa.select(*(sa.literal(v, AUDIT.c[k].type) for k, v in entry.items()))
        insert = AUDIT.insert().from_select(list(entry), values.where(~sa.exists(same)))
        # SQLAlchemy keeps the count of an INSERT's rows only when asked (2.0.28 and later).
        insert = insert.execution_options(preserve_rowcount=True)
        with self._lock, self.engine.begin() as connection:
            return connection.execute(insert).rowcount > 0

    def entries(
        self, *, supervisor: str | None = None, conversation_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """Return the entries, newest first, optionally of one supervisor or conversation."""
        query = sa.select(
            AUDIT.c.at,
            AUDIT.c.supervisor,
            AUDIT.c.looked_at,
            AUDIT.c.conversation_id,
            AUDIT.c.passenger_id,
        )
        if supervisor is not None:
            query = query.where(AUDIT.c.supervisor == supervisor)
        if conversation_id is not None:
            query = query.where(AUDIT.c.conversation_id == conversation_id)
        query = query.order_by(AUDIT.c.at.desc(), AUDIT.c.id.desc()).limit(limit)
        with self._lock, self.engine.connect() as connection:
            return [AuditEntry(**row) for row in connection.execute(query).mappings()]
