"""A team store whose server stops answering the run's committer connection in the middle
of a run (its backend stopped: a server frozen under load, a proxy that stops forwarding),
on a real server (tests/pgserver.py). The end of the run waited for the committer thread
with no limit (``_Committer.close`` joined it, ``drain`` looped while it lived): the run
hung until a second Ctrl-C, its row RUNNING. It now waits as long as a commit may wait for
a lock (``limits.store_busy_timeout_s``) and the time connecting may take, then stops the
run as a store fault: RUN_ERROR/PARTIAL, exit 5, saying the store did not answer.

And `store push` interrupted while a copy waits for the team store says what it pushed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.store.held import FLOOR, held_app

# Case 10 says it was reached, then waits for the test to stop the committer's backend.
HELD = held_app(10)


def _committer_backend(url: str) -> int | None:
    """The server process of the run's committer connection: of the run's two, the one
    opened last (the run's own connection opens it, store/postgres.py ``twin``)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'oloproof'"
            " ORDER BY backend_start"
        ).fetchall()
    return int(rows[1][0]) if len(rows) == 2 else None


def test_a_committer_the_server_stops_answering_ends_the_run_as_a_store_fault(
    tmp_path: Path, pg_url: str
) -> None:
    root = write_project(tmp_path / "p", app=HELD, cases=labelled_cases(30), release=FLOOR,
                         concurrency=(2, 2))
    cfg = root / "oloproof.yaml"
    cfg.write_text(cfg.read_text() + "limits:\n  store_busy_timeout_s: 1\n")
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    env["OLOPROOF_STORE"] = pg_url
    proc = subprocess.Popen([*OLOPROOF, "run"], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    stopped: int | None = None
    try:
        deadline = time.monotonic() + 60
        while not (root / "reached").exists() or (stopped := _committer_backend(pg_url)) is None:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.kill(stopped, signal.SIGSTOP)  # the server no longer answers that connection
        (root / "go").write_text("x")
        try:
            out, err = proc.communicate(timeout=90)  # a hang guard: the bound is 16 s
        except subprocess.TimeoutExpired:
            raise AssertionError("the end of the run waited for the committer") from None
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 5, (out, err)
    assert "Traceback" not in err, err
    runs = run_cli("runs", "--json", cwd=root, env={"OLOPROOF_STORE": pg_url})
    (run,) = json.loads(runs.out)
    assert (run["status"], run["completeness"]) == ("RUN_ERROR", "PARTIAL"), run
    assert run["stop_reason"].startswith(
        "the team store answered none of the run's commits for 16 s"), run


def test_ctrl_c_during_store_push_says_what_was_pushed(tmp_path: Path, pg_url: str) -> None:
    """`store push` interrupted while a run's copy waited for a lock on the team store
    said only `oloproof store: interrupted` (exit 130), which reads as "nothing pushed"
    though the runs before it were there, whole. It now says how many."""
    import psycopg

    app = "def answer(inp):\n    return {'label': 'ok'}\n"
    root = write_project(tmp_path / "p", app=app, cases=labelled_cases(6), release=FLOOR)
    team = {"OLOPROOF_STORE": pg_url}
    assert run_cli("run", cwd=root).code == 0
    assert run_cli("store", "push", cwd=root, env=team).code == 0  # the team store's tables
    for _ in range(2):
        assert run_cli("run", "--no-cache", cwd=root).code == 0
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    env.update(team)
    with psycopg.connect(pg_url, autocommit=True) as locker:
        # The second run's cases wait for this lock; the first run's copy is done by then.
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE run_cases IN SHARE MODE")
        proc = subprocess.Popen([*OLOPROOF, "store", "push"], cwd=root, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            with psycopg.connect(pg_url, autocommit=True) as watcher:
                while not watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'oloproof'"
                    " AND wait_event_type = 'Lock'"
                ).fetchone()[0]:
                    assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                    time.sleep(0.02)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, (out, err)
    assert out == ""
    assert err == ("oloproof store: interrupted; 0 runs pushed before it, each whole; the run"
                   " being copied and those after it were not (push again to copy them)\n"), err
    again = run_cli("store", "push", cwd=root, env=team)
    assert again.code == 0, again.text
    assert "Pushed 2 runs" in again.out, again.out
