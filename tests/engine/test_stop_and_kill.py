"""A run killed with SIGKILL loses only its calls in flight; the next run takes the rest from cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import OLOPROOF, Backend, labelled_cases, run_cli, write_project
from tests.progress._support import stored_cases, wait_for_cases

SLOW = """
import time
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    time.sleep(0.05)
    return {"label": "ok"}
"""


# Both tests run on both store backends (tests/conftest.py `backend`): on PostgreSQL a
# killed run is known to be dead by its advisory lock, which the server releases when the
# process's connection ends.


def test_sigkill_mid_run_keeps_finished_cases(project_dir: Path, backend: Backend) -> None:
    write_project(project_dir, app=SLOW, cases=labelled_cases(200), concurrency=(2, 1))
    proc = subprocess.Popen([*OLOPROOF, "run"], cwd=project_dir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    wait_for_cases(project_dir, 40, timeout=60)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    stored = stored_cases(project_dir)
    assert 40 <= stored < 200

    runs = run_cli("runs", cwd=project_dir)
    assert "RUN_ERROR/PARTIAL" in runs.out
    assert "the process running it ended without finishing" in runs.out
    if backend.is_pg:  # no store file beside the project
        assert not list(project_dir.rglob("*.sqlite*"))
    else:
        # The killed run could not delete its room for the end (store/reserve.py).
        [reserve] = (project_dir / ".oloproof").glob("reserve-run_*")
        assert reserve.stat().st_size >= 1 << 20

    again = run_cli("run", cwd=project_dir)
    assert again.code == 0, again.text
    if not backend.is_pg:
        assert not reserve.exists()  # swept by the next run: its run ended
    hits = int(again.out.split("executions ")[1].split(" hits")[0])
    # Everything stored before the kill is reused; at most the calls in flight (2) are lost.
    assert hits >= stored
    assert "200 / 200 observed" in again.out
    assert "DECIDED/COMPLETE" in run_cli("runs", cwd=project_dir).out


def test_two_runs_at_once_share_the_store(project_dir: Path, backend: Backend) -> None:
    write_project(project_dir, app=SLOW, cases=labelled_cases(60), concurrency=(4, 1))
    run_cli("run", cwd=project_dir)  # create the store
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    procs = [
        subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=project_dir, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
        assert "60 / 60 observed" in out
    conn = backend.connect(project_dir)
    if not backend.is_pg:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM runs WHERE status = 'DECIDED'").fetchone()[0] == 3
    assert conn.execute("SELECT count(*) FROM run_cases").fetchone()[0] == 180
    conn.close()
    if not backend.is_pg:
        # Each run deleted its own reserve (tests/store/test_reserve.py: a live run's is kept).
        assert list((project_dir / ".oloproof").glob("reserve-*")) == []
    _ = sys
