"""The tools of any partner reservation kind, built from its declaration.

A reservation kind (``db.reservation_kind.ReservationKind``) has four tools: a search (safe) and
book, update and cancel (sensitive, each with the ``Preview`` the customer approves).
What tells one kind's tools from another's is its ``ReservationTools``: the search
tool's name and, for each tool, the docstring the model reads (a Google docstring:
``@tool(parse_docstring=True)`` turns it into the tool's description and argument
descriptions, so review it as prompt text; ``{placeholders}`` take the numbers of
``db.rules``). The arguments follow from the kind:

* ``<search>(<search columns>, [keywords], [<dates>])``, every one optional;
* ``book_<kind>(<catalogue_key>, <dates>)``;
* ``update_<kind>(booking_id, <dates>)``, each date optional when there are several;
* ``cancel_<kind>(booking_id)``.

The sensitive tools take the injected run config (the passenger) and tool call id (a
write repeated for the same call takes effect once); their docstrings get the two
``Args`` lines for them here. The rules live in ``db.reservations``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from sqlalchemy.orm import Session

from db import reservations
from db.engine import Database
from db.reservation_kind import ReservationKind
from db.reservation_quote import VERBS, Action
from tools.common import (
    RULE_TEXT,
    DomainTools,
    Preview,
    Quote,
    Quoter,
    RowId,
    SearchText,
    int_arg,
    optional_arg,
    passenger_id_from,
    read,
    str_arg,
    write_once,
)

Kind = ReservationKind[Any, Any]
# What a write tool runs in its transaction, and how it is made from the call's
# arguments and the passenger.
Query = Callable[[Session, datetime], dict[str, Any]]
Write = Callable[[dict[str, Any], str], Query]
_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD
# The injected arguments of every sensitive tool, with the lines that document them.
_INJECTED = (
    inspect.Parameter("config", _KEYWORD, annotation=RunnableConfig),
    inspect.Parameter("tool_call_id", _KEYWORD, annotation=Annotated[str, InjectedToolCallId]),
)
_INJECTED_ARGS = (
    "    config: Injected run config carrying the passenger id; never set by the model.\n"
    "    tool_call_id: Injected id of this call; a repeated call takes effect once."
)


def _required(name: str, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, _KEYWORD, annotation=annotation)


def _optional(name: str, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, _KEYWORD, annotation=annotation | None, default=None)


def _make_tool(
    name: str,
    parameters: list[inspect.Parameter],
    doc: str,
    body: Callable[[dict[str, Any]], dict[str, Any]],
) -> BaseTool:
    """Return ``@tool(parse_docstring=True)`` over a function with this signature and doc.

    The tool receives only the arguments the call gives (an optional one left out is
    missing); ``body`` gets them as a dict.
    """

    def function(**arguments: Any) -> dict[str, Any]:
        return body(arguments)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        parameters, return_annotation=dict[str, Any]
    )
    function.__annotations__ = {p.name: p.annotation for p in parameters}
    function.__annotations__["return"] = dict[str, Any]
    made: BaseTool = tool(parse_docstring=True)(function)
    return made


@dataclass(frozen=True)
class ReservationTools:
    """One reservation kind's tools, declared: their names and the text the model reads.

    Attributes:
        kind: The reservation kind (``db.hotels.HOTEL``).
        search_name: The search tool's name, e.g. ``"search_hotels"``.
        search_doc: The search tool's docstring.
        book_doc: ``book_<kind>``'s docstring (``Args`` for the id and the dates).
        update_doc: ``update_<kind>``'s docstring (``Args`` for booking_id and dates).
        cancel_doc: ``cancel_<kind>``'s docstring (``Args`` for booking_id).
        no_match: The message a search that finds nothing adds to its result.
    """

    kind: Kind
    search_name: str
    search_doc: str
    book_doc: str
    update_doc: str
    cancel_doc: str
    no_match: str

    def name(self, action: Action) -> str:
        """Return the name of the sensitive tool doing ``action``, e.g. ``book_hotel``."""
        return f"{action}_{self.kind.kind}"

    def _doc(self, text: str, *, injected: bool) -> str:
        doc = inspect.cleandoc(text).format(**RULE_TEXT)
        return f"{doc}\n{_INJECTED_ARGS}" if injected else doc

    def _dates(self, *, optional: bool) -> list[inspect.Parameter]:
        make = _optional if optional else _required
        return [make(name, str) for name in self.kind.date_fields]

    def parameters(self, action: Action | None) -> list[inspect.Parameter]:
        """Return the signature of a tool: the search (``None``) or a sensitive one."""
        kind = self.kind
        if action is None:
            texts = [column.key for column in kind.search_columns]
            texts += ["keywords"] if kind.keywords_column is not None else []
            found = [_optional(name, SearchText) for name in texts]
            return found + (self._dates(optional=True) if kind.dates_message else [])
        if action == "book":
            return [_required(kind.catalogue_key, RowId), *self._dates(optional=False), *_INJECTED]
        booking = _required("booking_id", RowId)
        if action == "cancel":
            return [booking, *_INJECTED]
        # Several dates: each may be left out (kept); one date: it is the change.
        if len(kind.date_fields) > 1:
            return [booking, *_INJECTED, *self._dates(optional=True)]
        return [booking, *self._dates(optional=False), *_INJECTED]

    def previews(self) -> dict[str, Preview]:
        """Return how each sensitive call is shown to the customer before approval."""
        kind = self.kind
        several = len(kind.date_fields) > 1

        def book(s: Session, p: str, a: Mapping[str, Any], now: datetime) -> Quote:
            item_id = int_arg(a, kind.catalogue_key)
            dates = tuple(str_arg(a, name) for name in kind.date_fields)
            return reservations.quote_book(s, kind, p, item_id, dates, now)

        def update(s: Session, p: str, a: Mapping[str, Any], now: datetime) -> Quote:
            booking_id = int_arg(a, "booking_id")
            read_date = optional_arg if several else str_arg
            dates = tuple(read_date(a, name) for name in kind.date_fields)
            return reservations.quote_update(s, kind, p, booking_id, dates, now)

        def cancel(s: Session, p: str, a: Mapping[str, Any], now: datetime) -> Quote:
            return reservations.quote_cancel(s, kind, p, int_arg(a, "booking_id"), now)

        quoters: dict[Action, Quoter] = {"book": book, "update": update, "cancel": cancel}
        return {
            self.name(action): Preview(f"{VERBS[action]} {kind.noun}", quoter)
            for action, quoter in quoters.items()
        }

    def build(self, db: Database) -> DomainTools:
        """Build the kind's tools over ``db``, whose clock defines "today" for every rule.

        Returns:
            The search as the safe tool; book, update and cancel as the sensitive ones.
        """
        kind = self.kind
        dates = kind.date_fields

        def search(a: dict[str, Any]) -> dict[str, Any]:
            result = read(db, lambda s, now: reservations.search(s, kind, now, **a))
            if not result[kind.results_key]:
                result["message"] = self.no_match
            return result

        def book(a: dict[str, Any], pid: str) -> Query:
            item_id, values = a[kind.catalogue_key], tuple(a[name] for name in dates)
            return lambda s, now: reservations.book(s, kind, pid, item_id, values, now)

        def update(a: dict[str, Any], pid: str) -> Query:
            values = tuple(a.get(name) for name in dates)
            return lambda s, now: reservations.update(s, kind, pid, a["booking_id"], values, now)

        def cancel(a: dict[str, Any], pid: str) -> Query:
            return lambda s, now: reservations.cancel(s, kind, pid, a["booking_id"], now)

        writes: dict[Action, tuple[Write, str]] = {
            "book": (book, self.book_doc),
            "update": (update, self.update_doc),
            "cancel": (cancel, self.cancel_doc),
        }
        sensitive = tuple(
            self._write_tool(db, action, write, doc) for action, (write, doc) in writes.items()
        )
        safe = _make_tool(
            self.search_name,
            self.parameters(None),
            self._doc(self.search_doc, injected=False),
            search,
        )
        return DomainTools(safe=(safe,), sensitive=sensitive, previews=self.previews())

    def _write_tool(
        self,
        db: Database,
        action: Action,
        write: Write,
        doc: str,
    ) -> BaseTool:
        name = self.name(action)
        parameters = self.parameters(action)
        shown = [p.name for p in parameters if p not in _INJECTED]

        def run(arguments: dict[str, Any]) -> dict[str, Any]:
            config = arguments.pop("config", None)
            passenger_id = passenger_id_from(config)
            return write_once(
                db,
                config=config,
                tool_name=name,
                tool_call_id=arguments.pop("tool_call_id", None),
                passenger_id=passenger_id,
                args={key: arguments.get(key) for key in shown},
                write=write(arguments, passenger_id),
            )

        return _make_tool(name, parameters, self._doc(doc, injected=True), run)
