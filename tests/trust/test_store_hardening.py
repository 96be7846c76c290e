"""Issue 29: the store's files are regular files or nothing (a named pipe never hangs a
command), a read-only store stays read-only, and a reader racing the creation of a new
store reads "no runs yet"."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.store._support import (
    INSTANT,
    RELEASE,
    finished_project,
    runs_json,
    snapshot,
    store_of,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")

# Every command that opens the store: none may wait on a named pipe.
COMMANDS = (
    ["runs"], ["gate", "latest"], ["inspect", "latest", "--json"], ["plan", "latest", "--run"],
    ["run"], ["view", "--no-open"], ["report", "latest"], ["compare", "latest", "latest"],
)
# For the files beside it, a writer and two readers (each command checks the same four
# files in one function, store/db.py check_store_files).
SIDE_COMMANDS = (["run"], ["runs", "--json"], ["gate", "latest"])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _files(directory: Path) -> dict[str, tuple[str, int, int]]:
    """:func:`snapshot` of ``directory`` (content hash, mtime, mode), except that a named
    pipe is recorded by its type: reading it would block this test."""
    out = {}
    for p in sorted(directory.rglob("*")):
        st = p.lstat()
        if stat.S_ISREG(st.st_mode):
            kind = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            kind = "fifo" if stat.S_ISFIFO(st.st_mode) else "dir"
        out[str(p.relative_to(directory))] = (kind, st.st_mtime_ns, st.st_mode)
    return out


@pytest.mark.parametrize("name", ["store.sqlite", "store.sqlite-wal", "store.sqlite-shm",
                                  "store.sqlite-journal"])
def test_a_named_pipe_among_the_store_files_is_refused_without_hanging(
    tmp_path: Path, name: str
) -> None:
    root = finished_project(tmp_path / "proj")
    fifo = root / ".oloproof" / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    before = _files(root / ".oloproof")
    for args in COMMANDS if name == "store.sqlite" else SIDE_COMMANDS:
        # A hang is a TimeoutExpired here (the process is killed): the test fails.
        result = run_cli(*args, cwd=root, timeout=60)
        assert result.code == 2, (args, result.text)
        assert f"{fifo}: is not a regular file" in result.err, (args, result.err)
        assert len(result.err.strip().splitlines()) == 1, (args, result.err)
        assert "Traceback" not in result.text
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert _files(root / ".oloproof") == before  # nothing read through, nothing written


def test_a_named_pipe_in_place_of_a_snapshot_is_set_aside_not_read(tmp_path: Path) -> None:
    """The snapshots are an optimisation (project/_snapshot.py): one that is a named pipe
    is not read (the files are validated instead) and is replaced by a regular file."""
    root = finished_project(tmp_path / "proj")
    assert run_cli("run", cwd=root).code == 0  # the second run used the snapshots
    kept = sorted((root / ".oloproof" / "snapshots").iterdir())
    assert {p.name.split("-")[0] for p in kept} == {"config", "policy"}
    for path in kept:
        path.unlink()
        os.mkfifo(path)
    for args in (["run"], ["gate", "latest"]):
        result = run_cli(*args, cwd=root, timeout=60)
        assert result.code == 0, (args, result.text)
    # The run wrote them again, as regular files (readable by the owner only).
    for path in kept:
        assert stat.S_ISREG(path.lstat().st_mode) and _mode(path) == 0o600, path
    assert len(runs_json(root)) == 3


def test_a_read_only_store_stays_read_only_and_a_run_against_it_writes_nothing(
    tmp_path: Path,
) -> None:
    root = finished_project(tmp_path / "proj")
    db = store_of(root)
    db.chmod(0o444)
    before = snapshot(root / ".oloproof")
    for args in (["run"], ["compare", "latest", "latest"]):
        result = run_cli(*args, cwd=root)
        assert result.code == 5, (args, result.text)
        assert "the store cannot be written" in result.err and "read-only" in result.err
        assert "mode 0444" in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.text
    # Not made writable (it used to be chmodded to 0600 and written), nothing beside it.
    assert _mode(db) == 0o444
    assert snapshot(root / ".oloproof") == before
    # Readers still read it, and change nothing either.
    assert len(runs_json(root)) == 1
    gate = run_cli("gate", "latest", cwd=root)
    assert gate.code == 0, gate.text
    assert _mode(db) == 0o444


def test_a_read_only_store_directory_is_not_written(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj")
    store_dir = root / ".oloproof"
    store_dir.chmod(0o555)
    try:
        before = snapshot(store_dir)
        result = run_cli("run", cwd=root)
        assert result.code == 5, result.text
        assert "directory is read-only (mode 0555)" in result.err, result.err
        assert snapshot(store_dir) == before and _mode(store_dir) == 0o555
    finally:
        store_dir.chmod(0o700)


def test_a_loose_store_only_loses_group_and_other_bits(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj")
    db = store_of(root)
    db.chmod(0o664)
    (root / ".oloproof").chmod(0o775)
    assert run_cli("run", cwd=root).code == 0
    assert _mode(db) == 0o600 and _mode(root / ".oloproof") == 0o700


def _new_store(root: Path, *, wal: bool) -> None:
    """The store as a run that is creating it leaves it for a moment: the file exists
    (empty, or switched to WAL), its tables do not yet."""
    (root / ".oloproof").mkdir(mode=0o700)
    db = store_of(root)
    db.touch(mode=0o600)
    if wal:
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()


@pytest.mark.parametrize("wal", [False, True], ids=["empty-file", "wal-no-tables"])
def test_a_store_being_created_reads_as_no_runs_yet(tmp_path: Path, wal: bool) -> None:
    root = write_project(tmp_path / "proj", app=INSTANT, cases=labelled_cases(12), release=RELEASE)
    _new_store(root, wal=wal)
    listed = run_cli("runs", cwd=root)
    assert listed.code == 0 and "No runs stored yet." in listed.out, listed.text
    as_json = run_cli("runs", "--json", cwd=root)
    assert as_json.code == 0 and as_json.out.strip() == "[]", as_json.text
    for args in (["gate", "latest"], ["inspect", "latest"], ["plan", "latest", "--run"],
                 ["inspect", "cmp_01"], ["plan", "cmp_01"]):
        result = run_cli(*args, cwd=root)
        assert result.code == 2, (args, result.text)
        assert "no such table" not in result.err and "cannot be read" not in result.err
        assert ("no runs are stored in this project yet" in result.err
                or "no comparison 'cmp_01'" in result.err), (args, result.err)
    # And a run then creates it as usual.
    assert run_cli("run", cwd=root).code == 0
    assert len(runs_json(root)) == 1


def test_readers_racing_a_run_that_creates_the_store_never_read_a_damaged_store(
    tmp_path: Path,
) -> None:
    """Real readers (the API, in threads) polling while a real run creates the store:
    each answer is "no store", "no runs" or the runs, never a store fault."""
    from oloproof import list_runs
    from oloproof.errors import OloproofError

    root = write_project(tmp_path / "proj", app=INSTANT, cases=labelled_cases(12), release=RELEASE)
    seen: dict[str, int] = {}
    faults: list[str] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                key = f"runs={len(list_runs(root))}"
            except OloproofError as exc:
                if exc.exit_code != 2 or "no store at" not in str(exc):
                    faults.append(f"{type(exc).__name__}: {exc}")
                key = "no store"
            except Exception as exc:  # noqa: BLE001 - any other failure is the finding
                faults.append(f"{type(exc).__name__}: {exc}")
                key = "fault"
            seen[key] = seen.get(key, 0) + 1

    for _ in range(3):
        shutil.rmtree(root / ".oloproof", ignore_errors=True)
        done.clear()
        threads = [threading.Thread(target=poll) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            proc = subprocess.run([*OLOPROOF, "run"], cwd=root, capture_output=True, text=True,
                                  timeout=120, check=False)
            time.sleep(0.05)
        finally:
            done.set()
            for t in threads:
                t.join()
        assert proc.returncode == 0, proc.stderr
    assert not faults, faults[:5]
    assert seen.get("runs=1", 0) > 0 and seen.get("no store", 0) > 0, seen


def test_comparison_ids_are_not_resolved_by_wildcards(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj")
    assert run_cli("run", "--no-cache", cwd=root).code == 0
    earlier = json.loads(run_cli("runs", "--json", cwd=root).out)[1]["id"]
    compared = run_cli("compare", "latest", earlier, "--json", cwd=root)
    assert compared.code in (0, 3), compared.text
    cmp_id = json.loads(compared.out)["comparison_id"]
    assert cmp_id.startswith("cmp_")
    # A real prefix still resolves...
    shown = run_cli("inspect", cmp_id[:10], "--json", cwd=root)
    assert shown.code in (0, 3) and json.loads(shown.out)["comparison_id"] == cmp_id, shown.text
    # ...but '%' and '_' are characters, not LIKE wildcards (cmp_% named every comparison).
    for ref in ("cmp_%", "cmp__", "cmp_" + "_" * 8):
        for args in (["plan", ref], ["inspect", ref]):
            result = run_cli(*args, cwd=root)
            assert result.code == 2, (args, result.text)
            assert f"no comparison '{ref}'" in result.err, result.err


def test_an_absurd_runs_limit_is_an_argument_error(tmp_path: Path) -> None:
    root = finished_project(tmp_path / "proj")
    for value in ("99999999999999999999", "0", "-1", "many"):
        result = run_cli("runs", "--limit", value, cwd=root)
        assert result.code == 2, (value, result.text)
        assert "argument --limit: expected a whole number of runs" in result.err, result.err
        assert "cannot be read" not in result.err
    assert len(json.loads(run_cli("runs", "--limit", "1", "--json", cwd=root).out)) == 1
