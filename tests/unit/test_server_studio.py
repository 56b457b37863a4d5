"""``langgraph.json`` names a factory that LangGraph's tooling can load, and it builds the graph."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from pathlib import Path

import pytest
from langgraph.graph.state import CompiledStateGraph

from assistants.specialists import SPECIALISTS

ROOT = Path(__file__).resolve().parents[2]


def test_server_langgraph_json_factory_builds_the_graph(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert config["dependencies"] == ["."]
    assert config["env"] == ".env"  # the settings a user keeps there reach the server
    (reference,) = config["graphs"].values()
    file, _, name = reference.partition(":")
    # Loaded by file path, as LangGraph's server does.
    spec = importlib.util.spec_from_file_location("travel_assistant_graph", ROOT / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    factory = getattr(module, name)

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    monkeypatch.setenv("TRAVEL_ASSISTANT_DB", str(db_path))
    graph = asyncio.run(factory({"configurable": {}}))
    assert isinstance(graph, CompiledStateGraph)
    assert graph.checkpointer is None  # the LangGraph server brings its own
    assert sorted(graph.interrupt_before_nodes) == sorted(
        f"{s.name}_sensitive_tools" for s in SPECIALISTS
    )
    assert {"fetch_user_info", "primary_assistant", "leave_skill"} <= set(graph.nodes)


def test_server_langgraph_factory_without_endpoint_says_what_to_set(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assistants.models import ModelConfigError
    from server.studio import make_graph

    monkeypatch.setenv("TRAVEL_ASSISTANT_DB", str(db_path))
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        asyncio.run(make_graph())


def test_server_langgraph_factory_without_the_policy_file_says_which(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.studio import make_graph

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    monkeypatch.setenv("TRAVEL_ASSISTANT_DB", str(db_path))
    monkeypatch.setenv("TRAVEL_ASSISTANT_DATA", str(tmp_path))  # no policy.md in it
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "policy.md"))):
        asyncio.run(make_graph())
