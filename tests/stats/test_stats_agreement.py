"""Agreement of a judge with a person: checked against scipy and statsmodels."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import beta, binomtest, norm
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
        # statsmodels' interval, clamped to kappa's range [-1, 1].
        assert interval.lower == pytest.approx(max(-1.0, ref.kappa - half), abs=1e-10)
        assert interval.upper == pytest.approx(min(1.0, ref.kappa + half), abs=1e-10)
        if level == 0.95:
            assert (interval.lower, interval.upper) == pytest.approx(
                (max(-1.0, ref.kappa_low), min(1.0, ref.kappa_upp)), abs=1e-10)


def test_the_kappa_interval_stays_inside_kappas_range() -> None:
    # The judge example's table: statsmodels' large-sample interval is [-0.07, 1.27].
    ref = sm_kappa(np.array([[6, 1], [0, 1]]))
    assert ref.kappa_upp > 1.2
    kappa, interval = cohens_kappa(6, 1, 0, 1)
    assert kappa == pytest.approx(0.6)
    assert interval is not None
    assert interval.upper == 1.0 and interval.lower == pytest.approx(ref.kappa_low, abs=1e-12)
    for a, b, c, d in itertools.product(range(4), repeat=4):
        _, iv = cohens_kappa(a, b, c, d)
        if iv is not None:
            assert -1.0 <= iv.lower <= iv.upper <= 1.0, (a, b, c, d)


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


def _scan(agreed: int, n: int, floor: float, level: float, upto: int) -> list[bool]:
    """Whether each N from n to ``upto`` settles, the CP lower bound from scipy."""
    totals = np.arange(n, upto + 1)
    # the exact fraction rounded, halves to even (the float agreed / n * N can miss a half)
    ks = np.array([float(round(Fraction(agreed * int(t), n))) for t in totals])
    ks[0] = agreed
    lower = np.where(ks > 0, beta.ppf((1 - level) / 2, np.maximum(ks, 1), totals - ks + 1), 0.0)
    return [bool(x) for x in lower >= floor]


def _check_minimal(agreed: int, n: int, floor: float) -> bool:
    found = labels_to_settle(agreed, n, floor, 0.95)
    if found is None:
        return not any(_scan(agreed, n, floor, 0.95, 20_000))
    settles = _scan(agreed, n, floor, 0.95, found)
    return settles[-1] and not any(settles[:-1])


# 200 configurations: 10 label counts x 5 floors x the 4 smallest agreements above the floor
# by more than 2 points.
GRID = [
    (agreed, n, floor)
    for n in (40, 45, 50, 60, 70, 80, 100, 120, 150, 200)
    for floor in (0.7, 0.75, 0.8, 0.85, 0.9)
    for agreed in [k for k in range(n + 1) if k / n > floor + 0.02][:4]
]


def test_labels_to_settle_was_not_minimal_where_rounding_wobbles() -> None:
    """The old search (doubling, then a scan above the last N that did not settle) missed a
    smaller N where rounding makes one settle: 27 of 30 against 0.80 gave 62, 55 settles."""
    assert labels_to_settle(27, 30, 0.8) == 55
    for agreed, n, floor in ((39, 50, 0.75), (44, 50, 0.8), (45, 50, 0.85), (46, 50, 0.85)):
        assert _check_minimal(agreed, n, floor), (agreed, n, floor)
    assert labels_to_settle(7, 8, 0.85) == 756  # the judge example's agreement


@pytest.mark.slow
def test_labels_to_settle_is_minimal_in_every_configuration_of_a_grid() -> None:
    """Every N scanned with scipy's beta quantile, in each of 200 configurations."""
    assert len(GRID) == 200
    wrong = [c for c in GRID if not _check_minimal(*c)]
    assert not wrong


@pytest.mark.slow
def test_labels_to_settle_answers_quickly_near_the_floor() -> None:
    # 86 of 100 against 0.85: thousands of labels; the search skips whole blocks of N.
    assert _check_minimal(86, 100, 0.85)
    assert labels_to_settle(851, 1000, 0.85) is None  # beyond the 100,000 searched


def test_no_number_of_labels_settles_a_rate_at_or_under_the_floor() -> None:
    assert labels_to_settle(17, 20, 0.85) is None
    assert labels_to_settle(10, 20, 0.85) is None
    assert labels_to_settle(0, 0, 0.85) is None


def test_agreement_counts_add_up() -> None:
    for a, b, c, d in itertools.product(range(3), repeat=4):
        assert agreement(a, b, c, d).n == a + b + c + d


def test_labels_to_settle_rounds_the_exact_rate_not_its_float() -> None:
    """15 of 22 against 0.60: at 143 labels the rate holds 15 * 143 / 22 = 97.5 agreements,
    98 by halves to even (as plan rounds), and 98 of 143 settles it; the float 15/22 * 143 is
    97.49999999999999, which rounded to 97 and made the answer 145. The scan here rounds
    the exact fraction and takes scipy's beta quantile."""
    agreed, n, floor = 15, 22, 0.6
    first = next(
        total for total in range(n, 1000)
        if beta.ppf(0.025, k := (agreed if total == n else round(Fraction(agreed * total, n))),
                    total - k + 1) >= floor
    )
    assert first == 143
    assert labels_to_settle(agreed, n, floor, 0.95) == first
    assert labels_to_settle(30, 44, floor, 0.95) == first


def test_kappa_at_a_level_next_to_one_takes_the_upper_tail() -> None:
    """At confidence_level 0.9999999999999999 the quantile of 1 - (1 - level)/2 (the float
    1.0) raised StatisticsError; kappa -/+ z * se with z = scipy's norm.isf(alpha/2)."""
    level = 0.9999999999999999
    kappa, interval = cohens_kappa(10, 2, 3, 10, level)
    ref = sm_kappa(np.array([[10, 2], [3, 10]]))
    assert kappa == pytest.approx(ref.kappa, abs=1e-12)
    z = norm.isf((1 - level) / 2)
    assert interval is not None
    assert interval.lower == pytest.approx(max(-1.0, ref.kappa - z * ref.std_kappa), abs=1e-9)
    assert interval.upper == pytest.approx(min(1.0, ref.kappa + z * ref.std_kappa), abs=1e-9)
