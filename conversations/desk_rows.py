"""What the parts of the desk share: their tables' metadata, errors, limits, staff, moments.

The desk (``conversations.desk``) keeps its tables beside the conversations: the queue
(``conversations.desk_queue``), the staff's checks (``conversations.desk_checks``) and
its settings (``conversations.desk_settings``), all created together from ``metadata``.
A table made by an earlier version gains the columns added since (``add_missing_columns``)
whenever they are created, so an existing database keeps working.

A member of staff (``Staff``) has a login, which everything that compares who holds a
conversation, who proposed an action or who decided a check goes by, and the audit log
records; and a name, the only one customers ever read. A login is one identity however
it is spelled: ``canonical_login`` is the one form every comparison and record uses
(``ANA@example.com`` and ``ana@example.com`` are one person), where tokens are verified
(``server.auth``) and where the desk keeps and compares logins (``staff_of``,
``login_of``). The name keeps its spelling.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from conversations.logins import canonical_login

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

NOTE_CHARS = 2000
# The longest login or name of a member of staff the desk stores (a token's limit too:
# ``server.auth.MAX_SUBJECT_CHARS``).
AGENT_CHARS = 80

metadata = sa.MetaData()


class DeskError(Exception):
    """A desk action that cannot be done now; the message says why, for staff."""


class DeskStoreError(Exception):
    """The desk's table cannot be read or set up."""


def agent_name(agent: str) -> str:
    """Return a member of staff's name as the customer sees it, in one line and short."""
    name = " ".join(agent.split())[:AGENT_CHARS]
    if not name:
        raise DeskError("Give the name the customer will see (--agent NAME).")
    return name


@dataclass(frozen=True)
class Staff:
    """A member of staff at the desk: the login the desk compares, and the name customers see.

    Who holds a conversation, who proposed an action, who decided a check, and the audit
    log go by ``login`` (which may be an e-mail address); customers only ever read
    ``name``. A plain string given where a member of staff is expected is both (a
    token issued before names existed): its canonical form the login, its spelling the
    name.
    """

    login: str
    name: str

    def __str__(self) -> str:
        """Return how staff read one another in the desk's refusals: the name, and the login."""
        same = canonical_login(self.name) == self.login
        return self.name if same else f"{self.name} ({self.login})"


def staff_of(who: str | Staff) -> Staff:
    """Return ``who`` as the desk keeps a member of staff: each part in one line and short.

    The login is kept in its canonical form (``canonical_login``), the name as spelled.

    Raises:
        DeskError: No login, or no name, to keep; or a login longer than the desk keeps
            once canonical (folding can lengthen it: ``ß`` is ``ss``).
    """
    if isinstance(who, str):
        name = agent_name(who)
        return Staff(_kept_login(name), name)
    spelled = agent_name(who.login)
    login = _kept_login(spelled)
    return Staff(login, agent_name(who.name) if who.name.strip() else spelled)


def _kept_login(login: str) -> str:
    canonical = canonical_login(login)
    if len(canonical) > AGENT_CHARS:
        raise DeskError(f"A login is at most {AGENT_CHARS} characters long.")
    return canonical


def login_of(who: str | Staff) -> str:
    """Return the login the desk compares for ``who``: canonical (empty for a blank one)."""
    return canonical_login(who if isinstance(who, str) else who.login)[:AGENT_CHARS]


def add_missing_columns(connection: sa.Connection, tables: Iterable[sa.Table]) -> None:
    """Add to each of ``tables`` the columns it lacks, as an earlier version made it.

    Every column added since a table was first made has a default, so its existing rows
    get it. Several processes may open one store at once: on PostgreSQL ``IF NOT EXISTS``
    lets the second go by; on SQLite, which has no such clause, the second is told the
    column exists, and checks it does.

    Raises:
        DeskStoreError: A column cannot be added (not a database error, which the desk
            would take for another process's set-up and go on without the column).
    """
    dialect = connection.dialect
    inspector = sa.inspect(connection)
    for table in tables:
        have = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in have:
                continue
            spec = sa.schema.CreateColumn(column).compile(dialect=dialect)
            exists = " IF NOT EXISTS" if dialect.name == "postgresql" else ""
            add = f"ALTER TABLE {table.name} ADD COLUMN{exists} {spec}"
            try:
                connection.exec_driver_sql(add)
            except sa.exc.SQLAlchemyError as error:
                # SQLite: another process may have added it since. PostgreSQL said so
                # already (``IF NOT EXISTS``), and its transaction is now aborted.
                if dialect.name == "sqlite":
                    again = sa.inspect(connection).get_columns(table.name)
                    if column.name in {c["name"] for c in again}:
                        continue
                raise DeskStoreError(
                    f"The desk's table {table.name} lacks its column {column.name}, which "
                    f"cannot be added: {getattr(error, 'orig', None) or error}"
                ) from error


def utc(moment: datetime) -> datetime:
    """Return ``moment`` in UTC (a naive one is taken to be in UTC)."""
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def with_utc(row: Any, moments: Sequence[str]) -> dict[str, Any]:
    """Return a row's values with its ``moments`` in UTC (SQLite gives them naive)."""
    values = dict(row)
    for name in moments:
        if values[name] is not None:
            values[name] = utc(values[name])
    return cast("dict[str, Any]", values)
