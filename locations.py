"""Where a database is: a SQLite file or a server URL, as the user named it.

The travel database (``--db``) and the conversations (``--conversations``) are both named
this way: ``Location.parse`` reads a path or a SQLAlchemy URL, checks the driver and keeps
the password out of everything shown. The connection errors both report are phrased here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = [
    "INSTALL_POSTGRES",
    "Location",
    "LocationError",
    "create_postgres_database",
    "database_missing",
    "describe_connect_error",
]

INSTALL_POSTGRES = 'pip install -e ".[postgres]"'
CONNECT_TIMEOUT_SECONDS = 10
# The SQLSTATE of CREATE DATABASE for a database that exists.
DUPLICATE_DATABASE = "42P04"


class LocationError(Exception):
    """A path or URL that cannot be used, or a server that refused; the message names the fix."""


@dataclass(frozen=True)
class Location:
    """A database named by the user: a SQLite file, or a server URL.

    Attributes:
        given: The text as given (a path or a URL); it may hold a password.
        backend: ``sqlite``, ``postgresql`` or another SQLAlchemy backend name.
        path: The file of a SQLite database (``None`` for a server).
        url: The SQLAlchemy URL of a server database, its driver made explicit
            (``postgresql://`` means psycopg 3, the driver the extra installs).
    """

    given: str
    backend: str
    path: Path | None = None
    url: URL | None = None
    display: str = ""

    @classmethod
    def parse(cls, text: str | Path) -> Location:
        """Read a path or a SQLAlchemy URL.

        Raises:
            LocationError: An empty value, a URL that cannot be read, or a SQLite URL
                without a file.
        """
        given = str(text).strip()
        if not given:
            raise LocationError("The database location is empty: give a file path or a URL.")
        if "://" not in given:
            return cls(given, "sqlite", path=Path(given).expanduser())
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(given)
        except (ArgumentError, ValueError) as error:
            raise LocationError(
                f"{_mask(given)} is not a database URL; write it as "
                "postgresql+psycopg://USER@HOST:5432/NAME, sqlite:///PATH, or give a file path."
            ) from error
        backend = url.get_backend_name()
        if backend == "sqlite":
            if not url.database or url.database == ":memory:":
                raise LocationError(
                    f"{given} names no file: write sqlite:///PATH (four slashes for an "
                    "absolute path), or give the path itself."
                )
            return cls(given, "sqlite", path=Path(url.database).expanduser())
        shown = _hide_password(url)
        if backend in ("postgresql", "postgres"):
            driver = url.get_driver_name() if "+" in url.drivername else "psycopg"
            url = url.set(drivername=f"postgresql+{driver}")
            backend = "postgresql"
        return cls(given, backend, url=url, display=shown)

    @property
    def is_file(self) -> bool:
        """Tell whether this is a SQLite file."""
        return self.path is not None

    @property
    def has_password(self) -> bool:
        """Tell whether the URL carries a password (in its user part or its query)."""
        return self.url is not None and bool(self.url.password or self.url.query.get("password"))

    def sqlalchemy_url(self) -> str:
        """Return what ``db.engine.Database.from_url`` takes: the path, or the full URL."""
        if self.path is not None:
            return str(self.path)
        assert self.url is not None
        return self.url.render_as_string(hide_password=False)

    def libpq(self) -> str:
        """Return the URL as libpq (psycopg) takes it: ``postgresql://…``."""
        assert self.url is not None
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    def shown(self) -> str:
        """Return the location as it may be printed: the path, or the URL without password."""
        if self.path is not None:
            return str(self.path)
        return self.display or _mask(self.given)

    def for_command(self) -> str:
        """Return the location for a command line to repeat: an absolute path, or the URL.

        The URL keeps its form, with any password shown as ``***``.
        """
        if self.path is not None:
            if "://" in self.given:
                return f"sqlite:///{self.path.absolute()}"
            return str(self.path.absolute())
        return self.shown()

    def check_driver(self) -> None:
        """Check that the driver of a server URL can be imported.

        Raises:
            LocationError: The SQLAlchemy dialect is unknown, or its driver is not
                installed (for PostgreSQL the message names the extra to install).
        """
        if self.url is None:
            return
        from sqlalchemy.exc import NoSuchModuleError

        try:
            self.url.get_dialect().import_dbapi()
        except NoSuchModuleError as error:
            raise LocationError(
                f"{self.shown()}: SQLAlchemy has no database type {self.url.drivername!r}; "
                "use a SQLite file or postgresql+psycopg://USER@HOST:5432/NAME."
            ) from error
        except ImportError as error:
            if self.backend == "postgresql":
                raise LocationError(
                    f"PostgreSQL support is not installed (no {error.name or 'driver'} "
                    f"module); install the extra: {INSTALL_POSTGRES}"
                ) from error
            raise LocationError(
                f"The driver of {self.url.drivername} is not installed ({error})."
            ) from error


def _hide_password(url: URL) -> str:
    """Return ``url`` as text with its password, wherever it is, shown as ``***``."""
    if url.query.get("password"):
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)


def _mask(text: str) -> str:
    """Return ``text`` with the password of a URL in it replaced by ``***``."""
    if "://" not in text:
        return text
    scheme, _, rest = text.partition("://")
    authority, slash, tail = rest.partition("/")
    credentials, at, host = authority.rpartition("@")
    if not at or ":" not in credentials:
        return text
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}{slash}{tail}"


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def database_missing(error: BaseException) -> bool:
    """Tell whether a connection failed because the PostgreSQL database does not exist."""
    if getattr(error, "sqlstate", None) == "3D000":
        return True
    return bool(re.search(r'database "[^"]*" does not exist', str(error)))


def describe_connect_error(location: Location, error: BaseException) -> str:
    """Say why a server database cannot be reached, and what to do."""
    reason = first_line(error).removeprefix("connection failed: ")
    if database_missing(error):
        name = location.url.database if location.url is not None else "?"
        return (
            f"The PostgreSQL database {name!r} at {location.shown()} does not exist. "
            f"Create it first, for example: createdb {name}"
        )
    return f"Cannot connect to PostgreSQL at {location.shown()}: {reason}"


def create_postgres_database(location: Location) -> None:
    """Create the database a PostgreSQL URL names, connecting to the server's ``postgres``.

    Raises:
        LocationError: The server refused (no right to create databases, or
            it cannot be reached); the message says what to do.
    """
    import sqlalchemy as sa

    assert location.url is not None and location.url.database
    name = location.url.database
    engine = sa.create_engine(
        location.url.set(database="postgres"),
        isolation_level="AUTOCOMMIT",  # CREATE DATABASE cannot run in a transaction
        poolclass=sa.pool.NullPool,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS},
    )
    quoted = engine.dialect.identifier_preparer.quote_identifier(name)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {quoted}")
    except sa.exc.DBAPIError as error:
        if getattr(error.orig, "sqlstate", None) == DUPLICATE_DATABASE:
            return  # made in the meantime: fine
        raise LocationError(
            f"Cannot create the PostgreSQL database {name!r} at {location.shown()}: "
            f"{first_line(error.orig or error).removeprefix('connection failed: ')}. "
            f"Create it yourself (for example: createdb {name}) and run the command again."
        ) from error
    finally:
        engine.dispose()
