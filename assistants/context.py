"""What one model request holds: a conversation every chat template accepts, within budget.

The saved history is the record of what happened, and it can hold shapes that strict
chat templates (Gemma, Llama, Mistral families, as llama.cpp and vLLM apply them) refuse
with "Conversation roles must alternate": a customer message without a reply (a turn
that failed or was interrupted), two in a row, tool results followed by a customer
message (the reply after the tools never came), an empty assistant message. The history
is never rewritten for that; ``normalise`` builds the request from it instead:

- customer and assistant turns alternate: consecutive customer messages are merged, so
  are consecutive assistant texts, and a missing reply after tool results is stood in
  for by a short assistant note (``MISSING_REPLY``);
- every tool call is followed at once by exactly one answer (a call left without one
  gets a "no result" answer, so the model never believes it ran); answers without their
  call are left out; unreadable tool calls are left out;
- no empty assistant message, nothing before the first customer message.

``fit`` then trims the request to the prompt budget, measured with ``estimate_tokens``
(a deliberately generous count: no tokenizer of the many local models is at hand), by
cutting whole turns at a customer message, and shortening tool results only when the
current turn alone is too long.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from assistants.bookings import changed_sections
from assistants.call_limits import ContextBudgetError
from assistants.prompts import CUT_OFF_ACTION_NOTE, CUT_OFF_NOTE, MISSING_REPLY, RESULT_CUT_NOTE

# Characters per token of ordinary ASCII text in the estimate. OpenAI's tokenizers average
# about 4 on this project's prompts (English and JSON), Llama- and Mistral-style ones a
# little less; 3 leaves a margin for them (tests/unit/test_context.py checks it).
CHARS_PER_TOKEN = 3.0
# What a chat template adds around each message (role header and end markers).
MESSAGE_OVERHEAD = 8
# What a template adds around each tool call (markers, id, name).
CALL_OVERHEAD = 16
# The request's own overhead: start of text, the generation prompt, the tools' wrapper.
REQUEST_OVERHEAD = 64
# The part of a shortened tool result that is always kept.
MIN_RESULT_CHARS = 400

NO_RESULT = "Not run: no result was recorded for this call, so nothing was done."
# ``additional_kwargs`` key of a customer message: when it was received (ISO 8601, UTC).
SENT_AT_KEY = "sent_at"
# ``additional_kwargs`` key of a customer message: the bookings as of that message, set
# only where they differ from the ones an earlier message carried.
BOOKINGS_KEY = "bookings"
# Tags around bookings in a request; a customer who types them gets them defused.
_TAGS = re.compile(r"<(/?)(bookings)", re.IGNORECASE)

ToolLike = BaseTool | type[BaseModel]

# Characters two bytes long in UTF-8 (non-ASCII below U+0800), and those three or four long.
_NARROW = re.compile("[\u0080-\u07ff]")
_WIDE = re.compile("[\u0800-\U0010ffff]")


# --- measuring -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def estimate_tokens(text: str) -> int:
    """Return a generous estimate of the tokens ``text`` takes.

    Digits count one each (several tokenizers split numbers digit by digit), accented
    letters and other alphabets one each, characters of CJK and other scripts beyond
    U+0800 (three bytes and more in UTF-8) two each, the rest ``CHARS_PER_TOKEN``
    characters per token. Remembered per text: each model call measures the same
    history again for every window it considers.
    """
    if not text:
        return 0
    # Counted by the string and regex machinery, not character by character in Python:
    # a system prompt alone is thousands of characters, measured again when it changes.
    digits = sum(map(text.count, "0123456789"))
    if text.isascii():
        narrow = wide = 0
    else:
        narrow = len(_NARROW.findall(text))
        wide = len(_WIDE.findall(text))
    rest = len(text) - digits - narrow - wide
    return digits + narrow + 2 * wide + math.ceil(rest / CHARS_PER_TOKEN)


def _call_text(call: ToolCall) -> str:
    return f"{call['name']} {json.dumps(call['args'], ensure_ascii=False)}"


# The estimate of each tool call measured lately, by call id and tool, beside a copy of
# the arguments it was made for. A model call measures the calls of its window again for
# every window it considers, and writing their arguments out as JSON each time was a
# third of measuring them (``scripts/turn_profile.py``).
_CALL_TOKENS: dict[tuple[str, str], tuple[dict[str, Any], int]] = {}
_CALLS_KEPT = 4096


def _call_tokens(call: ToolCall) -> int:
    """Return the estimated tokens of one tool call, its overhead included."""
    key = (str(call.get("id")), call["name"])
    found = _CALL_TOKENS.get(key)
    if found is not None and found[0] == call["args"]:
        return found[1]
    tokens = CALL_OVERHEAD + estimate_tokens(_call_text(call))
    if len(_CALL_TOKENS) >= _CALLS_KEPT:
        _CALL_TOKENS.clear()
    _CALL_TOKENS[key] = (dict(call["args"]), tokens)
    return tokens


def message_tokens(message: BaseMessage) -> int:
    """Return the estimated tokens of one message of the request."""
    calls = message.tool_calls if isinstance(message, AIMessage) else ()
    return _tokens(message.text, calls)


def _tokens(text: str, calls: Sequence[ToolCall] = ()) -> int:
    """Return the estimated tokens of a message with this text and these tool calls."""
    return MESSAGE_OVERHEAD + estimate_tokens(text) + sum(_call_tokens(c) for c in calls)


def tools_tokens(tools: Sequence[ToolLike]) -> int:
    """Return the estimated tokens of the tools' definitions (templates print their JSON)."""
    return schemas_tokens([convert_to_openai_tool(t) for t in tools])


def schemas_tokens(schemas: Sequence[Mapping[str, Any]]) -> int:
    """Return the estimated tokens of tool definitions already in OpenAI's form."""
    return sum(estimate_tokens(json.dumps(s, ensure_ascii=False)) for s in schemas)


def request_tokens(messages: Sequence[BaseMessage], tools: Sequence[ToolLike] = ()) -> int:
    """Return the estimated tokens of a whole request: messages, tools and overhead."""
    return REQUEST_OVERHEAD + tools_tokens(tools) + sum(message_tokens(m) for m in messages)


# --- a conversation every template accepts ------------------------------------------------------


def _answers(messages: Sequence[BaseMessage], index: int, calls: Sequence[ToolCall]) -> list[int]:
    """Return the positions of the answers to ``calls`` (made at ``index``), or -1 each.

    An answer is the first tool message with the call's id after the call and before a
    later call with the same id (some servers number calls afresh in every reply).
    """
    found = []
    for call in calls:
        position = -1
        for later in range(index + 1, len(messages)):
            message = messages[later]
            if isinstance(message, ToolMessage) and message.tool_call_id == call["id"]:
                position = later
                break
            if isinstance(message, AIMessage) and any(
                c["id"] == call["id"] for c in message.tool_calls
            ):
                break
        found.append(position)
    return found


def _tool_answer(message: ToolMessage | None, call: ToolCall) -> _Entry:
    if message is None:
        return _Entry("tool", NO_RESULT, name=call["name"], call_id=str(call["id"]), status="error")
    return _Entry(
        "tool",
        message.text or "(no output)",
        id=message.id,
        name=message.name or call["name"],
        call_id=str(call["id"]),
        status=message.status,
    )


def stamped(message: HumanMessage, now: datetime) -> HumanMessage:
    """Return ``message`` marked with the time it was received (kept if already marked)."""
    if message.additional_kwargs.get(SENT_AT_KEY):
        return message
    received = now.astimezone(UTC).isoformat(timespec="minutes")
    return message.model_copy(
        update={"additional_kwargs": {**message.additional_kwargs, SENT_AT_KEY: received}}
    )


def sent_at(message: BaseMessage) -> datetime | None:
    """Return when a customer message was received, if it was marked (see ``stamped``)."""
    value = message.additional_kwargs.get(SENT_AT_KEY)
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def bookings_of(message: BaseMessage) -> str | None:
    """Return the bookings a customer message carries, if it carries any."""
    value = message.additional_kwargs.get(BOOKINGS_KEY)
    return value if isinstance(value, str) and value else None


def latest_bookings(messages: Sequence[BaseMessage]) -> str | None:
    """Return the bookings the latest customer message that carries any carries."""
    return next(
        (b for m in reversed(messages) if isinstance(m, HumanMessage) and (b := bookings_of(m))),
        None,
    )


def with_bookings(message: HumanMessage, bookings: str) -> HumanMessage:
    """Return ``message`` carrying ``bookings`` (the same id: it replaces it in place)."""
    return message.model_copy(
        update={"additional_kwargs": {**message.additional_kwargs, BOOKINGS_KEY: bookings}}
    )


@functools.lru_cache(maxsize=1024)
def time_label(moment: datetime) -> str:
    """Return how the model is told a moment: ``2026-05-04 09:00 UTC, Monday``.

    Remembered: every model call labels each customer message of its window again.
    """
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC, %A")


@dataclass(frozen=True, slots=True)
class _Entry:
    """One message of a request before it is built: what ``normalise`` decides.

    Measuring a candidate window (``history_tokens``) needs only these; building the
    LangChain messages is what costs, and a model call measures several windows.
    """

    kind: str  # "human", "ai" or "tool"
    text: str
    id: str | None = None
    name: str | None = None
    calls: tuple[ToolCall, ...] = ()  # an assistant message's tool calls
    call_id: str = ""  # a tool answer's call
    status: str = "success"

    def tokens(self) -> int:
        """Return ``message_tokens`` of the message this entry becomes."""
        return _tokens(self.text, self.calls)

    def message(self) -> BaseMessage:
        """Return the request message."""
        if self.kind == "human":
            return HumanMessage(content=self.text, id=self.id)
        if self.kind == "ai":
            return AIMessage(
                content=self.text, tool_calls=list(self.calls), name=self.name, id=self.id
            )
        return ToolMessage(
            content=self.text,
            tool_call_id=self.call_id,
            name=self.name,
            status=self.status,
            id=self.id,
        )


def normalise(messages: Sequence[BaseMessage], bookings: str | None = None) -> list[BaseMessage]:
    """Return the request form of a saved history (see the module's docstring).

    A customer message marked with the time it was received starts with that time in
    brackets. The first customer message starts with the bookings, in ``<bookings>``
    tags: its own, or else ``bookings`` (the ones in force when the history window
    starts); a later one that carries bookings starts with the sections that changed,
    in ``<bookings changed>`` tags. Neither the time nor the bookings are
    in the system prompt, so the prompt stays the same from call to call and a
    provider's prompt cache can reuse it.

    The messages given are not changed; the result holds new messages.
    """
    return [entry.message() for entry in _entries(messages, bookings)]


def history_tokens(messages: Sequence[BaseMessage], bookings: str | None = None) -> int:
    """Return the estimated tokens of ``normalise(messages, bookings)``, without building it.

    Equal to ``sum(message_tokens(m) for m in normalise(messages, bookings))``.
    """
    return sum(entry.tokens() for entry in _entries(messages, bookings))


def history_fits(messages: Sequence[BaseMessage], budget: int, bookings: str | None = None) -> bool:
    """Tell whether ``history_tokens(messages, bookings) <= budget``.

    Stops as soon as the entries already decided take more than ``budget``: a model call
    measures several candidate windows, longest first, and the long ones that do not fit
    are given up after their first ``budget`` tokens instead of measured whole.
    """
    entries = _build_entries(messages, bookings, stop_above=budget)
    return entries is not None and sum(entry.tokens() for entry in entries) <= budget


def _entries(messages: Sequence[BaseMessage], bookings: str | None) -> list[_Entry]:
    """Return what ``normalise`` builds, entry by entry."""
    return cast("list[_Entry]", _build_entries(messages, bookings))


def _build_entries(
    messages: Sequence[BaseMessage], bookings: str | None, stop_above: int | None = None
) -> list[_Entry] | None:
    """Return what ``normalise`` builds, entry by entry (``_entries``).

    With ``stop_above``, ``None`` as soon as the entries that can no longer change (all
    but the last: only the last is ever merged into or replaced) take more tokens than
    that.
    """
    out: list[_Entry] = []
    first = True
    shown: str | None = None  # the bookings the request has shown so far
    settled = 0  # how many entries of ``out`` are counted in ``settled_tokens``
    settled_tokens = 0
    for index, message in enumerate(messages):
        if stop_above is not None:
            while settled < len(out) - 1:
                settled_tokens += out[settled].tokens()
                settled += 1
            if settled_tokens > stop_above:
                return None
        if isinstance(message, HumanMessage):
            text = _TAGS.sub(r"(\1\2", message.text.strip())
            if not text:
                continue
            received = sent_at(message)
            if received is not None:
                text = f"[{time_label(received)}] {text}"
            own = bookings_of(message)
            if first and (own or bookings):
                shown = own or bookings
                text = f"<bookings>\n{shown}\n</bookings>\n{text}"
            elif own and shown is not None and own != shown:
                changes = changed_sections(shown, own)
                shown = own
                text = f"<bookings changed>\n{changes}\n</bookings>\n{text}"
            elif own and shown is None:
                shown = own
                text = f"<bookings>\n{own}\n</bookings>\n{text}"
            first = False
            if out and out[-1].kind == "human":
                out[-1] = _Entry("human", f"{out[-1].text}\n\n{text}", id=out[-1].id)
                continue
            if out and out[-1].kind == "tool":
                out.append(_Entry("ai", MISSING_REPLY))
            out.append(_Entry("human", text, id=message.id))
        elif isinstance(message, AIMessage):
            if not out:
                continue  # nothing may come before the first customer message
            text = message.text.strip()
            calls = tuple(message.tool_calls)
            if not text and not calls:
                continue
            if out[-1].kind == "ai":  # a text reply with no calls: merge
                earlier = out.pop().text.strip()
                text = f"{earlier}\n\n{text}" if text else earlier
            out.append(_Entry("ai", text, id=message.id, name=message.name, calls=calls))
            for call, position in zip(calls, _answers(messages, index, calls), strict=True):
                answer = messages[position] if position >= 0 else None
                out.append(_tool_answer(answer if isinstance(answer, ToolMessage) else None, call))
        # Tool messages come in with their call above; system messages belong to the
        # prompt; any other kind has no place in the request.
    return out


# --- the budget ------------------------------------------------------------------------------


def _shorten(message: ToolMessage, tokens: int) -> ToolMessage:
    """Return ``message`` with its content cut by about ``tokens`` tokens."""
    text = message.text
    keep = max(MIN_RESULT_CHARS, len(text) - int(tokens * CHARS_PER_TOKEN) - 80)
    if keep >= len(text):
        return message
    cut = text[:keep] + RESULT_CUT_NOTE.format(count=len(text) - keep)
    return message.model_copy(update={"content": cut})


def fit(messages: Sequence[BaseMessage], budget: int) -> list[BaseMessage]:
    """Return the longest end of a normalised request that fits ``budget`` tokens.

    Whole turns are dropped from the start, cutting only at a customer message so no tool
    result is separated from its call. When the last turn alone is too long, its longest
    tool results are shortened.

    Raises:
        ContextBudgetError: Even the last turn with its tool results shortened is too long.
    """
    sizes = [message_tokens(m) for m in messages]
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)] or [0]
    for start in starts:
        if sum(sizes[start:]) <= budget:
            return list(messages[start:])
    turn = list(messages[starts[-1] :])
    over = sum(sizes[starts[-1] :]) - budget
    results = sorted(
        (i for i, m in enumerate(turn) if isinstance(m, ToolMessage)),
        key=lambda i: -message_tokens(turn[i]),
    )
    for i in results:
        if over <= 0:
            break
        before = message_tokens(turn[i])
        turn[i] = _shorten(turn[i], over)  # type: ignore[arg-type]
        over -= before - message_tokens(turn[i])
    if over > 0:
        raise ContextBudgetError(budget + over, budget)
    return turn


# --- replies the server cut at the output limit ------------------------------------------

# ``response_metadata`` key set on a reply the server cut at the output limit.
CUT_OFF_KEY = "cut_off"


def cut_off_note(dropped_calls: bool) -> str:
    """Return the note that ends a reply cut at the output limit."""
    return CUT_OFF_ACTION_NOTE if dropped_calls else CUT_OFF_NOTE


def is_cut_off(message: BaseMessage) -> bool:
    """Tell whether the server stopped ``message`` at the output limit."""
    metadata = message.response_metadata
    return metadata.get("finish_reason") == "length" or bool(metadata.get(CUT_OFF_KEY))


def mark_cut_off(message: AIMessage) -> AIMessage:
    """Return a cut reply as it is kept: its text, the note, and no tool calls.

    The arguments of a call cut mid-way may still parse (LangChain completes partial
    JSON while it streams), so no call of a cut reply is trusted, valid-looking or not.
    """
    dropped = bool(message.tool_calls or message.invalid_tool_calls)
    note = cut_off_note(dropped)
    text = message.text.rstrip()
    if dropped and text.endswith(CUT_OFF_NOTE):  # the stream could not know of the calls
        text = text[: -len(CUT_OFF_NOTE)].rstrip()
    if not text.endswith((CUT_OFF_NOTE, CUT_OFF_ACTION_NOTE)):
        text = f"{text}\n\n{note}" if text else note
    raw_calls = ("tool_calls", "function_call")  # langchain-openai would send these again
    extra = {k: v for k, v in message.additional_kwargs.items() if k not in raw_calls}
    return AIMessage(
        content=text,
        id=message.id,
        name=message.name,
        additional_kwargs=extra,
        response_metadata={**message.response_metadata, CUT_OFF_KEY: True},
        usage_metadata=message.usage_metadata,
    )
