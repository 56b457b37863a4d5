"""The graph state and the reducer of the dialog stack."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Protocol, TypedDict

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps

# The assistant that answers when no specialist is active (also its node's name).
PRIMARY_ASSISTANT = "primary_assistant"
POP = "pop"


def update_dialog_stack(left: list[str], right: str | None) -> list[str]:
    """Apply one update to the stack of active specialists.

    Args:
        left: The current stack, bottom first.
        right: A specialist name to push, ``"pop"`` to drop the top, or ``None`` to keep
            the stack as it is.

    Returns:
        The new stack; popping an empty stack leaves it empty.
    """
    if right is None:
        return left
    if right == POP:
        return left[:-1]
    return [*left, right]


class State(TypedDict):
    """What the graph keeps for one conversation (one ``thread_id``).

    Attributes:
        messages: The whole conversation, merged by id.
        user_info: The passenger's tickets and reservations, refreshed on every turn.
        dialog_state: The stack of active specialists (their names, as in
            ``assistants.specialists``); empty means the primary assistant.
        remaining_steps: Managed by LangGraph: how many steps this run has left.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    user_info: str
    dialog_state: Annotated[list[str], update_dialog_stack]
    remaining_steps: RemainingSteps


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
