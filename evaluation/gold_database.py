"""The database half of a run's verdict: the gold database, and how the run's differs from it.

The gold database is a copy of the run's starting database with the scenario's gold
actions run on it through the real tools (``apply_gold_actions``). The database the
assistant left behind is compared with it table by table (``database_problems``), over
the columns that do not depend on when a write ran.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolCall, ToolMessage
from sqlalchemy import inspect, text

from assistants.specialists import build_crew
from db.engine import Database
from evaluation.scenarios import Resolver, ScenarioError

BOOKKEEPING_TABLES = frozenset({"tool_call_records"})
VOLATILE_COLUMNS = frozenset({"created_at", "checked_in_at"})


def dump_state(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Return every business table's rows, sorted, without volatile columns."""
    state: dict[str, list[tuple[Any, ...]]] = {}
    with db.engine.connect() as connection:
        for table in sorted(inspect(connection).get_table_names()):
            if table in BOOKKEEPING_TABLES:
                continue
            columns = [
                c["name"]
                for c in inspect(connection).get_columns(table)
                if c["name"] not in VOLATILE_COLUMNS
            ]
            rows = connection.execute(text(f'SELECT {", ".join(columns)} FROM "{table}"')).all()
            state[table] = sorted((tuple(r) for r in rows), key=repr)
    return state


def state_diff(expected: Mapping[str, list[Any]], actual: Mapping[str, list[Any]]) -> list[str]:
    """Describe how two dumps differ, table by table (empty when equal)."""
    problems = []
    for table in sorted(set(expected) | set(actual)):
        want, got = set(expected.get(table, [])), set(actual.get(table, []))
        if want != got:
            missing = sorted(want - got, key=repr)[:3]
            extra = sorted(got - want, key=repr)[:3]
            problems.append(f"{table}: expected rows missing {missing}, unexpected rows {extra}")
    return problems


def apply_gold_actions(
    db: Database, passenger_id: str, actions: Sequence[Mapping[str, Any]]
) -> None:
    """Run the gold actions through the real tools, as an approved assistant would."""
    tools = {t.name: t for t in build_crew(db).all_tools()}
    resolve = Resolver(db)
    for index, action in enumerate(actions):
        name = str(action["name"])
        if name not in tools:
            raise ScenarioError(f"gold action {name!r} is not a tool")
        call = ToolCall(
            name=name,
            args=resolve(dict(action.get("args", {}))),
            id=f"gold-{index}",
            type="tool_call",
        )
        result = tools[name].invoke(call, {"configurable": {"passenger_id": passenger_id}})
        if isinstance(result, ToolMessage) and result.status == "error":
            raise ScenarioError(f"gold action {name} failed: {result.content}")


def database_problems(actual: Database, expected: Database) -> list[str]:
    """Describe how two databases' business tables differ (empty when equal).

    Two SQLite files are compared inside SQLite, over the columns that do not depend on
    when a write ran: first each table's rows paired by rowid (``_same_rows``, one pass
    that proves most tables equal), then ``EXCEPT`` both ways for the tables it could
    not prove equal, to name the rows that differ. Other engines fall back to comparing
    dumps.
    """
    engines = {actual.engine.dialect.name, expected.engine.dialect.name}
    if engines == {"postgresql"}:
        return _postgresql_problems(actual, expected)
    if engines != {"sqlite"}:
        return state_diff(dump_state(expected), dump_state(actual))
    gold_path = expected.engine.url.database
    if not gold_path:
        return state_diff(dump_state(expected), dump_state(actual))
    problems = []
    with actual.engine.connect() as connection:
        connection.exec_driver_sql("ATTACH DATABASE ? AS gold", (gold_path,))
        try:
            inspector = inspect(connection)
            tables = sorted(set(inspector.get_table_names()) - BOOKKEEPING_TABLES)
            gold_tables = set(
                connection.exec_driver_sql(
                    "SELECT name FROM gold.sqlite_master WHERE type = 'table'"
                ).scalars()
            )
            for table in tables:
                if table not in gold_tables:
                    problems.append(f"{table}: missing from the gold database")
                    continue
                names = [
                    c["name"]
                    for c in inspector.get_columns(table)
                    if c["name"] not in VOLATILE_COLUMNS
                ]
                if _same_rows(connection, table, names):
                    continue
                columns = ", ".join(f'"{name}"' for name in names)
                missing = _rows(connection, columns, f'gold."{table}"', f'main."{table}"')
                extra = _rows(connection, columns, f'main."{table}"', f'gold."{table}"')
                if missing or extra:
                    problems.append(
                        f"{table}: expected rows missing {missing}, unexpected rows {extra}"
                    )
        finally:
            connection.exec_driver_sql("DETACH DATABASE gold")
    return problems


def _compared_columns(connection: Any) -> dict[str, list[str]]:
    """Return the business tables of a database and the columns the judge compares."""
    inspector = inspect(connection)
    return {
        table: [
            c["name"] for c in inspector.get_columns(table) if c["name"] not in VOLATILE_COLUMNS
        ]
        for table in sorted(set(inspector.get_table_names()) - BOOKKEEPING_TABLES)
    }


def _fingerprints(connection: Any, tables: Mapping[str, list[str]]) -> dict[str, tuple[Any, ...]]:
    """Return each table's row count and the sum of its rows' 64-bit hashes (PostgreSQL).

    The sum does not depend on the order rows are read in, and the server computes it, so
    two databases are compared without sending a single row when they are equal.
    """
    found = {}
    for table, columns in tables.items():
        row = ", ".join(f'"{column}"' for column in columns)
        query = f'SELECT count(*), sum(hashtextextended(ROW({row})::text, 0)) FROM "{table}"'
        found[table] = tuple(connection.execute(text(query)).one())
    return found


def _postgresql_problems(actual: Database, expected: Database) -> list[str]:
    """Compare two PostgreSQL databases: fingerprints first, rows only where they differ."""
    with actual.engine.connect() as mine, expected.engine.connect() as gold:
        tables, gold_tables = _compared_columns(mine), _compared_columns(gold)
        problems = [f"{t}: missing from the gold database" for t in tables if t not in gold_tables]
        shared = {t: columns for t, columns in tables.items() if gold_tables.get(t) == columns}
        problems += [
            f"{t}: its columns differ from the gold database's"
            for t in tables
            if t in gold_tables and t not in shared
        ]
        ours, theirs = _fingerprints(mine, shared), _fingerprints(gold, shared)
        for table in sorted(t for t in shared if ours[t] != theirs[t]):
            names = ", ".join(f'"{column}"' for column in shared[table])
            query = text(f'SELECT {names} FROM "{table}"')
            got = {tuple(row) for row in mine.execute(query)}
            want = {tuple(row) for row in gold.execute(query)}
            missing = sorted(want - got, key=repr)[:3]
            extra = sorted(got - want, key=repr)[:3]
            if missing or extra:
                problems.append(
                    f"{table}: expected rows missing {missing}, unexpected rows {extra}"
                )
    return problems


_WITHOUT_ROWID = re.compile(r"\bWITHOUT\s+ROWID\b", re.IGNORECASE)


def _has_rowid(connection: Any, schema: str, table: str) -> bool:
    """Say whether a SQLite table has rowids (not ``WITHOUT ROWID``, and not a view)."""
    found = connection.exec_driver_sql(
        f"SELECT type, sql FROM {schema}.sqlite_master WHERE name = ?", (table,)
    ).first()
    return found is not None and found[0] == "table" and not _WITHOUT_ROWID.search(found[1] or "")


def _same_rows(connection: Any, table: str, columns: Sequence[str]) -> bool:
    """Say whether ``main`` and ``gold`` certainly hold the same rows of ``table``.

    Pairs the rows by rowid in one pass that stops at the first difference: equal counts
    and every row of ``main`` equal (over ``columns``) to the ``gold`` row of its rowid
    mean the two tables hold the same rows, whatever their rowids. ``False`` only means
    "not proven" (a row moved to another rowid, or a table without rowids): the caller
    then compares the rows as sets. A fraction of the cost of ``EXCEPT``, which sorts
    every row of both tables.
    """
    if not (_has_rowid(connection, "main", table) and _has_rowid(connection, "gold", table)):
        return False
    differs = " OR ".join(f'a."{column}" IS NOT b."{column}"' for column in columns) or "0"
    query = (
        f'SELECT (SELECT count(*) FROM main."{table}") = (SELECT count(*) FROM gold."{table}")'
        f' AND NOT EXISTS (SELECT 1 FROM main."{table}" AS a LEFT JOIN gold."{table}" AS b'
        f" ON b.rowid = a.rowid WHERE b.rowid IS NULL OR {differs})"
    )
    return bool(connection.exec_driver_sql(query).scalar())


def _rows(connection: Any, columns: str, left: str, right: str) -> list[tuple[Any, ...]]:
    """Return up to three rows of ``left`` that ``right`` lacks."""
    query = f"SELECT {columns} FROM {left} EXCEPT SELECT {columns} FROM {right} LIMIT 3"
    return [tuple(row) for row in connection.exec_driver_sql(query).all()]
