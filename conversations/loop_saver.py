"""A sync checkpoint saver's async methods, for the turns that run on an event loop.

LangGraph's ``SqliteSaver`` and ``PostgresSaver`` are sync: their async methods raise.
Turns run the graph with ``astream`` (``conversations.TravelAssistant``), which saves
through the async ones. ``SyncSaverOnLoop`` answers them with the sync methods, called
on the loop: a save is a short local write (SQLite) or one round trip over a pooled
connection (PostgreSQL), and calling it directly keeps the fence of a claimed turn
(``conversations.fences``) and the remembered last state
(``conversations.remembered_state``) exactly as they are for sync runs. The loop waits
for each save; waiting for the model, which is what a turn mostly does, costs nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)


class SyncSaverOnLoop:
    """A checkpoint saver mixin (put it first): async methods done by the sync ones."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple``."""
        return self.get_tuple(config)  # type: ignore[attr-defined, no-any-return]

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list``."""
        for item in self.list(config, filter=filter, before=before, limit=limit):  # type: ignore[attr-defined]
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put``."""
        return self.put(config, checkpoint, metadata, new_versions)  # type: ignore[attr-defined, no-any-return]

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes``."""
        self.put_writes(config, writes, task_id, task_path)  # type: ignore[attr-defined]

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread``."""
        self.delete_thread(thread_id)  # type: ignore[attr-defined]

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``get_delta_channel_history``."""
        return self.get_delta_channel_history(config=config, channels=channels)  # type: ignore[attr-defined, no-any-return]


def _sync_only_methods() -> set[object]:
    """The ``aget_tuple`` of LangGraph's sync savers, which raise ``NotImplementedError``."""
    found: set[object] = set()
    from langgraph.checkpoint.sqlite import SqliteSaver

    found.add(SqliteSaver.aget_tuple)
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:  # the PostgreSQL extra is not installed
        pass
    else:
        found.add(PostgresSaver.aget_tuple)
    return found


def saving_on_loop(saver: Any) -> Any:
    """Return ``saver`` with async methods, if it is one of LangGraph's sync savers.

    A ``SqliteSaver`` or ``PostgresSaver`` given by a caller (as the tutorial builds
    them) becomes an instance of a subclass with ``SyncSaverOnLoop`` first: the same
    object, the same connection; its async methods now call the sync ones. Any other
    saver (``InMemorySaver``, the async savers, ``None``) is returned as it is.
    """
    if saver is None or type(saver).aget_tuple not in _sync_only_methods():
        return saver
    cls = type(saver)
    # The saver's own class as the only base, so its instance can take the new class.
    methods = {k: v for k, v in vars(SyncSaverOnLoop).items() if k.startswith("a")}
    saver.__class__ = type(cls.__name__, (cls,), {"__module__": cls.__module__, **methods})
    return saver
