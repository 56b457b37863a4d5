"""The graph state, its reducers, and how a checkpoint stores it.

``messages`` and ``user_info`` live in LangGraph ``DeltaChannel``s: a checkpoint stores
only what each step added (its writes), with a full snapshot of the channel every
``snapshot_frequency`` updates, instead of the whole conversation again at every step.
The bytes a turn writes then stay flat however long the conversation grows, and reading
a checkpoint replays the writes since the last snapshot through the same reducers.
Replaying must give the same state every time, so a message that arrives without an id
gets one derived from its place in the conversation (``add_message_batches``), never a
random one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Final, Protocol, cast

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
)
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import Messages, add_messages
from langgraph.managed import RemainingSteps
from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

# The assistant that answers when no specialist is active (also its node's name).
PRIMARY_ASSISTANT: Final = "primary_assistant"
POP = "pop"
# Empties the stack: the primary assistant answers next (a person handed the conversation
# back, ``conversations.protocol.Conversation.hand_back``).
RESET = "reset"


def update_dialog_stack(left: list[str], right: str | None) -> list[str]:
    """Apply one update to the stack of active specialists.

    Args:
        left: The current stack, bottom first.
        right: A specialist name to push, ``"pop"`` to drop the top, ``"reset"`` to empty
            it, or ``None`` to keep the stack as it is.

    Returns:
        The new stack; popping an empty stack leaves it empty.
    """
    if right is None:
        return left
    if right == POP:
        return left[:-1]
    if right == RESET:
        return []
    return [*left, right]


# Ids given to messages that arrive without one are UUIDs in this namespace, derived from
# the id of the message they follow and their place in their batch.
_MESSAGE_IDS = uuid.UUID("6f1c2a8e-57d3-4c2b-9a41-0d8e5b7c3f10")
# How many updates of ``messages`` pass between two full snapshots of it. A run that
# does not start from the state this process remembers (``conversations.remembered_state``: the
# first of a thread here, or after another process wrote) reads the state by walking
# back over as many checkpoints, reading each in full, to the last snapshot, then
# replaying the writes since. A snapshot stores the whole conversation once (about 14 kB
# compressed at 60 turns). 50 is about five turns. Before runs started from the
# remembered state, 20 saved 6 % of a conversation's instructions; since, 50 costs 2 %
# fewer than 20 (the snapshots are the cost) and fewer bytes: 9.4 kB a turn on average
# at 30 turns, against 10.6 kB (scripts/bench_conversation.py, BENCHMARKS.md).
SNAPSHOT_EVERY = 50
# ``user_info`` is written only when the bookings change, so a reader walking back to
# its last snapshot would walk the whole conversation: every write of it is a snapshot
# (the bookings as short text, a few hundred bytes compressed).
USER_INFO_SNAPSHOT_EVERY = 1


def _with_ids(left: Sequence[BaseMessage], batch: Messages) -> list[BaseMessage]:
    """Return ``batch`` as messages, each without an id given a deterministic one."""
    items = batch if isinstance(batch, list) else [batch]
    # Nodes write messages already; ``convert_to_messages`` would hand each back as it is,
    # after its checks, and this runs for every step and every routing decision.
    messages = (
        cast("list[BaseMessage]", items)
        if all(isinstance(m, BaseMessage) for m in items)
        else convert_to_messages(items)
    )
    anchor = str(left[-1].id) if left else ""
    return [
        m if m.id else m.model_copy(update={"id": str(uuid.uuid5(_MESSAGE_IDS, f"{anchor}/{k}"))})
        for k, m in enumerate(messages)
    ]


def add_message_batches(left: list[AnyMessage], batches: Sequence[Messages]) -> list[AnyMessage]:
    """Apply each step's messages in turn with ``add_messages`` (merged by id).

    Applying two lists of batches one after the other gives the same conversation as
    applying them together, as a ``DeltaChannel`` requires. ``add_messages`` would give
    a message without an id a random one, which a replay could not reproduce; such a
    message gets an id derived from the id of the message before it instead (no message
    present can already have it: it would have to follow that last message).

    Most batches only add messages. ``add_messages`` walks the whole conversation four
    times for each, and this runs for every step, every routing decision (LangGraph
    reads the state again with the step's writes) and every write replayed when a run
    starts; such a batch is appended here instead, against the ids present, with the
    same result. Any other batch (a replacement, a removal, a chunk) goes through
    ``add_messages``.
    """
    merged: list[BaseMessage] = list(left)
    present: set[str | None] | None = None  # the ids in ``merged`` if plain, else None
    for batch in batches:
        messages = _with_ids(merged, batch)
        if present is None:
            present = _plain_ids(merged)
        if present is not None and _only_appends(messages, present):
            merged.extend(messages)
            present.update(m.id for m in messages)
        else:
            merged = cast(
                list[BaseMessage], add_messages(cast(Messages, merged), cast(Messages, messages))
            )
            present = None
    return cast("list[AnyMessage]", merged)


def _plain_ids(messages: Sequence[BaseMessage]) -> set[str | None] | None:
    """Return the ids of ``messages``, or ``None`` if ``add_messages`` would change any.

    It gives a message without an id a random one and turns a chunk into a message.
    """
    if any(issubclass(t, BaseMessageChunk) for t in set(map(type, messages))):
        return None
    ids = {m.id for m in messages}
    return None if None in ids else ids


def _only_appends(messages: Sequence[BaseMessage], present: set[str | None]) -> bool:
    """Tell whether ``add_messages`` would append ``messages`` unchanged, and nothing else."""
    seen: set[str | None] = set()
    for message in messages:
        if (
            message.id in present
            or message.id in seen
            or isinstance(message, RemoveMessage | BaseMessageChunk)
        ):
            return False
        seen.add(message.id)
    return True


def latest_value(current: str, writes: Sequence[str]) -> str:
    """Keep the last value written (``user_info``: the bookings as of this turn)."""
    return writes[-1] if writes else current


# Pydantic (which LangGraph's server uses to publish the graph's schemas) reads the
# TypedDicts below only from ``typing_extensions`` on Python < 3.12, and takes each field's
# description from the docstring under it.
_DESCRIBED = ConfigDict(use_attribute_docstrings=True)


@with_config(_DESCRIBED)
class State(TypedDict):
    """What the graph keeps for one conversation (one ``thread_id``).

    Attributes:
        messages: The whole conversation, merged by id (``add_messages``, one step's
            messages at a time).
        user_info: The passenger's tickets and reservations, read on every turn (and
            written only when they changed).
        dialog_state: The stack of active specialists (their names, as in
            ``assistants.specialists``); empty means the primary assistant.
        remaining_steps: Managed by LangGraph: how many steps this run has left.
    """

    messages: Annotated[
        list[AnyMessage], DeltaChannel(add_message_batches, snapshot_frequency=SNAPSHOT_EVERY)
    ]
    """The whole conversation: the customer's messages, the assistants' replies and tool calls,
    and the tools' answers."""
    user_info: Annotated[
        str, DeltaChannel(latest_value, snapshot_frequency=USER_INFO_SNAPSHOT_EVERY)
    ]
    """The passenger's tickets and reservations as the assistants last read them."""
    dialog_state: Annotated[list[str], update_dialog_stack]
    """The stack of active specialists, bottom first; empty while the primary assistant
    answers."""
    remaining_steps: RemainingSteps


@with_config(_DESCRIBED)
class Question(TypedDict):
    """What a run of the assistant takes: the customer's next message.

    A run stopped before an action goes on with LangGraph's ``Command(resume=...)``,
    an answer per pending action (``assistants.approvals``); nothing runs unapproved.
    """

    messages: list[AnyMessage]
    """The customer's message, e.g. ``[{"role": "user", "content": "When is my flight?"}]``."""


@with_config(_DESCRIBED)
class Reply(TypedDict):
    """What a run of the assistant gives back: the conversation as it stands."""

    messages: list[AnyMessage]
    """The whole conversation, the assistants' reply last (or the tool calls waiting for
    approval)."""
    user_info: str
    """The passenger's tickets and reservations as the assistants last read them."""
    dialog_state: list[str]
    """The stack of active specialists, bottom first; empty while the primary assistant
    answers."""


@with_config(_DESCRIBED)
class Configuration(TypedDict, total=False):
    """The run's settings (``config["configurable"]``)."""

    passenger_id: str
    """The passenger the conversation acts for, e.g. ``"3442 587242"``. Every run needs it:
    the assistant reads their bookings and changes nothing of anyone else's."""


def active_assistant(dialog_state: Sequence[str] | None) -> str:
    """Return the name on top of the stack, or ``"primary_assistant"`` when it is empty."""
    if not dialog_state:
        return PRIMARY_ASSISTANT
    return dialog_state[-1]


class ConfigNode(Protocol):
    """A node that reads the state and the run's config."""

    def __call__(self, state: State, config: RunnableConfig) -> dict[str, Any]:
        """Return the node's update."""


class StateNode(Protocol):
    """A node that reads only the state."""

    def __call__(self, state: State) -> dict[str, Any]:
        """Return the node's update."""
