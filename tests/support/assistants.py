"""The one way tests build the assistant: ``build_assistant``.

It is ``TravelAssistant.build`` (the program's own assembly: one crew for the graph and
its wrapper) with what tests nearly always want filled in: a scripted model with an
empty script, and an in-memory checkpointer. Everything else keeps the program's
defaults (its retry policy and recursion limit) unless the test says otherwise, so a
test that does not mention them runs the graph the program runs. The fixture
``make_assistant`` (``tests/unit/conftest.py``) calls it over the test's database and
its ``model``.

A test that is about the assembly itself (``build_graph`` and ``TravelAssistant(...)``
put together by hand) may still do it by hand; it says so in a comment.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import RetryPolicy

from assistants.providers import DEFAULT_RETRY_POLICY
from assistants.specialists import Crew
from conversations.assistant import TravelAssistant
from db.engine import Database
from graph import DEFAULT_RECURSION_LIMIT, ModelsArg
from tests.support.scripted import ScriptedChatModel


def build_assistant(
    db: Database,
    model: ModelsArg | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    *,
    crew: Crew | None = None,
    tavily_api_key: str | None = None,
    retry_policy: RetryPolicy | None = DEFAULT_RETRY_POLICY,
    recursion_limit: int = DEFAULT_RECURSION_LIMIT,
) -> TravelAssistant:
    """Return the assistant over ``db``, as the program builds it.

    Args:
        db: The travel database the tools read and write.
        model: One chat model for every assistant, or a mapping by assistant name (as
            ``graph.build_graph`` takes); by default a ``ScriptedChatModel`` with an
            empty script.
        checkpointer: Where conversations are saved; by default a new ``InMemorySaver``.
        crew: The specialists; by default the program's, over ``db``.
        retry_policy: How failed model calls are retried (``None``: not at all); by
            default the program's policy.
        recursion_limit: The most steps a run may take; by default the program's.
    """
    return TravelAssistant.build(
        model if model is not None else ScriptedChatModel(),
        checkpointer if checkpointer is not None else InMemorySaver(),
        db=db,
        crew=crew,
        retry_policy=retry_policy,
        recursion_limit=recursion_limit,
        tavily_api_key=tavily_api_key,
    )
