"""Issue 29: a reader that looks at a store while a run creates it (migrates it) sees it
before or after, never half of each. The identity check made two reads on an autocommit
connection, "is there a meta table?" then "how many tables?": a migration committing
between them made the reader call its own store foreign ("this SQLite file is not an
Oloproof store"). Real SQLite files; the migration is committed by a second, real
connection exactly between the reader's statements."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from oloproof.store.db import _check_identity, open_store


class _CommitsBetween(sqlite3.Connection):
    """A real sqlite3 connection that runs ``between`` once, right after its first SELECT
    (as a run's migration can commit between two statements of a reader)."""

    between: Any = None

    def execute(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
        cursor = super().execute(sql, *args)
        if self.between is not None and sql.lstrip().upper().startswith("SELECT"):
            rows = cursor.fetchall()
            between, self.between = self.between, None
            between()
            return _Rows(rows)
        return cursor


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows


def test_a_store_migrated_between_two_reads_is_read_as_one_or_the_other(tmp_path: Path) -> None:
    db = tmp_path / ".oloproof" / "store.sqlite"
    db.parent.mkdir()
    # The state a run leaves for a moment: the file made and switched to WAL, no tables.
    made = sqlite3.connect(db)
    made.execute("PRAGMA journal_mode = WAL")
    made.close()
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None,
                             factory=_CommitsBetween)
    migrated: list[sqlite3.Connection] = []

    def run_creates_the_store() -> None:
        migrated.append(open_store(db))  # creates and commits every table, schema 3

    reader.between = run_creates_the_store  # type: ignore[attr-defined]
    try:
        version = _check_identity(reader, db)
    finally:
        reader.close()
        for conn in migrated:
            conn.close()
    # Read in one snapshot: the store as it was when the check began (no tables yet).
    assert migrated and version == 0
    # And as it is now, by a reader that starts after.
    after = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        assert _check_identity(after, db) >= 3
    finally:
        after.close()
