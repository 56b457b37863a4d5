"""A passed test's databases are removed as it ends; a failed test's are kept to look at.

Nearly every test copies the 32 MB test database into its ``tmp_path`` (``db_path``,
``db_url``; the scenarios copy it twice), and pytest keeps the temporary folders of the
last three runs, so a run used to leave several GB behind, three times over. The
conftest records whether each test's call passed and, once its fixtures are torn down
(engines disposed, servers stopped), calls ``remove_databases`` on its ``tmp_path``.
Everything else there (homes, logs, small files) stays, as do the run's shared templates,
which live outside any test's folder.
"""

from __future__ import annotations

from pathlib import Path

# SQLite databases and their companions (write-ahead log, shared memory, rollback journal).
DATABASE_PATTERNS = ("*.sqlite", "*.sqlite-wal", "*.sqlite-shm", "*.sqlite-journal")


def remove_databases(folder: Path) -> int:
    """Remove every SQLite database under ``folder``; return the bytes freed.

    Best effort: a file that is already gone, or cannot be removed, is left alone.
    """
    freed = 0
    for pattern in DATABASE_PATTERNS:
        for path in folder.rglob(pattern):
            try:
                size = path.lstat().st_size
                if path.is_symlink() or not path.is_file():
                    continue
                path.unlink()
            except OSError:
                continue
            freed += size
    return freed
