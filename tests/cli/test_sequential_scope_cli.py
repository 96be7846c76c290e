"""ALLOW is earned in a sequential run as in a fixed one: a rule whose scope, once the
evaluator excluded the cases without its expected field, held too few cases for the
sequential test to FAIL it is INSUFFICIENT_EVIDENCE (``evidence_cannot_fail``), never a
PASS. The load check sized the scope from the whole suite (100 cases) and let it run; the
10 cases left in scope could only pass ``min: 0.1`` (a FAIL takes about 60 failures), and
``run --sequential`` said ALLOW, exit 0, where the fixed run said evidence_cannot_fail.
``gate --policy`` on a stored sequential run is held the same way."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, write_project

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(x):
    return {"label": "ok"}
"""

# 100 cases, one in ten holding the expected label: exact_match excludes the other 90.
CASES = [
    {"id": f"c{i:03d}", "input": {"n": i},
     "expected": {"label": "ok"} if i % 10 == 0 else {"note": "unlabelled"}}
    for i in range(100)
]

FLOOR = """
version: 1
rules:
  - {id: floor, metric: exact_label, min: 0.1}
"""

BUDGET = """
version: 1
rules:
  - {id: budget, metric: exact_label, kind: observed_count, max_failures: 12}
"""


def _decision(out: str) -> dict[str, object]:
    [d] = json.loads(out)["decisions"]
    return d


def test_a_sequential_pass_on_a_scope_too_small_to_fail_is_insufficient(
    project_dir: Path,
) -> None:
    write_project(project_dir, app=APP, cases=CASES, release=FLOOR)
    seq = run_cli("run", "--sequential", cwd=project_dir)
    assert seq.code == 3, seq.text
    assert "evidence_cannot_fail" in seq.out, seq.out
    fixed = run_cli("run", cwd=project_dir)
    assert fixed.code == 3 and "evidence_cannot_fail" in fixed.out, fixed.text
    runs = json.loads(run_cli("runs", "--json", cwd=project_dir).out)
    seq_id = next(r["id"] for r in runs if r["completeness"] == "SEQUENTIAL")
    gated = run_cli("gate", seq_id, "--json", cwd=project_dir)
    assert gated.code == 3, gated.text
    d = _decision(gated.out)
    assert (d["state"], d["reason"]) == ("INSUFFICIENT_EVIDENCE", "evidence_cannot_fail")
    assert "the rule alone: PASS" in str(d["detail"]), d["detail"]


def test_gate_policy_on_a_sequential_run_holds_a_rule_its_scope_cannot_fail(
    project_dir: Path,
) -> None:
    # The run's own rule can fail on its scope (a floor of 0.9 FAILs after a few failures).
    write_project(project_dir, app=APP, cases=CASES,
                  release=FLOOR.replace("min: 0.1", "min: 0.9"))
    run_cli("run", "--sequential", cwd=project_dir)
    for policy, rule in ((FLOOR, "floor"), (BUDGET, "budget")):
        (project_dir / "other.yaml").write_text(policy)
        gated = run_cli("gate", "latest", "--policy", "other.yaml", "--json", cwd=project_dir)
        assert gated.code == 3, gated.text
        d = _decision(gated.out)
        assert d["rule"] == rule
        assert d["state"] == "INSUFFICIENT_EVIDENCE", d


def test_a_sequential_budget_over_a_scope_it_cannot_exceed_is_insufficient(
    project_dir: Path,
) -> None:
    write_project(project_dir, app=APP, cases=CASES, release=BUDGET)
    seq = run_cli("run", "--sequential", "--json", cwd=project_dir)
    assert seq.code == 3, seq.text
    finished = [json.loads(line) for line in seq.out.splitlines()][-1]
    [d] = finished["decisions"]
    assert (d["state"], d["reason"]) == ("INSUFFICIENT_EVIDENCE", "evidence_cannot_fail"), d


def test_a_sequential_pass_whose_scope_could_fail_still_passes(project_dir: Path) -> None:
    cases = [{"id": f"c{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
             for i in range(100)]
    write_project(project_dir, app=APP, cases=cases, release=FLOOR)
    seq = run_cli("run", "--sequential", cwd=project_dir)
    assert seq.code == 0, seq.text
    assert "sequential_pass" in seq.out
