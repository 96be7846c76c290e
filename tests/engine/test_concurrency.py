"""concurrency.system bounds the calls in flight, and is no part of the cache key."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
import threading, time
from pathlib import Path
from oloproof import system

_lock = threading.Lock()
_now = 0
_peak = 0

@system(name="sleepy", version="1")
def answer(case_input):
    global _now, _peak
    with _lock:
        _now += 1
        _peak = max(_peak, _now)
        (Path(__file__).parent / "peak").write_text(str(_peak))
    time.sleep(0.1)
    with _lock:
        _now -= 1
    return {"label": "ok"}
"""

ASYNC_APP = """
import asyncio
from pathlib import Path
from oloproof import system

_now = 0
_peak = 0

@system(name="sleepy-async", version="1")
async def answer(case_input):
    global _now, _peak
    _now += 1
    _peak = max(_peak, _now)
    (Path(__file__).parent / "peak").write_text(str(_peak))
    await asyncio.sleep(0.1)
    _now -= 1
    return {"label": "ok"}
"""


def _exec_counts(out: str) -> tuple[int, int]:
    m = re.search(r"executions (\d+) hits · (\d+) misses", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def test_at_most_and_exactly_system_concurrency_calls_in_flight(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=labelled_cases(120), concurrency=(16, 4))
    result = run_cli("run", cwd=project_dir)
    assert result.code == 0, result.text
    assert (project_dir / "peak").read_text() == "16"
    assert "120 / 120 observed" in result.out
    # Unchanged rerun, then only the concurrency changed: everything from the cache.
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (120, 0)
    write_project(project_dir, app=APP, cases=labelled_cases(120), concurrency=(1, 1))
    assert _exec_counts(run_cli("run", cwd=project_dir).out) == (120, 0)


def test_async_systems_are_bounded_too(project_dir: Path) -> None:
    write_project(project_dir, app=ASYNC_APP, cases=labelled_cases(40), concurrency=(5, 4))
    result = run_cli("run", cwd=project_dir)
    assert result.code == 0, result.text
    assert (project_dir / "peak").read_text() == "5"


def test_timeouts_are_recorded_and_do_not_hold_the_run(project_dir: Path) -> None:
    app = """
    import time
    from oloproof import system

    @system(name="stuck", version="1")
    def answer(case_input):
        if case_input["n"] == 1:
            time.sleep(30)
        return {"label": "ok"}
    """
    write_project(project_dir, app=app, cases=labelled_cases(4), system_extra="timeout_s: 0.5")
    result = run_cli("run", "--json", cwd=project_dir, timeout=20)
    assert result.code == 0, result.text
    assert '"status":"TIMEOUT"' in result.out
    assert "3 / 3 observed · 1 missing" in result.err
