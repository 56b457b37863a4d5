"""``travel-assistant serve`` and ``token``: the HTTP service and its tokens."""

from __future__ import annotations

import argparse
import shlex
import time
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Literal

from collector import loading_code
from commands.chat import check_db_file, open_chat_db
from commands.chat_start import known_passenger
from commands.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Overrides,
    agreed_check_above,
    canonical_passenger_id,
    check_endpoint,
    check_policy_file,
    check_port,
    default_model_factory,
    open_store,
    open_travel_db,
    prepared,
    said,
)
from terminal import Console

StaffRole = Literal["agent", "supervisor"]

if TYPE_CHECKING:
    from contextlib import ExitStack

    from fastapi import FastAPI

    from locations import Location
    from server.auth import OidcVerifier, TokenSigner
    from server.limits import ServerLimits
    from server.service import ConversationService
    from settings import Settings


def _signer(settings: Settings, args: argparse.Namespace | None = None) -> TokenSigner:
    from server.auth import SECRET_ENV, SecretError, TokenSigner, load_secret

    given = {SECRET_ENV: settings.secret} if settings.secret is not None else {}
    try:
        oidc = _oidc(settings, args) if args is not None else None  # serve's, not token's
        return TokenSigner(load_secret(settings.home, given), oidc)
    except SecretError as error:
        raise CliError(str(error), EXIT_USAGE) from error


def _oidc(settings: Settings, args: argparse.Namespace | None) -> OidcVerifier | None:
    """Return the verifier of the company's identity provider's staff tokens, if one is set.

    A flag of ``serve`` wins over its variable.

    Raises:
        CliError: An issuer without an audience, or a keys address that is not http(s).
    """
    from server.auth import OidcConfig, OidcVerifier

    def given(name: str) -> str | None:
        value = getattr(args, f"oidc_{name}", None) or getattr(settings, f"oidc_{name}")
        return value.strip() if isinstance(value, str) else None

    issuer = given("issuer")
    if not issuer:
        return None
    audience = given("audience")
    if not audience:
        raise CliError(
            "--oidc-issuer needs --oidc-audience (TRAVEL_ASSISTANT_OIDC_AUDIENCE): the "
            "audience the identity provider's tokens name for this service.",
            EXIT_USAGE,
        )
    config = OidcConfig(
        issuer=issuer,
        audience=audience,
        jwks_url=given("jwks_url") or "",
        login_claim=given("login_claim") or "email",
        name_claim=settings.oidc_name_claim,
        role_claim=given("role_claim") or "roles",
        agent_role=settings.oidc_agent_role,
        supervisor_role=settings.oidc_supervisor_role,
    )
    try:
        return OidcVerifier(config)
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from None


def cmd_serve(
    args: argparse.Namespace, settings: Settings, console: Console, overrides: Overrides
) -> int:
    """Run ``travel-assistant serve``: the HTTP API and the web chat, until Ctrl-C.

    What needs nothing slow is checked before the service listens, and stops it there as
    before: the flags and settings, the secret, the locations of the databases, a travel
    database file named but missing, a policy file missing. The service then listens at
    once and builds the assistant in the background (``server.startup``): a problem found
    there (no model endpoint, a database server that refuses) is said here and by the
    health check, and the service goes on answering until it is stopped, then exits with
    the code it would have stopped with.
    """
    from server.limits import ServerLimits
    from server.startup import Startup, StartupApp, serve

    started = time.monotonic()
    if not 1 <= args.port <= 65535:
        raise CliError("--port must be between 1 and 65535.", EXIT_USAGE)
    check_port(args.host, args.port)  # a busy port is said before anything loads
    limits = ServerLimits(
        max_connections=args.max_connections,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        queue_timeout=args.queue_timeout,
        graceful_timeout=args.graceful_timeout,
    )
    signer = _signer(settings, args)
    settings.second_approval_cents()  # a bad amount is a usage error, said now
    check_db_file(settings, args.create_db)
    check_policy_file(settings)
    # What the health check adds to its "ok": the model check's finding, once it is made.
    health = {"model_tools": "not checked"}
    startup = Startup(
        partial(_application, args, signer, limits, health),
        partial(_service, args, settings, console, overrides, started, health),
        loading_code,
    )
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        console.status(
            "Listening beyond this machine: put the service behind HTTPS, since "
            "tokens travel in every request."
        )
    console.status(
        f"The web chat: http://{args.host}:{args.port}/ (Ctrl-C stops). "
        "Get a token with: travel-assistant token --passenger-id ID; the "
        f"supervisor view: http://{args.host}:{args.port}/supervisor (travel-assistant "
        "token --supervisor LOGIN --name NAME)"
    )
    try:
        app = StartupApp(startup, graceful=limits.graceful_timeout)
        serve(app, args.host, args.port, limits, log_format=args.log_format)
    finally:
        startup.close()
    return startup.error.code if startup.error is not None else EXIT_OK


def _application(
    args: argparse.Namespace, signer: TokenSigner, limits: ServerLimits, health: dict[str, str]
) -> FastAPI:
    """Return the application, without its service yet (imports LangChain: in the background).

    ``health`` is what its health check adds to ``"status": "ok"``, filled in by the build.
    """
    from server.app import create_app

    app = create_app(None, signer, docs=args.docs, body_timeout=limits.body_timeout)
    app.state.health = health
    return app


def _service(
    args: argparse.Namespace,
    settings: Settings,
    console: Console,
    overrides: Overrides,
    started: float,
    health: dict[str, str],
    stack: ExitStack,
) -> ConversationService:
    """Build the service, as ``serve`` did before it listened; a problem is said on the console.

    What it opens is closed by ``stack`` after the service.

    Raises:
        StartupError: The operator's message and the exit code of the problem.
    """
    from server.startup import StartupError

    try:
        service = _build_service(args, settings, console, overrides, stack, health)
    except Exception as error:
        message, code = said(error, args.debug)
        console.error(message)
        console.status(
            "The service goes on answering (its health check says the above) until it is "
            "stopped: fix the problem and start it again."
        )
        raise StartupError(message, code) from error
    console.status(f"The assistant is ready ({time.monotonic() - started:.1f} s after start).")
    return service


def _build_service(
    args: argparse.Namespace,
    settings: Settings,
    console: Console,
    overrides: Overrides,
    stack: ExitStack,
    health: dict[str, str],
) -> ConversationService:
    from conversations.assistant import TravelAssistant
    from server.service import ConversationService

    models = (overrides.model_factory or partial(default_model_factory, settings))(None)
    if overrides.model_factory is None and overrides.check_endpoint and not args.no_check:
        health["model_tools"] = check_endpoint(settings.models).verdict
    database = open_chat_db(settings, console, overrides, create_db=args.create_db)
    stack.callback(database.dispose)
    store = stack.enter_context(
        open_store(settings.conversations_location, pool_timeout=args.pool_timeout)
    )
    # Several workers (here or on other machines) over one PostgreSQL store take turns on
    # a conversation through its lock.
    return ConversationService.over_store(
        prepared(
            TravelAssistant.build(
                models,
                store.saver,
                db=database,
                tavily_api_key=settings.tavily_api_key,
            )
        ),
        store,
        check_above=agreed_check_above(settings, store),
    )


def _lifetime(args: argparse.Namespace) -> timedelta:
    from server.auth import MAX_LIFETIME

    # Checked as a number before it becomes a duration, which nan, inf and 1e20 break
    # (NaN compares false, so it fails this check too).
    longest = MAX_LIFETIME.total_seconds() / 3600
    if not 1 / 60 <= args.hours <= longest:
        raise CliError(f"--hours must be between 1/60 and {longest:g} hours.", EXIT_USAGE)
    return timedelta(hours=args.hours)


# What each member of staff's token can do, as ``token`` says it (docs/desk.md has the table).
_CAN_DO = {
    "supervisor": "it reads every conversation and the audit log and, at the desk, takes "
    "conversations, writes to customers, hands them back, proposes actions and decides "
    "second approvals (never one it proposed: another member of staff must); every look and "
    "every act is recorded. Open http://127.0.0.1:8000/supervisor#token=<token>.",
    "agent": "at the desk it reads the queue and the conversations waiting in it or that it "
    "holds, takes conversations, writes to customers, hands them back and proposes actions; "
    "it does not decide second approvals, nor read other conversations or the audit log (a "
    "supervisor's token does); every look and every act is recorded. Use it with the desk's "
    "API under /api/v1/supervisor/desk (the page at /supervisor takes supervisors' tokens).",
}


def _staff_token(
    args: argparse.Namespace, settings: Settings, console: Console, role: StaffRole
) -> int:
    """Print a member of staff's token (an agent's or a supervisor's); say what it can do."""
    from server.auth import MAX_SUBJECT_CHARS, subject_problem

    flag = f"--{role}"
    login = " ".join(getattr(args, role).split())
    # The limit is what the desk stores of a login or a name, so what is compared and
    # shown is what was given.
    if not login or subject_problem(login) is not None:
        raise CliError(
            f"{flag} takes who you are, as the audit log records it (printable, at most "
            f"{MAX_SUBJECT_CHARS} characters), e.g. {flag} ana@example.com.",
            EXIT_USAGE,
        )
    name = None if args.name is None else " ".join(args.name.split())
    if name is not None and (not name or subject_problem(name) is not None):
        raise CliError(
            f"--name takes the name customers see (printable, at most {MAX_SUBJECT_CHARS} "
            "characters), e.g. --name 'Ana Lima'.",
            EXIT_USAGE,
        )
    lifetime = _lifetime(args)
    token = _signer(settings).issue(login, lifetime, role=role, name=name)
    console.say(token)
    shown = (
        f'customers see "{name}"'
        if name is not None
        else f'customers see "{login}": give --name NAME to show a name instead'
    )
    console.status(
        f"{role.capitalize()} token for {login} ({shown}), valid for {args.hours:g} hours: "
        + _CAN_DO[role]
    )
    return EXIT_OK


def _unknown_passenger(location: Location, passenger_id: str) -> CliError:
    return CliError(
        f"No passenger with id {passenger_id!r} in {location.shown()}. "
        "Check the id on the ticket (it looks like '3442 587242').",
        EXIT_USAGE,
    )


def cmd_token(
    args: argparse.Namespace, settings: Settings, console: Console, overrides: Overrides
) -> int:
    """Run ``travel-assistant token``: print a passenger's or a member of staff's token on stdout.

    ``--supervisor LOGIN`` or ``--agent LOGIN`` (with ``--name NAME``, the name customers
    see) for staff, ``--passenger-id ID`` for a passenger.
    """
    if args.supervisor is not None:
        return _staff_token(args, settings, console, "supervisor")
    if args.agent is not None:
        return _staff_token(args, settings, console, "agent")
    if args.name is not None:
        raise CliError(
            "--name is the name a member of staff goes by (with --agent or --supervisor); a "
            "passenger's token carries none.",
            EXIT_USAGE,
        )
    passenger_id = canonical_passenger_id(args.passenger_id)
    if not passenger_id:
        raise CliError("--passenger-id is empty, e.g. --passenger-id '3442 587242'.", EXIT_USAGE)
    lifetime = _lifetime(args)
    # The secret next: a refusal must come before a database is opened, or built.
    signer = _signer(settings)
    location = settings.db_location
    # A database named by --db (or the environment) must exist, as for chat: a token for
    # a database built on the spot by a typo would name a passenger nobody booked.
    named = bool(settings.db)
    if named and location.path is not None and not location.path.exists():
        raise CliError(
            f"No travel database at {location.shown()}. Build it with: travel-assistant db "
            f"init --db {shlex.quote(location.for_command())}",
            EXIT_USAGE,
        )
    # A SQLite file is asked with the standard library's driver first: an unknown
    # passenger is said before SQLAlchemy loads.
    path = location.path
    if path is not None and path.exists() and known_passenger(path, passenger_id) is False:
        raise _unknown_passenger(location, passenger_id)
    from db.passengers import passenger_exists  # SQLAlchemy: after the checks that need none

    database = open_travel_db(
        location,
        console,
        build_if_missing=not named,
        clock=overrides.clock,
        data_dir=settings.data_dir,
    )
    try:
        with database.session() as session:
            known = passenger_exists(session, passenger_id)
    finally:
        database.dispose()
    if not known:
        raise _unknown_passenger(location, passenger_id)
    token = signer.issue(passenger_id, lifetime)
    console.say(token)
    console.status(
        f"Token for passenger {passenger_id}, valid for {args.hours:g} hours. Send it as "
        "'Authorization: Bearer <token>', paste it on the web chat page, or open "
        f"(with serve's default address) http://127.0.0.1:8000/#token={token}",
        wrap=False,
    )
    return EXIT_OK
