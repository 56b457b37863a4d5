"""``travel-assistant audit``: who among the supervisors looked at which conversation, when."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from commands.common import EXIT_OK, EXIT_USAGE, CliError, open_existing_store
from terminal import Console

if TYPE_CHECKING:
    from settings import Settings

MAX_ENTRIES = 10_000


# How the table says each entry: a look, or an action at the desk (took, handed back, ...).
_WHAT = {"conversations": "looked at the list", "conversation": "looked at it"}


def cmd_audit(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Print the audit log of the conversation store, newest first, as a table."""
    if not 1 <= args.limit <= MAX_ENTRIES:
        raise CliError(f"--limit must be between 1 and {MAX_ENTRIES}.", EXIT_USAGE)
    store = open_existing_store(settings)
    if store is None:
        console.say("No supervisor has looked at any conversation.")
        return EXIT_OK
    with store:
        entries = store.audit.entries(
            supervisor=args.supervisor, conversation_id=args.conversation, limit=args.limit
        )
    if not entries:
        console.say("No supervisor has looked at any conversation.")
        return EXIT_OK
    rows = [
        [
            e.at.astimezone().strftime("%Y-%m-%d %H:%M:%S"),
            e.supervisor,
            _WHAT.get(e.looked_at, e.looked_at),
            e.passenger_id,
            e.conversation_id,
        ]
        for e in entries
    ]
    headers = ["when (local time)", "supervisor", "what", "passenger", "conversation"]
    console.table(headers, rows, err=False, wrap=1)
    return EXIT_OK
