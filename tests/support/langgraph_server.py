"""LangGraph's own development server (``langgraph dev``) over this project, for tests.

``langgraph-cli[inmem]`` brings its own pins (jsonschema-rs among them) that would break
this project's test tools if it shared their environment, so it lives in a virtual
environment of its own under ``.cache/langgraph-cli`` (ignored by git), with this project
installed editable beside it, as docs/langgraph-studio.md tells a user to do. The
environment is made once and kept; it is installed again when ``pyproject.toml`` changes
or the checkout moves. Installing needs the package index (PyPI); when it fails, the
tests that need the server are skipped with the installer's last words.

``LangGraphDev`` starts the server on a free port from a folder of its own that mirrors
the checkout (each top-level entry linked), so ``langgraph.json`` is read as it is, the
server's saved threads (``.langgraph_api``) stay out of the checkout, and the folder's own
``.env`` (which a test may write) is the one ``langgraph.json`` names.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import httpx
import pytest

from tests.support.web import free_port

MARK = "langgraph_server"
ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".cache" / "langgraph-cli"
REQUIREMENT = "langgraph-cli[inmem]"
INSTALL_TIMEOUT = 900
START_TIMEOUT = 120
# What the mirror leaves out: the checkout's own server state, secrets and environments.
NOT_MIRRORED = {".langgraph_api", ".env", ".cache", ".venv", ".git", "venv"}


def _stamp() -> str:
    """Say what the environment was installed for: this checkout and its dependencies."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return f"{ROOT}\n{digest}\n{REQUIREMENT}\n"


def langgraph_program() -> Path:
    """Return the ``langgraph`` program of the environment, installing it when needed.

    Skips the calling test, with the reason, when it cannot be installed.
    """
    VENV.parent.mkdir(parents=True, exist_ok=True)
    program = VENV / "bin" / "langgraph"
    stamp = VENV / "installed-for.txt"
    with (VENV.parent / "langgraph-cli.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer at a time (xdist workers, runs)
        if program.exists() and stamp.exists() and stamp.read_text() == _stamp():
            return program
        python = VENV / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        try:
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", REQUIREMENT, "-e", str(ROOT)],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"installing {REQUIREMENT} took over {INSTALL_TIMEOUT} s")
        if done.returncode != 0 or not program.exists():
            last = (done.stderr or done.stdout).strip().splitlines()[-3:]
            pytest.skip(f"{REQUIREMENT} could not be installed: {' / '.join(last)}")
        stamp.write_text(_stamp())
        return program


def mirror(folder: Path) -> Path:
    """Make ``folder`` look like the checkout (its entries linked) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in ROOT.iterdir():
        if entry.name not in NOT_MIRRORED and not entry.name.endswith(".egg-info"):
            (folder / entry.name).symlink_to(entry)
    return folder


class LangGraphDev:
    """``langgraph dev`` over the checkout, on a free port of 127.0.0.1, while in a ``with``."""

    def __init__(self, program: Path, folder: Path, env: Mapping[str, str]) -> None:
        self.program = program
        self.folder = mirror(folder)
        self.env = dict(env)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder.parent / f"{folder.name}-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LangGraphDev:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
        env.update(
            # Nothing for the server to reach outside the machine.
            LANGSMITH_TRACING="false",
            LANGCHAIN_TRACING_V2="false",
            LANGGRAPH_CLI_NO_ANALYTICS="1",
            **self.env,
        )
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(self.program),
                    "dev",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--no-browser",
                    "--no-reload",
                ],
                cwd=self.folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"langgraph dev stopped:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise AssertionError(f"langgraph dev did not start:\n{self.output()}")
            time.sleep(0.5)

    def output(self) -> str:
        """Return what the server has printed so far (its last part)."""
        return self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder / ".langgraph_api", ignore_errors=True)
