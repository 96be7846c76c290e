"""How a command names a stored run (store/reader.py get_run): ``latest``, a full id, a
unique prefix; and a prefix two runs share, which names no one run and says so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.conftest import Backend

from oloproof.errors import UsageError
from oloproof.store.db import open_store, open_store_readonly
from oloproof.store.reader import get_run
from oloproof.store.writer import StoreWriter

# Two ids whose first 12 characters are the same (two runs started within one second).
FIRST = "run_01M8TM05AAAAAAAAAAAAAAAAAA"
SECOND = "run_01M8TM05BBBBBBBBBBBBBBBBBB"


def _store(backend: Backend, root: Path) -> None:
    (root / "oloproof.yaml").write_text("project: test-project\n")
    conn = open_store(backend.location(root))
    try:
        for run_id in (FIRST, SECOND):
            StoreWriter(conn, run_id).create_run(
                project="test-project", suite_digest="sha256:x", dataset="d.jsonl",
                cases_total=1, system_identity="sha256:s", system={"kind": "callable"},
                metrics=[], policy=None, policy_path=None,
            )
            time.sleep(0.002)  # created_at orders them: SECOND is the latest
    finally:
        conn.close()


def test_latest_an_id_and_prefixes(tmp_path: Path, backend: Backend) -> None:
    _store(backend, tmp_path)
    conn = open_store_readonly(backend.location(tmp_path))
    try:
        assert get_run(conn, "latest").id == SECOND
        assert get_run(conn, FIRST).id == FIRST
        assert get_run(conn, FIRST[:14]).id == FIRST
        record = get_run(conn, SECOND)
        assert get_run(conn, record) is record  # a record already read is not read again
        with pytest.raises(UsageError, match="the start of more than one run's id"):
            get_run(conn, FIRST[:12])
        with pytest.raises(UsageError, match="no run 'run_01ZZ'"):
            get_run(conn, "run_01ZZ")
    finally:
        conn.close()
