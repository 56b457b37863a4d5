"""Scenarios: reading them from TOML, choosing them, and resolving their placeholders."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from db import reservations
from db.domains import RESERVATION_KINDS
from db.engine import Database, packaged_data_dir
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_TICKET_NO
from db.models import Flight, TicketFlight
from db.rules import parse_money

SCENARIO_DIR = packaged_data_dir() / "scenarios"
# The seed of the database the scenarios were written against (the tests use it too):
# fares and amounts in their expected facts come from it.
SCENARIO_SEED = 7
# Tables that record how a write happened rather than what the customer owns.
# Columns whose values depend on when a write ran, not on what it did.
_PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]*))?\}")
# ``{hotel:NAME}``, ``{car:NAME/TIER}``, ...: one per reservation kind, declared with it.
_RESERVATION_PLACEHOLDERS = {kind.placeholder: kind for kind in RESERVATION_KINDS}


class ScenarioError(ValueError):
    """A scenario file is malformed or names something that does not exist."""


# --- scenarios -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StaffCheck:
    """A member of staff's scripted answer to a second-approval check (``staff_checks``).

    Written ``"approve"`` or ``"refuse: the reason"`` in a scenario file: a refusal needs
    its reason, which the assistant is told.
    """

    approved: bool
    reason: str = ""

    def __str__(self) -> str:
        """Return the answer as a scenario file writes it."""
        return "approve" if self.approved else f"refuse: {self.reason}"


def parse_staff_check(text: str) -> StaffCheck:
    """Read ``"approve"`` or ``"refuse: REASON"`` (any case) as a staff answer.

    Raises:
        ScenarioError: Anything else, or a refusal without its reason.
    """
    head, colon, reason = str(text).partition(":")
    word = head.strip().lower()
    if word == "approve" and not colon:
        return StaffCheck(True)
    if word == "refuse" and reason.strip():
        return StaffCheck(False, reason.strip())
    raise ScenarioError(
        f"staff_checks takes 'approve' or 'refuse: the reason' (a refusal says why), not {text!r}"
    )


@dataclass(frozen=True)
class Turn:
    """One customer message, the scripted model replies, and the approval answers.

    ``staff_checks`` are a member of staff's answers to the second-approval checks this
    turn's approved actions wait for (``second_approval_above``), in the order asked.
    """

    customer: str
    replies: tuple[dict[str, Any], ...] = ()
    decisions: tuple[str, ...] = ()
    staff_checks: tuple[StaffCheck, ...] = ()


@dataclass(frozen=True)
class ExpectedHandoff:
    """The conversation must end waiting in the desk's queue for a person (``[handoff]``).

    ``reason_mentions``: words of which the hand-off's reason must hold at least one (any
    case); empty, any reason will do, as long as there is one.
    """

    reason_mentions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """One conversation to evaluate.

    ``handoff`` is ``None`` when the conversation must not be handed to a person.
    ``second_approval_above`` (cents): an action the customer approves that moves more
    waits for a member of staff's check (the turns' ``staff_checks`` answer them);
    ``None``, as by default, no action is checked.
    """

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
    handoff: ExpectedHandoff | None = None
    second_approval_above: int | None = None
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
                staff_checks=tuple(parse_staff_check(c) for c in _strings(t, "staff_checks")),
            )
            for t in data["turns"]
        )
        above = data.get("second_approval_above")
        if above is None and any(turn.staff_checks for turn in turns):
            raise ScenarioError(
                "staff_checks need second_approval_above: without it no action waits for staff"
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
            handoff=_expected_handoff(data.get("handoff")),
            second_approval_above=None if above is None else parse_money(str(above)),
            path=path,
        )
    except (KeyError, TypeError, ValueError, tomllib.TOMLDecodeError) as error:
        raise ScenarioError(f"{path}: {error}") from error


def _strings(table: dict[str, Any], key: str) -> list[str]:
    """Return ``table[key]``, a list of strings (empty when absent).

    Raises:
        TypeError: It is not a list of strings.
    """
    found = table.get(key, [])
    if not isinstance(found, list) or not all(isinstance(item, str) for item in found):
        raise TypeError(f"{key} must be a list of strings")
    return found


def _expected_handoff(table: Any) -> ExpectedHandoff | None:
    """Read the ``[handoff]`` table of a scenario (absent: no hand-off expected).

    Raises:
        TypeError: It is not a table, names an unknown key, or its words are not strings.
    """
    if table is None:
        return None
    if not isinstance(table, dict):
        raise TypeError("handoff must be a table: [handoff], with reason_mentions optional")
    unknown = sorted(set(table) - {"reason_mentions"})
    if unknown:
        raise TypeError(f"[handoff] takes reason_mentions only, not {unknown}")
    mentions = table.get("reason_mentions", [])
    if not isinstance(mentions, list) or not all(isinstance(m, str) and m for m in mentions):
        raise TypeError("[handoff] reason_mentions must be a list of words")
    return ExpectedHandoff(reason_mentions=tuple(mentions))


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
