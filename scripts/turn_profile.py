"""Where a turn's CPU goes outside the model: shares of a py-spy profile, by part.

The graph runs in a thread of its own and the tools in worker threads, so a profiler of
the main thread sees only the queue it waits on. ``py-spy`` samples every thread; with
``--gil`` only the thread holding the GIL, i.e. the one doing Python work. Record the
warm conversations of ``scripts/bench_conversation.py`` and read the file here:

    python scripts/bench_conversation.py --play 1 --template /tmp/bench.sqlite  # builds it
    py-spy record --gil -r 500 --format raw -o /tmp/turns.txt -- \
        python scripts/bench_conversation.py --play 30 --turns 14 --template /tmp/bench.sqlite
    python scripts/turn_profile.py /tmp/turns.txt

Only samples taken while conversations play are counted (the main thread inside
``play``, and every other thread), less the reader's waits for the graph's next event.
Each sample counts once, for the first part below whose test its stack passes, so the
order of the parts matters: the tools before the nodes that call them, the model before
the assistant node around it. ``--top N`` also lists the N functions found in most
samples (inclusive), and ``--containing TEXT`` (repeatable) the share of the samples with
a frame that contains TEXT, whatever their part, e.g. ``--containing local_read``.

``--owners`` splits the same samples by whose code was running: LangGraph, LangChain's
model call, the tool plumbing, SQLAlchemy, this repository. It needs the files' full
paths (``py-spy record --full-filenames``) to tell the packages apart. Each sample goes
to the code of its innermost frame, except that the standard library, pydantic, the
serialisers and ``langchain_core`` count for the code that called them: a message this
repository builds is this repository's work, a callback LangGraph runs is LangGraph's.
A ``langchain_core`` frame under a chat model's or a tool's method is that call's
plumbing; the scripted model (``tests/``, ``MeasuredModel``) counts with the model call,
as it builds the chunks a provider's client would; a stack of the standard library alone
is a pool's worker thread between tasks. What is not this repository's is what the
program pays for its stack, whatever its own code does.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

Test = Callable[[str], bool]


def _has(*names: str) -> Test:
    return lambda stack: any(name in stack for name in names)


def _matches(pattern: str) -> Test:
    compiled = re.compile(pattern)
    return lambda stack: compiled.search(stack) is not None


PARTS: tuple[tuple[str, Test], ...] = (
    (
        "the tools: SQLAlchemy and sqlite3 under them",
        lambda s: "StructuredTool._run" in s and ("sqlalchemy" in s or "sqlite3" in s),
    ),
    (
        "the tools: the rest (arguments, results, ToolNode and its thread)",
        _has("ToolNode", "StructuredTool._run"),
    ),
    (
        "the model call: LangChain's plumbing and the scripted model's chunks",
        _has("BaseChatModel.invoke"),
    ),
    ("the assistant node's own work (history window, request)", _has("Assistant.__call__")),
    ("fetch_user_info (the passenger's bookings)", _has("fetch_user_info")),
    ("the approval node outside its tools", _has("run_sensitive_tools")),
    ("routing (the state read again with the step's writes)", _has("BranchSpec._route")),
    (
        "saving writes and checkpoints (serialise, compress, SQLite, hand-off)",
        _matches(r"put_writes|_put_checkpoint|FencedSaver|SqliteSaver\.put"),
    ),
    (
        "reading the state when a run starts",
        lambda s: "play (" not in s and _matches(r"get_tuple|get_delta_channel_history")(s),
    ),
    ("the caller's side (send, resolve, pending actions, events)", _has("play (")),
    ("LangGraph's own step work (tasks, channels, callbacks, threads)", lambda s: True),
)


ROOT = Path(__file__).resolve().parent.parent
_ROOT_PREFIX = f"{ROOT}/"  # how this repository's files begin in a full-path profile

# Owners of the code a sample was running (``--owners``).
LANGGRAPH = "LangGraph: steps, channels, saving, callbacks around nodes"
MODEL = "LangChain's model call, the scripted model's chunks in it"
TOOL_PLUMBING = "the tool plumbing: LangChain's BaseTool, LangGraph's ToolNode"
DATABASE = "SQLAlchemy and sqlite3"
OURS = "this repository's own code"
DRIVER = "the benchmark's own loop"
THREADS = "worker threads between tasks (the runs' and the tools' executors)"
OTHER = "other libraries"
OWNERS = (LANGGRAPH, MODEL, TOOL_PLUMBING, DATABASE, THREADS, OURS, DRIVER, OTHER)
# Libraries whose work counts for their caller: messages, validation, serialisers.
_PASS_THROUGH = {
    "langchain_core",
    "langsmith",
    "pydantic",
    "pydantic_core",
    "typing_extensions.py",
    "typing_inspection",
    "ormsgpack",
    "zstandard",
    "uuid_utils",
}
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*?)(?::\d+)?\)$")


def _package(file: str) -> str | None:
    """Return the installed package ``file`` belongs to, ``""`` for the standard library."""
    _, found, rest = file.partition("/site-packages/")
    if found:
        return rest.split("/", 1)[0]
    return None if file.startswith(_ROOT_PREFIX) else ""


def owner(stack: str) -> str:
    """Return whose code a sample's stack was running (see ``--owners``)."""
    for frame in reversed(stack.split(";")):
        match = _FRAME.match(frame)
        if match is None:
            continue
        function, file = match["function"], match["file"]
        if function.startswith("BaseChatModel."):
            return MODEL
        if function.startswith(("BaseTool.", "ToolNode.")):
            return TOOL_PLUMBING
        package = _package(file)
        if package is None:  # this repository
            relative = file[len(_ROOT_PREFIX) :]
            if relative.startswith("tests/"):
                return MODEL  # the scripted model stands in for a provider's client
            if relative.startswith("scripts/"):
                return MODEL if "Model" in function else DRIVER
            return OURS
        if package == "" or package in _PASS_THROUGH:
            continue  # counts for its caller
        if package == "langgraph":
            return LANGGRAPH
        if package == "sqlalchemy":
            return DATABASE
        return OTHER
    return THREADS  # nothing but the standard library: a pool's thread between tasks


def samples(path: Path) -> Iterator[tuple[str, int]]:
    """Yield each counted stack of a py-spy raw file with its sample count."""
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        playing = any(f.startswith("play (") for f in frames)
        if not (playing or frames[0].startswith("Thread._bootstrap")):
            continue  # the main thread outside the conversations: start-up, set-up
        if any("_next_event" in f or "_wait_until_handled" in f for f in frames[-3:]):
            continue  # the reader and the graph waiting for each other
        yield stack, int(count)


def main() -> int:
    """Print the share of each part, and optionally the top functions."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy record --format raw output")
    parser.add_argument("--top", type=int, default=0, help="also list the top N functions")
    parser.add_argument(
        "--containing",
        action="append",
        default=[],
        metavar="TEXT",
        help="also give the share of the samples with a frame that contains TEXT (repeatable)",
    )
    parser.add_argument(
        "--owners",
        action="store_true",
        help="also split the samples by whose code ran (needs py-spy's --full-filenames)",
    )
    args = parser.parse_args()
    parts: Counter[str] = Counter()
    owners: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    containing: Counter[str] = Counter()
    total = 0
    full_paths = False  # a frame named this repository's files by their full path
    for stack, count in samples(args.profile):
        total += count
        frames = stack.split(";")
        for text in args.containing:
            if any(text in frame for frame in frames):
                containing[text] += count
        parts[next(name for name, test in PARTS if test(stack))] += count
        if args.owners:
            owners[owner(stack)] += count
            full_paths = full_paths or _ROOT_PREFIX in stack
        for name in {re.sub(r":\d+\)", ")", frame) for frame in frames}:
            functions[name] += count
    if not total:
        raise SystemExit("no sample taken while a conversation played")
    if args.owners and not full_paths:
        raise SystemExit(
            f"--owners needs the full paths of the files under {ROOT}: record with "
            "py-spy's --full-filenames, and read with the turn_profile.py of the tree profiled"
        )
    print(f"{total} samples while conversations played")
    print("| part | share |\n| --- | ---: |")
    for name, _ in PARTS:
        print(f"| {name} | {parts[name] / total * 100:.0f} % |")
    if args.owners:
        print("| whose code | share |\n| --- | ---: |")
        for name in OWNERS:
            print(f"| {name} | {owners[name] / total * 100:.0f} % |")
    for name, count in functions.most_common(args.top):
        print(f"{count / total * 100:5.1f} %  {name}")
    for text in args.containing:
        print(f"{containing[text] / total * 100:5.1f} %  with a frame containing {text!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
