"""Model settings: reply limits per assistant, the context window, and what is sent."""

from __future__ import annotations

from typing import Any

import pytest

from assistants.models import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_MAX_TOKENS,
    MIN_PROMPT_TOKENS,
    ModelConfigError,
    ModelSettings,
    build_chat_models,
    max_tokens_of,
)
from settings import Settings, SettingsError

LOCAL = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Read the model settings as the program does, from these variables and flags."""

    def read(env: dict[str, str], **flags: Any) -> ModelSettings:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return Settings.read(**flags).models

    return read


def test_every_reply_is_bounded_by_default(read: Any) -> None:
    settings = read(LOCAL)
    assert settings.max_tokens == DEFAULT_MAX_TOKENS
    assert settings.context_tokens == DEFAULT_CONTEXT_TOKENS
    models = build_chat_models(settings)
    assert {max_tokens_of(m) for m in models.values()} == {DEFAULT_MAX_TOKENS}


def test_reply_limit_from_flag_environment_and_per_assistant(read: Any) -> None:
    env = {
        **LOCAL,
        "TRAVEL_ASSISTANT_MAX_TOKENS": "700",
        "TRAVEL_ASSISTANT_MAX_TOKENS_BOOK_HOTEL": "300",
        "TRAVEL_ASSISTANT_CONTEXT_TOKENS": "16384",
        "TRAVEL_ASSISTANT_REPLY_TIMEOUT": "90",
    }
    settings = read(env)
    assert settings.max_tokens_for("primary_assistant") == 700
    assert settings.max_tokens_for("book_hotel") == 300
    # --max-tokens wins over the environment's default, not over a per-assistant value,
    # as --model does with TRAVEL_ASSISTANT_MODEL_<ASSISTANT>.
    flagged = read(env, max_tokens=500)
    assert flagged.max_tokens_for("update_flight") == 500
    assert flagged.max_tokens_for("book_hotel") == 300
    models = build_chat_models(flagged)
    hotel, primary = models["book_hotel"], models["primary_assistant"]
    assert max_tokens_of(hotel) == 300 and max_tokens_of(primary) == 500
    assert hotel is not primary and models["update_flight"] is primary
    assert primary.context_tokens == 16384
    assert primary.reply_seconds == 90.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TRAVEL_ASSISTANT_MAX_TOKENS", "lots"),
        ("TRAVEL_ASSISTANT_MAX_TOKENS_BOOK_HOTEL", "0"),
        ("TRAVEL_ASSISTANT_CONTEXT_TOKENS", "-5"),
        ("TRAVEL_ASSISTANT_REPLY_TIMEOUT", "soon"),
    ],
)
def test_a_limit_that_is_not_a_positive_number_is_named(read: Any, name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"^{name} must be a positive"):
        read({**LOCAL, name: value})


def test_a_context_window_too_small_for_the_replies_is_refused(read: Any) -> None:
    settings = read({**LOCAL, "TRAVEL_ASSISTANT_CONTEXT_TOKENS": "4096"}, max_tokens=2048)
    with pytest.raises(ModelConfigError, match="TRAVEL_ASSISTANT_CONTEXT_TOKENS"):
        settings.check()


def test_a_context_window_with_room_for_exactly_the_minimum_prompt_is_accepted() -> None:
    # And one token less is refused.
    exactly = MIN_PROMPT_TOKENS + DEFAULT_MAX_TOKENS
    ModelSettings(base_url=LOCAL["OPENAI_BASE_URL"], context_tokens=exactly).check()
    short = ModelSettings(base_url=LOCAL["OPENAI_BASE_URL"], context_tokens=exactly - 1)
    with pytest.raises(ModelConfigError, match=f"at least {MIN_PROMPT_TOKENS}"):
        short.check()


def test_the_context_window_must_fit_the_largest_reply_of_any_assistant() -> None:
    # One specialist's own, larger limit counts, not only the default every other one uses.
    settings = ModelSettings(
        base_url=LOCAL["OPENAI_BASE_URL"],
        context_tokens=MIN_PROMPT_TOKENS + DEFAULT_MAX_TOKENS,
        max_tokens_overrides={"book_hotel": DEFAULT_MAX_TOKENS + 1},
    )
    with pytest.raises(ModelConfigError, match=f"replies of up to {DEFAULT_MAX_TOKENS + 1}"):
        settings.check()


def test_the_limit_goes_under_the_name_each_server_reads() -> None:
    # Older llama.cpp (and forks) ignore max_completion_tokens: the reply was unbounded.
    # So a local server gets max_tokens in the body as it is (the wire itself is checked
    # in test_openai_chat.py); OpenAI's API gets ChatOpenAI's max_tokens, which
    # langchain-openai sends as max_completion_tokens.
    local = build_chat_models(ModelSettings(base_url=LOCAL["OPENAI_BASE_URL"]))["primary_assistant"]
    assert local.extra_body == {"max_tokens": DEFAULT_MAX_TOKENS}  # type: ignore[attr-defined]
    assert local.max_tokens is None  # type: ignore[attr-defined]
    settings = ModelSettings(api_key="sk-test")
    openai_api = build_chat_models(settings)["primary_assistant"]
    assert openai_api.max_tokens == DEFAULT_MAX_TOKENS  # type: ignore[attr-defined]
    assert not openai_api.extra_body  # type: ignore[attr-defined]
