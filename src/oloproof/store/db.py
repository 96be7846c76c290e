"""Opening the store: ``.oloproof/store.sqlite`` beside ``oloproof.yaml``.

WAL and a busy timeout let two runs on one project share the file without
corrupting each other; migrations run in one transaction each.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from oloproof.errors import StoreError
from oloproof.store.schema import MIGRATIONS, SCHEMA_VERSION

STORE_DIR = ".oloproof"
STORE_FILE = "store.sqlite"
BUSY_TIMEOUT_S = 30.0


def store_path(project_root: Path) -> Path:
    return project_root / STORE_DIR / STORE_FILE


def open_store(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """Open (and if needed create and migrate) the store at ``path``."""
    if not path.exists():
        if not create:
            raise StoreError(
                f"no store at {path}: nothing has been run in this project yet"
                " (run `oloproof run` first)"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        gitignore = path.parent / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("*\n")
    try:
        conn = connect(path)
        _migrate(conn, path)
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path}: cannot be read as an Oloproof store ({exc}); it was left as it is"
        ) from exc
    return conn


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the store file at ``path``, set up as every connection is:
    autocommit (transactions are explicit), WAL, a busy timeout."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    # Checkpoint the WAL into the database every 10,000 pages (40 MB) rather than
    # 1,000: a run of many cases checkpoints (and syncs) ten times less often.
    conn.execute("PRAGMA wal_autocheckpoint = 10000")
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: this store was written by a newer Oloproof (schema {current};"
            f" this version reads up to {SCHEMA_VERSION}). Upgrade oloproof to use it;"
            " the store was left untouched."
        )
    if current == SCHEMA_VERSION:
        return
    if current == 0:
        tables = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
        ).fetchone()[0]
        if tables:
            raise StoreError(
                f"{path}: this SQLite file is not an Oloproof store; it was left untouched"
            )
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated while we waited for the lock.
        current = schema_version(conn)
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(version),),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit on its own)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
