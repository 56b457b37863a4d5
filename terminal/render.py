"""How the terminal shows what the protocol reports: a live turn, the history, the details.

Each function takes ``conversations.records`` outcomes (or the protocol's summaries) and
draws them with a ``Console``; the words come with the records. What is the terminal's
own is the look: the glyph before a status line, the spinner, the table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from conversations.records import (
    ActionRecord,
    Activity,
    AssistantLine,
    CustomerLine,
    HandOver,
    Notice,
    Outcome,
    Record,
    ReplyPiece,
    TurnFailure,
    Working,
)
from terminal.console import Console, ReplyWriter

if TYPE_CHECKING:
    from conversations.protocol import Conversations, ToolCallDetail
    from conversations.sessions import SessionRecord

# The glyph of an action's line, by its outcome.
GLYPHS = {"approved": "✓", "failed": "!", "declined": "✗", "refused": "✗", "not_done": "·"}
# A raw tool answer in /details is cut after this many characters.
DETAIL_CHARS = 600
TITLE_CHARS = 40
PRESS_UP = "(It is kept in your input history: press Up.)"


def show_record(console: Console, record: Record) -> None:
    """Print one record of the history the way the conversation showed it."""
    if isinstance(record, CustomerLine):
        console.line(f"you> {record.text}")
    elif isinstance(record, AssistantLine) and record.person:
        console.person_reply(record.person, record.text)
    elif isinstance(record, AssistantLine):
        console.reply(record.label, record.text)
    elif isinstance(record, ActionRecord):
        console.line(f"  {GLYPHS[record.outcome]} {record.line}")
    else:
        console.line(f"  · {record.text}")


@dataclass
class TurnView:
    """What one turn has shown so far: the reply streaming, the spinner."""

    console: Console
    writer: ReplyWriter | None = None
    streaming_id: str | None = None

    def finish_reply(self) -> None:
        """Close the reply being streamed, if any."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.streaming_id = None

    def end(self) -> None:
        """Close the reply and stop the spinner."""
        self.finish_reply()
        self.console.thinking.stop()

    def show(self, outcome: Outcome) -> None:
        """Draw one outcome of the turn."""
        console = self.console
        if isinstance(outcome, ReplyPiece):
            if outcome.message_id != self.streaming_id or self.writer is None:
                self.finish_reply()
                self.writer = console.begin_reply(outcome.label)
                self.streaming_id = outcome.message_id
            self.writer.feed(outcome.text)
        elif isinstance(outcome, Working):
            self.finish_reply()
            console.thinking.start(outcome.label)
        elif isinstance(outcome, AssistantLine):
            self.finish_reply()
            if not outcome.streamed:
                console.reply(outcome.label, outcome.text)
        elif isinstance(outcome, Activity):
            console.status(f"  … {outcome.text}")
        elif isinstance(outcome, HandOver):
            self.finish_reply()
            if outcome.text:
                console.status(f"  … {outcome.text}")
        elif isinstance(outcome, ActionRecord):
            self.finish_reply()
            # A decline or a refusal was just shown at the prompt: no second line for it.
            if outcome.outcome not in ("declined", "refused"):
                console.status(f"  {GLYPHS[outcome.outcome]} {outcome.status}")
        elif isinstance(outcome, Notice):
            self.end()
            console.status(outcome.text)
        elif isinstance(outcome, TurnFailure):
            self.end()
            if outcome.kind in ("model", "time_limit", "lost_claim"):
                console.error(outcome.text)
            elif outcome.kind == "pending_first":
                console.status(f"{outcome.text} {PRESS_UP}")
            else:
                console.status(outcome.text)


def show_details(
    console: Console, details: Sequence[ToolCallDetail], turn: str = "the last turn"
) -> None:
    """Show the tool calls of a turn and their raw results, for a supervisor.

    ``turn`` names it in the heading: the last turn, or "turn 2 of 5 ..." (``/details N``).
    """
    if not details:
        console.status(f"{turn[:1].upper()}{turn[1:]} made no tool calls.")
        return
    console.status(f"Tool calls of {turn} ({len(details)}):")
    for detail in details:
        arguments = json.dumps(dict(detail.arguments), ensure_ascii=False, default=str)
        console.status(f"→ {detail.tool} {arguments}")
        if detail.answer is None:
            console.status("  ← (no answer yet: waiting for approval)")
            continue
        content = " ".join(detail.answer.split())
        if len(content) > DETAIL_CHARS:
            content = content[:DETAIL_CHARS] + "…"
        console.status(f"  ← [{detail.outcome}] {content}")


def turn_heading(number: int, count: int, message: str) -> str:
    """Name turn ``number`` of ``count`` by its customer message, for ``/details N``."""
    return f'turn {number} of {count} ("{_title(message)}")'


def _title(text: str) -> str:
    line = text.strip().splitlines()[0][:160] if text.strip() else ""
    return line[: TITLE_CHARS - 1] + "…" if len(line) > TITLE_CHARS else line


def session_table(
    conversations: Conversations,
    records: Sequence[SessionRecord],
    *,
    numbered: bool,
    passenger_column: bool,
    current: str | None = None,
) -> tuple[list[str], list[list[str]], int]:
    """Return the headers and rows of a table of saved sessions, and its wrapping column.

    Most recent first; times are local; the title is the first customer message; turns
    count customer messages; "pending" marks an approval still waiting. A numbered
    table (``/sessions``, for ``/switch N``) leaves out the session ids, and marks the
    conversation ``current`` (its thread id) with a ``*`` after its number.
    """
    from conversations.events import Thread

    headers = ["#"] if numbered else []
    headers.append("Last used")
    if passenger_column:
        headers.append("Passenger")
    headers += ["Turns", "Approval", "Title"]
    if not numbered:  # a numbered list is for /switch N, which needs no id
        headers.append("Session")
    rows = []
    for number, record in enumerate(records, start=1):
        summary = conversations.get(Thread(record.thread_id, record.passenger_id)).summary()
        mark = "*" if record.thread_id == current else ""
        row = [f"{number}{mark}"] if numbered else []
        row.append(record.updated_at.astimezone().strftime("%Y-%m-%d %H:%M"))
        if passenger_column:
            row.append(record.passenger_id)
        row += [
            str(summary.turns),
            "pending" if summary.pending_actions else "",
            _title(summary.title or record.title) or "(no message)",
        ]
        if not numbered:
            row.append(record.thread_id)
        rows.append(row)
    return headers, rows, headers.index("Title")
