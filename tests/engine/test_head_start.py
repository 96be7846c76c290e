"""A run's first calls start before its event loop (``Engine.start_early``): they are under
way while the run imports asyncio. Each case is still called once, its latency is its
call's, and a call that fails or times out in that first wave is recorded as any other. A
call handed over ahead of a free thread is timed from its start too."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tests.conftest import OLOPROOF, labelled_cases, run_cli, write_project

from oloproof.project.config import SystemConfig
from oloproof.systems.callable import CallableSystem

APP = """
import json, threading, time
from pathlib import Path
from oloproof import system

_lock = threading.Lock()

@system(name="recorded", version="1")
def answer(case_input):
    n = case_input["n"]
    with _lock, (Path(__file__).parent / "calls.jsonl").open("a") as f:
        f.write(json.dumps(n) + "\\n")
    if n == 1:
        raise ValueError("case one has no answer")
    time.sleep(2.0 if n == 2 else 0.15)
    return {"label": "ok"}
"""


def _calls(root: Path) -> list[int]:
    path = root / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _stored(root: Path) -> dict[str, tuple[str, float, str | None]]:
    with sqlite3.connect(root / ".oloproof" / "store.sqlite") as conn:
        run_id = conn.execute("SELECT id FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()[0]
        return {
            case_id: (status, latency, error)
            for case_id, status, latency, error in conn.execute(
                "SELECT case_id, status, latency_ms, error FROM run_cases WHERE run_id = ?",
                (run_id,),
            )
        }


def test_the_first_wave_is_called_once_each_and_recorded_as_any_call(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=labelled_cases(12), concurrency=(4, 2),
                  system_extra="timeout_s: 0.8")
    result = run_cli("run", "--no-cache", cwd=project_dir)
    assert result.code in (0, 1), result.text
    assert sorted(_calls(project_dir)) == list(range(12))  # each case once
    stored = _stored(project_dir)
    assert stored["q001"][0] == "ERROR" and "case one has no answer" in str(stored["q001"][2])
    assert stored["q002"][0] == "TIMEOUT"
    # Its latency is its call's: from when it began, not from when the loop met it.
    for case_id in ("q000", "q003", "q004", "q011"):
        status, latency, _ = stored[case_id]
        assert status == "OK" and 150 <= latency < 1000, (case_id, latency)
    assert 800 <= stored["q002"][1] < 2000


def test_cases_the_cache_holds_are_not_called_in_the_first_wave(project_dir: Path) -> None:
    write_project(project_dir, app=APP.replace("n == 1", "n < 0").replace("n == 2", "n < 0"),
                  cases=labelled_cases(6), concurrency=(4, 2))
    # Cases q000 and q002 are cached by a first run of those two (a subset: never ALLOW).
    first = run_cli("run", "--case", "q000", "--case", "q002", cwd=project_dir)
    assert first.code == 5 and "executions 0 hits · 2 misses" in first.out, first.text
    assert sorted(_calls(project_dir)) == [0, 2]
    (project_dir / "calls.jsonl").unlink()
    result = run_cli("run", cwd=project_dir)
    assert result.code == 0, result.text
    assert sorted(_calls(project_dir)) == [1, 3, 4, 5]
    assert "executions 2 hits · 4 misses" in result.out


def test_a_call_started_early_runs_before_any_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: the call begins while no loop exists; the loop's call then returns its
    result, with the case's own context, and its latency counted from its start."""
    (tmp_path / "head_start_app.py").write_text(textwrap.dedent("""
        import threading, time
        from oloproof import current_case

        began = threading.Event()

        def answer(case_input):
            began.set()
            time.sleep(0.3)
            return {"echo": case_input["n"], "case": current_case().case_id}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "head_start_app", raising=False)
    config = SystemConfig(name="s", version="1", callable="head_start_app:answer", timeout_s=5)
    system = CallableSystem(config, tmp_path, concurrency=2)
    system.start_early([("c7", {"n": 7})])
    assert sys.modules["head_start_app"].began.wait(5.0)  # no loop was ever made
    time.sleep(0.2)  # the run imports asyncio meanwhile

    async def main() -> tuple[object, float | None, float]:
        await system.start()
        try:
            asked = time.perf_counter()
            result = await system.call("c7", {"n": 7}, 1)
            return result.output, result.latency_ms, (time.perf_counter() - asked) * 1000
        finally:
            await system.aclose()

    output, latency_ms, awaited_ms = asyncio.run(main())
    assert output == {"echo": 7, "case": "c7"}
    assert latency_ms is not None and latency_ms >= 300 > awaited_ms + 50


QUEUED_APP = """
import time
from oloproof import system

@system(name="queued", version="1")
def answer(case_input):
    time.sleep(0.25)
    return {"label": "ok"}
"""


def test_a_call_that_waited_for_a_free_thread_is_timed_from_its_start(project_dir: Path) -> None:
    """Calls are handed to the worker threads ahead of a free one: at concurrency 1, the
    next call waits in the queue while the current one runs. Its latency is its own call's
    (about 0.25 s), not that plus the wait (about 0.5 s)."""
    write_project(project_dir, app=QUEUED_APP, cases=labelled_cases(4), concurrency=(1, 1))
    result = run_cli("run", "--no-cache", cwd=project_dir)
    assert result.code == 0, result.text
    latencies = sorted(latency for _, latency, _ in _stored(project_dir).values())
    assert len(latencies) == 4
    assert 250 <= latencies[0] and latencies[-1] < 450, latencies


STARTED_APP = """
import time
from pathlib import Path
from oloproof import system

@system(name="slow", version="1")
def answer(case_input):
    (Path(__file__).parent / "started").touch()
    time.sleep(30.0)
    (Path(__file__).parent / "returned").touch()
    return {"label": "ok"}
"""


def test_a_stop_as_the_first_calls_begin_is_a_partial_run(project_dir: Path) -> None:
    """SIGTERM as soon as the first call has begun, which is before the event loop is up on
    most runs: the run stops at once, stored as RUN_ERROR/PARTIAL, exit 5, no traceback."""
    write_project(project_dir, app=STARTED_APP, cases=labelled_cases(8), concurrency=(4, 2))
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    proc = subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=project_dir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (project_dir / "started").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Not after the calls: none of them returned before the process ended. (It measured
    # < 2.5 s after the signal against calls of 3 s: a bound a loaded machine broke.)
    assert not (project_dir / "returned").exists()
    assert proc.returncode == 5, out + err
    assert "RUN_ERROR/PARTIAL" in out and "terminated (SIGTERM)" in out, out
    assert "Traceback" not in err
