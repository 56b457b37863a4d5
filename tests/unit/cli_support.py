"""Helpers for the in-process terminal tests: ``cli.main([...])`` on piped input.

``chat`` runs the program with prompt_toolkit's pipe input (the end of the script is
Ctrl-D) and a scripted model, as ``test_cli.py`` does; ``run`` runs any other command.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from cli import Console, Overrides, main
from db.clock import fixed_clock
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.conftest import FIXED_NOW
from tests.support.fake_openai import customer_text
from tests.support.scripted import ScriptedChatModel


@dataclass
class Result:
    code: int
    out: str
    err: str


def chat(
    argv: Sequence[str],
    keys: Sequence[str],
    model: ScriptedChatModel | None,
    home: Path | None,
    *,
    raw: str = "",
) -> Result:
    """Run ``travel-assistant [--home HOME] ARGV`` typing ``keys`` (each ended by Enter).

    ``raw`` is typed first, as is (control keys included).
    """
    out, err = io.StringIO(), io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text(raw + "".join(line + "\n" for line in keys))
        pipe.close()  # the end of the script is the end of input (Ctrl-D)
        overrides = Overrides(
            model_factory=(lambda _name: model) if model is not None else None,
            pt_input=pipe,
            pt_output=DummyOutput(),
            console=Console(out=out, err=err),
            clock=fixed_clock(FIXED_NOW),
        )
        prefix = ["--home", str(home)] if home is not None else []
        code = main([*prefix, *argv], overrides)
    return Result(code, out.getvalue(), err.getvalue())


def run(argv: Sequence[str]) -> Result:
    """Run a command that reads no input."""
    out, err = io.StringIO(), io.StringIO()
    code = main(
        list(argv), Overrides(console=Console(out=out, err=err), clock=fixed_clock(FIXED_NOW))
    )
    return Result(code, out.getvalue(), err.getvalue())


def chat_args(db_path: Path, passenger: str = FIXTURE_PASSENGER_ID, *extra: str) -> list[str]:
    return ["chat", "--passenger-id", passenger, "--db", str(db_path), *extra]


def resume_line(err: str) -> str:
    """Return the command the program printed to resume the conversation."""
    lines = [line for line in err.splitlines() if "Resume it with: " in line]
    assert len(lines) == 1, err
    return lines[0].split("Resume it with: ", 1)[1]


def customer_messages(model: ScriptedChatModel) -> list[str]:
    """Return the customer's messages in the model's last request, without their times."""
    return [customer_text(str(m.content)) for m in model.received[-1] if m.type == "human"]
