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


def test_server_langgraph_a_run_cannot_go_on_with_another_passengers_thread(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The passenger a thread ran for is in its checkpoints' metadata, which the factory
    # reads through the server's own API (the langgraph_server tier runs that part). A
    # run for anyone else is refused before anything runs, resume or new message alike.
    from db.errors import OwnershipError
    from db.fixtures import FIXTURE_PASSENGER_ID, FLOWN_PASSENGER_ID
    from server import studio
    from settings import Settings

    monkeypatch.setenv("TRAVEL_ASSISTANT_DB", str(db_path))
    settings = Settings.read()

    def run(passenger: str, owner: str | None = FIXTURE_PASSENGER_ID) -> None:
        configurable = {"passenger_id": passenger, "thread_id": "t-owned"}
        studio._check_run(settings, {"configurable": configurable}, owner)

    run(FIXTURE_PASSENGER_ID)  # its own passenger goes on
    with pytest.raises(OwnershipError, match="started for another passenger"):
        run(FLOWN_PASSENGER_ID)
    run(FLOWN_PASSENGER_ID, None)  # a thread that never ran is anyone's to start
