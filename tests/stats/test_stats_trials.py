"""The interval of a rate measured over repeated trials: checked against scipy, and by
simulated coverage on beta-binomial suites (cases differ; trials of a case are correlated).

The interval depends on a suite only through (sum of passes, sum of squared passes, cases
with a failed trial, cases with a passed trial), so each simulated suite is decided by
calling ``clustered_rate`` once per distinct such key, on a suite that has it: the coverage
measured is that of the shipped code, not of a copy of its formula.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from tests.stats._trials_coverage import coverage as _coverage

from oloproof.stats.trials import (
    CASE_EXACT,
    KORN_GRAUBARD,
    MIN_INFORMATIVE_CASES,
    clustered_rate,
    clustered_rate_bounded,
    design_effect,
    normal_isf,
    projected_interval,
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
    coverage, low_miss, high_miss, _ = _coverage(n, k, mu, rho, reps, seed=n * 100 + k)
    slack = 3 * math.sqrt(0.95 * 0.05 / reps)  # three Monte Carlo standard errors
    assert coverage >= 0.95 - slack, (n, k, mu, rho, coverage)
    # and neither side errs much more than its half: a min rule relies on the lower bound
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
    slack = 3 * math.sqrt(0.95 * 0.05 / reps)
    worst = min(
        (_coverage(n, k, mu, rho, reps, seed=i), (n, k, mu, rho))
        for i, (n, k, mu, rho) in enumerate(GRID)
    )
    assert worst[0][0] >= 0.95 - slack, worst


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
    ours = _coverage(n, k, mu, rho, 2000, seed=11)[0]
    assert ours >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 2000)


def test_the_plan_projection_reproduces_the_interval_at_the_observed_size() -> None:
    """At the run's own n and k, the design-effect projection plan uses is the interval the
    run got: n·k / (1 + (k - 1)·ICC) is the Korn–Graubard n* when the ICC is not clipped."""
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(200):
        n, k = int(rng.integers(20, 80)), int(rng.integers(2, 8))
        x = rng.binomial(k, rng.beta(3, 1.5, size=n))
        fractions, trials = list(x / k), [k] * n
        iv, method, _ = clustered_rate(fractions, trials)
        shape = design_effect(fractions, trials)
        if method != KORN_GRAUBARD or shape is None or not 0 < shape[1] < 1:
            continue
        informative = min(int((x < k).sum()), int((x > 0).sum()))
        projected = projected_interval(float(np.mean(fractions)), shape[1], n, k, informative)
        assert projected.lower == pytest.approx(iv.lower, abs=1e-9)
        assert projected.upper == pytest.approx(iv.upper, abs=1e-9)
        checked += 1
    assert checked > 50
    # fewer than 10 informative cases: the case-level interval, whatever the trials
    few = projected_interval(0.9, 0.1, 30, 10, 5)
    assert few == projected_interval(0.9, 0.1, 30, 100, 5)
