"""Which chat model each assistant uses, and how the models are built.

Any OpenAI-compatible endpoint works through langchain-openai's ``ChatOpenAI``: the
OpenAI API itself, or a local server (vLLM, Ollama, llama.cpp) or another vendor through
``OPENAI_BASE_URL``. One model serves every assistant unless an override names another
for one assistant (a cheaper model for the specialists, say).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel

from assistants.state import SPECIALIST_NAMES

DEFAULT_MODEL = "gpt-4o-mini"
ASSISTANT_NAMES: tuple[str, ...] = ("primary_assistant", *SPECIALIST_NAMES)
# Retries of provider errors happen in the graph's retry policy, in one place, so the
# client itself does not retry.
CLIENT_MAX_RETRIES = 0
DEFAULT_TIMEOUT_SECONDS = 60.0


class ModelConfigError(Exception):
    """No usable model endpoint is configured; the message says what to set."""


def _env_key(assistant: str) -> str:
    return f"TRAVEL_ASSISTANT_MODEL_{assistant.upper()}"


@dataclass(frozen=True)
class ModelSettings:
    """Where the models live and which model each assistant uses."""

    model: str = DEFAULT_MODEL
    api_key: str | None = None
    base_url: str | None = None
    overrides: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_SECONDS

    @classmethod
    def from_env(
        cls, model: str | None = None, env: Mapping[str, str] | None = None
    ) -> ModelSettings:
        """Read the settings from the environment; ``model`` (from ``--model``) wins.

        ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` locate the endpoint;
        ``TRAVEL_ASSISTANT_MODEL`` names the default model and
        ``TRAVEL_ASSISTANT_MODEL_<ASSISTANT>`` (for example
        ``TRAVEL_ASSISTANT_MODEL_BOOK_HOTEL``) one assistant's model.
        """
        env = os.environ if env is None else env
        overrides = {
            name: env[_env_key(name)] for name in ASSISTANT_NAMES if env.get(_env_key(name))
        }
        return cls(
            model=model or env.get("TRAVEL_ASSISTANT_MODEL") or DEFAULT_MODEL,
            api_key=env.get("OPENAI_API_KEY") or None,
            base_url=env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_BASE") or None,
            overrides=overrides,
        )

    def model_for(self, assistant: str) -> str:
        """Return the model name of ``assistant``."""
        return self.overrides.get(assistant, self.model)

    def check(self) -> None:
        """Raise ``ModelConfigError`` naming what to set when no endpoint is usable."""
        if not self.api_key and not self.base_url:
            raise ModelConfigError(
                "No model endpoint is configured. Set OPENAI_API_KEY for the OpenAI API, "
                "or OPENAI_BASE_URL for an OpenAI-compatible server "
                "(for example http://localhost:11434/v1 for Ollama), "
                "in the environment or in a .env file."
            )


def build_chat_models(settings: ModelSettings) -> dict[str, BaseChatModel]:
    """Build one ``ChatOpenAI`` per distinct model name, keyed by assistant name."""
    from langchain_openai import ChatOpenAI  # imported here: it is slow to import

    settings.check()
    # A local server needs no key, but the client insists on one.
    api_key = settings.api_key or "not-needed"
    built: dict[str, BaseChatModel] = {}
    by_assistant: dict[str, BaseChatModel] = {}
    for assistant in ASSISTANT_NAMES:
        name = settings.model_for(assistant)
        if name not in built:
            built[name] = ChatOpenAI(
                model=name,
                api_key=api_key,  # type: ignore[arg-type]
                base_url=settings.base_url,
                timeout=settings.timeout,
                max_retries=CLIENT_MAX_RETRIES,
                streaming=True,
                stream_usage=True,
            )
        by_assistant[assistant] = built[name]
    return by_assistant
