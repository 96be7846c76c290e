"""Migration 3 (repeated trials): a store written at schema version 2 keeps its runs, is read
as it is by the read-only commands, and is migrated in place by the next run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.engine._trials import calls, flaky_cases, flaky_project

import oloproof
from oloproof.store.db import open_store, open_store_readonly, schema_version
from oloproof.store.reader import get_run, load_evidence
from oloproof.store.schema import MIGRATIONS, SCHEMA_VERSION

V3_TABLES = ("run_trials", "trial_cases", "trial_judgments")
FLOOR = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _back_to_version_2(store: Path) -> None:
    conn = sqlite3.connect(store, isolation_level=None)
    for table in V3_TABLES:
        conn.execute(f"DROP TABLE {table}")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()


def test_a_fresh_version_2_store_migrates_to_3(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(MIGRATIONS[1] + MIGRATIONS[2])
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '2')")
    conn.close()
    migrated = open_store(path, create=False)
    assert SCHEMA_VERSION == 3
    assert schema_version(migrated) == 3
    assert set(V3_TABLES) <= _tables(migrated)
    migrated.close()
    # The migration is idempotent (IF NOT EXISTS): applied again, it changes nothing.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(MIGRATIONS[3])
    conn.close()


def test_runs_of_a_version_2_store_survive_and_its_cache_serves_trial_0(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(8, 2, 0), release=FLOOR)
    first = oloproof.run(root)
    store = root / ".oloproof" / "store.sqlite"
    _back_to_version_2(store)
    conn = sqlite3.connect(store)
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
    assert schema_version(sqlite3.connect(store)) == 2  # ... and leave it untouched

    # ... and the next run migrates it, keeps every run, and takes trial 0 from its cache.
    before = calls(root)
    three = oloproof.run(root, trials=3)
    assert calls(root) == before + 20
    assert three.cache["execution_hits"] == 10  # type: ignore[index]
    conn = sqlite3.connect(store)
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


def test_a_stored_trial_run_with_a_trial_gap_counts_it_missing(tmp_path: Path) -> None:
    """A trial whose row never reached the store (a run killed between trials) reads back
    as missing, never as a pass."""
    root = flaky_project(tmp_path / "p", flaky_cases(10, 0, 0), release=FLOOR, trials=3)
    result = oloproof.run(root)
    store = root / ".oloproof" / "store.sqlite"
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("DELETE FROM trial_judgments WHERE case_id = 'c004' AND trial = 2")
    conn.close()
    ro = open_store_readonly(store)
    try:
        ev = load_evidence(ro, get_run(ro, result.run_id))["exact_label"]
    finally:
        ro.close()
    assert ev.case_counts()[4] == (2, 0, 1)
    assert (ev.passed, ev.missing) == (29, 1)
