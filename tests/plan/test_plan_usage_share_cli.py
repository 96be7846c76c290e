"""``plan`` prices more cases from the usage the run recorded, averaged over every case run;
a case that reported none counts as spending nothing. When only some cases reported usage,
the plan says how many, so "$0.10 per case" from 10 of 100 cases that each reported $1 is
not read as a measured price (it is ten times too low if the others simply did not say)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli, write_project

APP = """
from oloproof import current_case, system

@system(name="s", version="1")
def answer(x):
    if x["n"] % 4 == 0:
        current_case().record_usage(input_tokens=100, output_tokens=20, cost_usd=0.5)
    return {"label": "ok"}
"""

RELEASE = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.9}\n"


def test_the_plan_says_how_many_cases_reported_usage(project_dir: Path) -> None:
    cases = [{"id": f"c{i:02d}", "input": {"n": i}, "expected": {"label": "ok"}}
             for i in range(12)]
    write_project(project_dir, app=APP, cases=cases, release=RELEASE)
    assert run_cli("run", cwd=project_dir).code == 3  # 12 of 12 cannot show 90%
    plan = run_cli("plan", "latest", "--run", cwd=project_dir)
    assert plan.code == 0, plan.text
    assert "reported by 3 of the 12 cases run; the others are counted as spending nothing" in (
        plan.out), plan.out
    doc = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=project_dir).out)
    assert doc["per_case"]["usage_cases"] == 3 and doc["per_case"]["cases"] == 12
    assert doc["per_case"]["cost_usd_mean"] == 0.125  # 3 x $0.5 over 12 cases


def test_nothing_is_added_when_every_case_reported(project_dir: Path) -> None:
    cases = [{"id": f"c{i:02d}", "input": {"n": 4 * i}, "expected": {"label": "ok"}}
             for i in range(12)]
    write_project(project_dir, app=APP, cases=cases, release=RELEASE)
    run_cli("run", cwd=project_dir)
    plan = run_cli("plan", "latest", "--run", cwd=project_dir)
    assert plan.code == 0 and "cost      about $" in plan.out, plan.out
    assert "reported by" not in plan.out
