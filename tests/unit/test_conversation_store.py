"""Where conversations live (``conversations.store``): locations, stores, turn locks.

Locations read paths and URLs, keep passwords out of what is shown and name the extra
to install when the driver is missing. A store opens an existing home's
``sessions.sqlite`` as it is. The turn lock keeps a conversation to one turn at a time
between threads and between processes, on SQLite and on PostgreSQL, and a lock whose
holder was killed with SIGKILL is taken by the next one. The PostgreSQL cases skip,
saying why, when the server cannot be reached.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from conversations.sessions import SessionRegistry
from conversations.store import (
    ConversationBusyError,
    ConversationStore,
    ConversationStoreError,
    lock_file_of,
)
from locations import INSTALL_POSTGRES, Location, LocationError
from tests.support import postgres
from tests.support.conversation_stores import require_postgres, scratch_conversations
from tests.support.databases import FIXED_NOW

REPO = Path(__file__).resolve().parents[2]

# A process that takes a conversation's turn lock, says so, and keeps it until killed.
HOLDER = """
import sys, time
from conversations.store import ConversationStore
store = ConversationStore.open(sys.argv[1])
lease = store.acquire(sys.argv[2])
print("held", flush=True)
time.sleep(120)
"""

# A process that tries once to take a conversation's turn lock and says whether it could.
TAKER = """
import sys
from conversations.store import ConversationBusyError, ConversationStore
with ConversationStore.open(sys.argv[1]) as store:
    try:
        store.acquire(sys.argv[2]).release()
    except ConversationBusyError:
        print("busy")
    else:
        print("taken")
"""


def _take_in_another_process(where: str, thread_id: str) -> str:
    """Return what ``TAKER`` says: ``busy`` or ``taken``."""
    done = subprocess.run(
        [sys.executable, "-c", TAKER, where, thread_id],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# --- locations -------------------------------------------------------------------------


def test_store_location_reads_paths_and_urls(tmp_path: Path) -> None:
    plain = Location.parse(tmp_path / "s.sqlite")
    assert plain.is_file and plain.path == tmp_path / "s.sqlite"
    assert Location.parse("~/x.sqlite").path == Path.home() / "x.sqlite"
    as_url = Location.parse(f"sqlite:///{tmp_path}/s.sqlite")
    assert as_url.path == tmp_path / "s.sqlite"
    assert as_url.for_command() == f"sqlite:///{tmp_path}/s.sqlite"
    for text in ("postgresql://app@db:5432/travel", "postgres://app@db:5432/travel"):
        server = Location.parse(text)
        assert server.backend == "postgresql" and not server.is_file
        # psycopg 3, the driver the extra installs, rather than SQLAlchemy's psycopg2.
        assert server.sqlalchemy_url() == "postgresql+psycopg://app@db:5432/travel"
        assert server.libpq() == "postgresql://app@db:5432/travel"
        assert server.for_command() == text
    kept = Location.parse("postgresql+psycopg2://app@db/travel")
    assert kept.sqlalchemy_url() == "postgresql+psycopg2://app@db/travel"


def test_store_location_never_shows_a_password() -> None:
    secret = Location.parse("postgresql+psycopg://app:s3cret@db:5432/travel")
    assert secret.has_password
    assert secret.shown() == "postgresql+psycopg://app:***@db:5432/travel"
    assert secret.for_command() == secret.shown()
    assert "s3cret" in secret.libpq()  # what connects keeps it
    in_query = Location.parse("postgresql://app@db/travel?password=s3cret&sslmode=require")
    assert in_query.has_password and "s3cret" not in in_query.shown()
    assert "sslmode=require" in in_query.shown()
    assert not Location.parse("postgresql://app@db/travel").has_password
    with pytest.raises(LocationError) as refused:
        Location.parse("postgresql://app:s3cret@db:port/travel")
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("sqlite://", "names no file"),
        ("sqlite:///:memory:", "names no file"),
        ("postgresql://app@db:notaport/travel", "not a database URL"),
    ],
)
def test_store_location_refuses_what_it_cannot_use(text: str, words: str) -> None:
    with pytest.raises(LocationError, match=words):
        Location.parse(text)


def test_store_location_unknown_database_type() -> None:
    with pytest.raises(LocationError, match="no database type 'http'"):
        Location.parse("http://example.com/travel").check_driver()


def test_store_location_without_the_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(LocationError) as missing:
        Location.parse("postgresql+psycopg://app@db/travel").check_driver()
    assert INSTALL_POSTGRES in str(missing.value) and "psycopg" in str(missing.value)
    with pytest.raises(LocationError, match=r"\.\[postgres\]"):
        ConversationStore.open("postgresql://app@db/travel")


def test_store_refuses_an_engine_it_does_not_keep_conversations_in() -> None:
    with pytest.raises(LocationError, match="SQLite file or in PostgreSQL"):
        ConversationStore.open("mysql+pymysql://app@db/travel")


# --- SQLite ----------------------------------------------------------------------------


def test_store_opens_an_existing_home_as_it_is(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "sessions.sqlite"
    connection = sqlite3.connect(path)
    SqliteSaver(connection).setup()
    SessionRegistry(connection).touch("t-old", "3442 587242", FIXED_NOW, "move my flight")
    connection.close()
    with ConversationStore.open(path) as store:
        (record,) = store.registry.list("3442 587242")
        assert (record.thread_id, record.title, record.updated_at) == (
            "t-old",
            "move my flight",
            FIXED_NOW,
        )
        store.registry.touch("t-old", "3442 587242", FIXED_NOW + timedelta(hours=1), "other")
    # The file keeps the layout every version reads: text timestamps, the first title.
    row = sqlite3.connect(path).execute("SELECT title, updated_at FROM travel_sessions").fetchone()
    assert row == ("move my flight", (FIXED_NOW + timedelta(hours=1)).isoformat())


def test_store_a_new_sessions_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "home" / "sessions.sqlite"
    with ConversationStore.open(path) as store:
        store.registry.touch("t-1", "3442 587242", FIXED_NOW, "move my flight")
    for made in (path, *path.parent.glob("sessions.sqlite-*")):
        assert made.stat().st_mode & 0o077 == 0, (made, oct(made.stat().st_mode))


def test_store_refuses_an_unreadable_sessions_file(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConversationStoreError, match="Move it aside"):
        ConversationStore.open(path)


def test_store_on_sqlite_never_imports_the_postgresql_driver(tmp_path: Path) -> None:
    # The fenced pool is made only when a PostgreSQL store opens (conversations.fences).
    code = (
        "import sys\n"
        "from conversations.store import ConversationStore\n"
        "with ConversationStore.open(sys.argv[1]) as store, store.turn_lock('t-1'):\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "sessions.sqlite")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "[]"


def test_store_turn_lock_between_threads_and_stores(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    with ConversationStore.open(path) as first, ConversationStore.open(path) as second:
        lease = first.acquire("t-1")
        assert first.busy("t-1") and second.busy("t-1")
        with pytest.raises(ConversationBusyError, match="busy"):
            second.acquire("t-1")
        started = time.monotonic()
        with pytest.raises(ConversationBusyError):
            second.acquire("t-1", wait=0.3)
        assert time.monotonic() - started >= 0.3
        with second.turn_lock("t-2"):  # another conversation is free
            assert second.busy("t-2")
        # The holder lets go while the other waits: the waiter gets in.
        threading.Timer(0.2, lease.release).start()
        with second.turn_lock("t-1", wait=5):
            assert first.busy("t-1")
        assert not first.busy("t-1")
    assert lock_file_of(path).exists()


def test_store_closing_one_store_keeps_the_others_locks(tmp_path: Path) -> None:
    """POSIX drops a process's locks on a file when any of its descriptors closes."""
    path = tmp_path / "sessions.sqlite"
    holder = ConversationStore.open(path)
    lease = holder.acquire("t-1")
    ConversationStore.open(path).close()
    child = _spawn_holder(str(path), "t-1", expect_held=False)
    try:
        # The other process cannot take it: this process still holds it.
        assert child.wait(timeout=60) != 0
    finally:
        lease.release()
        holder.close()


def test_store_closing_the_last_store_mid_turn_keeps_the_turns_lock(tmp_path: Path) -> None:
    """A turn that outlives every store of its sessions file keeps its conversation.

    The process's one descriptor of the lock file stays open while a turn holds a lock on
    it, though no store uses it any more: closing it would drop the lock, and another
    process could take the conversation in the middle of the turn.
    """
    path = tmp_path / "sessions.sqlite"
    holder, other = ConversationStore.open(path), ConversationStore.open(path)
    lease = holder.acquire("t-1")
    holder.close()
    other.close()  # the last store of the file: the turn still runs
    try:
        assert _take_in_another_process(str(path), "t-1") == "busy"
    finally:
        lease.release()
    # Released, the conversation is free for the other process (and the refusal above was
    # the lock's).
    assert _take_in_another_process(str(path), "t-1") == "taken"


# --- across processes, both engines ------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def conversations(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with scratch_conversations(request.param, tmp_path) as where:
        yield where


def _spawn_holder(where: str, thread_id: str, *, expect_held: bool = True) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, where, thread_id],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if expect_held:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "held", child.stderr.read() if child.stderr else line
    return child


def test_store_turn_lock_across_processes_and_after_sigkill(conversations: str) -> None:
    with ConversationStore.open(conversations) as store:
        child = _spawn_holder(conversations, "t-1")
        try:
            assert store.busy("t-1")
            with pytest.raises(ConversationBusyError):
                store.acquire("t-1", wait=0.5)
            with store.turn_lock("t-2"):  # only that conversation is held
                pass
            os.kill(child.pid, signal.SIGKILL)  # the holder dies without letting go
            child.wait(timeout=30)
            started = time.monotonic()
            with store.turn_lock("t-1", wait=10):
                assert store.busy("t-1")
            assert time.monotonic() - started < 5
            assert not store.busy("t-1")
        finally:
            if child.poll() is None:
                child.kill()
            child.communicate()


# --- PostgreSQL --------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[str]:
    require_postgres()
    with postgres.scratch_database() as url:
        yield url


def test_store_postgres_registry(pg_url: str) -> None:
    with ConversationStore.open(pg_url) as store:
        registry = store.registry
        assert registry.get("t-1") is None and registry.list() == []
        registry.touch("t-1", "3442 587242", FIXED_NOW, "move my flight")
        registry.touch("t-2", "8149 604011", FIXED_NOW + timedelta(minutes=5), "a\x00b")
        registry.touch("t-1", "3442 587242", FIXED_NOW + timedelta(minutes=9), "ignored")
        record = registry.get("t-1")
        assert record is not None
        assert (record.title, record.created_at, record.updated_at) == (
            "move my flight",
            FIXED_NOW,
            FIXED_NOW + timedelta(minutes=9),
        )
        assert [r.thread_id for r in registry.list()] == ["t-1", "t-2"]
        assert [r.thread_id for r in registry.list("8149 604011")] == ["t-2"]
        assert registry.get("t-2") is not None and registry.get("t-2").title == "ab"  # type: ignore[union-attr]
        assert registry.list(limit=1)[0].thread_id == "t-1"
        assert registry.delete("t-1") and not registry.delete("t-1")
    with ConversationStore.open(pg_url) as again:  # set up twice: nothing is lost
        assert [r.thread_id for r in again.registry.list()] == ["t-2"]


def _turn_connections(url: str) -> int:
    import psycopg

    with psycopg.connect(postgres._libpq(postgres.server_url()), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
            "AND application_name LIKE 'travel-assistant turn%%'",
            (postgres.database_name(url),),
        ).fetchone()
    return int(row[0]) if row else 0


def test_store_postgres_turn_lock_holds_a_connection_for_the_turn_only(pg_url: str) -> None:
    with ConversationStore.open(pg_url) as store, ConversationStore.open(pg_url) as other:
        with store.turn_lock("t-1"):
            assert _turn_connections(pg_url) == 1
            with pytest.raises(ConversationBusyError):
                other.acquire("t-1", wait=0.2)  # its attempt's connection is closed again
            assert other.busy("t-1")
        deadline = time.monotonic() + 10
        while _turn_connections(pg_url) and time.monotonic() < deadline:
            time.sleep(0.05)  # the server ends a closed session a moment later
        assert _turn_connections(pg_url) == 0
        assert not other.busy("t-1")
        other.acquire("t-1").release()


def test_store_postgres_turn_lock_says_when_the_server_cannot_be_reached() -> None:
    pytest.importorskip("psycopg")
    from conversations.locks import PostgresTurnLocks

    locks = PostgresTurnLocks(
        "postgresql+psycopg://app:s3cret@127.0.0.1:1/travel", probe=lambda key: False
    )
    with pytest.raises(ConversationStoreError) as refused:
        locks.acquire("t-1")
    message = str(refused.value)
    assert message.startswith("The conversations database cannot be reached to start this turn")
    assert "s3cret" not in message
    assert not locks.busy("t-1")  # the failed attempt holds nothing in this process either


def test_store_postgres_set_up_by_several_processes_at_once(pg_url: str) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            ConversationStore.open(pg_url).close()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []


def test_store_postgres_missing_database_names_the_fix() -> None:
    require_postgres()
    from sqlalchemy.engine import make_url

    url = make_url(postgres.server_url()).set(database="ta_test_missing_db")
    where = url.set(password="s3cret").render_as_string(hide_password=False)
    with pytest.raises(ConversationStoreError) as missing:
        ConversationStore.open(where)
    message = str(missing.value)
    assert "'ta_test_missing_db'" in message and "does not exist" in message
    assert "createdb ta_test_missing_db" in message and "s3cret" not in message


def test_create_postgres_database_makes_it_once_and_names_the_fix_when_refused() -> None:
    # ``--create-db``: the database is made on the server (its name quoted as given); made
    # in the meantime is fine; a server that refuses is said with what to do, no password.
    require_postgres()
    import uuid

    from sqlalchemy.engine import make_url

    from locations import create_postgres_database

    name = f"{postgres.PREFIX}Made-{uuid.uuid4().hex[:8]}"
    location = Location.parse(
        make_url(postgres.server_url()).set(database=name).render_as_string(hide_password=False)
    )
    try:
        create_postgres_database(location)
        create_postgres_database(location)  # there already: nothing to do
        with ConversationStore.open(location) as store:
            assert store.registry.list() == []
    finally:
        postgres._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    with pytest.raises(LocationError) as refused:
        create_postgres_database(
            Location.parse("postgresql+psycopg://app:s3cret@127.0.0.1:1/travel")
        )
    message = str(refused.value)
    assert message.startswith(
        "Cannot create the PostgreSQL database 'travel' at postgresql+psycopg://app:***@"
    )
    assert "createdb travel" in message and "s3cret" not in message


def test_store_postgres_unreachable_server_says_so() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ConversationStoreError) as refused:
        ConversationStore.open("postgresql+psycopg://app:s3cret@127.0.0.1:1/travel")
    message = str(refused.value)
    assert message.startswith("Cannot connect to PostgreSQL at postgresql+psycopg://app:***@")
    assert "s3cret" not in message
