"""Scenarios: reading them from TOML, choosing them, and resolving their placeholders."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from sqlalchemy import select

from assistants.approvals import NotRun
from assistants.specialists import assistant_names
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


# What a step at the desk does (``desk`` in a turn): the customer's side first, then the
# staff's. The protocol's operation behind each is named in ``DeskStep``.
DeskAction = Literal[
    "ask_for_person",
    "withdraw_request",
    "take",
    "write",
    "hand_back",
    "propose",
    "approve",
    "refuse",
]
DESK_ACTIONS: tuple[DeskAction, ...] = get_args(DeskAction)
# The keys each step may have beside its action's; ``refused`` is allowed on every one.
_STEP_KEYS: dict[DeskAction, frozenset[str]] = {
    "ask_for_person": frozenset(),
    "withdraw_request": frozenset(),
    "take": frozenset(),
    "write": frozenset({"by"}),
    "hand_back": frozenset({"by", "close"}),
    "propose": frozenset({"by", "args"}),
    "approve": frozenset(),
    "refuse": frozenset({"reason"}),
}
# How an action put to the customer can end (``action_ends``): done, failed (it ran and
# its tool answered with an error), or one of the reasons a call is not run.
ACTION_ENDS: tuple[str, ...] = ("done", "failed", *get_args(NotRun))
# ``answered_by``: an assistant, or nobody (the message waited for a person).
NOBODY = "nobody"


@dataclass(frozen=True)
class DeskStep:
    """One thing a person does between the customer's turns (a turn's ``desk`` list).

    Each runs through the conversation protocol, as the desk, the web chat and the
    service run it:

    - ``{ ask_for_person = "REASON" }``: the customer asks for a person (``/agent``, the
      web chat's button): ``Conversation.ask_for_person``;
    - ``{ withdraw_request = true }``: the customer leaves the queue:
      ``withdraw_person_request``;
    - ``{ take = "NAME" }``: a member of staff takes the conversation: ``take``;
    - ``{ write = "TEXT" }``: they write to the customer: ``person_says``;
    - ``{ hand_back = "NOTE", close = false }``: they hand it back with a note for the
      model (or close it): ``hand_back``;
    - ``{ propose = "TOOL", args = {...} }``: they put an action to the customer:
      ``person_proposes``;
    - ``{ approve = "NAME" }``, ``{ refuse = "NAME", reason = "WHY" }``: a member of
      staff decides the check (a second approval) waiting in the conversation:
      ``decide_check``, then ``apply_checked`` after the last decision.

    ``by`` (write, hand back, propose) is the member of staff; left out, the one who
    took the conversation last in the scenario. ``refused``: the desk must refuse the
    step, with a message holding these words (any case); without it the step must
    succeed. Texts and ``args`` may hold placeholders (``{date:10}``).
    """

    action: DeskAction
    by: str = ""
    text: str = ""
    close: bool = False
    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    refused: str | None = None

    def __str__(self) -> str:
        """Return the step in a few words, for the judge's verdicts."""
        if self.action == "ask_for_person":
            return "the customer asks for a person"
        if self.action == "withdraw_request":
            return "the customer withdraws their request for a person"
        done = {
            "take": "takes the conversation",
            "write": "writes to the customer",
            "hand_back": "closes the conversation" if self.close else "hands the conversation back",
            "propose": f"proposes {self.tool}",
            "approve": "approves the check",
            "refuse": "refuses the check",
        }
        return f"{self.by} {done[self.action]}"


@dataclass(frozen=True)
class Turn:
    """One customer message, the scripted model replies, and the approval answers.

    ``customer`` is ``None`` in a turn of the people at the desk only (its ``desk``
    steps). ``staff_checks`` are a member of staff's answers to the second-approval
    checks this turn's approved actions wait for (``second_approval_above``), in the
    order asked. ``desk`` are what people do once the message was answered (or kept for
    a person), before ``decisions`` answer the actions then waiting. ``answered_by``:
    the assistant that must answer the message first, or ``"nobody"`` (it waits for a
    person); empty, not judged.
    """

    customer: str | None
    replies: tuple[dict[str, Any], ...] = ()
    decisions: tuple[str, ...] = ()
    staff_checks: tuple[StaffCheck, ...] = ()
    desk: tuple[DeskStep, ...] = ()
    answered_by: str = ""


# How a hand-off can end: waiting in the queue, held by a person, handed back or closed
# by them, or withdrawn by the customer before anyone took it.
HandoffEnd = Literal["waiting", "held", "returned", "closed", "withdrawn"]
HANDOFF_ENDS: tuple[HandoffEnd, ...] = get_args(HandoffEnd)


@dataclass(frozen=True)
class ExpectedHandoff:
    """The conversation must be handed to a person, and end so (``[handoff]``).

    ``reason_mentions``: words of which the hand-off's reason must hold at least one (any
    case); empty, any reason will do, as long as there is one. ``ends``: how the last
    hand-off must end; by default it waits in the desk's queue.
    """

    reason_mentions: tuple[str, ...] = ()
    ends: HandoffEnd = "waiting"


@dataclass(frozen=True)
class Scenario:
    """One conversation to evaluate.

    ``handoff`` is ``None`` when the conversation must not be handed to a person.
    ``second_approval_above`` (cents): an action the customer approves that moves more
    waits for a member of staff's check (the turns' ``staff_checks`` or ``desk`` steps
    answer them); ``None``, as by default, no action is checked. ``action_ends``: every
    action put to the customer, in order, as ``"TOOL: END"`` (an end of
    ``ACTION_ENDS``); empty, not judged.
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
    action_ends: tuple[str, ...] = ()
    path: Path | None = None


def load_scenario(path: Path) -> Scenario:
    """Read one scenario file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        turns = _turns(data["turns"])
        above = data.get("second_approval_above")
        if above is None and any(turn.staff_checks for turn in turns):
            raise ScenarioError(
                "staff_checks need second_approval_above: without it no action waits for staff"
            )
        if above is None and any(
            step.action in ("approve", "refuse") for turn in turns for step in turn.desk
        ):
            raise ScenarioError(
                "approve and refuse steps need second_approval_above: without it no action "
                "waits for staff"
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
            action_ends=tuple(_action_end(e) for e in _strings(data, "action_ends")),
            path=path,
        )
    except (KeyError, TypeError, ValueError, tomllib.TOMLDecodeError) as error:
        raise ScenarioError(f"{path}: {error}") from error


def _turns(tables: Any) -> tuple[Turn, ...]:
    """Read the ``[[turns]]`` of a scenario.

    Raises:
        TypeError: A turn has neither a customer message nor desk steps, the first has
            no customer message, or a step or ``answered_by`` is malformed.
    """
    turns = []
    taker = ""  # who took the conversation last: the ``by`` of steps that leave it out
    for index, table in enumerate(tables):
        steps = []
        for step in table.get("desk", ()):
            parsed = _desk_step(step, taker)
            taker = parsed.by if parsed.action == "take" else taker
            steps.append(parsed)
        customer = table.get("customer")
        if customer is None and not steps:
            raise TypeError(f"turn {index + 1} has neither a customer message nor desk steps")
        if customer is None and index == 0:
            raise TypeError("the first turn needs a customer message: they start the conversation")
        answered_by = str(table.get("answered_by", ""))
        if answered_by and customer is None:
            raise TypeError(f"turn {index + 1} has answered_by but no customer message")
        if answered_by and answered_by not in (*assistant_names(), NOBODY):
            known = ", ".join((*assistant_names(), NOBODY))
            raise TypeError(f"answered_by is one of {known}, not {answered_by!r}")
        turns.append(
            Turn(
                customer=None if customer is None else str(customer),
                replies=tuple(table.get("replies", ())),
                decisions=tuple(str(d) for d in table.get("decisions", ())),
                staff_checks=tuple(parse_staff_check(c) for c in _strings(table, "staff_checks")),
                desk=tuple(steps),
                answered_by=answered_by,
            )
        )
    return tuple(turns)


def _desk_step(table: Any, taker: str) -> DeskStep:
    """Read one step of a turn's ``desk`` list; ``taker`` is who took the conversation last.

    Raises:
        TypeError: It is not a table with exactly one action, names a key its action does
            not take, or a value of the wrong kind.
    """
    if not isinstance(table, dict):
        raise TypeError(f'a desk step is a table such as {{ take = "Ana Lima" }}, not {table!r}')
    actions = [key for key in table if key in DESK_ACTIONS]
    if len(actions) != 1:
        raise TypeError(
            f"a desk step does one of {', '.join(DESK_ACTIONS)}; this one does {actions or 'none'}"
        )
    action: DeskAction = actions[0]
    unknown = sorted(set(table) - {action, "refused"} - _STEP_KEYS[action])
    if unknown:
        raise TypeError(f"a {action} step does not take {unknown}")
    value = table[action]
    refused = table.get("refused")
    if refused is not None and not (isinstance(refused, str) and refused.strip()):
        raise TypeError("refused holds the words the desk's refusal must say")
    if action == "withdraw_request":
        if value is not True:
            raise TypeError("withdraw_request = true")
        return DeskStep(action, refused=refused)
    if not isinstance(value, str):
        raise TypeError(f"{action} takes a string, not {value!r}")
    if action == "ask_for_person":
        return DeskStep(action, text=value, refused=refused)
    if action in ("take", "approve", "refuse"):
        reason = table.get("reason", "")
        if not value.strip():
            raise TypeError(f"{action} names the member of staff")
        if action == "refuse" and not (isinstance(reason, str) and reason.strip()):
            raise TypeError("a refuse step says why (reason), as staff must")
        return DeskStep(action, by=value, text=str(reason), refused=refused)
    by = table.get("by", taker)
    if not (isinstance(by, str) and by.strip()):
        raise TypeError(f"a {action} step needs by: nobody took the conversation before it")
    if action == "write" and not value.strip():
        raise TypeError("a write step writes something")
    if action == "propose":
        args = table.get("args", {})
        if not isinstance(args, dict):
            raise TypeError("a propose step's args are a table")
        return DeskStep(action, by=by, tool=value, args=args, refused=refused)
    close = table.get("close", False)
    if not isinstance(close, bool):
        raise TypeError("close is true or false")
    return DeskStep(action, by=by, text=value, close=close, refused=refused)


def _action_end(text: str) -> str:
    """Read ``"TOOL: END"`` of ``action_ends`` (``END`` one of ``ACTION_ENDS``), tidied.

    Raises:
        TypeError: It is not so.
    """
    tool, colon, end = text.partition(":")
    if not colon or not tool.strip() or end.strip() not in ACTION_ENDS:
        raise TypeError(
            f"action_ends are 'TOOL: END', END one of {', '.join(ACTION_ENDS)}; not {text!r}"
        )
    return f"{tool.strip()}: {end.strip()}"


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
        TypeError: It is not a table, names an unknown key, its words are not strings, or
            ``ends`` is not one of ``HANDOFF_ENDS``.
    """
    if table is None:
        return None
    if not isinstance(table, dict):
        raise TypeError("handoff must be a table: [handoff], with reason_mentions optional")
    unknown = sorted(set(table) - {"reason_mentions", "ends"})
    if unknown:
        raise TypeError(f"[handoff] takes reason_mentions only, and ends; not {unknown}")
    mentions = table.get("reason_mentions", [])
    if not isinstance(mentions, list) or not all(isinstance(m, str) and m for m in mentions):
        raise TypeError("[handoff] reason_mentions must be a list of words")
    ends = table.get("ends", "waiting")
    if ends not in HANDOFF_ENDS:
        raise TypeError(f"[handoff] ends is one of {', '.join(HANDOFF_ENDS)}, not {ends!r}")
    return ExpectedHandoff(reason_mentions=tuple(mentions), ends=ends)


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
