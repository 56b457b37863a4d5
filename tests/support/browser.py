"""The web chat in Debian's Chromium (Playwright): launch flags, viewports, screenshots, axe.

Screenshots go to ``screenshots/web-chat/`` at the top of the work tree (ignored by git),
for a person to look at after a run. axe-core, the accessibility checker, is the npm
package: installed once into ``.cache/axe-core/`` (ignored) with npm, and injected into
the page by the test (through the DevTools protocol, so the page's policy still holds).
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "screenshots" / "web-chat"
AXE_FOLDER = ROOT / ".cache" / "axe-core"
AXE_VERSION = "4.10"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
}
SMALL_PHONE: dict[str, Any] = {**PHONE, "viewport": {"width": 360, "height": 740}}
SERIOUS = ("serious", "critical")


def axe_source() -> str | None:
    """Return axe-core's script, installing the npm package first if needed (or ``None``)."""
    script = AXE_FOLDER / "node_modules" / "axe-core" / "axe.min.js"
    npm = shutil.which("npm")
    AXE_FOLDER.mkdir(parents=True, exist_ok=True)
    with (AXE_FOLDER / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not script.exists() and npm is not None:
            subprocess.run(
                [npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix",
                 str(AXE_FOLDER), f"axe-core@{AXE_VERSION}"],
                check=False, capture_output=True, timeout=300,
            )  # fmt: skip
    return script.read_text() if script.exists() else None


def serious_violations(page: Any, source: str) -> list[str]:
    """Run axe on ``page``; return its serious and critical violations, one line each."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(source)
    result = page.evaluate(
        "async () => { const r = await axe.run(document, {resultTypes: ['violations']});"
        " return r.violations.map(v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 3)})); }"
    )
    return [
        f"{v['id']} ({v['impact']}): {', '.join(v['nodes'])}"
        for v in result
        if v["impact"] in SERIOUS
    ]


def screenshot(page: Any, name: str) -> Path:
    """Save the page as it looks now under ``SCREENSHOTS``; return the file."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def horizontal_overflow(page: Any) -> int:
    """Return by how many pixels the page is wider than the screen (0: no side scroll)."""
    return int(
        page.evaluate(
            "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
            " - document.documentElement.clientWidth"
        )
    )


class CuttableProxy:
    """A TCP relay on 127.0.0.1 in front of ``port`` whose connections the test can cut.

    ``cut`` closes every open connection (a stream in flight breaks, as when a network
    drops) and refuses new ones until ``restore``: what the page sees when it loses the
    service, while the service itself goes on.
    """

    def __init__(self, port: int) -> None:
        import socket
        import threading

        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: list[Any] = []
        self.down = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.close()

    def cut(self) -> None:
        """Break every connection and refuse new ones."""
        import socket

        self.down = True
        with self.lock:
            for connection in self.open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            self.open.clear()

    def restore(self) -> None:
        """Let connections through again."""
        self.down = False

    def close(self) -> None:
        """Stop relaying."""
        self.cut()
        self.listener.close()
