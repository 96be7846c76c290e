"""What several commands share: finding the project's store, and opening it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from oloproof.errors import UsageError
from oloproof.store.db import open_store, open_store_readonly, store_path


def project_root(config: str) -> Path:
    path = Path(config)
    if not path.exists():
        raise UsageError(
            f"{config}: no such file; run this in a project directory or pass --config"
            " (`oloproof init` creates a project)"
        )
    return path.resolve().parent


def open_project_store(config: str) -> sqlite3.Connection:
    """The project's store, for a command that writes to it (``compare``): migrated if needed."""
    return open_store(store_path(project_root(config)), create=False)


def read_project_store(config: str) -> sqlite3.Connection:
    """The project's store, for a command that only reads it (``runs``, ``gate``, ``inspect``,
    ``plan``): opened read-only, so that a store in a read-only place can be read and no
    reader ever migrates or rewrites it."""
    return open_store_readonly(store_path(project_root(config)))
