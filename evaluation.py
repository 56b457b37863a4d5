"""Scenario evaluation, judged on the final database state (the method of tau-bench).

A scenario (a TOML file in ``data/scenarios/``) names a passenger, the customer's turns,
the customer's answer to each approval prompt, and the *gold actions*: the writes a
perfect assistant would make. The judge applies the gold actions to a fresh copy of the
database and compares every business table with the database the assistant left
behind: the rows that had to change changed, and nothing else did. Procedural checks
come on top: every write was approved first, a denied action did not run, every tool
call was answered once, and the facts the customer needed were said.

Two ways to run a scenario:

- offline, with the model's replies scripted in the scenario (``replies`` in each turn):
  this proves the graph, the tools, the approvals and the database together, and is part
  of the default test run;
- live (``travel-assistant eval``), with a real model as the assistant and another model
  playing the customer from the scenario's ``instructions``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
import statistics
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from sqlalchemy import inspect, select, text

from assistants.approvals import Decision, facts_of
from assistants.providers import (
    ModelProviderError,
    describe_provider_error,
    is_provider_error,
    time_limit,
)
from assistants.specialists import build_crew
from conversations.assistant import Thread, TravelAssistant
from db import reservations
from db.clock import Clock
from db.copies import database_copies
from db.domains import RESERVATION_KINDS
from db.engine import Database, packaged_data_dir
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_TICKET_NO
from db.models import Flight, TicketFlight

SCENARIO_DIR = packaged_data_dir() / "scenarios"
# The seed of the database the scenarios were written against (the tests use it too):
# fares and amounts in their expected facts come from it.
SCENARIO_SEED = 7
# Tables that record how a write happened rather than what the customer owns.
BOOKKEEPING_TABLES = frozenset({"tool_call_records"})
# Columns whose values depend on when a write ran, not on what it did.
VOLATILE_COLUMNS = frozenset({"created_at", "checked_in_at"})
_PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]*))?\}")
# ``{hotel:NAME}``, ``{car:NAME/TIER}``, ...: one per reservation kind, declared with it.
_RESERVATION_PLACEHOLDERS = {kind.placeholder: kind for kind in RESERVATION_KINDS}


class ScenarioError(ValueError):
    """A scenario file is malformed or names something that does not exist."""


# --- scenarios -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One customer message, the scripted model replies, and the approval answers."""

    customer: str
    replies: tuple[dict[str, Any], ...] = ()
    decisions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """One conversation to evaluate."""

    id: str
    category: str
    passenger_id: str
    description: str
    instructions: str
    turns: tuple[Turn, ...]
    gold_actions: tuple[dict[str, Any], ...] = ()
    must_say: tuple[str, ...] = ()
    tool_facts: tuple[str, ...] = ()
    expected_errors: tuple[str, ...] = ()
    resume_after_turn: int | None = None
    path: Path | None = None


def load_scenario(path: Path) -> Scenario:
    """Read one scenario file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        turns = tuple(
            Turn(
                customer=str(t["customer"]),
                replies=tuple(t.get("replies", ())),
                decisions=tuple(str(d) for d in t.get("decisions", ())),
            )
            for t in data["turns"]
        )
        return Scenario(
            id=str(data.get("id", path.stem)),
            category=str(data["category"]),
            passenger_id=str(data["passenger_id"]),
            description=str(data.get("description", "")),
            instructions=str(data.get("instructions", "")),
            turns=turns,
            gold_actions=tuple(data.get("gold_actions", ())),
            must_say=tuple(data.get("must_say", ())),
            tool_facts=tuple(data.get("tool_facts", ())),
            expected_errors=tuple(str(e) for e in data.get("expected_errors", ())),
            resume_after_turn=data.get("resume_after_turn"),
            path=path,
        )
    except (KeyError, TypeError, tomllib.TOMLDecodeError) as error:
        raise ScenarioError(f"{path}: {error}") from error


def load_scenarios(folder: Path = SCENARIO_DIR) -> list[Scenario]:
    """Read every ``*.toml`` scenario of ``folder``, sorted by file name."""
    return [load_scenario(path) for path in sorted(folder.glob("*.toml"))]


# --- placeholders ------------------------------------------------------------------------------


class Resolver:
    """Turn ``{kind:argument}`` placeholders into ids and dates of one database.

    ``{flight:LX0112+1}`` is the LX0112 flight one day after the fixture passenger's
    flight; ``{flight:LX0318@9}`` is LX0318 on the date nine days from today;
    ``{hotel:NAME}``, ``{car:NAME/CLASS}`` and ``{excursion:NAME}`` are catalogue ids;
    ``{date:+3}`` is the date three days after today.
    """

    def __init__(self, db: Database) -> None:
        """Resolve against ``db`` at its clock's "now"."""
        self.db = db

    def __call__(self, value: Any) -> Any:
        """Resolve every placeholder inside ``value`` (strings, lists, dicts)."""
        if isinstance(value, str):
            whole = _PLACEHOLDER.fullmatch(value)
            if whole:
                return self._one(whole.group(1), whole.group(2) or "")
            return _PLACEHOLDER.sub(lambda m: str(self._one(m.group(1), m.group(2) or "")), value)
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        return value

    def _one(self, kind: str, argument: str) -> Any:
        with self.db.session() as session:
            if kind == "date":
                return (self.db.clock().date() + timedelta(days=int(argument or 0))).isoformat()
            if kind == "flight" and "@" in argument:
                # {flight:LX0318@9}: flight LX0318 on the (UTC) date nine days from today.
                number, _, days = argument.partition("@")
                day = self.db.clock().date() + timedelta(days=int(days))
                start = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
                found = session.scalars(
                    select(Flight.flight_id)
                    .where(
                        Flight.flight_no == number,
                        Flight.scheduled_departure >= start,
                        Flight.scheduled_departure < start + timedelta(days=1),
                    )
                    .order_by(Flight.scheduled_departure)
                ).first()
            elif kind == "flight":
                number, _, days = argument.partition("+")
                base = session.scalars(
                    select(Flight)
                    .join(TicketFlight, TicketFlight.flight_id == Flight.flight_id)
                    .where(TicketFlight.ticket_no == FIXTURE_TICKET_NO)
                ).first()
                if base is None:
                    raise ScenarioError("the fixture ticket has no flight")
                # Flights keep their local time, so a day later is not always 24 hours
                # later in UTC (summer time): take the first one from 12 hours before.
                earliest = base.scheduled_departure + timedelta(days=int(days or 0), hours=-12)
                found = session.scalars(
                    select(Flight.flight_id)
                    .where(
                        Flight.flight_no == (number or FIXTURE_FLIGHT_NO),
                        Flight.scheduled_departure >= earliest,
                    )
                    .order_by(Flight.scheduled_departure)
                ).first()
            elif kind in _RESERVATION_PLACEHOLDERS:
                found = reservations.find_id(session, _RESERVATION_PLACEHOLDERS[kind], argument)
            else:
                raise ScenarioError(f"unknown placeholder kind {kind!r}")
        if found is None:
            raise ScenarioError(f"placeholder {{{kind}:{argument}}} matches nothing")
        return found


# --- the judge --------------------------------------------------------------------------------


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
        transcript: What happened.
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
    return tuple(failures)


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


# --- offline runs ------------------------------------------------------------------------------


def _reply(resolve: Resolver, spec: Mapping[str, Any], counter: Iterator[int]) -> AIMessage:
    calls = [
        ToolCall(
            name=str(c["name"]),
            args=resolve(dict(c.get("args", {}))),
            id=str(c.get("id") or f"call_{next(counter)}"),
            type="tool_call",
        )
        for c in spec.get("calls", ())
    ]
    return AIMessage(content=resolve(str(spec.get("text", ""))), tool_calls=calls)


def parse_decision(answer: str) -> Decision:
    """Turn ``"y"`` or ``"n: reason"`` into a decision (anything but yes denies)."""
    head, _, reason = answer.partition(":")
    if head.strip().lower() in ("y", "yes"):
        return Decision(True)
    return Decision(False, reason.strip() or None)


def run_scenario(
    scenario: Scenario,
    template: Path | str,
    clock: Clock,
    folder: Path,
    make_model: Callable[[Database], BaseChatModel | Mapping[str, BaseChatModel]],
    customer: Callable[[int, list[AnyMessage]], str | None] | None = None,
    *,
    offline: bool = False,
    seconds: float | None = None,
    on_turn: Callable[[int], None] | None = None,
) -> ScenarioResult:
    """Run one scenario in ``folder`` over copies of ``template`` and judge it.

    ``make_model`` gets the assistant's database (scripted replies resolve their
    placeholders against it); ``customer`` replaces the scripted turns when given;
    ``offline`` says the model's replies are scripted (see ``judge``). ``seconds``
    limits the whole run (every model call in it, the simulated customer's too);
    ``on_turn`` hears the index of each customer message as it is sent.

    ``template`` is a SQLite file, or the URL of a PostgreSQL database nothing is
    connected to: the copies are then databases on the same server, dropped afterwards
    (``db.copies``). The conversation is saved in a SQLite file in ``folder`` either way.

    A provider error, or the time limit, ends the run: the result carries it as its
    ``error``, with the transcript so far, and the run is not judged.
    """
    with database_copies(template, folder, ["agent.sqlite", "gold.sqlite"], clock) as copies:
        agent_db, gold_db = copies
        models = make_model(agent_db)
        checkpoints = folder / "checkpoints.sqlite"
        transcript = Transcript()
        try:
            with time_limit(seconds) if seconds is not None else contextlib.nullcontext():
                converse(
                    scenario,
                    agent_db,
                    lambda: models,
                    checkpoints,
                    customer,
                    transcript=transcript,
                    on_turn=on_turn,
                )
        except Exception as failure:
            if isinstance(failure, ModelProviderError):
                return ScenarioResult(scenario, (), transcript, error=str(failure))
            if is_provider_error(failure):  # the simulated customer's model call
                error = f"(the simulated customer) {describe_provider_error(failure)}"
                return ScenarioResult(scenario, (), transcript, error=error)
            raise
        apply_gold_actions(gold_db, scenario.passenger_id, scenario.gold_actions)
        failures = judge(
            scenario,
            transcript,
            database_problems(agent_db, gold_db),
            build_crew(agent_db).sensitive_names,
            offline=offline,
        )
        return ScenarioResult(scenario, failures, transcript)


def run_offline(
    scenario: Scenario,
    template: Path | str,
    clock: Clock,
    model_factory: Callable[[list[AIMessage]], BaseChatModel],
) -> ScenarioResult:
    """Run ``scenario`` with its scripted replies over a copy of ``template``.

    ``model_factory`` turns the scripted replies into a chat model (the tests pass their
    scripted model), so this module needs no test code.
    """
    built: list[BaseChatModel] = []

    def scripted(db: Database) -> BaseChatModel:
        resolve = Resolver(db)
        counter = iter(range(1, 1_000_000))
        replies = [_reply(resolve, r, counter) for turn in scenario.turns for r in turn.replies]
        built.append(model_factory(replies))
        return built[-1]

    with tempfile.TemporaryDirectory() as folder:
        result = run_scenario(scenario, template, clock, Path(folder), scripted, offline=True)
    leftover = getattr(built[0], "script", []) if built else []
    if leftover:
        failures = (*result.failures, f"{len(leftover)} scripted replies were never used")
        return ScenarioResult(scenario, failures, result.transcript)
    return result


def converse(
    scenario: Scenario,
    db: Database,
    make_model: Callable[[], BaseChatModel | Mapping[str, BaseChatModel]],
    checkpoints: Path,
    customer: Callable[[int, list[AnyMessage]], str | None] | None = None,
    *,
    transcript: Transcript | None = None,
    on_turn: Callable[[int], None] | None = None,
) -> Transcript:
    """Play the scenario's turns (or a simulated customer's) through the real graph.

    With ``resume_after_turn`` set, the graph is rebuilt over the same SQLite checkpoint
    file right after that turn's message, before its approvals are answered, as a new
    process would, and the conversation goes on.

    The conversation is recorded in ``transcript`` (a new one by default), also when a
    model call fails part-way; ``on_turn`` hears the index of each customer message.
    """
    import sqlite3

    from conversations.store import sqlite_checkpointer

    def open_assistant() -> TravelAssistant:
        saver = sqlite_checkpointer(sqlite3.connect(checkpoints, check_same_thread=False))
        assistant = TravelAssistant.build(make_model(), saver, db=db)
        assistant.prepare()  # as chat does: the first policy question does not index it
        return assistant

    assistant = open_assistant()
    thread = Thread(f"eval-{scenario.id}", scenario.passenger_id)
    transcript = transcript if transcript is not None else Transcript()
    decisions = [d for turn in scenario.turns for d in turn.decisions]
    index = 0
    try:
        while True:
            if customer is None:
                if index >= len(scenario.turns):
                    break
                message = scenario.turns[index].customer
            else:
                simulated = customer(index, assistant.messages(thread))
                if simulated is None:
                    break
                message = simulated
            if on_turn is not None:
                on_turn(index)
            started = time.perf_counter()
            list(assistant.send(thread, message))
            if scenario.resume_after_turn is not None and index + 1 == scenario.resume_after_turn:
                # A new process takes over, with any approval of this turn still pending.
                assistant = open_assistant()
            while pending := assistant.pending_actions(thread):
                chosen = {
                    action.tool_call_id: parse_decision(
                        decisions.pop(0) if decisions else "n: no answer"
                    )
                    for action in pending
                }
                transcript.decisions.update(chosen)
                list(assistant.resolve(thread, chosen))
            transcript.latencies.append(time.perf_counter() - started)
            index += 1
    finally:
        # Kept when a model call fails part-way too: what happened so far, and its tokens.
        transcript.messages = assistant.messages(thread)
        transcript.user_info = assistant.user_info(thread)
        transcript.unused_decisions = list(decisions)
    return transcript


# --- reports ------------------------------------------------------------------------------------


def pass_hat_k(results: Mapping[str, Sequence[bool]], k: int) -> float:
    """Return pass^k: the chance that k trials of a scenario all pass, averaged.

    Estimated per scenario from n trials with c successes as C(c, k) / C(n, k).
    """
    from math import comb

    values = []
    for trials in results.values():
        n, c = len(trials), sum(trials)
        if n >= k:
            values.append(comb(c, k) / comb(n, k))
    return statistics.fmean(values) if values else 0.0


def summarise(by_category: Mapping[str, Mapping[str, Sequence[bool]]], k: int) -> list[str]:
    """Return report lines of pass^1 and pass^k per category and overall."""

    def row(name: str, trials: Mapping[str, Sequence[bool]]) -> str:
        one, many = pass_hat_k(trials, 1), pass_hat_k(trials, k)
        return f"{name:<18} {len(trials):>9} {one:>7.2f} {many:>7.2f}"

    lines = [f"{'category':<18} {'scenarios':>9} {'pass^1':>7} {f'pass^{k}':>7}"]
    everything: dict[str, Sequence[bool]] = {}
    for category in sorted(by_category):
        everything.update(by_category[category])
        lines.append(row(category, by_category[category]))
    lines.append(row("all", everything))
    return lines


def trial_record(result: ScenarioResult, trial: int, **context: Any) -> dict[str, Any]:
    """Return one trial as plain data: one line of ``travel-assistant eval --jsonl``.

    ``context`` adds fields that identify the run (its start, the model).
    """
    used = Usage.of(result.transcript.messages)
    latencies = result.transcript.latencies
    return {
        **context,
        "scenario": result.scenario.id,
        "category": result.scenario.category,
        "trial": trial,
        "passed": result.passed,
        "reasons": list(result.reasons),
        "error": result.error,
        "tokens": {"input": used.input_tokens, "output": used.output_tokens},
        "latency": {
            "per_message": [round(seconds, 3) for seconds in latencies],
            "median": round(statistics.median(latencies), 3) if latencies else None,
            "total": round(sum(latencies), 3),
        },
    }


def to_json(result: ScenarioResult, trial: int = 1, **context: Any) -> str:
    """Return a one-line JSON record of a result (see ``trial_record``)."""
    return json.dumps(trial_record(result, trial, **context), ensure_ascii=False)


def select_scenarios(
    scenarios: Sequence[Scenario],
    names: Sequence[str] = (),
    categories: Sequence[str] = (),
) -> list[Scenario]:
    """Return the scenarios named (ids or shell patterns such as ``flight_*``) or in a category.

    With neither, every scenario; with both, those that match both.

    Raises:
        ScenarioError: A name or category matches no scenario.
    """
    chosen = list(scenarios)
    if names:
        unknown = [n for n in names if not any(fnmatch.fnmatchcase(s.id, n) for s in scenarios)]
        if unknown:
            raise ScenarioError(f"No scenario named {sorted(unknown)}.")
        chosen = [s for s in chosen if any(fnmatch.fnmatchcase(s.id, n) for n in names)]
    if categories:
        known = sorted({s.category for s in scenarios})
        unknown = [c for c in categories if c not in known]
        if unknown:
            raise ScenarioError(f"No category {sorted(unknown)}; the categories are {known}.")
        chosen = [s for s in chosen if s.category in categories]
    if not chosen:
        raise ScenarioError("No scenario matches both the names and the categories given.")
    return chosen


# --- live runs --------------------------------------------------------------------------------

CUSTOMER_PROMPT = """\
You play a customer of Meridian Travel talking to its customer-service assistant in a chat.
Your situation and goal:
{instructions}

Write only your next message to the assistant, in plain words, as the customer would. Give
details only when asked. When your goal is reached, or the assistant says it is impossible,
or the conversation goes in circles, reply with exactly {stop}."""
STOP = "###STOP###"
CUSTOMER_OPENING = "(You are connected to the assistant. Write your first message.)"
MAX_CUSTOMER_TURNS = 10
# USD per million input and output tokens, for the cost estimate; --price-in/--price-out
# override them and an unknown model has no estimate.
PRICES_PER_MILLION: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
}


def simulated_customer(
    scenario: Scenario, model: BaseChatModel
) -> Callable[[int, list[AnyMessage]], str | None]:
    """Return a customer played by ``model`` from the scenario's instructions.

    The first message is the scenario's first scripted turn, so every trial starts the
    same way; later ones come from the model, which sees the conversation from the
    customer's side.
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    system = SystemMessage(
        content=CUSTOMER_PROMPT.format(instructions=scenario.instructions, stop=STOP)
    )

    def next_message(index: int, history: list[AnyMessage]) -> str | None:
        if index == 0:
            return scenario.turns[0].customer
        if index >= MAX_CUSTOMER_TURNS:
            return None
        # The customer's own messages are the assistant side of this chat. Strict chat
        # templates want a user message first and the roles alternating, so the chat
        # opens with a cue and messages of one side in a row are merged.
        flipped: list[AnyMessage] = [system, HumanMessage(content=CUSTOMER_OPENING)]
        for message in history:
            text = str(message.content).strip()
            if isinstance(message, HumanMessage) and text:
                turn: AnyMessage = AIMessage(content=text)
            elif isinstance(message, AIMessage) and text:
                turn = HumanMessage(content=text)
            else:
                continue
            if type(flipped[-1]) is type(turn):
                merged = f"{flipped[-1].content}\n\n{text}"
                turn = (
                    AIMessage(content=merged)
                    if isinstance(turn, AIMessage)
                    else HumanMessage(content=merged)
                )
                flipped[-1] = turn
            else:
                flipped.append(turn)
        if isinstance(flipped[-1], AIMessage):  # the assistant has not answered yet
            return None
        reply = str(model.invoke(flipped).content).strip()
        return None if not reply or STOP in reply else reply

    return next_message


@dataclass(frozen=True)
class Usage:
    """Tokens the assistant used in one run."""

    input_tokens: int
    output_tokens: int

    @classmethod
    def of(cls, messages: Sequence[AnyMessage]) -> Usage:
        """Add up the usage the provider reported on the assistant's messages."""
        spent_in = spent_out = 0
        for message in messages:
            usage = getattr(message, "usage_metadata", None) or {}
            spent_in += int(usage.get("input_tokens", 0))
            spent_out += int(usage.get("output_tokens", 0))
        return cls(spent_in, spent_out)

    def cost(self, price: tuple[float, float] | None) -> float | None:
        """Return the cost in USD at ``price`` (per million in, out), if known."""
        if price is None:
            return None
        return (self.input_tokens * price[0] + self.output_tokens * price[1]) / 1_000_000


def percentile(values: Sequence[float], share: float) -> float:
    """Return the ``share`` percentile of ``values`` (nearest rank)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(share * (len(ordered) - 1))))
    return ordered[rank]
