"""Ctrl-C while a command other than a run's commits waits for another process's write
lock on the store (a second writer, a tool with a transaction open on the file).

SQLite waits for the lock inside one C call, where no Python signal handler runs: `merge`,
`compare`, and `run`'s first row heard no Ctrl-C until the lock came free or the busy
timeout ran out (30 s for `merge` and `compare`; `limits.store_busy_timeout_s`, up to an
hour, for `run`). The lock is now waited for in slices (store.db ``begin_write``), and each
command answers with one line saying what it did not store.

The lock is held for the whole test, past the point where each command is seen waiting for
it (sleeping between two tries: nothing else in these commands sleeps), so a command that
waited for it could end only when its busy timeout ran out; the deadlines are hang guards
shorter than that timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.store.test_shards import _project

APP = """
def answer(inp):
    return {"label": "ok"}
"""
FLOOR = "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n"
# Shorter than the 30 s that `merge` and `compare` wait for the lock: a command still
# waiting for it when this runs out did not answer the Ctrl-C.
GUARD_S = 20


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def _lock_held(store: Path) -> Iterator[None]:
    """Another process's write lock on the store (here a connection of the test's)."""
    holder = sqlite3.connect(store, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.close()


def _sleeping(pid: int) -> bool:
    try:
        return "sleep" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        pytest.skip("no /proc/PID/wchan to see where the command waits")


def _interrupt_while_waiting(root: Path, *args: str) -> tuple[int, str, str]:
    """Start the command, Ctrl-C it once it sleeps between two tries of the lock; its code
    and output, or a failure if it did not end within the guard."""
    proc = subprocess.Popen([*OLOPROOF, *args], cwd=root, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _sleeping(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the command never waited for the lock"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=GUARD_S)
        except subprocess.TimeoutExpired:
            raise AssertionError("Ctrl-C waited for the store's lock") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def _rows(store: Path, sql: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(store)) as db:
        return db.execute(sql).fetchall()


def test_ctrl_c_stops_a_merge_waiting_for_the_lock_and_nothing_is_merged(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "p", n=12)
    for index in (1, 2):
        assert run_cli("run", "--shard", f"{index}/2", cwd=root).code == 5
    store = root / ".oloproof" / "store.sqlite"
    before = _rows(store, "SELECT id, status FROM runs ORDER BY id")
    with _lock_held(store):
        code, out, err = _interrupt_while_waiting(root, "merge")
    assert code == 130, err
    assert out == "" and err == "oloproof merge: interrupted; nothing was merged\n"
    # No merged run, not even a RUNNING row: the row is stored with the rest or not at all.
    assert _rows(store, "SELECT id, status FROM runs ORDER BY id") == before
    assert _rows(store, "SELECT count(*) FROM run_merges") == [(0,)]
    again = run_cli("merge", "--json", cwd=root)
    assert again.code in (0, 1, 3, 4), again.text
    assert '"already_merged": false' in again.out


def test_ctrl_c_stops_a_compare_waiting_for_the_lock_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12), release=FLOOR)
    for _ in range(2):
        assert run_cli("run", "--no-cache", cwd=root).code == 0
    store = root / ".oloproof" / "store.sqlite"
    new, old = (str(r[0]) for r in _rows(store, "SELECT id FROM runs ORDER BY created_at DESC"))
    with _lock_held(store):
        code, out, err = _interrupt_while_waiting(root, "compare", new, old)
    assert code == 130, err
    assert out == "" and err == "oloproof compare: interrupted; no comparison was stored\n"
    assert _rows(store, "SELECT count(*) FROM comparisons") == [(0,)]


def test_ctrl_c_stops_a_run_whose_first_row_waits_for_the_lock(tmp_path: Path) -> None:
    """`run` waited up to `store_busy_timeout_s` (here an hour) for its first row, deaf to
    Ctrl-C; a second Ctrl-C did nothing either. The first one now ends the wait."""
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12), release=FLOOR)
    assert run_cli("run", cwd=root).code == 0  # the store exists, its tables too
    cfg = root / "oloproof.yaml"
    cfg.write_text(cfg.read_text() + "limits:\n  store_busy_timeout_s: 3600\n")
    store = root / ".oloproof" / "store.sqlite"
    with _lock_held(store):
        code, _out, err = _interrupt_while_waiting(root, "run", "--no-cache")
    assert code == 5, err
    assert "Traceback" not in err, err
    assert err.splitlines()[-1] == (
        "oloproof run: error: interrupted (Ctrl-C) while the run's first row waited for the"
        " store's write lock, held by another process: nothing was stored, nothing was called"
    ), err
    assert _rows(store, "SELECT status FROM runs") == [("DECIDED",)]
