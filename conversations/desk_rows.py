"""What the parts of the desk share: their tables' metadata, errors, limits and moments.

The desk (``conversations.desk``) keeps its tables beside the conversations: the queue
(``conversations.desk_queue``), the staff's checks (``conversations.desk_checks``) and
its settings (``conversations.desk_settings``), all created together from ``metadata``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

if TYPE_CHECKING:
    from collections.abc import Sequence

NOTE_CHARS = 2000
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
