"""What several commands share: finding the project's store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from oloproof.errors import UsageError
from oloproof.store.db import open_store, store_path


def project_root(config: str) -> Path:
    path = Path(config)
    if not path.exists():
        raise UsageError(
            f"{config}: no such file; run this in a project directory or pass --config"
            " (`oloproof init` creates a project)"
        )
    return path.resolve().parent


def open_project_store(config: str) -> sqlite3.Connection:
    return open_store(store_path(project_root(config)), create=False)
