"""The web chat in Debian's Chromium (Playwright): launch flags, viewports, screenshots, axe.

Screenshots go to ``screenshots/web-chat/`` at the top of the work tree (ignored by git),
for a person to look at after a run. axe-core, the accessibility checker, is in
``tests.support.axe``.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "screenshots" / "web-chat"
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
