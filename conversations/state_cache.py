"""The last state read of each recent thread, kept while its saved checkpoint is the same.

``TravelAssistant`` asks for a thread's state several times a turn; ``StateCache`` reads
it from the graph only when what identifies it (the latest checkpoint's id and the
writes pending on it) has changed, and keeps the state a run ended with, as it
streamed it (``snapshot_of``). ``PreviewCache`` keeps what a pending action would do for
the reads of the same saved state that follow its turn.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import PregelTask, StateSnapshot

from conversations.remembered_state import THREADS_KEPT, StateKey

T = TypeVar("T")


class StateCache:
    """The states of a few recent threads of one graph, each with what identifies it."""

    def __init__(self, graph: CompiledStateGraph[Any, Any, Any, Any]) -> None:
        self.graph = graph
        # The last state read of each recent thread, with what identifies it (see read).
        self._states: OrderedDict[str, tuple[tuple[Any, ...], StateSnapshot]] = OrderedDict()
        self._states_lock = threading.Lock()

    def read(self, config: RunnableConfig) -> StateSnapshot:
        """Return the thread's state, read again only when its saved checkpoint changed.

        Reading a state replays the delta channels' writes since their last snapshot
        (``assistants.state``), and a turn asks for it several times (pending actions,
        the active assistant, the history, a new message). The latest checkpoint's id
        and the writes pending on it, which the saver returns without replaying
        anything, identify a state: while they are the same, so is the state, whichever
        process wrote it. A few recent threads are kept. A run of this assistant leaves
        the state of its last checkpoint as it streamed it (``snapshot_of``), so the
        questions after a turn replay nothing.
        """
        saver = self.graph.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            return self.graph.get_state(config)
        thread_id = str(config["configurable"]["thread_id"])
        key = _latest_key(saver, config)
        if key is None:
            return self.graph.get_state(config)
        with self._states_lock:
            found = self._states.get(thread_id)
            if found is not None and found[0] == key:
                self._states.move_to_end(thread_id)
                return found[1]
        snapshot = self.graph.get_state(config)
        if snapshot.config.get("configurable", {}).get("checkpoint_id") == key[0]:
            self.remember(config, snapshot, key[1])
        return snapshot

    def remember(
        self, config: RunnableConfig, snapshot: StateSnapshot, pending: tuple[Any, ...] = ()
    ) -> None:
        """Keep ``snapshot`` as the state of its checkpoint with these pending writes."""
        key = (snapshot.config.get("configurable", {}).get("checkpoint_id"), pending)
        thread_id = str(config["configurable"]["thread_id"])
        with self._states_lock:
            self._states[thread_id] = (key, snapshot)
            self._states.move_to_end(thread_id)
            while len(self._states) > THREADS_KEPT:  # as many as the saver keeps
                self._states.popitem(last=False)


def _latest_key(saver: BaseCheckpointSaver[Any], config: RunnableConfig) -> StateKey | None:
    """Return what identifies the thread's latest saved state (see ``StateCache.read``).

    The latest checkpoint's id and the (task, channel) of its pending writes; a saver
    that can tell them without reading the checkpoint (``latest_key``) is asked for
    them alone.
    """
    latest_key = getattr(saver, "latest_key", None)
    if callable(latest_key):
        return cast(StateKey | None, latest_key(config))
    latest = saver.get_tuple(config)
    if latest is None:
        return None
    return (
        str(latest.config["configurable"].get("checkpoint_id")),
        tuple((str(write[0]), str(write[1])) for write in latest.pending_writes or ()),
    )


def snapshot_of(saved: Mapping[str, Any]) -> StateSnapshot:
    """Return a run's ``checkpoints`` event as the ``StateSnapshot`` ``get_state`` gives.

    LangGraph streams each checkpoint it saves in ``get_state``'s format, as a dict and
    without the time it was made (``created_at`` is ``None``; nothing here reads it).
    """
    tasks = tuple(
        PregelTask(
            task["id"],
            task["name"],
            (),
            error=task.get("error"),
            state=task.get("state"),
            result=task.get("result"),
        )
        for task in saved.get("tasks", ())
    )
    return StateSnapshot(
        values=saved["values"],
        next=tuple(saved["next"]),
        config=saved["config"],
        metadata=saved.get("metadata"),
        created_at=None,
        parent_config=saved.get("parent_config"),
        tasks=tasks,
        interrupts=(),
    )


# How long a preview worked out for an action is shown again to a read of the same saved
# state: long enough for the reads right after a turn (its end, each front end's card)
# and a customer's decision on it, short enough that a fee window or a unit taken
# elsewhere shows at the next read. The write checks its own figures whatever was shown.
PREVIEW_REUSE_SECONDS = 30.0


class PreviewCache(Generic[T]):
    """Previews of pending actions, each kept for the saved state it was worked out on.

    A key names the thread, its latest checkpoint and the tool call: a new message, a
    decision or a proposal saves a new checkpoint, and so asks for a new preview. A
    decision reads it too, so it records what the customer was shown.
    """

    def __init__(self, seconds: float = PREVIEW_REUSE_SECONDS, kept: int = 256) -> None:
        self.seconds = seconds
        self.kept = kept
        self._previews: OrderedDict[tuple[str, str, str], tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str], work_out: Callable[[], T], fresh: bool) -> T:
        """Return the preview kept for ``key``, or ``work_out()`` (kept for the next read)."""
        now = time.monotonic()
        if not fresh:
            with self._lock:
                kept = self._previews.get(key)
            if kept is not None and now - kept[0] < self.seconds:
                return kept[1]
        preview = work_out()
        with self._lock:
            self._previews[key] = (now, preview)
            self._previews.move_to_end(key)
            while len(self._previews) > self.kept:
                self._previews.popitem(last=False)
        return preview
