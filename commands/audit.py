"""``travel-assistant audit``: who among the supervisors looked at which conversation, when."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from commands.common import EXIT_OK, EXIT_USAGE, CliError, open_existing_store
from terminal import Console

if TYPE_CHECKING:
    from conversations.audit import AuditEntry
    from settings import Settings

MAX_ENTRIES = 10_000


# How the table says each entry: a look, or an action at the desk (took, handed back, ...).
_WHAT = {"conversations": "looked at the list", "conversation": "looked at it"}


def cmd_audit(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Print the audit log of the conversation store, newest first, as a table."""
    if not 1 <= args.limit <= MAX_ENTRIES:
        raise CliError(f"--limit must be between 1 and {MAX_ENTRIES}.", EXIT_USAGE)
    entries = _entries(args, settings)
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


def _entries(args: argparse.Namespace, settings: Settings) -> list[AuditEntry]:
    """Read the entries asked for, newest first (none when there are no conversations yet).

    A SQLite file is read through its audit table alone: opening the whole store would
    load LangGraph's checkpointer first, seconds before anything is said.
    """
    location = settings.conversations_location
    if location.path is None:
        store = open_existing_store(settings)
        if store is None:
            return []
        with store:
            return store.audit.entries(
                supervisor=args.supervisor, conversation_id=args.conversation, limit=args.limit
            )
    if not location.path.exists():
        return []
    if location.path.is_dir():
        raise CliError(
            f"{location.path} is a folder, not a sessions file: give a file path or a URL.",
            EXIT_USAGE,
        )
    import sqlalchemy as sa

    from conversations.audit import AuditLog
    from conversations.tables import open_engine

    try:
        log = AuditLog(open_engine(f"sqlite:///{location.path}"))
        try:
            return log.entries(
                supervisor=args.supervisor, conversation_id=args.conversation, limit=args.limit
            )
        finally:
            log.close()
    except sa.exc.SQLAlchemyError as error:
        raise CliError(
            f"The session store {location.path} cannot be read ({error}). "
            "Move it aside to start afresh."
        ) from error
