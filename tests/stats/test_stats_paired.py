"""The paired intervals: a published example and an independent implementation."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from oloproof.stats import paired_mean_difference, paired_proportion_difference
from oloproof.stats.paired import newcombe_phi


def test_published_example_cavo_2012() -> None:
    # Complete response before and after consolidation therapy (Cavo et al., 2012): the
    # paired 2x2 table [[59, 6], [16, 80]]. Fagerland, Lydersen & Laake (2017), "Statistical
    # Analysis of Contingency Tables", chapter 8, give the Newcombe square-and-add interval
    # -0.0621 (95% CI -0.1186 to -0.0046).
    result = paired_proportion_difference(59, 6, 16, 80)
    assert result.interval is not None
    assert result.estimate == pytest.approx(-10 / 161)
    assert round(result.estimate, 4) == -0.0621
    assert round(result.interval.lower, 4) == -0.1186
    assert round(result.interval.upper, 4) == -0.0046
    assert result.method == "Newcombe hybrid score (paired), 1998"
    assert result.n == 161


def _reference(a: int, b: int, c: int, d: int, level: float) -> tuple[float, float]:
    """Newcombe (1998) method 10, written independently: statsmodels' Wilson intervals for
    the margins, and phi from the 0/1 outcome vectors of the expanded table."""
    n = a + b + c + d
    cand = np.array([1] * a + [1] * b + [0] * c + [0] * d)
    base = np.array([1] * a + [0] * b + [1] * c + [0] * d)
    p1, p2 = cand.mean(), base.mean()
    l1, u1 = proportion_confint(int(cand.sum()), n, alpha=1 - level, method="wilson")
    l2, u2 = proportion_confint(int(base.sum()), n, alpha=1 - level, method="wilson")
    s1, s2 = cand.std() * n, base.std() * n  # sqrt((a+b)(c+d)) and sqrt((a+c)(b+d))
    num = n * float(np.sum(cand * base)) - float(cand.sum() * base.sum())  # = ad - bc
    if s1 == 0 or s2 == 0:
        phi = 0.0
    else:
        corrected = num - n / 2 if num > n / 2 else (0.0 if num >= 0 else num)
        phi = corrected / (s1 * s2)
    theta = p1 - p2
    lower = theta - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    upper = theta + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return lower, upper


def test_matches_an_independent_implementation() -> None:
    rng = random.Random(7)
    tables = [(1, 1, 7, 12), (59, 6, 16, 80), (10, 0, 0, 10), (0, 5, 0, 0), (3, 3, 3, 3)]
    tables += [tuple(rng.randint(0, 40) for _ in range(4)) for _ in range(200)]
    for table in tables:
        if sum(table) == 0:
            continue
        for level in (0.9, 0.95, 0.99):
            result = paired_proportion_difference(*table, level=level)
            assert result.interval is not None
            lower, upper = _reference(*table, level)
            assert result.interval.lower == pytest.approx(lower, abs=1e-12), table
            assert result.interval.upper == pytest.approx(upper, abs=1e-12), table


def test_degenerate_tables() -> None:
    empty = paired_proportion_difference(0, 0, 0, 0)
    assert empty.estimate is None and empty.interval is None and empty.n == 0
    # an empty margin makes phi 0
    assert newcombe_phi(5, 0, 0, 0) == 0.0
    assert newcombe_phi(0, 3, 0, 0) == 0.0
    everything_passes = paired_proportion_difference(5, 0, 0, 0)
    assert everything_passes.estimate == 0.0
    assert everything_passes.interval is not None
    assert everything_passes.interval.lower < 0.0 < everything_passes.interval.upper
    all_for_candidate = paired_proportion_difference(0, 8, 0, 0)
    assert all_for_candidate.interval is not None
    assert all_for_candidate.interval.upper == 1.0
    assert -1.0 <= all_for_candidate.interval.lower <= 1.0
    with pytest.raises(ValueError):
        paired_proportion_difference(-1, 0, 0, 0)


def test_phi_correction() -> None:
    # ad - bc = 100 - 4 = 96 > n/2 = 12.5: reduced by n/2
    assert newcombe_phi(10, 2, 2, 10) == pytest.approx((96 - 12) / math.sqrt(12**4))
    # 0 <= ad - bc <= n/2: set to 0
    assert newcombe_phi(3, 3, 3, 4) == 0.0
    # negative: used as it is
    assert newcombe_phi(1, 5, 5, 1) == pytest.approx((1 - 25) / math.sqrt(6**4))


def test_paired_mean_difference_matches_scipy() -> None:
    rng = random.Random(11)
    for n in [2, 3, 10, 50, 400]:
        cand = [rng.random() for _ in range(n)]
        base = [min(1.0, max(0.0, x + rng.gauss(-0.05, 0.1))) for x in cand]
        for level in (0.9, 0.95, 0.99):
            result = paired_mean_difference(cand, base, level)
            ci = stats.ttest_rel(cand, base).confidence_interval(level)
            assert result.interval is not None
            assert result.interval.lower == pytest.approx(ci.low, abs=1e-10)
            assert result.interval.upper == pytest.approx(ci.high, abs=1e-10)
            assert result.estimate == pytest.approx(float(np.mean(np.subtract(cand, base))))
    single = paired_mean_difference([0.4], [0.1])
    assert single.interval is None and single.estimate == pytest.approx(0.3)
    with pytest.raises(ValueError):
        paired_mean_difference([0.1, 0.2], [0.1])


@pytest.mark.parametrize("level", [1 - 1e-15, 0.9999999999999999])
def test_a_level_next_to_one_matches_the_independent_implementation(level: float) -> None:
    """confidence_level: 0.9999999999999999 is accepted (it lies below 1), and 1 - alpha/2
    is then the float 1.0: the normal quantile of it raised StatisticsError, and `oloproof
    compare` ended as an internal error (exit 70). The quantile is taken of the upper tail
    alpha/2, as statsmodels' Wilson interval takes it (norm.isf)."""
    for table in ((59, 6, 16, 80), (10, 5, 0, 5), (0, 3, 0, 0), (1, 1, 7, 12)):
        result = paired_proportion_difference(*table, level=level)
        assert result.interval is not None
        lower, upper = _reference(*table, level)
        assert result.interval.lower == pytest.approx(lower, abs=1e-12), table
        assert result.interval.upper == pytest.approx(upper, abs=1e-12), table
