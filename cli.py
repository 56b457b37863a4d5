"""The terminal program: ``travel-assistant chat`` and its companion commands.

Commands::

    travel-assistant chat --passenger-id ID [--thread-id ID | --continue] [--model NAME]
    travel-assistant sessions [--passenger-id ID]
    travel-assistant sessions delete ID
    travel-assistant db init [--scale N] [--seed N] [--force]
    travel-assistant graph
    travel-assistant serve [--host 127.0.0.1] [--port 8000]
    travel-assistant token --passenger-id ID [--hours N]

``--home DIR``, ``--db PATH_OR_URL``, ``--conversations PATH_OR_URL`` and ``--debug`` go
before or after the command. The travel database and the conversations are each a SQLite
file or a PostgreSQL URL (``conversations.store.Location``); a conversation takes one
turn at a time, across windows and machines (its turn lock, held for every turn).

Only the assistant's words go to stdout; status lines, warnings and errors go to stderr.
Expected failures are one line naming the fix and a non-zero exit code; ``--debug``
brings the traceback back. How things look on the terminal lives in ``terminal``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from terminal import Console
from terminal.prompter import Prompter, sessions_command

# LangChain is imported where it is used, so that --help and argument errors are fast.
if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from conversations.assistant import TravelAssistant
    from conversations.protocol import Conversations
    from conversations.store import ConversationStore
    from locations import Location

__all__ = ["CliError", "Console", "Overrides", "main", "run"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
# The time limit of one trial of ``eval`` (seconds): a few minutes of a slow local model.
DEFAULT_EVAL_SECONDS = 600.0

ModelFactory = Callable[[str | None], "Mapping[str, BaseChatModel] | BaseChatModel"]


class CliError(Exception):
    """An expected failure: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        """Carry ``message`` and the exit ``code``."""
        super().__init__(message)
        self.code = code


# --- argument parsing --------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("travel-assistant")
    except PackageNotFoundError:
        return "unknown"


def _add_global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Add ``--home``, ``--db`` and ``--debug``, accepted before or after the command.

    On a command's parser they default to ``SUPPRESS``, so that a value given before
    the command is kept when it is not repeated after it.
    """

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    parser.add_argument(
        "--debug", action="store_true", default=default(False), help="show tracebacks of errors"
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=default(None),
        help="folder of the travel database, saved sessions and input history "
        "(default: $TRAVEL_ASSISTANT_HOME or ~/.local/share/travel-assistant)",
    )
    parser.add_argument(
        "--db",
        default=default(None),
        metavar="PATH_OR_URL",
        help="travel database: a file, or a URL such as "
        "postgresql+psycopg://USER@HOST:5432/NAME "
        "(default: $TRAVEL_ASSISTANT_DB or <home>/travel.sqlite)",
    )
    parser.add_argument(
        "--conversations",
        default=default(None),
        metavar="PATH_OR_URL",
        help="where conversations are saved: a file, or a PostgreSQL URL "
        "(default: $TRAVEL_ASSISTANT_CONVERSATIONS or <home>/sessions.sqlite)",
    )


def _command_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Yield the parser of every command and sub-command under ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                yield command
                yield from _command_parsers(command)


class _VersionAction(argparse.Action):
    """Print the installed version and exit (read only when asked, to keep start-up fast)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(f"travel-assistant {_version()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="travel-assistant",
        description="Meridian Travel's customer-service assistant in your terminal.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    _add_global_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser("chat", help="talk to the assistant (the main job)")
    chat.add_argument(
        "--passenger-id",
        required=True,
        help='your passenger id, e.g. "3442 587242" (the space is optional)',
    )
    resume = chat.add_mutually_exclusive_group()
    resume.add_argument("--thread-id", help="resume a saved conversation")
    resume.add_argument(
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="resume your latest conversation",
    )
    chat.add_argument(
        "--model", help="chat model name (default: $TRAVEL_ASSISTANT_MODEL or gpt-4o-mini)"
    )
    chat.add_argument(
        "--create-db",
        action="store_true",
        help="build the travel database named by --db when it does not exist",
    )
    chat.add_argument(
        "--no-check", action="store_true", help="skip the check that the model endpoint answers"
    )
    chat.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="longest reply in tokens (default: $TRAVEL_ASSISTANT_MAX_TOKENS or 1024)",
    )

    sessions = commands.add_parser("sessions", help="list saved conversations")
    sessions.add_argument("--passenger-id", help="only this passenger's conversations")
    sessions_commands = sessions.add_subparsers(dest="sessions_command", metavar="ACTION")
    delete = sessions_commands.add_parser("delete", help="delete a saved conversation")
    delete.add_argument(
        "thread_id", metavar="ID", help="the session (see: travel-assistant sessions)"
    )

    db = commands.add_parser("db", help="manage the travel database")
    db_commands = db.add_subparsers(dest="db_command", metavar="DB_COMMAND")
    init = db_commands.add_parser("init", help="(re)build the travel database (at --db)")
    init.add_argument(
        "--scale", type=int, default=1, help="size of the generated schedule (1 to 25)"
    )
    init.add_argument("--seed", type=int, default=42, help="random seed (same seed, same data)")
    init.add_argument("--force", action="store_true", help="replace an existing database")

    commands.add_parser("graph", help="print the assistant graph as Mermaid")
    _add_server_commands(commands)

    evaluate = commands.add_parser(
        "eval", help="run the scenario suite against a real model (needs a model endpoint)"
    )
    evaluate.add_argument("--model", help="the assistant's model (default: as for chat)")
    evaluate.add_argument(
        "--customer-model", help="the simulated customer's model (default: --model)"
    )
    evaluate.add_argument("--trials", type=int, default=1, help="runs per scenario, for pass^k")
    evaluate.add_argument(
        "--scenario",
        action="append",
        metavar="NAME",
        help="only this scenario, by id or shell pattern such as 'flight_*' (repeatable)",
    )
    evaluate.add_argument(
        "--category", action="append", metavar="NAME", help="only this category (repeatable)"
    )
    evaluate.add_argument(
        "--list", action="store_true", help="list the scenarios selected, and run none"
    )
    evaluate.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="longest reply in tokens (default: $TRAVEL_ASSISTANT_MAX_TOKENS or 1024)",
    )
    evaluate.add_argument(
        "--time-limit",
        type=_positive_float,
        default=DEFAULT_EVAL_SECONDS,
        metavar="SECONDS",
        help=f"time limit of one trial of a scenario (default: {DEFAULT_EVAL_SECONDS:g})",
    )
    evaluate.add_argument(
        "--jsonl",
        type=Path,
        metavar="PATH",
        help="append every trial to PATH as a JSON line (scenario, passed, reasons, tokens, "
        "latency), to compare runs",
    )
    evaluate.add_argument("--price-in", type=float, help="USD per million input tokens")
    evaluate.add_argument("--price-out", type=float, help="USD per million output tokens")
    for command in _command_parsers(parser):
        _add_global_options(command, top=False)
    return parser


# --- paths and resources -------------------------------------------------------------------


def _home(args: argparse.Namespace) -> Path:
    from db.engine import app_home

    home: Path = args.home.expanduser() if args.home else app_home()
    return home


HOME_ENV = "TRAVEL_ASSISTANT_HOME"
DB_ENV = "TRAVEL_ASSISTANT_DB"
CONVERSATIONS_ENV = "TRAVEL_ASSISTANT_CONVERSATIONS"


def _location(text: str | Path, option: str) -> Location:
    """Read a path or URL given with ``option``; a bad one is a usage error."""
    from locations import Location, LocationError

    try:
        location = Location.parse(text)
        location.check_driver()
    except LocationError as error:
        raise CliError(f"{option}: {error}", EXIT_USAGE) from error
    return location


def _db_location(args: argparse.Namespace) -> Location:
    """Return the travel database: ``--db``, ``$TRAVEL_ASSISTANT_DB`` or the home's file."""
    if getattr(args, "db", None):
        return _location(args.db, "--db")
    env = os.environ.get(DB_ENV)
    if env:
        return _location(env, DB_ENV)
    return _location(_home(args) / "travel.sqlite", "--home")


def _db_named(args: argparse.Namespace) -> bool:
    """Tell whether the user named the travel database (rather than the home's default)."""
    return bool(getattr(args, "db", None) or os.environ.get(DB_ENV))


def _conversations_location(args: argparse.Namespace) -> Location:
    """Return where conversations are kept (``--conversations``, its variable, the home)."""
    if getattr(args, "conversations", None):
        return _location(args.conversations, "--conversations")
    env = os.environ.get(CONVERSATIONS_ENV)
    if env:
        return _location(env, CONVERSATIONS_ENV)
    return _location(_home(args) / "sessions.sqlite", "--home")


def _server_problem(location: Location, error: Exception) -> str:
    """Say why the server database at ``location`` cannot be used (from a SQLAlchemy error)."""
    from locations import describe_connect_error

    return describe_connect_error(location, getattr(error, "orig", None) or error)


def open_travel_db(
    where: Location | Path | str,
    console: Console,
    *,
    build_if_missing: bool = True,
    create_database: bool = False,
    clock: Any = None,
) -> Any:
    """Open the travel database at a path or URL, building it on first use.

    ``create_database`` also creates a PostgreSQL database the server does not have.
    """
    from sqlalchemy.exc import DatabaseError, OperationalError

    from db.engine import Database
    from db.generate import ensure_database
    from locations import database_missing

    location = where if not isinstance(where, Path | str) else _location(where, "--db")
    shown = location.shown()
    if location.path is not None:
        if location.path.is_dir():
            raise CliError(
                f"{location.path} is a folder, not a database file. Pass a file path with --db."
            )
        if build_if_missing:
            location.path.parent.mkdir(parents=True, exist_ok=True)
    url = location.sqlalchemy_url()
    database = Database.from_url(url, clock=clock) if clock else Database.from_url(url)
    try:
        try:
            has_schema = database.has_schema()
        except OperationalError as error:
            missing = database_missing(getattr(error, "orig", None) or error)
            if location.path is not None or not (missing and create_database):
                raise
            _create_server_database(location, console)
            has_schema = False
        if not has_schema:
            if not build_if_missing:
                raise CliError(
                    f"No travel database at {shown}. Build it with: travel-assistant db init"
                )
            console.status(f"Building the travel database at {shown} (first use; a few seconds)...")
            ensure_database(database)
    except OperationalError as error:
        if location.path is None:
            database.dispose()
            raise CliError(_server_problem(location, error), EXIT_USAGE) from error
        raise CliError(
            f"{shown} cannot be read as a travel database ({error.orig}). "
            "Rebuild it with: travel-assistant db init --force"
        ) from error
    except DatabaseError as error:
        raise CliError(
            f"{shown} cannot be read as a travel database ({error.orig}). "
            "Rebuild it with: travel-assistant db init --force"
        ) from error
    return database


def _create_server_database(location: Location, console: Console) -> None:
    from locations import LocationError, create_postgres_database

    if location.backend != "postgresql":
        raise CliError(f"Create the database {location.shown()} first.", EXIT_USAGE)
    try:
        create_postgres_database(location)
    except LocationError as error:
        raise CliError(str(error), EXIT_USAGE) from error
    name = location.url.database if location.url is not None else location.shown()
    console.status(f"Created the PostgreSQL database {name}.")


def open_store(location: Location) -> ConversationStore:
    """Open where conversations are kept: the checkpoints, the registry and the turn locks."""
    from conversations.store import ConversationStore, ConversationStoreError
    from locations import LocationError

    try:
        return ConversationStore.open(location)
    except (LocationError, ConversationStoreError) as error:
        raise CliError(str(error), EXIT_USAGE) from error


def default_model_factory(
    model: str | None, max_tokens: int | None = None
) -> Mapping[str, BaseChatModel]:
    """Build the chat models from the environment, ``--model`` and ``--max-tokens``."""
    from assistants.models import ModelConfigError, ModelSettings, build_chat_models

    try:
        return build_chat_models(ModelSettings.from_env(model, max_tokens=max_tokens))
    except ModelConfigError as error:
        raise CliError(str(error), EXIT_USAGE) from error


def _positive_int(text: str) -> int:
    """Parse a positive whole number (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, not {text!r}")
    return value


def _positive_float(text: str) -> float:
    """Parse a positive number (an argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


def check_endpoint(model: str | None) -> None:
    """Fail early, naming the fix, when the model endpoint cannot be reached."""
    import openai

    from assistants.models import ModelSettings

    settings = ModelSettings.from_env(model)
    client = openai.OpenAI(
        api_key=settings.api_key or "not-needed",
        base_url=settings.base_url,
        timeout=5.0,
        max_retries=0,
    )
    where = settings.base_url or "the OpenAI API"
    try:
        client.models.list()
    except openai.AuthenticationError as error:
        raise CliError(f"{where} rejected the key: check OPENAI_API_KEY.", EXIT_USAGE) from error
    except openai.APIConnectionError as error:
        raise CliError(
            f"Cannot reach {where}: check OPENAI_BASE_URL and that the server is running "
            "(or pass --no-check).",
            EXIT_USAGE,
        ) from error
    except openai.APIStatusError:
        pass  # some servers do not list models; the chat itself will tell


# --- the chat ----------------------------------------------------------------------------


def canonical_passenger_id(raw: str) -> str:
    """Return a passenger id as the database writes it: ``3442587242`` -> ``3442 587242``."""
    collapsed = " ".join(raw.split())
    compact = collapsed.replace(" ", "")
    if compact.isdigit() and len(compact) == 10:
        return f"{compact[:4]} {compact[4:]}"
    return collapsed


# --- commands ------------------------------------------------------------------------------


@dataclass
class Overrides:
    """What tests inject: models, terminal input and output, and the console."""

    model_factory: ModelFactory | None = None
    pt_input: Any = None
    pt_output: Any = None
    console: Console | None = None
    check_endpoint: bool = True
    clock: Any = None


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


def _make_prompter(home: Path, passenger_id: str, overrides: Overrides) -> Prompter:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import DummyHistory, FileHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    if overrides.pt_input is None and not sys.stdin.isatty():
        # Piped input: read plain lines, so scripts can drive the chat.
        def read_line(message: str) -> str:
            raw = sys.stdin.buffer.readline()
            if not raw:
                raise EOFError
            # Bytes that are not UTF-8 become "?" rather than an exception.
            return raw.decode("utf-8", "replace").rstrip("\r\n")

        return Prompter(read_line, read_line)

    keys = KeyBindings()

    @keys.add("c-c")
    def _clear_or_leave(event: KeyPressEvent) -> None:
        # Ctrl-C clears a half-typed line; at an empty prompt it leaves.
        buffer = event.app.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    messages: PromptSession[str] = PromptSession(
        history=FileHistory(str(history_file(home, passenger_id))),
        key_bindings=keys,
        input=overrides.pt_input,
        output=overrides.pt_output,
    )
    # Approval answers and reasons are never kept: they are not messages to recall.
    answers: PromptSession[str] = PromptSession(
        history=DummyHistory(), input=overrides.pt_input, output=overrides.pt_output
    )
    return Prompter(lambda text: messages.prompt(text), lambda text: answers.prompt(text))


def _resume_options(args: argparse.Namespace) -> list[str]:
    """Return the options a resume command must repeat to find the same files.

    A URL keeps its form; a password in it is shown as ``***`` (see ``_password_note``).
    """
    options: list[str] = []
    if args.home or os.environ.get(HOME_ENV):
        options += ["--home", str(_home(args).absolute())]
    # A choice made by an environment variable is written out too: the command must work
    # from another shell, where the variable may not be set.
    for option, variable, given in (
        ("--db", DB_ENV, getattr(args, "db", None)),
        ("--conversations", CONVERSATIONS_ENV, getattr(args, "conversations", None)),
    ):
        value = given or os.environ.get(variable)
        if value:
            options += [option, _location(value, option if given else variable).for_command()]
    return options


def _password_note(args: argparse.Namespace) -> str:
    """Return what to say when an option on the command line holds a password, or ""."""
    named = [
        (option, variable)
        for option, variable, value in (
            ("--db", DB_ENV, getattr(args, "db", None)),
            ("--conversations", CONVERSATIONS_ENV, getattr(args, "conversations", None)),
        )
        if value and _location(value, option).has_password
    ]
    if not named:
        return ""
    options = " and ".join(option for option, _ in named)
    variables = " and ".join(f"${variable}" for _, variable in named)
    return (
        f"The password in {options} is shown as ***. Rather than typing it on the command "
        f"line, where other users of this machine can see it, set {variables} to the URL "
        "and leave the option out, or leave the password out of the URL and set $PGPASSWORD."
    )


def _open_chat_db(args: argparse.Namespace, console: Console, overrides: Overrides) -> Any:
    """Open the travel database; one named by --db (or the environment) must exist."""
    from sqlalchemy.exc import OperationalError

    from db.engine import Database
    from locations import database_missing

    location = _db_location(args)
    named = _db_named(args)
    build = (
        "Build it with: travel-assistant db init --db "
        f"{shlex.quote(location.for_command())} (or add --create-db to build it now)."
    )
    if named and not args.create_db:
        if location.path is not None and not location.path.exists():
            raise CliError(f"No travel database at {location.shown()}. {build}", EXIT_USAGE)
        if location.path is None:
            probe = Database.from_url(location.sqlalchemy_url())
            try:
                empty = not probe.has_schema()
            except OperationalError as error:
                if not database_missing(getattr(error, "orig", None) or error):
                    raise CliError(_server_problem(location, error), EXIT_USAGE) from error
                empty = True
            finally:
                probe.dispose()
            if empty:
                raise CliError(f"No travel database at {location.shown()}. {build}", EXIT_USAGE)
    return open_travel_db(
        location, console, clock=overrides.clock, create_database=bool(args.create_db)
    )


def cmd_chat(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant chat``."""
    passenger_id = canonical_passenger_id(args.passenger_id)
    if not passenger_id:
        raise CliError(
            "--passenger-id is empty. Pass your passenger id, e.g. '3442 587242'.", EXIT_USAGE
        )
    factory = overrides.model_factory or partial(default_model_factory, max_tokens=args.max_tokens)
    models = factory(args.model)  # fails here, before the first prompt, without an endpoint
    if overrides.model_factory is None and overrides.check_endpoint and not args.no_check:
        check_endpoint(args.model)
    conversations = _conversations_location(args)
    database = _open_chat_db(args, console, overrides)
    try:
        with open_store(conversations) as store:
            return _chat(args, console, overrides, passenger_id, models, database, store)
    finally:
        database.dispose()


def _read_reference_files(read: Callable[[], None]) -> None:
    """Run ``read`` (a policy load, an assistant's ``prepare``); a missing file stops here."""
    try:
        read()
    except (OSError, ValueError) as error:
        raise CliError(str(error), EXIT_ERROR) from error


def _prepared(assistant: TravelAssistant) -> TravelAssistant:
    """Return ``assistant`` with its reference files read; a missing one stops here."""
    _read_reference_files(assistant.prepare)
    return assistant


def _chat(
    args: argparse.Namespace,
    console: Console,
    overrides: Overrides,
    passenger_id: str,
    models: Any,
    database: Any,
    store: ConversationStore,
) -> int:
    from conversations.assistant import Thread, TravelAssistant
    from conversations.protocol import Conversations
    from terminal.chat import ChatSession

    registry = store.registry
    assistant = _prepared(TravelAssistant.build(models, store.saver, db=database))
    if not assistant.check_passenger(passenger_id):
        raise CliError(
            f"No passenger with id {passenger_id!r} in {_db_location(args).shown()}. "
            "Check the id on your ticket (it looks like '3442 587242').",
            EXIT_USAGE,
        )
    resumed = False
    if args.thread_id:
        record = registry.get(args.thread_id)
        if record is None:
            raise CliError(
                f"No saved session {args.thread_id!r}. List them with: "
                + sessions_command(_resume_options(args), passenger_id),
                EXIT_USAGE,
            )
        if record.passenger_id != passenger_id:
            raise CliError(
                f"Session {args.thread_id!r} belongs to another passenger; "
                "start a new one without --thread-id.",
                EXIT_USAGE,
            )
        thread = Thread(args.thread_id, passenger_id)
        resumed = True
    elif args.continue_latest and (latest := registry.list(passenger_id, limit=1)):
        thread = Thread(latest[0].thread_id, passenger_id)
        resumed = True
    else:
        if args.continue_latest:
            console.status("No saved conversation to continue: starting a new one.")
        thread = Thread(str(uuid.uuid4()), passenger_id)
    prompter = _make_prompter(_home(args), passenger_id, overrides)
    session = ChatSession(
        Conversations(assistant, registry, store.locks),
        thread,
        console,
        prompter,
        resume_options=_resume_options(args),
    )
    code = session.run(resumed)
    note = _password_note(args)
    if note and session.has_messages():
        console.status(note)
    return code


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
    return Conversations(assistant, store.registry, store.locks)


def _open_existing_store(args: argparse.Namespace) -> ConversationStore | None:
    """Open where conversations are kept, or return ``None`` when no file is there yet."""
    location = _conversations_location(args)
    if location.path is not None and not location.path.exists():
        return None
    return open_store(location)


def cmd_sessions(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant sessions`` (a table) and ``sessions delete ID``."""
    if getattr(args, "sessions_command", None) == "delete":
        return cmd_sessions_delete(args, console)
    passenger_id = canonical_passenger_id(args.passenger_id) if args.passenger_id else None
    store = _open_existing_store(args)
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


def cmd_sessions_delete(args: argparse.Namespace, console: Console) -> int:
    """Run ``travel-assistant sessions delete ID``.

    A conversation whose turn is running in another window is not deleted.
    """
    from conversations.store import ConversationBusyError, ConversationStoreError
    from terminal.chat import BUSY_WAIT_SECONDS

    store = _open_existing_store(args)
    missing = CliError(
        f"No saved session {args.thread_id!r}. List them with: "
        + sessions_command(_resume_options(args)),
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
        except ConversationBusyError as error:
            raise CliError(
                f"Session {args.thread_id} is busy: the assistant is answering in another "
                "window or terminal. Delete it when it has answered."
            ) from error
        except ConversationStoreError as error:
            raise CliError(str(error)) from error
    console.status(f"Deleted session {args.thread_id} (passenger {record.passenger_id}).")
    return EXIT_OK


def cmd_db_init(args: argparse.Namespace, console: Console) -> int:
    """Run ``travel-assistant db init``."""
    from db.engine import Database
    from db.generate import MAX_SCALE, build_database

    if not 1 <= args.scale <= MAX_SCALE:
        raise CliError(f"--scale must be between 1 and {MAX_SCALE}.", EXIT_USAGE)
    location = _db_location(args)
    if location.path is None:
        return _db_init_server(args, console, location)
    path = location.path
    if path.exists() and not args.force:
        raise CliError(f"{path} already exists. Pass --force to rebuild it.", EXIT_USAGE)
    if path.is_dir():
        raise CliError(f"{path} is a folder, not a database file.", EXIT_USAGE)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and swap it in, so a failed build loses nothing.
    partial = path.with_name(path.name + ".building")
    partial.unlink(missing_ok=True)
    console.status(
        f"Building the travel database at {path} (scale {args.scale}, seed {args.seed})..."
    )
    database = Database.from_url(str(partial))
    try:
        report = build_database(database, seed=args.seed, scale=args.scale)
    finally:
        database.dispose()
    partial.replace(path)
    _report_build(console, report)
    return EXIT_OK


def _db_init_server(args: argparse.Namespace, console: Console, location: Location) -> int:
    """Run ``db init`` on a server database (PostgreSQL): create it when missing, then build.

    The tables are dropped and made again in place, so ``--force`` is needed when the
    database already holds a travel database.
    """
    from sqlalchemy.exc import OperationalError

    from db.engine import Database
    from db.generate import build_database
    from locations import database_missing

    database = Database.from_url(location.sqlalchemy_url())
    try:
        try:
            built = database.has_schema()
        except OperationalError as error:
            if not database_missing(getattr(error, "orig", None) or error):
                raise CliError(_server_problem(location, error), EXIT_USAGE) from error
            database.dispose()
            _create_server_database(location, console)
            built = False
        if built and not args.force:
            raise CliError(
                f"{location.shown()} already holds a travel database. Pass --force to rebuild "
                "it (the bookings made in it are lost).",
                EXIT_USAGE,
            )
        console.status(
            f"Building the travel database at {location.shown()} "
            f"(scale {args.scale}, seed {args.seed})..."
        )
        try:
            report = build_database(database, seed=args.seed, scale=args.scale)
        except OperationalError as error:
            raise CliError(_server_problem(location, error)) from error
    finally:
        database.dispose()
    _report_build(console, report)
    return EXIT_OK


def _report_build(console: Console, report: Any) -> None:
    counts = ", ".join(
        f"{n} {t}"
        for t, n in report.counts.items()
        if t in ("flights", "tickets", "ticket_flights")
    )
    console.status(f"Done in {report.seconds:.1f} s: {counts}.")


class _EvalProgress:
    """What ``eval`` shows while it runs: one line per trial, and on a terminal a bar.

    The bar advances per trial and shows the scenario and customer message under way and
    the pass rate so far; a real model takes minutes per scenario, so silence would look
    like a hang.
    """

    def __init__(self, console: Console, total: int) -> None:
        from rich.console import Console as RichConsole
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = console
        self.total = total
        self.finished = self.passed = 0
        self.current = ""
        terminal = RichConsole(file=console.err, no_color=not console.color)
        self.live = terminal.is_terminal
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=terminal,
            disable=not self.live,
        )
        self.task = self.bar.add_task("eval", total=total, rate="")

    def __enter__(self) -> _EvalProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def _line(self, text: str) -> None:
        if self.live:
            self.bar.console.print(text, markup=False, highlight=False, style="dim")
        else:
            self.console.status(text)

    def begin(self, scenario: str, trial: int) -> None:
        """A trial starts."""
        self.current = f"{scenario} trial {trial}"
        self.bar.update(self.task, description=self.current)
        if not self.live:
            self._line(f"{self.current}: running ({self.finished + 1} of {self.total})")

    def turn(self, index: int) -> None:
        """The customer sends message ``index`` (from 0) of the current trial."""
        self.bar.update(self.task, description=f"{self.current}, message {index + 1}")

    def end(self, passed: bool, verdict: str) -> None:
        """The current trial ended with ``verdict``."""
        self.finished += 1
        self.passed += passed
        rate = f"pass {self.passed}/{self.finished} ({self.passed / self.finished:.0%})"
        self.bar.update(self.task, advance=1, rate=rate)
        self._line(f"{self.current}: {verdict}")


def _open_records(path: Path | None) -> TextIO | None:
    if path is None:
        return None
    try:
        path.expanduser().parent.mkdir(parents=True, exist_ok=True)
        return path.expanduser().open("a", encoding="utf-8")
    except OSError as error:
        raise CliError(f"Cannot write the trial records to {path}: {error}.", EXIT_USAGE) from error


@contextmanager
def _eval_template(server: str | None, folder: Path) -> Iterator[Path | str]:
    """Yield where eval builds its scenario database: a file, or a temporary database."""
    if server is None:
        yield folder / "template.sqlite"
        return
    from db.copies import temporary_database

    with temporary_database(server, "eval_template") as url:
        yield url


def cmd_eval(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant eval``: the scenarios against a real model.

    Each trial has a time limit; a provider error or the time limit ends that trial as
    an error and the suite goes on. With ``--jsonl`` every trial is appended to a file
    as soon as it ends, so nothing is lost when the run is stopped.
    """
    import json
    import statistics
    import tempfile
    import time
    from datetime import UTC, datetime

    from langchain_core.language_models import BaseChatModel

    import evaluation
    from db.engine import Database
    from db.generate import build_database
    from tools.policies import PolicyIndex

    if args.trials < 1:
        raise CliError("--trials must be at least 1.", EXIT_USAGE)
    try:
        scenarios = evaluation.select_scenarios(
            evaluation.load_scenarios(), args.scenario or (), args.category or ()
        )
    except evaluation.ScenarioError as error:
        raise CliError(str(error), EXIT_USAGE) from error
    # The trials need the scenarios' own data, so each runs on a fresh copy of it: in
    # temporary SQLite files, or, when --db names a PostgreSQL database, in temporary
    # databases on that server (made from a template built for the run, dropped after).
    server: str | None = None
    if _db_named(args):
        named = _db_location(args)
        named.check_driver()  # a URL without its driver is refused, as everywhere
        if named.backend == "postgresql":
            server = named.sqlalchemy_url()
        where = "on its PostgreSQL server" if server else "in temporary files"
        console.status(
            f"eval runs every trial on its own copy of the scenario database, {where}; "
            f"{named.shown()} itself is neither read nor changed."
        )
    if args.list:
        for scenario in scenarios:
            console.say(f"{scenario.id:<40} {scenario.category:<12} {scenario.description}")
        return EXIT_OK
    factory = overrides.model_factory or partial(default_model_factory, max_tokens=args.max_tokens)
    models = factory(args.model)  # names what to set when no endpoint is configured
    # Every trial's crew reads the default policy: a missing file stops the run here.
    _read_reference_files(PolicyIndex().load)
    customer_models = factory(args.customer_model or args.model)
    customer_model = (
        customer_models
        if isinstance(customer_models, BaseChatModel)
        else customer_models["primary_assistant"]
    )
    model_name = args.model or os.environ.get("TRAVEL_ASSISTANT_MODEL") or "gpt-4o-mini"
    price = evaluation.PRICES_PER_MILLION.get(model_name)
    if args.price_in is not None and args.price_out is not None:
        price = (args.price_in, args.price_out)
    records = _open_records(args.jsonl)
    run_context = {
        "run": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": model_name,
        "customer_model": args.customer_model or model_name,
        "max_tokens": args.max_tokens,
    }
    by_category: dict[str, dict[str, list[bool]]] = {}
    latencies: list[float] = []
    errors = 0
    spent = evaluation.Usage(0, 0)
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            _eval_template(server, Path(folder)) as template,
            _EvalProgress(console, len(scenarios) * args.trials) as progress,
        ):
            seed_db = (
                Database.from_url(str(template), clock=overrides.clock)
                if overrides.clock
                else Database.from_url(str(template))
            )
            build_database(seed_db, seed=evaluation.SCENARIO_SEED)
            clock = seed_db.clock
            seed_db.dispose()
            for scenario in scenarios:
                for trial in range(1, args.trials + 1):
                    progress.begin(scenario.id, trial)
                    started = time.monotonic()
                    work = Path(folder) / f"{scenario.id}-{trial}"
                    work.mkdir()
                    try:
                        result = evaluation.run_scenario(
                            scenario,
                            template,
                            clock,
                            work,
                            lambda _db: models,
                            customer=evaluation.simulated_customer(scenario, customer_model),
                            seconds=args.time_limit,
                            on_turn=progress.turn,
                        )
                    except Exception as error:  # a bug in one trial must not lose the others
                        if args.debug:
                            traceback.print_exc()
                        result = evaluation.ScenarioResult(
                            scenario,
                            (),
                            evaluation.Transcript(),
                            error=f"{type(error).__name__}: {error}",
                        )
                    errors += result.error is not None
                    by_category.setdefault(scenario.category, {}).setdefault(
                        scenario.id, []
                    ).append(result.passed)
                    latencies += result.transcript.latencies
                    used = evaluation.Usage.of(result.transcript.messages)
                    spent = evaluation.Usage(
                        spent.input_tokens + used.input_tokens,
                        spent.output_tokens + used.output_tokens,
                    )
                    if records is not None:
                        record = evaluation.trial_record(
                            result,
                            trial,
                            **run_context,
                            seconds=round(time.monotonic() - started, 3),
                        )
                        records.write(json.dumps(record, ensure_ascii=False) + "\n")
                        records.flush()
                    verdict = "pass" if result.passed else "FAIL: " + "; ".join(result.reasons)
                    progress.end(result.passed, verdict)
    finally:
        if records is not None:
            records.close()
    for line in evaluation.summarise(by_category, args.trials):
        console.say(line)
    cost = spent.cost(price)
    estimate = f"USD {cost:.4f}" if cost is not None else "n/a (pass --price-in/--price-out)"
    console.say(
        f"tokens: {spent.input_tokens} in, {spent.output_tokens} out; cost estimate: {estimate}"
    )
    if latencies:
        console.say(
            f"latency per customer message: median {statistics.median(latencies):.2f} s, "
            f"p95 {evaluation.percentile(latencies, 0.95):.2f} s"
        )
    if args.jsonl:
        console.status(f"Trial records appended to {args.jsonl}.")
    if errors:
        console.error(
            f"{errors} of {len(scenarios) * args.trials} trials ended in an error (see above); "
            "they count as failed."
        )
        return EXIT_ERROR
    return EXIT_OK


def cmd_graph(console: Console) -> int:
    """Run ``travel-assistant graph``."""
    from graph import draw_mermaid

    console.say(draw_mermaid())
    return EXIT_OK


# --- the HTTP service (server/) ------------------------------------------------------------


def _add_server_commands(commands: Any) -> None:
    """Add ``serve`` and ``token``."""
    serve = commands.add_parser("serve", help="run the HTTP API and the web chat")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    serve.add_argument("--model", help="chat model name (default: as for chat)")
    serve.add_argument(
        "--create-db",
        action="store_true",
        help="build the travel database named by --db when it does not exist",
    )
    serve.add_argument(
        "--no-check", action="store_true", help="skip the check that the model endpoint answers"
    )
    token = commands.add_parser("token", help="issue a passenger's access token for the service")
    token.add_argument("--passenger-id", required=True, help='e.g. "3442 587242"')
    token.add_argument(
        "--hours", type=float, default=24.0, help="how long the token is valid (default 24)"
    )


def _signer(args: argparse.Namespace) -> Any:
    from server.auth import SecretError, TokenSigner, load_secret

    try:
        return TokenSigner(load_secret(_home(args)))
    except SecretError as error:
        raise CliError(str(error), EXIT_USAGE) from error


def cmd_serve(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant serve``: the HTTP API and the web chat, until Ctrl-C."""
    from conversations.assistant import TravelAssistant
    from server.app import create_app, serve
    from server.service import ConversationService

    if not 1 <= args.port <= 65535:
        raise CliError("--port must be between 1 and 65535.", EXIT_USAGE)
    factory = overrides.model_factory or default_model_factory
    models = factory(args.model)
    if overrides.model_factory is None and overrides.check_endpoint and not args.no_check:
        check_endpoint(args.model)
    signer = _signer(args)
    conversations = _conversations_location(args)
    database = _open_chat_db(args, console, overrides)
    try:
        with open_store(conversations) as store:
            # Several workers (here or on other machines) over one PostgreSQL store take
            # turns on a conversation through its lock.
            service = ConversationService.over_store(
                _prepared(TravelAssistant.build(models, store.saver, db=database)), store
            )
            if args.host not in ("127.0.0.1", "localhost", "::1"):
                console.status(
                    "Listening beyond this machine: put the service behind HTTPS, since "
                    "tokens travel in every request."
                )
            console.status(
                f"The web chat: http://{args.host}:{args.port}/ (Ctrl-C stops). "
                "Get a token with: travel-assistant token --passenger-id ID"
            )
            serve(create_app(service, signer), args.host, args.port)
    finally:
        database.dispose()
    return EXIT_OK


def cmd_token(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant token``: print a passenger's token on stdout."""
    from datetime import timedelta

    from db.passengers import passenger_exists
    from server.auth import MAX_LIFETIME

    passenger_id = canonical_passenger_id(args.passenger_id)
    if not passenger_id:
        raise CliError("--passenger-id is empty, e.g. --passenger-id '3442 587242'.", EXIT_USAGE)
    lifetime = timedelta(hours=args.hours)
    if not timedelta(minutes=1) <= lifetime <= MAX_LIFETIME:
        raise CliError(
            f"--hours must be between 1/60 and {MAX_LIFETIME.days * 24} hours.", EXIT_USAGE
        )
    location = _db_location(args)
    # A database named by --db (or the environment) must exist, as for chat: a token for
    # a database built on the spot by a typo would name a passenger nobody booked.
    named = _db_named(args)
    if named and location.path is not None and not location.path.exists():
        raise CliError(
            f"No travel database at {location.shown()}. Build it with: travel-assistant db "
            f"init --db {shlex.quote(location.for_command())}",
            EXIT_USAGE,
        )
    database = open_travel_db(location, console, build_if_missing=not named, clock=overrides.clock)
    try:
        with database.session() as session:
            known = passenger_exists(session, passenger_id)
    finally:
        database.dispose()
    if not known:
        raise CliError(
            f"No passenger with id {passenger_id!r} in {location.shown()}. "
            "Check the id on the ticket (it looks like '3442 587242').",
            EXIT_USAGE,
        )
    token = _signer(args).issue(passenger_id, lifetime)
    console.say(token)
    console.status(
        f"Token for passenger {passenger_id}, valid for {args.hours:g} hours. Send it as "
        "'Authorization: Bearer <token>', paste it on the web chat page, or open "
        "http://127.0.0.1:8000/#token=<token>."
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None, overrides: Overrides | None = None) -> int:
    """Run the program with ``argv``; return the exit code."""
    overrides = overrides or Overrides()
    console = overrides.console or Console(
        color=sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    )
    parser = build_parser()
    args = parser.parse_args(argv)
    env_file = Path.cwd() / ".env"
    if env_file.is_file():
        from dotenv import load_dotenv

        load_dotenv(env_file, override=False)
    try:
        if args.command == "chat":
            return cmd_chat(args, console, overrides)
        if args.command == "sessions":
            return cmd_sessions(args, console, overrides)
        if args.command == "db" and args.db_command == "init":
            return cmd_db_init(args, console)
        if args.command == "graph":
            return cmd_graph(console)
        if args.command == "eval":
            return cmd_eval(args, console, overrides)
        if args.command == "serve":
            return cmd_serve(args, console, overrides)
        if args.command == "token":
            return cmd_token(args, console, overrides)
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    except CliError as error:
        if args.debug:
            traceback.print_exc()
        console.error(str(error))
        return error.code
    except KeyboardInterrupt:
        console.status("Interrupted.")
        return 130
    except Exception as error:
        from db.errors import TravelError

        if args.debug:
            traceback.print_exc()
        if isinstance(error, TravelError):
            console.error(str(error))
            return EXIT_ERROR
        console.error(f"{type(error).__name__}: {error} (run with --debug for the traceback)")
        return EXIT_ERROR


def run() -> None:
    """Console-script entry point."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
