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


def test_a_profile_without_conversation_samples_is_refused(tmp_path: Path) -> None:
    profile = _profile(tmp_path, ["<module> (bench.py:1);setup (bench.py:3) 20"])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(profile)], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "no sample taken while a conversation played" in done.stderr
