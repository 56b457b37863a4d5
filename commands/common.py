"""What every command shares: exit codes, expected errors, where the databases are, the model."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from terminal import Console

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

    from assistants.models import ModelSettings
    from assistants.tool_support import ToolSupport
    from conversations.assistant import TravelAssistant
    from conversations.store import ConversationStore
    from db.clock import Clock
    from db.engine import Database
    from locations import Location
    from settings import Settings


EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
# The company policy in the reference folder (``tools.policies.POLICY_FILE_NAME``).
POLICY_FILE_NAME = "policy.md"


# Builds the chat models: the settings' model (``None``), or another one (eval's customer).
ModelFactory = Callable[[str | None], "Mapping[str, BaseChatModel] | BaseChatModel"]


class CliError(Exception):
    """An expected failure: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        """Carry ``message`` and the exit ``code``."""
        super().__init__(message)
        self.code = code


def said(error: Exception, debug: bool) -> tuple[str, int]:
    """Return the line a command that stops on ``error`` says, and its exit code.

    An expected failure says its own message; anything else its type too. ``debug``
    prints the traceback first.
    """
    from db.errors import TravelError
    from settings import SettingsError

    if debug:
        traceback.print_exception(error)
    if isinstance(error, CliError):
        return str(error), error.code
    if isinstance(error, SettingsError):
        return str(error), EXIT_USAGE
    if isinstance(error, TravelError):
        return str(error), EXIT_ERROR
    return f"{type(error).__name__}: {error} (run with --debug for the traceback)", EXIT_ERROR


def agreed_check_above(settings: Settings, store: ConversationStore) -> int | None:
    """Return the second approval's amount every process on ``store`` uses.

    The store keeps it (``Desk.agree_check_above``): a process started without the
    setting uses the kept one; one started with another amount stops here, saying both.
    """
    from conversations.desk import CheckAmountDisagreesError
    from db.values import fmt_money

    try:
        return store.desk.agree_check_above(settings.second_approval_cents())
    except CheckAmountDisagreesError as error:
        raise CliError(
            f"These conversations check actions above {fmt_money(error.stored)}, and every "
            f"process working on them must use the same amount; this one was started with "
            f"{fmt_money(error.given)} (TRAVEL_ASSISTANT_SECOND_APPROVAL_ABOVE). Start it "
            "without the setting, or with the same amount; to change it for all, stop them "
            "and run: travel-assistant desk second-approval AMOUNT (or off).",
            EXIT_USAGE,
        ) from None


def server_problem(location: Location, error: Exception) -> str:
    """Say why the server database at ``location`` cannot be used (from a SQLAlchemy error)."""
    from locations import describe_connect_error

    return describe_connect_error(location, getattr(error, "orig", None) or error)


def open_travel_db(
    location: Location,
    console: Console,
    *,
    build_if_missing: bool = True,
    create_database: bool = False,
    clock: Clock | None = None,
    data_dir: Path | None = None,
) -> Database:
    """Open the travel database at a path or URL, building it on first use.

    ``create_database`` also creates a PostgreSQL database the server does not have;
    ``data_dir`` is the folder of its reference files (``Settings.data_dir``).
    """
    from sqlalchemy.exc import DatabaseError, OperationalError

    from db.engine import Database
    from locations import database_missing

    shown = location.shown()
    if location.path is not None:
        if location.path.is_dir():
            raise CliError(
                f"{location.path} is a folder, not a database file. Pass a file path with --db."
            )
        if build_if_missing:
            location.path.parent.mkdir(parents=True, exist_ok=True)
    url = location.sqlalchemy_url()
    database = (
        Database.from_url(url, clock=clock, data_dir=data_dir)
        if clock
        else Database.from_url(url, data_dir=data_dir)
    )
    try:
        try:
            has_schema = database.has_schema()
        except OperationalError as error:
            missing = database_missing(getattr(error, "orig", None) or error)
            if location.path is not None or not (missing and create_database):
                raise
            create_server_database(location, console)
            has_schema = False
        if not has_schema:
            if not build_if_missing:
                raise CliError(
                    f"No travel database at {shown}. Build it with: travel-assistant db init"
                )
            console.status(f"Building the travel database at {shown} (first use; a few seconds)...")
            from db.generate import ensure_database  # slow to import: only to build

            ensure_database(database)
    except OperationalError as error:
        if location.path is None:
            database.dispose()
            raise CliError(server_problem(location, error), EXIT_USAGE) from error
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


def create_server_database(location: Location, console: Console) -> None:
    """Create the PostgreSQL database ``location`` names (``--create-db``)."""
    from locations import LocationError, create_postgres_database

    if location.backend != "postgresql":
        raise CliError(f"Create the database {location.shown()} first.", EXIT_USAGE)
    try:
        create_postgres_database(location)
    except LocationError as error:
        raise CliError(str(error), EXIT_USAGE) from error
    name = location.url.database if location.url is not None else location.shown()
    console.status(f"Created the PostgreSQL database {name}.")


def open_store(location: Location, pool_timeout: float | None = None) -> ConversationStore:
    """Open where conversations are kept: the checkpoints, the registry and the turn locks.

    ``pool_timeout``: ``serve --pool-timeout`` (see ``ConversationStore.open``).
    """
    from conversations.store import ConversationStore, ConversationStoreError
    from locations import LocationError

    try:
        return ConversationStore.open(location, pool_timeout=pool_timeout)
    except (LocationError, ConversationStoreError) as error:
        raise CliError(str(error), EXIT_USAGE) from error


def default_model_factory(
    settings: Settings, model: str | None = None
) -> Mapping[str, BaseChatModel]:
    """Build the chat models of the settings, or of another ``model`` (eval's customer).

    Raises:
        CliError: No model endpoint is configured (a usage error naming what to set).
    """
    from assistants.models import ModelConfigError, build_chat_models

    models = settings.models
    try:
        return build_chat_models(models if model is None else replace(models, model=model))
    except ModelConfigError as error:
        raise CliError(str(error), EXIT_USAGE) from error


def check_endpoint(endpoint: ModelSettings) -> ToolSupport:
    """Fail early, naming the fix, when the model endpoint cannot be reached or drops tools.

    Returns what the tool check found (``assistants.tool_support``): the server honours
    tools, OpenAI's API is assumed to, or the server could not tell.
    """
    import openai

    from assistants.tool_support import ToolsUnsupportedError, check_tool_support

    client = openai.OpenAI(
        api_key=endpoint.api_key or "not-needed",
        base_url=endpoint.base_url,
        timeout=5.0,
        max_retries=0,
    )
    where = endpoint.base_url or "the OpenAI API"
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
    try:
        return check_tool_support(endpoint)
    except ToolsUnsupportedError as error:
        raise CliError(str(error), EXIT_USAGE) from error


def check_port(host: str, port: int) -> None:
    """Refuse a port another program listens on, naming the fix, before anything loads.

    Bound and let go at once, as the server binds it (``SO_REUSEADDR``), so a port left
    in TIME_WAIT by a server just stopped is not refused.
    """
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise CliError(f"Cannot listen on {host}: {error.strerror}.", EXIT_USAGE) from error
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise CliError(
                    f"port {port} is in use: choose another with --port", EXIT_USAGE
                ) from error
            raise CliError(
                f"Cannot listen on {host} port {port}: {error.strerror}.", EXIT_USAGE
            ) from error


def canonical_passenger_id(raw: str) -> str:
    """Return a passenger id as the database writes it: ``3442587242`` -> ``3442 587242``."""
    collapsed = " ".join(raw.split())
    compact = collapsed.replace(" ", "")
    if compact.isdigit() and len(compact) == 10:
        return f"{compact[:4]} {compact[4:]}"
    return collapsed


@dataclass
class Overrides:
    """What tests inject: models, terminal input and output, and the console."""

    model_factory: ModelFactory | None = None
    pt_input: Input | None = None
    pt_output: Output | None = None
    console: Console | None = None
    check_endpoint: bool = True
    clock: Clock | None = None


def resume_options(settings: Settings) -> list[str]:
    """Return the options a resume command must repeat to find the same files.

    A choice made by an environment variable is written out too: the command must work
    from another shell, where the variable may not be set. A URL keeps its form; a
    password in it is shown as ``***`` (see ``password_note``).
    """
    options = ["--home", str(settings.home.absolute())] if settings.home_given else []
    if settings.db:
        options += ["--db", settings.db_location.for_command()]
    if settings.conversations:
        options += ["--conversations", settings.conversations_location.for_command()]
    return options


def password_note(settings: Settings) -> str:
    """Return what to say when an option on the command line holds a password, or ""."""
    from settings import CONVERSATIONS_ENV, DB_ENV

    named = [
        (f"--{name}", variable)
        for name, variable, location in (
            ("db", DB_ENV, settings.db_location),
            ("conversations", CONVERSATIONS_ENV, settings.conversations_location),
        )
        if name in settings.flags and location.has_password
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


def read_reference_files(read: Callable[[], None]) -> None:
    """Run ``read`` (a policy load, an assistant's ``prepare``); a missing file stops here."""
    try:
        read()
    except (OSError, ValueError) as error:
        raise CliError(str(error), EXIT_ERROR) from error


def check_policy_file(settings: Settings) -> None:
    """Refuse a reference folder (``TRAVEL_ASSISTANT_DATA``) that holds no company policy.

    The policy index says the same when it reads the file (``tools.policies``); this is
    its file check alone, which ``serve`` makes before it listens, without importing it.
    """
    if settings.data_dir is None:
        return  # the packaged policy
    path = settings.data_dir / POLICY_FILE_NAME
    if not path.is_file():
        raise CliError(
            f"The company policy file {path} does not exist; restore data/{POLICY_FILE_NAME} "
            "or point TRAVEL_ASSISTANT_DATA at a folder that holds it.",
            EXIT_ERROR,
        )


def prepared(assistant: TravelAssistant) -> TravelAssistant:
    """Return ``assistant`` with its reference files read; a missing one stops here."""
    read_reference_files(assistant.prepare)
    return assistant


def open_existing_store(settings: Settings) -> ConversationStore | None:
    """Open where conversations are kept, or return ``None`` when no file is there yet."""
    location = settings.conversations_location
    if location.path is not None and not location.path.exists():
        return None
    return open_store(location)
