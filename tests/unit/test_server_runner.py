"""Turns as tasks of the loop: one per conversation, events journaled, stopped cleanly."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from server.errors import ConflictError, UnavailableError
from server.runs import Journal, TurnRunner
from server.schemas import ErrorEvent, StatusEvent, StreamEvent


def test_server_runner_streams_events_and_frees_the_conversation() -> None:
    runner = TurnRunner()

    async def work() -> AsyncIterator[StreamEvent]:
        yield StatusEvent(text="one", tool=None)
        await asyncio.sleep(0)
        yield StatusEvent(text="two", tool=None)

    async def main() -> list[str]:
        runner.claim("c-1")
        with pytest.raises(ConflictError):
            runner.claim("c-1")
        texts = [e.text async for e in runner.stream("c-1", work) if isinstance(e, StatusEvent)]
        return texts

    assert asyncio.run(main()) == ["one", "two"]
    assert not runner.busy("c-1")
    runner.close()


def test_a_turn_runs_on_without_its_client_and_a_second_client_reads_it_whole() -> None:
    runner = TurnRunner()
    go_on = threading.Event()

    async def work() -> AsyncIterator[StreamEvent]:
        yield StatusEvent(text="one", tool=None)
        await asyncio.to_thread(go_on.wait, 10)
        yield StatusEvent(text="two", tool=None)

    async def main() -> list[str]:
        runner.claim("c-5")
        first = runner.stream("c-5", work)
        assert isinstance(await anext(first), StatusEvent)
        await first.aclose()  # the client went away
        go_on.set()
        journal = runner.follow("c-5")
        assert journal is not None
        return [getattr(e, "text", "") async for batch in journal.read() for _, e in batch]

    assert asyncio.run(main()) == ["one", "two"]
    assert not runner.busy("c-5")


def test_server_runner_reports_a_bug_as_an_error_event() -> None:
    runner = TurnRunner()

    async def work() -> AsyncIterator[StreamEvent]:
        raise KeyError("internal")
        yield  # pragma: no cover

    async def main() -> list[StreamEvent]:
        runner.claim("c-2")
        return [e async for e in runner.stream("c-2", work)]

    (event,) = asyncio.run(main())
    assert isinstance(event, ErrorEvent) and "internal" not in event.detail
    assert not runner.busy("c-2")
    runner.close()


def test_server_runner_close_cancels_running_turns_and_waits() -> None:
    runner = TurnRunner()
    started = threading.Event()
    finished = threading.Event()
    cancel = runner.claim("c-3")

    async def work() -> AsyncIterator[StreamEvent]:
        started.set()
        assert await asyncio.to_thread(cancel.wait, 10)  # it stops at the cancel
        finished.set()
        yield StatusEvent(text="closed", tool=None)

    async def main() -> None:
        stream = runner.stream("c-3", work)
        await asyncio.to_thread(started.wait, 10)
        await asyncio.to_thread(runner.close)
        assert finished.is_set()
        async for _ in stream:
            pass

    asyncio.run(main())
    with pytest.raises(UnavailableError, match="stopping"):  # 503: another worker can
        runner.claim("c-4")


def test_server_runner_close_lets_turns_finish_until_the_graceful_time_then_cancels() -> None:
    """A stop takes no new turn; one that ends in time ends as usual, a longer one is cancelled."""
    runner = TurnRunner()
    quick, slow = runner.claim("c-quick"), runner.claim("c-slow")
    started = threading.Barrier(3)
    ended: dict[str, str] = {}

    def turn(name: str, cancel: threading.Event, seconds: float) -> Any:
        async def work() -> AsyncIterator[StreamEvent]:
            await asyncio.to_thread(started.wait, 10)
            cancelled = await asyncio.to_thread(cancel.wait, seconds)
            ended[name] = "cancelled" if cancelled else "finished"
            yield StatusEvent(text=ended[name], tool=None)

        return work

    async def main() -> float:
        streams = [
            runner.stream("c-quick", turn("quick", quick, 0.5)),
            runner.stream("c-slow", turn("slow", slow, 30)),
        ]
        await asyncio.to_thread(started.wait, 10)
        began = time.monotonic()
        closing = asyncio.ensure_future(asyncio.to_thread(runner.close, began + 2.0))
        await asyncio.sleep(0.1)
        with pytest.raises(UnavailableError, match="stopping"):
            runner.claim("c-new")  # the stop takes no new turn meanwhile
        await closing
        took = time.monotonic() - began
        for stream in streams:
            async for _ in stream:
                pass
        return took

    took = asyncio.run(main())
    assert ended == {"quick": "finished", "slow": "cancelled"}
    assert 1.8 < took < 10, took  # the graceful time, then the cancel and its close


def test_journal_hands_the_events_that_came_together_in_one_batch() -> None:
    def texts(batch: list[tuple[str, StreamEvent]]) -> list[str]:
        return [f"{i} {getattr(e, 'text', '')}" for i, e in batch]

    async def main() -> list[list[str]]:
        journal = Journal("t1")
        for text in ("one", "two", "three"):  # before anyone reads: one batch
            journal.add(StatusEvent(text=text, tool=None))
        reader = journal.read(pause=0.05)
        seen = [texts(await anext(reader))]
        seen.append(texts(await anext(reader)))  # nothing for the pause: an empty batch
        journal.add(StatusEvent(text="four", tool=None))
        seen.append(texts(await anext(reader)))
        journal.finish()
        seen.append([text async for batch in reader for text in texts(batch)])  # the end
        # A reader that comes back after the second event reads on from the third.
        again = journal.read(journal.position("t1.2"))
        seen.append([text async for batch in again for text in texts(batch)])
        return seen

    assert asyncio.run(main()) == [
        ["t1.1 one", "t1.2 two", "t1.3 three"],
        [],
        ["t1.4 four"],
        [],
        ["t1.3 three", "t1.4 four"],
    ]
