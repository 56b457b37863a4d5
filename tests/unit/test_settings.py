"""Settings are read once, at the edge, and nothing below it reads the environment or flags."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from settings import Settings, SettingsError
from tests.support.cli import run

ROOT = Path(__file__).resolve().parents[2]
# The edge: the module that reads the environment, and what only runs as a program.
EDGE = {"settings.py"}


def test_settings_read_every_variable_once_into_typed_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "TRAVEL_ASSISTANT_HOME": str(tmp_path / "home"),
        "TRAVEL_ASSISTANT_DB": "postgresql://u@h/db",
        "TRAVEL_ASSISTANT_CONVERSATIONS": str(tmp_path / "c.sqlite"),
        "TRAVEL_ASSISTANT_DATA": str(tmp_path / "data"),
        "TAVILY_API_KEY": "tvly-x",
        "TRAVEL_ASSISTANT_PASSENGER": " 3442 587242 ",
        "TRAVEL_ASSISTANT_SERVER": "http://127.0.0.1:8000",
        "TRAVEL_ASSISTANT_TOKEN": "eyJ.staff.token",
        "TRAVEL_ASSISTANT_OIDC_ISSUER": "https://login.example.com/",
        "TRAVEL_ASSISTANT_OIDC_ROLE_CLAIM": "realm_access.roles",
        "NO_COLOR": "0",  # any value: https://no-color.org
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "TRAVEL_ASSISTANT_MODEL": "local-model",
        "TRAVEL_ASSISTANT_MODEL_BOOK_HOTEL": "hotel-model",
        "TRAVEL_ASSISTANT_MAX_TOKENS": "300",
        "TRAVEL_ASSISTANT_TIMEOUT": "7.5",
    }.items():
        monkeypatch.setenv(name, value)
    read = Settings.read()
    assert read.home == tmp_path / "home" and read.home_given
    assert read.db == "postgresql://u@h/db"
    assert read.db_location.backend == "postgresql"
    assert read.conversations_location.path == tmp_path / "c.sqlite"
    assert read.data_dir == tmp_path / "data"
    assert (read.tavily_api_key, read.passenger_id) == ("tvly-x", "3442 587242")
    assert (read.server, read.token) == ("http://127.0.0.1:8000", "eyJ.staff.token")
    assert (read.oidc_issuer, read.oidc_role_claim) == (
        "https://login.example.com/",
        "realm_access.roles",
    )
    assert (read.oidc_login_claim, read.oidc_audience) == ("email", None)
    assert read.plain
    models = read.models
    assert (models.model, models.base_url, models.max_tokens, models.timeout) == (
        "local-model",
        "http://127.0.0.1:9/v1",
        300,
        7.5,
    )
    assert models.model_for("book_hotel") == "hotel-model"
    assert models.model_for("book_excursion") == "local-model"


def test_settings_default_home_follows_xdg_and_blank_values_count_as_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAVEL_ASSISTANT_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("TAVILY_API_KEY", "  ")
    monkeypatch.setenv("TRAVEL_ASSISTANT_MAX_TOKENS", "")
    monkeypatch.setenv("TERM", "xterm")
    read = Settings.read()
    assert read.home == tmp_path / "travel-assistant" and not read.home_given
    assert read.db_location.path == tmp_path / "travel-assistant" / "travel.sqlite"
    assert read.tavily_api_key is None and read.db is None and not read.plain
    assert read.models.max_tokens == 1024
    monkeypatch.setenv("TERM", "dumb")
    assert Settings.read().plain


def test_settings_a_flag_beats_the_environment_which_beats_dotenv_which_beats_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    default = Settings.read()
    assert (default.db, default.models.model, default.models.max_tokens) == (
        None,
        "gpt-4o-mini",
        1024,
    )
    (tmp_path / ".env").write_text(
        "TRAVEL_ASSISTANT_DB=dotenv.sqlite\n"
        "TRAVEL_ASSISTANT_MODEL=dotenv-model\n"
        "TRAVEL_ASSISTANT_MAX_TOKENS=100\n"
        "TRAVEL_ASSISTANT_MAX_TOKENS_BOOK_HOTEL=200\n"
        "TRAVEL_ASSISTANT_PASSENGER=3442 587242\n",
        encoding="utf-8",
    )
    dotenv = Settings.read()
    assert (dotenv.db, dotenv.models.model, dotenv.models.max_tokens) == (
        "dotenv.sqlite",
        "dotenv-model",
        100,
    )
    assert dotenv.models.max_tokens_for("book_hotel") == 200
    assert dotenv.passenger_id == "3442 587242"
    monkeypatch.setenv("TRAVEL_ASSISTANT_DB", "environment.sqlite")
    monkeypatch.setenv("TRAVEL_ASSISTANT_MODEL", "environment-model")
    monkeypatch.setenv("TRAVEL_ASSISTANT_MAX_TOKENS", "300")
    monkeypatch.setenv("TRAVEL_ASSISTANT_MAX_TOKENS_BOOK_HOTEL", "400")
    monkeypatch.setenv("TRAVEL_ASSISTANT_PASSENGER", "")  # set but blank: unset, not .env's
    environment = Settings.read()
    assert (environment.db, environment.models.model, environment.models.max_tokens) == (
        "environment.sqlite",
        "environment-model",
        300,
    )
    assert environment.models.max_tokens_for("book_hotel") == 400
    assert environment.passenger_id is None
    flags = Settings.read(db="flag.sqlite", model="flag-model", max_tokens=500, home=tmp_path / "h")
    assert (flags.db, flags.models.model, flags.models.max_tokens) == (
        "flag.sqlite",
        "flag-model",
        500,
    )
    assert flags.models.max_tokens_for("book_hotel") == 400  # a flag sets the default only
    assert flags.db_location.path == Path("flag.sqlite")
    assert flags.home == tmp_path / "h" and flags.flags == {"db", "model", "max_tokens", "home"}


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("TRAVEL_ASSISTANT_MAX_TOKENS", "lots", "must be a positive whole number, not 'lots'."),
        (
            "TRAVEL_ASSISTANT_CONTEXT_TOKENS",
            "8192.5",
            "must be a positive whole number, not '8192.5'.",
        ),
        ("TRAVEL_ASSISTANT_TIMEOUT", "-1", "must be a positive number, not '-1'."),
        ("TRAVEL_ASSISTANT_REPLY_TIMEOUT", "nan", "must be a positive number, not 'nan'."),
        ("TRAVEL_ASSISTANT_DB", "sqlite://", ": sqlite:// names no file: write sqlite:///PATH"),
    ],
)
def test_settings_a_bad_value_is_an_error_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"^{re.escape(name)}"):
        Settings.read()
    # Through the program: a usage error, said once on one line, whatever the command.
    result = run(["sessions"])
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"error: {name}{'' if said[0] == ':' else ' '}{said}")
    assert result.err.count("\n") == 1


def test_settings_a_bad_location_names_what_gave_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("TRAVEL_ASSISTANT_CONVERSATIONS=sqlite://\n")
    assert "error: TRAVEL_ASSISTANT_CONVERSATIONS: sqlite:// names" in run(["audit"]).err
    monkeypatch.setenv("TRAVEL_ASSISTANT_CONVERSATIONS", "sqlite:///:memory:")
    said = run(["audit"]).err
    assert "error: TRAVEL_ASSISTANT_CONVERSATIONS: sqlite:///:memory: names" in said
    flagged = run(["audit", "--conversations", "postgresql://u@h:port/x"])
    assert flagged.code == 2
    assert "error: --conversations: postgresql://u@h:port/x is not a database URL" in flagged.err


def test_settings_the_second_approval_amount_is_checked_where_it_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its currency comes with the database's models (SQLAlchemy): read when a command needs it.
    monkeypatch.setenv("TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE", "lots")
    read = Settings.read()
    with pytest.raises(SettingsError, match=r"^TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE: 'lots'"):
        read.second_approval_cents()
    monkeypatch.setenv("TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE", "EUR 1,000.50")
    assert Settings.read().second_approval_cents() == 100_050


@pytest.mark.parametrize(
    ("argv", "env", "unloaded"),
    [
        # A mistake in the arguments is said before pydantic is imported.
        (["chaat"], {}, ("pydantic",)),
        (["chat", "--max-tokens", "0"], {}, ("pydantic",)),
        # A bad setting is said before anything slow is (it once waited for LangChain).
        (
            ["chat", "--passenger-id", "1"],
            {"TRAVEL_ASSISTANT_MAX_TOKENS": "lots"},
            ("langchain_core", "openai", "sqlalchemy"),
        ),
    ],
    ids=["command", "flag", "setting"],
)
def test_settings_mistakes_are_said_before_slow_imports(
    argv: list[str], env: dict[str, str], unloaded: tuple[str, ...]
) -> None:
    code = (
        "import sys, cli\n"
        "try:\n"
        f"    code = cli.main({argv!r})\n"
        "except SystemExit as stopped:\n"
        "    code = stopped.code\n"
        f"print(code, sorted({{m.split('.')[0] for m in sys.modules}} & {set(unloaded)!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["2", "[]"], done.stdout + done.stderr


def test_no_module_below_the_edge_reads_the_environment() -> None:
    readers = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if (
            relative.split("/")[0] in {"tests", "scripts", ".venv", "build", "mutants"}
            or relative in EDGE
        ):
            continue
        if "site-packages" in relative:
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"os\.environ|os\.getenv|getenv\(|dotenv", text):
            readers.append(relative)
    assert readers == []


def test_no_command_reads_the_flags_that_are_settings() -> None:
    # cli.main reads them into the settings; the commands take them from there.
    readers = [
        path.name
        for path in sorted((ROOT / "commands").glob("*.py"))
        if re.search(
            r"args\.(home|db|conversations|model|max_tokens|settings)\b",
            path.read_text(encoding="utf-8"),
        )
    ]
    assert readers == []


def test_the_env_file_reaches_the_libraries_without_overriding_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from settings import export_env_file

    (tmp_path / ".env").write_text("LANGSMITH_PROJECT=from-file\nPGAPPNAME=from-file\n")
    monkeypatch.delenv("LANGSMITH_PROJECT", raising=False)
    monkeypatch.setenv("PGAPPNAME", "given")
    export_env_file(tmp_path)
    assert os.environ["LANGSMITH_PROJECT"] == "from-file"
    assert os.environ["PGAPPNAME"] == "given"
    monkeypatch.delenv("LANGSMITH_PROJECT")
