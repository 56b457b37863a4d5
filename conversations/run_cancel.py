"""Stopping a run of the graph: the callback that stops it on a cancel, and its wind-down.

``TravelAssistant`` passes ``CancelOnRequest`` to every run, so a cancel set from any
thread stops the run at its next model call or node; ``ended_in_failure`` runs a
stopped run to its end, to tell whether it still has to be closed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from assistants.call_limits import TurnCancelledError


class CancelOnRequest(BaseCallbackHandler):
    """Stop a run soon after ``cancel`` is set: before a model call, and before any node.

    So no tool runs after the cancel; it never raises in the middle of a node's tools,
    so a write that started is answered, not lost. A model call already waiting is ended
    by ``assistants.calls.bounded``, at once. It runs on the event loop (``run_inline``),
    where raising stops the run.
    """

    raise_error = True
    run_inline = True

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.root: UUID | None = None

    def _check(self) -> None:
        if self.cancel.is_set():
            raise TurnCancelledError("The turn was cancelled.")

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Stop before the graph or one of its nodes starts, once the cancel is set."""
        if parent_run_id is None:
            self.root = run_id
        if parent_run_id is None or parent_run_id == self.root:  # the graph, or one node
            self._check()

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Stop before a chat model is called, once the cancel is set."""
        self._check()

    def on_llm_start(self, serialized: Any, prompts: Any, **kwargs: Any) -> None:
        """Stop before a completion model is called, once the cancel is set."""
        self._check()


class _HideCancelWarnings(logging.Filter):
    """Drop LangChain's warning about the exception ``CancelOnRequest`` raises on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and args[0] == CancelOnRequest.__name__)


CANCEL_WARNINGS_FILTER = _HideCancelWarnings()


async def ended_in_failure(stream: AsyncIterator[Any]) -> bool:
    """Run a stopped run to its end, dropping its events; tell whether it failed."""
    try:
        async for _ in stream:
            pass
    except Exception:
        return True
    return False
