"""``travel-assistant sessions`` and ``sessions delete ID``: the saved conversations."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from commands.chat_start import saved_owner
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


def session_reader(store: ConversationStore) -> Conversations:
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
    if getattr(args, "sessions_command", None) == "show":
        return cmd_sessions_show(args, settings, console)
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
            session_reader(store),
            records,
            numbered=False,
            passenger_column=passenger_id is None,
        )
    console.table(headers, rows, err=False, wrap=wrap)
    return EXIT_OK


def cmd_sessions_show(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``travel-assistant sessions show ID [--json]``: the conversation as it was seen.

    The customer's messages, the replies (a person's under their name), what became of
    each action and the notes, as ``/history`` shows them; with ``--json``, one object
    for scripts: the id, the passenger and the records, each with its ``type``.
    """
    missing = _missing(args.thread_id, settings)
    passenger_id = canonical_passenger_id(args.passenger_id) if args.passenger_id else None
    owner = saved_owner(settings.conversations_location, args.thread_id)
    if owner is not None:
        _check_owner(args.thread_id, owner, passenger_id, missing, "nothing was shown")
    store = open_existing_store(settings)
    if store is None:
        raise missing
    from conversations.events import Thread

    with store:
        record = store.registry.get(args.thread_id)
        owner = record.passenger_id if record else ""
        _check_owner(args.thread_id, owner, passenger_id, missing, "nothing was shown")
        history = session_reader(store).get(Thread(args.thread_id, owner)).history()
    if args.json:
        import json
        from dataclasses import asdict

        records = [{"type": _RECORD_TYPES[type(r).__name__], **asdict(r)} for r in history]
        for fields in records:
            fields.pop("streamed", None)  # of a live turn only
        shown = {"thread_id": args.thread_id, "passenger_id": owner, "records": records}
        console.say(json.dumps(shown, ensure_ascii=False, indent=2))
        return EXIT_OK
    from terminal.render import show_record

    console.status(f"Session {args.thread_id} (passenger {owner}):")
    for item in history:
        show_record(console, item)
    return EXIT_OK


# The ``type`` of each record of ``sessions show --json``.
_RECORD_TYPES = {
    "CustomerLine": "customer",
    "AssistantLine": "assistant",
    "ActionRecord": "action",
    "Notice": "notice",
}


def _missing(thread_id: str, settings: Settings) -> CliError:
    return CliError(
        f"No saved session {thread_id!r}. List them with: "
        + sessions_command(resume_options(settings)),
        EXIT_USAGE,
    )


def cmd_sessions_delete(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``travel-assistant sessions delete ID``.

    A conversation whose turn is running in another window is not deleted.
    """
    missing = _missing(args.thread_id, settings)
    # ``sessions --passenger-id X delete ID`` deletes only a conversation of X: the id
    # may have been copied from another passenger's list.
    passenger_id = canonical_passenger_id(args.passenger_id) if args.passenger_id else None
    # Asked first with nothing slow imported (the store's checkpointer takes seconds to
    # load): a wrong id is said at once.
    owner = saved_owner(settings.conversations_location, args.thread_id)
    if owner is not None:
        _check_owner(args.thread_id, owner, passenger_id, missing)
    from conversations.store import ConversationBusyError, ConversationStoreError
    from terminal.chat import BUSY_WAIT_SECONDS

    store = open_existing_store(settings)
    if store is None:
        raise missing
    with store:
        record = store.registry.get(args.thread_id)
        _check_owner(args.thread_id, record.passenger_id if record else "", passenger_id, missing)
        assert record is not None
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


def _check_owner(
    thread_id: str,
    owner: str,
    passenger_id: str | None,
    missing: CliError,
    nothing: str = "nothing was deleted",
) -> None:
    """Refuse to delete ``thread_id`` unless it is saved and, if asked, ``passenger_id``'s.

    ``owner`` is the passenger of the saved conversation, ``""`` when there is none.
    """
    if not owner:
        raise missing
    if passenger_id is not None and owner != passenger_id:
        raise CliError(
            f"Session {thread_id} is not a conversation of passenger {passenger_id}; {nothing}.",
            EXIT_USAGE,
        )
