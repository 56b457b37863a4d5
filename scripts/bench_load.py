"""Load benchmark: many customers at once through the HTTP service (issue 14).

Starts a scripted OpenAI-compatible model server (answering at once, so that every
figure is the time the service itself adds, unless ``--model-latency`` is given), one or
more ``travel-assistant serve`` processes over the same travel database and conversation
store, and then ``--customers`` concurrent customers, each a different passenger with
their own token, each holding a conversation of ``--turns`` turns over a real HTTP
client: a greeting, two policy questions, a flight search, a hotel search with the hotel
specialist, a hotel booking approved over the decisions endpoint, a hand-back and small
talk (``--turns 1``: the greeting alone, one message whose reply is one model call).
Customers are spread over the workers turn by turn, so a conversation moves between
processes as it would behind a load balancer.

Prints turns per second, the p50/p95/max latency of a turn (message to the end of its
stream; the booking turn includes its approval round), the errors (target 0), a check of
every write against the database (each customer's hotel stay exists once and was charged
once; none when the conversations stop before the booking, the fifth turn), and the
workers' CPU time per turn (user + system, from ``/proc``). Then, one figure a line: the
requests refused with 503 (``refused_503``, counted apart from the errors); the p50 and
p95 of creating a conversation and of a turn's first byte (the service answers at once
that it took the turn: a late first byte is a request queued in the worker); the most
customers waiting for a turn at once; the workers' and this process's CPU over the run,
as a share of one core; the workers' resident memory at idle (after start-up, before the
customers) and at its peak (``VmRSS`` every 0.5 s), the difference ("memory above idle")
and ``VmHWM``; their open descriptors and threads at idle and at the peak; and how busy
each worker's main thread (its event loop) was, as the shares of the time it ran and
waited for a CPU, over the run and in its busiest two seconds (from the thread's
``schedstat``: run + wait near 1.0 is a loop that never rests). The load average at the
start and at the end goes with the figures. When a request failed, the errors are
counted by their text and the workers' logs are kept (their paths are printed).

``--model-latency SECONDS`` makes the model wait that long before the first byte of each
reply (``SlowModel``: an asyncio server, each request waiting on its own, so hundreds
wait at once) and adds the model's figures: the p95 of a turn over the model's time
(``turn_p95_over_model_time``; with ``--turns 1`` a turn is one model call, so 1.0 is a
service that adds nothing), and the most model requests and connections at once.
``--arrival-rate N`` brings the customers N a second (customer ``i`` comes at ``i / N``
seconds) instead of all at once; each plays their whole conversation. Customers waiting
on a slow model, one message each:

    python scripts/bench_load.py --customers 200 --turns 1 --arrival-rate 10 --model-latency 10

``--concurrency N`` lets at most N customers talk at once (the next starts when one has
finished), so that many conversations can be played by a steady crowd; with
``--memory-every N`` the workers' resident memory is read every N turns, to see that
it stays flat (issue 28: 5,000 turns over 500 conversations):

    python scripts/bench_load.py --customers 500 --turns 10 --concurrency 20 \\
        --memory-every 500

    python scripts/bench_load.py                       # SQLite, one worker
    python scripts/bench_load.py --customers 20        # 20 concurrent customers
    python scripts/bench_load.py --db postgresql+psycopg://postgres@127.0.0.1:5432/bench \\
        --conversations postgresql+psycopg://postgres@127.0.0.1:5432/bench --workers 2

``--in-process`` plays the same customers through ``conversations.protocol`` in one
worker process without HTTP (as the terminal drives it), for the service's CPU per turn
over the in-process figure (``--arrival-rate`` and ``--model-latency`` apply there too):

    python scripts/bench_load.py --customers 20 --in-process

``--tree DIR`` runs the workers as ``python -m cli`` from another source tree (another
commit, unpacked with ``git archive``), to pair two commits in one session, taking turns:

    for i in 1 2 3; do python scripts/bench_load.py --customers 20 --tree ../base
        python scripts/bench_load.py --customers 20; done
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from sqlalchemy import func, select

from db.engine import Database
from db.models import Hotel, HotelBooking, Passenger, Payment
from evaluation import percentile
from server.auth import TokenSigner
from tests.support.fake_openai import TEMPLATE_ERROR, FakeOpenAI, Reply, _chunks, _completion
from tests.support.strict_chat import problems as template_problems
from tests.support.web import free_port, parse_sse

HOTEL_ASK = re.compile(r"I need a hotel: hotel (\d+) in (.+?) from (\S+) to (\S+)\.")
HOTEL_BOOK = re.compile(r"Book hotel (\d+) from (\S+) to (\S+), please\.")


@dataclass(frozen=True)
class Stay:
    """The hotel stay one customer books."""

    hotel_id: int
    location: str
    checkin: date
    checkout: date


def customer_turns(stay: Stay) -> list[str]:
    """Return one customer's messages, in order (ten turns; fewer or more by repetition)."""
    return [
        "Hello, I have a few questions today.",
        "What is your baggage policy?",
        "Which flights go from BSL to CDG?",
        f"I need a hotel: hotel {stay.hotel_id} in {stay.location} "
        f"from {stay.checkin.isoformat()} to {stay.checkout.isoformat()}.",
        f"Book hotel {stay.hotel_id} from {stay.checkin.isoformat()} "
        f"to {stay.checkout.isoformat()}, please.",
        "That's all for hotels, thanks.",
        "What is the cancellation policy for hotels?",
        "When is my next flight?",
        "Can I bring a bicycle?",
        "Thanks, goodbye.",
    ]


def _last_tool_name(messages: list[dict[str, Any]]) -> str:
    """Return the name of the tool whose answer is the last message."""
    call_id = messages[-1].get("tool_call_id")
    for message in reversed(messages):
        for tool_call in message.get("tool_calls") or []:
            if tool_call.get("id") == call_id:
                return str(tool_call["function"]["name"])
    return ""


def respond(body: dict[str, Any]) -> Reply:
    """Answer a chat request from its messages alone (any number of conversations)."""
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        name = _last_tool_name(messages)
        if name == "ToHotelBookingAssistant":
            ask = next(
                HOTEL_ASK.search(str(m.get("content")))
                for m in reversed(messages)
                if m.get("role") == "user" and HOTEL_ASK.search(str(m.get("content")))
            )
            return Reply(
                tool_calls=[
                    (
                        "search_hotels",
                        {"location": ask[2], "checkin_date": ask[3], "checkout_date": ask[4]},
                    )
                ]
            )
        return Reply(text=f"Here is what I found ({name or 'done'}). Anything else?")
    text = str(last.get("content", ""))
    if "policy" in text:
        return Reply(tool_calls=[("lookup_policy", {"query": text})])
    if "Which flights" in text:
        return Reply(
            tool_calls=[("search_flights", {"departure_airport": "BSL", "arrival_airport": "CDG"})]
        )
    if ask := HOTEL_ASK.search(text):
        request = {"location": ask[2], "checkin_date": ask[3], "checkout_date": ask[4]}
        return Reply(tool_calls=[("ToHotelBookingAssistant", {**request, "request": text})])
    if book := HOTEL_BOOK.search(text):
        args = {"hotel_id": int(book[1]), "checkin_date": book[2], "checkout_date": book[3]}
        return Reply(text="Booking it now.", tool_calls=[("book_hotel", args)])
    if "That's all for hotels" in text:
        return Reply(tool_calls=[("CompleteOrEscalate", {"cancel": False, "reason": "Done."})])
    return Reply(text="Happy to help with that. Is there anything else?")


class SlowModel:
    """The model of ``respond`` on an asyncio server: each reply waits ``latency`` first.

    The model of ``--model-latency``: every chat request waits ``latency`` seconds before
    the first byte of its answer (not even the headers come earlier, as a server busy
    with the prompt), each on its own, so that any number of requests wait at once
    without a thread each. Then the reply is streamed as ``FakeOpenAI`` streams it (its
    chunks), and a request a strict chat template would refuse gets its 400, as there.
    It serves ``GET /v1/models`` and ``POST /v1/chat/completions`` over HTTP/1.1 with
    keep-alive, on its own event loop in a thread, listening with a deep backlog.
    """

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.requests = 0
        self.rejected = 0
        self.waiting = 0  # chat requests waiting for their answer right now
        self.most_waiting = 0
        self.connections = 0
        self.most_connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> SlowModel:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(
            self._connection, "127.0.0.1", 0, backlog=4096, limit=2**24
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        self.most_connections = max(self.most_connections, self.connections)
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                method, path, _ = head.split("\r\n", 1)[0].split(" ", 2)
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (
                        line.partition(":") for line in head.split("\r\n")[1:] if line
                    )
                }
                data = await reader.readexactly(int(headers.get("content-length", "0")))
                if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
                    await self._chat(json.loads(data or b"{}"), writer)
                elif method == "GET" and path.rstrip("/").endswith("/models"):
                    models = {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
                    self._json(writer, 200, models)
                else:
                    self._json(writer, 404, {"error": {"message": "File Not Found", "code": 404}})
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # the client closed its connection (between requests, or a cancelled one)
        finally:
            self.connections -= 1
            self._tasks.discard(task)
            writer.close()

    @staticmethod
    def _json(writer: asyncio.StreamWriter, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )

    async def _chat(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.waiting -= 1
        found = template_problems(body.get("messages", []))
        if found:
            self.rejected += 1
            message = TEMPLATE_ERROR.replace("{reason}", found[0].split(": ", 1)[-1])
            error = {"code": 400, "message": message, "type": "invalid_request_error"}
            self._json(writer, 400, {"error": error})
            return
        reply = respond(body)
        if not body.get("stream"):
            self._json(writer, 200, _completion(reply, body))
            return
        parts = [
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        ]
        for chunk in [*(json.dumps(c) for c in _chunks(reply, body)), "[DONE]"]:
            event = f"data: {chunk}\n\n".encode()
            parts.append(f"{len(event):X}\r\n".encode() + event + b"\r\n")
        parts.append(b"0\r\n\r\n")
        writer.write(b"".join(parts))


def proc_status(pid: int) -> dict[str, int]:
    """Return the numeric fields of ``/proc/<pid>/status`` (VmRSS, VmHWM in KiB, Threads)."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        words = value.split()
        if words and words[0].isdigit():
            found[name] = int(words[0])
    return found


def open_descriptors(pid: int) -> int:
    """Return how many file descriptors process ``pid`` holds open (Linux ``/proc``)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def main_thread_schedstat(pid: int) -> tuple[int, int]:
    """Return the ns process ``pid``'s main thread has run, and waited for a CPU to run.

    The main thread of ``serve`` runs the event loop: run + waited near the time gone by
    is a loop that never rests; a large wait is a machine short of CPU for it.
    """
    fields = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    return int(fields[0]), int(fields[1])


class Watch:
    """The workers' resident memory, descriptors, threads and CPU, read every ``every`` s.

    Made before the customers come: what it reads first is the idle figure. While the
    customers play, a thread reads ``VmRSS``, the open descriptors and the threads of
    each worker and keeps the most; at the end ``VmHWM`` (the most resident memory the
    process ever had, start-up included) is read too. The main thread's scheduler
    figures (``/proc/<pid>/task/<pid>/schedstat``) say how busy the event loop was: over
    the run, and in the busiest two seconds.
    """

    WINDOW = 2.0  # seconds of the busiest-window figures

    def __init__(self, pids: Sequence[int], every: float = 0.5) -> None:
        self.pids = list(pids)
        self.every = every
        first = [proc_status(pid) for pid in self.pids]
        self.idle_kib = [status.get("VmRSS", 0) for status in first]
        self.peak_kib = list(self.idle_kib)
        self.hwm_kib = [status.get("VmHWM", 0) for status in first]
        self.idle_threads = [status.get("Threads", 0) for status in first]
        self.peak_threads = list(self.idle_threads)
        self.idle_fds = [open_descriptors(pid) for pid in self.pids]
        self.peak_fds = list(self.idle_fds)
        now = time.monotonic()
        self.sched_first = [(now, *main_thread_schedstat(pid)) for pid in self.pids]
        self.sched_last = list(self.sched_first)
        self.sched_recent: list[list[tuple[float, int, int]]] = [[s] for s in self.sched_first]
        # The busiest window: (run + wait share, run share, wait share) of the main thread.
        self.busiest = [(0.0, 0.0, 0.0) for _ in self.pids]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._sample(last=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def _sample(self, last: bool = False) -> None:
        for index, pid in enumerate(self.pids):
            try:
                status = proc_status(pid)
                sched = (time.monotonic(), *main_thread_schedstat(pid))
            except OSError:  # the worker is gone
                continue
            self.peak_kib[index] = max(self.peak_kib[index], status.get("VmRSS", 0))
            self.peak_threads[index] = max(self.peak_threads[index], status.get("Threads", 0))
            self.peak_fds[index] = max(self.peak_fds[index], open_descriptors(pid))
            if last:
                self.hwm_kib[index] = status.get("VmHWM", 0)
            self.sched_last[index] = sched
            recent = self.sched_recent[index]
            recent.append(sched)
            while len(recent) > 2 and sched[0] - recent[1][0] >= self.WINDOW:
                recent.pop(0)
            if sched[0] - recent[0][0] >= self.WINDOW * 0.9:
                run, wait = self._shares(recent[0], sched)
                self.busiest[index] = max(self.busiest[index], (run + wait, run, wait))

    @staticmethod
    def _shares(first: tuple[float, int, int], last: tuple[float, int, int]) -> tuple[float, float]:
        seconds = max(last[0] - first[0], 1e-9) * 1e9
        return (last[1] - first[1]) / seconds, (last[2] - first[2]) / seconds

    def figures(self) -> dict[str, Any]:
        """Return the figures, per worker, in MiB (memory), descriptors and threads."""

        def mib(values: list[int]) -> list[float]:
            return [round(kib / 1024, 1) for kib in values]

        def pairs(first: list[int], second: list[int]) -> list[list[int]]:
            return [[a, b] for a, b in zip(first, second, strict=True)]

        over_run = [
            self._shares(a, b) for a, b in zip(self.sched_first, self.sched_last, strict=True)
        ]
        return {
            "worker_rss_idle_mib": mib(self.idle_kib),
            "worker_rss_peak_mib": mib(self.peak_kib),
            "worker_rss_above_idle_mib": mib(
                [peak - idle for peak, idle in zip(self.peak_kib, self.idle_kib, strict=True)]
            ),
            "worker_vmhwm_mib": mib(self.hwm_kib),
            "worker_fds_idle_peak": pairs(self.idle_fds, self.peak_fds),
            "worker_threads_idle_peak": pairs(self.idle_threads, self.peak_threads),
            # The main thread's (the event loop's) share of the time: running, and ready
            # to run but waiting for a CPU; over the run, and in the busiest 2 seconds.
            "worker_loop_run_wait_share": [[round(r, 2), round(w, 2)] for r, w in over_run],
            "worker_loop_run_wait_share_busiest_2s": [
                [round(run, 2), round(wait, 2)] for _, run, wait in self.busiest
            ],
        }


@dataclass
class Figures:
    """What the customers measured."""

    latencies: list[float] = field(default_factory=list)
    # Seconds to create a conversation, and from a turn's message to the first byte of
    # its answer (the service says at once that it took the turn: a late first byte is a
    # request waiting in the service before the turn starts).
    creates: list[float] = field(default_factory=list)
    first_bytes: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # requests answered 503
    turns: int = 0
    events: int = 0  # server-sent events received (over HTTP)
    talking: int = 0  # customers waiting for a turn right now
    most_talking: int = 0

    def failed(self, where: str, error: BaseException | str) -> None:
        """Count a request that failed: refused (503) or an error."""
        if isinstance(error, HttpStatusError) and error.status == 503:
            self.refused.append(f"{where}: {error}")
        else:
            self.errors.append(f"{where}: {error if isinstance(error, str) else repr(error)}")


class HttpStatusError(RuntimeError):
    """An answer of the service other than the one expected."""

    def __init__(self, url: str, status: int, text: str) -> None:
        super().__init__(f"{url}: HTTP {status} {text[:200]}")
        self.status = status


# One TLS context for every customer's client: httpx builds one per client otherwise, and
# that takes some 45 ms of CPU each (every customer pays it as they arrive).
_TLS = ssl.create_default_context()


async def stream(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], first: list[float] | None = None
) -> list[Any]:
    """POST ``body`` and return the server-sent events of the reply.

    The seconds until the first byte of the answer's body are added to ``first``.
    """
    started = time.perf_counter()
    async with client.stream("POST", url, json=body) as response:
        chunks: list[bytes] = []
        async for chunk in response.aiter_bytes():
            if first is not None and not chunks and response.status_code == 200:
                first.append(time.perf_counter() - started)
            chunks.append(chunk)
        text = b"".join(chunks).decode()
        if response.status_code != 200:
            raise HttpStatusError(url, response.status_code, text)
    return parse_sse(text)


async def customer(
    index: int,
    token: str,
    stay: Stay,
    workers: Sequence[str],
    turns: int,
    figures: Figures,
    crowd: asyncio.Semaphore,
    on_turn: Callable[[], None],
    arrives: float = 0.0,
) -> None:
    """Hold one conversation of ``turns`` turns, moving between workers turn by turn.

    The customer comes at ``arrives`` (the event loop's clock), then waits for a place
    in the crowd.
    """
    await asyncio.sleep(arrives - asyncio.get_running_loop().time())
    async with crowd:
        await _converse(index, token, stay, workers, turns, figures, on_turn)


async def _converse(
    index: int,
    token: str,
    stay: Stay,
    workers: Sequence[str],
    turns: int,
    figures: Figures,
    on_turn: Callable[[], None],
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    texts = customer_turns(stay)
    async with httpx.AsyncClient(headers=headers, timeout=120, verify=_TLS) as client:
        url = f"{workers[index % len(workers)]}/api/v1/conversations"
        started = time.perf_counter()
        try:
            created = await client.post(url)
            if created.status_code != 201:
                raise HttpStatusError(url, created.status_code, created.text)
        except (httpx.HTTPError, HttpStatusError) as error:
            figures.failed(f"customer {index}: create", error)
            return
        figures.creates.append(time.perf_counter() - started)
        conversation = created.json()["conversation_id"]
        for turn in range(turns):
            base = f"{workers[(index + turn) % len(workers)]}/api/v1/conversations/{conversation}"
            started = time.perf_counter()
            figures.talking += 1
            figures.most_talking = max(figures.most_talking, figures.talking)
            try:
                message = {"text": texts[turn % 10]}
                events = await stream(client, f"{base}/messages", message, figures.first_bytes)
                pending = [e for e in events if e.name == "pending"]
                if pending:
                    actions = pending[-1].data["actions"]
                    decisions = [
                        {"tool_call_id": a["tool_call_id"], "approved": True} for a in actions
                    ]
                    events += await stream(client, f"{base}/decisions", {"decisions": decisions})
                failed = [e for e in events if e.name == "error"]
                if failed:
                    figures.failed(f"customer {index} turn {turn}", str(failed[0].data))
            except (httpx.HTTPError, RuntimeError) as error:
                figures.failed(f"customer {index} turn {turn}", error)
                continue
            finally:
                figures.talking -= 1
            figures.latencies.append(time.perf_counter() - started)
            figures.turns += 1
            figures.events += len(events)
            on_turn()


def play_in_process(spec_file: Path) -> int:
    """Play the customers of ``spec_file`` through ``conversations.protocol``, no HTTP.

    The worker of ``--in-process``: the same assistant, stores and model client as
    ``serve`` builds (``commands.serve``), driven as the terminal drives it, one thread
    per customer talking, ``concurrency`` at once (customer ``i`` comes ``i / arrival_rate``
    seconds after the start when a rate is given). It prints ``ready`` once built, plays
    when a line comes on its standard input, and then prints the figures as JSON.
    """
    from concurrent.futures import ThreadPoolExecutor

    from assistants.models import ModelSettings, build_chat_models
    from commands.common import prepared
    from conversations.assistant import TravelAssistant
    from conversations.events import Thread
    from conversations.protocol import Answer, Conversations
    from conversations.records import TurnEnd, TurnFailure
    from conversations.store import ConversationStore

    spec = json.loads(spec_file.read_text())
    db = Database.from_url(spec["db"])
    settings = ModelSettings(model="scripted", base_url=spec["base_url"], api_key="bench")
    store = ConversationStore.open(spec["conversations"])
    assistant = prepared(TravelAssistant.build(build_chat_models(settings), store.saver, db=db))
    conversations = Conversations(assistant, store.registry, store.locks, store.desk)
    figures = Figures()
    lock = threading.Lock()
    rate = spec.get("arrival_rate")
    start = 0.0  # when the customers start (set below)

    def converse(index: int) -> None:
        if rate:
            time.sleep(max(0.0, start + index / rate - time.monotonic()))
        stay = spec["stays"][index]
        texts = customer_turns(
            Stay(
                stay["hotel_id"],
                stay["location"],
                date.fromisoformat(stay["checkin"]),
                date.fromisoformat(stay["checkout"]),
            )
        )
        thread = Thread(str(uuid.uuid4()), spec["passengers"][index])
        conversations.register(thread)
        conversation = conversations.get(thread)
        for turn in range(spec["turns"]):
            started = time.perf_counter()
            failed: list[str] = []
            with conversation.claim(wait=60) as claimed:
                outcomes = list(claimed.send(texts[turn % 10]))
                ends = [o for o in outcomes if isinstance(o, TurnEnd)]
                if ends and ends[-1].approvals:
                    answers = {a.tool_call_id: Answer(True) for a in ends[-1].approvals}
                    outcomes += claimed.resolve(answers)
                failed = [o.text for o in outcomes if isinstance(o, TurnFailure)]
            with lock:
                if failed:
                    figures.errors.append(f"customer {index} turn {turn}: {failed[0]}")
                    continue
                figures.latencies.append(time.perf_counter() - started)
                figures.turns += 1

    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    with ThreadPoolExecutor(spec["concurrency"]) as pool:
        list(pool.map(converse, range(len(spec["passengers"]))))
    print(json.dumps({"latencies": figures.latencies, "errors": figures.errors}), flush=True)
    store.close()
    db.dispose()
    return 0


def rss_kib(pid: int) -> int:
    """Return the resident memory of process ``pid`` in KiB (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """Return the user + system CPU time process ``pid`` has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_up(url: str, process: subprocess.Popen[bytes], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the worker at {url} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the worker at {url} did not start in {seconds:.0f} s")


def plan_stays(db: Database, count: int) -> tuple[list[str], list[Stay]]:
    """Pick ``count`` passengers and a free two-night stay for each, far from other stays."""
    today = db.clock().date()
    with db.session() as session:
        passengers = list(
            session.scalars(
                select(Passenger.passenger_id).order_by(Passenger.passenger_id).limit(count)
            )
        )
        hotels = session.execute(
            select(Hotel.id, Hotel.location).where(Hotel.rooms > 0).order_by(Hotel.id)
        ).all()
    stays = []
    for index in range(count):
        hotel_id, location = hotels[index % len(hotels)]
        checkin = today + timedelta(days=200 + 3 * (index // len(hotels)))
        stays.append(Stay(hotel_id, location, checkin, checkin + timedelta(days=2)))
    return passengers, stays


def charges(db: Database, passengers: list[str]) -> dict[str, int]:
    """Return how many charges each passenger has paid so far."""
    with db.session() as session:
        rows = session.execute(
            select(Payment.passenger_id, func.count())
            .where(Payment.passenger_id.in_(passengers), Payment.amount_cents > 0)
            .group_by(Payment.passenger_id)
        ).all()
    counted = {passenger: 0 for passenger in passengers}
    counted.update({row[0]: int(row[1]) for row in rows})
    return counted


def check_writes(
    db: Database,
    passengers: list[str],
    stays: list[Stay],
    charged_before: dict[str, int],
    expected: int = 1,
) -> list[str]:
    """Return every customer whose stay is missing, doubled, or charged other than once.

    ``expected`` is 0 when the conversations stop before the booking turn (the fifth):
    then no customer may have booked or paid anything.
    """
    problems = []
    charged_after = charges(db, passengers)
    with db.session() as session:
        for passenger, stay in zip(passengers, stays, strict=True):
            booked = session.scalar(
                select(func.count())
                .select_from(HotelBooking)
                .where(
                    HotelBooking.passenger_id == passenger,
                    HotelBooking.hotel_id == stay.hotel_id,
                    HotelBooking.checkin_date == stay.checkin,
                    HotelBooking.status == "confirmed",
                )
            )
            charged = charged_after[passenger] - charged_before[passenger]
            if booked != expected or charged != expected:
                problems.append(f"{passenger}: {booked} stays booked, {charged} charges")
    return problems


@dataclass
class Played:
    """What one run measured: the customers' figures and the workers'."""

    figures: Figures
    seconds: float  # from the first customer's arrival to the last one's end
    cpu_seconds: float  # the workers' user + system CPU over that time
    memory: list[tuple[int, list[int]]]  # (turns, VmRSS KiB per worker), --memory-every
    watch: Watch
    own_cpu_seconds: float = 0.0  # this process's (the customers' and the model's)


def with_workers(
    args: argparse.Namespace,
    common: list[str],
    env: dict[str, str],
    cwd: Path | None,
    folder: Path,
    tokens: list[str],
    stays: list[Stay],
) -> Played:
    """Play the customers over HTTP against ``serve`` workers; return the figures.

    Returns the customers' figures, the seconds they took, the workers' CPU seconds, the
    workers' memory read every ``--memory-every`` turns and what ``Watch`` read. A worker's
    log is kept in ``folder``.
    """
    processes: list[subprocess.Popen[bytes]] = []
    urls = []
    try:
        for _ in range(args.workers):
            port = free_port()
            log = (folder / f"worker-{port}.log").open("wb")
            processes.append(
                subprocess.Popen(
                    [*common, "serve", "--port", str(port), "--no-check"],
                    env=env,
                    cwd=cwd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
        for url, process in zip(urls, processes, strict=True):
            wait_until_up(url, process)

        figures = Figures()
        pids = [process.pid for process in processes]
        memory: list[tuple[int, list[int]]] = [(0, [rss_kib(pid) for pid in pids])]

        def on_turn() -> None:
            if args.memory_every and figures.turns % args.memory_every == 0:
                memory.append((figures.turns, [rss_kib(pid) for pid in pids]))

        async def run_all() -> None:
            crowd = asyncio.Semaphore(args.concurrency or args.customers)
            start = asyncio.get_running_loop().time()
            rate = args.arrival_rate
            await asyncio.gather(
                *(
                    customer(
                        i,
                        tokens[i],
                        stays[i],
                        urls,
                        args.turns,
                        figures,
                        crowd,
                        on_turn,
                        start + i / rate if rate else start,
                    )
                    for i in range(len(tokens))
                )
            )

        watch = Watch(pids)
        cpu_before = sum(cpu_seconds(pid) for pid in pids)
        own_before = time.process_time()
        started = time.perf_counter()
        with watch:
            asyncio.run(run_all())
        elapsed = time.perf_counter() - started
        cpu_used = sum(cpu_seconds(pid) for pid in pids) - cpu_before
        own_used = time.process_time() - own_before
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    return Played(figures, elapsed, cpu_used, memory, watch, own_used)


def in_process(
    folder: Path, spec: dict[str, Any], env: dict[str, str], memory_every: int | None
) -> Played:
    """Play the customers in a worker process without HTTP (``play_in_process``).

    Its CPU is counted from the moment it is built, as a ``serve`` worker's is.
    """
    if memory_every:
        raise SystemExit("--memory-every reads serve workers; not with --in-process")
    spec_file = folder / "in-process.json"
    spec_file.write_text(json.dumps(spec))
    worker = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--play-in-process", str(spec_file)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        if worker.stdout.readline().strip() != "ready":
            raise SystemExit("the in-process worker did not start")
        watch = Watch([worker.pid])
        cpu_before = cpu_seconds(worker.pid)
        started = time.perf_counter()
        with watch:
            worker.stdin.write("go\n")
            worker.stdin.flush()
            played = json.loads(worker.stdout.readline())
        elapsed = time.perf_counter() - started
        cpu_used = cpu_seconds(worker.pid) - cpu_before
    finally:
        worker.stdin.close()
        if worker.wait(60) != 0:
            raise SystemExit(f"the in-process worker exited with {worker.returncode}")
    figures = Figures(played["latencies"], played["errors"], turns=len(played["latencies"]))
    return Played(figures, elapsed, cpu_used, [], watch)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--customers", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--workers", type=int, default=1, help="serve processes")
    parser.add_argument("--db", help="travel database URL or file (default: a new SQLite file)")
    parser.add_argument("--conversations", help="conversation store URL or file")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--concurrency", type=int, help="customers talking at once (default: all of them)"
    )
    parser.add_argument(
        "--memory-every", type=int, metavar="N", help="read the workers' memory every N turns"
    )
    parser.add_argument(
        "--arrival-rate",
        type=float,
        metavar="N",
        help="customers come N a second (default: all at once)",
    )
    parser.add_argument(
        "--model-latency",
        type=float,
        metavar="SECONDS",
        help="the model waits this long before the first byte of each reply (asyncio server)",
    )
    parser.add_argument(
        "--tree",
        type=Path,
        help="run the program from this source tree (python -m cli), e.g. another commit's",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="play the customers through the conversation protocol in one process, no HTTP",
    )
    parser.add_argument("--play-in-process", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.play_in_process is not None:
        return play_in_process(args.play_in_process)
    if args.in_process and (args.tree is not None or args.workers != 1):
        parser.error("--in-process plays in one process of this tree")
    if args.turns < 1 or args.customers < 1:
        parser.error("--customers and --turns take at least 1")
    if args.arrival_rate is not None and args.arrival_rate <= 0:
        parser.error("--arrival-rate takes a rate above 0")
    if args.model_latency is not None and args.model_latency < 0:
        parser.error("--model-latency takes 0 seconds or more")

    load_at_start = Path("/proc/loadavg").read_text().split()[:3]
    folder = Path(tempfile.mkdtemp(prefix="bench-load-"))
    home = folder / "home"
    db_url = args.db or str(folder / "travel.sqlite")
    executable = shutil.which("travel-assistant")
    if executable is None:
        raise SystemExit("travel-assistant is not installed (pip install -e .)")
    program = [executable]
    tree: dict[str, str] = {}
    cwd = None  # python -m puts the working folder first on the path: the tree's own
    if args.tree is not None:
        program = [sys.executable, "-m", "cli"]
        cwd = args.tree.resolve()
        tree = {"PYTHONPATH": str(cwd)}
    env = {
        **os.environ,
        **tree,
        "TRAVEL_ASSISTANT_HOME": str(home),
        "TRAVEL_ASSISTANT_SECRET": secrets.token_hex(32),
        "OPENAI_API_KEY": "bench",
        "TRAVEL_ASSISTANT_MODEL": "scripted",
    }
    common = [*program, "--home", str(home), "--db", db_url]
    if args.conversations:
        common += ["--conversations", args.conversations]
    subprocess.run(
        [*common, "db", "init", "--force"], env=env, check=True, capture_output=True, cwd=cwd
    )
    db = Database.from_url(db_url)
    passengers, stays = plan_stays(db, args.customers)
    signer = TokenSigner(env["TRAVEL_ASSISTANT_SECRET"])
    tokens = [signer.issue(passenger) for passenger in passengers]
    charged_before = charges(db, passengers)

    model: FakeOpenAI | SlowModel = (
        FakeOpenAI(strict=True, responder=respond)
        if args.model_latency is None
        else SlowModel(args.model_latency)
    )
    with model as fake:
        env["OPENAI_BASE_URL"] = fake.base_url
        if args.in_process:
            spec = {
                "db": db_url,
                "conversations": args.conversations or str(folder / "conversations.sqlite"),
                "base_url": fake.base_url,
                "passengers": passengers,
                "stays": [
                    {
                        "hotel_id": stay.hotel_id,
                        "location": stay.location,
                        "checkin": stay.checkin.isoformat(),
                        "checkout": stay.checkout.isoformat(),
                    }
                    for stay in stays
                ],
                "turns": args.turns,
                "concurrency": args.concurrency or args.customers,
                "arrival_rate": args.arrival_rate,
            }
            played = in_process(folder, spec, env, args.memory_every)
        else:
            played = with_workers(args, common, env, cwd, folder, tokens, stays)
        if isinstance(fake, SlowModel):
            requests, rejected = fake.requests, fake.rejected
        else:
            requests, rejected = len(fake.requests), len(fake.rejected)

    figures, elapsed, cpu_used, memory = (
        played.figures,
        played.seconds,
        played.cpu_seconds,
        played.memory,
    )
    problems = check_writes(
        db, passengers, stays, charged_before, expected=1 if args.turns >= 5 else 0
    )
    db.dispose()
    latencies = figures.latencies or [0.0]
    result = {
        "customers": args.customers,
        "turns_per_customer": args.turns,
        "workers": "in-process" if args.in_process else args.workers,
        "engine": db.engine.dialect.name,
        "turns": figures.turns,
        "seconds": round(elapsed, 2),
        "turns_per_second": round(figures.turns / elapsed, 2),
        "turn_p50_ms": round(statistics.median(latencies) * 1000),
        "turn_p95_ms": round(percentile(latencies, 0.95) * 1000),
        "turn_max_ms": round(max(latencies) * 1000),
        "worker_cpu_ms_per_turn": round(cpu_used / max(figures.turns, 1) * 1000, 1),
        "events_per_turn": round(figures.events / max(figures.turns, 1), 1),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "model_requests": requests,
        "model_requests_refused_by_template": rejected,
        "errors": len(figures.errors),
        "write_problems": len(problems),
    }
    if args.arrival_rate is not None:
        result["arrival_rate_per_second"] = args.arrival_rate
    if isinstance(fake, SlowModel):
        result["model_latency_s"] = fake.latency
        if fake.latency > 0:
            result["turn_p95_over_model_time"] = round(
                percentile(latencies, 0.95) / fake.latency, 2
            )
        result["model_requests_waiting_at_once_most"] = fake.most_waiting
        result["model_connections_at_once_most"] = fake.most_connections
    if not args.in_process:
        result["customers_waiting_for_a_turn_at_once_most"] = figures.most_talking
        for name, values in (("create", figures.creates), ("turn_first_byte", figures.first_bytes)):
            if values:
                result[f"{name}_p50_ms"] = round(statistics.median(values) * 1000)
                result[f"{name}_p95_ms"] = round(percentile(values, 0.95) * 1000)
    result["refused_503"] = len(figures.refused)
    result["worker_cpu_share_of_one_core"] = round(cpu_used / elapsed, 2)
    if not args.in_process:
        result["bench_process_cpu_share_of_one_core"] = round(played.own_cpu_seconds / elapsed, 2)
    result.update(played.watch.figures())
    result["load_average_at_start"] = load_at_start
    result["load_average_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    if args.memory_every:
        result["worker_rss_mib_by_turns"] = {
            str(turns): [round(kib / 1024, 1) for kib in sizes] for turns, sizes in memory
        }
        first = next((sizes for turns, sizes in memory if turns >= args.memory_every), None)
        if first is not None:
            result["worker_rss_last_over_first_window"] = [
                round(last / start, 3) for last, start in zip(memory[-1][1], first, strict=True)
            ]
    for error in figures.errors[:10] + figures.refused[:3] + problems[:10]:
        print("  !", error)
    kinds = Counter(_kind(error) for error in figures.errors + figures.refused)
    for kind, count in kinds.most_common(10):
        print(f"  ! {count} x {kind}")
    print(dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    failed = figures.errors or figures.refused or problems or rejected
    if failed and not args.in_process:
        print("the workers' logs are kept:", *sorted(folder.glob("worker-*.log")), sep="\n  ")
        for path in (home, *folder.glob("*.sqlite*")):  # the databases, not the logs
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


def dumps(result: dict[str, Any]) -> str:
    """Return ``result`` as JSON, one figure a line (a list of figures on its line)."""
    lines = (f"  {json.dumps(name)}: {json.dumps(value)}" for name, value in result.items())
    return "{\n" + ",\n".join(lines) + "\n}"


def _kind(error: str) -> str:
    """Return an error's text without the customer and turn it happened to (to count)."""
    text = re.sub(r"^customer \d+(?: turn \d+)?(?:: create)?: ", "", error)
    return re.sub(r"/conversations/[0-9a-f-]+", "/conversations/ID", text)[:300]


if __name__ == "__main__":
    raise SystemExit(main())
