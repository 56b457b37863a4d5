"""Load benchmark: many customers at once through the HTTP service (issue 14).

Starts a scripted OpenAI-compatible model server (zero latency: every figure here is the
time the service itself adds), one or more ``travel-assistant serve`` processes over the
same travel database and conversation store, and then ``--customers`` concurrent
customers, each a different passenger with their own token, each holding a conversation
of ``--turns`` turns over a real HTTP client: a greeting, two policy questions, a flight
search, a hotel search with the hotel specialist, a hotel booking approved over the
decisions endpoint, a hand-back and small talk. Customers are spread over the workers
turn by turn, so a conversation moves between processes as it would behind a load
balancer.

Prints turns per second, the p50/p95/max latency of a turn (message to the end of its
stream; the booking turn includes its approval round), the errors (target 0), a check
of every write against the database (each customer's hotel stay exists once and was
charged once), and the workers' CPU time per turn (user + system, from ``/proc``).

``--concurrency N`` lets at most N customers talk at once (the next starts when one has
finished), so that many conversations can be played by a steady crowd; with
``--memory-every N`` the workers' resident memory is read every N turns, to see that
it stays flat (issue 28: 5,000 turns over 500 conversations):

    python scripts/bench_load.py --customers 500 --turns 10 --concurrency 20 \
        --memory-every 500

    python scripts/bench_load.py                       # SQLite, one worker
    python scripts/bench_load.py --customers 20        # 20 concurrent customers
    python scripts/bench_load.py --db postgresql+psycopg://postgres@127.0.0.1:5432/bench \\
        --conversations postgresql+psycopg://postgres@127.0.0.1:5432/bench --workers 2

``--in-process`` plays the same customers through ``conversations.protocol`` in one
worker process without HTTP (as the terminal drives it), for the service's CPU per turn
over the in-process figure:

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
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
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
from tests.support.fake_openai import FakeOpenAI, Reply
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


@dataclass
class Figures:
    """What the customers measured."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    turns: int = 0
    events: int = 0  # server-sent events received (over HTTP)


async def stream(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[Any]:
    """POST ``body`` and return the server-sent events of the reply."""
    async with client.stream("POST", url, json=body) as response:
        text = (await response.aread()).decode()
        if response.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {response.status_code} {text[:200]}")
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
) -> None:
    """Hold one conversation of ``turns`` turns, moving between workers turn by turn."""
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
    async with httpx.AsyncClient(headers=headers, timeout=120) as client:
        created = await client.post(f"{workers[index % len(workers)]}/api/v1/conversations")
        if created.status_code != 201:
            figures.errors.append(f"customer {index}: create: HTTP {created.status_code}")
            return
        conversation = created.json()["conversation_id"]
        for turn in range(turns):
            base = f"{workers[(index + turn) % len(workers)]}/api/v1/conversations/{conversation}"
            started = time.perf_counter()
            try:
                events = await stream(client, f"{base}/messages", {"text": texts[turn % 10]})
                pending = [e for e in events if e.name == "pending"]
                if pending:
                    actions = pending[-1].data["actions"]
                    decisions = [
                        {"tool_call_id": a["tool_call_id"], "approved": True} for a in actions
                    ]
                    events += await stream(client, f"{base}/decisions", {"decisions": decisions})
                failed = [e for e in events if e.name == "error"]
                if failed:
                    figures.errors.append(f"customer {index} turn {turn}: {failed[0].data}")
            except (httpx.HTTPError, RuntimeError) as error:
                figures.errors.append(f"customer {index} turn {turn}: {error!r}")
                continue
            figures.latencies.append(time.perf_counter() - started)
            figures.turns += 1
            figures.events += len(events)
            on_turn()


def play_in_process(spec_file: Path) -> int:
    """Play the customers of ``spec_file`` through ``conversations.protocol``, no HTTP.

    The worker of ``--in-process``: the same assistant, stores and model client as
    ``serve`` builds (``commands.serve``), driven as the terminal drives it, one thread
    per customer talking, ``concurrency`` at once. It prints ``ready`` once built, plays
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

    def converse(index: int) -> None:
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
    db: Database, passengers: list[str], stays: list[Stay], charged_before: dict[str, int]
) -> list[str]:
    """Return every customer whose stay is missing, doubled, or charged other than once."""
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
            if booked != 1 or charged != 1:
                problems.append(f"{passenger}: {booked} stays booked, {charged} charges")
    return problems


Played = tuple[Figures, float, float, list[tuple[int, list[int]]]]


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

    Returns the customers' figures, the seconds they took, the workers' CPU seconds, and
    the workers' memory read every ``--memory-every`` turns.
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
            await asyncio.gather(
                *(
                    customer(i, tokens[i], stays[i], urls, args.turns, figures, crowd, on_turn)
                    for i in range(len(tokens))
                )
            )

        cpu_before = sum(cpu_seconds(pid) for pid in pids)
        started = time.perf_counter()
        asyncio.run(run_all())
        elapsed = time.perf_counter() - started
        cpu_used = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    finally:
        for process in processes:
            process.send_signal(signal.SIGINT)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    return figures, elapsed, cpu_used, memory


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
        cpu_before = cpu_seconds(worker.pid)
        started = time.perf_counter()
        worker.stdin.write("go\n")
        worker.stdin.flush()
        played = json.loads(worker.stdout.readline())
        elapsed = time.perf_counter() - started
        cpu_used = cpu_seconds(worker.pid) - cpu_before
    finally:
        worker.stdin.close()
        if worker.wait(60) != 0:
            raise SystemExit(f"the in-process worker exited with {worker.returncode}")
    figures = Figures(played["latencies"], played["errors"], len(played["latencies"]))
    return figures, elapsed, cpu_used, []


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

    with FakeOpenAI(strict=True, responder=respond) as fake:
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
            }
            figures, elapsed, cpu_used, memory = in_process(folder, spec, env, args.memory_every)
        else:
            figures, elapsed, cpu_used, memory = with_workers(
                args, common, env, cwd, folder, tokens, stays
            )
        requests = len(fake.requests)
        rejected = len(fake.rejected)

    problems = check_writes(db, passengers, stays, charged_before)
    db.dispose()
    result = {
        "customers": args.customers,
        "turns_per_customer": args.turns,
        "workers": "in-process" if args.in_process else args.workers,
        "engine": db.engine.dialect.name,
        "turns": figures.turns,
        "seconds": round(elapsed, 2),
        "turns_per_second": round(figures.turns / elapsed, 2),
        "turn_p50_ms": round(statistics.median(figures.latencies) * 1000),
        "turn_p95_ms": round(percentile(figures.latencies, 0.95) * 1000),
        "turn_max_ms": round(max(figures.latencies) * 1000),
        "worker_cpu_ms_per_turn": round(cpu_used / max(figures.turns, 1) * 1000, 1),
        "events_per_turn": round(figures.events / max(figures.turns, 1), 1),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "model_requests": requests,
        "model_requests_refused_by_template": rejected,
        "errors": len(figures.errors),
        "write_problems": len(problems),
    }
    if args.memory_every:
        result["worker_rss_mib_by_turns"] = {
            str(turns): [round(kib / 1024, 1) for kib in sizes] for turns, sizes in memory
        }
        first = next((sizes for turns, sizes in memory if turns >= args.memory_every), None)
        if first is not None:
            result["worker_rss_last_over_first_window"] = [
                round(last / start, 3) for last, start in zip(memory[-1][1], first, strict=True)
            ]
    for error in figures.errors[:10] + problems[:10]:
        print("  !", error)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    return 1 if figures.errors or problems or rejected else 0


if __name__ == "__main__":
    raise SystemExit(main())
