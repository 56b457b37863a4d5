"""Whether the model server honours tool definitions, asked once when a command starts.

The assistant does everything through tools: without them it cannot look a booking up
or change one, and a model that never sees the tools still answers, in words ("The hotel
is now yours"). Some servers drop the tools of a request without an error: llama.cpp
does when the model's chat template has no place for them (SmolLM2, Gemma 3 270M), and
``tool_choice: "required"`` is then ignored too. So the start asks, in the cheapest way
the server offers:

- OpenAI's own API (no ``OPENAI_BASE_URL``, or ``api.openai.com``) is not asked: it calls
  tools with every chat model, and asking would bill a completion on every start.
- A server with llama.cpp's ``POST /apply-template`` (the prompt its chat template makes
  of a request, with no model run) is given a request with one tool: the tool's name is
  in the prompt, or the template drops tools.
- Any other server gets one small chat request with one tool and ``tool_choice:
  "required"`` (at most ``PROBE_TOKENS`` tokens of reply): a server that honours tools
  answers with a call, one that drops them answers in words, one that refuses them says
  why in a 4xx.

What cannot be told (a timeout, a 5xx, an unknown model) is not a verdict: the chat
says the real error when it happens. ``ToolsUnsupportedError`` carries the one line the
commands say, with the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from assistants.models import ModelSettings

# The tool every check offers; its name is what ``/apply-template``'s prompt must hold,
# and it appears nowhere else in the request.
PROBE_TOOL_NAME = "find_booking_status"
PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": PROBE_TOOL_NAME,
        "description": "Look up the status of a booking by its reference.",
        "parameters": {
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "The booking reference."}
            },
            "required": ["reference"],
        },
    },
}
PROBE_MESSAGES: list[dict[str, str]] = [
    {"role": "user", "content": "What is the status of booking ABC123?"}
]
# The reply limit of the one chat request: a call of the probe tool is about 20 tokens.
PROBE_TOKENS = 64
# How long the template endpoint may take (it runs no model).
TEMPLATE_TIMEOUT = 5.0

Verdict = Literal["honoured", "assumed", "unknown"]
_V1 = re.compile(r"/v1/?$")
_JINJA = re.compile(r"--jinja|requires? jinja", re.IGNORECASE)


class ToolsUnsupportedError(Exception):
    """The model server drops or refuses tools; ``str(error)`` is the line to say, with the fix."""


@dataclass(frozen=True)
class ToolSupport:
    """What the check found: ``verdict`` (the health check's word) and how it knows.

    ``honoured``: the server showed it uses tools; ``assumed``: OpenAI's own API, not
    asked; ``unknown``: the server did not answer the question (``how`` says why).
    """

    verdict: Verdict
    how: str


def is_openai_api(base_url: str | None) -> bool:
    """Tell whether ``base_url`` is OpenAI's own API (no base URL is OpenAI's too)."""
    return not base_url or "api.openai.com" in base_url


def server_root(base_url: str) -> str:
    """Return the server's root from its OpenAI base URL: ``http://h:8080/v1`` -> ``http://h:8080``."""
    return _V1.sub("", base_url.rstrip("/") + "/").rstrip("/")


def check_tool_support(settings: ModelSettings) -> ToolSupport:
    """Find out whether the server of ``settings`` honours tools, for each model it names.

    Raises:
        ToolsUnsupportedError: The server drops tools or refuses them (the message says
            what to do).
    """
    if is_openai_api(settings.base_url):
        return ToolSupport("assumed", "OpenAI's API calls tools: not asked")
    assert settings.base_url is not None
    models = sorted({settings.model, *settings.model_overrides.values()})
    found = [
        _check_model(
            settings,
            settings.base_url,
            model,
            settings.base_url if len(models) == 1 else f"{settings.base_url} (model {model})",
        )
        for model in models
    ]
    unknown = [support for support in found if support.verdict == "unknown"]
    return unknown[0] if unknown else found[0]


def _check_model(settings: ModelSettings, base_url: str, model: str, shown: str) -> ToolSupport:
    prompt = _template_prompt(settings, base_url, model)
    if prompt is not None:
        if PROBE_TOOL_NAME in prompt:
            return ToolSupport("honoured", "the chat template puts tools in the prompt")
        raise ToolsUnsupportedError(
            f"The model server at {shown} drops tools: its chat template leaves them out of "
            "the prompt (POST /apply-template), so the assistant could not look anything up "
            "or book anything. Start llama-server with a template that knows tools "
            "(--chat-template-file FILE, see docs/local-models.md) or another model, or "
            "pass --no-check to chat without tools."
        )
    return _probe(settings, base_url, model, shown)


def _headers(settings: ModelSettings) -> dict[str, str]:
    return {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}


def _template_prompt(settings: ModelSettings, base_url: str, model: str) -> str | None:
    """Return the prompt llama.cpp's ``/apply-template`` makes of a request with a tool.

    ``None`` when the server has no such endpoint (a 404, anything but a prompt).
    """
    import httpx

    body = {"model": model, "messages": PROBE_MESSAGES, "tools": [PROBE_TOOL]}
    try:
        response = httpx.post(
            f"{server_root(base_url)}/apply-template",
            json=body,
            headers=_headers(settings),
            timeout=TEMPLATE_TIMEOUT,
        )
        payload = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    prompt = payload.get("prompt") if isinstance(payload, dict) else None
    return prompt if isinstance(prompt, str) else None


def _probe(settings: ModelSettings, base_url: str, model: str, shown: str) -> ToolSupport:
    """Ask for one reply that must call the probe tool; tell what came back."""
    import openai

    from assistants.providers import server_reason

    client = openai.OpenAI(
        api_key=settings.api_key or "not-needed",
        base_url=base_url,
        timeout=settings.timeout,
        max_retries=0,
    )
    try:
        request: dict[str, Any] = {
            "model": model,
            "messages": PROBE_MESSAGES,
            "tools": [PROBE_TOOL],
            "tool_choice": "required",
            "max_tokens": PROBE_TOKENS,
            "temperature": 0,
        }
        completion = client.chat.completions.create(**request)
    except openai.APIStatusError as error:
        reason = server_reason(error)
        if error.status_code not in (400, 422):
            return ToolSupport("unknown", f"the test request failed ({reason})")
        fix = (
            "start llama-server with --jinja"
            if _JINJA.search(reason)
            else "start it with tool calls enabled (docs/local-models.md)"
        )
        raise ToolsUnsupportedError(
            f"The model server at {shown} refuses tools ({reason}): {fix}, or pass "
            "--no-check to chat without tools."
        ) from error
    except openai.APIError as error:
        return ToolSupport("unknown", f"the test request failed ({error})")
    choices = completion.choices
    if choices and choices[0].message.tool_calls:
        return ToolSupport("honoured", "a test request that required a tool call got one")
    raise ToolsUnsupportedError(
        f"The model server at {shown} ignores tools: asked for a reply that must call a "
        "tool, it answered in words, so the assistant could not look anything up or book "
        "anything. Use a server and model that call tools (docs/local-models.md), or pass "
        "--no-check to chat without tools."
    )
