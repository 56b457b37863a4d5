"""The start's check that the model server honours tools (``assistants.tool_support``).

Against the scripted OpenAI-compatible server playing each kind of server: llama.cpp
with ``/apply-template`` and a template that knows tools or drops them, llama.cpp
without Jinja (a 400 for tools), a server without a template endpoint that calls the
required tool or answers in words. Then ``travel-assistant chat`` (``cli.main``, the real
client, no model factory) over a server that drops tools: it says the one line with the
fix before the first prompt and sends the model nothing; ``--no-check`` goes on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assistants.models import ModelSettings
from assistants.tool_support import (
    PROBE_TOOL_NAME,
    ToolsUnsupportedError,
    check_tool_support,
    server_root,
)
from commands.common import EXIT_USAGE
from tests.support.cli import chat, chat_args
from tests.support.fake_openai import NO_JINJA_ERROR, FakeOpenAI, Reply

DROPS_LINE = (
    "drops tools: its chat template leaves them out of the prompt (POST /apply-template), so "
    "the assistant could not look anything up or book anything. Start llama-server with a "
    "template that knows tools (--chat-template-file FILE, see docs/local-models.md) or "
    "another model, or pass --no-check to chat without tools."
)


def settings_of(fake: FakeOpenAI, **options: object) -> ModelSettings:
    return ModelSettings(model="scripted", base_url=fake.base_url, api_key="k", **options)  # type: ignore[arg-type]


def test_tool_support_server_root_is_the_base_url_without_v1() -> None:
    assert server_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert server_root("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    assert server_root("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert server_root("http://h/llama/v1") == "http://h/llama"


def test_tool_support_a_template_that_knows_tools_is_honoured_without_a_model_run() -> None:
    with FakeOpenAI(apply_template=True) as fake:
        support = check_tool_support(settings_of(fake))
    assert support.verdict == "honoured"
    (asked,) = fake.template_requests
    assert [tool["function"]["name"] for tool in asked["tools"]] == [PROBE_TOOL_NAME]
    assert PROBE_TOOL_NAME not in str(asked["messages"])  # only the tools can put it there
    assert fake.tool_probes == [] and fake.requests == []  # no completion was asked for


def test_tool_support_a_template_that_drops_tools_is_said_with_the_fix() -> None:
    with (
        FakeOpenAI(apply_template=True, tools="dropped") as fake,
        pytest.raises(ToolsUnsupportedError) as raised,
    ):
        check_tool_support(settings_of(fake))
    assert str(raised.value) == f"The model server at {fake.base_url} {DROPS_LINE}"
    assert fake.tool_probes == [] and fake.requests == []


def test_tool_support_without_a_template_endpoint_one_request_must_call_the_tool() -> None:
    with FakeOpenAI() as fake:
        support = check_tool_support(settings_of(fake))
    assert support.verdict == "honoured"
    (probe,) = fake.tool_probes
    assert probe["tool_choice"] == "required"
    assert [tool["function"]["name"] for tool in probe["tools"]] == [PROBE_TOOL_NAME]
    assert probe["max_tokens"] <= 64  # a call costs a few dozen tokens, no more
    assert fake.requests == []  # the script is the conversation's, untouched


def test_tool_support_a_server_that_answers_in_words_ignores_tools() -> None:
    with (
        FakeOpenAI(tools="dropped") as fake,
        pytest.raises(ToolsUnsupportedError, match="ignores tools: asked for a reply") as e,
    ):
        check_tool_support(settings_of(fake))
    assert "--no-check" in str(e.value)
    assert len(fake.tool_probes) == 1


@pytest.mark.parametrize("apply_template", [True, False])
def test_tool_support_llama_cpp_without_jinja_is_told_to_start_with_it(
    apply_template: bool,
) -> None:
    with (
        FakeOpenAI(apply_template=apply_template, tools="refused") as fake,
        pytest.raises(ToolsUnsupportedError) as raised,
    ):
        check_tool_support(settings_of(fake))
    assert str(raised.value) == (
        f"The model server at {fake.base_url} refuses tools ({NO_JINJA_ERROR}): start "
        "llama-server with --jinja, or pass --no-check to chat without tools."
    )


def test_tool_support_openai_itself_is_not_asked_nor_billed() -> None:
    # No request at all: the test network refuses anything but 127.0.0.1, and a check
    # that asked api.openai.com would fail here.
    for base_url in (None, "https://api.openai.com/v1"):
        support = check_tool_support(ModelSettings(api_key="sk-test", base_url=base_url))
        assert support.verdict == "assumed"


def test_tool_support_every_model_named_is_asked() -> None:
    # Another model for one assistant may sit behind the same server with another template.
    with FakeOpenAI(apply_template=True) as fake:
        check_tool_support(
            settings_of(fake, model_overrides={"flight_booking_assistant": "other-model"})
        )
    assert sorted(body["model"] for body in fake.template_requests) == ["other-model", "scripted"]


def test_tool_support_a_server_that_cannot_answer_is_not_a_verdict() -> None:
    # No answer says nothing about tools: the chat goes on and says the real error when
    # it happens (the endpoint check before this one says an unreachable server).
    with FakeOpenAI() as fake:
        settings = settings_of(fake, timeout=2.0)
    support = check_tool_support(settings)  # the server has gone
    assert support.verdict == "unknown"
    assert "the test request failed" in support.how


def test_chat_over_a_server_that_drops_tools_says_so_and_asks_the_model_nothing(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI(
        [Reply(text="The hotel is now yours.")], apply_template=True, tools="dropped"
    ) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("TRAVEL_ASSISTANT_MODEL", "scripted")
        result = chat(chat_args(db_path), ["Book me the Hilton", "exit"], None, tmp_path / "h")
        assert result.code == EXIT_USAGE
        assert result.err.strip().splitlines()[-1].endswith(DROPS_LINE)
        assert "The hotel is now yours." not in result.out
        assert fake.requests == []  # no conversation was started with a toolless model
        skipped = chat(
            chat_args(db_path, "3442 587242", "--no-check"), ["hi", "exit"], None, tmp_path / "h"
        )
        assert skipped.code == 0, skipped.err
        assert "The hotel is now yours." in skipped.out
        assert len(fake.template_requests) == 1  # --no-check asked nothing


def test_chat_over_a_server_that_honours_tools_starts(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI([Reply(text="Hello! How can I help?")], apply_template=True) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.setenv("TRAVEL_ASSISTANT_MODEL", "scripted")
        result = chat(chat_args(db_path), ["hi", "exit"], None, tmp_path / "h")
    assert result.code == 0, result.err
    assert "Hello! How can I help?" in result.out
    assert len(fake.template_requests) == 1
