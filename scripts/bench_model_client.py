"""Benchmark: the CPU one model request costs this process, outside the model server.

The chat model as the program builds it (``assistants.models.build_chat_models``), with
the primary assistant's tools bound, asks an OpenAI-compatible server in another process
(``tests.support.fake_openai``, zero latency) for a short streamed reply to a conversation
of ``--turns`` exchanges. Prints the median CPU time (user + system, this process, all
its threads) per request, over ``--rounds`` rounds of ``--requests`` requests, for each
way of sending them, the ways taking turns (A B C A B C ...):

- the sync client (a call with no cancel event): as the program sends the body
  (``assistants.openai_chat._LeanCompletions``: the body as written, chunks as dicts)
  and through the OpenAI SDK's own ``chat.completions.create`` and chunk models;
- the async client, as a turn calls the model (a cancel event among the callbacks: the
  request runs on ``_model_loop``): as the program sends it (the body as written, over
  the SDK's aiohttp client, ``model_http_client``), the body as written over the SDK's
  default HTTPX2 client, and through the SDK's ``create`` over HTTPX2.

``--parallel N`` makes N requests at once (N threads, as N turns of a service), which is
where the HTTP client's connection pool shows.

    python scripts/bench_model_client.py [--turns 8] [--rounds 7] [--requests 50]
        [--parallel 1]
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

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from assistants.models import ModelSettings, build_chat_models
from assistants.openai_chat import BoundedChatOpenAI
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


class _Cancellable(BaseCallbackHandler):
    """What a turn passes to the model: a handler carrying the turn's cancel event."""

    def __init__(self) -> None:
        self.cancel = threading.Event()


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
    parser.add_argument("--parallel", type=int, default=1, help="requests at once")
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

        def built() -> BoundedChatOpenAI:
            model = build_chat_models(settings)["primary_assistant"]
            assert isinstance(model, BoundedChatOpenAI)
            return model

        program, over_httpx, stock = built(), built(), built()
        over_httpx.async_client._on_model_loop = None  # the SDK's default client
        stock.client = stock.client._completions  # the SDK's own create and chunk models
        stock.async_client = stock.async_client._completions

        def request(model: BoundedChatOpenAI, cancellable: bool) -> Callable[[], object]:
            bound = model.bind_tools(tools)
            config: RunnableConfig = {"callbacks": [_Cancellable()]} if cancellable else {}

            def one() -> object:
                return bound.invoke(messages, config)

            if args.parallel == 1:
                return one

            def together() -> object:
                threads = [threading.Thread(target=one) for _ in range(args.parallel)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                return None

            return together

        print(
            f"{len(messages)} messages, {len(tools)} tools, a 12-word streamed reply, "
            f"{args.parallel} at once"
        )
        for client, cancellable, ways in (
            ("sync", False, {"as the program sends it": program, "the SDK's create": stock}),
            (
                "async",
                True,
                {
                    "as the program sends it (aiohttp)": program,
                    "the body as written over HTTPX2": over_httpx,
                    "the SDK's create over HTTPX2": stock,
                },
            ),
        ):
            calls = {name: request(model, cancellable) for name, model in ways.items()}
            for call in calls.values():
                for _ in range(10):  # warm: connections, caches
                    call()
            figures: dict[str, list[float]] = {name: [] for name in calls}
            for _ in range(args.rounds):
                for name, call in calls.items():
                    start = cpu()
                    for _ in range(args.requests):
                        call()
                    spent = cpu() - start
                    figures[name].append(1000 * spent / (args.requests * args.parallel))
            print(f"{client} client: CPU per request, median of {args.rounds} rounds")
            first = statistics.median(next(iter(figures.values())))
            for name, values in figures.items():
                median = statistics.median(values)
                print(f"  {name:<36} {median:6.2f} ms ({median / first:.2f}x)")
    finally:
        server.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
