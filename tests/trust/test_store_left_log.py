"""A write-ahead log left beside the store by a killed run, and a store file put back from a
copy under it (a restore from a backup that kept ``store.sqlite-wal``): SQLite replays the
log over pages it was not written for, and the store is malformed. No command may read
evidence from it: ``run`` used to decide (and allow, exit 0) on cache hits read from it,
and write into it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.store._support import RELEASE, SLOW, _env, kill_hard, store_of, wait_for_cases


def _write_cases(root: Path, n: int, sleep: float, tag: int) -> None:
    cases = labelled_cases(n)
    for c in cases:
        c["input"] = {**c["input"], "sleep": sleep, "tag": tag}
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))


def _killed_with_its_log(root: Path, stored: int, n: int = 120) -> None:
    """A run of other cases killed part-way, after ``stored`` cases of the runs before it:
    its log is left."""
    _write_cases(root, n, 0.02, 2)
    proc = subprocess.Popen(
        [*OLOPROOF, "run"], cwd=root, env=_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        wait_for_cases(root, stored + 20)
    finally:
        kill_hard(proc)
    wal = Path(f"{store_of(root)}-wal")
    assert wal.exists() and wal.stat().st_size > 0


def _project(root: Path, n: int = 120) -> Path:
    write_project(root, app=SLOW, cases=labelled_cases(1), release=RELEASE, concurrency=(2, 2))
    _write_cases(root, n, 0.0, 0)
    assert run_cli("run", cwd=root).code == 0
    return root


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check(1)").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        return str(exc)
    finally:
        conn.close()


def test_a_store_put_back_under_a_left_log_is_never_decided_on(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    db = store_of(root)
    backup = tmp_path / "backup.sqlite"
    shutil.copyfile(db, backup)  # the copy a backup keeps
    _write_cases(root, 120, 0.0, 1)
    assert run_cli("run", cwd=root).code == 0  # the store moves on past the copy
    _killed_with_its_log(root, 240)
    shutil.copyfile(backup, db)  # restored, its -wal kept
    assert _integrity(db) != "ok"  # SQLite calls the two together malformed
    kept = {p.name: p.read_bytes() for p in (db, Path(f"{db}-wal"))}

    _write_cases(root, 120, 0.0, 0)  # the first run's cases: every result is cached
    for args in (["run"], ["runs"], ["gate", "latest"], ["inspect", "latest"]):
        result = run_cli(*args, cwd=root)
        assert result.code == 5, (args, result.text)  # never 0 on such evidence
        assert "malformed" in result.err and "Traceback" not in result.text, args
        assert "-wal" in result.err, result.err  # says what to do about it
        assert len(result.err.strip().splitlines()) == 1, result.err
        assert "ALLOW" not in result.out, args
    # Nothing was written into it: the file and its log are as they were.
    assert {p.name: p.read_bytes() for p in (db, Path(f"{db}-wal"))} == kept

    # Moving the log away (as the message says) reads the copy as it was saved.
    Path(f"{db}-wal").unlink()
    Path(f"{db}-shm").unlink(missing_ok=True)
    assert _integrity(db) == "ok"
    assert run_cli("run", cwd=root).code == 0


def test_a_left_log_that_fits_its_store_is_read(tmp_path: Path) -> None:
    """A killed run's log over its own store (no restore) is a sound store: the next
    commands read it (the check passes), and the run after it checkpoints the log."""
    root = _project(tmp_path / "proj")
    _killed_with_its_log(root, 120)
    runs = run_cli("runs", cwd=root)
    assert runs.code == 0, runs.text
    assert "ended without finishing" in runs.out
    _write_cases(root, 120, 0.0, 0)
    result = run_cli("run", cwd=root)
    assert result.code == 0, result.text
    assert "120 hits" in result.out
    assert not Path(f"{store_of(root)}-wal").exists()
    assert _integrity(store_of(root)) == "ok"
