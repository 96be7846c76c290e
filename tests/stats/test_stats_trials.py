"""A rate measured over repeated trials. The interval that decides it (since issue 33) is the
betting interval on the cases' pass fractions: monotone in every trial's outcome (checked
here on the decision itself, where Korn–Graubard with its case-level fallback was not), and
its coverage simulated on beta-binomial suites (cases differ; trials of a case are
correlated). Korn–Graubard (stats/trials.py) still gives the effective number of cases and
the design effect a run reports; it is checked against scipy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from tests.stats._trials_coverage import coverage as _coverage
from tests.stats._trials_coverage import korn_graubard_coverage

from oloproof.enums import MetricKind
from oloproof.evidence import CriterionEvidence
from oloproof.policy.decide import summarize
from oloproof.stats.trials import (
    CASE_EXACT,
    KORN_GRAUBARD,
    MIN_INFORMATIVE_CASES,
    clustered_rate,
    clustered_rate_bounded,
    design_effect,
    normal_isf,
)


def _scipy_cp_real(x: float, n: float, level: float) -> tuple[float, float]:
    half = (1 - level) / 2
    lower = 0.0 if x <= 0 else stats.beta.ppf(half, x, n - x + 1)
    upper = 1.0 if x >= n else stats.beta.ppf(1 - half, x + 1, n - x)
    return float(lower), float(upper)


def _scipy_reference(fractions: list[float], trials: list[int], level: float) -> tuple[float, float, str]:
    """Korn & Graubard (1998) with the case-level exact fallback, written with scipy."""
    f = np.asarray(fractions, float)
    n = len(f)
    half = (1 - level) / 2
    mean = f.mean()
    s2 = f.var(ddof=1)
    informative = min(int((f < 1).sum()), int((f > 0).sum()))
    if informative >= MIN_INFORMATIVE_CASES and s2 > 0:
        adjust = (stats.norm.isf(half) / stats.t.isf(half, n - 1)) ** 2
        n_eff = mean * (1 - mean) / (s2 / n) * adjust
        n_eff = min(max(n_eff, n * adjust), float(sum(trials)))
        return (*_scipy_cp_real(mean * n_eff, n_eff, level), KORN_GRAUBARD)
    return (*_scipy_cp_real(mean * n, n, level), CASE_EXACT)


def test_normal_quantile_matches_scipy() -> None:
    for tail in (0.25, 0.05, 0.025, 0.005, 1e-4):
        assert normal_isf(tail) == pytest.approx(stats.norm.isf(tail), abs=1e-12)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_interval_matches_a_scipy_implementation(level: float) -> None:
    rng = np.random.default_rng(7)
    methods = set()
    for _ in range(300):
        n = int(rng.integers(2, 60))
        k = int(rng.integers(1, 9))
        p = rng.beta(2, 1, size=n)
        passes = rng.binomial(k, p)
        fractions = list(passes / k)
        trials = [k] * n
        iv, method, _ = clustered_rate(fractions, trials, level)
        lo, hi, ref_method = _scipy_reference(fractions, trials, level)
        assert method == ref_method
        assert iv.lower == pytest.approx(lo, abs=1e-10)
        assert iv.upper == pytest.approx(hi, abs=1e-10)
        methods.add(method)
    assert methods == {KORN_GRAUBARD, CASE_EXACT}  # both branches were checked


def test_all_pass_falls_back_to_the_exact_interval_on_cases() -> None:
    # 20 cases, every trial of every one passed: the variance is 0, no design effect can be
    # estimated; the interval is CP for 20 of 20 (not 100 of 100).
    iv, method, n_eff = clustered_rate([1.0] * 20, [5] * 20)
    assert method == CASE_EXACT and n_eff == 20
    assert iv.lower == pytest.approx(0.025 ** (1 / 20), abs=1e-12)
    assert iv.upper == 1.0
    naive = stats.beta.ppf(0.025, 100, 1)  # what 100 independent trials would claim
    assert iv.lower < naive


def test_equal_fractions_never_claim_precision_they_do_not_have() -> None:
    # every case passed 3 of 5: the between-case variance is 0, and the fallback is used.
    iv, method, _ = clustered_rate([0.6] * 30, [5] * 30)
    assert method == CASE_EXACT
    assert iv.lower == pytest.approx(_scipy_cp_real(18, 30, 0.95)[0], abs=1e-10)


def test_missing_trials_only_widen_the_interval() -> None:
    full = clustered_rate_bounded([(4, 1, 0)] * 15 + [(5, 0, 0)] * 15)
    holed = clustered_rate_bounded([(3, 1, 1)] * 15 + [(5, 0, 0)] * 15)
    assert holed.interval.lower <= full.interval.lower
    assert holed.interval.upper >= full.interval.upper
    assert holed.missing_trials == 15
    # the bounds are those of the two extreme completions
    low = clustered_rate([0.6] * 15 + [1.0] * 15, [5] * 30)[0]
    high = clustered_rate([0.8] * 15 + [1.0] * 15, [5] * 30)[0]
    assert holed.interval.lower == low.lower and holed.interval.upper == high.upper


def test_a_case_with_every_trial_missing_counts_as_anything() -> None:
    r = clustered_rate_bounded([(0, 0, 5)])
    assert r.estimate is None and r.cases == 0
    assert (r.interval.lower, r.interval.upper) == (0.0, 1.0)
    excluded = clustered_rate_bounded([(0, 0, 0), (2, 0, 0)])
    assert excluded.cases == 1  # a case whose every trial was excluded is left out


def test_design_effect_and_icc_against_their_definition() -> None:
    fractions = [1.0] * 10 + [0.0] * 10
    deff, icc = design_effect(fractions, [4] * 20)  # type: ignore[misc]
    # perfectly correlated trials: the variance is that of 20 draws, not 80
    s2 = np.var(fractions, ddof=1)
    assert deff == pytest.approx((s2 / 20) / (0.25 / 80))
    assert icc == pytest.approx(min(1.0, (deff - 1) / 3))
    assert design_effect([1.0] * 5, [3] * 5) is None
    assert design_effect([0.5, 0.7], [1, 1]) is None  # one trial per case: nothing to say


# -- coverage ------------------------------------------------------------------------


FAST_CELLS = [
    # n cases, k trials, suite rate, intra-class correlation
    (10, 5, 0.8, 0.6),
    (20, 5, 0.5, 0.2),
    (30, 3, 0.9, 0.3),
    (20, 10, 0.95, 0.6),  # where Korn–Graubard alone covered 91%
    (40, 2, 0.7, 0.0),
]


@pytest.mark.parametrize(("n", "k", "mu", "rho"), FAST_CELLS)
def test_simulated_coverage_is_at_least_nominal(n: int, k: int, mu: float, rho: float) -> None:
    reps = 2000
    coverage, low_miss, high_miss, _ = _coverage(n, k, mu, rho, reps, seed=n * 100 + k,
                                                  width=False)
    slack = 3 * math.sqrt(0.95 * 0.05 / reps)  # three Monte Carlo standard errors
    assert coverage >= 0.95 - slack, (n, k, mu, rho, coverage)
    # and neither side errs more than its half: a min rule relies on the lower bound
    half_slack = 3 * math.sqrt(0.025 * 0.975 / reps)
    assert low_miss <= 0.025 + half_slack and high_miss <= 0.025 + half_slack


GRID = [
    (n, k, mu, rho)
    for n in (5, 10, 20, 50)
    for k in (2, 5, 10)
    for mu in (0.5, 0.8, 0.95)
    for rho in (0.0, 0.2, 0.6)
]


@pytest.mark.slow
def test_simulated_coverage_over_the_whole_grid() -> None:
    reps = 2000
    half_slack = 3 * math.sqrt(0.025 * 0.975 / reps)
    for i, (n, k, mu, rho) in enumerate(GRID):
        # (the widths are not checked here: not measured)
        _cov, low_miss, high_miss, _ = _coverage(n, k, mu, rho, reps, seed=i, width=False)
        assert low_miss <= 0.025 + half_slack and high_miss <= 0.025 + half_slack, (n, k, mu, rho)


def test_naive_binomial_interval_on_all_trials_would_undercover() -> None:
    # the reason for all this: with strong case effects, CP on k·n draws misses far more
    # often than 5%.
    rng = np.random.default_rng(3)
    n, k, mu, rho, reps = 20, 5, 0.8, 0.5, 4000
    a, b = mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho
    x = rng.binomial(k, rng.beta(a, b, size=(reps, n))).sum(1)
    total = n * k
    lo = np.where(x == 0, 0.0, stats.beta.ppf(0.025, x, total - x + 1))
    hi = np.where(x == total, 1.0, stats.beta.ppf(0.975, x + 1, total - x))
    assert np.mean((lo <= mu) & (mu <= hi)) < 0.85
    ours = _coverage(n, k, mu, rho, 2000, seed=11, width=False)[0]
    assert ours >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 2000)
    kg = korn_graubard_coverage(n, k, mu, rho, 2000, seed=11)[0]
    assert kg >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 2000)


def _evidence(counts: list[tuple[int, int, int]]) -> CriterionEvidence:
    """A BINARY criterion over trials: case i passed, failed and missed counts[i] trials."""
    ev = CriterionEvidence("c", MetricKind.BINARY)
    ev.trials = max(sum(c) for c in counts)
    for i, (p, f, m) in enumerate(counts):
        outcomes = ([("OK", True, None)] * p + [("OK", False, None)] * f
                    + [("ERROR", None, None)] * m)
        ev.add_case(f"case-{i:03d}", outcomes)
    return ev


def _small_suites(seed: int, count: int) -> list[list[tuple[int, int, int]]]:
    rng = np.random.default_rng(seed)
    suites = []
    for _ in range(count):
        n = int(rng.choice([5, 8, 12, 20, 30]))
        k = int(rng.choice([2, 3, 5, 10]))
        mu, rho = float(rng.uniform(0.05, 0.95)), float(rng.choice([0.01, 0.2, 0.6]))
        a, b = mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho
        passes = rng.binomial(k, rng.beta(a, b, size=n))
        suites.append([(int(x), k - int(x), 0) for x in passes])
    return suites


@pytest.mark.parametrize("suites", [12, pytest.param(200, marks=pytest.mark.slow)])
def test_one_more_passing_trial_never_lowers_either_bound(suites: int) -> None:
    """Issue 33: with Korn–Graubard and its case-level fallback, one more passing trial could
    lower the lower bound (0.2822 to 0.2338 in the audit, flipping min: 0.25), in 72 of 600
    small suites. The interval that decides is now monotone in every trial's outcome."""
    checked = 0
    for counts in _small_suites(33, suites):
        base = summarize(_evidence(counts), 0.95)
        for i, (p, f, m) in enumerate(counts):
            if not f:
                continue
            flipped = list(counts)
            flipped[i] = (p + 1, f - 1, m)
            after = summarize(_evidence(flipped), 0.95)
            # (each bound is computed to 1e-10, on its far side)
            assert after.lower >= base.lower - 2e-10, (counts, i)
            assert after.upper >= base.upper - 2e-10, (counts, i)
            checked += 1
    assert checked > 3 * suites


def test_korn_graubard_with_its_fallback_was_not_monotone() -> None:
    """What the test above guards against, on the method that decided before: the same
    search finds suites where one more passing trial lowers its lower bound."""
    found = 0
    for counts in _small_suites(33, 25):
        base = clustered_rate_bounded(counts).interval.lower
        for i, (p, f, m) in enumerate(counts):
            if f:
                flipped = list(counts)
                flipped[i] = (p + 1, f - 1, m)
                found += clustered_rate_bounded(flipped).interval.lower < base - 1e-12
    assert found > 0


def test_a_missing_trial_is_bounded_at_its_worst() -> None:
    """With the interval monotone, a missing trial counted as a fail gives the lower bound
    and as a pass the upper: the interval contains that of every completion."""
    rng = np.random.default_rng(8)
    for _ in range(10):
        n, k = int(rng.integers(5, 25)), int(rng.integers(2, 6))
        counts = []
        for _case in range(n):
            m = int(rng.integers(0, 2)) if rng.random() < 0.3 else 0
            p = int(rng.integers(0, k - m + 1))
            counts.append((p, k - m - p, m))
        holed = summarize(_evidence(counts), 0.95)
        for _completion in range(5):
            filled = []
            for p, f, m in counts:
                up = int(rng.integers(0, m + 1))
                filled.append((p + up, f + m - up, 0))
            full = summarize(_evidence(filled), 0.95)
            assert holed.lower <= full.lower + 2e-10 and holed.upper >= full.upper - 2e-10
        worst = summarize(_evidence([(p, f + m, 0) for p, f, m in counts]), 0.95)
        best = summarize(_evidence([(p + m, f, 0) for p, f, m in counts]), 0.95)
        assert holed.lower == pytest.approx(worst.lower, abs=1e-12)
        assert holed.upper == pytest.approx(best.upper, abs=1e-12)
