"""A store whose ``meta.schema_version`` is not a whole number, through the real CLI.

Another tool, a half-restored backup or a hand edit can leave it as ``'4x'`` or
``'3.5'``: every command ended as an internal error (exit 70, ``ValueError: invalid
literal for int()``). It is a damaged store: "the store cannot be read", exit 5, and
``run`` leaves it byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from tests.conftest import RELEASE_FLOOR, labelled_cases, run_cli, write_project

from oloproof.store.db import store_path
from oloproof.store.schema import SCHEMA_VERSION

APP = """
def answer(case_input):
    return {"label": "ok"}
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("value", ["4x", "3.5", "", "-1"])
def test_schema_version_that_is_not_a_whole_number(tmp_path: Path, value: str) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12),
                         release=RELEASE_FLOOR)
    assert run_cli("run", cwd=root).code == 0
    store = Path(store_path(root))
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = _digest(store)
    for command in (("runs",), ("gate", "latest"), ("inspect", "latest"), ("run",)):
        result = run_cli(*command, cwd=root)
        assert result.code == 5, (command, result.text)
        assert "internal error" not in result.text and "Traceback" not in result.text
        assert result.err.count("\n") == 1, result.err
        assert "the store cannot be read" in result.err
        assert f"schema_version in table meta is {value!r}" in result.err
    assert _digest(store) == before
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
    conn.close()
    assert run_cli("gate", "latest", cwd=root).code == 0
