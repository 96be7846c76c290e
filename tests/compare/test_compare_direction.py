"""A comparison rule that reads "higher is better" on a metric where lower is better.

``superiority`` and ``non_inferiority`` decide the paired difference candidate - baseline as
"higher is better". On an ``absolute_error`` metric (or a MEAN metric whose release rules
are all ``max:`` ceilings) their PASS means the candidate's error grew: the finding was a
candidate whose absolute error rose from 0.1 to 5 on every case, ``non_inferiority`` margin
0.1 on it, and ``compare`` said PASS ALLOW, exit 0. Such a rule is refused at load, exit 2,
by ``compare`` and by ``run --sequential --baseline``, naming the file, the line, the field
and what is accepted; ``equivalence`` (symmetric) on the same metric is accepted, and so is
a rule on a BINARY metric. Through the CLI in a subprocess, on real projects."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project

RUN_ID = re.compile(r"Run (run_[0-9A-Z]{26})")
CMP_ID = re.compile(r"Comparison (cmp_[0-9A-Z]{26})")

# The baseline is off by 0.1 on every case; the candidate (ERR = 5.0) by 5. Both get the
# label right, and both report a cost (a custom MEAN metric whose release rule is a max).
APP = """
ERR = {err}

def answer(case_input):
    x = case_input["x"]
    return {{"value": x + ERR, "label": "ok", "cost": 10 * ERR}}
"""

EVALUATORS = """
- {type: absolute_error, criterion: error, field: value, range: [0, 10]}
- {type: exact_match, criterion: exact_label, field: label}
- {type: custom, criterion: cost, function: checks:cost, kind: mean, range: [0, 100]}
"""

CHECKS = """
def cost(output, case):
    return float(output["cost"])
"""

RELEASE = """\
version: 1
rules:
  - {id: label-floor, metric: exact_label, min: 0.5}
  - {id: cost-ceiling, metric: cost, max: 80}
"""


def _project(root: Path) -> tuple[Path, str, str]:
    """A project with a stored baseline (error 0.1) and a stored candidate (error 5)."""
    cases = [{"id": f"c{i:02d}", "input": {"x": i},
              "expected": {"value": float(i), "label": "ok"}} for i in range(40)]
    write_project(root, app=APP.format(err=0.1), cases=cases, evaluators=EVALUATORS,
                  release=RELEASE, extra_files={"checks.py": CHECKS})
    base = run_cli("run", cwd=root)
    assert base.code == 0, base.text
    (root / "app.py").write_text(APP.format(err=5.0))
    cand = run_cli("run", cwd=root)
    assert cand.code == 0, cand.text
    found_base, found_cand = RUN_ID.search(base.out), RUN_ID.search(cand.out)
    assert found_base and found_cand
    return root, found_cand.group(1), found_base.group(1)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    return _project(tmp_path_factory.mktemp("direction") / "p")


def _comparisons(root: Path) -> int:
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM comparisons").fetchone()[0])
    finally:
        conn.close()


def _runs(root: Path) -> int:
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    finally:
        conn.close()


def _policy(root: Path, name: str, kind: str, metric: str, margin: float | None) -> Path:
    path = root / name
    path.write_text(
        "version: 1\nrules:\n  - id: not-worse\n"
        f"    kind: {kind}\n    metric: {metric}\n"
        + (f"    margin: {margin}\n" if margin is not None else "")
    )
    return path


@pytest.mark.parametrize(("kind", "margin", "reading"), [
    ("non_inferiority", 0.1, ("it would PASS however much the candidate's error grew, and"
                              " FAIL only when it shrank by more than 0.1")),
    ("superiority", None, "its PASS would mean that the candidate's error grew"),
])
def test_compare_refuses_a_higher_is_better_rule_on_an_absolute_error(
    stored: tuple[Path, str, str], kind: str, margin: float | None, reading: str
) -> None:
    root, cand, base = stored
    policy = _policy(root, f"cmp-{kind}.yaml", kind, "error", margin)
    before = _comparisons(root)
    done = run_cli("compare", cand, base, "--policy", policy.name, cwd=root)
    assert done.code == 2, done.text  # it was PASS ALLOW, exit 0
    assert "Traceback" not in done.text
    assert done.err.startswith(
        f"oloproof compare: error: cmp-{kind}.yaml:4: rules[0].kind: rule not-worse: {kind}"
        " reads the difference candidate - baseline as \"higher is better\", but lower is"
        " better for error (its evaluator is an absolute_error: the distance from the"
        f" expected value): {reading}, so a regression would be allowed. Write kind:"
        " equivalence on error"
    ), done.err
    assert "(accepted: kind: equivalence on error, or superiority/non_inferiority on a" \
        " metric where higher is better)" in done.err
    assert _comparisons(root) == before  # nothing stored


def test_compare_refuses_it_on_a_mean_metric_whose_release_rules_are_ceilings(
    stored: tuple[Path, str, str],
) -> None:
    root, cand, base = stored
    policy = _policy(root, "cmp-cost.yaml", "non_inferiority", "cost", 5)
    done = run_cli("compare", cand, base, "--policy", policy.name, "--json", cwd=root)
    assert done.code == 2, done.text
    assert "cmp-cost.yaml:4: rules[0].kind: rule not-worse: non_inferiority" in done.err
    assert "lower is better for cost (every release rule on it is a max: ceiling)" in done.err


def test_equivalence_on_the_error_and_non_inferiority_on_a_rate_are_decided(
    stored: tuple[Path, str, str],
) -> None:
    root, cand, base = stored
    policy = _policy(root, "cmp-eq.yaml", "equivalence", "error", 0.5)
    done = run_cli("compare", cand, base, "--policy", policy.name, "--json", cwd=root)
    assert done.code == 1, done.text  # the error grew by 4.9: not within ±0.5
    [decision] = json.loads(done.out)["decisions"]
    assert (decision["rule"], decision["state"]) == ("not-worse", "FAIL")
    policy = _policy(root, "cmp-rate.yaml", "non_inferiority", "exact_label", 0.1)
    done = run_cli("compare", cand, base, "--policy", policy.name, "--json", cwd=root)
    assert done.code == 0, done.text  # both runs label every case right
    [decision] = json.loads(done.out)["decisions"]
    assert (decision["rule"], decision["state"]) == ("not-worse", "PASS")


def test_the_direction_holds_when_the_project_file_cannot_be_read(tmp_path: Path) -> None:
    """The stored runs do not keep the evaluator's type: it is read from oloproof.yaml. A
    file that no longer parses leaves the release rules stored with the candidate (here
    the ceiling on cost); the comparison is still made for a rule that can be."""
    root, cand, base = _project(tmp_path / "p")
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "evaluators: [\n")
    policy = _policy(root, "cmp-cost.yaml", "superiority", "cost", None)
    done = run_cli("compare", cand, base, "--policy", policy.name, cwd=root)
    assert done.code == 2, done.text
    assert "Traceback" not in done.text
    assert "lower is better for cost (every release rule on it is a max: ceiling)" in done.err
    policy = _policy(root, "cmp-eq.yaml", "equivalence", "error", 0.5)
    done = run_cli("compare", cand, base, "--policy", policy.name, cwd=root)
    assert done.code == 1, done.text


def test_plan_reads_a_comparison_stored_with_such_a_rule_before(
    stored: tuple[Path, str, str],
) -> None:
    """A comparison stored by an earlier version under a non_inferiority rule on the error
    (its stored policy rewritten here to one) is still planned from its stored policy."""
    root, cand, base = stored
    policy = _policy(root, "cmp-old.yaml", "equivalence", "error", 0.5)
    made = run_cli("compare", cand, base, "--policy", policy.name, cwd=root)
    found = CMP_ID.search(made.out)
    assert found, made.text
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        (stored_policy,) = conn.execute("SELECT policy_json FROM comparisons WHERE id = ?",
                                        (found.group(1),)).fetchone()
        old = json.loads(stored_policy)
        old["rules"][0]["kind"] = "non_inferiority"
        conn.execute("UPDATE comparisons SET policy_json = ? WHERE id = ?",
                     (json.dumps(old), found.group(1)))
        conn.commit()
    finally:
        conn.close()
    plan = run_cli("plan", found.group(1), cwd=root)
    assert plan.code == 0, plan.text
    assert "not-worse: decided" in plan.out


def test_a_sequential_run_with_a_baseline_refuses_it_before_running(
    stored: tuple[Path, str, str],
) -> None:
    root, _cand, base = stored
    policy = _policy(root, "cmp-seq.yaml", "non_inferiority", "error", 0.1)
    before = _runs(root)
    done = run_cli("run", "--sequential", "--baseline", base, "--compare-policy",
                   policy.name, cwd=root)
    assert done.code == 2, done.text
    assert "Traceback" not in done.text
    assert "cmp-seq.yaml:4: rules[0].kind: rule not-worse: non_inferiority reads the" \
        " difference candidate - baseline as \"higher is better\", but lower is better for" \
        " error (its evaluator is an absolute_error" in done.err
    assert _runs(root) == before  # refused before a run is stored
    # The same rule on the rate, and equivalence on the error, are accepted.
    for name, kind, metric in (("cmp-seq-rate.yaml", "non_inferiority", "exact_label"),
                               ("cmp-seq-eq.yaml", "equivalence", "error")):
        policy = _policy(root, name, kind, metric, 0.5)
        done = run_cli("run", "--sequential", "--baseline", base, "--compare-policy",
                       policy.name, cwd=root)
        assert done.code != 2, done.text
        assert "Traceback" not in done.text


# A rate whose release rule is a ceiling: the regex passes when the answer promises a
# refund, and fewer are better. The candidate promises on every case, the baseline on 1 in 10.
PROMISES_APP = """
import os

def answer(case_input):
    promise = os.environ.get("PROMISE") == "1" or case_input["x"] % 10 == 0
    return {"text": "we guarantee a refund" if promise else "we will look into it"}
"""


def _promises(root: Path, rules: str) -> tuple[Path, str, str]:
    cases = [{"id": f"c{i:02d}", "input": {"x": i}} for i in range(60)]
    write_project(root, app=PROMISES_APP, cases=cases,
                  evaluators="- {type: regex, criterion: promises, field: text,"
                             " pattern: guarantee}\n",
                  release=f"version: 1\nrules:\n{rules}")
    base = run_cli("run", cwd=root)
    (root / "oloproof.yaml").write_text(
        (root / "oloproof.yaml").read_text().replace('version: "1"', 'version: "2"'))
    cand = run_cli("run", cwd=root, env={"PROMISE": "1"})
    found_base, found_cand = RUN_ID.search(base.out), RUN_ID.search(cand.out)
    assert found_base and found_cand, base.text + cand.text
    return root, found_cand.group(1), found_base.group(1)


def test_a_rate_whose_release_rules_are_ceilings_is_lower_is_better(tmp_path: Path) -> None:
    """The finding: promises rose from 10% to 100% of the answers, non_inferiority margin
    0.1 on them: PASS ALLOW, exit 0 (`[+78.2, +95.4] pts: lower > -10.0 pts`)."""
    root, cand, base = _promises(tmp_path / "p", "  - {id: few, metric: promises, max: 0.3}\n")
    policy = _policy(root, "cmp.yaml", "non_inferiority", "promises", 0.1)
    done = run_cli("compare", cand, base, "--policy", policy.name, cwd=root)
    assert done.code == 2, done.text
    assert "cmp.yaml:4: rules[0].kind: rule not-worse: non_inferiority reads the difference" \
        " candidate - baseline as \"higher is better\", but lower is better for promises" \
        " (every release rule on its pass rate is a max: ceiling: fewer passes are better)" \
        in done.err
    policy = _policy(root, "cmp-eq.yaml", "equivalence", "promises", 0.1)
    done = run_cli("compare", cand, base, "--policy", policy.name, "--json", cwd=root)
    assert done.code == 1, done.text
    assert json.loads(done.out)["decisions"][0]["state"] == "FAIL"


def test_a_ceiling_beside_a_floor_leaves_a_rate_higher_is_better(tmp_path: Path) -> None:
    """Beside a floor, a ceiling does not make the rate lower-is-better: the rule is read
    as written and decided (here the candidate is the run promising on 1 case in 10, the
    baseline on every case: a drop of 90 points, FAIL)."""
    root, cand, base = _promises(
        tmp_path / "p", "  - {id: floor, metric: promises, min: 0.1}\n"
                        "  - {id: cap, metric: promises, max: 0.9}\n")
    policy = _policy(root, "cmp.yaml", "non_inferiority", "promises", 0.1)
    done = run_cli("compare", base, cand, "--policy", policy.name, "--json", cwd=root)
    assert done.code == 1, done.text
    assert json.loads(done.out)["decisions"][0]["state"] == "FAIL"
