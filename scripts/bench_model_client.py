"""Benchmark: the CPU one model request costs this process, outside the model server.

The chat model as the program builds it (``assistants.models.build_chat_models``), with
the primary assistant's tools bound, asks an OpenAI-compatible server in another process
(``tests.support.fake_openai``, zero latency) for a short streamed reply to a conversation
of ``--turns`` exchanges. The requests go two ways, taking turns (A B A B ...): as the
program sends them (``assistants.openai_chat._LeanCompletions``: the body as written,
chunks as dicts) and through the OpenAI SDK's own ``chat.completions.create`` and chunk
models. Prints the median CPU time (user + system, this process only) per request of
each, over ``--rounds`` rounds of ``--requests`` requests, through the sync client (a
turn with no cancel event) and the async one (the program's turns, which can be
cancelled).

    python scripts/bench_model_client.py [--turns 8] [--rounds 7] [--requests 50]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from assistants.models import ModelSettings, build_chat_models
from assistants.openai_chat import _CANCEL, BoundedChatOpenAI
from assistants.specialists import build_crew
from db.engine import Database
from db.generate import build_database

SERVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.support.fake_openai import FakeOpenAI, Reply
reply = Reply(text="Happy to help with that. Is there anything else you need today?")
with FakeOpenAI(responder=lambda body: reply) as fake:
    print(fake.base_url, flush=True)
    time.sleep(3600)
"""


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def conversation(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You help the passengers of an airline. " * 20)]
    for number in range(turns):
        messages.append(HumanMessage(f"Question {number} about my flight and the policy?"))
        messages.append(AIMessage("Here is what I found for you. Anything else? " * 5))
    messages.append(HumanMessage("And the last one?"))
    return messages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=8, help="exchanges before the request")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=50, help="requests per round")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-client-"))
    db = Database.from_url(str(folder / "travel.sqlite"))
    build_database(db)
    tools = list(build_crew(db).primary_tools)
    messages = conversation(args.turns)
    root = str(Path(__file__).resolve().parent.parent)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(root=root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        settings = ModelSettings(model="scripted", base_url=base_url, api_key="bench")
        lean = build_chat_models(settings)["primary_assistant"]
        stock = build_chat_models(settings)["primary_assistant"]
        assert isinstance(lean, BoundedChatOpenAI) and isinstance(stock, BoundedChatOpenAI)
        stock.client = stock.client._completions  # the SDK's own create and chunk models
        stock.async_client = stock.async_client._completions
        cancel = threading.Event()

        def request(model: BoundedChatOpenAI, cancellable: bool) -> Callable[[], object]:
            bound = model.bind_tools(tools)

            def one() -> object:
                token = _CANCEL.set(cancel if cancellable else None)
                try:
                    return bound.invoke(messages)
                finally:
                    _CANCEL.reset(token)

            return one

        print(f"{len(messages)} messages, {len(tools)} tools, a 12-word streamed reply")
        for client, cancellable in (("sync", False), ("async", True)):
            ways = {"program": request(lean, cancellable), "sdk": request(stock, cancellable)}
            for one in ways.values():
                for _ in range(10):  # warm: connections, caches
                    one()
            figures: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.rounds):
                for name, one in ways.items():
                    start = cpu()
                    for _ in range(args.requests):
                        one()
                    figures[name].append(1000 * (cpu() - start) / args.requests)
            program, sdk = (statistics.median(figures[n]) for n in ("program", "sdk"))
            print(
                f"{client:>5} client: CPU per request, median of {args.rounds} rounds: "
                f"as the program sends it {program:.2f} ms, through the SDK's create "
                f"{sdk:.2f} ms ({program / sdk:.2f}x)"
            )
    finally:
        server.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
