"""A stop asked for while the run decides its evidence (a Ctrl-C or SIGTERM that lands after
the ANALYZING phase began) ends the run as a stopped one, RUN_ERROR/PARTIAL, exit 5, as
docs/progress-and-concurrency.md says ("a stop that comes after every case has finished
still records the run as PARTIAL"): it was stored DECIDED/COMPLETE, exit 0. The stop is
asked for from an event sink at the ANALYZING event, so the moment is exact."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import labelled_cases, write_project

from oloproof.api._run import execute, load
from oloproof.runner.stop import StopRequest

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"label": x.get("label", "ok")}
"""

RELEASE = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n"


def test_a_stop_during_the_decision_leaves_the_run_partial(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12), release=RELEASE)
    stop = StopRequest()

    def sink(event: object) -> None:
        if getattr(event, "phase", None) == "ANALYZING":
            stop("terminated (SIGTERM)")

    result = execute(load(root), sinks=[sink], stop=stop)
    assert (result.status, result.completeness, result.exit_code) == (
        "RUN_ERROR", "PARTIAL", 5), result
    assert result.stop_reason == "terminated (SIGTERM)"
    assert result.decisions == []


def test_without_a_stop_the_same_run_is_decided(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(12), release=RELEASE)
    result = execute(load(root))
    assert (result.status, result.completeness) == ("DECIDED", "COMPLETE"), result
