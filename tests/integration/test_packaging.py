"""A non-editable install works away from the checkout, as with pipx, uv tool or a wheel.

The test builds the wheel from a copy of the project, installs it into a new virtual
environment and runs the installed ``travel-assistant`` from a folder outside the
checkout: ``db init`` must find the reference data and a chat turn must be answered by a
scripted model. Offline and fast: the wheel is built without build isolation and the new
environment sees the current environment's dependencies through a ``.pth`` file, never
the checkout itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.fake_openai import FakeOpenAI, Reply, customer_text

REPO = Path(__file__).resolve().parents[2]
# The first setuptools that builds a wheel without the separate ``wheel`` package.
MIN_SETUPTOOLS = (70, 1)
TIMEOUT = 120

# Run by the new environment's interpreter: where the project's modules come from.
PROBE = """
import json, os, sys, sysconfig
import cli, db.engine, evaluation, graph
print(json.dumps({
    "site_packages": sysconfig.get_path("purelib"),
    "files": {m.__name__: m.__file__ for m in (cli, db.engine, evaluation, graph)},
    "data_dir": str(db.engine.reference_data_dir()),
    "scenario_dir": str(evaluation.SCENARIO_DIR),
    "scenarios": len(evaluation.load_scenarios()),
    "sys_path": [os.path.realpath(entry or os.curdir) for entry in sys.path],
}))
"""
PROBE_SITE = "import sysconfig; print(sysconfig.get_path('purelib'))"


def _require_setuptools() -> None:
    setuptools = pytest.importorskip("setuptools")
    version = tuple(int(part) for part in setuptools.__version__.split(".")[:2])
    if version < MIN_SETUPTOOLS:
        pytest.skip(
            f"building the wheel offline needs setuptools>=70.1, not {setuptools.__version__}: "
            'pip install -e ".[dev]"'
        )


def _run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=TIMEOUT, check=False, **kwargs
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _install_wheel(tmp_path: Path) -> Path:
    """Build the wheel, install it into a new environment; return its scripts folder."""
    # Built from a copy: setuptools builds in the source tree (build/, *.egg-info), which
    # must neither litter the checkout nor leak stale files into the wheel.
    source = tmp_path / "source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "venv",
            "build",
            "dist",
            "*.egg-info",
            "__pycache__",
            ".*_cache",
            "*.sqlite*",
        ),
    )
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    offline = ["-q", "--no-deps", "--no-index"]
    _run([*pip, "wheel", *offline, "--no-build-isolation", "-w", str(wheels), str(source)])
    [wheel] = wheels.glob("travel_assistant-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    scripts = venv / ("Scripts" if os.name == "nt" else "bin")
    python = scripts / ("python.exe" if os.name == "nt" else "python")
    # The current pip installs into the new environment, which has no pip of its own.
    _run([*pip, "--python", str(python), "install", *offline, str(wheel)])

    # Dependencies: the current environment's site-packages, appended to sys.path. Its
    # own .pth files (the editable install's finder among them) are not processed there.
    site_packages = Path(_run([str(python), "-c", PROBE_SITE]).stdout.strip())
    ours = dict.fromkeys(sysconfig.get_path(name) for name in ("purelib", "platlib"))
    assert str(REPO) not in ours
    (site_packages / "current_environment.pth").write_text("\n".join(ours) + "\n")
    return scripts


def _environment(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "PYTHONPATH" and not name.startswith(("OPENAI", "TAVILY", "TRAVEL_ASSISTANT"))
    }
    env.update(NO_COLOR="1", **extra)
    return env


def test_installed_wheel_runs_outside_the_checkout(tmp_path: Path) -> None:
    _require_setuptools()
    assert REPO not in tmp_path.parents, "the test must run outside the checkout"
    scripts = _install_wheel(tmp_path)
    program = str(scripts / ("travel-assistant.exe" if os.name == "nt" else "travel-assistant"))
    python = str(scripts / ("python.exe" if os.name == "nt" else "python"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    home = tmp_path / "home"

    # The project comes from the new environment's site-packages, never from the checkout.
    probe = json.loads(_run([python, "-c", PROBE], cwd=outside, env=_environment()).stdout)
    site_packages = Path(probe["site_packages"]).resolve()
    assert str(REPO) not in probe["sys_path"]
    for name, file in [*probe["files"].items(), ("data", probe["data_dir"])]:
        assert site_packages in Path(file).resolve().parents, (name, file)

    _run([program, "--home", str(home), "db", "init"], cwd=outside, env=_environment())
    assert (home / "travel.sqlite").is_file()

    reply = "Your flight to Basel leaves at 08:05."
    with FakeOpenAI([Reply(text=reply)]) as server:
        env = _environment(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test-key",
            TRAVEL_ASSISTANT_MODEL="scripted",
        )
        chat = [program, "--home", str(home), "chat", "--passenger-id", FIXTURE_PASSENGER_ID]
        result = _run([*chat, "--no-check"], cwd=outside, env=env, input="When do I fly?\n")
    assert reply in result.stdout
    assert customer_text(server.requests[0]["messages"][-1]["content"]) == "When do I fly?"

    # travel-assistant eval reads the scenarios shipped in the package.
    assert site_packages in Path(probe["scenario_dir"]).resolve().parents
    assert probe["scenarios"] == len(list((REPO / "data" / "scenarios").glob("*.toml"))) > 0
