"""Migration 3 (run_concurrency): a store written at schema version 2 opens, keeps what it
held, and records the history of adaptive runs from then on; read as it is (read-only,
never migrated), it reads as having no history."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Backend, labelled_cases, run_cli, write_project

from oloproof.api import concurrency_history, read_run
from oloproof.events import ConcurrencyChanged
from oloproof.store.db import open_store, open_store_readonly, schema_version
from oloproof.store.reader import ConcurrencyChange, load_concurrency
from oloproof.store.schema import MIGRATIONS, SCHEMA_VERSION
from oloproof.store.writer import StoreWriter

APP = """
from oloproof import system

@system(name="bot", version="1")
def answer(case_input):
    return {"label": "ok"}  # labelled_cases' expected label, for every input
"""


# Every test runs on both store backends (tests/conftest.py `backend`).


def _version_2_store(backend: Backend, root: Path) -> None:
    (root / ".oloproof").mkdir()
    conn = backend.connect(root)
    backend.script(conn, MIGRATIONS[1])
    backend.script(conn, MIGRATIONS[2])
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', '2')")
    conn.close()


def test_a_store_without_the_table_gains_it_without_a_new_version(
    tmp_path: Path, backend: Backend
) -> None:
    _version_2_store(backend, tmp_path)
    path = backend.location(tmp_path)
    _tables = backend.tables
    read_only = open_store_readonly(path)
    assert "run_concurrency" not in _tables(read_only)
    assert load_concurrency(read_only, "run_x") == []  # an old store has no history
    read_only.close()
    opened = open_store(path, create=False)
    assert schema_version(opened) == SCHEMA_VERSION  # optional: no version of its own
    assert "run_concurrency" in _tables(opened)
    opened.close()
    again = open_store(path, create=False)  # opening again changes nothing
    assert "run_concurrency" in _tables(again) and schema_version(again) == SCHEMA_VERSION
    again.close()


def test_the_writer_commits_changes_without_any_case(tmp_path: Path, backend: Backend) -> None:
    conn = open_store(backend.location(tmp_path))
    writer = StoreWriter(conn, "run_01J00000000000000000000000")
    writer.handle(ConcurrencyChanged(writer.run_id, limit_name="system", previous=None,
                                     limit=4, ceiling=16, reason="start"))
    writer.handle(ConcurrencyChanged(writer.run_id, limit_name="system", previous=4,
                                     limit=3, ceiling=16, reason="rate_limited"))
    history = load_concurrency(conn, writer.run_id)
    assert [(h.previous, h.limit, h.reason) for h in history] == [
        (None, 4, "start"), (4, 3, "rate_limited")]
    assert isinstance(history[0], ConcurrencyChange)
    assert history[1].to_json()["limit_name"] == "system"
    conn.close()


def test_runs_stored_at_version_2_survive_and_adaptive_runs_are_recorded(
    project_dir: Path, backend: Backend
) -> None:
    write_project(project_dir, app=APP, cases=labelled_cases(30))
    assert run_cli("run", cwd=project_dir).code == 0
    # Back to what a store made before adaptive concurrency held: no run_concurrency.
    conn = backend.connect(project_dir)
    conn.execute("DROP TABLE run_concurrency")
    before = conn.execute("SELECT id, status, gate FROM runs").fetchall()
    conn.close()
    old_run = before[0][0]
    assert concurrency_history(old_run, project_dir) == []  # read as it is: no history

    config = project_dir / "oloproof.yaml"
    config.write_text(config.read_text().replace("  judge: 4\n", "  judge: 4\n  adaptive: true\n"))
    assert run_cli("run", "--no-cache", cwd=project_dir).code == 0

    conn = backend.connect(project_dir)
    assert schema_version(conn) == SCHEMA_VERSION  # an optional table: no new version
    assert conn.execute("SELECT count(*) FROM run_concurrency").fetchone()[0] > 0
    assert conn.execute(
        "SELECT id, status, gate FROM runs WHERE id = ?", (old_run,)).fetchall() == before
    conn.close()
    assert read_run(old_run, project_dir).gate == "ALLOW"
    assert concurrency_history(old_run, project_dir) == []
    history = concurrency_history("latest", project_dir)
    assert history[0].reason == "start" and history[0].limit_name == "system"
    assert history[0].ceiling == 8  # write_project's concurrency.system
    # A callable that never refuses: the limit only grows, never past its ceiling.
    assert {h.reason for h in history[1:]} <= {"clean_window"}
    assert max(h.limit for h in history) <= 8
