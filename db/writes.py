"""Helpers every write shares: the write lock, payments and once-only execution.

A write runs inside ``Database.transaction()``. ``run_once`` makes it idempotent per
tool call: the result is stored in ``tool_call_records`` in the same transaction, keyed
by the conversation (thread id) and the tool call id, with a digest of the call's
arguments beside it. A write repeated for the same key with the same arguments (a
resume after a crash between the write and the checkpoint, a duplicate delivery)
returns the stored result and changes nothing; the same key with other arguments, or
for another tool or passenger, is refused, so no call is ever answered with another
call's result. The same tool call id in another conversation is another call: providers
that number their calls (``call_0``, ``call_1``) reuse ids across conversations.

Calls without a thread id (a tool invoked directly) are keyed by the call id alone,
among themselves. Concurrent deliveries of one call run one after the other: SQLite's
``BEGIN IMMEDIATE`` serialises every writer, and on PostgreSQL an advisory lock on the
call's key is taken before the look-up (``_wait_for_other_deliveries``), so the later
delivery finds the record the first one committed. Should two deliveries still both
pass the look-up, the second one's insert of the record conflicts: on PostgreSQL its
write ran in a savepoint, which is rolled back, and ``run_once`` answers with the result
the first one stored, so no ``IntegrityError`` leaves it; without a savepoint (SQLite)
``run_once_in_transaction`` rolls the transaction back whole and answers alike.

``find_stored_result`` only looks: it tells a caller about to answer a call whether that
call's write already committed (a crash after the commit and before the conversation was
saved), so the conversation reports it as done instead of asking again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, bindparam, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.engine import Database
from db.errors import RuleViolationError
from db.models import Payment, ToolCallRecord
from db.values import shown

# The key stored for calls that carry no thread id.
NO_THREAD = ""
# Ids longer than this (or not plain text) are stored as a digest, so any id fits the
# key columns on every engine.
_MAX_KEY_CHARS = 120
# The first key of the PostgreSQL advisory locks that serialise deliveries of one call.
_CALL_LOCK_SPACE = 0x7472_6176  # "trav"


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
        # Straight to the driver: a session statement is compiled and cached first.
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _wait_for_other_deliveries(session: Session, key: tuple[str, str]) -> None:
    """Make concurrent deliveries of one tool call run one after the other (PostgreSQL).

    Without this, two deliveries both find no record (neither has committed), and the
    second one's write runs against what the first one changed: behind the first one's
    row locks it finds the last room sold or the booking cancelled, and answers with
    that refusal instead of the first one's result. A transaction-scoped advisory lock
    on the call's key, taken before the look-up, makes the second delivery wait until
    the first one commits or rolls back; its look-up, a new statement under READ
    COMMITTED, then sees the stored record. Two different calls whose keys hash alike
    only wait for each other. SQLite needs nothing: ``begin_write`` already serialised
    every writer.

    Args:
        session: The write session, after ``begin_write``.
        key: The call's stored key, ``(thread_id, tool_call_id)``.
    """
    if session.connection().dialect.name != "postgresql":
        return
    # The two-int form keeps these locks apart from single-key advisory locks others take.
    session.execute(
        text("SELECT pg_advisory_xact_lock(:space, hashtext(:key))"),
        {"space": _CALL_LOCK_SPACE, "key": f"{key[0]}\x1f{key[1]}"},
    )


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


def key_part(value: str) -> str:
    """Return a thread or tool call id as stored in a key column.

    Short plain ids are kept as they are; a longer one, or one with characters no engine
    stores (NUL, lone surrogates), becomes ``sha256:<hex>`` of its text.
    """
    if len(value) <= _MAX_KEY_CHARS and value.isprintable():
        return value
    data = value.encode("utf-8", "surrogatepass")
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def _record_key(thread_id: str | None, tool_call_id: str) -> tuple[str, str]:
    """Return the key of a call's record: its conversation and its id, as stored."""
    return key_part(thread_id or NO_THREAD), key_part(tool_call_id)


def arguments_digest(args: Mapping[str, Any]) -> str:
    """Return the SHA-256 of the canonical JSON of a call's arguments."""
    canonical = json.dumps(
        dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


@functools.cache
def _record_by_key() -> Select[Any]:
    """Return the look-up of a call's record by its key (built once, on first use).

    A Core statement on the transaction's connection: ``Session.get`` paid for the
    identity map and for building an ORM object, and ``find_stored_result`` runs for
    every pending approval, in the caller's questions and in the sensitive-tool node.
    """
    records = ToolCallRecord.__table__
    return select(
        records.c.tool_name, records.c.passenger_id, records.c.args_sha256, records.c.result_json
    ).where(
        records.c.thread_id == bindparam("thread_id"),
        records.c.tool_call_id == bindparam("tool_call_id"),
    )


def _stored_result(
    connection: Connection,
    key: tuple[str, str],
    *,
    tool_call_id: str,
    tool_name: str,
    passenger_id: str,
    digest: str,
) -> dict[str, Any] | None:
    """Return the stored result of this very call, ``None`` if it never ran.

    Raises:
        RuleViolationError: The key was used by another tool, passenger or arguments.
    """
    record = connection.execute(
        _record_by_key(), {"thread_id": key[0], "tool_call_id": key[1]}
    ).first()
    if record is None:
        return None
    if record.tool_name != tool_name or record.passenger_id != passenger_id:
        raise RuleViolationError(
            f"Tool call {shown(tool_call_id)} was already used for {record.tool_name}; "
            "nothing was done. Make a new tool call."
        )
    if record.args_sha256 != digest:
        raise RuleViolationError(
            f"Tool call {shown(tool_call_id)} was already used for {record.tool_name} "
            "with other arguments; nothing was done. Make a new tool call."
        )
    stored: dict[str, Any] = json.loads(record.result_json)
    return stored


def find_stored_result(
    db: Database,
    *,
    thread_id: str | None,
    tool_call_id: str | None,
    tool_name: str,
    passenger_id: str,
    args: Mapping[str, Any],
) -> dict[str, Any] | None:
    """Return the stored result of this very call if its write committed, else ``None``.

    Reads only. A record under the call's key that another tool, passenger or other
    arguments made is not this call's result: it answers ``None`` here, and the tool
    refuses such a call when it runs.

    Args:
        db: The travel database.
        thread_id: The conversation; ``None`` for a direct call.
        tool_call_id: The id of the tool call; without one nothing was recorded.
        tool_name: The tool called.
        passenger_id: The passenger the call acts for.
        args: The call's arguments as the tool passes them to ``run_once`` (every
            argument the model fills in, defaults included).

    Returns:
        The result the write stored, or ``None`` when this call never took effect.
    """
    if not tool_call_id:
        return None
    db.upgrade_schema()
    # A database no write has reached yet (or none at all) has no record table.
    if not db.has_table(ToolCallRecord.__tablename__):
        return None
    key = _record_key(thread_id, tool_call_id)
    with db.rows() as connection:
        try:
            return _stored_result(
                connection,
                key,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                passenger_id=passenger_id,
                digest=arguments_digest(args),
            )
        except RuleViolationError:
            return None


def run_once(
    session: Session,
    *,
    tool_call_id: str | None,
    tool_name: str,
    passenger_id: str,
    now: datetime,
    write: Callable[[], dict[str, Any]],
    thread_id: str | None = None,
    args: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``write`` at most once per tool call, inside the caller's transaction.

    Args:
        session: The session of the write transaction (``Database.transaction()``).
        tool_call_id: The id of the tool call; ``None`` runs the write unconditionally.
        tool_name: The tool's name, stored with the result.
        passenger_id: The passenger the write acts for.
        now: The time of the write.
        write: Performs the write with ``session`` and returns a JSON-able result.
        thread_id: The conversation the call belongs to; ``None`` for a direct call.
        args: The call's arguments; their digest is stored and compared.

    Returns:
        The result of ``write``, or the stored result when this tool call already ran.

    Raises:
        RuleViolationError: The call's key was already used for another tool, passenger
            or arguments.
        IntegrityError: The write itself conflicted with another transaction's rows. A
            concurrent delivery of the same call that stored its record first is not
            an error: its stored result is returned.
    """
    begin_write(session)
    if not tool_call_id:
        return write()
    key = _record_key(thread_id, tool_call_id)
    digest = arguments_digest(args or {})
    _wait_for_other_deliveries(session, key)
    stored = _stored_result(
        session.connection(),
        key,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        passenger_id=passenger_id,
        digest=digest,
    )
    if stored is not None:
        return stored
    # Elsewhere than on SQLite (whose ``BEGIN IMMEDIATE`` let no other delivery past the
    # look-up) in a savepoint: should a concurrent delivery store its record first after
    # all, only this delivery's write is undone, and the transaction stays usable (on
    # PostgreSQL an error aborts the whole transaction otherwise).
    sqlite = session.connection().dialect.name == "sqlite"
    try:
        with contextlib.nullcontext() if sqlite else session.begin_nested():
            result = write()
            session.add(
                ToolCallRecord(
                    thread_id=key[0],
                    tool_call_id=key[1],
                    args_sha256=digest,
                    tool_name=tool_name,
                    passenger_id=passenger_id,
                    result_json=json.dumps(result, ensure_ascii=False, sort_keys=True),
                    created_at=now,
                )
            )
            session.flush()
    except IntegrityError:
        if sqlite:
            raise  # without a savepoint the session must roll back first
        stored = _stored_result(
            session.connection(),
            key,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            passenger_id=passenger_id,
            digest=digest,
        )
        if stored is None:
            raise  # a conflict in the write itself, not a duplicate delivery
        return stored
    return result


def run_once_in_transaction(
    db: Database,
    *,
    thread_id: str | None,
    tool_call_id: str | None,
    tool_name: str,
    passenger_id: str,
    args: Mapping[str, Any],
    write: Callable[[Session, datetime], dict[str, Any]],
) -> dict[str, Any]:
    """Run a write in its own transaction through ``run_once``, safe against duplicates.

    Args:
        db: The database; an older layout of ``tool_call_records`` is upgraded first.
        thread_id: The conversation; ``None`` for a direct call.
        tool_call_id: The id of the tool call; ``None`` runs the write unconditionally.
        tool_name: The tool's name, stored with the result.
        passenger_id: The passenger the write acts for.
        args: The call's arguments.
        write: Called with the session and now; returns the JSON-able result.

    Returns:
        The write's result, or the stored result of an earlier or concurrent delivery of
        the same call.

    Raises:
        RuleViolationError: The call's key was already used for another tool, passenger
            or arguments.
    """
    db.upgrade_schema()
    now = db.clock()
    try:
        with db.transaction() as session:
            return run_once(
                session,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                passenger_id=passenger_id,
                now=now,
                write=lambda: write(session, now),
                thread_id=thread_id,
                args=args,
            )
    except IntegrityError:
        if not tool_call_id:
            raise
        # Another delivery of this call committed its record between this one's look-up
        # and its insert; everything this one wrote has been rolled back with it.
        key = _record_key(thread_id, tool_call_id)
        with db.rows() as connection:
            stored = _stored_result(
                connection,
                key,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                passenger_id=passenger_id,
                digest=arguments_digest(args),
            )
        if stored is None:
            raise  # a conflict in the write itself, not a duplicate delivery
        return stored
