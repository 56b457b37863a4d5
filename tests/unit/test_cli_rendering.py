"""How replies and approval boxes are shown (issue 11, findings 3 and 6).

Markdown rendered and wrapped to the width on a terminal, plain wrapped text under
``NO_COLOR``, the model's exact words off a terminal; the approval box fits the width
and sets the amount apart; the thinking indicator only on a terminal. The pseudo-terminal
checks at 60 columns are in ``tests/integration/test_terminal_chat.py``.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import termios
from typing import TextIO

from terminal import Console

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
MARKDOWN = (
    "Here are **your options**:\n\n"
    "1. Move to *tomorrow's* LX0112, change fee EUR 75.00.\n"
    "2. Cancel the ticket and get a refund of EUR 21.00, which is what remains after the fee.\n\n"
    "Which one would you like?"
)
PREVIEW = [
    "Ticket 7240005432906569 (Economy)",
    "Flight: LX0112 CDG -> BSL departing 2026-11-22 08:05 CET (+01:00)",
    "     -> LX0112 CDG -> BSL departing 2026-11-23 08:05 CET (+01:00)",
    "Fare paid EUR 96.00, fare on the new flight EUR 92.00: difference charged EUR 0.00 "
    "(a lower fare is not refunded)",
    "Change fee: EUR 75.00 (Economy change fee)",
    "To pay: EUR 75.00",
]


def visible_lines(text: str) -> list[str]:
    return ESCAPES.sub("", text).split("\n")


def test_reply_as_markdown_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(out=out, err=io.StringIO(), style="markdown", width=60)
    writer = console.begin_reply("flights")
    writer.feed(MARKDOWN)
    writer.close()
    text = ESCAPES.sub("", out.getvalue())
    assert "**" not in text and "*tomorrow's*" not in text
    assert "your options" in text and "\x1b[1m" in out.getvalue()  # bold, not asterisks
    assert "assistant (flights)>" in text
    assert all(len(line) <= 60 for line in visible_lines(out.getvalue()))


def test_reply_plain_under_no_color_is_wrapped_between_words() -> None:
    out = io.StringIO()
    console = Console(out=out, err=io.StringIO(), style="plain", width=40)
    writer = console.begin_reply("")
    for piece in re.findall(r"\S+\s*", MARKDOWN):  # as the model streams it
        writer.feed(piece)
    writer.close()
    text = out.getvalue()
    assert "\x1b" not in text
    assert text.startswith("assistant> Here are **your options**:")  # plain: as written
    assert all(len(line) <= 40 for line in text.split("\n"))
    assert text.split() == ["assistant>", *MARKDOWN.split()]  # no word was cut


def test_reply_off_a_terminal_is_exactly_the_model_words() -> None:
    out = io.StringIO()
    console = Console(out=out, err=io.StringIO())  # a StringIO is not a terminal
    assert console.style == "raw"
    console.reply("hotels", MARKDOWN)
    assert out.getvalue() == f"assistant (hotels)> {MARKDOWN}\n"


def test_approval_box_fits_the_width_and_sets_the_amount_apart() -> None:
    out = io.StringIO()
    console = Console(out=out, err=io.StringIO(), style="plain", width=60)
    console.approval_box("Approval needed: Change flight", PREVIEW)
    lines = out.getvalue().rstrip("\n").split("\n")
    assert all(len(line) <= 60 for line in lines), lines
    assert lines[0].startswith("╭") and "Approval needed: Change flight" in lines[0]
    assert lines[-1].startswith("╰")
    assert all(line.startswith("│") and line.endswith("│") for line in lines[1:-1])
    inside = " ".join(line.strip("│ ") for line in lines[1:-1])
    for word in " ".join(PREVIEW).split():
        assert word in inside  # wrapped inside the frame, no word cut
    assert lines[-2].strip("│ ") == "To pay: EUR 75.00"
    assert set(lines[-3].strip("│ ")) == {"─"}  # a rule above the amount

    coloured = io.StringIO()
    Console(out=coloured, err=io.StringIO(), style="markdown", width=60).approval_box(
        "Approval needed: Change flight", PREVIEW
    )
    amount = next(line for line in coloured.getvalue().split("\n") if "To pay" in line)
    assert "\x1b[1" in amount  # bold


def test_thinking_indicator_only_on_a_terminal() -> None:
    err = io.StringIO()
    console = Console(out=io.StringIO(), err=err)
    console.thinking.start("flights")
    console.thinking.stop()
    assert err.getvalue() == ""
    assert not console.thinking.enabled


SESSION_HEADERS = ["Last used", "Passenger", "Turns", "Approval", "Title", "Session"]
SESSION_ROWS = [
    [
        "2026-11-24 10:31",
        "3442 587242",
        "3",
        "pending",
        "Move my flight to tomorrow morning, the early one",
        "785f53d0-1f2e-4a5b-9c8d-7e6f5a4b3c2d",
    ],
    [
        "2026-11-23 09:00",
        "3442 587242",
        "12",
        "",
        "What is my booking?",
        "1b2c3d4e-5f60-4a1b-8c2d-3e4f5a6b7c8d",
    ],
]


def _table_at(width: int) -> str:
    out = io.StringIO()
    Console(out=out, err=out, width=width).table(SESSION_HEADERS, SESSION_ROWS, err=False, wrap=4)
    return out.getvalue()


def test_a_table_keeps_every_id_and_title_whole_at_any_width() -> None:
    # rich crops a no-wrap column that does not fit, and squeezes the wrapping one to
    # nothing: an id cut by one character cannot be resumed, a title gone cannot be told
    # apart. At every width each id is on one line, whole, and each title is readable.
    for width in (160, 120, 100, 80, 60):
        text = _table_at(width)
        lines = text.splitlines()
        assert all(len(line.rstrip()) <= width for line in lines), (width, text)
        for row in SESSION_ROWS:
            assert any(row[-1] in line for line in lines), (width, text)  # the id, whole
            assert all(word in text.split() for word in row[4].split()), (width, text)
            assert row[0] in text, (width, text)


def test_a_wide_table_is_a_table_and_a_narrow_one_is_a_block_per_row() -> None:
    wide = _table_at(160).splitlines()
    assert all(header in wide[0] for header in SESSION_HEADERS)
    narrow = _table_at(80).splitlines()
    assert narrow[0].split() == ["Last", "used", "2026-11-24", "10:31"]
    assert not any(line.startswith("Approval") for line in narrow[8:])  # empty: left out


def _terminal_err(columns: int) -> tuple[int, TextIO]:
    """Return (the reading end, stderr as a real terminal ``columns`` wide)."""
    reader, writer = pty.openpty()
    fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return reader, os.fdopen(writer, "w")


def _read_all(reader: int) -> str:
    chunks = []
    while select.select([reader], [], [], 0.2)[0]:
        chunks.append(os.read(reader, 4096).decode())
    return "".join(chunks).replace("\r", "")


def test_errors_wrap_between_words_on_a_terminal_but_commands_stay_whole() -> None:
    reader, err = _terminal_err(40)
    try:
        console = Console(out=io.StringIO(), err=err)
        console.error("The model server did not answer in time. Sending it again may work.")
        command = "No travel database at /tmp/a.sqlite. Build it with: travel-assistant db init"
        console.error(command)
        text = _read_all(reader)
    finally:
        err.close()
        os.close(reader)
    lines = text.splitlines()
    assert all(len(line) <= 40 for line in lines[:-1]), text
    words = " ".join(lines[:-1]).split()
    assert {"again", "answer", "server"} <= set(words)  # no word cut at the edge
    assert lines[-1] == f"error: {command}"  # a command to copy is never broken
