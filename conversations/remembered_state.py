"""Savers that remember the state a run of this process ended with.

Every run starts by reading its thread's latest checkpoint. ``messages`` and
``user_info`` are ``DeltaChannel``s (``assistants.state``), so that read walks back to
their last snapshot, deserialising each checkpoint on the way, and replays the writes
since: the whole conversation is deserialised again at the start of every run,
although the run before, in this process, has just ended with exactly that state.

``RemembersLastState`` keeps, per thread, the values of the last checkpoint a run of
this process saved (``TravelAssistant`` hands them over from the run's ``checkpoints``
stream) and answers LangGraph's read of that very checkpoint with them. A checkpoint's
values never change once it is saved, so the answer is the one the walk would give; any
other checkpoint (another process wrote a newer one, a thread not seen yet, an older
one) is read as before. ``tests/unit/test_remembered_state.py`` plays conversations both
ways and compares every request and state.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory
from langgraph.checkpoint.sqlite import SqliteSaver

# What identifies a saved state: the latest checkpoint's id and its pending writes.
StateKey = tuple[str, tuple[tuple[str, str], ...]]

# Threads whose last state is kept (here and in ``TravelAssistant``); the least recently
# saved is forgotten first.
THREADS_KEPT = 64


class RemembersLastState:
    """A checkpoint saver mixin (put it before the saver's class): see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_states: OrderedDict[str, tuple[str, str, dict[str, Any]]] = OrderedDict()
        self._last_states_lock = threading.Lock()
        self.remembered_reads = 0  # reads answered from memory (tests and benchmarks)

    def remember_state(self, config: RunnableConfig, values: Mapping[str, Any]) -> None:
        """Keep ``values`` as the state of the checkpoint ``config`` names.

        Args:
            config: A saved checkpoint's config: its thread, namespace and id.
            values: That checkpoint's channel values, as a run streamed them.
        """
        configurable = config.get("configurable", {})
        checkpoint_id = configurable.get("checkpoint_id")
        if not checkpoint_id:
            return
        thread_id = str(configurable["thread_id"])
        namespace = str(configurable.get("checkpoint_ns", ""))
        with self._last_states_lock:
            self._last_states[thread_id] = (namespace, str(checkpoint_id), dict(values))
            self._last_states.move_to_end(thread_id)
            while len(self._last_states) > THREADS_KEPT:
                self._last_states.popitem(last=False)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Answer for the remembered checkpoint from memory, else read it (LangGraph's walk)."""
        configurable = config.get("configurable", {})
        with self._last_states_lock:
            found = self._last_states.get(str(configurable.get("thread_id")))
        if found is not None:
            namespace, checkpoint_id, values = found
            if (
                namespace == str(configurable.get("checkpoint_ns", ""))
                and checkpoint_id == configurable.get("checkpoint_id")
                and all(channel in values for channel in channels)
            ):
                self.remembered_reads += 1
                # A seed that is a plain value is the channel's value as it stands
                # (``DeltaChannel.from_checkpoint``); no writes follow it.
                return {
                    channel: {"seed": _fresh(values[channel]), "writes": []} for channel in channels
                }
        return super().get_delta_channel_history(config=config, channels=channels)  # type: ignore[misc, no-any-return]


def _fresh(value: Any) -> Any:
    """Return a list copied, so that no two runs ever hold the same list."""
    return list(value) if isinstance(value, list) else value


class RememberingSqliteSaver(RemembersLastState, SqliteSaver):
    """LangGraph's ``SqliteSaver`` that remembers its runs' last states."""

    def latest_key(self, config: RunnableConfig) -> StateKey | None:
        """Return what identifies the thread's latest saved state, ``None`` without one.

        The latest checkpoint's id and the (task, channel) of the writes pending on it:
        while they are the same, so is the state, whichever process wrote it
        (``TravelAssistant._state``). Read from the keys alone, in one statement;
        ``get_tuple`` would also read and decompress the checkpoint and every pending
        write's value, for nothing, several times a turn.
        """
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        namespace = str(configurable.get("checkpoint_ns", ""))
        with self.cursor(transaction=False) as cursor:
            rows = cursor.execute(_LATEST_KEY, (thread_id, namespace, thread_id, namespace))
            found = rows.fetchall()
        if not found:
            return None
        return str(found[0][0]), tuple((task, channel) for _, task, channel in found if task)


# The latest checkpoint of a thread and the (task, channel) of the writes pending on it,
# in their order of saving; one row with NULLs beside the id when none is pending.
_LATEST_KEY = """
SELECT latest.checkpoint_id, writes.task_id, writes.channel
FROM (
    SELECT checkpoint_id FROM checkpoints
    WHERE thread_id = ? AND checkpoint_ns = ?
    ORDER BY checkpoint_id DESC LIMIT 1
) AS latest
LEFT JOIN writes
    ON writes.thread_id = ? AND writes.checkpoint_ns = ?
    AND writes.checkpoint_id = latest.checkpoint_id
ORDER BY writes.task_id, writes.idx
"""
