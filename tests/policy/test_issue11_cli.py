"""The examples of issue 11, through the real CLI on real projects.

References are independent: scipy's t and beta quantiles, brute force over completions and
over every sample size, written here.
"""

from __future__ import annotations

import json
import re
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.conftest import run_cli, write_project
from tests.stats import _betting_reference as betting_reference

# -- 1. MEAN scores outside the declared range are missing, never clipped -------------------

ERRORS_APP = """
from oloproof import system

@system(name="errs", version="1")
def answer(case_input):
    return {"days": case_input["truth"] + case_input["off"]}
"""


def _reasons(project: Path) -> list[str]:
    conn = sqlite3.connect(project / ".oloproof" / "store.sqlite")
    try:
        rows = conn.execute("SELECT reason FROM run_judgments WHERE status = 'ERROR'").fetchall()
    finally:
        conn.close()
    assert rows
    return [str(r[0]) for r in rows]


def _error_cases(offsets: list[float]) -> list[dict[str, object]]:
    return [
        {"id": f"c{i}", "input": {"truth": 10, "off": off}, "expected": {"truth": 10}}
        for i, off in enumerate(offsets)
    ]


def test_scores_outside_the_range_are_missing_not_clipped(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "p",
        app=ERRORS_APP,
        cases=_error_cases([44.0, 45.0, 46.0]),
        evaluators="""
        - {type: absolute_error, criterion: err, field: days, expected_field: truth, range: [0, 30]}
        """,
        # A ceiling 3 cases can fail: all at the top of [0, 30], the betting interval's
        # lower bound is 7.09 (a ceiling of 25 could not fail, and is refused: issue 25).
        release="version: 1\nrules:\n  - {id: err-cap, metric: err, max: 5}\n",
    )
    result = run_cli("run", "--json", cwd=project)
    # Clipped to [30, 30] this would be a ceiling's FAIL; missing, every case is: the
    # evidence is incomplete (exit 5). (With max: 35, beyond the range, the rule could not
    # fail at all, and is refused: tests/trust/test_allow_earned_cli.py.)
    assert result.code == 5, result.text
    summary = [e for e in map(json.loads, result.out.splitlines()) if e.get("type")]
    judged = [e for e in summary if e["type"] == "case_judged"]
    assert len(judged) == 3
    for event in judged:
        assert event["status"] == "ERROR" and event["score"] is None
    for reason in _reasons(project):
        assert "outside the declared range [0, 30]" in reason
        assert re.search(r"score 4[456] is outside", reason)
    gate = run_cli("gate", "latest", "--json", cwd=project)
    doc = json.loads(gate.out)
    assert gate.code == 5
    metric = doc["metrics"][0]
    assert metric["observed"] == 0 and metric["missing"] == 3
    assert doc["decisions"][0]["state"] == "INSUFFICIENT_EVIDENCE"
    assert doc["decisions"][0]["reason"] == "no_observed_cases"


CUSTOM_APP = """
from oloproof import system

@system(name="echo", version="1")
def answer(case_input):
    return {"x": case_input["x"]}
"""

CUSTOM_EVAL = """
def score(output):
    return float(output["x"])
"""


def test_custom_mean_evaluator_out_of_range_is_missing(tmp_path: Path) -> None:
    cases = [{"id": f"c{i}", "input": {"x": x}} for i, x in enumerate([0.5, 0.6, 1.7, 0.4])]
    project = write_project(
        tmp_path / "p",
        app=CUSTOM_APP,
        cases=cases,
        evaluators="""
        - {type: custom, criterion: s, function: "scorer:score", kind: mean, range: [0, 1]}
        """,
        # One score of four out of range (25% missing): allowed here, to see the others.
        # A floor 4 cases can fail: all at 0, the betting interval reaches 0.67 (issue 25).
        release="version: 1\nmax_missing: 0.5\nrules:\n  - {id: s-floor, metric: s, min: 0.7}\n",
        extra_files={"scorer.py": CUSTOM_EVAL},
    )
    result = run_cli("run", "--json", cwd=project)
    assert result.code in (0, 1, 3), result.text
    judged = [e for e in map(json.loads, result.out.splitlines()) if e.get("type") == "case_judged"]
    bad = [e for e in judged if e["scenario_id"] == "c2"]
    assert bad and bad[0]["status"] == "ERROR"
    reasons = _reasons(project)
    assert any("score 1.7 is outside the declared range [0, 1]" in r for r in reasons), reasons
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    assert doc["metrics"][0]["observed"] == 3 and doc["metrics"][0]["missing"] == 1


# -- 2. the missing-bounded MEAN interval is the worst case ---------------------------------

FLAKY_APP = """
from oloproof import system

@system(name="flaky", version="1")
def answer(case_input):
    if case_input.get("fail"):
        raise RuntimeError("down")
    return {"v": 0.2}
"""


def test_nineteen_scores_of_0_2_and_one_missing_are_bounded_by_the_worst_case(
    tmp_path: Path,
) -> None:
    # 20 cases: a floor of 0.25 can fail (all 0: upper bound 0.21; issue 25 refuses a floor
    # no outcome could fail, such as 0.12 on 10 cases).
    cases = [{"id": f"c{i:02d}", "input": {"fail": i == 19}, "expected": {"v": 0.0}}
             for i in range(20)]
    project = write_project(
        tmp_path / "p",
        app=FLAKY_APP,
        cases=cases,
        evaluators="""
        - {type: absolute_error, criterion: e, field: v, expected_field: v, range: [0, 1]}
        """,
        release="version: 1\nrules:\n  - {id: e-floor, metric: e, min: 0.25}\n",
    )
    result = run_cli("run", cwd=project)
    assert result.code == 3, result.text
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    metric = doc["metrics"][0]
    # The betting interval (issue 33), each bound non-decreasing in every score: the worst
    # completion for the lower bound has the missing case at 0, in its place in the
    # canonical order of the case ids.
    scores: dict[str, float | None] = {f"c{i:02d}": 0.2 for i in range(19)}
    scores["c19"] = None
    lower, upper = betting_reference.mean_interval(scores, 0.0, 1.0)
    assert metric["lower"] == pytest.approx(lower, abs=2e-10)
    assert metric["upper"] == pytest.approx(upper, abs=2e-10)
    assert metric["lower"] < 0.25 < metric["upper"]
    assert doc["decisions"][0]["state"] == "INSUFFICIENT_EVIDENCE"


# -- 4. details that agree with themselves ---------------------------------------------------

LABEL_APP = """
from oloproof import system

@system(name="labels", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] >= case_input["bad"] else "no"}
"""


def _label_project(root: Path, n: int, bad: int, release: str) -> Path:
    cases = [
        {"id": f"q{i:03d}", "input": {"n": i, "bad": bad}, "expected": {"label": "ok"}}
        for i in range(n)
    ]
    return write_project(root, app=LABEL_APP, cases=cases, release=release)


def _detail(project: Path) -> str:
    doc = json.loads(run_cli("gate", "latest", "--json", cwd=project).out)
    return str(doc["decisions"][0]["detail"])


def _cp(k: int, n: int, level: float) -> tuple[float, float]:
    a = 1 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


@pytest.mark.parametrize(
    ("threshold", "written", "level", "level_text"),
    [(0.762, "76.2%", 0.95, "95%"), (0.7625, "76.25%", 0.999, "99.9%"),
     (0.7625, "76.25%", 0.975, "97.5%")],
)
def test_threshold_and_level_are_printed_as_written(
    tmp_path: Path, threshold: float, written: str, level: float, level_text: str
) -> None:
    # 40 of 40 pass: the lower bound decides against the threshold at each level
    release = (
        f"version: 1\nconfidence_level: {level}\nrules:\n"
        f"  - {{id: floor, metric: exact_label, min: {threshold}}}\n"
    )
    project = _label_project(tmp_path / "p", 200, 0, release)
    run_cli("run", cwd=project)
    detail = _detail(project)
    assert f"{level_text} CP [" in detail
    assert detail.endswith(written), detail
    match = re.search(r"\[([\d.]+)%, ([\d.]+)%\]", detail)
    assert match
    printed_lower = Fraction(match.group(1)) / 100
    true_lower = _cp(200, 200, level)[0]
    # outward, and the printed comparison is true of the printed numbers
    assert printed_lower <= Fraction(true_lower)
    assert ("lower ≥" in detail) == (printed_lower >= Fraction(str(threshold)))


def test_printed_bounds_get_the_digits_the_comparison_needs(tmp_path: Path) -> None:
    # find k of n whose true CP lower lies in [0.7625, 0.763): one decimal would print 76.2%
    n = 400
    level = 0.95
    k = next(k for k in range(n + 1) if _cp(k, n, level)[0] >= 0.7625)
    lower = _cp(k, n, level)[0]
    release = "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.7625}\n"
    project = _label_project(tmp_path / "p", n, n - k, release)
    run_cli("run", cwd=project)
    detail = _detail(project)
    match = re.search(r"\[([\d.]+)%, ([\d.]+)%\]: lower ≥ 76.25%", detail)
    assert match, detail
    printed = Fraction(match.group(1)) / 100
    assert Fraction(str(0.7625)) <= printed <= Fraction(lower)


def test_mean_interval_is_rounded_outward(tmp_path: Path) -> None:
    offsets = [0.123456, 0.654321, 0.333333, 0.987654, 0.5]
    project = write_project(
        tmp_path / "p",
        app=ERRORS_APP,
        cases=_error_cases(offsets),
        evaluators="""
        - {type: absolute_error, criterion: err, field: days, expected_field: truth, range: [0, 30]}
        """,
        release="version: 1\nrules:\n  - {id: err-cap, metric: err, max: 2}\n",
    )
    run_cli("run", cwd=project)
    detail = _detail(project)
    match = re.search(r"betting \[([-\d.]+), ([-\d.]+)\]", detail)
    assert match, detail
    lo, hi = betting_reference.mean_interval(
        {f"c{i}": off for i, off in enumerate(offsets)}, 0.0, 30.0
    )
    assert Fraction(match.group(1)) <= Fraction(lo) and Fraction(match.group(2)) >= Fraction(hi)


# -- 5 and 6. plans: missing cases held missing, and --assurance -----------------------------

MISSING_APP = """
from oloproof import system

@system(name="m", version="1")
def answer(case_input):
    if case_input["n"] >= 27:
        raise RuntimeError("down")
    return {"label": "ok" if case_input["n"] >= 2 else "no"}
"""


def _brute_missing(k: int, n: int, m: int, t: float, level: float) -> int:
    for total in range(n + m + 1, 5000):
        seen = total - m
        kk = round(Fraction(k * seen, n))
        lower = _cp(kk, total, level)[0]
        upper = _cp(kk + m, total, level)[1]
        if lower >= t or upper < t:
            return total
    raise AssertionError("no size found")


def test_plan_holds_missing_cases_missing(tmp_path: Path) -> None:
    # 25 of 27 observed pass, 3 missing, min 0.80: decided at 72 observed, 3 still missing
    cases = [{"id": f"q{i:02d}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(30)]
    project = write_project(
        tmp_path / "p", app=MISSING_APP, cases=cases,
        release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.80}\n",
    )
    assert run_cli("run", cwd=project).code == 3
    plan = run_cli("plan", "latest", "--run", cwd=project)
    assert plan.code == 0, plan.text
    total = _brute_missing(25, 27, 3, 0.80, 0.95)
    assert total == 75
    assert f"floor: about {total - 30} more cases would decide it" in plan.out
    assert f"({total} in total)" in plan.out
    assert "whatever the size" not in plan.out
    assert "the 3 missing cases of this run stay missing" in plan.out
    assert "re-running the 3 missing cases" in plan.out
    doc = json.loads(run_cli("plan", "latest", "--run", "--json", cwd=project).out)
    resolved = doc["rules"][0]["if_resolved"]
    # observed like the rest: the plain Clopper-Pearson search from 25 of 27
    plain = next(
        size for size in range(28, 5000)
        if _cp(round(Fraction(25 * size, 27)), size, 0.95)[0] >= 0.8
        or _cp(round(Fraction(25 * size, 27)), size, 0.95)[1] < 0.8
    )
    assert resolved["total"] == plain and resolved["more"] == max(plain - 30, 0)
    lo_pass = _cp(28, 30, 0.95)[0]
    assert resolved["if_all_pass"] == ("PASS" if lo_pass >= 0.8 else None)


def _decision_probability(total: int, rate: float, t: float, level: float,
                          kept: tuple[int, int] = (13, 18)) -> float:
    """P(decided at ``total``) when the ``kept`` (passes, cases) of the run stay and the
    cases to come pass at ``rate`` (scipy's binomial pmf and beta quantiles)."""
    k0, n0 = kept
    x = np.arange(k0, k0 + total - n0 + 1)
    a = 1 - level
    with np.errstate(all="ignore"):
        lower = np.where(x == 0, 0.0, stats.beta.ppf(a / 2, x, total - x + 1))
        upper = np.where(x == total, 1.0, stats.beta.ppf(1 - a / 2, x + 1, total - x))
    decided = (lower >= t) | (upper < t)
    return float(stats.binom.pmf(x - k0, total - n0, rate)[decided].sum())


SEED_APP = """
from oloproof import system

@system(name="seed", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] >= 5 else "no"}
"""


def test_plan_assurance_on_the_seed_example(tmp_path: Path) -> None:
    cases = [{"id": f"q{i:02d}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(18)]
    project = write_project(
        tmp_path / "p", app=SEED_APP, cases=cases,
        release="version: 1\nrules:\n  - {id: exact-label-floor, metric: exact_label, min: 0.70}\n",
    )
    assert run_cli("run", cwd=project).code == 3
    default = run_cli("plan", "latest", "--run", cwd=project)
    assert "about 1614 more cases would decide it, if the observed rate holds (1632 in total)" in (
        default.out
    )
    assert "assurance" not in default.out
    plan = run_cli("plan", "latest", "--run", "--assurance", "0.8", "--json", cwd=project)
    assert plan.code == 0, plan.text
    a = json.loads(plan.out)["rules"][0]["assurance"]
    total = int(a["total"])
    rate = 13 / 18
    assert _decision_probability(total, rate, 0.7, 0.95) >= 0.8
    assert a["probability"] == pytest.approx(_decision_probability(total, rate, 0.7, 0.95),
                                             abs=1e-9)
    # the seed's own figure decides it about half the time
    assert _decision_probability(1632, rate, 0.7, 0.95) == pytest.approx(0.505, abs=0.002)
    # nothing in the few hundred sizes just below reaches 0.8
    for size in range(total - 300, total):
        assert _decision_probability(size, rate, 0.7, 0.95) < 0.8
    text = run_cli("plan", "latest", "--run", "--assurance", "0.8", cwd=project).out
    assert (
        f"1,614 more decide it at the observed rate; {total - 18:,} more decide it 80% of the"
        " time" in text
    )
    assert ("the true pass rate equals the observed 72.2%, and the 18 cases observed keep"
            " their outcomes: only the cases to come are drawn") in text
    bad = run_cli("plan", "latest", "--run", "--assurance", "1.5", cwd=project)
    assert bad.code == 2 and "--assurance" in bad.err and "Traceback" not in bad.err
