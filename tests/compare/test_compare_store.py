"""Migration 2 (comparisons): a store written at schema version 1 is migrated in place
(to the current version, through every later migration too)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import Backend, run_cli

from oloproof.store.db import open_store, schema_version
from oloproof.store.schema import MIGRATIONS, SCHEMA_VERSION

V2_TABLES = {"comparisons", "comparison_metrics", "comparison_decisions"}


# Both tests run on both store backends (tests/conftest.py `backend`).


def test_a_fresh_version_1_store_migrates_to_2(tmp_path: Path, backend: Backend) -> None:
    (tmp_path / ".oloproof").mkdir()
    conn = backend.connect(tmp_path)
    backend.script(conn, MIGRATIONS[1])
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '1')")
    conn.close()
    migrated = open_store(backend.location(tmp_path), create=False)
    # Every later migration runs too: the store ends at the current version.
    assert schema_version(migrated) == SCHEMA_VERSION
    assert V2_TABLES <= backend.tables(migrated)
    migrated.close()


def test_runs_stored_at_version_1_can_be_compared_after_the_migration(
    tmp_path: Path, backend: Backend
) -> None:
    project = tmp_path / "cmp"
    assert run_cli("init", str(project), "--example", "compare", cwd=tmp_path).code == 0
    base = run_cli("run", "--config", "baseline.yaml", cwd=project)
    cand = run_cli("run", cwd=project)
    ids = [re.search(r"Run (run_\w+)", r.out).group(1) for r in (cand, base)]  # type: ignore[union-attr]
    # Take the store back to what version 1 wrote: no comparison tables, version 1.
    conn = backend.connect(project, "compare-example")
    for table in V2_TABLES:
        conn.execute(f"DROP TABLE {table}")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    runs_before = conn.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
    cases_before = tuple(conn.execute("SELECT count(*) FROM run_cases").fetchone())
    conn.close()

    result = run_cli("compare", *ids, "--json", cwd=project)
    assert result.code == 3, result.text
    doc = json.loads(result.out)

    conn = backend.connect(project, "compare-example")
    assert schema_version(conn) == SCHEMA_VERSION
    assert conn.execute("SELECT id, status FROM runs ORDER BY id").fetchall() == runs_before
    assert tuple(conn.execute("SELECT count(*) FROM run_cases").fetchone()) == cases_before
    assert conn.execute("SELECT id FROM comparisons").fetchall() == [(doc["comparison_id"],)]
    conn.close()
    assert run_cli("inspect", doc["comparison_id"], cwd=project).code == 0
