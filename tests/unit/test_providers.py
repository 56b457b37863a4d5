"""Provider errors: the server's own reason, and a hint that is true (retry or what to do)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import openai
import pytest

from assistants.call_limits import ContextBudgetError, ModelDeadlineError, time_limit
from assistants.calls import bounded
from assistants.providers import (
    ModelProviderError,
    describe_provider_error,
    diagnose,
    is_transient_provider_error,
    reason_of,
)
from tests.support.fake_openai import TEMPLATE_ERROR

try:  # the HTTP library the installed openai client uses
    import httpx2 as http
except ImportError:  # pragma: no cover - older openai releases use httpx
    import httpx as http  # type: ignore[no-redef]


def status_error(
    status: int,
    body: Any,
    headers: dict[str, str] | None = None,
    model: str = "qwen3:8b",
    messages: list[dict[str, str]] | None = None,
) -> openai.APIStatusError:
    sent: dict[str, Any] = {"model": model}
    if messages is not None:
        sent["messages"] = messages
    request = http.Request("POST", "http://127.0.0.1:8080/v1/chat/completions", json=sent)
    response = http.Response(status, headers=headers or {}, request=request)
    data = body.get("error", body) if isinstance(body, dict) else body
    kinds: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        429: openai.RateLimitError,
    }
    kind = kinds.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return kind(f"Error code: {status} - {body}", response=response, body=data)


def error_body(message: str, status: int = 400) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "type": "invalid_request_error"}}


def test_reason_of_finds_the_line_that_says_why() -> None:
    text = TEMPLATE_ERROR.replace("{reason}", "Conversation roles must alternate user/assistant")
    reason = reason_of(text)
    assert reason == (
        "Unable to generate parser for this template. Automatic parser generation failed: "
        "Conversation roles must alternate user/assistant"
    )
    assert reason_of("Error code: 400 - model not found") == "model not found"
    assert len(reason_of("x" * 5000)) <= 300


def test_template_error_is_not_retried_and_says_it_is_a_bug() -> None:
    message = TEMPLATE_ERROR.replace("{reason}", "Conversation roles must alternate user/...")
    for status in (400, 500):  # llama.cpp has answered both
        error = status_error(status, error_body(message, status))
        failure = diagnose(error)
        assert not failure.retryable
        assert "Conversation roles must alternate" in failure.message()
        assert "bug in travel-assistant" in failure.hint
        assert not is_transient_provider_error(error)


def test_rate_limit_names_the_wait_the_server_asked_for() -> None:
    error = status_error(429, error_body("Too many requests", 429), {"Retry-After": "20"})
    failure = diagnose(error)
    assert failure.retryable and is_transient_provider_error(error)
    assert failure.message() == (
        "The model server is rate-limiting requests (HTTP 429): Too many requests. "
        "The server asked to wait 20 s: send your message again after that."
    )
    quota = status_error(
        429, error_body("You exceeded your current quota, please check your plan", 429)
    )
    assert not diagnose(quota).retryable
    assert "billing" in diagnose(quota).hint


def test_server_errors_are_retried() -> None:
    error = status_error(503, {"error": {"message": "Loading model", "code": 503}})
    failure = diagnose(error)
    assert failure.retryable
    assert "(HTTP 503): Loading model." in failure.message()
    assert "Sending your message again may work" in failure.message()


@pytest.mark.parametrize(
    ("status", "body", "expected", "hint"),
    [
        (401, error_body("Invalid API key"), "rejected the API key", "OPENAI_API_KEY"),
        (403, error_body("forbidden"), "refused access", "OPENAI_API_KEY"),
        (404, error_body("model 'qwen3:8b' not found"), "no model 'qwen3:8b'", "--model"),
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                }
            },
            "too long for the model server's context window",
            "TRAVEL_ASSISTANT_CONTEXT_TOKENS",
        ),
        (
            400,
            # vLLM puts the message at the top level of the body.
            {
                "object": "error",
                "message": '"auto" tool choice requires '
                "--enable-auto-tool-choice and --tool-call-parser to be set",
                "code": 400,
            },
            "cannot make tool calls",
            "--tool-call-parser",
        ),
        (
            400,
            error_body("registry.ollama.ai/library/gemma2 does not support tools"),
            "cannot make tool calls",
            "--jinja",
        ),
        (422, error_body("bad field"), "refused the request", "will not help"),
    ],
)
def test_errors_that_a_retry_cannot_fix_say_what_to_do(
    status: int, body: dict[str, Any], expected: str, hint: str
) -> None:
    error = status_error(status, body)
    failure = diagnose(error)
    assert not failure.retryable
    assert expected in failure.message()
    assert hint in failure.hint
    assert "will not help" in failure.hint


def test_timeouts_and_dropped_connections_are_retried() -> None:
    request = http.Request("POST", "http://127.0.0.1/v1/chat/completions")
    for error in (
        openai.APITimeoutError(request=request),
        http.RemoteProtocolError("peer closed connection without sending complete message body"),
        http.ReadTimeout("timed out"),
        openai.APIConnectionError(request=request),
    ):
        failure = diagnose(error)
        assert failure.retryable, error
        assert is_transient_provider_error(error)
    dropped = diagnose(http.RemoteProtocolError("peer closed connection (incomplete read)"))
    assert dropped.message().startswith("The connection to the model server broke off")


def test_our_own_limits_are_not_retried() -> None:
    for error in (ModelDeadlineError(300), ContextBudgetError(9000, 7000)):
        assert not diagnose(error).retryable
        assert not is_transient_provider_error(error)
    assert "lower --max-tokens" in describe_provider_error(ModelDeadlineError(300))


def test_model_provider_error_carries_the_advice_of_its_cause() -> None:
    cause = status_error(401, error_body("Invalid API key"))
    try:
        raise ModelProviderError(describe_provider_error(cause)) from cause
    except ModelProviderError as error:
        assert not error.retryable
        assert "OPENAI_API_KEY" in error.hint
    built = ModelProviderError.from_error(status_error(503, error_body("busy", 503)))
    assert built.retryable and "busy" in str(built)


def test_a_call_is_bounded_by_its_reply_limit_and_by_the_runs() -> None:
    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    async def quick() -> str:
        return "on time"

    async def calls() -> None:
        with pytest.raises(ModelDeadlineError, match="limit for one reply"):
            await bounded(slow(), 0.05)
        with time_limit(0.05):
            with pytest.raises(ModelDeadlineError, match="time limit of this run"):
                await bounded(slow(), 10)  # the run's limit is the nearer one
            await asyncio.sleep(0.06)
            with pytest.raises(ModelDeadlineError, match="time limit of this run"):
                await bounded(quick(), 10)  # nothing starts after the run's limit
        assert await bounded(quick(), None) == "on time"  # outside the block, no limit

    started = time.monotonic()
    asyncio.run(calls())
    assert time.monotonic() - started < 2


def test_a_call_that_lets_a_cancel_slip_is_cancelled_again() -> None:
    # On Python 3.11 asyncio.wait_for drops a cancel that meets a result in the same
    # loop pass, and langchain-openai waits for each streamed chunk with it: the call
    # goes on as if it had never been cancelled.
    cancels = []

    async def streams_on() -> str:
        for _ in range(200):
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                cancels.append(time.monotonic())
                if len(cancels) > 1:
                    raise
        return "the whole reply"

    started = time.monotonic()
    with pytest.raises(ModelDeadlineError, match="limit for one reply"):
        asyncio.run(bounded(streams_on(), 0.05))
    assert len(cancels) == 2
    assert time.monotonic() - started < 2


CONTEXT_FULL = error_body("the request exceeds the available context size, try increasing it")


def test_context_error_on_the_first_message_says_the_server_needs_a_larger_context() -> None:
    first = [{"role": "system", "content": "..."}, {"role": "user", "content": "Hi"}]
    failure = diagnose(status_error(400, CONTEXT_FULL, messages=first))
    assert "too small even for the first message" in failure.what
    # The fix that works comes first, and nothing that cannot help is offered.
    assert failure.hint.startswith("Sending it again will not help: start the model server")
    assert "-c 8192" in failure.hint
    for useless in ("/new", "--max-tokens", "TRAVEL_ASSISTANT_CONTEXT_TOKENS"):
        assert useless not in failure.hint


def test_context_error_in_a_long_conversation_puts_the_larger_context_first() -> None:
    long = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}] * 3
    failure = diagnose(status_error(400, CONTEXT_FULL, messages=long))
    assert "conversation is too long" in failure.what
    hint = failure.hint
    assert (
        hint.index("-c 8192") < hint.index("TRAVEL_ASSISTANT_CONTEXT_TOKENS") < hint.index("/new")
    )


def test_our_own_context_budget_puts_the_larger_context_first() -> None:
    failure = diagnose(ContextBudgetError(9000, 3000))
    assert failure.hint.index("-c 8192") < failure.hint.index("--max-tokens")
    assert "/new" not in failure.hint  # older turns are trimmed already
