"""A BINARY rule at an end of [0, 1] in a sequential run: ``max: 0`` (no case may pass, a
leak rate, say) and ``min: 1`` (every case must pass). A fixed run decides them (FAIL at the
first interval that rules the end out); ``run --sequential`` stopped with ``internal error:
ValueError: a threshold strictly between 0 and 1 is needed`` (exit 70), and ``gate --policy``
with such a rule on a stored sequential run said the run's evidence "cannot be read" (exit
5). A single pass rules out a rate of 0 (a failure a rate of 1): the rule FAILs there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project

APP = """
def answer(case_input):
    return {"label": "no" if case_input["n"] % 10 == 3 else "ok"}
"""

CASES = [{"id": f"c{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(200)]


def _release(rule: str) -> str:
    return f"version: 1\nrules:\n  - id: r\n    metric: exact_label\n    {rule}\n"


@pytest.mark.parametrize(("rule", "reason"), [
    ("max: 0", "above 0.0%"),  # the first pass read rules out a rate of 0
    ("min: 1", "below 100.0%"),  # the first failure read rules out a rate of 1
])
def test_a_rule_at_an_end_of_the_rates_fails_at_the_case_that_rules_it_out(
    tmp_path: Path, rule: str, reason: str
) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=CASES, release=_release(rule))
    done = run_cli("run", "--sequential", "--json", cwd=root)
    assert done.code == 1, done.text
    assert "Traceback" not in done.err and "internal error" not in done.err
    end = [json.loads(line) for line in done.out.splitlines()][-1]
    [d] = end["decisions"]
    assert (d["state"], d["reason"]) == ("FAIL", "sequential_fail"), d
    assert f"e-value inf >= 40 that the rate is {reason}" in d["detail"]
    decided = [json.loads(line) for line in done.out.splitlines()
               if json.loads(line)["type"] == "rule_decided"]
    assert decided[0]["e_value"] > 40  # finite in JSON
    gate = run_cli("gate", "latest", "--json", cwd=root)
    assert gate.code == 1, gate.text
    assert json.loads(gate.out)["decisions"][0]["detail"] == d["detail"]


def test_gate_policy_with_a_rule_at_an_end_decides_a_stored_sequential_run(
    tmp_path: Path,
) -> None:
    root = write_project(tmp_path / "p", app=APP, cases=CASES, release=_release("min: 0.5"))
    assert run_cli("run", "--sequential", cwd=root).code == 0
    (root / "zero.yaml").write_text(_release("max: 0.0"))
    gate = run_cli("gate", "latest", "--policy", "zero.yaml", "--json", cwd=root)
    assert gate.code == 1, gate.text
    assert json.loads(gate.out)["decisions"][0]["state"] == "FAIL"


MEAN_APP = """
def answer(case_input):
    return {"label": "ok", "days": 2}
"""

MEAN_EVALUATORS = """
  - type: absolute_error
    criterion: days_error
    field: days
    range: [0, 10]
"""


def test_a_mean_rule_at_the_bottom_of_its_range_fails_rather_than_being_refused(
    tmp_path: Path,
) -> None:
    """`max: 0` on an error with range [0, 10] (every answer one day off): a fixed run FAILs
    it; `run --sequential` refused it, exit 2, saying its test "could not FAIL it within
    the 200 cases of its scope even if every one failed"."""
    cases = [{"id": f"c{i:03d}", "input": {"n": i}, "expected": {"days": 1}} for i in range(200)]
    root = write_project(tmp_path / "p", app=MEAN_APP, cases=cases, evaluators=MEAN_EVALUATORS,
                         release="version: 1\nrules:\n  - id: m\n    metric: days_error\n"
                                 "    max: 0\n")
    fixed = run_cli("run", "--json", cwd=root)
    assert fixed.code == 1, fixed.text
    done = run_cli("run", "--sequential", "--json", cwd=root)
    assert done.code == 1, done.text
    [d] = [json.loads(line) for line in done.out.splitlines()][-1]["decisions"]
    assert (d["state"], d["reason"]) == ("FAIL", "sequential_fail"), d
    assert "that the mean is above 0" in d["detail"]
