"""Settings are read once, at the edge, and nothing below it reads the environment."""

from __future__ import annotations

import re
from pathlib import Path

from settings import Settings

ROOT = Path(__file__).resolve().parents[2]
# The edge: the module that reads the environment, and what only runs as a program.
EDGE = {"settings.py"}


def test_settings_read_every_variable_once_into_typed_fields(tmp_path: Path) -> None:
    read = Settings.read(
        {
            "TRAVEL_ASSISTANT_HOME": str(tmp_path / "home"),
            "TRAVEL_ASSISTANT_DB": "postgresql://u@h/db",
            "TRAVEL_ASSISTANT_CONVERSATIONS": str(tmp_path / "c.sqlite"),
            "TRAVEL_ASSISTANT_DATA": str(tmp_path / "data"),
            "TAVILY_API_KEY": "tvly-x",
            "NO_COLOR": "1",
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "TRAVEL_ASSISTANT_MODEL": "local-model",
            "TRAVEL_ASSISTANT_MAX_TOKENS": "300",
        }
    )
    assert read.home == tmp_path / "home" and read.home_given
    assert read.db == "postgresql://u@h/db"
    assert read.conversations == str(tmp_path / "c.sqlite")
    assert read.data_dir == tmp_path / "data"
    assert read.tavily_api_key == "tvly-x"
    assert read.plain
    models = read.models()
    assert (models.model, models.base_url, models.max_tokens) == (
        "local-model",
        "http://127.0.0.1:9/v1",
        300,
    )
    assert read.models("flag-model", max_tokens=50).model == "flag-model"  # flags win


def test_settings_default_home_follows_xdg_and_blank_values_count_as_unset(
    tmp_path: Path,
) -> None:
    read = Settings.read({"XDG_DATA_HOME": str(tmp_path), "TAVILY_API_KEY": "  "})
    assert read.home == tmp_path / "travel-assistant" and not read.home_given
    assert read.tavily_api_key is None and read.db is None and not read.plain
    assert Settings.read({"TERM": "dumb"}).plain


def test_no_module_below_the_edge_reads_the_environment() -> None:
    readers = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.split("/")[0] in {"tests", "scripts", ".venv", "build"} or relative in EDGE:
            continue
        if "site-packages" in relative:
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"os\.environ|os\.getenv|getenv\(", text):
            readers.append(relative)
    assert readers == []
