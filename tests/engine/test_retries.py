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
