"""Issue 10 §11: the store's files are private (0700/0600), a foreign SQLite file is
refused before anything touches it, and a killed run whose PID was reused reads as ended."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import time
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project
from tests.store._support import (
    INSTANT,
    RELEASE,
    finished_project,
    inspect_json,
    kill_hard,
    runs_json,
    snapshot,
    start_slow_run,
    store_of,
    stored_cases,
    wait_for_cases,
)

# A floor that 3 cases can fail (50% would need 6): a rule that cannot fail is refused.
SMALL = RELEASE.replace("min: 0.5", "min: 0.8")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_store_files_are_private(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    proc = start_slow_run(root, n=200, sleep=0.02)
    try:
        wait_for_cases(root, 5)
        store_dir = root / ".oloproof"
        assert _mode(store_dir) == 0o700
        # While the run goes, the database and its log and index all exist.
        for name in ("store.sqlite", "store.sqlite-wal", "store.sqlite-shm"):
            path = store_dir / name
            assert path.exists(), name
            assert _mode(path) == 0o600, (name, oct(_mode(path)))
    finally:
        kill_hard(proc)


def test_a_store_made_world_readable_is_made_private_again(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj", n=12)
    store_dir = root / ".oloproof"
    store_dir.chmod(0o755)
    store_of(root).chmod(0o644)
    result = run_cli("run", cwd=root)
    assert result.code == 0, result.text
    assert _mode(store_dir) == 0o700 and _mode(store_of(root)) == 0o600
    assert len(runs_json(root)) == 2


def _foreign(db: Path, *, wal: bool) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.executemany("INSERT INTO invoices(total) VALUES (?)", [(i * 1.5,) for i in range(50)])
    conn.commit()
    conn.close()


@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
def test_a_foreign_sqlite_file_is_left_untouched(tmp_path: Path, wal: bool) -> None:
    root = write_project(tmp_path / "proj", app=INSTANT, cases=labelled_cases(3), release=SMALL)
    db = store_of(root)
    _foreign(db, wal=wal)
    time.sleep(0.05)  # an mtime written now would differ from the one recorded below
    before = snapshot(db.parent)
    for args in (["run"], ["runs"], ["runs", "--json"], ["inspect", "latest"],
                 ["gate", "latest"], ["plan", "latest", "--run"]):
        result = run_cli(*args, cwd=root)
        assert result.code == 2, (args, result.text)
        assert "not an Oloproof store" in result.err and "left untouched" in result.err
        assert "Traceback" not in result.text
    # The same bytes, the same mtime, the same mode, and no -wal/-shm made beside it.
    assert snapshot(db.parent) == before
    header = db.read_bytes()[:20]
    assert header[18] == (2 if wal else 1)  # the journal mode was not switched


def test_a_killed_run_whose_pid_was_reused_reads_as_ended(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    proc = start_slow_run(root, n=400, sleep=0.05)
    try:
        wait_for_cases(root, 10)
        # While its process lives, the run is RUNNING (no false "ended").
        live = runs_json(root)[0]
        assert live["status"] == "RUNNING" and live["completeness"] == "PARTIAL", live
    finally:
        kill_hard(proc)
    stored = stored_cases(root)
    # The PID goes to another process: a live, unrelated one stands in for it.
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        conn = sqlite3.connect(store_of(root))
        conn.execute("UPDATE runs SET pid = ?", (stranger.pid,))
        conn.commit()
        conn.close()
        run = runs_json(root)[0]
        assert run["status"] == "RUN_ERROR" and run["completeness"] == "PARTIAL", run
        assert run["exit_code"] == 5 and "ended without finishing" in run["stop_reason"]
        doc = inspect_json(root)
        assert len(doc["cases"]) == stored  # nothing finished is lost
        assert run_cli("gate", "latest", cwd=root).code == 5

        # A row from before owner tokens (none stored) falls back to the start time:
        # a process that started after the run was created is not the run's process
        # (the run is dated an hour back: PIDs are reused long after, not within a second).
        conn = sqlite3.connect(store_of(root))
        conn.execute("DELETE FROM run_owners")
        conn.execute("UPDATE runs SET created_at = ?", (
            time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - 3600)),))
        conn.commit()
        conn.close()
        run = runs_json(root)[0]
        assert run["status"] == "RUN_ERROR", run
    finally:
        stranger.kill()
        stranger.wait()


def test_a_running_row_of_this_process_is_live(tmp_path: Path) -> None:
    """The check is not simply 'owner present → ended': the owner's own token keeps it RUNNING."""
    from oloproof.store.liveness import owner_token, run_owner_alive

    token = owner_token()
    if token is None:
        pytest.skip("no /proc: owner tokens are not available here")
    assert run_owner_alive(os.getpid(), token, "2000-01-01T00:00:00.000000Z")
    other = token.rsplit(":", 1)[0] + ":1"
    assert not run_owner_alive(os.getpid(), other, "2000-01-01T00:00:00.000000Z")


def test_a_damaged_store_is_a_store_fault_for_every_command(tmp_path: Path) -> None:
    root = write_project(tmp_path / "proj", app=INSTANT, cases=labelled_cases(3), release=SMALL)
    assert run_cli("run", cwd=root).code == 3  # 3 cases: too few to decide, but stored
    db = store_of(root)
    damaged = bytearray(db.read_bytes())
    for i in range(200, len(damaged), 97):  # the header stays SQLite's; the pages do not
        damaged[i] = 0xAB
    db.write_bytes(bytes(damaged))
    before = snapshot(db.parent)
    for args in (["run"], ["runs"], ["inspect", "latest"], ["gate", "latest"],
                 ["plan", "latest", "--run"]):
        result = run_cli(*args, cwd=root)
        assert result.code == 5, (args, result.text)  # unreadable evidence, not a usage error
        assert "malformed" in result.err and "Traceback" not in result.text, args
        assert len(result.err.strip().splitlines()) == 1, result.err
    assert snapshot(db.parent) == before  # left as it was
