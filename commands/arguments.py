"""The command line's parser: every command with its flags and help page, and their checks.

``cli.main`` builds it (``build_parser``), parses the arguments with it and dispatches. A
mistyped command is answered with the nearest one. It imports neither LangChain nor
pydantic, so that ``--help`` and argument errors are said fast.
"""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any, NoReturn

from commands.eval import DEFAULT_EVAL_SECONDS
from server.limits import (
    BODY_TIMEOUT,
    GRACEFUL_TIMEOUT,
    HEADER_TIMEOUT,
    MAX_CONNECTIONS,
    POOL_TIMEOUT,
    QUEUE_TIMEOUT,
)


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


class _Parser(argparse.ArgumentParser):
    """An argument parser that keeps the parsers of its commands, as it makes them.

    ``add_commands`` and ``add_command`` keep what argparse's ``add_subparsers`` and
    ``add_parser`` return, so that the parser a command was parsed by is found
    (``chosen_parser``), and a mistyped command is answered with the nearest one
    (``error``), without reaching into argparse's private parts.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: list[str] = []  # the option strings, for the nearest to a mistyped one
        super().__init__(*args, **kwargs)
        self.name = ""  # the command's words after the program's: "sessions delete"
        self.commands: dict[str, _Parser] = {}
        self.command_dest = ""
        self._command_metavar = ""
        self._subparsers: Any = None  # what ``add_subparsers`` returned
        self._given: list[str] = []

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """Add an argument as argparse does, keeping its option strings."""
        action = super().add_argument(*args, **kwargs)
        self.options.extend(action.option_strings)
        return action

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        """Add a group as argparse does; its options are kept as this parser's own."""
        group = super().add_mutually_exclusive_group(**kwargs)
        add = group.add_argument

        def add_argument(*args: Any, **options: Any) -> argparse.Action:
            action = add(*args, **options)
            self.options.extend(action.option_strings)
            return action

        group.add_argument = add_argument  # type: ignore[method-assign]
        return group

    def add_commands(self, dest: str, metavar: str) -> None:
        """Give this parser commands, chosen by the word ``metavar`` into ``dest``."""
        self._subparsers = self.add_subparsers(dest=dest, metavar=metavar)
        self.command_dest = dest
        self._command_metavar = metavar

    def add_command(self, name: str, **kwargs: Any) -> _Parser:
        """Add the command ``name`` (``add_parser``'s arguments); return its parser."""
        command = self._subparsers.add_parser(name, **kwargs)
        assert isinstance(command, _Parser)  # argparse makes them of this parser's class
        command.name = f"{self.name} {name}".strip()
        self.commands[name] = command
        return command

    def parse_known_args(  # type: ignore[override]  # one signature for argparse's overloads
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse as argparse does, keeping the words given (for ``error``)."""
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """Print the usage and the error, naming the nearest command to a mistyped one."""
        super().error(self._mistyped(message) or message)

    def refuse(self, extra: Sequence[str]) -> NoReturn:
        """Refuse the words ``extra`` this command does not take, naming the nearest option."""
        for word in extra:
            name = word.split("=", 1)[0]
            if not name.startswith("-") or name in ("-", "--"):
                continue
            near = difflib.get_close_matches(name, self.options, n=1)
            said = f"No option {name!r} for {self.prog.removeprefix('travel-assistant ')!r}."
            if near:
                self.error(f"{said} Did you mean {near[0]!r}?")
            self.error(f"{said} See: {self.prog} --help")
        self.error(f"unrecognized arguments: {' '.join(extra)}")

    def _mistyped(self, message: str) -> str | None:
        """Say the command word argparse refused in ``message``, and the nearest one."""
        if not self.commands or not message.startswith(f"argument {self._command_metavar}:"):
            return None
        word = next(
            (
                given
                for given in self._given
                if not given.startswith("-")
                and given not in self.commands
                and repr(given) in message
            ),
            None,
        )
        if word is None:
            return None
        near = difflib.get_close_matches(word, list(self.commands), n=1)
        said = f"No command {f'{self.name} {word}'.strip()!r}."
        if near:
            return f"{said} Did you mean {f'{self.name} {near[0]}'.strip()!r}?"
        return f"{said} Choose one of: {', '.join(self.commands)}."


def chosen_parser(parser: _Parser, args: argparse.Namespace) -> _Parser:
    """Return the parser of the command (and sub-command) ``args`` were parsed for."""
    while parser.command_dest:
        chosen = getattr(args, parser.command_dest, None)
        if chosen not in parser.commands:
            break
        parser = parser.commands[chosen]
    return parser


def _command_parsers(parser: _Parser) -> Iterator[_Parser]:
    """Yield the parser of every command and sub-command under ``parser``."""
    for command in parser.commands.values():
        yield command
        yield from _command_parsers(command)


class _VersionAction(argparse.Action):
    """Print the installed version and exit (read only when asked, to keep start-up fast)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(f"travel-assistant {_version()}\n")
        parser.exit()


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless its text says it) and keeps examples."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and not action.required
        if shown and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


# Each command's help page: a one-line description and an example.
PAGES: dict[str, tuple[str, str]] = {
    "": (
        "Meridian Travel's customer-service assistant in your terminal.",
        "travel-assistant chat --passenger-id '3442 587242'",
    ),
    "chat": (
        "Talk to the assistant about your bookings; every change asks for your approval.",
        "travel-assistant chat -p '3442 587242' -c",
    ),
    "sessions": (
        "List the saved conversations, most recently used first.",
        "travel-assistant sessions --passenger-id '3442 587242'",
    ),
    "sessions delete": (
        "Delete one saved conversation.",
        "travel-assistant sessions delete 771addfc-714a-47d8-96f1-09950d215d6a",
    ),
    "sessions show": (
        "Print one saved conversation as the customer saw it: their messages, the replies, "
        "what became of every action (approved, declined, and why) and the notes.",
        "travel-assistant sessions show 771addfc-714a-47d8-96f1-09950d215d6a --json",
    ),
    "db": (
        "Manage the travel database.",
        "travel-assistant db init --force",
    ),
    "db init": (
        "Build the travel database, relative to --date: the same --seed, --scale and --date "
        "always give the same data.",
        "travel-assistant db init --seed 42 --date 2026-11-25 --force",
    ),
    "graph": (
        "Print the assistant's graph as a Mermaid diagram.",
        "travel-assistant graph > graph.mmd",
    ),
    "eval": (
        "Run the scenario suite against a real model and report pass^k per scenario.",
        "travel-assistant eval --model gpt-4o-mini --trials 3 --category flights",
    ),
    "serve": (
        "Run the HTTP API and the web chat.",
        "travel-assistant serve --host 127.0.0.1 --port 8000",
    ),
    "token": (
        "Issue an access token for the service: a passenger's (and its link), an agent's or "
        "a supervisor's.",
        "travel-assistant token --passenger-id '3442 587242' --hours 8",
    ),
    "audit": (
        "Show which supervisor looked at which conversation, and when.",
        "travel-assistant audit --supervisor ana@example.com --limit 20",
    ),
    "report": (
        "Print the day's figures: conversations, resolved by the assistant alone, handed to a "
        "person and their wait, actions and money, staff checks, model errors, tokens and cost.",
        "travel-assistant report --since 2026-11-01 --until 2026-11-30 --format csv",
    ),
    "desk": (
        "The staff's desk: take conversations handed to a person, write to the customer, "
        "hand them back to the assistant, decide second approvals; a client of the running "
        "service, signed in with your staff token.",
        'travel-assistant desk --server http://127.0.0.1:8000 --token "$TOKEN"',
    ),
    "desk queue": (
        "Print the conversations waiting for a person, one a line: id, passenger, minutes "
        "waited, who asked, why.",
        "travel-assistant desk queue",
    ),
    "desk second-approval": (
        "Show, or set (a supervisor's token), the amount above which a member of staff "
        "checks an action the customer approved (off: no check), on the service the "
        "desk signs in to.",
        "travel-assistant desk second-approval 'EUR 1000'",
    ),
}


def _page(name: str) -> dict[str, Any]:
    """Return the ``description``, ``epilog`` and formatter of the help page of ``name``."""
    description, example = PAGES[name]
    return {
        "description": description,
        "epilog": f"example:\n  {example}",
        "formatter_class": _HelpFormatter,
    }


def build_parser() -> _Parser:
    """Return the argument parser of every command."""
    parser = _Parser(prog="travel-assistant", **_page(""))
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    _add_global_options(parser, top=True)
    parser.add_commands("command", "COMMAND")

    chat = parser.add_command("chat", help="talk to the assistant (the main job)", **_page("chat"))
    chat.add_argument(
        "-p",
        "--passenger-id",
        help='your passenger id, e.g. "3442 587242" (the space is optional; default: '
        "$TRAVEL_ASSISTANT_PASSENGER, or with --continue the passenger of the latest "
        "conversation)",
    )
    resume = chat.add_mutually_exclusive_group()
    resume.add_argument(
        "-t",
        "--thread-id",
        help="resume a saved conversation (for its own passenger: --passenger-id may be left out)",
    )
    resume.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="resume your latest conversation",
    )
    _add_model_options(chat, "$TRAVEL_ASSISTANT_MODEL or gpt-4o-mini")
    chat.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="longest reply in tokens (default: $TRAVEL_ASSISTANT_MAX_TOKENS or 1024)",
    )

    sessions = parser.add_command("sessions", help="list saved conversations", **_page("sessions"))
    sessions.add_argument("-p", "--passenger-id", help="only this passenger's conversations")
    sessions.add_commands("sessions_command", "ACTION")
    delete = sessions.add_command(
        "delete", help="delete a saved conversation", **_page("sessions delete")
    )
    delete.add_argument(
        "thread_id", metavar="ID", help="the session (see: travel-assistant sessions)"
    )
    show = sessions.add_command(
        "show", help="print a saved conversation as the customer saw it", **_page("sessions show")
    )
    show.add_argument(
        "thread_id", metavar="ID", help="the session (see: travel-assistant sessions)"
    )
    show.add_argument(
        "--json", action="store_true", help="print it as JSON, one object, for scripts"
    )

    db = parser.add_command("db", help="manage the travel database", **_page("db"))
    db.add_commands("db_command", "DB_COMMAND")
    init = db.add_command(
        "init", help="(re)build the travel database (at --db)", **_page("db init")
    )
    init.add_argument(
        "--scale", type=int, default=1, help="size of the generated schedule (1 to 25)"
    )
    init.add_argument("--seed", type=int, default=42, help="random seed")
    init.add_argument(
        "--date",
        type=_reference_moment,
        metavar="DATE",
        help="the day the data is relative to (flights before and after it, bookings made "
        "before it): YYYY-MM-DD for noon UTC that day, or an ISO time such as "
        "2026-11-25T09:30Z (default: today, at the moment of the build, so the fixture's "
        "flight leaves a few hours from now; two builds without --date differ)",
    )
    init.add_argument("--force", action="store_true", help="replace an existing database")

    parser.add_command("graph", help="print the assistant graph as Mermaid", **_page("graph"))
    _add_server_commands(parser)

    evaluate = parser.add_command(
        "eval",
        help="run the scenario suite against a real model (needs a model endpoint)",
        **_page("eval"),
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


def _add_model_options(parser: argparse.ArgumentParser, model_default: str) -> None:
    """Add the options of a command that builds the assistant (``chat`` and ``serve``)."""
    parser.add_argument("--model", help=f"chat model name (default: {model_default})")
    parser.add_argument(
        "--create-db",
        action="store_true",
        help="build the travel database named by --db when it does not exist",
    )
    parser.add_argument(
        "--no-check", action="store_true", help="skip the check that the model endpoint answers"
    )


def _positive_int(text: str) -> int:
    """Parse a positive whole number (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, not {text!r}")
    return value


def _reference_moment(text: str) -> datetime:
    """Parse ``--date``: a day (noon UTC) or an ISO time (UTC unless it names a zone)."""
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), time(12), tzinfo=UTC)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a day such as 2026-11-25, or a time such as 2026-11-25T09:30Z, not {text!r}"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _non_negative_float(text: str) -> float:
    """Parse a finite number, 0 or more (an argparse type): not "nan", not "inf"."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number, 0 or more, not {text!r}")
    return value


def _positive_float(text: str) -> float:
    """Parse a positive, finite number (an argparse type): not "nan", not "inf"."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


def _add_server_commands(parser: _Parser) -> None:
    """Add ``serve``, ``token``, ``audit`` and ``desk``."""
    serve = parser.add_command("serve", help="run the HTTP API and the web chat", **_page("serve"))
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    _add_model_options(serve, "as for chat")
    serve.add_argument(
        "--docs",
        action="store_true",
        help="serve the interactive API docs at /docs (the browser loads Swagger UI from a CDN)",
    )
    serve.add_argument(
        "--max-connections",
        type=_positive_int,
        default=MAX_CONNECTIONS,
        help=f"requests worked on at once; more wait their turn, then answer 503 (default "
        f"{MAX_CONNECTIONS})",
    )
    serve.add_argument(
        "--queue-timeout",
        type=_non_negative_float,
        default=QUEUE_TIMEOUT,
        help="seconds a request beyond --max-connections waits for its turn before its 503; 0 "
        f"refuses it at once (default {QUEUE_TIMEOUT:g})",
    )
    serve.add_argument(
        "--graceful-timeout",
        type=_non_negative_float,
        default=GRACEFUL_TIMEOUT,
        help="seconds a stop (SIGTERM, Ctrl-C) lets the requests and turns in flight finish "
        f"before it cancels them (default {GRACEFUL_TIMEOUT:g})",
    )
    serve.add_argument(
        "--pool-timeout",
        type=_positive_float,
        default=POOL_TIMEOUT,
        help="seconds a request waits for a connection to the PostgreSQL conversations when "
        f"all are in use, before its 503 (default {POOL_TIMEOUT:g})",
    )
    serve.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="the console's lines: text, or one JSON object each (default text)",
    )
    serve.add_argument(
        "--header-timeout",
        type=_positive_float,
        default=HEADER_TIMEOUT,
        help=f"seconds for a request's headers to arrive (default {HEADER_TIMEOUT:g})",
    )
    serve.add_argument(
        "--body-timeout",
        type=_positive_float,
        default=BODY_TIMEOUT,
        help=f"seconds for a request's body to arrive (default {BODY_TIMEOUT:g})",
    )
    oidc = serve.add_argument_group(
        "staff sign-in with the company's identity provider (OpenID Connect; docs/configuration.md)"
    )
    oidc.add_argument(
        "--oidc-issuer",
        metavar="URL",
        help="accept staff tokens this issuer signed ($TRAVEL_ASSISTANT_OIDC_ISSUER)",
    )
    oidc.add_argument(
        "--oidc-audience",
        metavar="AUDIENCE",
        help="the audience they must name ($TRAVEL_ASSISTANT_OIDC_AUDIENCE)",
    )
    oidc.add_argument(
        "--oidc-jwks-url",
        metavar="URL",
        help="its keys (default: the jwks_uri of the issuer's discovery document)",
    )
    oidc.add_argument(
        "--oidc-login-claim", metavar="CLAIM", help="the claim of the login (default: email)"
    )
    oidc.add_argument(
        "--oidc-role-claim",
        metavar="CLAIM",
        help="the claim of the roles, a dotted path such as realm_access.roles (default: roles)",
    )
    token = parser.add_command(
        "token",
        help="issue a passenger's (or an agent's, or a supervisor's) access token for the service",
        **_page("token"),
    )
    who = token.add_mutually_exclusive_group(required=True)
    who.add_argument("-p", "--passenger-id", help='e.g. "3442 587242"')
    who.add_argument(
        "--agent",
        metavar="LOGIN",
        help="an agent's token, for the desk's API: the queue, the conversations waiting in it "
        "or held by you, take, write, propose, hand back (not second approvals); LOGIN is who "
        "the audit log records (e.g. your e-mail address)",
    )
    who.add_argument(
        "--supervisor",
        metavar="LOGIN",
        help="a supervisor's token, for the view at /supervisor and the desk's API: what an "
        "agent's does, and reads every conversation and the audit log and decides second "
        "approvals (never one you proposed); LOGIN is who the audit log records",
    )
    token.add_argument(
        "--name",
        metavar="NAME",
        help="with --agent or --supervisor: the name customers see (default: the LOGIN), "
        "e.g. --name 'Ana Lima'",
    )
    token.add_argument(
        "--hours",
        type=float,
        default=24.0,
        help="how long the token is valid, 1/60 to 720 (default 24)",
    )
    audit = parser.add_command(
        "audit", help="show which supervisor looked at which conversation, when", **_page("audit")
    )
    audit.add_argument("--supervisor", metavar="NAME", help="only this supervisor's looks")
    audit.add_argument("--conversation", metavar="ID", help="only the looks at this conversation")
    audit.add_argument("--limit", type=int, default=100, help="the newest N entries (default 100)")
    report = parser.add_command(
        "report", help="the day's figures of the contact center, per day", **_page("report")
    )
    report.add_argument("--since", metavar="YYYY-MM-DD", help="first day (default: 6 days ago)")
    report.add_argument("--until", metavar="YYYY-MM-DD", help="last day (default: today, UTC)")
    report.add_argument(
        "--format", choices=("table", "json", "csv"), default="table", help="how to print it"
    )
    report.add_argument(
        "--price-in", type=float, metavar="PRICE", help="price per million input tokens"
    )
    report.add_argument(
        "--price-out", type=float, metavar="PRICE", help="price per million output tokens"
    )
    desk = parser.add_command(
        "desk", help="the staff's desk for conversations handed to a person", **_page("desk")
    )
    _add_desk_options(desk, top=True)
    # Gone: the desk acts as the login its token proves. Said so when given.
    desk.add_argument("--agent", help=argparse.SUPPRESS)
    desk.add_commands("desk_command", "DESK_COMMAND")
    queue = desk.add_command(
        "queue", help="print the waiting conversations, one a line", **_page("desk queue")
    )
    _add_desk_options(queue, top=False)
    second = desk.add_command(
        "second-approval",
        help="show or set the amount above which staff check an approved action",
        **_page("desk second-approval"),
    )
    _add_desk_options(second, top=False)
    second.add_argument(
        "amount",
        nargs="?",
        metavar="AMOUNT",
        type=_amount,
        help="an amount such as 'EUR 1000', or off",
    )


def _amount(text: str) -> str:
    """Check a second-approval amount as the arguments are parsed: a mistake is said at once."""
    if text.strip().lower() == "off":
        return "off"
    from db.rules import parse_money  # light: no database, no pydantic

    try:
        parse_money(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text.strip()


def _add_desk_options(parser: _Parser, *, top: bool) -> None:
    """Add ``--server`` and ``--token``, accepted before or after a desk command."""
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--server",
        metavar="URL",
        default=default,
        help="the service's address, e.g. http://127.0.0.1:8000 (default: "
        "$TRAVEL_ASSISTANT_SERVER)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=default,
        help="your staff token: travel-assistant token --agent LOGIN (or --supervisor "
        "LOGIN), or your company's sign-in (default: $TRAVEL_ASSISTANT_TOKEN)",
    )
