"""A second Ctrl-C while a team-store run's own thread is inside a statement (a cache read,
the decision's reads), on a real server (tests/pgserver.py): the run ends at once, exit 5,
and its end is recorded. The second signal's handler used to ask the interrupted
connection for a ROLLBACK and wait for ever for the lock psycopg holds while a statement
is on its way: the run hung, and every further Ctrl-C hung in the same place."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.store.held import FLOOR, held_app

# Case 0 says it was reached, then waits for the test to lock the store's run_trials.
HELD = held_app(0)


def test_a_second_signal_inside_a_team_store_statement_ends_the_run(
    tmp_path: Path, pg_url: str
) -> None:
    import psycopg

    root = write_project(tmp_path / "p", app=HELD, cases=labelled_cases(10), release=FLOOR)
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    env["OLOPROOF_STORE"] = pg_url
    proc = subprocess.Popen([*OLOPROOF, "run"], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    locker = psycopg.connect(pg_url, autocommit=True)
    try:
        deadline = time.monotonic() + 60
        while not (root / "reached").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        # Read by the decision (store/reader.py get_run), written by nothing in this run:
        # the decision's first read waits on this lock, inside psycopg, on the run's thread.
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE run_trials IN ACCESS EXCLUSIVE MODE")
        (root / "go").write_text("x")
        with psycopg.connect(pg_url, autocommit=True) as watcher:
            while not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'oloproof'"
                " AND wait_event_type = 'Lock'"
            ).fetchone()[0]:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.02)
        # Ctrl-C until the run ends: the first stops it, the second must end it at once
        # (two signals sent too close together may arrive as one).
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(0.5)
            except subprocess.TimeoutExpired:
                pass
        hung = proc.poll() is None
    finally:
        locker.close()  # its lock goes with it
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate(timeout=60)
    assert not hung, f"the run did not end on a second Ctrl-C: {err}"
    assert proc.returncode == 5, (out, err)
    assert "then a second signal" in err, err
    runs = run_cli("runs", "--json", cwd=root, env={"OLOPROOF_STORE": pg_url})
    assert runs.code == 0, runs.text
    (run,) = json.loads(runs.out)
    # Recorded by the second signal's handler on a connection of its own, not read back as
    # "the process running it ended without finishing".
    assert run["status"] == "RUN_ERROR", run
    assert run["stop_reason"] == (
        "interrupted (Ctrl-C); then stopped at once by a second signal"), run
