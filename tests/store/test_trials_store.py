"""Migration 3 (repeated trials): a store written at schema version 2 keeps its runs, is read
as it is by the read-only commands, and is migrated in place by the next run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Backend
from tests.engine._trials import calls, flaky_cases, flaky_project

import oloproof
from oloproof.store.db import open_store, open_store_readonly, schema_version
from oloproof.store.reader import get_run, load_evidence
from oloproof.store.schema import MIGRATIONS, SCHEMA_VERSION

V3_TABLES = ("run_trials", "trial_cases", "trial_judgments")
FLOOR = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"


# Every test runs on both store backends (tests/conftest.py `backend`).


def _back_to_version_2(backend: Backend, root: Path) -> None:
    conn = backend.connect(root)
    for table in V3_TABLES:
        conn.execute(f"DROP TABLE {table}")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()


def test_a_fresh_version_2_store_migrates_to_3(tmp_path: Path, backend: Backend) -> None:
    (tmp_path / ".oloproof").mkdir()
    conn = backend.connect(tmp_path)
    backend.script(conn, MIGRATIONS[1] + MIGRATIONS[2])
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '2')")
    conn.close()
    migrated = open_store(backend.location(tmp_path), create=False)
    assert SCHEMA_VERSION == 3
    assert schema_version(migrated) == 3
    assert set(V3_TABLES) <= backend.tables(migrated)
    migrated.close()
    # The migration is idempotent (IF NOT EXISTS): applied again, it changes nothing.
    conn = backend.connect(tmp_path)
    backend.script(conn, MIGRATIONS[3])
    conn.close()


def _fetch(backend: Backend, root: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = backend.connect(root)
    try:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def test_runs_of_a_version_2_store_survive_and_its_cache_serves_trial_0(
    tmp_path: Path, backend: Backend
) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(8, 2, 0), release=FLOOR)
    first = oloproof.run(root)
    store = backend.location(root)
    _back_to_version_2(backend, root)
    conn = backend.connect(root)
    runs_before = conn.execute("SELECT id, status, completeness, gate FROM runs").fetchall()
    cases_before = conn.execute("SELECT * FROM run_cases ORDER BY case_id").fetchall()
    decisions_before = conn.execute("SELECT * FROM decisions").fetchall()
    conn.close()

    # Read-only commands read a version 2 store as it is (no trial tables) ...
    ro = open_store_readonly(store)
    try:
        assert schema_version(ro) == 2
        record = get_run(ro, first.run_id)
        assert record.trials == 1
        assert load_evidence(ro, record)["exact_label"].passed == 10  # flaky cases pass trial 0
    finally:
        ro.close()
    again = oloproof.read_run(first.run_id, root)
    assert again.trials == 1 and again.exit_code == first.exit_code
    assert all(case.trials == () for case in again.cases())
    assert _fetch(backend, root, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        ("2",)
    ]  # ... and leave it untouched

    # ... and the next run migrates it, keeps every run, and takes trial 0 from its cache.
    before = calls(root)
    three = oloproof.run(root, trials=3)
    assert calls(root) == before + 20
    assert three.cache["execution_hits"] == 10  # type: ignore[index]
    conn = backend.connect(root)
    try:
        assert schema_version(conn) == 3
        assert conn.execute(
            "SELECT id, status, completeness, gate FROM runs WHERE id = ?", (first.run_id,)
        ).fetchall() == runs_before
        assert conn.execute(
            "SELECT * FROM run_cases WHERE run_id = ? ORDER BY case_id", (first.run_id,)
        ).fetchall() == cases_before
        assert conn.execute(
            "SELECT * FROM decisions WHERE run_id = ?", (first.run_id,)
        ).fetchall() == decisions_before
        assert conn.execute("SELECT run_id, trials FROM run_trials").fetchall() == [
            (three.run_id, 3)
        ]
    finally:
        conn.close()
    assert oloproof.read_run(first.run_id, root).exit_code == first.exit_code


def test_a_stored_trial_run_with_a_trial_gap_counts_it_missing(
    tmp_path: Path, backend: Backend
) -> None:
    """A trial whose row never reached the store (a run killed between trials) reads back
    as missing, never as a pass."""
    root = flaky_project(tmp_path / "p", flaky_cases(10, 0, 0), release=FLOOR, trials=3)
    result = oloproof.run(root)
    conn = backend.connect(root)
    conn.execute("DELETE FROM trial_judgments WHERE case_id = 'c004' AND trial = 2")
    conn.close()
    ro = open_store_readonly(backend.location(root))
    try:
        ev = load_evidence(ro, get_run(ro, result.run_id))["exact_label"]
    finally:
        ro.close()
    assert ev.case_counts()[4] == (2, 0, 1)
    assert (ev.passed, ev.missing) == (29, 1)
