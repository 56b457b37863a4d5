"""Helpers every write shares: the write lock, payments and once-only execution.

A write runs inside ``Database.transaction()``. ``run_once`` makes it idempotent per
tool call: the result is stored in ``tool_call_records`` in the same transaction, so a
write repeated for the same ``tool_call_id`` (a resume after a crash between the write
and the checkpoint) returns the stored result and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from db.errors import RuleViolationError
from db.models import Payment, ToolCallRecord


def begin_write(session: Session) -> None:
    """Take the write lock before the checks of a write run.

    With SQLite's default deferred transactions the availability checks of two
    concurrent writers could both pass before either writes. ``BEGIN IMMEDIATE`` makes
    the second writer wait (``busy_timeout``) until the first commits, so checks and
    writes are serialised. Other backends rely on the row locks the write functions take
    with ``SELECT ... FOR UPDATE``.

    Args:
        session: The session of the write transaction, before it has run any statement.
    """
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        return
    dbapi_connection = connection.connection.dbapi_connection
    if dbapi_connection is not None and not getattr(dbapi_connection, "in_transaction", True):
        session.execute(text("BEGIN IMMEDIATE"))


def record_payment(
    session: Session,
    *,
    passenger_id: str,
    amount_cents: int,
    kind: str,
    reference: str,
    description: str,
    now: datetime,
) -> Payment | None:
    """Record money moved by a write: positive is charged, negative refunded.

    Args:
        session: The write session.
        passenger_id: Who pays or is refunded.
        amount_cents: The signed amount; zero records nothing.
        kind: A short machine-readable kind, e.g. ``"ticket_change"``.
        reference: The ticket number or reservation reference it belongs to.
        description: A sentence for statements and invoices.
        now: The time of the write.

    Returns:
        The new payment row, or ``None`` when the amount is zero.
    """
    if amount_cents == 0:
        return None
    payment = Payment(
        passenger_id=passenger_id,
        amount_cents=amount_cents,
        kind=kind,
        reference=reference,
        description=description[:300],
        created_at=now,
    )
    session.add(payment)
    return payment


def run_once(
    session: Session,
    *,
    tool_call_id: str | None,
    tool_name: str,
    passenger_id: str,
    now: datetime,
    write: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """Run ``write`` at most once per tool call, inside the caller's transaction.

    Args:
        session: The session of the write transaction (``Database.transaction()``).
        tool_call_id: The id of the tool call; ``None`` runs the write unconditionally.
        tool_name: The tool's name, stored with the result.
        passenger_id: The passenger the write acts for.
        now: The time of the write.
        write: Performs the write with ``session`` and returns a JSON-able result.

    Returns:
        The result of ``write``, or the stored result when this tool call already ran.

    Raises:
        RuleViolationError: The tool call id was already used by another tool or passenger.
    """
    begin_write(session)
    if tool_call_id:
        record = session.get(ToolCallRecord, tool_call_id)
        if record is not None:
            if record.tool_name != tool_name or record.passenger_id != passenger_id:
                raise RuleViolationError(
                    f"Tool call {tool_call_id} was already used for {record.tool_name}; "
                    "make a new tool call."
                )
            stored: dict[str, Any] = json.loads(record.result_json)
            return stored
    result = write()
    if tool_call_id:
        session.add(
            ToolCallRecord(
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                passenger_id=passenger_id,
                result_json=json.dumps(result, ensure_ascii=False, sort_keys=True),
                created_at=now,
            )
        )
        session.flush()
    return result
