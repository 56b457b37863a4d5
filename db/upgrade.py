"""Bring a travel database built by an older version up to the current schema.

The generator creates the tables from ``db.models``, so a database it built before a
table changed keeps the old layout. ``upgrade`` changes it in place, in one transaction,
and does nothing on a current or empty database. ``Database.upgrade_schema`` runs it
before the first write of a process.

The changes it knows:

* ``tool_call_records`` is keyed by ``(thread_id, tool_call_id)`` and keeps
  ``args_sha256``. The old rows stay, as calls made outside a conversation
  (``thread_id = ""``) whose arguments are unknown (``args_sha256 = ""``): no new call
  matches them, so none is ever answered with an old result.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, MetaData, Table, inspect, text

from db.models import ToolCallRecord

_RECORDS = ToolCallRecord.__tablename__
_STAGING = f"{_RECORDS}_upgrade"


def _records_need_keys(connection: Engine | Connection) -> bool:
    inspector = inspect(connection)
    if not inspector.has_table(_RECORDS):
        return False
    columns = {column["name"] for column in inspector.get_columns(_RECORDS)}
    return "thread_id" not in columns


def _lock(connection: Connection) -> None:
    """Keep other writers out until the upgrade commits (a second process may race it)."""
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif connection.dialect.name == "postgresql":
        connection.execute(text(f"LOCK TABLE {_RECORDS} IN ACCESS EXCLUSIVE MODE"))


def _rebuild_records(connection: Connection) -> None:
    # SQLite cannot change a primary key in place: build the new table, copy, swap.
    current = ToolCallRecord.__table__
    assert isinstance(current, Table)
    staging = current.to_metadata(MetaData(), name=_STAGING)
    staging.create(connection)
    connection.execute(
        text(
            f"INSERT INTO {_STAGING} (thread_id, tool_call_id, args_sha256, tool_name, "
            "passenger_id, result_json, created_at) "
            "SELECT '', tool_call_id, '', tool_name, passenger_id, result_json, created_at "
            f"FROM {_RECORDS}"
        )
    )
    connection.execute(text(f"DROP TABLE {_RECORDS}"))
    connection.execute(text(f"ALTER TABLE {_STAGING} RENAME TO {_RECORDS}"))


def upgrade(engine: Engine) -> list[str]:
    """Upgrade an older schema in place.

    Args:
        engine: The travel database's engine.

    Returns:
        One line per change made; empty when the schema was already current (or absent).
    """
    if not _records_need_keys(engine):
        return []
    with engine.begin() as connection:
        _lock(connection)
        if not _records_need_keys(connection):
            return []  # another process upgraded it in the meantime
        _rebuild_records(connection)
    return [f"{_RECORDS}: keyed by thread_id and tool_call_id, with args_sha256"]
