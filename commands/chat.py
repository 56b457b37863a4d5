"""``travel-assistant chat``: open the databases and the model, then talk (``terminal.chat``)."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import threading
import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from collector import loading_code
from commands.chat_start import FirstLine, known_passenger, loading, saved_owner
from commands.common import (
    EXIT_USAGE,
    CliError,
    Overrides,
    agreed_check_above,
    canonical_passenger_id,
    check_endpoint,
    default_model_factory,
    open_store,
    open_travel_db,
    password_note,
    prepared,
    resume_options,
    server_problem,
)
from terminal import Console
from terminal.live import Interrupter, above_prompt
from terminal.prompter import (
    Prompter,
    PromptReads,
    discard_typeahead,
    new_session_line,
    sessions_command,
)
from terminal.signals import CtrlC

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

    from conversations.protocol import Conversations
    from conversations.store import ConversationStore
    from db.engine import Database
    from graph import ModelsArg
    from locations import Location
    from settings import Settings


def history_file(home: Path, passenger_id: str) -> Path:
    """Return the passenger's input-history file, private to the user (0600 in a 0700 folder).

    One file per passenger, so that on a shared desk terminal one customer's questions
    never come back under Up in another customer's session.
    """
    folder = home / "history"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    name = re.sub(r"[^0-9A-Za-z]+", "_", passenger_id).strip("_") or "unknown"
    path = folder / name
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600))
    path.chmod(0o600)
    return path


def _make_prompter(home: Path, passenger_id: str, overrides: Overrides, ctrl_c: CtrlC) -> Prompter:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import DummyHistory, FileHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.output import create_output

    if overrides.pt_input is None and not sys.stdin.isatty():
        # Piped input: read plain lines, so scripts can drive the chat.
        def read_line(message: str) -> str:
            with ctrl_c.reading(_leave):
                raw = sys.stdin.buffer.readline()
            if not raw:
                raise EOFError
            # Bytes that are not UTF-8 become "?" rather than an exception.
            return raw.decode("utf-8", "replace").rstrip("\r\n")

        return Prompter(read_line, read_line, lambda: False, above_prompt(None), ctrl_c=ctrl_c)

    keys = KeyBindings()

    @keys.add("c-c")
    def _clear_or_leave(event: KeyPressEvent) -> None:
        # Ctrl-C clears a half-typed line; at an empty prompt it leaves.
        buffer = event.app.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    output = overrides.pt_output or create_output()
    # No cursor-position requests: the chat has no menu that needs the cursor's row, and
    # a terminal that never answers one kept the prompt in raw mode for seconds after
    # Enter, turning an early Ctrl-C into typed input instead of a cancel.
    if hasattr(output, "enable_cpr"):
        output.enable_cpr = False
    messages: PromptSession[str] = PromptSession(
        history=FileHistory(str(history_file(home, passenger_id))),
        key_bindings=keys,
        input=overrides.pt_input,
        output=output,
    )
    # Approval answers and reasons are never kept: they are not messages to recall.
    answers: PromptSession[str] = PromptSession(
        history=DummyHistory(), input=overrides.pt_input, output=output
    )
    at_terminal = overrides.pt_input is None
    read_messages = PromptReads(messages, ctrl_c, terminal=at_terminal)
    read_answers = PromptReads(answers, ctrl_c, terminal=at_terminal)
    # What must be answered at once (an action a person proposed) ends the message
    # prompt, which then starts again with what was being typed (``Interrupter``).
    interrupter = Interrupter()

    def read_message(text: str) -> str:
        kept, interrupter.kept = interrupter.kept, ""
        try:
            return read_messages(text, default=kept, pre_run=interrupter.started)
        finally:
            interrupter.ended()

    # Keys typed ahead are thrown away at a terminal only: a scripted input (the tests'
    # pipe) holds the answers in order, as piped standard input does.
    return Prompter(
        read_message,
        read_answers,
        (lambda: discard_typeahead(answers.input)) if at_terminal else bool,
        above_prompt(messages),
        interrupter,
        ctrl_c,
    )


def _leave() -> bool:
    """End a piped read at Ctrl-C, as Python's default handler would."""
    raise KeyboardInterrupt


def check_db_file(settings: Settings, create_db: bool) -> None:
    """Refuse a travel database file named by --db (or the environment) that is not there.

    The file check of ``open_chat_db`` alone, with nothing slow imported: ``serve`` makes
    it before it listens.
    """
    location = settings.db_location
    if settings.db and not create_db and location.path is not None and not location.path.exists():
        raise _no_database(location)


def open_chat_db(
    settings: Settings, console: Console, overrides: Overrides, *, create_db: bool
) -> Database:
    """Open the travel database; one named by --db (or the environment) must exist."""
    location = settings.db_location
    if settings.db and not create_db:
        if location.path is not None and not location.path.exists():
            raise _no_database(location)
        if location.path is None:
            from sqlalchemy.exc import OperationalError

            from db.engine import Database
            from locations import database_missing

            probe = Database.from_url(location.sqlalchemy_url())
            try:
                empty = not probe.has_schema()
            except OperationalError as error:
                if not database_missing(getattr(error, "orig", None) or error):
                    raise CliError(server_problem(location, error), EXIT_USAGE) from error
                empty = True
            finally:
                probe.dispose()
            if empty:
                raise _no_database(location)
    return open_travel_db(
        location,
        console,
        clock=overrides.clock,
        create_database=create_db,
        data_dir=settings.data_dir,
    )


def _no_database(location: Location) -> CliError:
    return CliError(
        f"No travel database at {location.shown()}. Build it with: travel-assistant db init "
        f"--db {shlex.quote(location.for_command())} (or add --create-db to build it now).",
        EXIT_USAGE,
    )


def cmd_chat(
    args: argparse.Namespace, settings: Settings, console: Console, overrides: Overrides
) -> int:
    """Run ``travel-assistant chat``."""
    given = args.passenger_id
    if given is None and args.thread_id:
        # ``--thread-id`` alone resumes the conversation for its own passenger: asked of
        # the store now, with nothing slow imported (``_chat`` asks again if it cannot tell).
        owner = saved_owner(settings.conversations_location, args.thread_id)
        if owner == "":
            raise _no_saved_session(args, settings, "")
        given = owner
    if given is None:
        given = settings.passenger_id
    passenger_id = canonical_passenger_id(given or "")
    if not passenger_id and (given is not None or not (args.continue_latest or args.thread_id)):
        # ``--continue`` alone takes the passenger of the latest conversation (``_chat``).
        raise CliError(
            "--passenger-id is empty. Pass your passenger id, e.g. '3442 587242'."
            if given is not None
            else "Pass --passenger-id ID (e.g. '3442 587242'), set TRAVEL_ASSISTANT_PASSENGER, "
            "resume a conversation with --thread-id ID, or your latest one with --continue.",
            EXIT_USAGE,
        )
    if _starts_early(args, settings, overrides, passenger_id):
        return _chat_early(args, settings, console, overrides, passenger_id)
    factory = overrides.model_factory or partial(default_model_factory, settings)
    with loading_code():
        import terminal.chat  # noqa: F401  (LangChain's imports)

        models = factory(None)  # fails here, before the first prompt, without an endpoint
    if overrides.model_factory is None and overrides.check_endpoint and not args.no_check:
        check_endpoint(settings.models)
    database = open_chat_db(settings, console, overrides, create_db=args.create_db)
    try:
        with open_store(settings.conversations_location) as store:
            return _chat(args, settings, console, overrides, passenger_id, models, database, store)
    finally:
        database.dispose()


def _starts_early(
    args: argparse.Namespace, settings: Settings, overrides: Overrides, passenger_id: str
) -> bool:
    """Say what needs nothing slow; tell whether the prompt may come before the graph.

    A travel database named but missing, a passenger a SQLite travel database does not
    know, or a conversation to resume (``--thread-id``) that the conversations store does
    not have or that is another passenger's, is said here, before anything slow is
    imported. The prompt comes first (``commands.chat_start``) for a new conversation
    typed at a terminal over a SQLite travel database that is there; otherwise
    everything is loaded first, as it must be to show a resumed conversation or to build
    a database.
    """
    location = settings.db_location
    known: bool | None = None
    if location.path is not None and not args.create_db:
        if not location.path.exists():
            if settings.db:
                raise _no_database(location)
        elif passenger_id:  # ``--continue`` alone: the passenger comes from the store
            known = known_passenger(location.path, passenger_id)
            if known is False:
                raise _unknown_passenger(settings, passenger_id)
    if args.thread_id:
        owner = saved_owner(settings.conversations_location, args.thread_id)
        if owner is not None:
            _check_saved_thread(args, settings, passenger_id, owner)
        return False
    interactive = overrides.pt_input is None and sys.stdin.isatty()
    return bool(known) and interactive and not args.continue_latest


def _check_saved_thread(
    args: argparse.Namespace, settings: Settings, passenger_id: str, owner: str
) -> None:
    """Refuse ``--thread-id`` unless it is a saved conversation (``owner``) of the passenger.

    ``owner`` is the passenger of the conversation, ``""`` when there is none.
    """
    if not owner:
        raise _no_saved_session(args, settings, passenger_id)
    if owner != passenger_id:
        raise CliError(
            f"Session {args.thread_id!r} belongs to another passenger; "
            "start a new one without --thread-id.",
            EXIT_USAGE,
        )


def _no_saved_session(args: argparse.Namespace, settings: Settings, passenger_id: str) -> CliError:
    return CliError(
        f"No saved session {args.thread_id!r}. List them with: "
        + sessions_command(resume_options(settings), passenger_id),
        EXIT_USAGE,
    )


def _unknown_passenger(settings: Settings, passenger_id: str) -> CliError:
    return CliError(
        f"No passenger with id {passenger_id!r} in {settings.db_location.shown()}. "
        "Check the id on your ticket (it looks like '3442 587242').",
        EXIT_USAGE,
    )


def _conversations(
    settings: Settings,
    passenger_id: str,
    models: ModelsArg,
    database: Database,
    store: ConversationStore,
) -> Conversations:
    """Build the assistant over the opened databases, and check the passenger."""
    from conversations.assistant import TravelAssistant
    from conversations.protocol import Conversations

    assistant = prepared(
        TravelAssistant.build(
            models, store.saver, db=database, tavily_api_key=settings.tavily_api_key
        )
    )
    if not assistant.check_passenger(passenger_id):
        raise _unknown_passenger(settings, passenger_id)
    return Conversations(
        assistant,
        store.registry,
        store.locks,
        store.desk,
        check_above=agreed_check_above(settings, store),
    )


def _load(
    args: argparse.Namespace,
    settings: Settings,
    console: Console,
    overrides: Overrides,
    passenger_id: str,
    closers: list[Callable[[], None]],
) -> Conversations:
    """Do what ``cmd_chat`` does before the prompt, in the background (``_chat_early``)."""
    with loading_code():
        import terminal.chat  # noqa: F401  (LangChain's imports, off the customer's way too)

        models = (overrides.model_factory or partial(default_model_factory, settings))(None)
        if overrides.model_factory is None and overrides.check_endpoint and not args.no_check:
            check_endpoint(settings.models)
        database = open_chat_db(settings, console, overrides, create_db=args.create_db)
        closers.append(database.dispose)
        store = open_store(settings.conversations_location)
        closers.append(store.close)
        return _conversations(settings, passenger_id, models, database, store)


def _chat_early(
    args: argparse.Namespace,
    settings: Settings,
    console: Console,
    overrides: Overrides,
    passenger_id: str,
) -> int:
    """Take the first line while the graph loads; start the chat when it is entered."""
    thread_id = str(uuid.uuid4())
    ctrl_c = _ctrl_c(console)
    prompter = _make_prompter(settings.home, passenger_id, overrides, ctrl_c)
    closers: list[Callable[[], None]] = []
    loaded = loading(partial(_load, args, settings, console, overrides, passenger_id, closers))
    console.status(new_session_line(thread_id, passenger_id))
    # Ctrl-C is the chat's from before the first prompt: from Enter on, it cancels.
    with ctrl_c.installed():
        try:
            first = _first_line(prompter, ctrl_c, loaded, console)
            conversations = loaded.result()  # a problem found by the load is raised here
            from conversations.events import Thread
            from terminal.chat import ChatSession

            session = ChatSession(
                conversations,
                Thread(thread_id, passenger_id),
                console,
                Prompter(
                    first.reader(prompter.message),
                    prompter.answer,
                    prompter.discard,
                    prompter.show,
                    prompter.interrupter,
                    ctrl_c,
                ),
                resume_options=resume_options(settings),
            )
            code = session.run(False, announced=True)
        finally:
            if loaded.done():
                for close in reversed(closers):
                    close()
    note = password_note(settings)
    if note and session.has_messages():
        console.status(note)
    return code


def _wake(woken: threading.Event, _: object) -> None:
    woken.set()


def _ctrl_c(console: Console) -> CtrlC:
    """Return the chat's Ctrl-C; the chat names the command that resumes it (``ChatSession``)."""
    return CtrlC(console.err, console.thinking.cancelling, lambda: "(nothing to resume yet)")


def _first_line(
    prompter: Prompter, ctrl_c: CtrlC, loaded: Future[Conversations], console: Console
) -> FirstLine:
    """Read the first line while the chat loads; return it once the chat can take it.

    A message entered before the load is over waits for it under the spinner; Ctrl-C
    meanwhile takes it back, unsent (it stays in the input history), and the prompt
    comes back at once, the load going on. A line that is not a message (a command,
    ``exit``) is returned as it is.
    """
    while True:
        first = FirstLine(prompter.message, "you> ")
        if first.message is None or loaded.done():
            return first  # a Ctrl-C from here on cancels the first turn (``ChatSession``)
        console.thinking.start()  # the turn's own spinner goes on from here
        cancel = ctrl_c.arm()
        woken = threading.Event()
        loaded.add_done_callback(partial(_wake, woken))
        cancel.when_set(woken.set)
        with ctrl_c.turn(cancel):
            woken.wait()
        if not cancel.is_set():
            return first
        first.drop()
        console.thinking.stop()
        from conversations import words

        console.status(words.FIRST_MESSAGE_TAKEN_BACK)


def _chat(
    args: argparse.Namespace,
    settings: Settings,
    console: Console,
    overrides: Overrides,
    passenger_id: str,
    models: ModelsArg,
    database: Database,
    store: ConversationStore,
) -> int:
    from conversations.assistant import Thread
    from terminal.chat import ChatSession

    registry = store.registry
    if not passenger_id and args.thread_id:  # --thread-id alone: the conversation's passenger
        record = registry.get(args.thread_id)
        if record is None:
            raise _no_saved_session(args, settings, "")
        passenger_id = record.passenger_id
    if not passenger_id:  # --continue alone: the passenger of this home's latest conversation
        latest = registry.list(None, limit=1)
        if not latest:
            raise CliError(
                "No saved conversation to continue here. Start one with: "
                "travel-assistant chat --passenger-id ID",
                EXIT_USAGE,
            )
        passenger_id = latest[0].passenger_id
    conversations = _conversations(settings, passenger_id, models, database, store)
    resumed = False
    if args.thread_id:
        record = registry.get(args.thread_id)
        _check_saved_thread(args, settings, passenger_id, record.passenger_id if record else "")
        thread = Thread(args.thread_id, passenger_id)
        resumed = True
    elif args.continue_latest and (latest := registry.list(passenger_id, limit=1)):
        thread = Thread(latest[0].thread_id, passenger_id)
        resumed = True
    else:
        if args.continue_latest:
            console.status("No saved conversation to continue: starting a new one.")
        thread = Thread(str(uuid.uuid4()), passenger_id)
    prompter = _make_prompter(settings.home, passenger_id, overrides, _ctrl_c(console))
    session = ChatSession(
        conversations,
        thread,
        console,
        prompter,
        resume_options=resume_options(settings),
    )
    code = session.run(resumed)
    note = password_note(settings)
    if note and session.has_messages():
        console.status(note)
    return code
