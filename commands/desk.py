"""``travel-assistant desk``: the staff's side of a hand-off to a person.

``desk queue`` prints the conversations waiting for a person, one a line, for scripts;
``desk --agent NAME`` is the interactive desk (``terminal.desk``). It is run by staff on
the server itself, with the store's own access, so it works as a supervisor does
(second approvals included, never one it proposed). NAME is both the login the desk
compares and the audit log records, and the name customers see: a conversation taken
with a token whose login is NAME is the same person's.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import TYPE_CHECKING

from commands.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Overrides,
    agreed_check_above,
    default_model_factory,
    open_existing_store,
    open_store,
)
from terminal import Console

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langchain_core.language_models import BaseChatModel

    from settings import Settings
    from terminal.prompter import Prompter


def cmd_desk(
    args: argparse.Namespace, settings: Settings, console: Console, overrides: Overrides
) -> int:
    """Run ``desk queue`` or the interactive desk."""
    if getattr(args, "desk_command", None) == "queue":
        return cmd_desk_queue(settings, console)
    if getattr(args, "desk_command", None) == "second-approval":
        return cmd_desk_second_approval(args, settings, console)
    agent = " ".join((args.agent or settings.agent or "").split())
    if not agent:
        raise CliError(
            "Say who you are: --agent NAME (or TRAVEL_ASSISTANT_AGENT); customers see this name.",
            EXIT_USAGE,
        )
    from server.auth import MAX_SUBJECT_CHARS, subject_problem

    # Checked as a token's login and name are: what the desk stores is what was given.
    if subject_problem(agent) is not None:
        raise CliError(
            f"--agent takes the name customers see and the audit log records (printable, at "
            f"most {MAX_SUBJECT_CHARS} characters), e.g. --agent 'Ana Lima'.",
            EXIT_USAGE,
        )
    # Opened (made, if need be) as a chat opens it: a desk started before the first
    # customer waits for them.
    with open_store(settings.conversations_location) as store:
        from commands.chat import open_chat_db
        from conversations.assistant import TravelAssistant
        from conversations.protocol import Conversations
        from graph import drawing_model
        from terminal.desk import DeskSession

        database = open_chat_db(settings, console, overrides, create_db=False)
        try:
            # The model answers only when a check decided here lets the customer's turn
            # go on; without one configured, the customer's side goes on with it.
            models = _models(settings, overrides)
            assistant = TravelAssistant.build(
                models if models is not None else drawing_model(), store.saver, db=database
            )
            conversations = Conversations(
                assistant,
                store.registry,
                store.locks,
                store.desk,
                check_above=agreed_check_above(settings, store),
            )
            session = DeskSession(
                conversations,
                agent,
                console,
                _prompter(overrides),
                audit=store.audit,
                applies=models is not None,
            )
            return session.run()
        finally:
            database.dispose()


def _models(
    settings: Settings, overrides: Overrides
) -> Mapping[str, BaseChatModel] | BaseChatModel | None:
    """Return the chat models the chat would use, or ``None`` when none is configured."""
    try:
        return (overrides.model_factory or partial(default_model_factory, settings))(None)
    except CliError:
        return None


def cmd_desk_second_approval(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Show the second approval's amount kept with the conversations, or set it."""
    from db.models import CURRENCY
    from db.rules import parse_money
    from db.values import fmt_money

    with open_store(settings.conversations_location) as store:
        if args.amount is None:
            kept = store.desk.agree_check_above(None)
            console.say(fmt_money(kept) if kept is not None else "off")
            return EXIT_OK
        if args.amount.strip().lower() == "off":
            cents = None
        else:
            try:
                cents = parse_money(args.amount, CURRENCY)
            except ValueError as error:
                raise CliError(str(error), EXIT_USAGE) from None
        store.desk.set_check_above(cents)
    console.status(
        f"Staff check approved actions above {fmt_money(cents)} from now on"
        if cents is not None
        else "No second approval from now on"
    )
    console.status("Processes already running use it from their next decision on.")
    return EXIT_OK


def cmd_desk_queue(settings: Settings, console: Console) -> int:
    """Print the waiting conversations, one a line: id, passenger, minutes, by, reason."""
    store = open_existing_store(settings)
    if store is None:
        return EXIT_OK
    with store:
        from datetime import UTC, datetime

        from conversations.desk import describe_queue

        for line in describe_queue(store.desk.queue(), datetime.now(UTC)):
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
