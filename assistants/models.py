"""Which chat model each assistant uses, with which limits, and how the models are built.

Any OpenAI-compatible endpoint works through langchain-openai's ``ChatOpenAI``: the
OpenAI API itself, or a local server (vLLM, Ollama, llama.cpp) or another vendor through
``OPENAI_BASE_URL``. One model serves every assistant unless an override names another
for one assistant (a cheaper model for the specialists, say).

Every model call is bounded: ``max_tokens`` caps one reply (``--max-tokens``,
``TRAVEL_ASSISTANT_MAX_TOKENS``, ``TRAVEL_ASSISTANT_MAX_TOKENS_<ASSISTANT>``), a total
time limit ends a reply that keeps streaming (``TRAVEL_ASSISTANT_REPLY_TIMEOUT``), and
the prompt is trimmed to the server's context window
(``TRAVEL_ASSISTANT_CONTEXT_TOKENS``, less the reply's ``max_tokens``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from assistants.specialists import SPECIALISTS, Specialist, assistant_names

DEFAULT_MODEL = "gpt-4o-mini"
# Retries of provider errors happen in the graph's retry policy, in one place, so the
# client itself does not retry.
CLIENT_MAX_RETRIES = 0
# The longest wait for the next piece of a reply (a local server on a CPU may take a
# minute to read a long prompt before it sends anything).
DEFAULT_TIMEOUT_SECONDS = 120.0
# One reply: a customer-service answer is a few sentences, a tool call a few dozen tokens;
# this leaves room for a model that reasons before it answers.
DEFAULT_MAX_TOKENS = 1024
# The context window the prompt must fit, with the reply: a local server's 8k by default.
DEFAULT_CONTEXT_TOKENS = 8192
# The total time one reply may take, however steadily the server streams.
DEFAULT_REPLY_SECONDS = 300.0
# The smallest prompt budget (context less reply) the assistants can work in: a system
# prompt with its tools takes up to about 2,300 tokens by the program's estimate and the
# passenger's bookings up to about 600 more, before any conversation
# (scripts/bench_context.py measures whole requests).
MIN_PROMPT_TOKENS = 4000

MAX_TOKENS_ENV = "TRAVEL_ASSISTANT_MAX_TOKENS"
CONTEXT_TOKENS_ENV = "TRAVEL_ASSISTANT_CONTEXT_TOKENS"


class ModelConfigError(ValueError):
    """No usable model endpoint is configured; the message says what to set."""


@dataclass(frozen=True)
class ModelSettings:
    """Where the models live, which model each assistant uses, and the limits of a call.

    The program reads them with the rest of its settings (``settings.Settings.models``,
    which names the variables); the defaults are here.
    """

    model: str = DEFAULT_MODEL
    api_key: str | None = None
    base_url: str | None = None
    model_overrides: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_tokens_overrides: Mapping[str, int] = field(default_factory=dict)
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    reply_seconds: float = DEFAULT_REPLY_SECONDS

    def model_for(self, assistant: str) -> str:
        """Return the model name of ``assistant``."""
        return self.model_overrides.get(assistant, self.model)

    def max_tokens_for(self, assistant: str) -> int:
        """Return the output limit of one reply of ``assistant``."""
        return self.max_tokens_overrides.get(assistant, self.max_tokens)

    def check(self, specialists: Sequence[Specialist] = SPECIALISTS) -> None:
        """Raise ``ModelConfigError`` naming what to set when no endpoint is usable.

        The limits are checked too: every assistant's reply must leave a prompt budget
        in the context window.
        """
        if not self.api_key and not self.base_url:
            raise ModelConfigError(
                "No model endpoint is configured. Set OPENAI_API_KEY for the OpenAI API, "
                "or OPENAI_BASE_URL for an OpenAI-compatible server "
                "(for example http://localhost:11434/v1 for Ollama), "
                "in the environment or in a .env file."
            )
        largest = max(self.max_tokens_for(name) for name in assistant_names(specialists))
        if self.context_tokens - largest < MIN_PROMPT_TOKENS:
            raise ModelConfigError(
                f"A context window of {self.context_tokens} tokens leaves too little room for "
                f"the prompt beside replies of up to {largest} tokens (at least "
                f"{MIN_PROMPT_TOKENS} are needed). Raise {CONTEXT_TOKENS_ENV} to the "
                f"server's context size, or lower --max-tokens / {MAX_TOKENS_ENV}."
            )

    @property
    def sends_legacy_max_tokens(self) -> bool:
        """Tell whether the reply limit goes as ``max_tokens`` rather than its new name.

        OpenAI's API wants ``max_completion_tokens``; other servers may ignore it (older
        llama.cpp and its forks do, and a reply is then unbounded), while every
        OpenAI-compatible server reads ``max_tokens``.
        """
        return bool(self.base_url) and "api.openai.com" not in str(self.base_url)


def build_chat_models(
    settings: ModelSettings, specialists: Sequence[Specialist] = SPECIALISTS
) -> dict[str, BaseChatModel]:
    """Build one chat model per distinct (model name, reply limit), keyed by assistant."""
    # Imported here: langchain-openai is slow to import.
    from assistants.openai_chat import BoundedChatOpenAI

    settings.check(specialists)
    # A local server needs no key, but the client insists on one.
    api_key = settings.api_key or "not-needed"
    built: dict[tuple[str, int], BaseChatModel] = {}
    http_client = async_http_client()
    by_assistant: dict[str, BaseChatModel] = {}
    for assistant in assistant_names(specialists):
        key = (settings.model_for(assistant), settings.max_tokens_for(assistant))
        if key not in built:
            # The reply limit under the name the server reads: OpenAI's own API wants
            # ``max_completion_tokens`` (ChatOpenAI's ``max_tokens``), other servers read
            # ``max_tokens``, sent as it is in the request body.
            limit: dict[str, Any] = (
                {"extra_body": {"max_tokens": key[1]}}
                if settings.sends_legacy_max_tokens
                else {"max_tokens": key[1]}
            )
            built[key] = BoundedChatOpenAI(
                http_async_client=http_client,
                model=key[0],
                api_key=api_key,  # type: ignore[arg-type]
                base_url=settings.base_url,
                timeout=settings.timeout,
                max_retries=CLIENT_MAX_RETRIES,
                streaming=True,
                stream_usage=True,
                context_tokens=settings.context_tokens,
                reply_seconds=settings.reply_seconds,
                reply_tokens=key[1],
                **limit,
            )
        by_assistant[assistant] = built[key]
    return by_assistant


def async_http_client() -> Any | None:
    """Return the HTTP client the models' requests go over: the OpenAI SDK's aiohttp one.

    The SDK's default (httpx) parses HTTP in Python and probes every pooled connection
    around each request; its aiohttp client (``openai.DefaultAioHttpClient``, public
    since openai 1.x with the ``aiohttp`` extra) spends about half the CPU per request.
    Its connections belong to the loop that opens them: every turn of a process runs on
    one loop (``conversations.loop``). ``None`` (the SDK's default) without aiohttp.
    """
    try:
        from openai import DefaultAioHttpClient

        client = DefaultAioHttpClient()
    except (ImportError, RuntimeError):  # no such client, or aiohttp is not installed
        return None
    _HTTP_CLIENTS.append(client)
    return client


# The clients ``async_http_client`` made, to close before the process ends.
_HTTP_CLIENTS: list[Any] = []


async def close_http_clients() -> None:
    """Close the models' HTTP clients, on the loop their connections belong to.

    The service does it as it stops, and ``conversations.loop`` when the process exits;
    aiohttp would otherwise complain on stderr of sessions left open.
    """
    while _HTTP_CLIENTS:
        client = _HTTP_CLIENTS.pop()
        with contextlib.suppress(Exception):  # leaving anyway: a close that fails is no loss
            await client.aclose()


def context_tokens_of(model: BaseChatModel) -> int:
    """Return the context window ``model`` was configured with (the default otherwise)."""
    value = getattr(model, "context_tokens", None)
    return value if isinstance(value, int) and value > 0 else DEFAULT_CONTEXT_TOKENS


def max_tokens_of(model: BaseChatModel) -> int:
    """Return the output limit of one reply of ``model`` (the default otherwise)."""
    for name in ("reply_tokens", "max_tokens"):
        value = getattr(model, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


def reply_seconds_of(model: BaseChatModel) -> float | None:
    """Return the total time one reply of ``model`` may take (``None``: no such limit)."""
    value = getattr(model, "reply_seconds", None)
    return float(value) if isinstance(value, int | float) and value > 0 else None
