"""A team store's server that drops a run's connections in the middle of the run (a
restart, a failover, an administrator's pg_terminate_backend), on a real server
(tests/pgserver.py): the run stops with one message, exit 5, and its end is stored on a
new connection, saying why it stopped; the next run takes its finished cases from the
cache."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.store.held import FLOOR, held_app

# Case 10 says it was reached, then waits for the test to cut the store's connections.
HELD = held_app(10)


def _committed(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('exec_cache')").fetchone()[0] is None:
            return 0
        return int(conn.execute("SELECT count(*) FROM exec_cache").fetchone()[0])


def test_a_run_whose_connections_the_server_drops_stores_why_it_stopped(
    tmp_path: Path, pg_server: Any, pg_url: str
) -> None:
    database = pg_url.split("/")[3].split("?")[0]
    root = write_project(tmp_path / "p", app=HELD, cases=labelled_cases(60), release=FLOOR,
                         concurrency=(2, 2))
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    env["OLOPROOF_STORE"] = pg_url
    proc = subprocess.Popen([*OLOPROOF, "run", "--json"], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (root / "reached").exists() or _committed(pg_url) == 0:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        pg_server.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE datname = '{database}' AND application_name = 'oloproof'")
        (root / "go").write_text("x")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 5, err
    # One message: psycopg's own "error ignored terminating <psycopg.Pipeline [BAD]>: the
    # connection is lost" was printed on stderr beside it.
    assert "error ignored" not in err and "Traceback" not in err, err
    last = json.loads(out.splitlines()[-1])
    assert last["type"] == "run_finished" and last["status"] == "RUN_ERROR", last

    runs = run_cli("runs", "--json", cwd=root, env={"OLOPROOF_STORE": pg_url})
    assert runs.code == 0, runs.text
    (run,) = json.loads(runs.out)
    # Its end was stored on a new connection: why it stopped, not "the process running
    # it ended without finishing" (its lost session's lock gone).
    assert run["status"] == "RUN_ERROR", run
    # Met by a commit ("could not be written (... server closed the connection ...)") or a
    # cache look-up ("could not be read (terminating connection due to administrator
    # command)"), whichever came first.
    assert run["stop_reason"].startswith("the store could not be "), run
    assert "connection" in run["stop_reason"], run  # not "cannot exit pipeline mode while busy" alone

    cached = _committed(pg_url)
    again = run_cli("run", cwd=root, env={"OLOPROOF_STORE": pg_url})
    assert again.code == 0, again.text
    # The finished cases from the cache.
    assert f"executions {cached} hits · {60 - cached} misses" in again.out, again.out
