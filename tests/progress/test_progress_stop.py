"""Stopping a run (SPEC §3): a closed stdout, Ctrl-C, SIGTERM, and a second Ctrl-C.

Each stop stores what finished, records the run as RUN_ERROR/PARTIAL, exits 5 without
a traceback, and the next run takes the finished cases from the cache.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project
from tests.progress._support import (
    SLOW,
    assert_quiet,
    checked_events,
    cli_env,
    execution_hits,
    stored_cases,
    wait_for_cases,
)


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``subprocess.Popen`` for the CLI; whatever is still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []

    def start(args: list[str], cwd: Path, **kwargs: Any) -> subprocess.Popen[str]:
        proc = subprocess.Popen([*OLOPROOF, *args], cwd=cwd, env=cli_env(), text=True,
                                stdin=subprocess.DEVNULL, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _stopped_run_is_shown_as_such(project: Path, reason: str) -> None:
    """``oloproof runs`` and ``oloproof inspect latest`` show the stop and why."""
    runs = run_cli("runs", cwd=project)
    newest = next(line for line in runs.out.splitlines() if line.startswith("│ run_"))
    assert "RUN_ERROR/PARTIAL" in newest and "BLOCK (exit 5)" in newest, runs.out
    listed = json.loads(run_cli("runs", "--json", cwd=project).out)[0]
    assert (listed["status"], listed["completeness"], listed["exit_code"]) == (
        "RUN_ERROR", "PARTIAL", 5,
    )
    assert reason in listed["stop_reason"]
    inspect = run_cli("inspect", "latest", cwd=project)
    assert inspect.code == 0, inspect.text
    assert "[RUN_ERROR/PARTIAL]" in inspect.out
    assert f"stopped   {reason}" in inspect.out


def _next_run_reuses(project: Path, stored: int, total: int) -> None:
    # Concurrency is no part of the cache key: raise it to finish the rest sooner.
    config = project / "oloproof.yaml"
    config.write_text(re.sub(r"(?m)^  system: \d+$", "  system: 16", config.read_text()))
    again = run_cli("run", cwd=project)
    assert again.code == 0, again.text
    assert execution_hits(again.out) >= stored
    assert f"{total} / {total} observed" in again.out


def test_a_reader_that_closes_stdout_stops_the_run(project_dir: Path) -> None:
    write_project(project_dir, app=SLOW, cases=labelled_cases(60), concurrency=(2, 1))
    script = (
        f"{shlex.join(OLOPROOF)} run --json 2> err.txt | head -3 > head.txt;"
        ' echo "${PIPESTATUS[0]}" > code.txt'
    )
    subprocess.run(["bash", "-c", script], cwd=project_dir, env=cli_env(), timeout=60,
                   check=True, stdin=subprocess.DEVNULL)
    assert (project_dir / "code.txt").read_text().strip() == "5"
    err = (project_dir / "err.txt").read_text()
    assert_quiet(err)
    assert "[RUN_ERROR/PARTIAL]" in err
    assert "Stopped: standard output was closed by its reader." in err
    head = checked_events((project_dir / "head.txt").read_text())
    assert [e["type"] for e in head] == ["run_started", "run_phase_changed", "case_executed"]

    stored = stored_cases(project_dir)
    assert 1 <= stored < 60
    _stopped_run_is_shown_as_such(project_dir, "standard output was closed by its reader")
    _next_run_reuses(project_dir, stored, 60)


@pytest.mark.parametrize(
    ("sig", "reason"),
    [(signal.SIGINT, "interrupted (Ctrl-C)"), (signal.SIGTERM, "terminated (SIGTERM)")],
)
def test_a_signal_mid_run_stops_it(
    project_dir: Path, tmp_path: Path, sig: signal.Signals, reason: str,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    write_project(project_dir, app=SLOW, cases=labelled_cases(200), concurrency=(2, 1))
    out = tmp_path / "run.ndjson"
    with out.open("w") as stdout:
        proc = spawn(["run", "--json"], project_dir, stdout=stdout, stderr=subprocess.PIPE)
        wait_for_cases(project_dir, 20)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err
    assert_quiet(err)
    assert f"Stopped: {reason}." in err

    events = checked_events(out.read_text())
    assert events[0]["type"] == "run_started"
    finished = events[-1]
    assert finished["type"] == "run_finished"
    assert (finished["status"], finished["completeness"], finished["exit_code"]) == (
        "RUN_ERROR", "PARTIAL", 5,
    )
    assert finished["decisions"] == []
    assert [e["phase"] for e in events if e["type"] == "run_phase_changed"] == ["EXECUTING"]
    stored = stored_cases(project_dir)
    executed = sum(e["type"] == "case_executed" for e in events)
    assert 20 <= stored == executed < 200  # every case streamed was stored, and no more

    _stopped_run_is_shown_as_such(project_dir, reason)
    _next_run_reuses(project_dir, stored, 200)


STUCK_SYNC = """
import time
from oloproof import system

@system(name="stuck", version="1")
def answer(case_input):
    time.sleep(0.01 if case_input["n"] < 12 else 120)
    return {"label": "ok"}
"""

STUCK_LOOP = """
import asyncio, time
from oloproof import system

@system(name="loop-blocker", version="1")
async def answer(case_input):
    if case_input["n"] < 12:
        await asyncio.sleep(0.01)
    else:
        time.sleep(120)  # a blocking call in async code: it holds the event loop itself
    return {"label": "ok"}
"""


def test_ctrl_c_with_a_sync_system_stuck_in_sleep(
    project_dir: Path, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    """Threads stuck in the system do not keep the process alive after a stop."""
    write_project(project_dir, app=STUCK_SYNC, cases=labelled_cases(40), concurrency=(2, 1))
    proc = spawn(["run"], project_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_cases(project_dir, 12)
    time.sleep(0.3)  # both workers are now in their long sleep
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    out, err = proc.communicate(timeout=15)
    assert time.monotonic() - started < 5
    assert proc.returncode == 5, out + err
    assert_quiet(err)
    assert "[RUN_ERROR/PARTIAL]" in out and "12 / 12 observed" in out
    _stopped_run_is_shown_as_such(project_dir, "interrupted (Ctrl-C)")
    _first_cases_again(project_dir, 12, stored=12)


def _first_cases_again(project: Path, n: int, stored: int) -> None:
    """Rerun the first ``n`` cases (the later ones would get stuck again): all from cache."""
    (project / "data" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in labelled_cases(n))
    )
    again = run_cli("run", cwd=project)
    assert again.code == 0, again.text
    assert execution_hits(again.out) >= stored


def test_the_first_ctrl_c_stops_a_system_that_blocks_its_loop(
    project_dir: Path, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    """The system blocks its event loop: not the run's (it has its own), so the first
    Ctrl-C gets through at once (issue 10: the first signal must be honoured)."""
    write_project(project_dir, app=STUCK_LOOP, cases=labelled_cases(40), concurrency=(1, 1))
    proc = spawn(["run", "--json"], project_dir, stdout=subprocess.DEVNULL,
                 stderr=subprocess.PIPE)
    stored = wait_for_cases(project_dir, 8)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, err = proc.communicate(timeout=10)
    assert time.monotonic() - started < 3
    assert proc.returncode == 5, err
    assert_quiet(err)
    assert "Stopped: interrupted (Ctrl-C)" in err
    _stopped_run_is_shown_as_such(project_dir, "interrupted (Ctrl-C)")

    stored = stored_cases(project_dir)
    assert stored >= 8
    _first_cases_again(project_dir, 12, stored=stored)


SLOW_CHECK = """
import os, time

def check(output, case):
    with open("started.txt", "a") as fh:
        fh.write(f"{case.id}\\n")
    for slot in ("first-0", "first-1"):  # the first two checks end soon; the others never do
        try:
            open(slot, "x").close()
        except FileExistsError:
            continue
        time.sleep(0.2)
        break
    else:
        time.sleep(60)
    with open("finished.txt", "a") as fh:
        fh.write(f"{case.id}\\n")
    return True
"""


def _judged(project: Path) -> set[str]:
    import sqlite3

    conn = sqlite3.connect(project / ".oloproof" / "store.sqlite", timeout=5)
    try:
        return {r[0] for r in conn.execute("SELECT case_id FROM run_judgments")}
    finally:
        conn.close()


def test_sigterm_with_slow_evaluations_running_and_queued_ahead(
    project_dir: Path, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    """Custom evaluators run two at a time, each thread with its next call already queued
    (transport.threads.Workers). A SIGTERM ends the run at once: the two calls in flight are
    abandoned (their threads cannot be stopped), no queued call starts, and only the checks
    that finished are stored."""
    write_project(project_dir, app=SLOW, cases=labelled_cases(12), concurrency=(4, 1),
                  evaluators="""
          - type: custom
            criterion: checked
            function: checks:check
        """, extra_files={"checks.py": SLOW_CHECK})
    config = project_dir / "oloproof.yaml"
    config.write_text(config.read_text().replace("  judge: 1\n", "  judge: 1\n  evaluator: 2\n"))
    proc = spawn(["run"], project_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    started_file = project_dir / "started.txt"
    # The second pair of checks has started: two finished, two in flight.
    while not started_file.exists() or len(started_file.read_text().split()) < 4:
        assert time.monotonic() < deadline, "the checks did not start"
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=40)
    # It did not wait for the calls in flight: neither of them ever finished. (It measured
    # < 2.0 s after the signal, against checks of 3 s: a bound a loaded machine broke.)
    assert len((project_dir / "finished.txt").read_text().split()) == 2
    assert proc.returncode == 5, err
    assert_quiet(err)
    assert "Stopped: terminated (SIGTERM)" in out + err
    time.sleep(1)  # had a queued check started, it would have written its line by now
    started = started_file.read_text().split()
    assert len(started) == 4, started
    judged = _judged(project_dir)
    assert len(judged) == 2 and judged < set(started)
    _stopped_run_is_shown_as_such(project_dir, "terminated (SIGTERM)")


def test_judgments_a_closed_stdout_cancelled_are_counted_missing(project_dir: Path) -> None:
    """`run --json | head -3` with a custom check that takes 10 s: the stop stores the cases
    whose exact_label judgment finished, each without its `slow` verdict (the check was
    cancelled). The run, `inspect` and `runs` said `slow 0 / 0 observed · 0 missing`, as if
    nothing had been lost; each such case is now missing for `slow`."""
    evaluators = """
      - type: exact_match
        criterion: exact_label
        field: label
      - type: custom
        criterion: slow
        function: checks:slow
        kind: binary
    """
    write_project(project_dir, app=SLOW, cases=labelled_cases(60), evaluators=evaluators,
                  extra_files={"checks.py": "import time\n\ndef slow(output):\n"
                               "    time.sleep(10)\n    return True\n"})
    script = (f"{shlex.join(OLOPROOF)} run --json 2> err.txt | head -3 > head.txt;"
              ' echo "${PIPESTATUS[0]}" > code.txt')
    subprocess.run(["bash", "-c", script], cwd=project_dir, env=cli_env(), timeout=60,
                   check=True, stdin=subprocess.DEVNULL)
    assert (project_dir / "code.txt").read_text().strip() == "5"
    with sqlite3.connect(project_dir / ".oloproof" / "store.sqlite") as conn:
        stored = conn.execute("SELECT count(*) FROM run_cases").fetchone()[0]
        judged = dict(conn.execute(
            "SELECT criterion, count(*) FROM run_judgments GROUP BY criterion").fetchall())
    lost = stored - judged.get("slow", 0)
    assert stored >= 1 and lost >= 1, (stored, judged)
    said = f"{judged.get('slow', 0)} / {judged.get('slow', 0)} observed · {lost} missing"
    err = (project_dir / "err.txt").read_text()
    assert said in err, err
    inspect = run_cli("inspect", "latest", "--json", cwd=project_dir)
    slow = next(m for m in json.loads(inspect.out)["metrics"] if m["metric"] == "slow")
    assert (slow["observed"], slow["missing"]) == (judged.get("slow", 0), lost), slow
    assert said in run_cli("inspect", "latest", cwd=project_dir, env={"COLUMNS": "200"}).out
