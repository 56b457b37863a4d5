"""Helpers for the db- and tool-level tests: run tool calls through a ToolNode, dump tables.

Tools are run the way the graph runs them: an ``AIMessage`` with hand-built tool calls
goes through the graph's own ``tools.common.tool_node`` (a ``ToolNode`` answering failures
with ``tool_error_message``, exactly the text the model reads) inside a one-node graph,
with the passenger (and, when given, the thread) in ``config["configurable"]``.

``dump`` works on either engine: on SQLite it also watches ``PRAGMA data_version``, on
PostgreSQL it counts the committed row changes of every table (logged by triggers), so a
test that takes its database from a fixture runs unchanged when that fixture hands it
PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from sqlalchemy import func, select

from db.engine import Database
from db.fixtures import FIXTURE_DEPARTURE_IN, FIXTURE_FLIGHT_NO, FULL_FLIGHT_DAY_OFFSET
from db.models import Booking, Flight, FlightFare, Ticket
from db.rules import FREE_WINDOW_HOURS_AFTER_BOOKING
from tests.support.databases import FIXED_NOW
from tools.common import tool_node

# Tables a write may touch; a refused write must leave every one of them unchanged.
WRITE_TABLES = (
    "bookings",
    "tickets",
    "ticket_flights",
    "boarding_passes",
    "payments",
    "hotel_bookings",
    "car_rental_bookings",
    "excursion_bookings",
    "tool_call_records",
)


def _watcher(db: Database) -> sqlite3.Connection:
    """Return the long-lived connection that watches ``db`` (kept on the object itself,
    so it is closed when the test's Database is collected)."""
    connection: sqlite3.Connection | None = getattr(db, "_test_watcher", None)
    if connection is None:
        path = db.engine.url.database
        assert path, "the tests use file databases"
        connection = sqlite3.connect(path)
        object.__setattr__(db, "_test_watcher", connection)
    return connection


def dump(db: Database) -> dict[str, Any]:
    """Return a snapshot that changes whenever anything is committed to the database.

    ``PRAGMA data_version`` read on one long-lived connection changes when any other
    connection commits a change, so equal snapshots before and after a refused write
    prove that nothing was written at all (not even to a table nobody thought of). Row
    counts of the written tables ride along so a failure shows what grew. On PostgreSQL
    the count of committed row changes per table, logged by triggers, stands in for both.
    """
    if db.engine.dialect.name != "sqlite":
        return _dump_changes(db)
    connection = _watcher(db)
    # fetchall() finishes each statement: a half-read cursor would pin an old snapshot.
    ((version,),) = connection.execute("PRAGMA data_version").fetchall()
    snapshot = {"data_version": version}
    for table in WRITE_TABLES:
        ((snapshot[table],),) = connection.execute(f"SELECT count(*) FROM {table}").fetchall()
    return snapshot


# PostgreSQL has no ``data_version``: the first ``dump`` of a database installs a row
# trigger on every table that logs each committed row change into this table (inserts
# only, so concurrent writers never wait for each other; a rolled-back change leaves no
# entry). Reading the log is one small query, where digesting every row took seconds.
_CHANGE_LOG = "zz_test_row_changes"
_INSTALL_CHANGE_LOG = f"""
CREATE TABLE IF NOT EXISTS {_CHANGE_LOG} (table_name text NOT NULL);
CREATE OR REPLACE FUNCTION {_CHANGE_LOG}_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {_CHANGE_LOG} (table_name) VALUES (TG_TABLE_NAME);
    RETURN NULL;
END $$;
DO $$
DECLARE name text;
BEGIN
    FOR name IN
        SELECT tablename FROM pg_tables
        WHERE schemaname = current_schema() AND tablename <> '{_CHANGE_LOG}'
    LOOP
        EXECUTE 'CREATE OR REPLACE TRIGGER {_CHANGE_LOG} AFTER INSERT OR UPDATE OR DELETE ON '
            || quote_ident(name) || ' FOR EACH ROW EXECUTE FUNCTION {_CHANGE_LOG}_add()';
    END LOOP;
END $$;
"""


def _dump_changes(db: Database) -> dict[str, Any]:
    with db.engine.begin() as connection:
        if not getattr(db, "_test_change_log", False):
            connection.exec_driver_sql(_INSTALL_CHANGE_LOG)
            object.__setattr__(db, "_test_change_log", True)
        rows = connection.exec_driver_sql(
            f"SELECT table_name, count(*) FROM {_CHANGE_LOG} GROUP BY table_name"
        ).all()
    return {"changed_rows": dict(sorted((str(name), int(count)) for name, count in rows))}


def call(name: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """Build one tool call as a model would emit it (a fresh id unless one is given)."""
    return {
        "name": name,
        "args": args,
        "id": call_id or f"call-{name}-{uuid.uuid4().hex[:8]}",
        "type": "tool_call",
    }


def run_calls(
    tools: Sequence[BaseTool],
    calls: Sequence[dict[str, Any]],
    passenger_id: str | None,
    *,
    thread_id: str | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> list[ToolMessage]:
    """Run tool calls of one AIMessage through a ToolNode; return its ToolMessages.

    With ``thread_id`` the run's config names that conversation, as the graph's does;
    with a ``checkpointer`` too, the run is saved (serialised) like a real one.
    """
    graph = StateGraph(MessagesState)
    graph.add_node("tools", tool_node(tools))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    configurable: dict[str, Any] = {}
    if passenger_id is not None:
        configurable["passenger_id"] = passenger_id
    if thread_id is not None:
        configurable["thread_id"] = thread_id
    result = graph.compile(checkpointer=checkpointer).invoke(
        {"messages": [AIMessage(content="", tool_calls=list(calls))]},
        {"configurable": configurable},
    )
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def run_one(
    tools: Sequence[BaseTool],
    name: str,
    args: dict[str, Any],
    passenger_id: str | None,
    call_id: str | None = None,
    *,
    thread_id: str | None = None,
) -> ToolMessage:
    """Run a single tool call and return its ToolMessage."""
    (message,) = run_calls(tools, [call(name, args, call_id)], passenger_id, thread_id=thread_id)
    return message


def payload(message: ToolMessage) -> dict[str, Any]:
    """Return the JSON result of a successful tool call."""
    assert message.status == "success", message.content
    data: dict[str, Any] = json.loads(str(message.content))
    return data


def error_text(message: ToolMessage) -> str:
    """Return the text of a failed tool call."""
    assert message.status == "error", message.content
    return str(message.content)


def lx0112(db: Database, days_after: int) -> Flight:
    """Return the LX0112 flight ``days_after`` days after the fixture flight."""
    with db.session() as session:
        departure = FIXED_NOW + FIXTURE_DEPARTURE_IN + timedelta(days=days_after)
        flights = list(
            session.scalars(
                select(Flight)
                .where(Flight.flight_no == FIXTURE_FLIGHT_NO)
                .order_by(Flight.scheduled_departure)
            )
        )
        return min(flights, key=lambda f: abs(f.scheduled_departure - departure))


def full_flight(db: Database) -> Flight:
    """Return the fixture LX0112 whose Economy cabin is sold out."""
    return lx0112(db, FULL_FLIGHT_DAY_OFFSET)


def in_free_window(db: Database, ticket_no: str) -> bool:
    """Tell whether the ticket was bought within the free change/cancel window."""
    with db.session() as session:
        ticket = session.get(Ticket, ticket_no)
        assert ticket is not None
        booking = session.get(Booking, ticket.book_ref)
        assert booking is not None
        return FIXED_NOW - booking.book_date <= timedelta(hours=FREE_WINDOW_HOURS_AFTER_BOOKING)


def add_flight(
    db: Database,
    *,
    departure_airport: str,
    arrival_airport: str,
    departs_in: timedelta,
    status: str = "Scheduled",
    flight_no: str = "ZZ0001",
    duration: timedelta = timedelta(hours=1, minutes=30),
) -> int:
    """Insert a flight (aircraft and fares copied from any flight) and return its id."""
    with db.transaction() as session:
        template = session.scalars(select(Flight).order_by(Flight.flight_id).limit(1)).one()
        fares = list(
            session.scalars(select(FlightFare).where(FlightFare.flight_id == template.flight_id))
        )
        new_id = (session.scalar(select(func.max(Flight.flight_id))) or 0) + 1
        departure = FIXED_NOW + departs_in
        session.add(
            Flight(
                flight_id=new_id,
                flight_no=flight_no,
                scheduled_departure=departure,
                scheduled_arrival=departure + duration,
                departure_airport=departure_airport,
                arrival_airport=arrival_airport,
                status=status,
                aircraft_code=template.aircraft_code,
            )
        )
        session.flush()
        for fare in fares:
            session.add(
                FlightFare(
                    flight_id=new_id,
                    fare_conditions=fare.fare_conditions,
                    amount_cents=fare.amount_cents,
                )
            )
    return new_id
