"""What every tool shares: the passenger, reads, once-only writes, errors and previews.

The passenger a tool acts for comes only from the run's config
(``config["configurable"]["passenger_id"]``), never from an argument the model fills in.
Writes run in one transaction through ``db.writes.run_once_in_transaction``, keyed by the
conversation (``config["configurable"]["thread_id"]``) and the tool call id, with a
digest of the arguments stored beside the result: a write repeated for the same call
takes effect once and answers with the stored result; the same id with other arguments
is refused. A direct invocation without a thread id is keyed by the call id alone, among
the other calls without one.

Arguments are checked at the edge: the signatures bound them (``RowId``,
``SearchText``), so the tool node refuses an id no id column can hold before the tool
runs, and ``db.values`` checks the rest before any SQL. ``tool_error_message`` is the one
handler that turns a business failure or malformed arguments into the error text the
model reads, never longer than ``MAX_ERROR_CHARS``; the graph's tool nodes and the tool
tests use it alike. Each domain module declares, beside its sensitive tools, a
``Preview`` per tool: the quote that tells the customer what the call would do before
they approve it; its quoters read the arguments with ``int_arg`` and ``str_arg``, which
accept exactly what the signatures accept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Protocol, TypeVar, Union

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolInvocationError
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from sqlalchemy.orm import Session

from db import rules
from db.engine import Database
from db.errors import InvalidInputError, MissingPassengerError, TravelError
from db.values import (
    MAX_QUESTION_CHARS,
    MAX_ROW_ID,
    MAX_SEARCH_CHARS,
    MAX_TICKET_CHARS,
    AmountKind,
    plain_text,
    shown,
)
from db.writes import run_once_in_transaction

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# The most characters of an error the model or the customer reads.
MAX_ERROR_CHARS = 300
# The most characters of one argument line in a preview.
_ARGUMENT_LINE_CHARS = 100
# The longest passenger id a conversation may be configured with (the column holds 20).
MAX_PASSENGER_ID_CHARS = 40

# Argument types of the tools' signatures. The model reads their bounds in the tool
# schema, and the tool node refuses a value outside them before the tool runs.
RowId = Annotated[int, Field(ge=1, le=MAX_ROW_ID)]
SearchText = Annotated[str, Field(max_length=MAX_SEARCH_CHARS)]
Question = Annotated[str, Field(max_length=MAX_QUESTION_CHARS)]
TicketNumber = Annotated[str, Field(max_length=MAX_TICKET_CHARS)]
_ROW_ID: TypeAdapter[int] = TypeAdapter(RowId)

# The numbers tool descriptions quote, taken from the one table of rules so the prompt
# text never disagrees with what the tools enforce.
RULE_TEXT: dict[str, int] = {
    "change_hours": rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CHANGE,
    "cancel_hours": rules.MIN_HOURS_BEFORE_DEPARTURE_FOR_CANCEL,
    "free_hours": rules.FREE_WINDOW_HOURS_AFTER_BOOKING,
    "hotel_free_hours": rules.HOTEL_FREE_CANCEL_HOURS,
    "car_free_hours": rules.CAR_FREE_CANCEL_HOURS,
    "excursion_free_hours": rules.EXCURSION_FREE_CANCEL_HOURS,
    "max_hotel_nights": rules.MAX_HOTEL_NIGHTS,
    "max_car_days": rules.MAX_CAR_RENTAL_DAYS,
    "max_days_ahead": rules.MAX_DAYS_AHEAD,
}


def with_rules(function: F) -> F:
    """Fill ``{placeholders}`` of a tool's docstring with the numbers of ``db.rules``.

    Apply it below ``@tool`` so the description the model reads is already filled in.
    """
    if function.__doc__:
        function.__doc__ = function.__doc__.format(**RULE_TEXT)
    return function


def passenger_id_from(config: RunnableConfig | None) -> str:
    """Return the passenger id configured for this conversation.

    Args:
        config: The run's config, as injected into a tool or node.

    Returns:
        The passenger id, stripped of surrounding spaces.

    Raises:
        MissingPassengerError: The config carries no passenger id.
    """
    configurable = (config or {}).get("configurable") or {}
    value = configurable.get("passenger_id")
    if value is None or not str(value).strip():
        raise MissingPassengerError(
            "No passenger id is configured for this conversation, so no booking can be "
            "looked up or changed. Ask the customer to restart the assistant with their "
            "passenger id (travel-assistant chat --passenger-id ID)."
        )
    return plain_text(str(value), "The configured passenger id", MAX_PASSENGER_ID_CHARS)


def thread_id_from(config: RunnableConfig | None) -> str | None:
    """Return the id of the conversation this run belongs to, or ``None`` without one.

    Args:
        config: The run's config, as injected into a tool or node.
    """
    configurable = (config or {}).get("configurable") or {}
    value = configurable.get("thread_id")
    return None if value is None or str(value) == "" else str(value)


def read(db: Database, query: Callable[[Session, datetime], T]) -> T:
    """Run a read-only query with a fresh session and the database clock's now.

    Args:
        db: The database.
        query: Called with the session and now.

    Returns:
        What ``query`` returns.
    """
    with db.session() as session:
        return query(session, db.clock())


def write_once(
    db: Database,
    *,
    config: RunnableConfig | None,
    tool_name: str,
    tool_call_id: str | None,
    passenger_id: str,
    args: Mapping[str, Any],
    write: Callable[[Session, datetime], dict[str, Any]],
) -> dict[str, Any]:
    """Run a write in one transaction, at most once per tool call of a conversation.

    Args:
        db: The database.
        config: The run's config: its ``thread_id`` names the conversation.
        tool_name: The tool's name, stored with the result.
        tool_call_id: The injected tool call id (``None`` when invoked directly).
        passenger_id: The configured passenger.
        args: The call's arguments as the tool received them; a repeat of the call with
            other arguments is refused.
        write: Called with the session and now; returns the JSON-able result.

    Returns:
        The write's result, or the stored result of the earlier run of this tool call.

    Raises:
        RuleViolationError: The call id was already used in this conversation for
            another tool, passenger or arguments.
    """
    return run_once_in_transaction(
        db,
        thread_id=thread_id_from(config),
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        passenger_id=passenger_id,
        args=args,
        write=write,
    )


def shorten(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Return ``text`` cut to ``limit`` characters, ending with an ellipsis when cut."""
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def tool_error_message(error: TravelError | ToolInvocationError) -> str:
    """Turn a business failure or malformed arguments into the text the model reads.

    ``ToolNode(handle_tool_errors=tool_error_message)`` answers these two with an error
    ToolMessage; any other exception is a bug and propagates. The text never quotes the
    arguments the model sent in full and never exceeds ``MAX_ERROR_CHARS``.
    """
    if isinstance(error, ToolInvocationError):
        return shorten(f"Error: {_invalid_arguments(error)}")
    return shorten(f"Error: {error}")


def _invalid_arguments(error: ToolInvocationError) -> str:
    """Say which arguments are wrong and why, without echoing their values.

    The tool node's own message repeats every argument, however long; pydantic's error
    details name the argument and the rule it breaks.
    """
    details = error.filtered_errors
    if details is None:
        details = error.source.errors(include_url=False, include_input=False)
    return (
        f"invalid arguments for {error.tool_name}: {argument_problems(details) or 'not valid'}. "
        "Fix them and call the tool again."
    )


def validate_strictly(schema: type[BaseModel], args: Mapping[str, Any]) -> None:
    """Check ``args`` against ``schema`` as JSON in pydantic's strict mode.

    For arguments a person gives (a staff proposal, an edit of a pending action): a date
    may be its ISO text, but ``true`` is no id (lax mode takes it as 1), nor is "3".

    Raises:
        ValidationError: An argument is missing, unknown to the schema's types, or loose.
    """
    schema.model_validate_json(json.dumps(dict(args), default=str), strict=True)


def argument_problems(details: Iterable[ErrorDetails], whole: str = "arguments") -> str:
    """Return pydantic's error ``details`` on one line: each argument (or ``whole``) and why."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or whole}: {e['msg']}" for e in details)


# ToolNode infers which exceptions the handler takes from its annotation, and cannot read
# the string annotations this module's ``from __future__ import annotations`` produces.
tool_error_message.__annotations__ = {
    "error": Union[TravelError, ToolInvocationError],  # noqa: UP007 - ToolNode checks for Union
    "return": str,
}


def storable_tool_calls(calls: Sequence[ToolCall]) -> list[ToolCall]:
    """Return ``calls`` with every integer past signed 64 bits turned into its digits.

    The model's arguments are stored with the conversation, and the checkpointer cannot
    store such an integer (msgpack): the whole step would fail and the conversation with
    it. As text the value still reaches the tool, which refuses it with a short error.
    """
    return [{**c, "args": _storable(c["args"])} for c in calls]


def _storable(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, Mapping):
        return {key: _storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(item) for item in value]
    return value


def tool_node(tools: Sequence[BaseTool]) -> ToolNode:
    """Return a ``ToolNode`` over ``tools`` that answers failures with ``tool_error_message``."""
    return ToolNode(list(tools), handle_tool_errors=tool_error_message)


def run_calls(
    node: ToolNode, calls: Sequence[ToolCall], config: RunnableConfig
) -> list[ToolMessage]:
    """Run ``calls`` through ``node`` and return their answers."""
    if not calls:
        return []
    result = node.invoke({"messages": [AIMessage(content="", tool_calls=list(calls))]}, config)
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


class Quote(Protocol):
    """What a write would do, computed without doing it (``db`` quote objects).

    The amount is given twice, for two readers: in words as the last of ``lines``, for
    the customer, and as numbers (``amount_kind``, ``amount_cents``), for callers, which
    never read it back from the words.
    """

    def lines(self) -> list[str]:
        """Return the lines shown to the customer: before -> after, prices, amount.

        The last line is the amount ("To pay: EUR 75.00", "Refund: EUR 40.00").
        """

    @property
    def amount_kind(self) -> AmountKind:
        """Return whether the customer pays ``amount_cents`` or is refunded it."""

    @property
    def amount_cents(self) -> int:
        """Return the amount of the last line in cents: never negative, 0 when free."""


# A quoter reads the call's arguments as the model gave them and prices the call at now.
Quoter = Callable[[Session, str, Mapping[str, Any], datetime], Quote]


@dataclass(frozen=True)
class Preview:
    """How to preview one sensitive tool for the customer's approval.

    Attributes:
        title: A short title, e.g. ``"Change flight"``.
        quote: Computes the quote from a session, the passenger id, the call's arguments
            and now; raises a ``TravelError`` when the call would be refused.
    """

    title: str
    quote: Quoter


def argument_line(name: str, value: Any) -> str:
    """Show one argument of a call as ``name: value``, a long value cut with an ellipsis."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{name}: {shown(value)}"
    return shorten(f"{name}: {value}", _ARGUMENT_LINE_CHARS)


def int_arg(args: Mapping[str, Any], name: str) -> int:
    """Return the required id argument ``name`` of a pending call.

    Accepts what the tools' ``RowId`` arguments accept (the same pydantic rules), so a
    preview and the call it previews agree on what is valid.
    """
    value = _required(args, name)
    try:
        return _ROW_ID.validate_python(value)
    except ValidationError:
        raise InvalidInputError(
            f"{name} must be a whole number from 1 to {MAX_ROW_ID}; got {shown(value)}."
        ) from None


def str_arg(args: Mapping[str, Any], name: str) -> str:
    """Return the required text argument ``name`` of a pending call."""
    return _text(_required(args, name), name)


def _required(args: Mapping[str, Any], name: str) -> Any:
    value = args.get(name)
    if value is None or (isinstance(value, str) and value == ""):
        raise InvalidInputError(f"The argument {name} is missing.")
    return value


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be text; got {shown(value)}.")
    return value


def optional_arg(args: Mapping[str, Any], name: str) -> str | None:
    """Return the optional text argument ``name`` of a pending call, or ``None``."""
    value = args.get(name)
    if value is None or (isinstance(value, str) and value == ""):
        return None
    return _text(value, name)


@dataclass(frozen=True)
class DomainTools:
    """The tools of one specialist's domain, split by whether they need approval.

    Attributes:
        safe: Tools that run without asking.
        sensitive: Tools that run only after the customer approves the call.
        previews: For each sensitive tool's name, how its call is shown for approval.
    """

    safe: tuple[BaseTool, ...]
    sensitive: tuple[BaseTool, ...]
    previews: Mapping[str, Preview] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sensitive = {t.name for t in self.sensitive}
        clash = sensitive & {t.name for t in self.safe}
        if clash:
            raise ValueError(f"Tools both safe and sensitive: {sorted(clash)}.")
        unpreviewed = sensitive - set(self.previews)
        if unpreviewed:
            raise ValueError(
                f"Sensitive tools without a preview: {sorted(unpreviewed)}; declare a "
                "Preview for each, so the customer sees what they approve."
            )

    def tool(self, name: str) -> BaseTool:
        """Return the tool called ``name``."""
        for item in (*self.safe, *self.sensitive):
            if item.name == name:
                return item
        raise KeyError(name)
