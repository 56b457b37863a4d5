"""The psycopg pool of a PostgreSQL conversations store, which fences claimed writes.

Kept apart from ``conversations.fences`` so that SQLite stores never import psycopg.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from psycopg_pool import ConnectionPool

from conversations.fences import TurnClaimLostError


class FencedPool(ConnectionPool):  # type: ignore[type-arg]
    """A pool whose connection, lent for a claimed write, checks the claim first.

    ``claim_of`` tells the claim that the write being made in this thread must check
    (``conversations.fences.PostgresFence`` sets it to its saver's). With one, the
    connection is lent inside a transaction that first reads the conversation's claim
    number ``FOR SHARE``: a new claim waits for the write, every write after it sees the
    new number, and the check and the write commit together or not at all. LangGraph's
    ``PostgresSaver`` takes a connection from its pool for every write, so the fence
    needs nothing of the saver but its public constructor.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claim_of: Callable[[], tuple[str, int] | None] = lambda: None

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Any]:
        """Lend a connection; for a claimed write, in a transaction that checked it."""
        claim = self.claim_of()
        with super().connection(timeout) as connection:
            if claim is None:
                yield connection
                return
            with connection.transaction():
                row = connection.execute(
                    "SELECT claim FROM turn_claims WHERE thread_id = %s FOR SHARE", (claim[0],)
                ).fetchone()
                found = row["claim"] if isinstance(row, dict) else (row[0] if row else None)
                if found is None or int(found) != claim[1]:
                    raise TurnClaimLostError(claim[0])
                yield connection
