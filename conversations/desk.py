"""The desk: conversations handed to a person, the queue they wait in, and who holds each.

A conversation is handed to a person when the customer asks for one (``/agent`` in the
terminal) or the assistant decides it must (its ``request_human_agent`` tool). It then
waits in the queue, oldest first, until a member of staff takes it; while it waits or is
held, the assistant does not answer (``conversations.protocol``). The person gives it
back to the assistant with a note, or closes it.

The desk keeps its tables beside the conversations (the SQLite sessions file, or the
PostgreSQL database), through SQLAlchemy Core so that one implementation serves both.
``Desk`` is one object with a part for each job, each in its own module:

- the queue of hand-offs and who holds each (``conversations.desk_queue``);
- the staff's checks of large actions, a second approval (``conversations.desk_checks``);
- the settings every process must agree on, such as the second approval's amount
  (``conversations.desk_settings``);
- telling the other side of every change, by PostgreSQL's ``LISTEN``/``NOTIFY`` or by
  polling (``conversations.desk_signals``).

What they share is in ``conversations.desk_rows``; callers import every name from here.
"""

from __future__ import annotations

import sqlalchemy as sa

from conversations.desk_checks import CHECK_OPEN, CHECKS, Check, CheckStatus, StaffChecks
from conversations.desk_queue import (
    HANDOFFS,
    OPEN,
    Handoff,
    HandoffQueue,
    RequestedBy,
    Status,
    describe_queue,
)
from conversations.desk_rows import (
    AGENT_CHARS,
    NOTE_CHARS,
    DeskError,
    DeskStoreError,
    add_missing_columns,
    metadata,
)
from conversations.desk_settings import SETTINGS, CheckAmountDisagreesError, DeskSettings
from conversations.desk_signals import CHANNEL, LISTEN_FALLBACK_SECONDS, POLL_SECONDS, Listener
from conversations.tables import memory_engine, open_engine
from db.handoff_limits import REASON_CHARS, SUMMARY_CHARS

__all__ = [
    "AGENT_CHARS",
    "CHANNEL",
    "CHECKS",
    "CHECK_OPEN",
    "HANDOFFS",
    "LISTEN_FALLBACK_SECONDS",
    "NOTE_CHARS",
    "OPEN",
    "POLL_SECONDS",
    "REASON_CHARS",
    "SETTINGS",
    "SUMMARY_CHARS",
    "Check",
    "CheckAmountDisagreesError",
    "CheckStatus",
    "Desk",
    "DeskError",
    "DeskStoreError",
    "Handoff",
    "Listener",
    "RequestedBy",
    "Status",
    "describe_queue",
]


class Desk(HandoffQueue, StaffChecks, DeskSettings):
    """The hand-off queue of one conversation store, usable from many threads.

    With the staff's checks and the settings; every change is signalled (``notifies``,
    ``listener``).
    """

    def __init__(self, engine: sa.Engine) -> None:
        """Use ``engine`` (SQLite or PostgreSQL) and create the table if it is missing."""
        self.engine = engine
        for attempt in (1, 2):
            try:
                _create_tables(engine)
                break
            except sa.exc.SQLAlchemyError as error:
                # On PostgreSQL two processes creating one table at once can both get
                # past IF NOT EXISTS; the loser finds the winner's table on a second look.
                if attempt == 2:
                    engine.dispose()
                    raise DeskStoreError(str(getattr(error, "orig", None) or error)) from error

    @classmethod
    def open(cls, url: str) -> Desk:
        """Open the desk at a SQLAlchemy URL (``sqlite:///path`` or a PostgreSQL URL)."""
        return cls(open_engine(url))

    @classmethod
    def in_memory(cls) -> Desk:
        """Return a desk that keeps nothing after the process."""
        return cls(memory_engine())

    def close(self) -> None:
        """Close the connections."""
        self.engine.dispose()


def _create_tables(engine: sa.Engine) -> None:
    """Create the desk's missing tables and indexes, and add what older tables lack.

    ``IF NOT EXISTS`` each, so processes opening a new store at once do not race (a look
    first, then a create, would: SQLite commits each table on its own).
    """
    tables = metadata.sorted_tables
    with engine.begin() as connection:
        for table in tables:
            connection.execute(sa.schema.CreateTable(table, if_not_exists=True))
        add_missing_columns(connection, tables)  # before the indexes, which may use them
        for index in (index for table in tables for index in table.indexes):
            connection.execute(sa.schema.CreateIndex(index, if_not_exists=True))
