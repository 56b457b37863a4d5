"""Command-line options (issue 11, finding 9).

Global options before or after the command; ``--db`` naming a missing file refuses
unless asked to create it; passenger ids with or without the space; ``--version``; and
``--help`` stays fast (no LangChain, no rich).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.cli import chat, chat_args, run
from tests.support.scripted import ScriptedChatModel, say


def test_cli_global_options_after_the_command(
    db_path: Path, tmp_path: Path, model: ScriptedChatModel
) -> None:
    home = tmp_path / "elsewhere"
    model.extend(say("Hello."))
    result = chat(
        ["chat", "--passenger-id", FIXTURE_PASSENGER_ID, "--home", str(home), "--db", str(db_path)],
        ["hi"],
        model,
        None,
    )
    assert result.code == 0, result.err
    assert (home / "sessions.sqlite").exists()  # --home after the command was used
    listed = run(["sessions", "--home", str(home), "--debug"])
    assert listed.code == 0, listed.err
    assert "hi" in listed.out
    before = run(["--home", str(home), "sessions"])
    assert before.out == listed.out


def test_cli_db_naming_a_missing_file_refuses(tmp_path: Path, model: ScriptedChatModel) -> None:
    missing = tmp_path / "typo.sqlite"
    result = chat(chat_args(missing), ["hi"], model, tmp_path / "home")
    assert result.code == 2
    assert f"No travel database at {missing}" in result.err
    assert "travel-assistant db init --db" in result.err and "--create-db" in result.err
    assert not missing.exists()  # nothing was built behind the customer's back
    assert model.received == []


def test_cli_token_for_a_missing_database_refuses(tmp_path: Path) -> None:
    missing = tmp_path / "typo.sqlite"
    result = run(
        ["--home", str(tmp_path / "home"), "--db", str(missing), "token", "--passenger-id", "x"]
    )
    assert result.code == 2
    assert f"No travel database at {missing}" in result.err
    assert "travel-assistant db init --db" in result.err
    assert result.out == ""  # no token for a database that does not exist
    assert not missing.exists()


@pytest.mark.e2e  # builds a whole travel database
def test_cli_create_db_builds_the_named_database(tmp_path: Path, model: ScriptedChatModel) -> None:
    target = tmp_path / "new.sqlite"
    model.extend(say("Welcome!"))
    result = chat([*chat_args(target), "--create-db"], ["hello"], model, tmp_path / "home")
    assert result.code == 0, result.err
    assert target.exists()
    assert "Welcome!" in result.out


@pytest.mark.parametrize(
    "typed",
    [
        pytest.param(FIXTURE_PASSENGER_ID.replace(" ", ""), id="no-space"),
        pytest.param(f"  {FIXTURE_PASSENGER_ID.replace(' ', '  ')} ", id="extra-spaces"),
    ],
)
def test_cli_passenger_id_with_or_without_the_space(
    db_path: Path, tmp_path: Path, model: ScriptedChatModel, typed: str
) -> None:
    model.extend(say("Hello."))
    result = chat(chat_args(db_path, typed), ["hi"], model, tmp_path / "home")
    assert result.code == 0, result.err
    assert f"for passenger {FIXTURE_PASSENGER_ID}." in result.err
    assert f"--passenger-id '{FIXTURE_PASSENGER_ID}'" in result.err


def test_cli_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as raised:
        run(["--version"])
    assert raised.value.code == 0
    assert capsys.readouterr().out.strip() == f"travel-assistant {version('travel-assistant')}"


def test_cli_help_imports_neither_langchain_nor_rich() -> None:
    code = (
        "import sys, cli\n"
        "try:\n"
        "    cli.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain_core', 'langgraph', 'rich', 'openai', 'sqlalchemy'))\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "HEAVY []" in result.stdout, result.stdout
    assert "--home" in result.stdout and "--version" in result.stdout
