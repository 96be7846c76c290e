"""MEAN metrics and custom evaluators, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.conftest import run_cli, write_project
from tests.stats import _betting_reference as betting_reference

APP = """
from oloproof import system

@system(name="days", version="1")
def answer(case_input):
    if case_input["n"] == 99:
        raise RuntimeError("no estimate")
    return {"days": case_input["guess"], "answer": case_input.get("text", "ok")}
"""

CHECKS = """
from oloproof import Verdict

def polite(output, case):
    if case.metadata and case.metadata.get("skip"):
        return Verdict(excluded=True, reason="not applicable")
    return "please" in output["answer"]

def broken(output):
    if output["answer"] == "ok":
        return True  # one case it can check (a check failing on every case stops the run)
    raise ValueError("bug in the check")

def length(output, case):
    return float(len(output["answer"]))
"""

EVALUATORS = """
- type: absolute_error
  criterion: days_error
  field: days
  range: [0, 30]
- type: custom
  criterion: polite
  function: checks:polite
- type: custom
  criterion: fragile
  function: checks:broken
- type: custom
  criterion: length
  function: checks:length
  kind: mean
"""


def _cases(with_missing: bool) -> list[dict[str, object]]:
    guesses = [(10, 12), (5, 5), (7, 4), (20, 21), (3, 3), (14, 10)]
    cases: list[dict[str, object]] = [
        {"id": f"c{i}", "input": {"n": i, "guess": g, "text": "please wait" if i % 2 else "wait"},
         "expected": {"days": t}}
        for i, (t, g) in enumerate(guesses)
    ]
    cases.append({"id": "skip", "input": {"n": 7, "guess": 1}, "expected": {"days": 1},
                  "metadata": {"skip": True}})
    if with_missing:
        cases.append({"id": "boom", "input": {"n": 99, "guess": 0}, "expected": {"days": 2}})
    return cases


RELEASE = """\
version: 1
rules:
  - id: error-budget
    metric: days_error
    max: {max}
  - id: length-floor
    metric: length
    min: 1
"""


def length_scores() -> list[float]:
    """checks:length on the cases of _cases(False): "wait", "please wait" alternately, and
    "ok" for the case without text."""
    return [4.0, 11.0, 4.0, 11.0, 4.0, 11.0, 2.0]


def test_mean_metric_intervals_betting_with_a_range_t_without(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=_cases(False), evaluators=EVALUATORS,
                  release=RELEASE.format(max=6), extra_files={"checks.py": CHECKS})
    result = run_cli("run", "--json", cwd=project_dir)
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project_dir).out)
    metrics = {m["metric"]: m for m in doc["metrics"]}
    # days_error declares range [0, 30]: the betting interval (issue 33), its scores in
    # the canonical order of the case ids, checked against the numpy reference.
    errors = dict(zip([f"c{i}" for i in range(6)] + ["skip"], [2, 0, 3, 1, 0, 4, 0], strict=True))
    mean = sum(errors.values()) / len(errors)
    lo, hi = betting_reference.mean_interval(dict(errors), 0.0, 30.0)
    days = metrics["days_error"]
    assert days["estimate"] == mean
    assert days["lower"] == pytest.approx(lo, abs=1e-8)  # 2e-10 of the range
    assert days["upper"] == pytest.approx(hi, abs=1e-8)
    assert days["interval_method"] == "betting" and days["guarantee"] == "valid at every n"
    # Seven errors on a range of 30 cannot show the mean is at most 6: one error of 30 in
    # ten cases is not ruled out. Student t said PASS (upper 3.0).
    assert hi > 6
    decisions = {d["rule"]: d for d in doc["decisions"]}
    assert decisions["error-budget"]["state"] == "INSUFFICIENT_EVIDENCE"
    assert "95% betting [" in decisions["error-budget"]["detail"]
    # length declares no range: Student t, labelled approximate wherever it is shown.
    lengths = metrics["length"]
    assert lengths["interval_method"] == "t_approximate"
    assert lengths["guarantee"] == "approximate"
    assert lengths["method"].startswith("approximate (t)")
    assert "approximate (t)" in decisions["length-floor"]["detail"]
    # Custom evaluators: bool with an exclusion, an exception (missing), and a MEAN score.
    assert metrics["polite"]["observed"] == 6 and metrics["polite"]["excluded"] == 1
    assert metrics["polite"]["passed"] == 3
    assert metrics["fragile"]["observed"] == 1 and metrics["fragile"]["missing"] == 6
    assert metrics["length"]["kind"] == "MEAN"
    assert result.code == 3, result.err
    reason = json.loads(run_cli("inspect", "latest", "--case", "c1", "--json", cwd=project_dir).out)
    assert reason["judgments"]["fragile"]["reason"] == "ValueError: bug in the check"


def test_student_t_without_a_range_matches_scipy(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=_cases(False), evaluators=EVALUATORS,
                  release=RELEASE.format(max=6), extra_files={"checks.py": CHECKS})
    run_cli("run", cwd=project_dir)
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project_dir).out)
    length = next(m for m in doc["metrics"] if m["metric"] == "length")
    scores = np.array(length_scores())
    lo, hi = stats.t.interval(0.95, len(scores) - 1, loc=scores.mean(), scale=stats.sem(scores))
    assert length["lower"] == pytest.approx(lo, abs=1e-9)
    assert length["upper"] == pytest.approx(hi, abs=1e-9)


def test_missing_cases_are_bounded_by_the_range_or_unbounded(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=_cases(True), evaluators=EVALUATORS,
                  release=RELEASE.format(max=6), extra_files={"checks.py": CHECKS})
    result = run_cli("run", cwd=project_dir)
    # days_error has range [0, 30]: the missing case is bounded at 30 for the upper limit,
    # which pushes it over 6, so the rule cannot pass.
    assert result.code == 3, result.text
    row = next(line for line in result.out.splitlines() if line.startswith("│ error-budget"))
    assert "INSUFFICIENT_EVIDENCE" in row
    # length has no range: a MEAN rule with missing cases is unbounded.
    row = next(line for line in result.out.splitlines() if line.startswith("│ length-floor"))
    assert "missing_cases_unbounded" in row
