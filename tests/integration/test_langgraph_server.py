"""The assistant under LangGraph's own server (``langgraph dev``), driven with LangGraph's SDK.

What Studio, the SDK and Agent Inbox rely on: the published schemas, errors that carry
their message, approvals given with ``Command(resume=...)``, and a resume that cannot act
leaving the action pending. The model is the fake OpenAI-compatible server; the travel
database is checked for what was written. Slow (an install on first use, a server start
per test): marked ``langgraph_server``, left out of the default run and run by
``pytest -m langgraph_server`` (a stage of ``.ci/run``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from db.fixtures import FIXTURE_PASSENGER_ID, FIXTURE_TICKET_NO, FLOWN_PASSENGER_ID
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.flights import ticket_flight, tomorrow_flight
from tests.support.langgraph_server import LangGraphDev, langgraph_program

pytestmark = pytest.mark.langgraph_server
GRAPH = "travel_assistant"
SENSITIVE_NODE = "update_flight_sensitive_tools"


@pytest.fixture(scope="module")
def langgraph_cli() -> Path:
    """The ``langgraph`` program, in its own environment (installed on first use)."""
    return langgraph_program()


@pytest.fixture
def travel(built_db: Path, tmp_path: Path) -> Path:
    path = tmp_path / "travel.sqlite"
    shutil.copyfile(built_db, path)
    return path


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def server(
    langgraph_cli: Path, travel: Path, fake: FakeOpenAI, tmp_path: Path
) -> Iterator[SyncLangGraphClient]:
    """The server over ``travel`` and the fake model; the model settings come from ``.env``."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".env").write_text(
        f"OPENAI_BASE_URL={fake.base_url}\nOPENAI_API_KEY=test\nTRAVEL_ASSISTANT_MODEL=scripted\n"
    )
    env = {"TRAVEL_ASSISTANT_DB": str(travel), "TRAVEL_ASSISTANT_HOME": str(tmp_path / "home")}
    with LangGraphDev(langgraph_cli, folder, env) as dev:
        yield get_sync_client(url=dev.url, timeout=120)


def assistant_id(client: SyncLangGraphClient) -> str:
    [found] = client.assistants.search(graph_id=GRAPH)
    return str(found["assistant_id"])


def ask(passenger: str | None = FIXTURE_PASSENGER_ID, **extra: Any) -> dict[str, Any]:
    configurable = {"passenger_id": passenger} if passenger is not None else {}
    return {"configurable": {**configurable, **extra}}


def question(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def error_of(result: Any) -> dict[str, Any]:
    assert isinstance(result, dict) and "__error__" in result, result
    error: dict[str, Any] = result["__error__"]
    return error


def interrupts(client: SyncLangGraphClient, thread: str) -> list[Any]:
    state = client.threads.get_state(thread)
    return [i["value"] for task in state["tasks"] for i in task.get("interrupts", [])]


def stop_before_change(
    client: SyncLangGraphClient, fake: FakeOpenAI, travel: Path
) -> tuple[str, str, int]:
    """Run until the assistant waits for approval of a change; return thread, call, flight."""
    new_flight = tomorrow_flight(travel)
    fake.script += [
        Reply(tool_calls=[("ToFlightBookingAssistant", {"request": "fly tomorrow"})]),
        Reply(
            text="I can move you to tomorrow's flight.",
            tool_calls=[
                (
                    "update_ticket_to_new_flight",
                    {"ticket_no": FIXTURE_TICKET_NO, "new_flight_id": new_flight},
                )
            ],
        ),
    ]
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, GRAPH, input=question("Move my flight to tomorrow"), config=ask())
    state = client.threads.get_state(thread)
    assert state["next"] == [SENSITIVE_NODE]
    [call] = state["values"]["messages"][-1]["tool_calls"]
    return thread, call["id"], new_flight


def test_langgraph_server_publishes_described_schemas(server: SyncLangGraphClient) -> None:
    schemas = server.assistants.get_schemas(assistant_id(server))
    assert "messages" in schemas["input_schema"]["properties"]
    assert {"messages", "user_info", "dialog_state"} <= set(schemas["output_schema"]["properties"])
    # Studio's forms: the run's context, and its configuration (configurable).
    for schema in (schemas["context_schema"], schemas["config_schema"]):
        assert schema["properties"]["passenger_id"]["description"]
    assert server.assistants.get_graph(assistant_id(server))["nodes"]


def test_langgraph_server_error_message_and_retry_without_a_duplicate(
    server: SyncLangGraphClient, fake: FakeOpenAI
) -> None:
    thread = server.threads.create()["thread_id"]
    failed = server.runs.wait(
        thread, GRAPH, input=question("Where do I fly?"), config=ask(None), raise_error=False
    )
    error = error_of(failed)
    assert error["error"] == "MissingPassengerError"
    assert "passenger_id" in error["message"]  # the fix, not "An internal error occurred"
    assert "travel-assistant" not in error["message"]

    fake.script.append(Reply(text="You fly to Basel."))
    server.runs.wait(thread, GRAPH, input=question("Where do I fly?"), config=ask())
    messages = server.threads.get_state(thread)["values"]["messages"]
    assert [m["content"] for m in messages if m["type"] == "human"] == ["Where do I fly?"]
    assert messages[-1]["content"] == "You fly to Basel."


def test_langgraph_server_native_approval_round_trip(
    server: SyncLangGraphClient, fake: FakeOpenAI, travel: Path
) -> None:
    thread, call_id, new_flight = stop_before_change(server, fake, travel)
    before = ticket_flight(travel)
    assert new_flight != before

    server.runs.wait(thread, GRAPH, input=None, config=ask())  # Studio's "continue"
    assert ticket_flight(travel) == before
    [[request]] = interrupts(server, thread)
    assert request["action_request"]["action"] == "update_ticket_to_new_flight"
    assert request["tool_call_id"] == call_id
    assert request["config"]["allow_accept"] is True
    lines = request["preview"]["lines"]
    assert lines and all(line in request["description"] for line in lines)
    assert request["preview"]["amount"]["kind"] in ("pay", "refund")

    fake.script.append(Reply(text="Done: you fly tomorrow."))
    server.runs.wait(
        thread, GRAPH, command={"resume": [{"type": "accept", "args": None}]}, config=ask()
    )
    assert ticket_flight(travel) == new_flight
    state = server.threads.get_state(thread)
    assert state["next"] == []
    answer = next(m for m in state["values"]["messages"] if m.get("tool_call_id") == call_id)
    assert answer["artifact"]["approved"] is True
    assert state["values"]["messages"][-1]["content"] == "Done: you fly tomorrow."


def test_langgraph_server_resume_that_cannot_act_keeps_the_action_pending(
    server: SyncLangGraphClient, fake: FakeOpenAI, travel: Path
) -> None:
    thread, call_id, _ = stop_before_change(server, fake, travel)
    before = ticket_flight(travel)
    requests = len(fake.requests)

    accept = {"resume": {"type": "accept", "args": None}}
    nobody = server.runs.wait(thread, GRAPH, command=accept, config=ask(None), raise_error=False)
    assert "passenger_id" in error_of(nobody)["message"]
    someone_else = server.runs.wait(
        thread,
        GRAPH,
        command=accept,
        config=ask(FLOWN_PASSENGER_ID),
        raise_error=False,
    )
    assert error_of(someone_else)["error"] == "OwnershipError"
    # Nor may they write in it: their message would have the model read the owner's.
    prying = server.runs.wait(
        thread,
        GRAPH,
        input=question("What did I say before?"),
        config=ask(FLOWN_PASSENGER_ID),
        raise_error=False,
    )
    assert error_of(prying)["error"] == "OwnershipError"

    assert ticket_flight(travel) == before
    assert len(fake.requests) == requests
    state = server.threads.get_state(thread)
    assert state["next"] == [SENSITIVE_NODE]
    assert not any(m.get("tool_call_id") == call_id for m in state["values"]["messages"])


def test_langgraph_server_without_a_model_endpoint_draws_and_says_what_to_set(
    langgraph_cli: Path, travel: Path, tmp_path: Path
) -> None:
    env = {"TRAVEL_ASSISTANT_DB": str(travel), "TRAVEL_ASSISTANT_HOME": str(tmp_path / "home")}
    with LangGraphDev(langgraph_cli, tmp_path / "project", env) as dev:
        client = get_sync_client(url=dev.url, timeout=120)
        aid = assistant_id(client)
        assert client.assistants.get_graph(aid)["nodes"]
        assert client.assistants.get_schemas(aid)["input_schema"]
        thread = client.threads.create()["thread_id"]
        failed = client.runs.wait(
            thread, GRAPH, input=question("hi"), config=ask(), raise_error=False
        )
        assert error_of(failed)["error"] == "ModelConfigError"
        assert "OPENAI_API_KEY" in error_of(failed)["message"]
        assert client.threads.get_state(thread)["values"] in ({}, None, [])
