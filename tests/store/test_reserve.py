"""The room set aside for a run's end (store/reserve.py): allocated for real, given back once,
swept only when its run is over. The run-level behaviour (a disk filled to the last byte) is in
tests/trust/test_run_store_faults.py; a killed run's reserve, in tests/engine/test_stop_and_kill.py."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.conftest import mounted_tmpfs

from oloproof.runner.orchestrate import _still_running
from oloproof.store.db import open_store, store_path
from oloproof.store.reserve import RESERVE_MIN_BYTES, Reserve, reserve_path, sweep
from oloproof.store.writer import StoreWriter


def test_a_reserve_is_allocated_on_disk_and_given_back_once(tmp_path: Path) -> None:
    reserve = Reserve.make(tmp_path, "run_01ABC", row_bytes=5000)
    assert reserve.path == reserve_path(tmp_path, "run_01ABC")
    assert reserve.path is not None
    assert os.stat(reserve.path).st_size == RESERVE_MIN_BYTES + 10_000
    # Allocated, not sparse: the blocks are the disk's room, taken now.
    assert os.stat(reserve.path).st_blocks * 512 >= RESERVE_MIN_BYTES + 10_000
    path = reserve.path
    reserve.release()
    assert not os.path.exists(path) and reserve.path is None
    reserve.release()  # again: nothing to do, nothing raised


def test_no_room_for_a_reserve_leaves_no_file_and_the_run_goes_on(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", "512k") as mount:
        reserve = Reserve.make(mount, "run_01ABC")  # 1 MiB does not fit in 512 KiB
        assert reserve.path is None
        assert os.listdir(mount) == []
        reserve.release()


def test_sweep_deletes_only_the_reserves_of_runs_that_are_over(tmp_path: Path) -> None:
    names = ["reserve-run_01LIVE", "reserve-run_01OVER", "reserve-run_01UNREADABLE",
             "reserve-notes.txt", "reserve-run_", "reserve-run_01-x", "store.sqlite"]
    for name in names:
        (tmp_path / name).write_text("x")

    def running(run_id: str) -> bool:
        if run_id == "run_01UNREADABLE":
            raise OSError("the store cannot be read")
        return run_id == "run_01LIVE"

    assert sweep(tmp_path, running) == 1
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["reserve-run_01LIVE", "reserve-run_01UNREADABLE", "reserve-notes.txt", "reserve-run_",
         "reserve-run_01-x", "store.sqlite"]
    )
    assert sweep(tmp_path / "missing", running) == 0


def _writer(conn: sqlite3.Connection, run_id: str) -> StoreWriter:
    writer = StoreWriter(conn, run_id)
    writer.create_run(
        project="p", suite_digest="d", dataset="data.jsonl", cases_total=1, system_identity="s",
        system={}, metrics=[], policy=None, policy_path=None,
    )
    return writer


def test_a_run_is_still_running_only_while_its_process_runs_it(tmp_path: Path) -> None:
    conn = open_store(store_path(tmp_path))
    _writer(conn, "run_01MINE")  # this process: alive
    # A run whose process is gone: its row says RUNNING, its owner no longer exists.
    program = (
        "import sqlite3; from oloproof.store.writer import StoreWriter\n"
        f"conn = sqlite3.connect({str(store_path(tmp_path))!r}, isolation_level=None)\n"
        "StoreWriter(conn, 'run_01GONE').create_run(project='p', suite_digest='d',"
        " dataset='x', cases_total=1, system_identity='s', system={}, metrics=[],"
        " policy=None, policy_path=None)"
    )
    child = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                           check=False)
    assert child.returncode == 0, child.stderr
    finished = _writer(conn, "run_01DONE")
    finished.finish_run(status="DECIDED", completeness="COMPLETE", exit_code=0, gate="ALLOW",
                        cache={}, decisions=[])
    assert _still_running(conn, "run_01MINE") is True
    assert _still_running(conn, "run_01GONE") is False
    assert _still_running(conn, "run_01DONE") is False
    assert _still_running(conn, "run_01NEVER") is False
    store_dir = Path(store_path(tmp_path)).parent
    for run_id in ("run_01MINE", "run_01GONE", "run_01DONE", "run_01NEVER"):
        Path(reserve_path(store_dir, run_id)).write_text("x")
    assert sweep(store_dir, lambda run_id: _still_running(conn, run_id)) == 3
    assert [p.name for p in store_dir.glob("reserve-*")] == ["reserve-run_01MINE"]
    conn.close()
