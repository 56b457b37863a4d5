"""``travel-assistant sessions`` and ``sessions delete ID``: the saved conversations."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from commands.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    canonical_passenger_id,
    open_existing_store,
    resume_options,
)
from terminal import Console
from terminal.prompter import sessions_command

if TYPE_CHECKING:
    from conversations.protocol import Conversations
    from conversations.store import ConversationStore
    from settings import Settings


def _session_reader(store: ConversationStore) -> Conversations:
    """Return the conversations of ``store``, to read only."""
    from conversations.assistant import TravelAssistant
    from conversations.protocol import Conversations
    from db.engine import Database
    from graph import drawing_model

    # Listing reads the checkpoints only: no travel database is opened or built for it.
    assistant = TravelAssistant.build(
        drawing_model(), store.saver, db=Database.from_url("sqlite://")
    )
    return Conversations(assistant, store.registry, store.locks, store.desk)


def cmd_sessions(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``travel-assistant sessions`` (a table) and ``sessions delete ID``."""
    if getattr(args, "sessions_command", None) == "delete":
        return cmd_sessions_delete(args, settings, console)
    passenger_id = canonical_passenger_id(args.passenger_id) if args.passenger_id else None
    store = open_existing_store(settings)
    if store is None:
        console.say("No saved sessions.")
        return EXIT_OK
    with store:
        records = store.registry.list(passenger_id)
        if not records:
            console.say("No saved sessions.")
            return EXIT_OK
        from terminal.render import session_table

        headers, rows, wrap = session_table(
            _session_reader(store),
            records,
            numbered=False,
            passenger_column=passenger_id is None,
        )
    console.table(headers, rows, err=False, wrap=wrap)
    return EXIT_OK


def cmd_sessions_delete(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``travel-assistant sessions delete ID``.

    A conversation whose turn is running in another window is not deleted.
    """
    from conversations.store import ConversationBusyError, ConversationStoreError
    from terminal.chat import BUSY_WAIT_SECONDS

    store = open_existing_store(settings)
    missing = CliError(
        f"No saved session {args.thread_id!r}. List them with: "
        + sessions_command(resume_options(settings)),
        EXIT_USAGE,
    )
    if store is None:
        raise missing
    # ``sessions --passenger-id X delete ID`` deletes only a conversation of X: the id
    # may have been copied from another passenger's list.
    passenger_id = canonical_passenger_id(args.passenger_id) if args.passenger_id else None
    with store:
        record = store.registry.get(args.thread_id)
        if record is None:
            raise missing
        if passenger_id is not None and record.passenger_id != passenger_id:
            raise CliError(
                f"Session {args.thread_id} is not a conversation of passenger {passenger_id}; "
                "nothing was deleted.",
                EXIT_USAGE,
            )
        try:
            with store.turn_lock(args.thread_id, BUSY_WAIT_SECONDS):
                store.saver.delete_thread(args.thread_id)
                store.registry.delete(args.thread_id)
                store.desk.end_checks(args.thread_id, "withdrawn")  # nothing left to check
        except ConversationBusyError as error:
            raise CliError(
                f"Session {args.thread_id} is busy: the assistant is answering in another "
                "window or terminal. Delete it when it has answered."
            ) from error
        except ConversationStoreError as error:
            raise CliError(str(error)) from error
    console.status(f"Deleted session {args.thread_id} (passenger {record.passenger_id}).")
    return EXIT_OK
