"""The graph for LangGraph's own tooling: ``langgraph.json`` names ``make_graph``.

``langgraph dev`` (and LangGraph Studio connected to it, or a LangGraph server) imports
this module and calls ``make_graph`` to get the assistant graph. The graph is compiled
without a checkpointer, because that server brings its own persistence; everything else
is what the terminal runs: the models from the same settings (``OPENAI_API_KEY`` or
``OPENAI_BASE_URL``, ``TRAVEL_ASSISTANT_MODEL`` ...), the travel database from
``TRAVEL_ASSISTANT_DB`` (a path or URL) or the home folder (built on first use), and an
interrupt before every action that writes.

The server calls the factory on its event loop for every run, so the factory is a
coroutine that builds in a worker thread (opening, maybe building, the database blocks),
once per process and settings.

A run there acts for ``config["configurable"]["passenger_id"]``, and approvals stay
fail-closed: resuming a run stopped before an action runs nothing without a decision. A
client answers with ``Command(resume=...)`` (Studio, the SDK, Agent Inbox: see
``assistants.inbox``), as the terminal and the web do; going on without one returns the
requests, which say how to answer.

The factory checks a run before the server writes anything for it (the question, a
resume), so a run that cannot go on fails with a message the server shows (every error
here is a ``ValueError``) and leaves the thread as it was, its actions still pending: no
model endpoint, no passenger id, an unknown passenger, or a passenger that is not the one
the thread was started for. Reading the graph (Studio's drawing, ``/schemas``) needs no
model endpoint: without one, the graph is built with a stand-in model that is never
called.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph_sdk.runtime import ServerRuntime

from settings import Settings

if TYPE_CHECKING:
    from db.engine import Database

NO_PASSENGER = (
    "No passenger id is configured for this run, so nothing was done: set passenger_id in "
    "the run's configuration (configurable.passenger_id) to the passenger's id."
)


def _unknown_passenger(passenger_id: str) -> str:
    return (
        f"No passenger has the id {passenger_id!r}, so nothing was done: check passenger_id "
        "in the run's configuration."
    )


def _not_the_owner(passenger_id: str) -> str:
    return (
        f"This conversation was started for another passenger, so passenger {passenger_id!r} "
        "cannot continue it and nothing was done: start a new thread for them."
    )


@cache
def _database(settings: Settings) -> Database:
    """Open (and build on first use) the travel database of ``settings``, once per process."""
    from db.engine import Database
    from db.generate import ensure_database

    url = settings.db_location.sqlalchemy_url()
    database = Database.from_url(url, data_dir=settings.data_dir)
    ensure_database(database)
    return database


@cache
def _graph(settings: Settings, drawing: bool = False) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build the graph for ``settings``, once per process.

    ``drawing`` builds it with a stand-in model, for reading the graph without a model
    endpoint.
    """
    from assistants.models import build_chat_models
    from assistants.specialists import build_crew
    from graph import ModelsArg, build_graph, drawing_model

    models: ModelsArg = drawing_model() if drawing else build_chat_models(settings.models)
    database = _database(settings)
    crew = build_crew(database, tavily_api_key=settings.tavily_api_key)
    crew.prepare()  # a missing policy file fails the factory, not a run's first question
    # LangGraph's server refuses blocking calls on its event loop (the travel database's
    # reads and writes are such): the sync nodes run in its executor there.
    return build_graph(models, None, db=database, crew=crew, in_place=False)


def _for_reading(settings: Settings) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Return the graph to read (draw, list its schemas), with a stand-in without endpoint."""
    from assistants.models import ModelConfigError

    try:
        return _graph(settings)
    except ModelConfigError:
        return _graph(settings, drawing=True)


def _check_run(settings: Settings, config: RunnableConfig, owner: str | None) -> None:
    """Refuse a run that could not act for its passenger, before anything is written.

    ``owner``: the passenger the thread was started for, if it ran before.

    Raises:
        MissingPassengerError: The run's config has no passenger id.
        NotFoundError: No passenger has that id.
        OwnershipError: The thread was started for another passenger.
    """
    from db.errors import MissingPassengerError, NotFoundError, OwnershipError
    from db.passengers import passenger_exists

    configurable = config.get("configurable") or {}
    value = configurable.get("passenger_id")
    passenger_id = str(value).strip() if value is not None else ""
    if not passenger_id:
        raise MissingPassengerError(NO_PASSENGER)
    with _database(settings).session() as session:
        if not passenger_exists(session, passenger_id):
            raise NotFoundError(_unknown_passenger(passenger_id))
    if owner is not None and owner != passenger_id:
        raise OwnershipError(_not_the_owner(passenger_id))


async def _thread_owner(configurable: dict[str, Any]) -> str | None:
    """Return the passenger the thread's latest run acted for, if it has run before.

    LangGraph stores the run's configurable values in every checkpoint's metadata; the
    server's own API, reached in-process (``get_client()``), reads the thread's latest.
    """
    from langgraph_sdk import get_client
    from langgraph_sdk.errors import NotFoundError

    thread_id = configurable.get("thread_id")
    if thread_id is None:
        return None
    try:
        state = await get_client().threads.get_state(str(thread_id))
    except NotFoundError:
        return None
    owner = (state.get("metadata") or {}).get("passenger_id")
    return str(owner).strip() if owner is not None else None


def _for_run(
    settings: Settings, config: RunnableConfig, owner: str | None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = _graph(settings)  # no model endpoint: ModelConfigError, with what to set
    _check_run(settings, config, owner)
    return graph


async def make_graph(
    config: RunnableConfig | None = None, runtime: ServerRuntime[Any] | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Return the assistant graph built from the environment, without a checkpointer.

    LangGraph's server passes ``runtime``: a run (``runtime.execution_runtime``) is checked
    first (``_check_run``); anything else only reads the graph. Called without it, the
    factory builds the graph for a run without checking one.

    Raises:
        SettingsError: A setting the program cannot use (the message names it).
        ModelConfigError: No model endpoint is configured (the message says what to set),
            for a run or without ``runtime``.
        FileNotFoundError: The company policy file does not exist.
        TravelError: A run that could not act for its passenger (see ``_check_run``).
    """
    # Read once per call: LangGraph's server may run with another environment later.
    settings = Settings.read()
    if runtime is None:
        return await asyncio.to_thread(_graph, settings)
    if runtime.execution_runtime is None:
        return await asyncio.to_thread(_for_reading, settings)
    config = config or {}
    owner = await _thread_owner(config.get("configurable") or {})
    return await asyncio.to_thread(_for_run, settings, config, owner)
