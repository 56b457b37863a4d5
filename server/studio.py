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
fail-closed: resuming a run stopped before an action runs nothing unless the run's
config carries ``"approvals": "all"`` or ``{tool_call_id: {"approved": true}}``.
"""

from __future__ import annotations

import asyncio
from functools import cache
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from settings import Settings


@cache
def _graph(settings: tuple[tuple[str, str], ...]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build the graph for ``settings`` (the environment), once per process."""
    from assistants.models import build_chat_models
    from assistants.specialists import build_crew
    from db.engine import Database
    from db.generate import ensure_database
    from graph import build_graph
    from locations import Location

    read = Settings.read(dict(settings))
    location = Location.parse(read.db or read.home / "travel.sqlite")
    location.check_driver()
    models = build_chat_models(read.models())
    database = Database.from_url(location.sqlalchemy_url(), data_dir=read.data_dir)
    ensure_database(database)
    crew = build_crew(database, tavily_api_key=read.tavily_api_key)
    crew.prepare()  # a missing policy file fails the factory, not a run's first question
    return build_graph(models, None, db=database, crew=crew)


async def make_graph(
    config: RunnableConfig | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Return the assistant graph built from the environment, without a checkpointer.

    Raises:
        ModelConfigError: No model endpoint is configured (the message says what to set).
        FileNotFoundError: The company policy file does not exist.
    """
    # Read once per call: LangGraph's server may run with another environment later.
    return await asyncio.to_thread(_graph, Settings.read().key())
