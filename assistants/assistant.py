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
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from assistants.call_limits import check_time_limit
from assistants.calls import bounded
from assistants.context import (
    CUT_OFF_KEY,
    REQUEST_OVERHEAD,
    ToolLike,
    cut_off_note,
    estimate_tokens,
    fit,
    history_fits,
    is_cut_off,
    latest_bookings,
    mark_cut_off,
    normalise,
    schemas_tokens,
    sent_at,
    time_label,
    tools_tokens,
)
from assistants.models import context_tokens_of, max_tokens_of, reply_seconds_of
from assistants.prompts import (
    EMPTY_ANSWER_APOLOGY,
    EMPTY_ANSWER_NUDGE,
    REASK_NOTE,
    STEP_LIMIT_APOLOGY,
)
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
    "history_window",
    "is_cut_off",
    "mark_cut_off",
]

# How many more times an empty or malformed answer is asked for before apologising.
MAX_EMPTY_RETRIES = 2
# An assistant that wants tools with fewer steps left than this answers in words instead:
# a tool call needs its tool node and one more assistant step to be answered.
STEP_RESERVE = 4
# How many messages of history are sent to the model at most (the system prompt, with
# the bookings, always goes in addition); the token budgets may cut more.
MAX_HISTORY_MESSAGES = 40
# How many tokens (as ``estimate_tokens`` counts them, about 4/3 of o200k's count) the
# earlier turns of a request may take beside the current turn. Every model call pays
# for its whole history again, so this bounds what a conversation costs per call, flat
# however long it grows; the current turn is always sent whole (within the model's
# context window), so no tool result of this turn is ever left out.
HISTORY_TOKENS = 2400
# The history window starts only at every this-many-th customer message (see
# ``block_window``), so the start of the prompt stays the same for several turns.
TURNS_PER_BLOCK = 4


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
        The window, or ``None`` when no block start fits (``history_window`` then cuts
        turn by turn).
    """
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for ordinal, start in enumerate(starts):
        if ordinal % block:
            continue
        window = messages[start:]
        if len(window) <= limit and fits(window):
            return list(window)
    return None


def history_window(
    messages: Sequence[AnyMessage],
    fits: Callable[[Sequence[AnyMessage]], bool],
    limit: int = MAX_HISTORY_MESSAGES,
    block: int = TURNS_PER_BLOCK,
) -> list[AnyMessage]:
    """Return the end of ``messages`` a request holds: whole turns, as many as fit.

    The window starts at a block start when one fits (``block_window``: the start then
    repeats from call to call), else at the earliest customer message from which the
    rest fits, else at the latest customer message: the current turn always goes whole.
    """
    window = block_window(messages, fits, limit, block)
    if window is not None:
        return window
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for start in starts:
        rest = messages[start:]
        if len(rest) <= limit and fits(rest):
            return list(rest)
    return list(messages[starts[-1] :]) if starts else list(messages)


def bound_tool_schemas(model: Runnable[Any, Any], count: int) -> list[dict[str, Any]] | None:
    """Return the tool definitions a model binding sends, when it holds them converted.

    ``ChatOpenAI.bind_tools`` converts every tool to OpenAI's form once and keeps the
    result in the binding: counting that is counting what is sent, without converting
    each tool's schema again. ``None`` when the binding holds no such list of ``count``
    definitions (another client, or a scripted model).
    """
    kwargs = getattr(model, "kwargs", None)
    schemas = kwargs.get("tools") if isinstance(kwargs, dict) else None
    if (
        isinstance(schemas, list)
        and len(schemas) == count
        and all(isinstance(s, dict) for s in schemas)
    ):
        return schemas
    return None


def _enters(message: BaseMessage, specialist: str) -> bool:
    """Tell whether ``message`` is the answer that handed the conversation to ``specialist``."""
    if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
        return False
    artifact = message.artifact
    return artifact.get("hand_over") == "enter" and artifact.get("specialist") == specialist


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
    if not message.tool_calls and not message.text.strip():
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
        history_tokens: int = HISTORY_TOKENS,
        prompt_budget: int | None = None,
        role_note: str = "",
    ) -> None:
        """Bind ``tools`` to ``model`` behind ``system_prompt`` as the node of ``name``.

        ``system_prompt`` is sent as it is, to every call (``assistants.prompts``).
        ``history_tokens`` bounds the earlier turns of a request (``HISTORY_TOKENS``).
        ``role_note`` ends the system prompt of a specialist when the message that
        handed it the conversation is no longer in the request.
        ``prompt_budget`` is the most tokens a request may take; by default the model's
        context window less its reply limit (``assistants.models``).
        """
        self.name = name
        self.system_prompt = system_prompt
        self.role_note = role_note
        self.model = model.bind_tools(list(tools))
        self.clock = clock
        self.max_retries = max_retries
        self.history_limit = history_limit
        self.history_tokens = history_tokens
        self.tools = list(tools)
        self._tools_tokens: int | None = None
        self.reply_seconds = reply_seconds_of(model)
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
            sent = bound_tool_schemas(self.model, len(self.tools))
            self._tools_tokens = (
                schemas_tokens(sent) if sent is not None else tools_tokens(self.tools)
            )
        fixed = REQUEST_OVERHEAD + self._tools_tokens + estimate_tokens(system)
        return self.prompt_budget - fixed

    def as_node(self) -> Runnable[State, dict[str, list[AnyMessage]]]:
        """Return this assistant as a graph node, sync and async (``acall`` on a loop)."""
        return RunnableLambda(self.__call__, afunc=self.acall, name=self.name)

    def __call__(self, state: State, config: RunnableConfig) -> dict[str, list[AnyMessage]]:
        """Return the assistant's next message for ``state`` (the graph run synchronously).

        A sync run has no cancel: only the client's own timeouts bound its model calls.
        Turns run async (``acall``).
        """
        system, conversation = self._prompt(state)
        problem: str | None = None
        for _ in range(self.max_retries + 1):
            check_time_limit()
            answer = self.model.invoke(self.request(system, conversation, problem), config)
            done, problem = _judge(answer)
            if done is not None:
                return self._finish(done, state)
        return self._finish(AIMessage(content=EMPTY_ANSWER_APOLOGY), state)

    async def acall(self, state: State, config: RunnableConfig) -> dict[str, list[AnyMessage]]:
        """Return the assistant's next message for ``state``, waiting on the event loop.

        Each model call is bounded by the turn's cancel and time limits
        (``assistants.calls.bounded``).
        """
        system, conversation = self._prompt(state)
        problem: str | None = None
        for _ in range(self.max_retries + 1):
            check_time_limit()
            request = self.request(system, conversation, problem)
            answer = await bounded(self.model.ainvoke(request, config), self.reply_seconds)
            done, problem = _judge(answer)
            if done is not None:
                return self._finish(done, state)
        return self._finish(AIMessage(content=EMPTY_ANSWER_APOLOGY), state)

    def _prompt(self, state: State) -> tuple[str, list[BaseMessage]]:
        """Return the system prompt and the conversation one model call sends."""
        messages = state["messages"]
        system = self.system_prompt
        user_info = state.get("user_info", "")
        budget = min(self.budget_for(system + user_info), self.history_tokens)
        history = history_window(
            messages,
            lambda window: history_fits(window, budget),
            self.history_limit,
        )
        # The bookings in force where the window starts (the window may start after the
        # message that carried them); a history saved before messages carried bookings
        # has only ``user_info``.
        start = len(messages) - len(history)
        carried = latest_bookings(messages[: start + 1]) or user_info or None
        conversation = normalise(history, carried)
        if self.role_note and not any(_enters(m, self.name) for m in history):
            system += self.role_note
        latest = next((m for m in reversed(history) if isinstance(m, HumanMessage)), None)
        if latest is None or sent_at(latest) is None:
            # A history saved before messages carried their time (or a graph run without
            # ``fetch_user_info``): say the time in the prompt instead.
            system += f"\nCurrent time: {time_label(self.clock())}.\n"
        return system, list(conversation)

    def _finish(self, result: AIMessage, state: State) -> dict[str, list[AnyMessage]]:
        """Return the node's update for the accepted ``result``."""
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


def _judge(answer: Any) -> tuple[AIMessage | None, str | None]:
    """Return the usable answer (a cut one kept as cut), or the problem to ask again with."""
    if isinstance(answer, AIMessage) and is_cut_off(answer):
        return mark_cut_off(answer), None
    problem = _problem_with(answer)
    return (answer, None) if problem is None else (None, problem)
