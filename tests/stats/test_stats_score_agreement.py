"""A scored judge against a person: quadratic-weighted kappa checked against scikit-learn
and statsmodels, the mean absolute difference's interval by simulation and against a
bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

from oloproof.stats.agreement import mean_abs_diff, quadratic_weighted_kappa, score_agreement


def _pairs(seed: int, n: int, low: int, high: int, noise: int) -> tuple[list[int], list[int]]:
    rng = np.random.default_rng(seed)
    person = rng.integers(low, high + 1, n)
    judge = np.clip(person + rng.integers(-noise, noise + 1, n), low, high)
    return judge.tolist(), person.tolist()


CASES = [(seed, n, low, high, noise)
         for seed, (n, low, high, noise) in enumerate([
             (8, 1, 5, 1), (30, 1, 5, 1), (30, 1, 5, 2), (100, 1, 5, 1), (50, 0, 10, 3),
             (40, -2, 2, 1), (12, 1, 3, 1), (200, 1, 7, 2), (25, 0, 1, 1), (60, 1, 5, 4)])]


@pytest.mark.parametrize(("seed", "n", "low", "high", "noise"), CASES)
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_weighted_kappa_matches_scikit_learn_and_statsmodels(
    seed: int, n: int, low: int, high: int, noise: int, level: float
) -> None:
    judge, person = _pairs(seed, n, low, high, noise)
    kappa, interval = quadratic_weighted_kappa(judge, person, level)
    points = list(range(low, high + 1))
    assert kappa == pytest.approx(
        cohen_kappa_score(judge, person, weights="quadratic", labels=points), abs=1e-12)
    table = np.zeros((len(points), len(points)))
    for x, y in zip(judge, person, strict=True):
        table[x - low, y - low] += 1
    ref = sm_kappa(table, wt="quadratic")
    assert kappa == pytest.approx(ref.kappa, abs=1e-12)
    assert interval is not None
    half = norm.ppf(1 - (1 - level) / 2) * ref.std_kappa
    assert interval.lower == pytest.approx(max(-1.0, ref.kappa - half), abs=1e-10)
    assert interval.upper == pytest.approx(min(1.0, ref.kappa + half), abs=1e-10)


def test_weighted_kappa_on_half_points_is_statsmodels_on_those_categories() -> None:
    # A panel's median of two judges can be 3.5: the categories are the values seen.
    judge = [3.5, 4.0, 2.0, 5.0, 1.5, 3.0, 4.5, 2.5, 4.0, 3.0]
    person = [4, 4, 2, 5, 1, 3, 4, 3, 5, 2]
    values = sorted(set(judge) | set(person))
    table = np.zeros((len(values), len(values)))
    for x, y in zip(judge, person, strict=True):
        table[values.index(x), values.index(y)] += 1
    ref = sm_kappa(table, weights=np.array(values), wt="quadratic")
    kappa, interval = quadratic_weighted_kappa(judge, person)
    assert kappa == pytest.approx(ref.kappa, abs=1e-12)
    assert interval is not None
    assert interval.upper - interval.lower == pytest.approx(
        2 * norm.ppf(0.975) * ref.std_kappa, abs=1e-10)


def test_weighted_kappa_interval_is_clamped_and_undefined_without_variety() -> None:
    kappa, interval = quadratic_weighted_kappa([1, 2, 3, 4, 5, 5], [1, 2, 3, 4, 5, 4])
    assert kappa is not None and interval is not None
    assert interval.upper == 1.0 < kappa + (kappa - interval.lower)  # clamped at 1
    assert quadratic_weighted_kappa([3, 3, 3], [3, 3, 3]) == (None, None)
    constant, no_interval = quadratic_weighted_kappa([4] * 10, [1, 2, 3, 4, 5] * 2)
    assert constant == pytest.approx(0.0, abs=1e-12) and no_interval is None
    assert quadratic_weighted_kappa([], []) == (None, None)


def test_mean_abs_diff_is_hoeffdings_interval_cut_to_the_scale() -> None:
    judge, person = [4, 4, 3, 4, 2, 4, 3, 1], [5, 2, 4, 4, 3, 4, 4, 1]
    mad, interval = mean_abs_diff(judge, person, 4.0)
    assert mad == pytest.approx(0.75)
    half = 4.0 * np.sqrt(np.log(2 / 0.05) / 16)
    assert interval is not None
    assert (interval.lower, interval.upper) == pytest.approx((0.0, 0.75 + half))
    # Every difference 0 at n = 2: Student t would say [0, 0]; a valid bound cannot.
    zero, iv = mean_abs_diff([3, 3], [3, 3], 4.0)
    assert zero == 0.0 and iv is not None and iv.upper > 2.0


@pytest.mark.parametrize("n", [5, 20, 60])
@pytest.mark.parametrize("probs", [(0.9, 0.1, 0, 0, 0), (0.4, 0.3, 0.2, 0.1, 0.0),
                                   (0.05, 0.05, 0.1, 0.3, 0.5)])
def test_mean_abs_diff_covers_on_each_side_by_simulation(
    n: int, probs: tuple[float, ...]
) -> None:
    """One-sided misses at most alpha/2 (+3 SE) on differences 0..4, skewed or not."""
    rng = np.random.default_rng(n)
    true = float(np.dot(np.arange(5), probs))
    runs = 2000
    above = below = 0
    for _ in range(runs):
        diffs = rng.choice(5, size=n, p=probs)
        _, iv = mean_abs_diff(diffs.tolist(), [0] * n, 4.0)
        assert iv is not None
        above += iv.lower > true
        below += iv.upper < true
    bar = 0.025 + 3 * np.sqrt(0.025 * 0.975 / runs)
    assert above / runs <= bar and below / runs <= bar


def test_mean_abs_diff_interval_holds_the_bootstrap_interval() -> None:
    """Hoeffding's interval is valid at every n, so it is at least as wide as a percentile
    bootstrap (approximate, and too narrow at small n) wherever the latter is sensible."""
    for seed in range(5):
        judge, person = _pairs(seed, 80, 1, 5, 1)
        diffs = np.abs(np.array(judge) - np.array(person))
        rng = np.random.default_rng(seed)
        boots = rng.choice(diffs, size=(4000, diffs.size)).mean(axis=1)
        lo, hi = np.percentile(boots, [2.5, 97.5])
        mad, iv = mean_abs_diff(judge, person, 4.0)
        assert iv is not None and mad is not None
        assert iv.lower <= lo <= mad <= hi <= iv.upper


def test_score_agreement_sums_up_the_pairs() -> None:
    judge, person = [4, 4, 3, 4, 2, 4, 3, 1], [5, 2, 4, 4, 3, 4, 4, 1]
    a = score_agreement(judge, person, (1, 5))
    assert (a.n, a.exact, a.scale) == (8, 3, (1.0, 5.0))
    assert a.judge_mean == pytest.approx(25 / 8) and a.person_mean == pytest.approx(27 / 8)
    assert a.mean_diff == pytest.approx(-2 / 8)
    assert a.mean_abs_diff == pytest.approx(0.75)
    assert a.weighted_kappa == pytest.approx(
        cohen_kappa_score(judge, person, weights="quadratic", labels=[1, 2, 3, 4, 5]))
    with pytest.raises(ValueError, match="one score each"):
        score_agreement([1, 2], [1], (1, 5))
