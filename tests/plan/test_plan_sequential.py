"""``oloproof plan RUN --run`` on a sequential run sizes its undecided MEAN and
``observed_count`` rules (issue 26): the expected number of cases to a decision, if what
was observed holds, checked against a numpy simulation written here and against scipy's
binomial, through the CLI in a subprocess."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats
from tests.conftest import run_cli, write_project
from tests.stats.test_sequential_stopping import _numpy_mean_stopping

from oloproof.stats.sequential import BinaryTest

APP = """
from oloproof import system

@system(name="seq-plan", version="1")
def answer(case_input):
    n = case_input["n"]
    return {"label": "no" if n % 10 == 0 else "ok", "days": n % 3}
"""

EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
- type: absolute_error
  criterion: days_error
  field: days
  range: [0, 10]
- type: absolute_error
  criterion: raw_days
  field: days
"""


def _project(root: Path, total: int, release: str) -> Path:
    cases = [{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok", "days": 0}}
             for i in range(total)]
    return write_project(root, app=APP, cases=cases, evaluators=EVALUATORS, release=release)


def _rule(doc: dict[str, Any], rule: str) -> dict[str, Any]:
    return next(r for r in doc["rules"] if r["rule"] == rule)


def test_plan_sizes_an_undecided_sequential_mean_rule_by_its_stopping_time(
    tmp_path: Path,
) -> None:
    # Scores 0, 1, 2 (mean 1.0) against a budget of 1.15 on a range of 10: 300 cases do not
    # decide it.
    total = 300
    root = _project(tmp_path / "p", total, (
        "version: 1\nrules:\n  - id: days-budget\n    metric: days_error\n    max: 1.15\n"))
    done = run_cli("run", "--sequential", "--json", cwd=root, timeout=300)
    assert done.code == 3, done.text
    planned = run_cli("plan", "latest", "--run", "--json", cwd=root, timeout=300)
    assert planned.code == 0, planned.text
    rule = _rule(json.loads(planned.out), "days-budget")
    assert rule["plan"] == "sized", rule
    assert rule["approximate"] is True and "simulated" in rule["method"]
    observed = rule["observed"]
    assert observed["read"] == total and observed["observed"] == total
    assert rule["total"] > total and rule["more"] == rule["total"] - total
    assert rule["state_at_total"] == "PASS"
    # The same figure from a numpy simulation of the betting test, drawing from the same
    # observed scores (a third each of 0, 1 and 2).
    count, passed = _numpy_mean_stopping(1.15, "max", (0.0, 10.0), [0.0, 1.0, 2.0], 0.95,
                                         total, 5000, runs=1500, seed=7)
    decided = count[count <= 5000]
    assert decided.size > 0.9 * count.size and passed.mean() > 0.9
    expected = float(np.mean(np.minimum(count, 5000)))
    se = float(np.std(count)) * math.sqrt(1 / 400 + 1 / 1500)
    assert abs(observed["expected_cases"] - expected) <= 4 * se + 1, (observed, expected)
    assert abs(rule["total"] - float(np.median(count))) <= 0.15 * float(np.median(count))
    text = run_cli("plan", "latest", "--run", cwd=root, timeout=300)
    assert f"days-budget: about {rule['more']} more cases would decide it" in text.out
    assert "if the observed mix of scores holds" in text.out
    assert f"a median of {rule['total']:,} cases in all" in text.out


def test_plan_sizes_an_undecided_sequential_observed_count_rule_exactly(
    tmp_path: Path,
) -> None:
    """The run stops early on its rate rule; planned under a policy with a failure budget,
    the budget is undecided over the cases the run read, and sized exactly: it FAILs at
    the failure over the budget and PASSes only at the suite's last case."""
    total = 600
    root = _project(tmp_path / "p", total, (
        "version: 1\nrules:\n  - id: label-floor\n    metric: exact_label\n    min: 0.5\n"))
    done = run_cli("run", "--sequential", "--json", cwd=root, timeout=300)
    assert done.code == 0, done.text
    (root / "budget.yaml").write_text(
        "version: 1\nrules:\n  - id: label-budget\n    metric: exact_label\n"
        "    kind: observed_count\n    max_failures: 70\n")
    planned = run_cli("plan", "latest", "--run", "--policy", "budget.yaml", "--json",
                      cwd=root, timeout=300)
    assert planned.code == 0, planned.text
    rule = _rule(json.loads(planned.out), "label-budget")
    assert rule["plan"] == "sized", rule
    assert "exact" in rule["method"]
    observed = rule["observed"]
    read, failed = observed["read"], observed["failed"]
    assert 0 < read < total and failed <= 70
    rate = failed / observed["observed"]
    # E[count] = sum over n < total of P(Binomial(n, rate) <= 70).
    expected = math.fsum(float(stats.binom.cdf(70, n, rate)) for n in range(total))
    assert observed["expected_cases"] == pytest_approx(expected)
    cdf = [1.0 - float(stats.binom.cdf(70, n, rate)) for n in range(total)]
    median = next((n for n, p in enumerate(cdf) if p >= 0.5), total)
    assert rule["total"] == median and rule["more"] == median - read
    text = run_cli("plan", "latest", "--run", "--policy", "budget.yaml", cwd=root,
                   timeout=300)
    assert f"a PASS needs all {total:,} cases of the suite" in text.out
    # A policy the sequential tests cannot decide is refused in one line, as gate does.
    (root / "unbounded.yaml").write_text(
        "version: 1\nrules:\n  - id: raw\n    metric: raw_days\n    max: 1.5\n")
    refused = run_cli("plan", "latest", "--run", "--policy", "unbounded.yaml", cwd=root)
    assert refused.code == 2, refused.text
    assert "MEAN without a declared range" in refused.err and "Traceback" not in refused.err


def pytest_approx(value: float) -> Any:
    import pytest

    return pytest.approx(value, rel=1e-9, abs=1e-9)


def test_assurance_on_a_sequential_rate_is_the_quantile_of_its_stopping_time(
    tmp_path: Path,
) -> None:
    # 90% right against min: 0.80 over 100 cases, read sequentially: undecided. --assurance
    # 0.8 was dropped without a word ("assurance": null, nothing on the rule); it is now the
    # size by which a sequential run has decided the rule 80% of the time.
    total = 100
    root = _project(tmp_path / "p", total, (
        "version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.8\n"))
    done = run_cli("run", "--sequential", "--json", cwd=root, timeout=300)
    assert done.code == 3, done.text
    planned = run_cli("plan", "latest", "--run", "--assurance", "0.8", "--json", cwd=root)
    assert planned.code == 0, planned.text
    doc = json.loads(planned.out)
    assert doc["assurance"] == 0.8
    rule = _rule(doc, "floor")
    assert rule["plan"] == "sized", rule
    a = rule["assurance"]
    assert a["status"] == "sized" and a["total"] > rule["total"], a
    # the same object as every plan's assurance (runs and comparisons alike)
    assert list(a) == ["target", "status", "more", "total", "probability", "method", "reason",
                       "assumption"]
    assert a["more"] == a["total"] - total and 0.8 <= a["probability"] <= 1.0
    # The sequential test itself (the one run feeds), on cases passing at the observed 90%:
    # the share of 3,000 simulated runs decided by that size is the probability reported.
    # Undecided, a BinaryTest's next state depends only on its count of cases and of passes
    # (no case is missing here): each (cases, passes, outcome) step is fed to the test once,
    # to a copy of the test left at that point, and the 3,000 runs (the same draws) walk
    # those steps.
    rng = np.random.default_rng(11)
    runs, decided = 3000, 0
    steps: dict[tuple[int, int, int, bool], BinaryTest] = {}
    for _ in range(runs):
        test = BinaryTest(0.8, "min", 0.95)
        for outcome in rng.random(a["total"]) < 0.9:
            key = (test.n, test.k_low, test.k_high, bool(outcome))
            if key not in steps:
                steps[key] = copy.copy(test)
                steps[key].add(bool(outcome))
            test = steps[key]
            if test.state is not None:
                decided += 1
                break
    share = decided / runs
    se = math.sqrt(a["probability"] * (1 - a["probability"]) / runs)
    assert abs(share - a["probability"]) <= 4 * se, (share, a)
    text = run_cli("plan", "latest", "--run", "--assurance", "0.8", cwd=root)
    assert (f"assurance {rule['more']} more decide it at the observed rate; {a['more']} more"
            f" decide it 80% of the time ({a['total']} in total)") in text.out, text.out


def test_a_sequential_pass_held_as_incomplete_is_not_called_decided(tmp_path: Path) -> None:
    # 3 cases in 10 fail to answer: the sequential test passes min 0.5 after 116 cases (77
    # right, 39 missing at their worst), and the gate holds the PASS, 33.6% missing being
    # over max_missing (exit 5). plan said "decided (PASS); nothing to plan".
    app = ("def answer(case_input):\n"
           "    if case_input['n'] % 10 < 3:\n"
           "        raise ValueError('down')\n"
           "    return {'label': 'ok'}\n")
    root = write_project(tmp_path / "p", app=app, cases=[
        {"id": f"q{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(400)],
        release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n")
    assert run_cli("run", "--sequential", cwd=root, timeout=300).code == 5
    assert run_cli("gate", "latest", cwd=root).code == 5
    planned = run_cli("plan", "latest", "--run", "--json", cwd=root)
    assert planned.code == 0, planned.text
    rule = _rule(json.loads(planned.out), "floor")
    assert (rule["state"], rule["plan"], rule["total"]) == ("PASS", "not_admitted", None), rule
    assert rule["message"].startswith(
        "PASS on the cases read, but 33.6% of them are missing, over max_missing: the gate"
        " holds it as incomplete (exit 5)"), rule["message"]
