"""``db init --seed N --date D`` twice gives the same database, row for row (issue 27).

The data is relative to a moment (flights before and after it, bookings made before
it); with the seed, ``--date`` fixes it, so two builds made at different times of day
are identical. The comparison is of the two databases' SQL dumps.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

from tests.support.cli import run


def dump_digest(path: Path) -> str:
    connection = sqlite3.connect(path)
    try:
        digest = hashlib.sha256()
        for line in connection.iterdump():
            digest.update(line.encode())
        return digest.hexdigest()
    finally:
        connection.close()


def test_db_init_same_seed_and_date_same_data(tmp_path: Path) -> None:
    first, second = tmp_path / "first.sqlite", tmp_path / "second.sqlite"
    built = run(["db", "init", "--db", str(first), "--seed", "7", "--date", "2026-03-01"])
    assert built.code == 0, built.err
    assert "relative to 2026-03-01T12:00:00+00:00" in built.err
    time.sleep(1.1)  # a later moment of the day: the data must not follow it
    again = run(["db", "init", "--db", str(second), "--seed", "7", "--date", "2026-03-01"])
    assert again.code == 0, again.err
    assert dump_digest(first) == dump_digest(second)
