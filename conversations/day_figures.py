"""The day's figures of a contact center, computed from what the store keeps.

What a manager asks every morning: how many conversations and messages, how many the
assistant resolved without a person, how many went to a person and how long they waited,
what became of the actions and the money they moved, what staff checks decided, how the
model fared and what it cost. Everything is read from the conversation store (the
registry, the desk's hand-offs and checks) and the saved conversations; nothing is
counted on the side, so the figures are the same on every worker and after a restart.

A conversation counts on the day (UTC) it started: its messages, actions, tokens and
errors with it, even when it went on past midnight. A hand-off counts on the day it was
asked for, a check on the day the customer's yes asked for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from conversations.desk_checks import CHECKS
from conversations.desk_queue import HANDOFFS
from conversations.events import ASKED_FOR_PERSON_KEY, Thread, cut_cause
from conversations.sessions import SESSIONS
from conversations.timeline import ActionStep

if TYPE_CHECKING:
    from conversations.protocol import Conversations

# The outcomes of an action, as its record names them (``ActionRecord.outcome``).
ACTION_OUTCOMES = ("approved", "failed", "declined", "refused", "not_done")
# What a staff check came to: decided yes or no, withdrawn before a decision, waiting.
CHECK_OUTCOMES = ("approved", "refused", "withdrawn", "waiting")
# Turns the model server failed or that ran out of time (how the history records them).
_MODEL_FAILURES = frozenset({"model", "time_limit"})
# A customer who starts another conversation within this of their last one came back:
# the first was not resolved.
CAME_BACK_WITHIN = timedelta(days=1)


@dataclass
class DayFigures:
    """One day's figures (UTC)."""

    day: date
    conversations: int = 0
    messages: int = 0
    resolved_by_assistant: int = 0
    handed_to_person: int = 0
    waits_minutes: list[float] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)
    charged_cents: int = 0
    refunded_cents: int = 0
    checks: Counter[str] = field(default_factory=Counter)
    model_errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def wait_median(self) -> float | None:
        """Return the median wait (minutes) until a person took a conversation."""
        return _nearest_rank(self.waits_minutes, 0.5)

    @property
    def wait_p90(self) -> float | None:
        """Return the 90th percentile of that wait (minutes)."""
        return _nearest_rank(self.waits_minutes, 0.9)

    def cost(self, price: tuple[float, float] | None) -> float | None:
        """Return what the tokens cost at ``price`` (per million in, out), if known."""
        if price is None:
            return None
        return (self.tokens_in * price[0] + self.tokens_out * price[1]) / 1_000_000

    def as_row(self, price: tuple[float, float] | None = None) -> dict[str, object]:
        """Return the figures as one flat row (the report's JSON and CSV)."""
        cost = self.cost(price)
        return {
            "day": self.day.isoformat(),
            "conversations": self.conversations,
            "messages": self.messages,
            "resolved_by_assistant": self.resolved_by_assistant,
            "handed_to_person": self.handed_to_person,
            "wait_minutes_median": _rounded(self.wait_median),
            "wait_minutes_p90": _rounded(self.wait_p90),
            **{f"actions_{o}": self.actions[o] for o in ACTION_OUTCOMES},
            "charged_cents": self.charged_cents,
            "refunded_cents": self.refunded_cents,
            **{f"checks_{o}": self.checks[o] for o in CHECK_OUTCOMES},
            "model_errors": self.model_errors,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost": round(cost, 4) if cost is not None else None,
        }


def day_figures(conversations: Conversations, since: date, until: date) -> list[DayFigures]:
    """Return the figures of every day from ``since`` to ``until`` (both included).

    Days without a conversation are there too, with zeros: a chart shows them. An end
    before the start gives no day.
    """
    start = datetime.combine(since, time(), UTC)
    end = datetime.combine(until + timedelta(days=1), time(), UTC)
    every = [since + timedelta(days=n) for n in range((until - since).days + 1)]
    days = {day: DayFigures(day) for day in every}
    threads = _conversations(conversations, start, end)
    handed = _handoffs(conversations, start, end)
    checked = _checked_threads(conversations)
    for row in threads:
        figures = days[_day(row.created_at)]
        thread = Thread(row.thread_id, row.passenger_id)
        conversation = conversations.get(thread)
        messages = conversation.assistant.messages(thread)
        figures.conversations += 1
        wrote = sum(1 for m in messages if _customer_wrote(m))
        figures.messages += wrote
        figures.model_errors += sum(1 for m in messages if cut_cause(m) in _MODEL_FAILURES)
        for message in messages:
            if isinstance(message, AIMessage) and message.usage_metadata:
                figures.tokens_in += int(message.usage_metadata.get("input_tokens", 0))
                figures.tokens_out += int(message.usage_metadata.get("output_tokens", 0))
        for step in conversation.timeline():
            if not isinstance(step, ActionStep):
                continue
            figures.actions[step.record.outcome] += 1
            if step.moved and step.amount is not None:
                if step.amount.kind == "refund":
                    figures.refunded_cents += step.amount.cents
                else:
                    figures.charged_cents += step.amount.cents
        unresolved = bool(conversation.assistant.pending_actions(thread))
        # Resolved alone: the customer wrote, no person and no staff check took part,
        # nothing is left pending, and they did not come back soon in a new one.
        alone = wrote and row.thread_id not in handed.ever and row.thread_id not in checked
        if alone and not unresolved and not _came_back(conversations, row):
            figures.resolved_by_assistant += 1
    for request in handed.rows:
        asked = days[_day(request.requested_at)]
        asked.handed_to_person += 1
        if request.taken_at is not None:
            waited = request.taken_at - request.requested_at
            asked.waits_minutes.append(waited.total_seconds() / 60)
    for check_day, outcome in _checks(conversations, start, end):
        days[check_day].checks[outcome] += 1
    return list(days.values())


# --- reading the store ------------------------------------------------------------------


@dataclass(frozen=True)
class _Started:
    thread_id: str
    passenger_id: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class _Request:
    thread_id: str
    requested_at: datetime
    taken_at: datetime | None


@dataclass(frozen=True)
class _Handed:
    rows: list[_Request]
    ever: frozenset[str]


def _conversations(conversations: Conversations, start: datetime, end: datetime) -> list[_Started]:
    query = (
        sa.select(
            SESSIONS.c.thread_id,
            SESSIONS.c.passenger_id,
            SESSIONS.c.created_at,
            SESSIONS.c.updated_at,
        )
        .where(SESSIONS.c.created_at >= start, SESSIONS.c.created_at < end)
        .order_by(SESSIONS.c.created_at)
    )
    with conversations.registry.engine.connect() as connection:
        return [
            _Started(r.thread_id, r.passenger_id, _utc(r.created_at), _utc(r.updated_at))
            for r in connection.execute(query)
        ]


def _came_back(conversations: Conversations, started: _Started) -> bool:
    """Tell whether the passenger started another conversation soon after this one."""
    query = sa.select(sa.func.count()).where(
        SESSIONS.c.passenger_id == started.passenger_id,
        SESSIONS.c.thread_id != started.thread_id,
        SESSIONS.c.created_at > started.created_at,
        SESSIONS.c.created_at <= started.updated_at + CAME_BACK_WITHIN,
    )
    with conversations.registry.engine.connect() as connection:
        return bool(connection.execute(query).scalar())


def _handoffs(conversations: Conversations, start: datetime, end: datetime) -> _Handed:
    columns = (HANDOFFS.c.thread_id, HANDOFFS.c.requested_at, HANDOFFS.c.taken_at)
    query = sa.select(*columns).where(
        HANDOFFS.c.requested_at >= start, HANDOFFS.c.requested_at < end
    )
    ever = sa.select(HANDOFFS.c.thread_id).distinct()
    with conversations.desk.engine.connect() as connection:
        rows = [
            _Request(r.thread_id, _utc(r.requested_at), _utc(r.taken_at) if r.taken_at else None)
            for r in connection.execute(query)
        ]
        threads = frozenset(r.thread_id for r in connection.execute(ever))
    return _Handed(rows, threads)


def _checked_threads(conversations: Conversations) -> frozenset[str]:
    """Return the conversations a member of staff was asked to check an action of."""
    with conversations.desk.engine.connect() as connection:
        query = sa.select(CHECKS.c.thread_id).distinct()
        return frozenset(r.thread_id for r in connection.execute(query))


def _checks(
    conversations: Conversations, start: datetime, end: datetime
) -> Iterable[tuple[date, str]]:
    """Yield each check asked in the span: its day and what it came to.

    A check applied is ``used`` whichever way staff decided: the action's own answer in
    the conversation says which (a staff no declines it).
    """
    query = sa.select(
        CHECKS.c.thread_id,
        CHECKS.c.passenger_id,
        CHECKS.c.tool_call_id,
        CHECKS.c.asked_at,
        CHECKS.c.status,
    ).where(CHECKS.c.asked_at >= start, CHECKS.c.asked_at < end)
    with conversations.desk.engine.connect() as connection:
        rows = list(connection.execute(query))
    outcomes: dict[str, Mapping[str, str]] = {}
    for row in rows:
        status = str(row.status)
        if status in ("used", "approved", "refused"):
            if row.thread_id not in outcomes:
                outcomes[row.thread_id] = _checked_outcomes(
                    conversations, Thread(row.thread_id, row.passenger_id)
                )
            status = outcomes[row.thread_id].get(row.tool_call_id, status)
            if status == "used":  # its answer is gone (the conversation was deleted)
                continue
        yield _day(_utc(row.asked_at)), status


def _checked_outcomes(conversations: Conversations, thread: Thread) -> dict[str, str]:
    """Return, by tool call, whether staff approved or refused each checked action."""
    found: dict[str, str] = {}
    for step in conversations.get(thread).timeline():
        if isinstance(step, ActionStep) and step.record.checked_by:
            approved = step.record.outcome in ("approved", "failed")
            found[step.record.tool_call_id] = "approved" if approved else "refused"
    return found


# --- small helpers ------------------------------------------------------------------------


def _customer_wrote(message: AnyMessage) -> bool:
    return isinstance(message, HumanMessage) and not message.additional_kwargs.get(
        ASKED_FOR_PERSON_KEY
    )


def _day(moment: datetime) -> date:
    return _utc(moment).date()


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _nearest_rank(values: Sequence[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * (len(ordered) - 1))))]


def _rounded(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None
