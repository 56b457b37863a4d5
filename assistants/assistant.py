"""The assistant node: one prompt and one tool-calling model, with guards around them.

The guards are the ones the reference design lacked, and the ones real model servers
need:

- every request is a conversation the strictest chat templates accept, whatever the
  saved history holds (``assistants.context.normalise``), and fits the model's context
  window (``assistants.context.fit``), trimmed at customer messages so no tool result is
  ever separated from the call it answers;
- an empty answer (no text, no tool call) or a malformed tool call is asked again a
  bounded number of times, with the problem stated in the system prompt (not as a second
  customer message in a row), then replaced by a polite apology;
- a reply the server cut at the output limit (``finish_reason == "length"``) keeps its
  text, ends with a note saying so, and loses its tool calls, whose arguments were cut:
  nothing runs from it, and the note tells the model nothing was done;
- a turn that is about to run out of steps ends with a polite message instead of an
  exception.

Provider errors (timeouts, rate limits) are retried by the graph's retry policy on this
node, not here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import SystemMessagePromptTemplate
from langchain_core.runnables import RunnableConfig

from assistants.context import (
    CUT_OFF_KEY,
    REQUEST_OVERHEAD,
    ToolLike,
    cut_off_note,
    estimate_tokens,
    fit,
    is_cut_off,
    mark_cut_off,
    message_tokens,
    normalise,
    sent_at,
    text_of,
    time_label,
    tools_tokens,
)
from assistants.models import context_tokens_of, max_tokens_of
from assistants.prompts import (
    EMPTY_ANSWER_APOLOGY,
    EMPTY_ANSWER_NUDGE,
    REASK_NOTE,
    STEP_LIMIT_APOLOGY,
)
from assistants.providers import check_time_limit
from assistants.state import State
from db.clock import Clock
from tools.common import storable_tool_calls

__all__ = [
    "CUT_OFF_KEY",
    "MAX_EMPTY_RETRIES",
    "MAX_HISTORY_MESSAGES",
    "STEP_RESERVE",
    "Assistant",
    "ToolLike",
    "cut_off_note",
    "is_cut_off",
    "mark_cut_off",
    "trim_history",
]

# How many more times an empty or malformed answer is asked for before apologising.
MAX_EMPTY_RETRIES = 2
# An assistant that wants tools with fewer steps left than this answers in words instead:
# a tool call needs its tool node and one more assistant step to be answered.
STEP_RESERVE = 4
# How many messages of history are sent to the model at most (the system prompt, with
# the bookings and the time, always goes in addition); the token budget may cut more.
MAX_HISTORY_MESSAGES = 40
# The history window starts only at every this-many-th customer message (see
# ``block_window``), so the start of the prompt stays the same for several turns.
TURNS_PER_BLOCK = 4


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


def block_window(
    messages: Sequence[AnyMessage],
    fits: Callable[[Sequence[AnyMessage]], bool],
    limit: int = MAX_HISTORY_MESSAGES,
    block: int = TURNS_PER_BLOCK,
) -> list[AnyMessage] | None:
    """Return the longest end of ``messages`` that starts a block of turns and fits.

    The window may start only at every ``block``-th customer message of the conversation,
    so it keeps the same start for several turns and then jumps ahead by whole blocks.
    Between jumps every model call repeats the start of the one before, which a
    provider's prompt cache can reuse; a window cut at the latest turn that fits would
    move on every turn and miss the cache each time.

    Returns:
        The window, or ``None`` when no block start fits (then the caller trims turn by
        turn: ``trim_history`` and ``assistants.context.fit``).
    """
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for ordinal, start in enumerate(starts):
        if ordinal % block:
            continue
        window = messages[start:]
        if len(window) <= limit and fits(window):
            return list(window)
    return None


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
    if not message.tool_calls and not text_of(message).strip():
        return EMPTY_ANSWER_NUDGE
    return None


class Assistant:
    """A graph node that asks one model for the next message of one assistant."""

    def __init__(
        self,
        name: str,
        model: BaseChatModel,
        system_prompt: str,
        tools: Sequence[ToolLike],
        *,
        clock: Clock,
        max_retries: int = MAX_EMPTY_RETRIES,
        history_limit: int = MAX_HISTORY_MESSAGES,
        prompt_budget: int | None = None,
    ) -> None:
        """Bind ``tools`` to ``model`` behind ``system_prompt`` as the node of ``name``.

        ``system_prompt`` is a template with ``{user_info}``.
        ``prompt_budget`` is the most tokens a request may take; by default the model's
        context window less its reply limit (``assistants.models``).
        """
        self.name = name
        self.prompt = SystemMessagePromptTemplate.from_template(system_prompt)
        self.model = model.bind_tools(list(tools))
        self.clock = clock
        self.max_retries = max_retries
        self.history_limit = history_limit
        self.tools = list(tools)
        self._tools_tokens: int | None = None
        self.prompt_budget = (
            prompt_budget
            if prompt_budget is not None
            else context_tokens_of(model) - max_tokens_of(model)
        )

    def request(
        self, system: str, conversation: Sequence[BaseMessage], problem: str | None = None
    ) -> list[BaseMessage]:
        """Return the messages of one model call: the system prompt, then what fits."""
        if problem:
            system += REASK_NOTE.format(problem=problem)
        return [SystemMessage(content=system), *fit(conversation, self.budget_for(system))]

    def budget_for(self, system: str) -> int:
        """Return the tokens left for the conversation beside ``system`` and the tools."""
        if self._tools_tokens is None:  # measured on first use: building a graph stays fast
            self._tools_tokens = tools_tokens(self.tools)
        fixed = REQUEST_OVERHEAD + self._tools_tokens + estimate_tokens(system)
        return self.prompt_budget - fixed

    def __call__(self, state: State, config: RunnableConfig) -> dict[str, list[AnyMessage]]:
        """Return the assistant's next message for ``state``."""
        system = self.prompt.format(user_info=state.get("user_info", ""))
        budget = self.budget_for(text_of(system))
        history = block_window(
            state["messages"],
            lambda window: sum(message_tokens(m) for m in normalise(window)) <= budget,
            self.history_limit,
        ) or trim_history(state["messages"], self.history_limit)
        conversation = normalise(history)
        latest = next((m for m in reversed(history) if isinstance(m, HumanMessage)), None)
        if latest is None or sent_at(latest) is None:
            # A history saved before messages carried their time (or a graph run without
            # ``fetch_user_info``): say the time in the prompt instead.
            now = time_label(self.clock())
            system = system.model_copy(
                update={"content": f"{text_of(system)}\nCurrent time: {now}.\n"}
            )
        problem: str | None = None
        result: AIMessage | None = None
        for _ in range(self.max_retries + 1):
            check_time_limit()
            answer = self.model.invoke(self.request(text_of(system), conversation, problem), config)
            if isinstance(answer, AIMessage) and is_cut_off(answer):
                result = mark_cut_off(answer)
                break
            problem = _problem_with(answer)
            if problem is None:
                result = answer
                break
        if result is None:
            result = AIMessage(content=EMPTY_ANSWER_APOLOGY)
        if result.tool_calls and state.get("remaining_steps", STEP_RESERVE) < STEP_RESERVE:
            result = AIMessage(content=STEP_LIMIT_APOLOGY)
        if result.tool_calls:
            # The checkpointer cannot store an integer past 64 bits (msgpack); as text it
            # still reaches the tool, which refuses it with a short error.
            result = result.model_copy(
                update={"tool_calls": storable_tool_calls(result.tool_calls)}
            )
        if not result.name:
            result = result.model_copy(update={"name": self.name})
        return {"messages": [result]}
