"""How the terminal program shows things: replies, the approval box, the thinking line, tables.

Only the assistant's words (its replies, the approval previews, ``/history``) go to
stdout; status lines, the thinking indicator and errors go to stderr. A reply is shown
in one of three ways, by where stdout goes:

- not a terminal (a pipe, a file): the text exactly as the model wrote it, so scripts
  read what was said;
- a terminal with ``NO_COLOR`` set: plain text, word-wrapped to the terminal's width;
- a terminal: Markdown rendered with rich, wrapped to the width, while it streams.

rich is imported on first use, so that ``travel-assistant --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from io import StringIO
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO

if TYPE_CHECKING:
    from rich.console import Console as RichConsole
    from rich.live import Live

ReplyStyle = Literal["raw", "plain", "markdown"]

DEFAULT_WIDTH = 80
DEFAULT_HEIGHT = 25
# The width of a table written to a file or a pipe: wide enough never to wrap an id.
WIDE_TABLE = 200
# The narrowest the wrapping column of a table may get before rows are printed as blocks.
MIN_WRAP_COLUMN = 16
# Lines at the end of a streaming Markdown reply that are still redrawn as text arrives;
# the lines above them are printed once and left alone (a list or a table may still
# change its last lines, never its first ones).
LIVE_TAIL_LINES = 6
# The most a streaming Markdown reply is redrawn per second.
REDRAWS_PER_SECOND = 12


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, ValueError, OSError):
        return DEFAULT_WIDTH


def _lines(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).lines or DEFAULT_HEIGHT
    except (AttributeError, ValueError, OSError):
        return DEFAULT_HEIGHT


def rich_console(file: TextIO, width: int, *, color: bool) -> RichConsole:
    """Return a rich console writing to ``file`` at ``width``, with or without colour."""
    from rich.console import Console as RichConsole

    return RichConsole(
        file=file,
        # With both given, rich uses them even where it would guess (TERM=dumb).
        width=width,
        height=_lines(file),
        color_system="auto" if color else None,
        force_terminal=color or None,
        highlight=False,
        markup=False,
        emoji=False,
    )


def _wrap_lines(text: str, width: int) -> str:
    """Word-wrap each line of ``text`` to ``width``, keeping its indentation."""
    import textwrap

    wrapped = []
    for line in text.splitlines() or [""]:
        indent = line[: len(line) - len(line.lstrip())]
        wrapped.append(
            textwrap.fill(line, width, subsequent_indent=indent + "  ", break_on_hyphens=False)
            if len(line) > width
            else line
        )
    return "\n".join(wrapped)


class ReplyWriter(Protocol):
    """Shows one reply as it streams."""

    def feed(self, text: str) -> None:
        """Show the next piece of the reply."""

    def close(self) -> None:
        """End the reply (the cursor is left at the start of a new line)."""


@dataclass
class _RawReply:
    """The reply as the model wrote it, after its label."""

    out: TextIO
    label: str

    def __post_init__(self) -> None:
        self.out.write(self.label)
        self.out.flush()

    def feed(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def close(self) -> None:
        self.out.write("\n")
        self.out.flush()


@dataclass
class _WrappedReply:
    """Plain text after the label, word-wrapped to ``width`` as it streams."""

    out: TextIO
    label: str
    width: int
    column: int = 0
    word: str = ""
    spaces: str = ""

    def __post_init__(self) -> None:
        self.out.write(self.label)
        self.column = len(self.label)
        self.out.flush()

    def feed(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self._flush_word()
                self.out.write("\n")
                self.column, self.spaces = 0, ""
            elif char in " \t":
                self._flush_word()
                self.spaces += " "
            else:
                self.word += char
        self.out.flush()

    def _flush_word(self) -> None:
        if not self.word:
            return
        if self.column + len(self.spaces) + len(self.word) > self.width and self.column > 0:
            self.out.write("\n")
            self.column, self.spaces = 0, ""
        self.out.write(self.spaces + self.word)
        self.column += len(self.spaces) + len(self.word)
        self.spaces, self.word = "", ""
        # A word longer than the line wraps by itself; count where the terminal put us.
        if self.column > self.width:
            self.column %= self.width

    def close(self) -> None:
        self._flush_word()
        self.out.write("\n")
        self.out.flush()


class _MarkdownReply:
    """Markdown rendered as it streams: settled lines printed once, the tail redrawn."""

    def __init__(self, console: RichConsole, label: str, color: bool) -> None:
        from rich.live import Live
        from rich.text import Text

        self.console = console
        self.color = color
        self.text = ""
        self.printed = 0
        self.drawn = 0.0
        console.print(Text(label, style="bold cyan"))
        self.live: Live = Live(
            Text(""),
            console=console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.live.start()

    def _lines(self) -> list[str]:
        from rich.markdown import Markdown

        buffer = StringIO()
        offscreen = rich_console(buffer, self.console.width, color=self.color)
        offscreen.print(Markdown(self.text))
        return buffer.getvalue().rstrip("\n").split("\n") if self.text.strip() else []

    def _draw(self, final: bool) -> None:
        from rich.text import Text

        lines = self._lines()
        settled = len(lines) if final else max(len(lines) - LIVE_TAIL_LINES, 0)
        if settled > self.printed:
            self.live.console.print(Text.from_ansi("\n".join(lines[self.printed : settled])))
            self.printed = settled
        self.live.update(Text.from_ansi("\n".join(lines[self.printed :])), refresh=True)

    def feed(self, text: str) -> None:
        self.text += text
        now = time.monotonic()
        if now - self.drawn >= 1 / REDRAWS_PER_SECOND:
            self.drawn = now
            self._draw(final=False)

    def close(self) -> None:
        from rich.text import Text

        self._draw(final=True)
        self.live.update(Text(""), refresh=True)
        self.live.stop()


class Thinking:
    """A spinner with the seconds elapsed and the active specialist, on stderr.

    Shown only when stderr is a terminal, from ``start`` until ``stop`` (the first token
    or status line of the reply).
    """

    def __init__(self, err: TextIO, *, color: bool) -> None:
        self.err = err
        self.color = color
        self.enabled = _is_terminal(err)
        self._live: Live | None = None
        self._line: _ThinkingLine | None = None
        # Re-entrant: ``cancelling`` may run in a signal handler while ``start`` holds it.
        self._lock = threading.RLock()

    def start(self, specialist: str = "") -> None:
        """Show the spinner (again), naming ``specialist`` when it is not empty."""
        if not self.enabled:
            return
        from rich.live import Live

        with self._lock:
            if self._live is not None and self._line is not None:
                self._line.specialist = specialist
                return
            line = self._line = _ThinkingLine(specialist, time.monotonic())
            console = rich_console(self.err, _columns(self.err), color=self.color)
            self._live = Live(
                line,
                console=console,
                refresh_per_second=8,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()

    def stop(self) -> None:
        """Take the spinner away, leaving the cursor where it was."""
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None
                self._line = None

    def cancelling(self) -> None:
        """Say on the spinner that the turn is being cancelled (safe in a signal handler)."""
        line = self._line
        if line is not None:
            line.cancelling = True

    @property
    def running(self) -> bool:
        """Tell whether the spinner is on screen."""
        return self._live is not None


@dataclass
class _ThinkingLine:
    specialist: str
    started: float
    spinner: Any = None
    cancelling: bool = False

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.spinner import Spinner
        from rich.text import Text

        if self.spinner is None:
            self.spinner = Spinner("dots", style="cyan")
        seconds = int(time.monotonic() - self.started)
        who = f" ({self.specialist})" if self.specialist else ""
        doing = "Cancelling" if self.cancelling else "Thinking"
        self.spinner.update(text=Text(f"{doing}… {seconds}s{who}", style="dim"))
        yield self.spinner


@dataclass
class Console:
    """Where the program writes: stdout for the assistant, stderr for the rest.

    Attributes:
        out: The assistant's words.
        err: Status lines, the thinking indicator and errors.
        color: Colour the status lines (stderr is a terminal and ``NO_COLOR`` is unset).
        style: How replies are shown; by default from ``out`` and ``plain``.
        plain: Replies as plain wrapped text on a terminal (``NO_COLOR``, ``TERM=dumb``).
        width: The width replies and boxes wrap to; by default the terminal's.
    """

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    color: bool = False
    style: ReplyStyle | None = None
    width: int | None = None
    plain: bool = False

    def __post_init__(self) -> None:
        if self.style is None:
            if not _is_terminal(self.out):
                self.style = "raw"
            else:
                self.style = "plain" if self.plain else "markdown"
        self.thinking = Thinking(self.err, color=self.color)

    @property
    def columns(self) -> int:
        """Return the width to wrap to."""
        return self.width or _columns(self.out)

    def _paint(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def say(self, text: str = "", end: str = "\n") -> None:
        """Write the assistant's words."""
        self.thinking.stop()
        self.out.write(text + end)
        self.out.flush()

    def line(self, text: str) -> None:
        """Write a line of the conversation (``/history``), word-wrapped on a terminal."""
        if self.style != "raw":
            text = _wrap_lines(text, self.columns)
        self.say(text)

    def status(self, text: str, *, wrap: bool = True) -> None:
        """Write a discreet status line; on a terminal, word-wrapped unless ``wrap`` is off.

        Leave ``wrap`` off for a command to copy: a line break would cut it in two.
        """
        self.thinking.stop()
        if wrap and _is_terminal(self.err):
            text = _wrap_lines(text, _columns(self.err))
        self.err.write(self._paint("2", text) + "\n")
        self.err.flush()

    def error(self, text: str) -> None:
        """Write a red error; on a terminal, word-wrapped unless it holds a command to copy.

        A command (``travel-assistant …``) is left on one line, as ``status`` leaves one
        when told: a line break would cut it in two.
        """
        self.thinking.stop()
        text = f"error: {text}"
        if _is_terminal(self.err) and "travel-assistant " not in text:
            text = _wrap_lines(text, _columns(self.err))
        self.err.write(self._paint("31", text) + "\n")
        self.err.flush()

    def label(self, specialist: str) -> str:
        """Return the prefix of an assistant's reply, naming a specialist discreetly."""
        suffix = f" ({specialist})" if specialist else ""
        return self._paint("1;36", "assistant") + self._paint("2", suffix) + "> "

    def _plain_label(self, specialist: str, speaker: str = "assistant") -> str:
        return f"{speaker} ({specialist})>" if specialist else f"{speaker}>"

    def begin_reply(self, specialist: str, *, speaker: str = "assistant") -> ReplyWriter:
        """Start showing a reply of the assistant named ``specialist`` ("" for the primary).

        ``speaker`` names who writes: the assistant, or a person of the customer-service
        team (``specialist`` then says so).
        """
        self.thinking.stop()
        label = self._plain_label(specialist, speaker)
        if self.style == "markdown":
            console = rich_console(self.out, self.columns, color=True)
            return _MarkdownReply(console, label, color=True)
        if self.style == "plain":
            return _WrappedReply(self.out, label + " ", self.columns)
        return _RawReply(self.out, label + " ")

    def reply(self, specialist: str, text: str, *, speaker: str = "assistant") -> None:
        """Show a whole reply at once."""
        writer = self.begin_reply(specialist, speaker=speaker)
        writer.feed(text)
        writer.close()

    def person_reply(self, name: str, text: str) -> None:
        """Show a message a person of the customer-service team wrote."""
        from conversations.words import STAFF_LABEL

        self.reply(STAFF_LABEL, text, speaker=name)

    def _rich_out(self) -> RichConsole:
        return rich_console(self.out, self.columns, color=self.style == "markdown")

    def approval_box(self, title: str, lines: Sequence[str]) -> None:
        """Show what an action would do; the last line, the amount, stands out."""
        from rich.console import Group
        from rich.panel import Panel
        from rich.rule import Rule
        from rich.text import Text

        self.thinking.stop()
        *body, amount = list(lines) or [""]
        parts: list[Any] = [Text(line) for line in body]
        if body:
            parts.append(Rule(style="dim"))
        parts.append(Text(amount, style="bold yellow"))
        self._rich_out().print(
            Panel(Group(*parts), title=Text(title, style="bold"), title_align="left")
        )

    def refusal_box(self, title: str, explanation: str) -> None:
        """Show why an action cannot be done (nothing is asked)."""
        from rich.panel import Panel
        from rich.text import Text

        self.thinking.stop()
        self._rich_out().print(
            Panel(Text(explanation), title=Text(title, style="bold red"), title_align="left")
        )

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[str]], *, err: bool, wrap: int
    ) -> None:
        """Print a table to stdout, or to stderr when ``err``.

        Only the column numbered ``wrap`` may wrap; the others (ids to copy, times)
        stay whole on one line. When they leave the wrapping column less than
        ``MIN_WRAP_COLUMN`` characters, each row is printed as a block of "header value"
        lines instead, so nothing is cut. Off a terminal the table is as wide as it needs.
        """
        from rich.box import SIMPLE_HEAD
        from rich.table import Table

        self.thinking.stop()
        stream = self.err if err else self.out
        color = self.color if err else self.style == "markdown"
        width = self.width or (_columns(stream) if _is_terminal(stream) else WIDE_TABLE)
        widths = [
            max([len(header), *(len(row[i]) for row in rows)]) for i, header in enumerate(headers)
        ]
        fixed = sum(w for i, w in enumerate(widths) if i != wrap) + 2 * (len(headers) - 1)
        console = rich_console(stream, width, color=color)
        if fixed + min(widths[wrap], MIN_WRAP_COLUMN) > width:
            for row in rows:
                block = Table.grid(padding=(0, 2))
                block.add_column(style="bold", no_wrap=True)
                block.add_column(overflow="fold")
                for header, value in zip(headers, row, strict=True):
                    if value:
                        block.add_row(header, value)
                console.print(block)
                console.print()
            return
        table = Table(
            *headers, box=SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False
        )
        for index, column in enumerate(table.columns):
            column.no_wrap = index != wrap
            column.overflow = "fold"
            if index != wrap:
                column.min_width = widths[index]
        for row in rows:
            table.add_row(*row)
        console.print(table)
