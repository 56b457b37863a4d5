"""Throw-away copies of a travel database, on SQLite or on PostgreSQL.

The evaluation runs every scenario over two fresh copies of one built database (the
assistant's and the gold one). A SQLite database is a file, copied with the file system.
A PostgreSQL database is copied by the server itself (``CREATE DATABASE ... TEMPLATE``),
which needs a database on the same server to send the command from (the ``postgres``
maintenance database) and no open connection to the template; the copy is dropped
afterwards with whatever is still connected to it.

``temporary_database`` makes an empty PostgreSQL database next to a given one, for a
template to be built into.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url

from db.clock import Clock, system_clock
from db.engine import Database, url_for

# PostgreSQL names are at most 63 bytes; the copies' names are plain ASCII.
_MAX_NAME = 63
_UNSAFE = re.compile(r"[^a-z0-9_]")
# The database the commands that create and drop databases are sent from.
MAINTENANCE_DATABASE = "postgres"


def is_postgresql(db: str | Path) -> bool:
    """Tell whether ``db`` (a path or URL) names a PostgreSQL database."""
    return make_url(url_for(db)).get_backend_name() == "postgresql"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _run_on_server(url: URL, statement: str) -> None:
    """Run one statement outside a transaction on the maintenance database of ``url``."""
    engine = create_engine(url.set(database=MAINTENANCE_DATABASE), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()


def _new_name(base: str, label: str) -> str:
    stem = _UNSAFE.sub("_", f"{base}_{label}".lower())
    suffix = f"_{uuid.uuid4().hex[:10]}"
    return stem[: _MAX_NAME - len(suffix)] + suffix


def create_copy(template: str, label: str) -> str:
    """Create a new PostgreSQL database as a copy of ``template`` and return its URL.

    Args:
        template: The URL of the database to copy; nothing may be connected to it.
        label: A word that goes into the new database's name.
    """
    url = make_url(template)
    source = url.database
    if not source:
        raise ValueError(f"{url.render_as_string()} names no database to copy")
    name = _new_name(source, label)
    _run_on_server(url, f"CREATE DATABASE {_quoted(name)} TEMPLATE {_quoted(source)}")
    return url.set(database=name).render_as_string(hide_password=False)


def drop(db_url: str) -> None:
    """Drop a PostgreSQL database, closing whatever is still connected to it."""
    url = make_url(db_url)
    if not url.database:
        raise ValueError(f"{url.render_as_string()} names no database to drop")
    _run_on_server(url, f"DROP DATABASE IF EXISTS {_quoted(url.database)} WITH (FORCE)")


@contextmanager
def temporary_database(near: str, label: str = "tmp") -> Iterator[str]:
    """Yield the URL of a new empty database on the server of ``near``, dropped afterwards."""
    url = make_url(near)
    name = _new_name(url.database or "travel", label)
    _run_on_server(url, f"CREATE DATABASE {_quoted(name)}")
    created = url.set(database=name).render_as_string(hide_password=False)
    try:
        yield created
    finally:
        drop(created)


@contextmanager
def database_copies(
    template: str | Path,
    folder: Path,
    names: Sequence[str],
    clock: Clock = system_clock,
    data_dir: Path | None = None,
) -> Iterator[list[Database]]:
    """Yield a ``Database`` over a private copy of ``template`` per name, removed afterwards.

    PostgreSQL copies are made, and dropped, side by side: the server spends most of
    the second or so each one takes waiting for its disk.

    Args:
        template: A SQLite file (path) or a PostgreSQL database (URL).
        folder: Where SQLite copies are written (they stay there; the folder is the
            caller's to remove).
        names: The copies' file names (``agent.sqlite``); for PostgreSQL, part of their
            database names.
        clock: The clock of the returned databases.
        data_dir: Their reference files' folder (the packaged one by default).
    """
    if not is_postgresql(template):
        source = make_url(url_for(template)).database or str(template)
        databases = []
        for name in names:
            shutil.copyfile(source, folder / name)
            databases.append(Database.from_url(str(folder / name), clock, data_dir))
        try:
            yield databases
        finally:
            for database in databases:
                database.dispose()
        return
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as workers:
        made = [workers.submit(create_copy, str(template), Path(name).stem) for name in names]
        urls = [future.result() for future in _all_done(made, drop, workers)]
        databases = [Database.from_url(url, clock, data_dir) for url in urls]
        try:
            yield databases
        finally:
            for database in databases:
                database.dispose()
            for future in [workers.submit(drop, url) for url in urls]:
                future.result()


def _all_done(
    made: list[Future[str]], undo: Callable[[str], None], workers: ThreadPoolExecutor
) -> list[Future[str]]:
    """Wait for every copy; if one failed, drop the others and raise its error."""
    failed = [future for future in made if future.exception() is not None]
    if failed:
        for future in made:
            if future.exception() is None:
                workers.submit(undo, future.result()).result()
        error = failed[0].exception()
        assert error is not None
        raise error
    return made


@contextmanager
def database_copy(
    template: str | Path, folder: Path, name: str, clock: Clock = system_clock
) -> Iterator[Database]:
    """Yield a ``Database`` over one private copy of ``template`` (see ``database_copies``)."""
    with database_copies(template, folder, [name], clock) as (database,):
        yield database
