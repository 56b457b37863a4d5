"""The terminal program: ``travel-assistant chat`` and its companion commands.

Commands::

    travel-assistant chat --passenger-id ID [--thread-id ID] [--model NAME] [--db PATH]
    travel-assistant sessions [--passenger-id ID]
    travel-assistant db init [--scale N] [--seed N] [--db PATH] [--force]
    travel-assistant graph

Only the assistant's words go to stdout; status lines, warnings and errors go to stderr.
Expected failures are one line naming the fix and a non-zero exit code; ``--debug``
brings the traceback back.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

# LangChain is imported where it is used, so that --help and argument errors are fast.
if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AnyMessage

EXIT_WORDS = frozenset({"exit", "quit", "q", ":q", "/exit", "/quit"})
MAX_MESSAGE_CHARS = 4000
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

ModelFactory = Callable[[str | None], "Mapping[str, BaseChatModel] | BaseChatModel"]

HELP_TEXT = """\
Talk to the assistant in your own words. Commands:
  /help       this help
  /new        start a new conversation (the current one stays saved)
  /sessions   list your saved conversations
  /history    show this conversation so far
  /exit       leave (so do exit, quit, q, Ctrl-D and Ctrl-C); the conversation is kept"""

SPECIALIST_LABELS = {
    "primary_assistant": "",
    "update_flight": "flights",
    "book_car_rental": "car rental",
    "book_hotel": "hotels",
    "book_excursion": "excursions",
}


class CliError(Exception):
    """An expected failure: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        """Carry ``message`` and the exit ``code``."""
        super().__init__(message)
        self.code = code


@dataclass
class Console:
    """Where the program writes: stdout for the assistant, stderr for the rest."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    color: bool = False

    def _paint(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def say(self, text: str = "", end: str = "\n") -> None:
        """Write the assistant's words."""
        self.out.write(text + end)
        self.out.flush()

    def status(self, text: str) -> None:
        """Write a discreet status line."""
        self.err.write(self._paint("2", text) + "\n")
        self.err.flush()

    def error(self, text: str) -> None:
        """Write one red error line."""
        self.err.write(self._paint("31", f"error: {text}") + "\n")
        self.err.flush()

    def label(self, assistant: str) -> str:
        """Return the prefix of an assistant's reply, naming a specialist discreetly."""
        specialist = SPECIALIST_LABELS.get(assistant, assistant)
        suffix = f" ({specialist})" if specialist else ""
        return self._paint("1;36", "assistant") + self._paint("2", suffix) + "> "


# --- argument parsing --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="travel-assistant",
        description="Meridian Travel's customer-service assistant in your terminal.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser.add_argument(
        "--home",
        type=Path,
        help="folder of the travel database and saved sessions "
        "(default: $TRAVEL_ASSISTANT_HOME or ~/.local/share/travel-assistant)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser("chat", help="talk to the assistant (the main job)")
    chat.add_argument("--passenger-id", required=True, help='your passenger id, e.g. "3442 587242"')
    chat.add_argument("--thread-id", help="resume a saved conversation")
    chat.add_argument(
        "--model", help="chat model name (default: $TRAVEL_ASSISTANT_MODEL or gpt-4o-mini)"
    )
    chat.add_argument(
        "--db", type=Path, help="travel database file (default: <home>/travel.sqlite)"
    )
    chat.add_argument(
        "--no-check", action="store_true", help="skip the check that the model endpoint answers"
    )

    sessions = commands.add_parser("sessions", help="list saved conversations")
    sessions.add_argument("--passenger-id", help="only this passenger's conversations")
    sessions.add_argument("--db", type=Path, help="travel database file")

    db = commands.add_parser("db", help="manage the travel database")
    db_commands = db.add_subparsers(dest="db_command", metavar="DB_COMMAND")
    init = db_commands.add_parser("init", help="(re)build the travel database")
    init.add_argument("--db", type=Path, help="database file (default: <home>/travel.sqlite)")
    init.add_argument(
        "--scale", type=int, default=1, help="size of the generated schedule (1 to 25)"
    )
    init.add_argument("--seed", type=int, default=42, help="random seed (same seed, same data)")
    init.add_argument("--force", action="store_true", help="replace an existing database")

    commands.add_parser("graph", help="print the assistant graph as Mermaid")

    evaluate = commands.add_parser(
        "eval", help="run the scenario suite against a real model (needs a model endpoint)"
    )
    evaluate.add_argument("--model", help="the assistant's model (default: as for chat)")
    evaluate.add_argument(
        "--customer-model", help="the simulated customer's model (default: --model)"
    )
    evaluate.add_argument("--trials", type=int, default=1, help="runs per scenario, for pass^k")
    evaluate.add_argument("--scenario", action="append", help="only this scenario id (repeatable)")
    evaluate.add_argument("--price-in", type=float, help="USD per million input tokens")
    evaluate.add_argument("--price-out", type=float, help="USD per million output tokens")
    return parser


# --- paths and resources -------------------------------------------------------------------


def _home(args: argparse.Namespace) -> Path:
    from db.engine import app_home

    home: Path = args.home.expanduser() if args.home else app_home()
    return home


def _db_path(args: argparse.Namespace) -> Path:
    if getattr(args, "db", None):
        path: Path = args.db.expanduser()
        return path
    env = os.environ.get("TRAVEL_ASSISTANT_DB")
    return Path(env).expanduser() if env else _home(args) / "travel.sqlite"


def _sessions_path(args: argparse.Namespace) -> Path:
    return _home(args) / "sessions.sqlite"


def open_travel_db(
    path: Path, console: Console, *, build_if_missing: bool = True, clock: Any = None
) -> Any:
    """Open the travel database at ``path``, building it on first use."""
    from sqlalchemy.exc import DatabaseError

    from db.engine import Database
    from db.generate import ensure_database

    if path.exists() and path.is_dir():
        raise CliError(f"{path} is a folder, not a database file. Pass a file path with --db.")
    if build_if_missing:
        path.parent.mkdir(parents=True, exist_ok=True)
    database = Database.from_url(str(path), clock=clock) if clock else Database.from_url(str(path))
    try:
        if not database.has_schema():
            if not build_if_missing:
                raise CliError(
                    f"No travel database at {path}. Build it with: travel-assistant db init"
                )
            console.status(f"Building the travel database at {path} (first use; a few seconds)...")
            ensure_database(database)
    except DatabaseError as error:
        raise CliError(
            f"{path} cannot be read as a travel database ({error.orig}). "
            "Rebuild it with: travel-assistant db init --force"
        ) from error
    return database


def open_checkpointer(path: Path) -> tuple[Any, Any]:
    """Open the SQLite checkpoint store and the session registry at ``path``."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from db.sessions import SessionRegistry

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        connection = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(connection)
        saver.setup()
        registry = SessionRegistry(connection)
    except sqlite3.DatabaseError as error:
        raise CliError(
            f"The session store {path} cannot be read ({error}). Move it aside to start afresh."
        ) from error
    return saver, registry


def default_model_factory(model: str | None) -> Mapping[str, BaseChatModel]:
    """Build the chat models from the environment and ``--model``."""
    from assistants.models import ModelConfigError, ModelSettings, build_chat_models

    settings = ModelSettings.from_env(model)
    try:
        return build_chat_models(settings)
    except ModelConfigError as error:
        raise CliError(str(error), EXIT_USAGE) from error


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


def _clean(text: str) -> str:
    """Drop bytes that are not valid UTF-8 (they arrive as surrogates) and outer blanks."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\ufffd", "?").strip()


class ChatSession:
    """One interactive conversation in the terminal."""

    def __init__(
        self,
        assistant: Any,
        thread: Any,
        registry: Any,
        console: Console,
        prompt: Callable[[str], str],
        *,
        db: Any,
    ) -> None:
        """Drive ``assistant`` on ``thread``; ``prompt`` reads one line (raises EOFError)."""
        self.assistant = assistant
        self.thread = thread
        self.registry = registry
        self.console = console
        self.prompt = prompt
        self.db = db

    # The conversation loop -------------------------------------------------------------

    def run(self, resumed: bool) -> int:
        """Talk until the customer leaves; return the exit code."""
        if resumed:
            self.show_last_exchange()
            self.ask_pending_approvals()
        else:
            self.console.status(
                f"Session {self.thread.thread_id} for passenger {self.thread.passenger_id}. "
                "Type /help for commands, exit to leave."
            )
        while True:
            try:
                text = _clean(self.prompt("you> "))
            except (EOFError, KeyboardInterrupt):
                return self.leave()
            if not text:
                continue
            if text.lower() in EXIT_WORDS:
                return self.leave()
            if text.startswith("/"):
                if self.command(text):
                    continue
                return self.leave()
            if len(text) > MAX_MESSAGE_CHARS:
                self.console.error(
                    f"Your message is {len(text)} characters long; "
                    f"the limit is {MAX_MESSAGE_CHARS}. Please shorten it "
                    "(it is kept in your input history: press Up)."
                )
                continue
            self.registry.touch(
                self.thread.thread_id, self.thread.passenger_id, self.db.clock(), text
            )
            self.turn(partial(self.assistant.send, self.thread, text))
            self.ask_pending_approvals()

    def leave(self) -> int:
        """Say how to come back, and leave."""
        self.console.status(
            "Conversation saved. Resume it with: travel-assistant chat "
            f"--passenger-id '{self.thread.passenger_id}' --thread-id {self.thread.thread_id}"
        )
        return EXIT_OK

    def command(self, text: str) -> bool:
        """Run a slash command; return ``False`` when the customer leaves."""
        from graph import Thread

        name = text.split()[0].lower()
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            self.console.status(HELP_TEXT)
        elif name == "/new":
            self.thread = Thread(str(uuid.uuid4()), self.thread.passenger_id)
            self.console.status(f"New conversation {self.thread.thread_id}.")
        elif name == "/sessions":
            for line in format_sessions(self.registry.list(self.thread.passenger_id), None):
                self.console.status(line)
        elif name == "/history":
            for message in self.assistant.messages(self.thread):
                self.show_message(message)
        else:
            self.console.error(f"Unknown command {name}. Type /help for the list.")
        return True

    # Turns and approvals ------------------------------------------------------------------

    def turn(self, run: Callable[[], Iterable[Any]]) -> None:
        """Stream one run of the graph to the terminal."""
        from langchain_core.messages import AIMessage, ToolMessage

        from graph import MessageEvent, ModelProviderError, TokenEvent

        streaming_id: str | None = None
        streamed: set[str] = set()
        try:
            for event in run():
                if isinstance(event, TokenEvent):
                    if event.message_id != streaming_id:
                        if streaming_id is not None:
                            self.console.say()
                        self.console.say(self.console.label(event.assistant), end="")
                        streaming_id = event.message_id
                    self.console.say(event.text, end="")
                    if event.message_id:
                        streamed.add(event.message_id)
                elif isinstance(event, MessageEvent):
                    message = event.message
                    if isinstance(message, AIMessage):
                        if message.id in streamed:
                            if streaming_id is not None:
                                self.console.say()
                                streaming_id = None
                        elif _text(message):
                            self.console.say(self.console.label(event.node) + _text(message))
                        for call in message.tool_calls:
                            self.console.status(f"  … {_describe_call(call['name'])}")
                    elif (
                        isinstance(message, ToolMessage)
                        and message.status == "error"
                        and not str(message.content).startswith("The customer declined")
                    ):
                        self.console.status(
                            f"  ! {message.name}: {_first_line(str(message.content))}"
                        )
        except ModelProviderError as error:
            if streaming_id is not None:
                self.console.say()
            self.console.error(f"{error} Your conversation is saved; send your message again.")
            return
        if streaming_id is not None:
            self.console.say()

    def ask_pending_approvals(self) -> None:
        """Ask the customer about every pending sensitive action, until none is left."""
        from graph import Decision

        while True:
            pending = self.assistant.pending_actions(self.thread)
            if not pending:
                return
            decisions: dict[str, Decision] = {}
            for index, action in enumerate(pending, start=1):
                self.show_preview(action, index, len(pending))
                decisions[action.tool_call_id] = self.ask_decision()
            self.turn(partial(self.assistant.resolve, self.thread, decisions))

    def show_preview(self, action: Any, index: int, total: int) -> None:
        """Show what an action would do, before the customer decides."""
        from tools import describe_action

        preview = describe_action(self.db, self.thread.passenger_id, action.name, action.args)
        counter = f" ({index} of {total})" if total > 1 else ""
        self.console.say(f"┌ Approval needed{counter}: {preview.title}")
        for line in preview.lines:
            self.console.say(f"│ {line}")
        if preview.error:
            self.console.say(f"│ Note: this will probably be refused: {preview.error}")
        self.console.say("└")

    def ask_decision(self) -> Any:
        """Ask y/n; only an explicit yes approves. A no asks for a reason."""
        from graph import Decision

        try:
            answer = _clean(self.prompt("Approve this action? [y/N] ")).lower()
        except (EOFError, KeyboardInterrupt):
            self.console.status("No answer: the action is declined.")
            return Decision(False, "The customer did not answer the approval prompt.")
        if answer in ("y", "yes"):
            return Decision(True)
        try:
            reason = _clean(self.prompt("Why not? (optional, passed to the assistant) "))
        except (EOFError, KeyboardInterrupt):
            reason = ""
        return Decision(False, reason or None)

    # Showing history ----------------------------------------------------------------------

    def show_last_exchange(self) -> None:
        """Show the last customer message and what followed it."""
        from langchain_core.messages import HumanMessage

        messages = self.assistant.messages(self.thread)
        last_human = max(
            (i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None
        )
        self.console.status(f"Resuming session {self.thread.thread_id}. The last exchange:")
        if last_human is None:
            return
        for message in messages[last_human:]:
            self.show_message(message)

    def show_message(self, message: AnyMessage) -> None:
        """Print one saved message the way the conversation showed it."""
        from langchain_core.messages import AIMessage, HumanMessage

        if isinstance(message, HumanMessage):
            self.console.say(f"you> {_text(message)}")
        elif isinstance(message, AIMessage) and _text(message):
            self.console.say(
                self.console.label(message.name or "primary_assistant") + _text(message)
            )


def _text(message: AnyMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content.strip()
    return "".join(
        str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content
    ).strip()


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:160]


def _describe_call(name: str) -> str:
    if name.startswith("To") or name == "CompleteOrEscalate":
        return "handing over"
    return name.replace("_", " ") + "..."


def format_sessions(
    records: Sequence[Any], details: Callable[[Any], tuple[str, bool]] | None
) -> list[str]:
    """Return one line per saved session, most recent first."""
    if not records:
        return ["No saved sessions."]
    lines = []
    for record in records:
        last, pending = details(record) if details else (record.title, False)
        flag = "  [approval pending]" if pending else ""
        when = record.updated_at.strftime("%Y-%m-%d %H:%M UTC")
        lines.append(
            f"{record.thread_id}  {record.passenger_id}  {when}  {_first_line(last)[:60]}{flag}"
        )
    return lines


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


def _make_prompt(home: Path, overrides: Overrides) -> Callable[[str], str]:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    if overrides.pt_input is None and not sys.stdin.isatty():
        # Piped input: read plain lines, so scripts can drive the chat.
        def read_line(message: str) -> str:
            raw = sys.stdin.buffer.readline()
            if not raw:
                raise EOFError
            # Bytes that are not UTF-8 become "?" rather than an exception.
            return raw.decode("utf-8", "replace").rstrip("\r\n")

        return read_line
    home.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(home / "input_history")),
        input=overrides.pt_input,
        output=overrides.pt_output,
    )
    return lambda message: session.prompt(message)


def cmd_chat(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant chat``."""
    from graph import Thread, TravelAssistant, build_graph

    passenger_id = " ".join(args.passenger_id.split())
    if not passenger_id:
        raise CliError(
            "--passenger-id is empty. Pass your passenger id, e.g. '3442 587242'.", EXIT_USAGE
        )
    factory = overrides.model_factory or default_model_factory
    models = factory(args.model)  # fails here, before the first prompt, without an endpoint
    if overrides.model_factory is None and overrides.check_endpoint and not args.no_check:
        check_endpoint(args.model)
    database = open_travel_db(_db_path(args), console, clock=overrides.clock)
    saver, registry = open_checkpointer(_sessions_path(args))
    graph = build_graph(models, saver, db=database)
    assistant = TravelAssistant(graph, database)
    if not assistant.check_passenger(passenger_id):
        raise CliError(
            f"No passenger with id {passenger_id!r} in {_db_path(args)}. "
            "Check the id on your ticket (it looks like '3442 587242').",
            EXIT_USAGE,
        )
    resumed = False
    if args.thread_id:
        record = registry.get(args.thread_id)
        if record is None:
            raise CliError(
                f"No saved session {args.thread_id!r}. List them with: travel-assistant sessions",
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
    else:
        thread = Thread(str(uuid.uuid4()), passenger_id)
    prompt = _make_prompt(_home(args), overrides)
    session = ChatSession(assistant, thread, registry, console, prompt, db=database)
    return session.run(resumed)


def cmd_sessions(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant sessions``."""
    from graph import Thread, TravelAssistant, build_graph, drawing_model

    path = _sessions_path(args)
    if not path.exists():
        console.say("No saved sessions.")
        return EXIT_OK
    saver, registry = open_checkpointer(path)
    database = open_travel_db(_db_path(args), console, clock=overrides.clock)
    assistant = TravelAssistant(build_graph(drawing_model(), saver, db=database), database)

    from langchain_core.messages import ToolMessage

    def details(record: Any) -> tuple[str, bool]:
        thread = Thread(record.thread_id, record.passenger_id)
        messages = assistant.messages(thread)
        last = next(
            (_text(m) for m in reversed(messages) if _text(m) and not isinstance(m, ToolMessage)),
            "",
        )
        return last or record.title, bool(assistant.pending_actions(thread))

    for line in format_sessions(registry.list(args.passenger_id), details):
        console.say(line)
    return EXIT_OK


def cmd_db_init(args: argparse.Namespace, console: Console) -> int:
    """Run ``travel-assistant db init``."""
    from db.engine import Database
    from db.generate import MAX_SCALE, build_database

    if not 1 <= args.scale <= MAX_SCALE:
        raise CliError(f"--scale must be between 1 and {MAX_SCALE}.", EXIT_USAGE)
    path = _db_path(args)
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
    counts = ", ".join(
        f"{n} {t}"
        for t, n in report.counts.items()
        if t in ("flights", "tickets", "ticket_flights")
    )
    console.status(f"Done in {report.seconds:.1f} s: {counts}.")
    return EXIT_OK


def cmd_eval(args: argparse.Namespace, console: Console, overrides: Overrides) -> int:
    """Run ``travel-assistant eval``: the scenarios against a real model."""
    import statistics
    import tempfile

    from langchain_core.language_models import BaseChatModel

    import evaluation
    from db.engine import Database
    from db.generate import build_database

    if args.trials < 1:
        raise CliError("--trials must be at least 1.", EXIT_USAGE)
    factory = overrides.model_factory or default_model_factory
    models = factory(args.model)  # names what to set when no endpoint is configured
    customer_models = factory(args.customer_model or args.model)
    customer_model = (
        customer_models
        if isinstance(customer_models, BaseChatModel)
        else customer_models["primary_assistant"]
    )
    scenarios = evaluation.load_scenarios()
    if args.scenario:
        wanted = set(args.scenario)
        scenarios = [s for s in scenarios if s.id in wanted]
        missing = wanted - {s.id for s in scenarios}
        if missing:
            raise CliError(f"No scenario named {sorted(missing)}.", EXIT_USAGE)
    model_name = args.model or os.environ.get("TRAVEL_ASSISTANT_MODEL") or "gpt-4o-mini"
    price = evaluation.PRICES_PER_MILLION.get(model_name)
    if args.price_in is not None and args.price_out is not None:
        price = (args.price_in, args.price_out)
    by_category: dict[str, dict[str, list[bool]]] = {}
    latencies: list[float] = []
    spent = evaluation.Usage(0, 0)
    with tempfile.TemporaryDirectory() as folder:
        template = Path(folder) / "template.sqlite"
        seed_db = (
            Database.from_url(str(template), clock=overrides.clock)
            if overrides.clock
            else Database.from_url(str(template))
        )
        build_database(seed_db, seed=evaluation.SCENARIO_SEED)
        clock = seed_db.clock
        seed_db.dispose()
        for scenario in scenarios:
            for trial in range(args.trials):
                work = Path(folder) / f"{scenario.id}-{trial}"
                work.mkdir()
                result = evaluation.run_scenario(
                    scenario,
                    template,
                    clock,
                    work,
                    lambda _db: models,
                    customer=evaluation.simulated_customer(scenario, customer_model),
                )
                transcript, failures = result.transcript, result.failures
                passed = result.passed
                by_category.setdefault(scenario.category, {}).setdefault(scenario.id, []).append(
                    passed
                )
                latencies += transcript.latencies
                used = evaluation.Usage.of(transcript.messages)
                spent = evaluation.Usage(
                    spent.input_tokens + used.input_tokens, spent.output_tokens + used.output_tokens
                )
                verdict = "pass" if passed else "FAIL: " + "; ".join(failures)
                console.status(f"{scenario.id} trial {trial + 1}: {verdict}")
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
    return EXIT_OK


def cmd_graph(console: Console) -> int:
    """Run ``travel-assistant graph``."""
    from graph import draw_mermaid

    console.say(draw_mermaid())
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
