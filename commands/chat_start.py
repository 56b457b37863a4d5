"""A chat that takes input before its graph is built: the slow part loads in a thread.

``travel-assistant chat`` spends about two seconds importing LangChain and LangGraph,
building the graph, reading the policy index and asking the model endpoint whether it
answers. None of it is needed to draw ``you>``: the customer types the first line while
it finishes in the background (``loading``); the chat itself (``terminal.chat``, which
imports LangChain too) starts when that line is entered, and gets it first
(``FirstLine``). A problem the load found (no model endpoint, a missing policy file) is
raised then, as the same one-line error the chat gave before its prompt when it loaded
everything first.

The checks that need nothing slow run before the prompt, so that a wrong passenger id
or conversation is said at once: ``known_passenger`` asks a SQLite travel database with
the standard library's driver alone, ``saved_owner`` the conversations store (with
psycopg alone when it is PostgreSQL).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from terminal.prompter import EXIT_WORDS, clean_input

if TYPE_CHECKING:
    from locations import Location

T = TypeVar("T")


def loading(work: Callable[[], T]) -> Future[T]:
    """Return the future of ``work``, started now in a daemon thread.

    A daemon thread (an executor's would be waited for at exit), so that a customer who
    leaves before it is done is not kept waiting.
    """
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as error:  # handed to whoever waits, re-raised there
            future.set_exception(error)

    threading.Thread(target=run, name="chat-loading", daemon=True).start()
    return future


class FirstLine:
    """The first line the customer typed, read before the chat was ready for it.

    ``read`` gives it back once, as the prompt gave it (a line, or the ``EOFError`` or
    ``KeyboardInterrupt`` that ended the prompt), then reads on with ``then``.
    """

    def __init__(self, prompt: Callable[[str], str], message: str) -> None:
        """Read one line with ``prompt`` at ``message``."""
        self._line: str | None = None
        self._ended: BaseException | None = None
        try:
            self._line = prompt(message)
        except (EOFError, KeyboardInterrupt) as ended:
            self._ended = ended
        self._given = False

    @property
    def message(self) -> str | None:
        """Return the line when it is a message for the assistant (not a command)."""
        text = clean_input(self._line or "")
        if not text or text.startswith("/") or text.lower() in EXIT_WORDS:
            return None
        return text

    def drop(self) -> None:
        """Forget the line: the next read prompts afresh."""
        self._given = True

    def reader(self, then: Callable[[str], str]) -> Callable[[str], str]:
        """Return a prompt that gives the first line back, then reads with ``then``."""

        def read(message: str) -> str:
            if self._given:
                return then(message)
            self._given = True
            if self._ended is not None:
                raise self._ended
            return self._line or ""

        return read


def known_passenger(path: Path, passenger_id: str) -> bool | None:
    """Ask the SQLite travel database at ``path`` whether ``passenger_id`` is a passenger.

    Opened read-only, with the standard library's driver (SQLAlchemy takes a few tenths
    of a second to import). ``None`` when it cannot tell: the file is not a travel
    database yet, or not a database at all; the full check then runs as before.
    """
    try:
        connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = connection.execute(
            "SELECT 1 FROM passengers WHERE passenger_id = ?", (passenger_id,)
        ).fetchone()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    return row is not None


def saved_owner(location: Location, thread_id: str) -> str | None:
    """Return the passenger of the saved conversation ``thread_id`` where ``location`` says.

    ``""`` when there is no such conversation there (no file yet, or no row), ``None``
    when it cannot tell (not a sessions file, no table, no driver): the full check then
    runs as before, when the store is opened. Nothing slow is imported and nothing is
    created: a SQLite file is opened with the standard library's driver, without creating
    it (``mode=rw``: a read-only connection would leave the WAL's files behind);
    PostgreSQL is asked with psycopg alone, and a server that cannot be reached is said
    here as ``open_store`` says it (raised as ``commands.common.CliError``).
    """
    if location.path is not None:
        if not location.path.exists():
            return ""
        try:
            connection = sqlite3.connect(f"{location.path.absolute().as_uri()}?mode=rw", uri=True)
        except sqlite3.Error:
            return None
        try:
            row = connection.execute(
                "SELECT passenger_id FROM travel_sessions WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        except sqlite3.Error:
            return None
        finally:
            connection.close()
        return str(row[0]) if row else ""
    if location.backend != "postgresql":
        return None
    return _postgres_owner(location, thread_id)


def _postgres_owner(location: Location, thread_id: str) -> str | None:
    try:
        import psycopg
    except ImportError:
        return None  # the store says what to install
    from commands.common import EXIT_USAGE, CliError
    from locations import CONNECT_TIMEOUT_SECONDS, describe_connect_error

    try:
        connection: Any = psycopg.connect(
            location.libpq(), autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
        )
    except psycopg.Error as error:
        raise CliError(describe_connect_error(location, error), EXIT_USAGE) from error
    try:
        with connection:
            row = connection.execute(
                "SELECT passenger_id FROM travel_sessions WHERE thread_id = %s", (thread_id,)
            ).fetchone()
    except psycopg.errors.UndefinedTable:
        return ""  # a database the store has not set up yet holds no conversation
    except psycopg.Error:
        return None
    return str(row[0]) if row else ""
