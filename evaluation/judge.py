"""The judge: the final database state against the gold actions, and procedural checks."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage
from sqlalchemy import inspect, text

from assistants.approvals import Decision, facts_of
from assistants.specialists import build_crew
from conversations.audit import AuditEntry
from conversations.desk import Check, Handoff
from conversations.events import PERSON_KEY, STAFF_NOTE_KEY
from conversations.protocol import PERSON_LOGIN_KEY
from db.engine import Database
from db.values import fmt_money
from evaluation.scenarios import (
    NOBODY,
    DeskStep,
    ExpectedHandoff,
    HandoffEnd,
    Resolver,
    Scenario,
    ScenarioError,
    StaffCheck,
)

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


@dataclass(frozen=True)
class DeskStepResult:
    """What became of one scripted step of the people at the desk (a turn's ``desk``).

    ``turn`` is the index of its turn (from 0); ``refusal`` what the desk or the
    protocol said refusing it (``None``: it was done); ``text`` its text as given to
    the protocol, placeholders resolved (a hand-back's note: what the model must read).
    """

    turn: int
    step: DeskStep
    refusal: str | None
    text: str = ""


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
    # The id of each customer message in ``messages``, by the index of its turn.
    sent: dict[int, str] = field(default_factory=dict)
    # What became of each scripted desk step, in the order run, and those never run.
    desk_steps: list[DeskStepResult] = field(default_factory=list)
    unused_desk_steps: list[str] = field(default_factory=list)
    # The desk's audit log of the conversation: who took, proposed, decided, handed back.
    audit: list[AuditEntry] = field(default_factory=list)


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
# Answers that record the procedure, not a failing tool: judged by their own checks
# (``action_ends`` says which a scenario expects).
_PROCEDURAL_NOT_RUN = frozenset(
    {"declined", "superseded", "one_specialist_at_a_time", "handed_back", "asked_for_person"}
)


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
    failures += four_eyes_problems(transcript, answers)
    failures += desk_problems(transcript)
    failures += answer_problems(scenario, transcript)
    failures += action_end_problems(scenario.action_ends, messages, sensitive_names)
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

    A scenario with ``[handoff]`` ends with the conversation handed to a person, with a
    reason (holding one of ``reason_mentions``, when given), waiting in the desk's queue
    or as its ``ends`` says; one without it is never handed to a person.
    """
    if expected is None:
        if handoff is None:
            return []
        reason = handoff.reason or "no reason given"
        return [f"handed to a person ({reason}), which the scenario does not expect"]
    if handoff is None:
        return ["never handed to a person: the conversation is not in the desk's queue"]
    problems = []
    if expected.ends == "waiting":
        if handoff.status != "waiting":
            problems.append(f"the hand-off is {handoff.status}, not waiting in the desk's queue")
    elif handoff_end(handoff) != expected.ends:
        problems.append(f"the hand-off ended {handoff_end(handoff)}, not {expected.ends}")
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


def handoff_end(handoff: Handoff) -> HandoffEnd:
    """Return how a hand-off stands: its status, or ``withdrawn`` (closed, never taken).

    The desk closes a request the customer withdrew; nobody ever took it.
    """
    if handoff.status == "closed" and handoff.taken_at is None:
        return "withdrawn"
    return handoff.status


def four_eyes_problems(
    transcript: Transcript, answers: Mapping[str, Sequence[ToolMessage]]
) -> list[str]:
    """Describe what breaks the four eyes of the run's second approvals (empty if nothing).

    A check a member of staff decided must be decided by another one than the person
    who proposed its action (by login), and the records must name both: the audit log
    who proposed it and who decided it, and the action's answer (the history) who
    checked it once the decision was applied.
    """
    problems = []
    done = {(entry.supervisor, entry.looked_at) for entry in transcript.audit}
    for check in transcript.checks:
        if not check.staff:
            continue  # nobody decided it
        what = f"{check.title} ({check.amount})"
        decider = check.staff_login or check.staff
        proposer = _proposer_login(transcript.messages, check.tool_call_id)
        if proposer and proposer == decider:
            problems.append(
                f"{check.staff} proposed {what} and decided its check too: a second approval "
                "needs a second person"
            )
        if (decider, "approved") not in done and (decider, "refused") not in done:
            problems.append(
                f"the audit log does not name {decider}, who decided the check of {what}"
            )
        if proposer and (proposer, "proposed") not in done:
            problems.append(f"the audit log does not name {proposer}, who proposed {what}")
        found = answers.get(check.tool_call_id, [])
        if check.status == "used" and len(found) == 1:
            named = facts_of(found[0]).checked_by
            if named != check.staff:
                problems.append(
                    f"the history names {named or 'nobody'} as the check of {what}, "
                    f"not {check.staff}, who decided it"
                )
    return problems


def _proposer_login(messages: Sequence[AnyMessage], call_id: str) -> str:
    """Return the login of the member of staff who proposed ``call_id`` ("" if none did)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            meta = message.response_metadata
            return str(meta.get(PERSON_LOGIN_KEY) or meta.get(PERSON_KEY) or "")
    return ""


def desk_problems(transcript: Transcript) -> list[str]:
    """Describe how the people's scripted steps went otherwise than the scenario says.

    A step the scenario expects the desk to refuse (``refused``) must be refused, saying
    those words; every other step must be done. A hand-back's note must reach the
    assistant (a note for the model in the conversation). Every step must have run.
    """
    problems = []
    for result in transcript.desk_steps:
        step = result.step
        where = f"turn {result.turn + 1}: {step}"
        if step.refused is None:
            if result.refusal is not None:
                problems.append(f"{where}, but the desk refused: {result.refusal}")
        elif result.refusal is None:
            problems.append(
                f"{where}, and the desk let it, though it must refuse it ({step.refused!r})"
            )
        elif step.refused.lower() not in result.refusal.lower():
            problems.append(
                f"{where}: the desk refused it without saying {step.refused!r}: {result.refusal}"
            )
        note = result.text.strip()
        handed_back = step.action == "hand_back" and result.refusal is None
        if handed_back and note and not _noted(transcript.messages, note):
            problems.append(f"{where}: its note never reached the assistant: {note!r}")
    if transcript.unused_desk_steps:
        problems.append(
            f"{len(transcript.unused_desk_steps)} scripted desk steps never ran (the trial "
            f"ended before them): {transcript.unused_desk_steps}"
        )
    return problems


def answered_by(messages: Sequence[AnyMessage], message_id: str) -> str | None:
    """Return the assistant that answered the customer's message ``message_id`` first.

    That is the assistant of the first message after it (a reply or a tool call) that
    is neither a person's nor a note for the model, before the customer's next message:
    ``"nobody"`` when there is none (the message waited for a person), ``None`` when the
    message is not in ``messages``.
    """
    start = next(
        (i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and m.id == message_id),
        None,
    )
    if start is None:
        return None
    for message in messages[start + 1 :]:
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and not _said_by_a_person(message):
            return message.name or "an unnamed assistant"
    return NOBODY


def _said_by_a_person(message: AIMessage) -> bool:
    """Tell whether a person wrote ``message``, or it is a note for the model."""
    meta = message.response_metadata
    return bool(meta.get(PERSON_KEY) or meta.get(STAFF_NOTE_KEY))


def _noted(messages: Sequence[AnyMessage], note: str) -> bool:
    """Tell whether ``note`` is in the conversation as a note for the model."""
    return any(
        isinstance(m, AIMessage)
        and bool(m.response_metadata.get(STAFF_NOTE_KEY))
        and note in str(m.content)
        for m in messages
    )


def answer_problems(scenario: Scenario, transcript: Transcript) -> list[str]:
    """Describe each turn whose message another assistant answered than ``answered_by``."""
    problems = []
    for index, turn in enumerate(scenario.turns):
        if not turn.answered_by:
            continue
        message_id = transcript.sent.get(index)
        who = None if message_id is None else answered_by(transcript.messages, message_id)
        if who is None:
            problems.append(f"turn {index + 1}: the customer's message is not in the conversation")
        elif who != turn.answered_by:
            problems.append(
                f"turn {index + 1}: {who} answered the customer's message, not {turn.answered_by}"
            )
    return problems


def action_ends(messages: Sequence[AnyMessage], sensitive_names: frozenset[str]) -> list[str]:
    """Return every action put to the customer, in order, as ``"TOOL: END"``.

    ``END`` is ``done``, ``failed`` (it ran, and its tool answered with an error), why it
    was not run (``declined``, ``handed_back``...), or ``unanswered``.
    """
    found: dict[str, ToolMessage] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            found.setdefault(message.tool_call_id, message)
    ends = []
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            if call["name"] not in sensitive_names:
                continue
            answer = found.get(str(call["id"]))
            if answer is None:
                end = "unanswered"
            else:
                facts = facts_of(answer)
                if facts.ran:
                    end = "failed" if answer.status == "error" else "done"
                else:
                    end = facts.not_run or "not run"
            ends.append(f"{call['name']}: {end}")
    return ends


def action_end_problems(
    expected: Sequence[str], messages: Sequence[AnyMessage], sensitive_names: frozenset[str]
) -> list[str]:
    """Describe how the actions put to the customer ended otherwise than ``action_ends``."""
    if not expected:
        return []
    ended = action_ends(messages, sensitive_names)
    if ended == list(expected):
        return []
    return [f"the actions put to the customer ended {ended}, not {list(expected)}"]


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
