"""plan --assurance: the smallest total that decides a rate's rule with probability >= P,
against a brute-force search written here (every total, every outcome, scipy's quantiles)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from oloproof.policy.rules import Direction, threshold_judge
from oloproof.stats.sample_size import binary_assurance_size, binary_decision_probability


def _probability(total: int, missing: int, rate: float, t: float, direction: str,
                 level: float) -> float:
    seen = total - missing
    x = np.arange(seen + 1)
    a = 1 - level
    with np.errstate(all="ignore"):
        lower = np.where(x == 0, 0.0, stats.beta.ppf(a / 2, x, total - x + 1))
        top = x + missing
        upper = np.where(top == total, 1.0, stats.beta.ppf(1 - a / 2, top + 1, total - top))
    if direction == "min":
        decided = (lower >= t) | (upper < t)
    else:
        decided = (upper <= t) | (lower > t)
    return float(stats.binom.pmf(x, seen, rate)[decided].sum())


@pytest.mark.parametrize(
    ("k", "n", "m", "t", "direction", "target"),
    [
        (7, 10, 0, 0.5, "min", 0.8),
        (9, 10, 0, 0.7, "min", 0.9),
        (3, 20, 0, 0.3, "max", 0.8),
        (18, 20, 2, 0.7, "min", 0.8),
        (1, 30, 1, 0.1, "max", 0.5),
        (13, 18, 0, 0.5, "min", 0.95),
    ],
)
def test_assurance_size_equals_brute_force(
    k: int, n: int, m: int, t: float, direction: Direction, target: float
) -> None:
    judge = threshold_judge(t, direction)
    result = binary_assurance_size(k, n, t, judge, target, 0.95, missing=m, limit=3000)
    brute = next(
        (
            total
            for total in range(n + m + 1, 3001)
            if _probability(total, m, k / n, t, direction, 0.95) >= target
        ),
        None,
    )
    assert result.status == "sized" and result.total == brute
    assert result.more == brute - n - m
    assert result.probability == pytest.approx(
        _probability(brute, m, k / n, t, direction, 0.95), abs=1e-9
    )


def test_decision_probability_matches_the_sum_over_outcomes() -> None:
    judge = threshold_judge(0.7, "min")
    for total in (19, 100, 500, 1632):
        assert binary_decision_probability(total, 13 / 18, 0.7, judge) == pytest.approx(
            _probability(total, 0, 13 / 18, 0.7, "min", 0.95), abs=1e-9
        )
