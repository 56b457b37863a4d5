"""The assistant node: one prompt and one tool-calling model, with guards around them.

The guards are the ones the reference design lacked:

- an empty answer (no text, no tool call) or a malformed tool call is asked again a
  bounded number of times, then replaced by a polite apology;
- a turn that is about to run out of steps ends with a polite message instead of an
  exception;
- only a bounded window of history is sent to the model, cut at a customer message so
  no tool result is ever separated from the call it answers.

Provider errors (timeouts, rate limits) are retried by the graph's retry policy on this
node, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from assistants.prompts import EMPTY_ANSWER_APOLOGY, EMPTY_ANSWER_NUDGE, STEP_LIMIT_APOLOGY
from assistants.state import State
from db.clock import Clock

# How many more times an empty or malformed answer is asked for before apologising.
MAX_EMPTY_RETRIES = 2
# An assistant that wants tools with fewer steps left than this answers in words instead:
# a tool call needs its tool node and one more assistant step to be answered.
STEP_RESERVE = 4
# How many messages of history are sent to the model at most (the system prompt, with
# the bookings and the time, always goes in addition).
MAX_HISTORY_MESSAGES = 40

ToolLike = BaseTool | type[BaseModel]


def make_runnable(
    model: BaseChatModel, system_prompt: str, tools: Sequence[ToolLike]
) -> Runnable[dict[str, Any], Any]:
    """Bind ``tools`` to ``model`` behind the system prompt template ``system_prompt``."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", system_prompt), ("placeholder", "{messages}")]
    )
    return prompt | model.bind_tools(list(tools))


def trim_history(
    messages: Sequence[AnyMessage], limit: int = MAX_HISTORY_MESSAGES
) -> list[AnyMessage]:
    """Keep at most about ``limit`` recent messages, starting at a customer message.

    The current turn is always kept whole, even when it alone is longer than ``limit``,
    because dropping part of it would separate tool results from their calls.
    """
    if len(messages) <= limit:
        return list(messages)
    start = len(messages) - limit
    human_indexes = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    later = [i for i in human_indexes if i >= start]
    if later:
        return list(messages[later[0] :])
    if human_indexes:
        return list(messages[human_indexes[-1] :])
    return list(messages[start:])


def _text_of(message: AIMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [
        block if isinstance(block, str) else str(block.get("text", ""))
        for block in content
        if isinstance(block, str) or block.get("type") == "text"
    ]
    return "".join(parts)


def _problem_with(message: Any) -> str | None:
    """Return why ``message`` is not a usable answer, or ``None`` when it is."""
    if not isinstance(message, AIMessage):
        return EMPTY_ANSWER_NUDGE
    if message.invalid_tool_calls:
        details = "; ".join(
            f"{c.get('name') or 'a tool'}: {c.get('error') or 'arguments are not valid JSON'}"
            for c in message.invalid_tool_calls
        )
        return (
            f"Your tool call could not be read ({details}). "
            "Call the tool again with valid arguments."
        )
    if not message.tool_calls and not _text_of(message).strip():
        return EMPTY_ANSWER_NUDGE
    return None


class Assistant:
    """A graph node that asks one model for the next message of one assistant."""

    def __init__(
        self,
        name: str,
        runnable: Runnable[dict[str, Any], Any],
        *,
        clock: Clock,
        max_retries: int = MAX_EMPTY_RETRIES,
        history_limit: int = MAX_HISTORY_MESSAGES,
    ) -> None:
        """Wrap ``runnable`` (prompt | model with tools) as the node of assistant ``name``."""
        self.name = name
        self.runnable = runnable
        self.clock = clock
        self.max_retries = max_retries
        self.history_limit = history_limit

    def __call__(self, state: State, config: RunnableConfig) -> dict[str, list[AnyMessage]]:
        """Return the assistant's next message for ``state``."""
        history = trim_history(state["messages"], self.history_limit)
        inputs: dict[str, Any] = {
            "messages": history,
            "user_info": state.get("user_info", ""),
            "time": self.clock().strftime("%Y-%m-%d %H:%M UTC (%A)"),
        }
        result: AIMessage | None = None
        for _ in range(self.max_retries + 1):
            answer = self.runnable.invoke(inputs, config)
            problem = _problem_with(answer)
            if problem is None:
                result = answer
                break
            inputs = {**inputs, "messages": [*history, HumanMessage(content=problem)]}
        if result is None:
            result = AIMessage(content=EMPTY_ANSWER_APOLOGY)
        if result.tool_calls and state.get("remaining_steps", STEP_RESERVE) < STEP_RESERVE:
            result = AIMessage(content=STEP_LIMIT_APOLOGY)
        if not result.name:
            result = result.model_copy(update={"name": self.name})
        return {"messages": [result]}
