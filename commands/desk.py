"""``travel-assistant desk``: the staff's side of a hand-off to a person, as a client.

``desk --server URL --token TOKEN`` (or ``TRAVEL_ASSISTANT_SERVER`` and
``TRAVEL_ASSISTANT_TOKEN``) is the interactive desk (``terminal.desk``); ``desk queue``
prints the conversations waiting for a person, one a line, for scripts; ``desk
second-approval [AMOUNT]`` shows or (with a supervisor's token) sets the amount above
which staff check an approved action. Every one of them is a request to the running
service with a member of staff's token (``terminal.desk_api``), as ``gh`` is to GitHub:
the service alone decides who may do what, under the login the token proves. No desk
acts under a typed name, and none opens the store itself.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from commands.common import EXIT_OK, EXIT_USAGE, CliError, Overrides
from terminal import Console

if TYPE_CHECKING:
    from settings import Settings
    from terminal.desk_api import DeskApi
    from terminal.prompter import Prompter

SERVER_ENV = "TRAVEL_ASSISTANT_SERVER"
TOKEN_ENV = "TRAVEL_ASSISTANT_TOKEN"
# Exit code when the service refuses the token or cannot be reached.
EXIT_REFUSED = 1

AGENT_GONE = (
    "desk --agent is gone: the desk acts as the login your token proves, never a typed name. "
    "Sign in with --token TOKEN (travel-assistant token --agent LOGIN --name NAME, or your "
    "company's sign-in) and --server URL."
)


def cmd_desk(
    args: argparse.Namespace, settings: Settings, console: Console, overrides: Overrides
) -> int:
    """Run ``desk queue``, ``desk second-approval`` or the interactive desk."""
    if getattr(args, "agent", None) is not None:
        raise CliError(AGENT_GONE, EXIT_USAGE)
    command = getattr(args, "desk_command", None)
    # The amount was checked as the arguments were parsed (``commands.arguments``).
    amount = getattr(args, "amount", None)
    if amount == "off":
        amount = None
    from terminal.desk_api import DeskApiError

    api = _connect(args, settings)
    try:
        if command == "queue":
            return _queue(api, console)
        if command == "second-approval":
            return _second_approval(api, console, amount, given=args.amount is not None)
        from terminal.desk import DeskSession

        me = api.me()
        if me.get("role") not in ("agent", "supervisor"):
            raise CliError("The desk takes a member of staff's token.", EXIT_USAGE)
        return DeskSession(api, me, console, _prompter(overrides)).run()
    except DeskApiError as error:
        raise CliError(str(error), EXIT_REFUSED) from None
    finally:
        api.close()


def _connect(args: argparse.Namespace, settings: Settings) -> DeskApi:
    """Return a client of the service the flags (or the environment) name.

    Raises:
        CliError: No server or no token, or an address that is not one.
    """
    from terminal.desk_api import DeskApi, DeskApiError

    server = (getattr(args, "server", None) or settings.server or "").strip()
    token = (getattr(args, "token", None) or settings.token or "").strip()
    if not server:
        raise CliError(
            f"Say which service: --server URL (or {SERVER_ENV}), e.g. "
            "--server http://127.0.0.1:8000.",
            EXIT_USAGE,
        )
    if not token:
        raise CliError(
            f"Sign in: --token TOKEN (or {TOKEN_ENV}), a member of staff's token from "
            "travel-assistant token --agent LOGIN (or --supervisor LOGIN).",
            EXIT_USAGE,
        )
    try:
        return DeskApi.connect(server, token)
    except DeskApiError as error:
        raise CliError(str(error), EXIT_USAGE) from None


def _second_approval(api: DeskApi, console: Console, amount: str | None, *, given: bool) -> int:
    """Show the second approval's amount, or set it (a supervisor's token)."""
    if not given:
        kept = api.second_approval()
        console.say(kept["amount"] or "off")
        return EXIT_OK
    now = api.set_second_approval(amount)
    console.status(
        f"Staff check approved actions above {now['amount']} from now on"
        if now["amount"] is not None
        else "No second approval from now on"
    )
    console.status("Processes already running use it from their next decision on.")
    return EXIT_OK


def _queue(api: DeskApi, console: Console) -> int:
    """Print the waiting conversations, one a line: id, passenger, minutes, by, reason."""
    from datetime import UTC, datetime

    from terminal.desk import tab_lines

    for line in tab_lines(api.queue()["waiting"], datetime.now(UTC)):
        console.say(line)
    return EXIT_OK


def _prompter(overrides: Overrides) -> Prompter:
    """Return how the desk reads its member of staff: a prompt, or plain piped lines."""
    from terminal.live import above_prompt
    from terminal.prompter import Prompter

    if overrides.pt_input is None and not sys.stdin.isatty():

        def read_line(message: str) -> str:
            raw = sys.stdin.buffer.readline()
            if not raw:
                raise EOFError
            return raw.decode("utf-8", "replace").rstrip("\r\n")

        return Prompter(read_line, read_line, lambda: False, above_prompt(None))
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import InMemoryHistory
    from prompt_toolkit.output import create_output

    output = overrides.pt_output or create_output()
    if hasattr(output, "enable_cpr"):
        output.enable_cpr = False
    session: PromptSession[str] = PromptSession(
        history=InMemoryHistory(), input=overrides.pt_input, output=output
    )
    return Prompter(session.prompt, session.prompt, lambda: False, above_prompt(session))
