"""The judge: the final database state against the gold actions, and procedural checks."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from sqlalchemy import inspect, text

from assistants.approvals import Decision, facts_of
from assistants.specialists import build_crew
from conversations.desk import Check, Handoff
from db.engine import Database
from db.values import fmt_money
from evaluation.scenarios import ExpectedHandoff, Resolver, Scenario, ScenarioError, StaffCheck

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


@dataclass
class Transcript:
    """What happened in one run: messages, decisions and timings."""

    messages: list[AnyMessage] = field(default_factory=list)
    decisions: dict[str, Decision] = field(default_factory=dict)
    unused_decisions: list[str] = field(default_factory=list)
    user_info: str = ""
    latencies: list[float] = field(default_factory=list)
    model_calls: int = 0
    # The desk's last hand-off of the conversation to a person, if it was handed off.
    handoff: Handoff | None = None
    # Every second-approval check the desk was asked for, as it ended (``Desk.checks_ever``),
    # what the trial's member of staff answered to each (by tool call id), and the
    # scripted staff answers left over.
    checks: list[Check] = field(default_factory=list)
    staff_decisions: dict[str, StaffCheck] = field(default_factory=dict)
    unused_staff_checks: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScenarioResult:
    """The verdict on one run of one scenario."""

    scenario: Scenario
    failures: tuple[str, ...]
    transcript: Transcript
    # Why the run stopped before its end (a provider error, the time limit): not judged.
    error: str | None = None

    @property
    def passed(self) -> bool:
        """Tell whether the run finished and every check held."""
        return not self.failures and self.error is None

    @property
    def reasons(self) -> tuple[str, ...]:
        """Return why the run failed: its error, or the checks it failed."""
        return (f"error: {self.error}",) if self.error is not None else self.failures


# A must_say entry with a digit in it is a fact (an amount, a time, a flight number): a
# model can only know it from a tool, the customer or the bookings, never by itself.
_FACT = re.compile(r"\d")
# Answers that record the procedure, not a failing tool: judged by their own checks.
_PROCEDURAL_NOT_RUN = frozenset({"declined", "superseded", "one_specialist_at_a_time"})


def judge(
    scenario: Scenario,
    transcript: Transcript,
    database_problems: Sequence[str],
    sensitive_names: frozenset[str],
    *,
    offline: bool = False,
) -> tuple[str, ...]:
    """Return every check the run failed.

    Args:
        scenario: What was asked and expected.
        transcript: What happened, with the desk's last hand-off of the conversation.
        database_problems: How the final database differs from the gold one.
        sensitive_names: The tools that need the customer's approval.
        offline: The assistant's words were scripted, so they prove nothing: facts it
            had to say must come from a tool result, the customer or the bookings.
    """
    failures = [f"database: {p}" for p in database_problems]
    messages = transcript.messages
    calls = {str(c["id"]): c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    answers: dict[str, list[ToolMessage]] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            answers.setdefault(message.tool_call_id, []).append(message)
    for call_id, call in calls.items():
        found = answers.get(call_id, [])
        if len(found) != 1:
            failures.append(f"tool call {call['name']} ({call_id}) answered {len(found)} times")
            continue
        answer = found[0]
        facts = facts_of(answer)
        if call["name"] in sensitive_names:
            decision = transcript.decisions.get(call_id)
            if facts.ran and (decision is None or not decision.approved):
                failures.append(f"{call['name']} ran without the customer's approval")
            if decision is not None and not decision.approved and facts.ran:
                failures.append(f"{call['name']} was denied but ran anyway")
            above = scenario.second_approval_above
            moved = facts.amount.cents if facts.amount is not None else 0
            if facts.ran and above is not None and moved > above and not facts.checked_by:
                failures.append(
                    f"{call['name']} moved {fmt_money(moved)}, more than {fmt_money(above)}, "
                    "without a member of staff's check"
                )
        failing = answer.status == "error" and facts.not_run not in _PROCEDURAL_NOT_RUN
        if failing and call["name"] not in scenario.expected_errors:
            failures.append(
                f"unexpected tool error from {call['name']}: {_first_line(str(answer.content))}"
            )
    if transcript.unused_decisions:
        failures.append(
            f"{len(transcript.unused_decisions)} scripted approval answers were never used: "
            f"{transcript.unused_decisions}"
        )
    said = " ".join(str(m.content) for m in messages if isinstance(m, AIMessage)).lower()
    failures += [f"never said {fact!r}" for fact in scenario.must_say if fact.lower() not in said]
    shown = " ".join(str(m.content) for m in messages if isinstance(m, ToolMessage)).lower()
    failures += [
        f"no tool returned {fact!r}" for fact in scenario.tool_facts if fact.lower() not in shown
    ]
    if offline:
        heard = " ".join(
            [shown, transcript.user_info.lower()]
            + [str(m.content).lower() for m in messages if m.type == "human"]
        )
        failures += [
            f"{fact!r} was said, but no tool, customer message or booking gave it"
            for fact in scenario.must_say
            if _FACT.search(fact) and fact.lower() not in heard
        ]
    failures += handoff_problems(scenario.handoff, transcript.handoff)
    failures += check_problems(transcript, answers)
    return tuple(failures)


def check_problems(
    transcript: Transcript, answers: Mapping[str, Sequence[ToolMessage]]
) -> list[str]:
    """Describe what went wrong with the run's second approvals (empty if nothing did).

    Every check the desk was asked for must end decided by the trial's member of staff
    and applied (``used``; ``withdrawn`` when a new message dropped its action): one
    still waiting is a check the scenario did not expect (its turns script no staff
    answer for it). An action staff refused must not run, and the assistant must have
    been told their reason. Scripted staff answers must all be used: a scenario that
    expects a check fails when none was asked.

    ``answers`` are the tool answers of the conversation, by tool call id.
    """
    problems = []
    for check in transcript.checks:
        what = f"{check.title} ({check.amount})"
        if check.status == "waiting":
            problems.append(
                f"a member of staff's check of {what} was left waiting: the scenario "
                "scripts no staff answer for it"
            )
        elif check.status in ("approved", "refused"):
            problems.append(
                f"{check.staff} {check.status} {what}, but the conversation never went on"
            )
        staff = transcript.staff_decisions.get(check.tool_call_id)
        found = answers.get(check.tool_call_id, [])
        if staff is None or staff.approved or len(found) != 1:
            continue
        if facts_of(found[0]).ran:
            problems.append(f"{what} ran though a member of staff refused it")
        elif staff.reason.lower() not in str(found[0].content).lower():
            problems.append(
                f"the assistant was never told why a member of staff refused {what}: "
                f"{staff.reason!r}"
            )
    if transcript.unused_staff_checks:
        problems.append(
            f"{len(transcript.unused_staff_checks)} scripted staff answers were never used "
            f"(no check asked for them): {transcript.unused_staff_checks}"
        )
    return problems


def handoff_problems(expected: ExpectedHandoff | None, handoff: Handoff | None) -> list[str]:
    """Describe how the desk's hand-off of a run differs from the scenario's (empty if not).

    A scenario with ``[handoff]`` ends with the conversation waiting in the desk's queue,
    with a reason (holding one of ``reason_mentions``, when given); one without it is
    never handed to a person.
    """
    if expected is None:
        if handoff is None:
            return []
        reason = handoff.reason or "no reason given"
        return [f"handed to a person ({reason}), which the scenario does not expect"]
    if handoff is None:
        return ["never handed to a person: the conversation is not in the desk's queue"]
    problems = []
    if handoff.status != "waiting":
        problems.append(f"the hand-off is {handoff.status}, not waiting in the desk's queue")
    reason = handoff.reason.strip().lower()
    if not reason:
        problems.append("handed to a person without a reason")
    elif expected.reason_mentions and not any(
        word.lower() in reason for word in expected.reason_mentions
    ):
        problems.append(
            f"the hand-off's reason {handoff.reason!r} mentions none of "
            f"{list(expected.reason_mentions)}"
        )
    return problems


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:200]


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
