"""What the strictest chat templates refuse, as a checker of requests.

Local servers (llama.cpp with ``--jinja``, vLLM, Ollama) render the request with the
model's Jinja chat template, and several templates raise on shapes the OpenAI API takes:

- Gemma, Llama 2 and Mistral v1-v3: "Conversation roles must alternate
  user/assistant/user/assistant/..." after the optional system message, starting with
  the user. Mistral v3 (and Devstral: "... except for tool calls and results") leaves
  assistant tool calls and tool results out of that count, so a tool exchange belongs to
  the assistant's turn: tool results are followed by an assistant message, never by a
  user message, and two user messages never follow each other.
- Qwen and Mistral Small: "System message must be at the beginning."
- OpenAI and vLLM: an assistant message with ``tool_calls`` must be followed by one tool
  message per call, and a tool message must answer a call of the assistant message
  before it.
- llama.cpp parses the arguments of every tool call in the history as a JSON object.
- An assistant message with neither text nor tool calls is refused by OpenAI and
  rendered as an empty turn by templates (small models then answer with nothing).
- A request ends with a user message or tool results: after an assistant message the
  generation prompt would open a second assistant turn in a row.

``problems`` checks the wire form (the list of role dicts the client sends); ``request``
turns LangChain messages into that form with langchain-openai's own converter, so what
is checked is what would be sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

ALTERNATE = "Conversation roles must alternate user/assistant/user/assistant/..."


def request(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Return ``messages`` as the OpenAI client would send them."""
    from langchain_openai.chat_models.base import _convert_message_to_dict

    return [_convert_message_to_dict(m) for m in messages]


def _text(content: Any) -> str | None:
    return content if isinstance(content, str) else None


def problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Return every rule of a strict template that ``messages`` break (empty: accepted)."""
    found: list[str] = []
    if not messages:
        return ["the request has no messages"]
    if messages[0].get("role") != "system":
        found.append("message 0: the first message must be the system message")
    expected: list[str] = []  # tool_call_ids still to be answered, in order
    previous = "system"
    for index, message in enumerate(messages):
        role = message.get("role")
        where = f"message {index} ({role})"
        if role in ("system", "developer"):
            if index != 0:
                found.append(f"{where}: System message must be at the beginning.")
            continue
        if expected and role != "tool":
            found.append(f"{where}: tool calls {expected} of the assistant are not answered")
            expected = []
        if role == "user":
            if previous not in ("system", "assistant"):
                found.append(f"{where}: {ALTERNATE} (after {previous})")
            if not (_text(message.get("content")) or "").strip():
                found.append(f"{where}: the user message is empty or not text")
            previous = "user"
        elif role == "assistant":
            if previous not in ("user", "tool"):
                found.append(f"{where}: {ALTERNATE} (after {previous})")
            calls = message.get("tool_calls") or []
            text = _text(message.get("content"))
            if message.get("content") is not None and text is None:
                found.append(f"{where}: the assistant's content is not text")
            if not calls and not (text or "").strip():
                found.append(f"{where}: the assistant message is empty")
            for call in calls:
                arguments = call.get("function", {}).get("arguments")
                try:
                    parsed = json.loads(arguments) if isinstance(arguments, str) else None
                except ValueError:
                    parsed = None
                if not isinstance(parsed, dict):
                    found.append(f"{where}: tool call arguments are not a JSON object")
            expected = [str(c.get("id")) for c in calls]
            previous = "assistant_calls" if calls else "assistant"
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            if previous not in ("assistant_calls", "tool"):
                found.append(f"{where}: a tool result must follow the assistant's tool calls")
            elif call_id not in expected:
                found.append(f"{where}: tool result {call_id} answers no pending call")
            else:
                expected.remove(call_id)
            if _text(message.get("content")) is None:
                found.append(f"{where}: the tool result is not text")
            previous = "tool"
        else:
            found.append(f"{where}: unknown role")
    if expected:
        found.append(f"end: tool calls {expected} of the assistant are not answered")
    if previous not in ("user", "tool"):
        found.append(
            f"end: the request ends with {previous}, not with a user message or tool results"
        )
    return found


def check(messages: Sequence[BaseMessage]) -> list[str]:
    """Return the problems of LangChain ``messages`` as they would be sent."""
    return problems(request(messages))
