"""Benchmark: how many tokens the assistant's prompts take, to size a local server's context.

Every offline scenario of data/scenarios is replayed through the real graph with its
scripted replies, with no context budget (so nothing is trimmed), and every request the
model receives is measured as a server would see it: the messages, the tool calls and the
tool definitions (templates print them as JSON into the prompt), with OpenAI's o200k and
cl100k tokenizers (bpe-openai, offline) and with the program's own estimate
(``assistants.context``), which must stay above both.

    python scripts/bench_context.py [--scenario ID]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bpe_openai import get_encoding
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from assistants.context import estimate_tokens, request_tokens
from db.clock import fixed_clock
from db.engine import Database
from db.generate import build_database
from evaluation import SCENARIO_SEED, load_scenarios, run_offline
from tests.conftest import FIXED_NOW
from tests.support.scripted import ScriptedChatModel

# What a template adds per message (role markers), in tokens, on top of the content.
TEMPLATE_TOKENS_PER_MESSAGE = 5


class Measured(ScriptedChatModel):
    """A scripted model with no context budget that records the tools of every request."""

    context_tokens: int = 10_000_000
    tools_sent: list[list[dict[str, Any]]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:  # type: ignore[override]
        super().bind_tools(tools, **kwargs)
        return self.bind(tool_schemas=[convert_to_openai_tool(t) for t in tools])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:  # type: ignore[override]
        self.tools_sent.append(kwargs.pop("tool_schemas", []))
        return super()._stream(messages, stop, run_manager, **kwargs)


def measured(replies: list[AIMessage], built: list[Measured]) -> Measured:
    built.append(Measured(script=list(replies)))
    return built[-1]


def wire_text(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> list[str]:
    """Return the pieces of text a template renders for one request."""
    pieces = [json.dumps(t, ensure_ascii=False) for t in tools]
    for message in messages:
        pieces.append(str(message.content))
        if isinstance(message, AIMessage):
            pieces += [
                json.dumps({"name": c["name"], "arguments": c["args"]}, ensure_ascii=False)
                for c in message.tool_calls
            ]
    return pieces


def main() -> int:
    """Replay the scenarios and print the prompt sizes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", help="only this scenario (repeatable)")
    args = parser.parse_args()
    encodings = {name: get_encoding(name) for name in ("o200k_base", "cl100k_base")}
    scenarios = [s for s in load_scenarios() if not args.scenario or s.id in args.scenario]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        template = Path(folder) / "template.sqlite"
        database = Database.from_url(str(template), clock=fixed_clock(FIXED_NOW))
        build_database(database, seed=SCENARIO_SEED)
        database.dispose()
        for scenario in scenarios:
            built: list[Measured] = []
            run_offline(scenario, template, fixed_clock(FIXED_NOW), partial(measured, built=built))
            model = built[0]
            for messages, tools in zip(model.received, model.tools_sent, strict=True):
                pieces = wire_text(messages, tools)
                overhead = TEMPLATE_TOKENS_PER_MESSAGE * len(messages)
                row = {
                    name: sum(len(enc.encode(p)) for p in pieces) + overhead
                    for name, enc in encodings.items()
                }
                row["estimate"] = request_tokens(messages) + sum(
                    estimate_tokens(json.dumps(t, ensure_ascii=False)) for t in tools
                )
                row["tools"] = sum(
                    len(encodings["o200k_base"].encode(json.dumps(t))) for t in tools
                )
                row["scenario"] = scenario.id
                row["messages"] = len(messages)
                rows.append(row)
    if not rows:
        print("no scenario matched")
        return 1
    biggest = max(rows, key=lambda r: r["cl100k_base"])
    print(f"{len(rows)} model requests over {len(scenarios)} offline scenarios (no trimming)")
    for name in ("o200k_base", "cl100k_base", "estimate"):
        values = [r[name] for r in rows]
        print(
            f"  {name:<12} median {statistics.median(values):6.0f}  max {max(values):6.0f} tokens"
        )
    tools = [r["tools"] for r in rows]
    print(f"  tool definitions alone (o200k): {min(tools)} to {max(tools)} tokens per request")
    print(
        f"  largest request: {biggest['scenario']} ({biggest['messages']} messages): "
        f"{biggest['o200k_base']} o200k, {biggest['cl100k_base']} cl100k, "
        f"estimated {biggest['estimate']}"
    )
    under = [r for r in rows if r["estimate"] < max(r["o200k_base"], r["cl100k_base"])]
    print(f"  requests the estimate undercounts: {len(under)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
