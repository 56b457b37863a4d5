"""The chat model sends each request as the OpenAI SDK's own ``create`` would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from assistants.models import ModelSettings, build_chat_models
from assistants.openai_chat import BoundedChatOpenAI
from tests.support.fake_openai import FakeOpenAI, Reply


@tool
def search_flights(departure_airport: str, limit: int = 20) -> str:
    """Search flights from an airport."""
    return departure_airport * limit


CONVERSATION = [
    SystemMessage("You help the passengers of Swiss Airlines."),
    HumanMessage("Which flights leave Zurich today? Prices in €, please."),
    AIMessage(
        "",
        tool_calls=[{"name": "search_flights", "args": {"departure_airport": "ZRH"}, "id": "c1"}],
    ),
    ToolMessage('[{"flight_no": "LX0112", "price": null}]', tool_call_id="c1"),
    AIMessage("LX0112 leaves at 09:00."),
    HumanMessage('Thanks\n\n"quoted" and ünïcode'),
]
# Headers that differ between any two requests, whoever makes them.
VARYING = {"content-length"}


def _model(base_url: str) -> BoundedChatOpenAI:
    settings = ModelSettings(model="scripted", base_url=base_url, api_key="sk-test")
    model = build_chat_models(settings)["primary_assistant"]
    assert isinstance(model, BoundedChatOpenAI)
    return model


def _payload(model: BoundedChatOpenAI) -> dict[str, Any]:
    bound = model.bind_tools([search_flights])
    kwargs = dict(bound.kwargs)  # type: ignore[attr-defined]
    return model._get_request_payload(CONVERSATION, **kwargs)


def _sent(fake: FakeOpenAI, index: int) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {k.lower(): v for k, v in fake.request_headers[index].items()}
    return fake.requests[index], {k: v for k, v in headers.items() if k not in VARYING}


def test_a_streamed_request_reaches_the_server_as_the_sdk_sends_it() -> None:
    with FakeOpenAI([Reply(text="one"), Reply(text="two")]) as fake:
        model = _model(fake.base_url)
        lean, stock = model.client, model.client._completions
        assert lean is not stock
        for completions in (lean, stock):
            chunks = list(completions.create(**_payload(model)))
            assert chunks  # the response streamed back through the SDK's own types
        assert _sent(fake, 0) == _sent(fake, 1)
        body, headers = _sent(fake, 0)
    assert body["tools"][0]["function"]["name"] == "search_flights"
    assert headers["authorization"] == "Bearer sk-test"


def test_the_async_client_sends_the_same_request_too() -> None:
    async def consume(model: BoundedChatOpenAI) -> list[int]:
        # One loop for both: the client keeps its connections on the loop that opened them.
        lean, stock = model.async_client, model.async_client._completions
        assert lean is not stock
        return [
            len([chunk async for chunk in await completions.create(**_payload(model))])
            for completions in (lean, stock)
        ]

    with FakeOpenAI([Reply(text="one"), Reply(text="two")]) as fake:
        assert 0 not in asyncio.run(consume(_model(fake.base_url)))
        assert _sent(fake, 0) == _sent(fake, 1)


def test_request_options_are_options_not_body() -> None:
    with FakeOpenAI([Reply(text="one")]) as fake:
        model = _model(fake.base_url)
        payload = {
            **_payload(model),
            "extra_body": {"cache_prompt": True},
            "extra_headers": {"X-Trace": "abc"},
        }
        list(model.client.create(**payload))
        body, headers = _sent(fake, 0)
    assert body["cache_prompt"] is True
    assert "extra_body" not in body and "extra_headers" not in body
    assert headers["x-trace"] == "abc"


@pytest.mark.parametrize("stream", [True, False])
def test_the_model_answers_through_the_lean_path(stream: bool) -> None:
    with FakeOpenAI([Reply(text="Here you are.")]) as fake:
        model = _model(fake.base_url).model_copy(update={"streaming": stream})
        reply = model.invoke(CONVERSATION)
        assert fake.requests[0].get("stream", False) is stream
    assert reply.content == "Here you are."
