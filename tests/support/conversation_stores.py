"""Conversation stores for tests: is PostgreSQL there, and a scratch store on either engine.

``postgres_unreachable`` says why the test server cannot be used (or ``None``), so that a
test skips with that reason; ``scratch_conversations`` yields the ``--conversations``
value of an empty store: a file path on SQLite, the URL of a scratch database (dropped
afterwards) on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.support import postgres


def postgres_unreachable() -> str | None:
    """Say why PostgreSQL cannot be used by the tests, or ``None`` when it answers."""
    try:
        import psycopg
    except ImportError:
        # The default run needs only the ``dev`` extra: without the driver, skip.
        return 'psycopg is not installed: pip install -e ".[postgres]" to run the PostgreSQL tests'
    url = postgres.server_url()
    try:
        with psycopg.connect(postgres._libpq(url), connect_timeout=3):
            return None
    except psycopg.Error as error:
        cause = str(error).strip().splitlines()[0] if str(error).strip() else "no answer"
        shown = make_url(url).render_as_string()  # the password hidden
        return (
            f"PostgreSQL at {shown} is unreachable ({cause}); start it, or set "
            f"{postgres.SERVER_ENV} to a server, to run the PostgreSQL tests"
        )


def require_postgres() -> None:
    """Skip the calling test, saying why, when PostgreSQL cannot be used."""
    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(reason)


@contextmanager
def scratch_conversations(engine: str, folder: Path) -> Iterator[str]:
    """Yield where an empty conversation store lives on ``engine``."""
    if engine == "sqlite":
        yield str(folder / "conversations" / "sessions.sqlite")
        return
    require_postgres()
    with postgres.scratch_database() as url:
        yield url
