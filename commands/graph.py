"""``travel-assistant graph``: print the assistant graph as Mermaid."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.common import EXIT_OK
from terminal import Console

if TYPE_CHECKING:
    pass


def cmd_graph(console: Console) -> int:
    """Run ``travel-assistant graph``."""
    from graph import draw_mermaid

    console.say(draw_mermaid())
    return EXIT_OK
