"""Agreement of a judge with a person: checked against scipy and statsmodels."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binomtest, norm
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

from oloproof.stats.agreement import agreement, cohens_kappa, labels_to_settle
from oloproof.stats.intervals import clopper_pearson

TABLES = [(20, 3, 2, 5), (40, 0, 0, 10), (1, 1, 1, 1), (12, 5, 9, 4), (0, 7, 3, 0), (30, 1, 4, 15)]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_kappa_and_its_interval_match_statsmodels(table: tuple[int, ...], level: float) -> None:
    a, b, c, d = table
    kappa, interval = cohens_kappa(a, b, c, d, level)
    ref = sm_kappa(np.array([[a, b], [c, d]]))
    assert kappa == pytest.approx(ref.kappa, abs=1e-12)
    if interval is None:
        assert not ref.std_kappa > 0
    else:
        half = norm.ppf(1 - (1 - level) / 2) * ref.std_kappa
        assert interval.lower == pytest.approx(ref.kappa - half, abs=1e-10)
        assert interval.upper == pytest.approx(ref.kappa + half, abs=1e-10)
        if level == 0.95:
            assert (interval.lower, interval.upper) == pytest.approx(
                (ref.kappa_low, ref.kappa_upp), abs=1e-10)


def test_kappa_is_undefined_when_both_raters_give_one_answer() -> None:
    assert cohens_kappa(10, 0, 0, 0) == (None, None)


@pytest.mark.parametrize("table", TABLES)
def test_proportions_carry_exact_intervals(table: tuple[int, ...]) -> None:
    a, b, c, d = table
    result = agreement(a, b, c, d, 0.95)
    for prop, (k, n) in (
        (result.agreement, (a + d, a + b + c + d)),
        (result.sensitivity, (a, a + c)),
        (result.specificity, (d, b + d)),
    ):
        assert (prop.k, prop.n) == (k, n)
        if n == 0:
            assert prop.interval is None and prop.estimate is None
            continue
        ref = binomtest(k, n).proportion_ci(0.95, method="exact")
        assert prop.interval is not None
        assert prop.interval.lower == pytest.approx(ref.low, abs=1e-10)
        assert prop.interval.upper == pytest.approx(ref.high, abs=1e-10)


@pytest.mark.parametrize(("agreed", "n", "floor"), [(27, 30, 0.85), (19, 20, 0.8), (9, 10, 0.7),
                                                     (45, 50, 0.8), (29, 30, 0.85)])
def test_labels_to_settle_is_the_smallest_total_that_settles(agreed: int, n: int,
                                                             floor: float) -> None:
    total = labels_to_settle(agreed, n, floor, 0.95)
    assert total is not None and total >= n
    p = agreed / n

    def settles(m: int) -> bool:
        k = agreed if m == n else round(p * m)
        return clopper_pearson(k, m, 0.95).lower >= floor

    assert settles(total)
    assert not any(settles(m) for m in range(n, total))


def test_no_number_of_labels_settles_a_rate_at_or_under_the_floor() -> None:
    assert labels_to_settle(17, 20, 0.85) is None
    assert labels_to_settle(10, 20, 0.85) is None
    assert labels_to_settle(0, 0, 0.85) is None


def test_agreement_counts_add_up() -> None:
    for a, b, c, d in itertools.product(range(3), repeat=4):
        assert agreement(a, b, c, d).n == a + b + c + d
