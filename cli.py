"""The terminal program: ``travel-assistant chat`` and its companion commands.

Commands::

    travel-assistant chat -p/--passenger-id ID [-t/--thread-id ID | -c/--continue] [--model NAME]
    travel-assistant sessions [-p/--passenger-id ID]
    travel-assistant sessions show ID [--json]
    travel-assistant sessions delete ID
    travel-assistant db init [--scale N] [--seed N] [--force]
    travel-assistant graph
    travel-assistant serve [--host 127.0.0.1] [--port 8000]
    travel-assistant token (--passenger-id ID | --agent LOGIN | --supervisor LOGIN) [--name NAME]
                           [--hours N]
    travel-assistant audit [--supervisor NAME] [--conversation ID] [--limit N]
    travel-assistant report [--since DAY] [--until DAY] [--format table|json|csv]
    travel-assistant desk --agent NAME
    travel-assistant desk queue

``--home DIR``, ``--db PATH_OR_URL``, ``--conversations PATH_OR_URL`` and ``--debug`` go
before or after the command. The travel database and the conversations are each a SQLite
file or a PostgreSQL URL (``conversations.store.Location``); a conversation takes one
turn at a time, across windows and machines (its turn lock, held for every turn).

Only the assistant's words go to stdout; status lines, warnings and errors go to stderr.
Expected failures are one line naming the fix and a non-zero exit code; ``--debug``
brings the traceback back. This module only parses the arguments (with the parser of
``commands.arguments``) and dispatches: each command is a module of ``commands``, and the
chat itself lives in ``terminal``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from collector import own_process
from commands.arguments import build_parser, chosen_parser
from commands.audit import cmd_audit
from commands.chat import cmd_chat
from commands.common import EXIT_USAGE, CliError, Overrides, said
from commands.db import cmd_db_init
from commands.desk import cmd_desk
from commands.eval import cmd_eval
from commands.graph import cmd_graph
from commands.report import cmd_report
from commands.serve import cmd_serve, cmd_token
from commands.sessions import cmd_sessions
from terminal import Console

# LangChain is imported where it is used, so that --help and argument errors are fast.

__all__ = ["CliError", "Console", "Overrides", "main", "run"]


def main(argv: Sequence[str] | None = None, overrides: Overrides | None = None) -> int:
    """Run the program with ``argv``; return the exit code."""
    overrides = overrides or Overrides()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    command = chosen_parser(parser, args)
    if extra:  # said by the command's own parser, with its usage and the nearest option
        command.refuse(extra)
    # Imported after the arguments are parsed: their mistakes are said before pydantic loads.
    from settings import Settings, SettingsError, export_env_file

    export_env_file()

    try:
        # Read once, here, with the flags that are settings; the commands get this object.
        settings = Settings.read(
            home=args.home,
            db=args.db,
            conversations=args.conversations,
            model=getattr(args, "model", None),
            max_tokens=getattr(args, "max_tokens", None),
        )
    except SettingsError as error:
        (overrides.console or Console()).error(str(error))
        return EXIT_USAGE
    console = overrides.console or Console(
        color=sys.stderr.isatty() and not settings.no_color, plain=settings.plain
    )
    try:
        if args.command == "chat":
            return cmd_chat(args, settings, console, overrides)
        if args.command == "sessions":
            return cmd_sessions(args, settings, console)
        if args.command == "db" and args.db_command == "init":
            return cmd_db_init(args, settings, console)
        if args.command == "db":
            command.error("choose what to do with the database (DB_COMMAND): init")
        if args.command == "graph":
            return cmd_graph(console)
        if args.command == "eval":
            return cmd_eval(args, settings, console, overrides)
        if args.command == "serve":
            return cmd_serve(args, settings, console, overrides)
        if args.command == "token":
            return cmd_token(args, settings, console, overrides)
        if args.command == "audit":
            return cmd_audit(args, settings, console)
        if args.command == "report":
            return cmd_report(args, settings, console)
        if args.command == "desk":
            return cmd_desk(args, settings, console, overrides)
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        console.status("Interrupted.")
        return 130
    except Exception as error:
        message, code = said(error, args.debug)
        console.error(message)
        return code


def run() -> None:
    """Console-script entry point."""
    own_process()  # its collector may pause while the code loads (``collector``)
    raise SystemExit(main())


if __name__ == "__main__":
    run()
