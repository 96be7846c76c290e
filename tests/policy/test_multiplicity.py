"""Rule families: Holm and Bonferroni on interval decisions, checked against statsmodels.

Each rule's p-value is computed here from the binomial with scipy, by the duality of the
Clopper-Pearson interval with the exact binomial test: at level 1 - a the lower bound is at
least t exactly when P_t(X >= k) <= a/2, and the upper bound is below t exactly when
P_t(X <= k) < a/2. So a rule is decided at 1 - a exactly when a >= p, with
p = min(1, 2 min(P_t(X >= k), P_t(X <= k))), and Holm's procedure on these p-values
(statsmodels.stats.multitest.multipletests) must reject exactly the rules we decide.
"""

from __future__ import annotations

import gc
import random
from pathlib import Path

import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from tests.conftest import run_cli, write_project

from oloproof.policy.decide import decide_run
from oloproof.project.config import ReleasePolicy
from oloproof.store.reader import CriterionEvidence


def _p_value(k: int, n: int, t: float) -> float:
    upper_tail = float(stats.binom.sf(k - 1, n, t))  # P(X >= k)
    lower_tail = float(stats.binom.cdf(k, n, t))  # P(X <= k)
    return min(1.0, 2.0 * min(upper_tail, lower_tail))


def _family_case(rng: random.Random, size: int) -> tuple[list[tuple[int, int, float]], list[float]]:
    rules = []
    for _ in range(size):
        n = rng.choice([20, 50, 100, 300])
        k = rng.randint(int(0.5 * n), n)
        t = round(rng.uniform(0.45, 0.95), 3)
        rules.append((k, n, t))
    return rules, [_p_value(k, n, t) for k, n, t in rules]


def _decide(rules: list[tuple[int, int, float]], method: str, level: float) -> list[str]:
    evidence = {
        f"m{i}": CriterionEvidence(f"m{i}", "BINARY", None, passed=k, failed=n - k)
        for i, (k, n, _) in enumerate(rules)
    }
    policy = ReleasePolicy.validate(
        {
            "version": 1,
            "confidence_level": level,
            "families": {"safety": {"multiplicity": method}},
            "rules": [
                {"id": f"r{i}", "metric": f"m{i}", "min": t, "family": "safety"}
                for i, (_, _, t) in enumerate(rules)
            ],
        }
    )
    decisions, _ = decide_run(evidence, policy)
    return [d.state for d in decisions]


@pytest.mark.parametrize("method", ["holm", "bonferroni"])
@pytest.mark.parametrize("seed", range(8))
def test_family_decisions_match_statsmodels(
    method: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # statsmodels' Holm ends with gc.collect(), memory housekeeping that is no part of its
    # result: a full collection of the test process each time, most of this test's time in
    # a suite's worker. It is left out here; the rejections are the same.
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    rng = random.Random(seed)
    level = rng.choice([0.9, 0.95, 0.99])
    rules, pvals = _family_case(rng, rng.randint(2, 8))
    # keep away from exact ties, where floating point decides and no reference can
    alpha = 1 - level
    size = len(rules)
    for p in pvals:
        for j in range(1, size + 1):
            assume = abs(p - alpha / j) > 1e-9 * alpha
            if not assume:
                pytest.skip("a p-value sits on a Holm threshold")
    reject, *_ = multipletests(pvals, alpha=alpha, method=method)
    states = _decide(rules, method, level)
    decided = [s in ("PASS", "FAIL") for s in states]
    assert decided == list(reject), (rules, pvals, states)


def test_holm_decides_more_than_bonferroni_and_names_the_level(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)  # as above
    # p-values about 0.0069, 0.018 and 0.051: Bonferroni at 0.05/3 decides the first only;
    # Holm steps down to 0.05/2 and decides the second as well.
    rules = [(95, 100, 0.86), (91, 100, 0.82), (88, 100, 0.80)]
    pvals = [_p_value(k, n, t) for k, n, t in rules]
    holm = multipletests(pvals, alpha=0.05, method="holm")[0]
    bonf = multipletests(pvals, alpha=0.05, method="bonferroni")[0]
    assert list(holm) == [True, True, False] and list(bonf) == [True, False, False]
    assert list(holm) == [s in ("PASS", "FAIL") for s in _decide(rules, "holm", 0.95)]
    assert list(bonf) == [s in ("PASS", "FAIL") for s in _decide(rules, "bonferroni", 0.95)]
    evidence = {
        f"m{i}": CriterionEvidence(f"m{i}", "BINARY", None, passed=k, failed=n - k)
        for i, (k, n, _) in enumerate(rules)
    }
    policy = ReleasePolicy.validate(
        {
            "version": 1,
            "families": {"safety": {"multiplicity": "bonferroni"}},
            "rules": [
                {"id": f"r{i}", "metric": f"m{i}", "min": t, "family": "safety"}
                for i, (_, _, t) in enumerate(rules)
            ],
        }
    )
    decisions, _ = decide_run(evidence, policy)
    assert decisions[0].confidence_level == pytest.approx(1 - 0.05 / 3)
    assert decisions[0].detail.startswith("98.333% CP [")
    assert "(Bonferroni over the 3 rules of family safety; family-wise 95%)" in decisions[0].detail


def test_a_family_of_one_rule_is_said_in_the_singular() -> None:
    evidence = {"m0": CriterionEvidence("m0", "BINARY", None, passed=90, failed=10)}
    policy = ReleasePolicy.validate({
        "version": 1, "families": {"safety": {"multiplicity": "holm"}},
        "rules": [{"id": "r0", "metric": "m0", "min": 0.8, "family": "safety"}],
    })
    decisions, _ = decide_run(evidence, policy)
    assert "(Holm over the 1 rule of family safety; family-wise 95%)" in decisions[0].detail


def test_default_and_none_leave_each_rule_at_the_policy_level() -> None:
    rules = [(93, 100, 0.85), (90, 100, 0.82)]
    plain = _decide(rules, "none", 0.95)
    pvals = [_p_value(k, n, t) for k, n, t in rules]
    assert [s in ("PASS", "FAIL") for s in plain] == [p <= 0.05 for p in pvals]


def test_unknown_family_is_a_config_error_naming_file_field_and_line(tmp_path: Path) -> None:
    release = """\
version: 1
families:
  safety: {multiplicity: holm}
rules:
  - {id: floor, metric: exact_label, min: 0.5, family: safty}
"""
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(3)]
    app = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "ok"}
"""
    project = write_project(tmp_path / "p", app=app, cases=cases, release=release)
    result = run_cli("run", cwd=project)
    assert result.code == 2, result.text
    assert "release.yaml:5" in result.err
    assert "rules[0].family" in result.err
    assert "unknown family 'safty'; did you mean 'safety'?" in result.err
    assert "Traceback" not in result.err
    bad_method = release.replace("holm", "sidak").replace("safty", "safety")
    (project / "release.yaml").write_text(bad_method)
    result = run_cli("run", cwd=project)
    assert result.code == 2 and "families.safety.multiplicity" in result.err, result.text
