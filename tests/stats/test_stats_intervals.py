"""Clopper-Pearson, Wilson and Student-t intervals against scipy and statsmodels."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from oloproof.policy.decide import fmt_interval
from oloproof.stats import (
    Interval,
    clopper_pearson,
    clopper_pearson_bounded,
    student_t_mean,
    student_t_mean_bounded,
    wilson,
)

LEVELS = [0.8, 0.9, 0.95, 0.99, 0.999]
NS = [1, 2, 3, 5, 10, 18, 30, 49, 100, 250, 511, 1000, 2000]


def _ks(n: int) -> list[int]:
    picks = {0, 1, 2, n // 10, n // 3, n // 2, (2 * n) // 3, n - 2, n - 1, n}
    return sorted(k for k in picks if 0 <= k <= n)


def test_clopper_pearson_matches_scipy_beta_quantiles() -> None:
    for n in NS:
        for k in _ks(n):
            for level in LEVELS:
                alpha = 1 - level
                ci = clopper_pearson(k, n, level)
                lower = 0.0 if k == 0 else stats.beta.ppf(alpha / 2, k, n - k + 1)
                upper = 1.0 if k == n else stats.beta.ppf(1 - alpha / 2, k + 1, n - k)
                assert ci.lower == pytest.approx(lower, abs=1e-10), (k, n, level)
                assert ci.upper == pytest.approx(upper, abs=1e-10), (k, n, level)


def test_clopper_pearson_matches_statsmodels_beta_method() -> None:
    for n, k in [(18, 13), (30, 30), (37, 33), (200, 3)]:
        low, upp = proportion_confint(k, n, alpha=0.05, method="beta")
        ci = clopper_pearson(k, n)
        assert (ci.lower, ci.upper) == pytest.approx((low, upp), abs=1e-12)


def test_clopper_pearson_figures_from_the_spec() -> None:
    ci = clopper_pearson_bounded(13, 18, 0)
    assert ci.lower == pytest.approx(0.4651980344169439, abs=1e-13)
    # The exact upper bound is 0.90305... (scipy and statsmodels agree). Intervals are
    # printed rounded outward (lower down, upper up), so it shows as 90.4%: the figure
    # the spec's support_bot example gives.
    assert ci.upper == pytest.approx(0.9030507874744406, abs=1e-13)
    assert fmt_interval(ci.lower, ci.upper) == "[46.5%, 90.4%]"
    full = clopper_pearson_bounded(30, 30, 0)
    assert fmt_interval(full.lower, full.upper) == "[88.4%, 100.0%]"
    # Exact values are not pushed a step outward by floating-point noise.
    assert fmt_interval(0.7, 0.9) == "[70.0%, 90.0%]"
    assert fmt_interval(0.0, 1.0) == "[0.0%, 100.0%]"
    assert full.upper == 1.0
    assert clopper_pearson_bounded(0, 0, 30) == Interval(0.0, 1.0)


def test_clopper_pearson_edges() -> None:
    assert clopper_pearson(0, 0) == Interval(0.0, 1.0)
    assert clopper_pearson(0, 10).lower == 0.0
    assert clopper_pearson(10, 10).upper == 1.0
    with pytest.raises(ValueError):
        clopper_pearson(3, 2)
    with pytest.raises(ValueError):
        clopper_pearson(1, 2, level=1.0)


def test_bounded_clopper_pearson_is_cp_at_the_extreme_completions() -> None:
    for k, n, m in [(13, 18, 2), (0, 5, 5), (20, 20, 1), (7, 40, 13)]:
        ci = clopper_pearson_bounded(k, n, m, 0.9)
        assert ci.lower == clopper_pearson(k, n + m, 0.9).lower
        assert ci.upper == clopper_pearson(k + m, n + m, 0.9).upper
        plain = clopper_pearson(k, n, 0.9)
        # missing cases never make the metric look better
        assert ci.lower <= plain.lower
    assert clopper_pearson_bounded(13, 18, 0) == clopper_pearson(13, 18)


SEED_WILSON = [
    (1, 1, 0.20654931411298355, 1.0),
    (11, 13, 0.5776536895684791, 0.9567418216820717),
    (22, 25, 0.7004420606159933, 0.9583318285288502),
    (33, 37, 0.7529146844205937, 0.9571481006263428),
]


@pytest.mark.parametrize(("k", "n", "lower", "upper"), SEED_WILSON)
def test_wilson_reproduces_the_seed_figures(k: int, n: int, lower: float, upper: float) -> None:
    ci = wilson(k, n)
    assert ci is not None
    assert abs(ci.lower - lower) <= 1e-12
    assert abs(ci.upper - upper) <= 1e-12
    # in fact bit for bit, with the operation order used
    assert (ci.lower, ci.upper) == (lower, upper)


def test_wilson_live_view_frame_and_edges() -> None:
    ci = wilson(44, 49)
    assert ci is not None
    assert f"[{ci.lower:.1%}, {ci.upper:.1%}]" == "[78.2%, 95.6%]"
    one = wilson(1, 1)
    assert one is not None and one.upper == 1.0
    assert wilson(0, 0) is None
    zero = wilson(0, 7)
    assert zero is not None and zero.lower == 0.0


def test_wilson_matches_statsmodels() -> None:
    for n in [1, 5, 13, 49, 120, 1000]:
        for k in _ks(n):
            for level in [0.9, 0.95, 0.99]:
                z = NormalDist().inv_cdf(1 - (1 - level) / 2)
                low, upp = proportion_confint(k, n, alpha=1 - level, method="wilson")
                ci = wilson(k, n, z=z)
                assert ci is not None
                assert (ci.lower, ci.upper) == pytest.approx((low, upp), abs=1e-12)
            # with Acklam's z the difference is only in the ninth digit
            low, upp = proportion_confint(k, n, alpha=0.05, method="wilson")
            ci = wilson(k, n)
            assert ci is not None
            assert (ci.lower, ci.upper) == pytest.approx((low, upp), abs=1e-8)


def _t_reference(values: list[float], level: float) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    sd = stats.tstd(values)
    half = stats.t.ppf(1 - (1 - level) / 2, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def test_student_t_matches_scipy() -> None:
    rng = random.Random(20240601)
    for n in [2, 3, 5, 10, 30, 100, 500, 2000]:
        values = [rng.random() ** 2 for _ in range(n)]
        for level in LEVELS:
            summary = student_t_mean(values, level)
            assert summary.interval is not None
            lower, upper = _t_reference(values, level)
            assert summary.interval.lower == pytest.approx(lower, abs=1e-10)
            assert summary.interval.upper == pytest.approx(upper, abs=1e-10)
            assert summary.sd == pytest.approx(stats.tstd(values), rel=1e-12)
            assert summary.n == n


def test_student_t_small_samples() -> None:
    assert student_t_mean([]).mean is None
    one = student_t_mean([0.5])
    assert one.mean == 0.5 and one.sd is None and one.interval is None
    flat = student_t_mean([0.3, 0.3, 0.3])
    assert flat.interval is not None and flat.interval.width == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError):
        student_t_mean([0.1, float("nan")])


def test_student_t_bounded_for_missing_cases() -> None:
    values = [0.2, 0.9, 0.7, 0.4, 0.8]
    summary = student_t_mean_bounded(values, 3, (0.0, 1.0), 0.95)
    assert summary.mean == pytest.approx(sum(values) / 5)
    assert summary.missing == 3 and not summary.unbounded_missing
    vertices = [
        student_t_mean([*values, *([1.0] * j), *([0.0] * (3 - j))], 0.95).interval
        for j in range(4)
    ]
    assert summary.interval is not None and all(v is not None for v in vertices)
    assert summary.interval.lower == pytest.approx(
        min(v.lower for v in vertices if v), abs=1e-14
    )
    assert summary.interval.upper == pytest.approx(
        max(v.upper for v in vertices if v), abs=1e-14
    )
    # missing cases never make the metric look better
    plain = student_t_mean(values).interval
    assert plain is not None and summary.interval.lower <= plain.lower


def test_student_t_bounded_does_not_clip_and_flags_unbounded() -> None:
    plain = student_t_mean([0.0, 1.0, 1.0]).interval
    not_clipped = student_t_mean_bounded([0.0, 1.0, 1.0], 0, (0.0, 1.0))
    assert not_clipped.interval == plain
    assert plain is not None and plain.upper > 1.0
    unbounded = student_t_mean_bounded([0.5, 0.6, 0.7], 2, None)
    assert unbounded.interval is None and unbounded.unbounded_missing
    assert unbounded.mean == pytest.approx(0.6)
    no_missing = student_t_mean_bounded([0.5, 0.6, 0.7], 0, None)
    assert no_missing == student_t_mean([0.5, 0.6, 0.7])
    all_missing = student_t_mean_bounded([], 4, (1.0, 5.0))
    assert all_missing.mean is None
    assert all_missing.interval is not None
    assert all_missing.interval.lower < 1.0 and all_missing.interval.upper > 5.0
    with pytest.raises(ValueError):
        student_t_mean_bounded([0.5], 1, (1.0, 0.0))


# -- scores near the largest float (1e308): exact by scaling, or no interval ------------------

# Multiplying by a power of two is exact in binary floating point, and the t interval is
# equivariant under it: scipy on the scores times 2**-1000 is the reference, scaled back.
_HUGE = [1e308, 1.5e308, 1.2e308, 1.1e308, 1.7e308, 9e307]
_SCALE = 2.0**1000


def _scipy_t(values: list[float], level: float) -> tuple[float, float, float, float]:
    small = [v / _SCALE for v in values]
    mean = stats.tmean(small)
    sd = stats.tstd(small)
    lower, upper = stats.t.interval(level, len(small) - 1, loc=mean, scale=stats.sem(small))
    return mean * _SCALE, sd * _SCALE, lower * _SCALE, upper * _SCALE


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_the_t_interval_of_huge_scores_matches_scipy_on_the_scaled_scores(level: float) -> None:
    """Their sum overflows (fsum's "intermediate overflow" ended `run` with exit 70)."""
    summary = student_t_mean(_HUGE, level)
    mean, sd, lower, upper = _scipy_t(_HUGE, level)
    assert summary.interval is not None and not summary.overflow
    assert summary.mean == pytest.approx(mean, rel=1e-12)
    assert summary.sd == pytest.approx(sd, rel=1e-12)
    assert summary.interval.lower == pytest.approx(lower, rel=1e-12)
    assert summary.interval.upper == pytest.approx(upper, rel=1e-12)
    constant = student_t_mean([1e308] * 8, level)
    assert constant.interval == Interval(1e308, 1e308) and constant.sd == 0.0


def test_ordinary_scores_give_the_same_bits_as_before() -> None:
    """Scaling happens only past 2**400: ordinary scores take the very same steps."""
    values = [0.1, 0.25, 0.7, 0.3, 0.95, 0.05, 0.5]
    n = len(values)
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
    half = stats.t.isf(0.025, n - 1) * sd / math.sqrt(n)
    summary = student_t_mean(values)
    assert (summary.mean, summary.sd) == (mean, sd)
    assert summary.interval is not None
    assert summary.interval.lower == pytest.approx(mean - half, rel=1e-14)


def test_the_worst_case_interval_of_huge_scores_matches_the_scaled_one() -> None:
    """With missing cases bounded over a range whose top is 1.7e308 (j * high overflowed)."""
    huge = student_t_mean_bounded(_HUGE, 3, (0.0, 1.7e308), 0.95)
    small = student_t_mean_bounded([v / _SCALE for v in _HUGE], 3, (0.0, 1.7e308 / _SCALE), 0.95)
    assert huge.interval is not None and small.interval is not None and not huge.overflow
    assert huge.interval.lower == small.interval.lower * _SCALE
    assert huge.interval.upper == small.interval.upper * _SCALE


def test_an_interval_beyond_the_largest_float_is_none_and_says_why() -> None:
    """Two scores, 1.7e308 apart from their mean: t(0.975, 1) * sd / sqrt(2) is about
    1.5e309. No interval, rather than an infinite one or a crash."""
    summary = student_t_mean([-1.7e308, 1.7e308])
    assert summary.interval is None and summary.overflow
    assert summary.mean == 0.0 and summary.sd is None  # the sd (2.4e308) overflows too
    bounded = student_t_mean_bounded([1.7e308], 1, (-1.7e308, 1.7e308))
    assert bounded.interval is None and bounded.overflow
    assert not student_t_mean([1.0]).overflow  # too few values is not an overflow
