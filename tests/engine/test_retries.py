"""SPEC §9 item 4: a retryable error is retried; a non-retryable one makes the case missing."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from pathlib import Path
from oloproof import TransientError, system

SEEN = Path(__file__).parent / "seen"

@system(name="flaky", version="1")
def answer(case_input):
    marker = SEEN / str(case_input["n"])
    if not marker.exists():
        SEEN.mkdir(exist_ok=True)
        marker.write_text("1")
        raise TransientError("provider timed out", retryable={retryable})
    return {{"label": "ok"}}
"""


def _metric_row(out: str) -> str:
    return next(line for line in out.splitlines() if "│ exact_label" in line and "observed" in line)


def test_retryable_errors_are_retried(project_dir: Path) -> None:
    write_project(project_dir, app=APP.format(retryable=True), cases=labelled_cases(30))
    result = run_cli("run", cwd=project_dir)
    assert result.code == 0, result.text
    row = _metric_row(result.out)
    assert row == "│ exact_label │ 100.0%   │ [88.4%, 100.0%] │ 30 / 30 observed · 0 missing · 0 excluded │"
    shown = run_cli("inspect", "latest", "--case", "q007", "--json", cwd=project_dir)
    assert '"attempts": 2' in shown.out


def test_non_retryable_errors_make_cases_missing(project_dir: Path) -> None:
    write_project(project_dir, app=APP.format(retryable=False), cases=labelled_cases(30))
    result = run_cli("run", cwd=project_dir)
    row = _metric_row(result.out)
    assert row == "│ exact_label │          │ [0.0%, 100.0%] │ 0 / 0 observed · 30 missing · 0 excluded │"
    failures = run_cli("inspect", "latest", "--failures", cwd=project_dir)
    assert "TransientError: provider timed out" in failures.out
    # The failed calls were not cached: the next run calls again and now succeeds.
    again = run_cli("run", cwd=project_dir)
    assert "executions 0 hits · 30 misses" in again.out
    assert "30 / 30 observed" in _metric_row(again.out)


SUBCLASSES = """
from pathlib import Path
from oloproof import TransientError, current_case, system

class Busy(TransientError):
    retryable = True          # every Busy is worth another attempt

class ProviderDown(TransientError):
    def __init__(self, status):
        Exception.__init__(self, f"provider down: HTTP {status}")  # not TransientError's

@system(name="flaky", version="1")
def answer(case_input):
    if case_input["n"] == 0:
        raise ProviderDown(503)
    if current_case().attempt == 1:
        raise Busy("provider busy")
    return {"label": "ok"}
"""


def test_subclasses_of_transient_error(project_dir: Path) -> None:
    """A subclass that says ``retryable = True`` as a class attribute is retried (it was
    not: every instance got ``retryable=False`` from the keyword's default); one whose
    ``__init__`` does not call TransientError's is its own error, not retried (it was an
    ``AttributeError: ... has no attribute 'retryable'`` from Oloproof's side)."""
    write_project(project_dir, app=SUBCLASSES, cases=labelled_cases(3))
    run_cli("run", cwd=project_dir)
    retried = run_cli("inspect", "latest", "--case", "q001", "--json", cwd=project_dir)
    assert '"attempts": 2' in retried.out and '"status": "OK"' in retried.out, retried.out
    down = run_cli("inspect", "latest", "--case", "q000", "--json", cwd=project_dir)
    assert "ProviderDown: provider down: HTTP 503" in down.out, down.out
    assert "AttributeError" not in down.out and '"attempts": 1' in down.out, down.out


TASK_GROUP = """
import asyncio
from oloproof import TransientError, current_case, system

async def fetch(n):
    if current_case().attempt == 1:
        raise TransientError("provider busy", retryable=True)
    return n

async def broken(n):
    raise ValueError("bad request")

@system(name="grouped", version="1")
async def answer(case_input):
    async with asyncio.TaskGroup() as tg:
        tg.create_task(fetch(case_input["n"]))
        if case_input["n"] == 0:
            tg.create_task(broken(case_input["n"]))
    return {"label": "ok"}
"""


def test_a_retryable_transient_error_inside_a_task_group_is_retried(project_dir: Path) -> None:
    """An async system's ``asyncio.TaskGroup`` raises an ExceptionGroup around what its tasks
    raised: when every error in it is a ``TransientError(retryable=True)`` the call is
    retried (it was recorded as ``ExceptionGroup: unhandled errors in a TaskGroup`` and the
    case was missing); with another error beside it, it is not."""
    write_project(project_dir, app=TASK_GROUP, cases=labelled_cases(3))
    run_cli("run", cwd=project_dir)
    retried = run_cli("inspect", "latest", "--case", "q001", "--json", cwd=project_dir)
    assert '"attempts": 2' in retried.out and '"status": "OK"' in retried.out, retried.out
    mixed = run_cli("inspect", "latest", "--case", "q000", "--json", cwd=project_dir)
    assert '"attempts": 1' in mixed.out and "ValueError: bad request" in mixed.out, mixed.out
