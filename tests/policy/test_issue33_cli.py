"""Issue 33 through the real CLI: bounded means decided by the betting interval, in an order
fixed by the case ids, and Student t labelled approximate wherever it is shown."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project
from tests.stats import _betting_reference as betting_reference

SCORE_APP = """
from oloproof import system

@system(name="scores", version="1")
def answer(case_input):
    return {"score": case_input["score"]}
"""

CHECKS = """
def score(output):
    return float(output["score"])
"""


def _project(root: Path, scores: list[float], rule: str, *, ranged: bool = True,
             ids: list[str] | None = None) -> Path:
    ids = ids or [f"c{i:03d}" for i in range(len(scores))]
    cases = [{"id": i, "input": {"score": s}} for i, s in zip(ids, scores, strict=True)]
    rng = ", range: [0, 1]" if ranged else ""
    return write_project(
        root, app=SCORE_APP, cases=cases,
        evaluators=f'- {{type: custom, criterion: s, function: "checks:score", kind: mean{rng}}}',
        release=f"version: 1\nrules:\n  - {{id: r, metric: s, {rule}}}\n",
        extra_files={"checks.py": CHECKS},
    )


def test_two_perfect_scores_never_pass_a_floor_of_0_99(tmp_path: Path) -> None:
    """Student t gave two scores of 1.0 the interval [1, 1], and `min: 0.99` passed."""
    project = _project(tmp_path / "p", [1.0, 1.0], "min: 0.99")
    result = run_cli("run", cwd=project)
    assert result.code == 3, result.text
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    (decision,) = doc["decisions"]
    assert decision["state"] == "INSUFFICIENT_EVIDENCE"
    assert decision["detail"].startswith("95% betting [")
    assert decision["lower"] < 0.99


def test_four_hundred_perfect_scores_pass_a_floor_of_0_9(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [1.0] * 400, "min: 0.9")
    result = run_cli("run", cwd=project)
    assert result.code == 0, result.text
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    (metric,) = doc["metrics"]
    assert metric["interval_method"] == "betting" and metric["guarantee"] == "valid at every n"
    assert metric["lower"] == pytest.approx(
        betting_reference.mean_interval({f"c{i:03d}": 1.0 for i in range(400)}, 0.0, 1.0)[0],
        abs=2e-10)


def test_the_order_of_the_suite_file_does_not_change_the_decision(tmp_path: Path) -> None:
    """The betting interval depends on the order its scores are fed in; decisions feed them
    by the hash of the case id, so the same cases sorted from best to worst in the file, or
    shuffled, decide alike, and as the reference computes in that order."""
    rng = random.Random(33)
    scores = {f"case-{i}": round(rng.random() ** 0.5, 3) for i in range(60)}
    best_first = sorted(scores, key=lambda c: -scores[c])
    shuffled = list(scores)
    rng.shuffle(shuffled)
    docs = []
    for name, order in (("sorted", best_first), ("shuffled", shuffled)):
        project = _project(tmp_path / name, [scores[c] for c in order], "min: 0.5", ids=order)
        run_cli("run", cwd=project)
        docs.append(json.loads(run_cli("gate", "latest", "--json", cwd=project).out))
    first, second = (d["metrics"][0] for d in docs)
    assert (first["lower"], first["upper"]) == (second["lower"], second["upper"])
    lower, upper = betting_reference.mean_interval(dict(scores), 0.0, 1.0)
    assert first["lower"] == pytest.approx(lower, abs=2e-10)
    assert first["upper"] == pytest.approx(upper, abs=2e-10)
    # fed in the file's order, best first, the bound would have been far above the mean
    wrong = betting_reference.bounds([scores[c] for c in best_first])[0]
    assert wrong > first["lower"] + 0.1


def test_without_a_range_t_is_labelled_approximate_wherever_it_is_shown(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [0.2, 0.4, 0.5, 0.9, 0.6], "min: 0.1", ranged=False)
    result = run_cli("run", cwd=project)
    assert "approximate (t) [" in result.out  # the decision's detail
    metrics_rows = [line for line in result.out.splitlines() if line.startswith("│ s ")]
    assert metrics_rows and "approximate (t)" in metrics_rows[-1]  # the metrics table
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    (metric,) = doc["metrics"]
    assert metric["interval_method"] == "t_approximate"
    assert metric["guarantee"] == "approximate"
    assert metric["method"].startswith("approximate (t)")
    inspect = run_cli("inspect", "latest", cwd=project)
    assert "approximate (t)" in inspect.out, inspect.text
    inspect_json = json.loads(run_cli("inspect", "latest", "--json", cwd=project).out)
    assert inspect_json["metrics"][0]["guarantee"] == "approximate"
    report = run_cli("report", "latest", "--output", "report.html", cwd=project)
    assert report.code == 0, report.text
    assert "approximate (t)" in (project / "report.html").read_text()
