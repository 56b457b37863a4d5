"""How the SQLite conversation store serializes checkpoints: compressed when it pays."""

from __future__ import annotations

import zlib
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, with values of some size stored zlib-compressed.

    Most of a checkpoint is LangGraph's own bookkeeping (channel versions, the versions
    each node has seen: long, repetitive strings), which compresses to a small part of
    itself; SQLite does not compress what it stores. Compressed values are tagged
    ``<type>+zlib``, so values stored before (or below ``MIN_BYTES``) read as they are.
    """

    MIN_BYTES = 512
    SUFFIX = "+zlib"

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialize ``obj``; compress the bytes when that pays."""
        kind, data = super().dumps_typed(obj)
        if len(data) >= self.MIN_BYTES and not kind.endswith(self.SUFFIX):
            return kind + self.SUFFIX, zlib.compress(data, 6)
        return kind, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Read a value stored by ``dumps_typed``, compressed or not."""
        kind, payload = data
        if kind.endswith(self.SUFFIX):
            return super().loads_typed((kind[: -len(self.SUFFIX)], zlib.decompress(payload)))
        return super().loads_typed(data)
