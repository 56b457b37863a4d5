"""Failures of the model endpoint: which are worth retrying, and how they are reported.

The graph retries a failed assistant node with ``DEFAULT_RETRY_POLICY`` (backoff on
timeouts, rate limits, server errors and dropped connections); the HTTP client itself
does not retry, so retries happen in one place. What still fails reaches the caller as
``ModelProviderError``, with the conversation saved, and with a message a customer or a
clerk can act on: what happened, the server's own words for why (the line of a long
error body that says it, not its first line), and whether sending the message again can
help, or what to do instead (``diagnose``). Our own limits on a call, which end it too,
are ``assistants.call_limits``.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from langgraph.types import RetryPolicy

from assistants.call_limits import ContextBudgetError, ModelDeadlineError

# How much of the server's message is shown at most.
MAX_REASON_CHARS = 300


class ModelProviderError(Exception):
    """The model endpoint kept failing; the conversation is saved and can go on.

    ``str(error)`` is the whole message for the customer: what happened, why, and what
    helps. ``retryable`` tells whether sending the same message again can work, and
    ``hint`` is the advice alone.
    """

    def __init__(
        self, message: str, *, retryable: bool | None = None, hint: str | None = None
    ) -> None:
        """Carry ``message``; ``retryable`` and ``hint`` default to the cause's diagnosis."""
        super().__init__(message)
        self._retryable = retryable
        self._hint = hint

    @classmethod
    def from_error(cls, error: BaseException) -> ModelProviderError:
        """Return the error to raise (``from error``) for a failed model call."""
        failure = diagnose(error)
        return cls(failure.message(), retryable=failure.retryable, hint=failure.hint)

    def _diagnosis(self) -> ProviderFailure | None:
        # Callers may build the error from ``describe_provider_error`` alone and raise it
        # ``from`` the cause: the advice then comes from the cause.
        cause = self.__cause__
        return diagnose(cause) if isinstance(cause, Exception) else None

    @property
    def retryable(self) -> bool:
        """Tell whether sending the same message again can work."""
        if self._retryable is not None:
            return self._retryable
        failure = self._diagnosis()
        return failure.retryable if failure else False

    @property
    def hint(self) -> str:
        """Return what helps: send again, wait, or what to change first."""
        if self._hint is not None:
            return self._hint
        failure = self._diagnosis()
        return failure.hint if failure else ""


# --- what failed, and what helps --------------------------------------------------------------


@dataclass(frozen=True)
class ProviderFailure:
    """How a model call failed, for the customer.

    Attributes:
        what: What happened, e.g. ``"The model server is rate-limiting requests (HTTP 429)"``.
        reason: The server's own words for why, shortened (may be empty).
        retryable: Sending the same message again can work.
        hint: What helps: send again, wait, or what to change first.
        status: The HTTP status, when the server answered.
    """

    what: str
    reason: str
    retryable: bool
    hint: str
    status: int | None = None

    def message(self) -> str:
        """Return the whole message: what, why, what helps."""
        text = self.what
        if self.reason:
            text += f": {self.reason}"
        text = text.rstrip()
        if not text.endswith((".", "!", "?", "…")):
            text += "."
        return f"{text} {self.hint}".strip()


def _httpx_errors(name: str) -> tuple[type[Exception], ...]:
    """Return the HTTP libraries' errors called ``name`` (their transport errors, timeouts).

    They escape the OpenAI client while a streamed reply is read, unwrapped. Recent
    ``openai`` releases use ``httpx2``, older ones ``httpx``: both are recognised.
    """
    found: list[type[Exception]] = []
    for library in ("httpx", "httpx2"):
        try:
            module = __import__(library)
        except ImportError:
            continue
        found.append(getattr(module, name))
    return tuple(found)


_CONTEXT_TOO_LONG = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|exceeds? the (available )?context|"
    r"too many tokens|prompt is too long|reduce the length|exceed_context|"
    r"input tokens exceed|longer than the model",
    re.IGNORECASE,
)
_TEMPLATE = re.compile(
    r"roles must alternate|jinja|chat template|parser for this template|"
    r"system message must be|raise_exception",
    re.IGNORECASE,
)
_NO_TOOLS = re.compile(
    r"does not support tools|tool choice requires|tools param requires|"
    r"enable-auto-tool-choice|--jinja|tool[_ ]calls? (are|is) not supported",
    re.IGNORECASE,
)
_QUOTA = re.compile(r"insufficient_quota|exceeded your current quota|billing", re.IGNORECASE)
_NOISE = re.compile(r"^[-=~^.\s]*$")
_PREFIX = re.compile(r"^(Error code: \d+ - )")


def reason_of(text: str) -> str:
    """Return the part of a server's error message that says why, on one line.

    A template error from llama.cpp reads "Unable to generate parser for this template.
    Automatic parser generation failed:" and then, lines later, after a source excerpt,
    "Error: Jinja Exception: Conversation roles must alternate ...": the first line alone
    says nothing. Keep the first line and the line that names the error.
    """
    lines = [line.strip() for line in _PREFIX.sub("", text).splitlines()]
    lines = [line for line in lines if line and not _NOISE.match(line)]
    if not lines:
        return ""
    first = lines[0]
    named = [
        line for line in lines[1:] if re.match(r"^(error|exception)\b", line, re.IGNORECASE)
    ] or [line for line in lines[1:] if "Exception:" in line or "Error:" in line]
    if named:
        why = re.sub(r"^(?:\w*Error|\w*Exception)\s*:\s*", "", named[-1], flags=re.IGNORECASE)
        why = re.sub(r"^(?:Jinja Exception|\w*Exception)\s*:\s*", "", why)
        reason = why if first.startswith(("---", "While ")) else f"{first.rstrip(': ')}: {why}"
    elif len(lines) > 1:
        reason = f"{first.rstrip(': ')}: {lines[-1]}"
    else:
        reason = first
    reason = " ".join(reason.split())
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1].rstrip() + "…"
    return reason


def server_reason(error: BaseException) -> str:
    """Return the server's own words for why ``error`` happened, on one line."""
    return reason_of(_server_text(error))


def _server_text(error: BaseException) -> str:
    """Return the server's message from an error's JSON body, or the error's text."""
    body = getattr(error, "body", None)
    if isinstance(body, Mapping):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, Mapping):
                value = value.get("message")
            if isinstance(value, str) and value.strip():
                return value
    if isinstance(body, str) and body.strip():
        return body
    message = getattr(error, "message", None)
    return message if isinstance(message, str) and message.strip() else str(error)


def _retry_after(error: BaseException) -> float | None:
    """Return the seconds the server asked to wait (``Retry-After``), if it said."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        with contextlib.suppress(ValueError):
            return float(milliseconds) / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def _request_payload(error: BaseException) -> dict[str, Any] | None:
    """Return the JSON body of the failed request, when it can be read back."""
    request = getattr(error, "request", None)
    try:
        payload = json.loads(getattr(request, "content", b"") or b"{}")
    except (TypeError, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


def _customer_messages(error: BaseException) -> int | None:
    """Return how many customer messages the failed request held, when it can be read."""
    payload = _request_payload(error)
    messages = payload.get("messages") if payload is not None else None
    if not isinstance(messages, list):
        return None
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "user")


def _requested_model(error: BaseException) -> str | None:
    """Return the model name of the failed request, when it can be read back."""
    payload = _request_payload(error)
    model = payload.get("model") if payload is not None else None
    return model if isinstance(model, str) else None


SEND_AGAIN = "Sending your message again may work."
# The fix that works for a context window too small, first in every such advice.
LARGER_CONTEXT = (
    "start the model server with a larger context (llama.cpp: -c 8192; Ollama: "
    "OLLAMA_CONTEXT_LENGTH=8192; vLLM: --max-model-len 8192)"
)
DEFAULT_CONTEXT_HINT = "8192 tokens; 16384 keeps long conversations whole"
NOT_AGAIN = "Sending it again will not help"
BUG_HINT = (
    f"{NOT_AGAIN}: this is a bug in travel-assistant (run with --debug and report it); "
    "/new starts a fresh conversation."
)


def diagnose(error: BaseException) -> ProviderFailure:
    """Tell how a model call failed, whether retrying helps, and what to do."""
    if isinstance(error, ModelDeadlineError):
        if error.whole_run:
            return ProviderFailure(
                f"The run reached its time limit of {error.seconds:g} s",
                "",
                False,
                "The model server is too slow for this limit.",
            )
        return ProviderFailure(
            f"The model's reply was not finished after {error.seconds:g} s, "
            "the limit for one reply",
            "",
            False,
            "The model may be repeating itself: lower --max-tokens, or raise "
            "TRAVEL_ASSISTANT_REPLY_TIMEOUT if the server is only slow.",
        )
    if isinstance(error, ContextBudgetError):
        # Older turns are trimmed already: the current message with its results is too long.
        return ProviderFailure(
            "This message does not fit the model's context window",
            str(error),
            False,
            f"{NOT_AGAIN}: {LARGER_CONTEXT}, and set TRAVEL_ASSISTANT_CONTEXT_TOKENS to that "
            "size; or send a shorter message, or lower --max-tokens to leave the prompt "
            "more room.",
        )
    import openai

    if isinstance(error, openai.APIStatusError):
        return _diagnose_status(error, error.status_code)
    connection = _connection_failure(error)
    if connection is not None:
        return connection
    if isinstance(error, openai.OpenAIError):
        return ProviderFailure(
            "The model server's answer could not be used",
            reason_of(str(error)),
            False,
            f"{NOT_AGAIN} unless the server is fixed; run with --debug for details.",
        )
    return ProviderFailure(
        f"The model call failed ({type(error).__name__})",
        reason_of(str(error)),
        False,
        "Run with --debug for details.",
    )


def _causes(error: BaseException) -> Iterator[BaseException]:
    """Yield ``error`` and what it was raised from, innermost last (a few levels)."""
    current: BaseException | None = error
    for _ in range(8):
        if current is None:
            return
        yield current
        current = current.__cause__ or current.__context__


def _named(error: BaseException, name: str) -> bool:
    """Tell whether ``error`` is of a class called ``name`` (or of a subclass of one)."""
    return any(kind.__name__ == name for kind in type(error).__mro__)


def _connection_failure(error: BaseException) -> ProviderFailure | None:
    """Diagnose a timeout or a broken connection, or return ``None`` for anything else.

    The OpenAI client wraps what the HTTP library raised, so the chain of causes tells a
    server that cannot be reached from a stream that broke off mid-reply.
    """
    import openai

    broken: tuple[type[Exception], ...] = (ConnectionError, *_httpx_errors("TransportError"))
    if not isinstance(error, (openai.APIConnectionError, TimeoutError, *broken)):
        return None
    causes = list(_causes(error))
    transport = [c for c in causes if isinstance(c, broken)]
    # The SDK's aiohttp client (``assistants.models.async_http_client``) raises a refused
    # connection and a server that hung up as a "ConnectTimeout", which the SDK makes a
    # timeout: what it was raised from says what happened.
    refused = any(
        isinstance(c, ConnectionRefusedError) or _named(c, "ClientConnectorError") for c in causes
    )
    hung_up = any(_named(c, "ServerDisconnectedError") for c in causes)
    timeouts: tuple[type[Exception], ...] = (TimeoutError, *_httpx_errors("TimeoutException"))
    timed_out = isinstance(error, openai.APITimeoutError) or any(
        isinstance(c, timeouts) for c in causes
    )
    if timed_out and not (refused or hung_up):
        return ProviderFailure(
            "The model server did not answer in time",
            "",
            True,
            f"{SEND_AGAIN} If it keeps happening the server is overloaded or too slow for "
            "this model (TRAVEL_ASSISTANT_TIMEOUT gives it longer).",
        )
    unreachable = (
        refused or not transport or any(type(c).__name__ == "ConnectError" for c in transport)
    ) and not hung_up
    if unreachable:
        return ProviderFailure(
            "Cannot reach the model server",
            reason_of(str(transport[-1])) if transport else "",
            True,
            "Check that it is running and that OPENAI_BASE_URL points to it, then send "
            "your message again.",
        )
    return ProviderFailure(
        "The connection to the model server broke off during the reply",
        reason_of(str(transport[-1])),
        True,
        SEND_AGAIN,
    )


def _diagnose_status(error: BaseException, status: int) -> ProviderFailure:
    reason = reason_of(_server_text(error))
    code = f"(HTTP {status})"
    if _TEMPLATE.search(reason):
        # llama.cpp answers a template error with 400 or 500: either way, not transient.
        return ProviderFailure(
            f"The model server's chat template rejected the conversation {code}",
            reason,
            False,
            BUG_HINT,
            status,
        )
    if _NO_TOOLS.search(reason):
        return ProviderFailure(
            f"The model server cannot make tool calls as it was started {code}",
            reason,
            False,
            f"{NOT_AGAIN}: start llama-server with --jinja, vLLM with "
            "--enable-auto-tool-choice --tool-call-parser NAME, or pick a model that "
            "supports tools (README, Local models).",
            status,
        )
    if status == 429:
        if _QUOTA.search(reason):
            return ProviderFailure(
                f"The account behind OPENAI_API_KEY is out of quota {code}",
                reason,
                False,
                f"{NOT_AGAIN}: check the plan and billing of the account.",
                status,
            )
        wait = _retry_after(error)
        advice = (
            f"The server asked to wait {wait:.0f} s: send your message again after that."
            if wait is not None
            else "Wait a little, then send your message again."
        )
        return ProviderFailure(
            f"The model server is rate-limiting requests {code}", reason, True, advice, status
        )
    if status >= 500:
        return ProviderFailure(
            f"The model server failed {code}",
            reason,
            True,
            f"The fault is on the server's side. {SEND_AGAIN}",
            status,
        )
    if status == 401:
        return ProviderFailure(
            f"The model server rejected the API key {code}",
            reason,
            False,
            f"{NOT_AGAIN}: check OPENAI_API_KEY.",
            status,
        )
    if status == 403:
        return ProviderFailure(
            f"The model server refused access {code}",
            reason,
            False,
            f"{NOT_AGAIN}: check that the key in OPENAI_API_KEY may use this model.",
            status,
        )
    if status == 404:
        model = _requested_model(error)
        if model is not None or "model" in reason.lower():
            name = f" {model!r}" if model else ""
            return ProviderFailure(
                f"The model server has no model{name} {code}",
                reason,
                False,
                f"{NOT_AGAIN}: check --model or TRAVEL_ASSISTANT_MODEL against the "
                "server's models (GET $OPENAI_BASE_URL/models), or fetch the model first "
                "(for Ollama: ollama pull NAME).",
                status,
            )
        return ProviderFailure(
            f"The model server has no such endpoint {code}",
            reason,
            False,
            f"{NOT_AGAIN}: check OPENAI_BASE_URL (it usually ends in /v1).",
            status,
        )
    if _CONTEXT_TOO_LONG.search(reason):
        if _customer_messages(error) == 1:
            # Nothing to trim: the instructions, the tools and one message do not fit.
            return ProviderFailure(
                f"The model server's context window is too small even for the first message {code}",
                reason,
                False,
                f"{NOT_AGAIN}: {LARGER_CONTEXT} (the assistant needs {DEFAULT_CONTEXT_HINT}).",
                status,
            )
        return ProviderFailure(
            f"The conversation is too long for the model server's context window {code}",
            reason,
            False,
            f"{NOT_AGAIN}: {LARGER_CONTEXT}; or set TRAVEL_ASSISTANT_CONTEXT_TOKENS to the "
            "size the server was started with (4096 or more), so older turns are left "
            "out to fit; or start a new conversation with /new.",
            status,
        )
    return ProviderFailure(
        f"The model server refused the request {code}",
        reason,
        False,
        f"{NOT_AGAIN}; if it keeps happening, run with --debug and report it.",
        status,
    )


def describe_provider_error(error: Exception) -> str:
    """Return the customer's message for a failed model call (what, why, what helps)."""
    return diagnose(error).message()


def is_provider_error(error: BaseException) -> bool:
    """Tell whether ``error`` comes from the model endpoint or our limits on it."""
    if isinstance(error, ModelDeadlineError | ContextBudgetError | TimeoutError | ConnectionError):
        return True
    import openai

    return isinstance(error, (openai.OpenAIError, *_httpx_errors("TransportError")))


def is_transient_provider_error(error: Exception) -> bool:
    """Tell whether a model call failed for a reason worth retrying.

    Timeouts, dropped connections, rate limits (not an exhausted quota) and server
    errors (not a chat-template error, which comes back the same every time).
    """
    return is_provider_error(error) and diagnose(error).retryable


DEFAULT_RETRY_POLICY = RetryPolicy(
    initial_interval=1.0,
    backoff_factor=2.0,
    max_interval=20.0,
    max_attempts=4,
    retry_on=is_transient_provider_error,
)
