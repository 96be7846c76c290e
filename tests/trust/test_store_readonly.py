"""Issue 10 §6: `runs`, `gate`, `inspect` and `plan` read a store in a read-only place
(a CI artefact, a mounted volume) without creating, migrating or rewriting anything;
a store that exists but cannot be read is one clear line and exit 5."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli
from tests.store._support import (
    finished_project,
    inspect_json,
    kill_hard,
    run_cli_readonly,
    runs_json,
    snapshot,
    start_slow_run,
    store_of,
    strict_json,
    wait_for_cases,
)


def test_read_commands_work_on_a_read_only_store(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj", n=12)
    before_runs = runs_json(root)
    before_inspect = inspect_json(root)
    store_dir = root / ".oloproof"
    files = snapshot(store_dir)

    runs = run_cli_readonly("runs", "--json", cwd=root, readonly=store_dir)
    assert runs.code == 0, runs.text
    assert strict_json(runs.out) == before_runs

    shown = run_cli_readonly("inspect", "latest", "--json", cwd=root, readonly=store_dir)
    assert shown.code == 0, shown.text
    doc = strict_json(shown.out)
    assert doc == before_inspect
    assert doc["run"]["cases_stored"] == 12 and len(doc["cases"]) == 12

    gate = run_cli_readonly("gate", "latest", "--json", cwd=root, readonly=store_dir)
    assert gate.code == 0, gate.text
    assert strict_json(gate.out)["gate"] == "ALLOW"

    plan = run_cli_readonly("plan", "latest", "--run", "--json", cwd=root, readonly=store_dir)
    assert plan.code in (0, 3), plan.text
    strict_json(plan.out)

    plain = run_cli_readonly("runs", cwd=root, readonly=store_dir)
    assert plain.code == 0 and "DECIDED/COMPLETE" in plain.out, plain.text

    # Nothing was created, migrated or touched, not even a -wal or -shm beside it.
    assert snapshot(store_dir) == files


def test_a_killed_runs_log_is_read_from_a_read_only_place(tmp_path: Path) -> None:
    """A run killed mid-way leaves its last commits in the write-ahead log; a reader
    in a read-only place must see them (every finished case), not the stale file."""
    root = tmp_path / "proj"
    proc = start_slow_run(root, n=400, sleep=0.05)
    try:
        stored = wait_for_cases(root, 20)
    finally:
        kill_hard(proc)
    store_dir = root / ".oloproof"
    wal = Path(f"{store_of(root)}-wal")
    assert wal.exists() and wal.stat().st_size > 0, "the killed run left no write-ahead log"
    files = snapshot(store_dir)

    shown = run_cli_readonly("inspect", "latest", "--json", cwd=root, readonly=store_dir)
    assert shown.code == 0, shown.text
    doc = strict_json(shown.out)
    assert doc["run"]["status"] == "RUN_ERROR" and doc["run"]["completeness"] == "PARTIAL"
    assert len(doc["cases"]) >= stored  # no finished case lost
    gate = run_cli_readonly("gate", "latest", cwd=root, readonly=store_dir)
    assert gate.code == 5, gate.text
    assert snapshot(store_dir) == files

    # An artefact often keeps the log but not its index (-shm): still every case.
    Path(f"{store_of(root)}-shm").unlink()
    files = snapshot(store_dir)
    shown = run_cli_readonly("inspect", "latest", "--json", cwd=root, readonly=store_dir)
    assert shown.code == 0, shown.text
    assert len(strict_json(shown.out)["cases"]) >= stored
    assert snapshot(store_dir) == files


def _damage(db: Path, how: str) -> None:
    data = bytearray(db.read_bytes())
    if how == "header":
        data[:16] = b"garbage garbage!"
    elif how == "pages":
        # Keep the header; overwrite every page after the first with noise.
        for i in range(4096, len(data)):
            data[i] = (i * 131) & 0xFF
    db.write_bytes(bytes(data))


def test_an_unreadable_store_is_one_line_and_exit_5(tmp_path: Path) -> None:
    for how in ("header", "pages"):
        root = finished_project(tmp_path / how, n=12)
        db = store_of(root)
        for side in ("-wal", "-shm"):
            assert not Path(f"{db}{side}").exists()
        _damage(db, how)
        damaged = db.read_bytes()
        for args in (["gate", "latest"], ["runs"], ["runs", "--json"],
                     ["inspect", "latest", "--json"], ["plan", "latest", "--run"]):
            result = run_cli(*args, cwd=root)
            assert result.code == 5, (how, args, result.text)
            assert "cannot be read" in result.err, result.err
            assert "Traceback" not in result.text
            assert len(result.err.strip().splitlines()) == 1, result.err
        assert db.read_bytes() == damaged
