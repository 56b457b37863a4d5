"""``scripts/turn_profile.py``: a py-spy profile read into parts, run as the command it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "turn_profile.py"

PLAYING = "<module> (bench.py:1);play (bench.py:10)"
GRAPH = "Thread._bootstrap (threading.py:1);Pregel.stream (pregel/main.py:2)"


def _profile(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "turns.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_parts_and_frames_containing_a_text_are_shares_of_the_counted_samples(
    tmp_path: Path,
) -> None:
    profile = _profile(
        tmp_path,
        [
            f"{GRAPH};RunnableSeq.invoke (x.py:1);local_read (pregel/_algo.py:9) 3",
            f"{GRAPH};BranchSpec._route (graph/_branch.py:4);local_read (pregel/_algo.py:9) 1",
            f"{PLAYING};TravelAssistant.send (conversations/assistant.py:5) 4",
            f"{PLAYING};_next_event (conversations/assistant.py:7) 50",  # a wait: not counted
            "<module> (bench.py:1);setup (bench.py:3) 20",  # outside the conversations
        ],
    )
    out = _run(str(profile), "--containing", "local_read", "--containing", "absent")
    assert "8 samples while conversations played" in out
    assert "| routing (the state read again with the step's writes) | 12 % |" in out
    assert "| the caller's side (send, resolve, pending actions, events) | 50 % |" in out
    assert "| LangGraph's own step work (tasks, channels, callbacks, threads) | 38 % |" in out
    assert " 50.0 %  with a frame containing 'local_read'" in out
    assert "  0.0 %  with a frame containing 'absent'" in out


def _refused(*args: str) -> str:
    """Run the script expecting it to refuse; return what it said."""
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
    assert done.returncode != 0
    return done.stderr


def test_a_profile_without_conversation_samples_is_refused(tmp_path: Path) -> None:
    profile = _profile(tmp_path, ["<module> (bench.py:1);setup (bench.py:3) 20"])
    assert "no sample taken while a conversation played" in _refused(str(profile))


ROOT = SCRIPT.parents[1]
SITE = "/venv/lib/python3.11/site-packages"
LIB = "/usr/lib/python3.11"


def _frame(function: str, file: str) -> str:
    return f"{function} ({file}:1)"


def test_owners_splits_the_samples_by_whose_code_ran(tmp_path: Path) -> None:
    graph = ";".join(
        [
            _frame("Thread._bootstrap", f"{LIB}/threading.py"),
            _frame("TravelAssistant._run.<locals>.produce", f"{ROOT}/conversations/assistant.py"),
            _frame("Pregel.stream", f"{SITE}/langgraph/pregel/main.py"),
        ]
    )
    node = ";".join(
        [graph, _frame("RunnableCallable.invoke", f"{SITE}/langgraph/_internal/_runnable.py")]
    )
    assistant = f"{node};" + _frame("Assistant.__call__", f"{ROOT}/assistants/assistant.py")
    message = _frame("BaseMessage.__init__", f"{SITE}/langchain_core/messages/base.py")
    validate = _frame("BaseModel.__init__", f"{SITE}/pydantic/main.py")
    model_call = f"{assistant};" + _frame(
        "BaseChatModel.invoke", f"{SITE}/langchain_core/language_models/chat_models.py"
    )
    tool = f"{node};" + _frame("BaseTool.invoke", f"{SITE}/langchain_core/tools/base.py")
    tool_function = f"{tool};" + _frame("search_flights", f"{ROOT}/tools/flights.py")
    profile = _profile(
        tmp_path,
        [
            # LangGraph's own work, and the standard library under it.
            f"{graph};" + _frame("apply_writes", f"{SITE}/langgraph/pregel/_algo.py") + " 10",
            f"{graph};" + _frame("Condition.wait", f"{LIB}/threading.py") + " 5",
            # A message this repository builds is its own work, through pydantic too.
            f"{assistant};{message};{validate} 20",
            # The model call's plumbing, and the scripted model's chunks in it.
            f"{model_call};{message} 8",
            f"{model_call};"
            + _frame("ScriptedChatModel._stream", f"{ROOT}/tests/support/s.py")
            + " 2",
            # A tool's plumbing around the tool; SQLAlchemy under the tool.
            f"{tool};"
            + _frame("ContextThreadPoolExecutor.map", f"{SITE}/langchain_core/r.py")
            + " 5",
            f"{tool_function};"
            + _frame("Connection.execute", f"{SITE}/sqlalchemy/engine/base.py")
            + ";"
            + _frame("Cursor.execute", f"{LIB}/sqlite3/dbapi2.py")
            + " 30",
            # A pool's thread with nothing but the standard library.
            _frame("Thread._bootstrap", f"{LIB}/threading.py")
            + ";"
            + _frame("_worker", f"{LIB}/concurrent/futures/thread.py")
            + " 10",
            f"{graph};" + _frame("get", f"{SITE}/requests/api.py") + " 10",
        ],
    )
    out = _run(str(profile), "--owners")
    assert "100 samples while conversations played" in out
    shares = {
        "LangGraph: steps, channels, saving, callbacks around nodes": 15,
        "LangChain's model call, the scripted model's chunks in it": 10,
        "the tool plumbing: LangChain's BaseTool, LangGraph's ToolNode": 5,
        "SQLAlchemy and sqlite3": 30,
        "worker threads between tasks (the runs' and the tools' executors)": 10,
        "this repository's own code": 20,
        "the benchmark's own loop": 0,
        "other libraries": 10,
    }
    rows = [line for line in out.splitlines() if line.endswith(" % |")]
    assert rows[-len(shares) :] == [f"| {name} | {share} % |" for name, share in shares.items()]


def test_owners_asks_for_full_paths(tmp_path: Path) -> None:
    profile = _profile(tmp_path, [f"{GRAPH};RunnableSeq.invoke (x.py:1) 3"])
    assert "--full-filenames" in _refused(str(profile), "--owners")
