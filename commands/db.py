"""``travel-assistant db init``: (re)build the travel database."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from commands.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    create_server_database,
    server_problem,
)
from terminal import Console

if TYPE_CHECKING:
    from pathlib import Path

    from db.generate import BuildReport
    from locations import Location
    from settings import Settings


def cmd_db_init(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``travel-assistant db init``."""
    from db.engine import Database
    from db.generate import MAX_SCALE, build_database

    if not 1 <= args.scale <= MAX_SCALE:
        raise CliError(f"--scale must be between 1 and {MAX_SCALE}.", EXIT_USAGE)
    location = settings.db_location
    if location.path is None:
        return _db_init_server(args, settings.data_dir, console, location)
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
        f"Building the travel database at {path} (scale {args.scale}, seed {args.seed}"
        f"{_relative_to(args)})..."
    )
    database = Database.from_url(str(partial), data_dir=settings.data_dir)
    try:
        report = build_database(database, seed=args.seed, scale=args.scale, now=args.date)
    finally:
        database.dispose()
    partial.replace(path)
    _report_build(console, report)
    return EXIT_OK


def _db_init_server(
    args: argparse.Namespace, data_dir: Path | None, console: Console, location: Location
) -> int:
    """Run ``db init`` on a server database (PostgreSQL): create it when missing, then build.

    The tables are dropped and made again in place, so ``--force`` is needed when the
    database already holds a travel database.
    """
    from sqlalchemy.exc import OperationalError

    from db.engine import Database
    from db.generate import build_database
    from locations import database_missing

    database = Database.from_url(location.sqlalchemy_url(), data_dir=data_dir)
    try:
        try:
            built = database.has_schema()
        except OperationalError as error:
            if not database_missing(getattr(error, "orig", None) or error):
                raise CliError(server_problem(location, error), EXIT_USAGE) from error
            database.dispose()
            create_server_database(location, console)
            built = False
        if built and not args.force:
            raise CliError(
                f"{location.shown()} already holds a travel database. Pass --force to rebuild "
                "it (the bookings made in it are lost).",
                EXIT_USAGE,
            )
        console.status(
            f"Building the travel database at {location.shown()} "
            f"(scale {args.scale}, seed {args.seed}{_relative_to(args)})..."
        )
        try:
            report = build_database(database, seed=args.seed, scale=args.scale, now=args.date)
        except OperationalError as error:
            raise CliError(server_problem(location, error)) from error
    finally:
        database.dispose()
    _report_build(console, report)
    return EXIT_OK


def _relative_to(args: argparse.Namespace) -> str:
    """Say which moment the data is relative to, when ``--date`` gave one."""
    return f", relative to {args.date.isoformat()}" if args.date is not None else ""


def _report_build(console: Console, report: BuildReport) -> None:
    counts = ", ".join(
        f"{n} {t}"
        for t, n in report.counts.items()
        if t in ("flights", "tickets", "ticket_flights")
    )
    console.status(f"Done in {report.seconds:.1f} s: {counts}.")
