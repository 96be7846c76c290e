"""plan --assurance: the smallest total that decides a rate's rule with probability >= P,
against a brute-force search written here (every total, every outcome, scipy's quantiles)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from scipy import stats

from oloproof.policy.rules import threshold_judge
from oloproof.stats.sample_size import binary_assurance_size, binary_decision_probability

if TYPE_CHECKING:
    from oloproof.policy.rules import Direction


def _probability(total: int, missing: int, rate: float, t: float, direction: str,
                 level: float, kept: tuple[int, int] = (0, 0)) -> float:
    """P(decided) at ``total`` cases when the ``kept`` (passes, cases) stay as they are and
    the cases to come pass with probability ``rate`` (all drawn afresh when nothing is
    kept), by summing scipy's binomial pmf over the outcomes that scipy's beta quantiles
    decide."""
    seen = total - missing
    k0, n0 = kept
    x = np.arange(k0, k0 + seen - n0 + 1)
    a = 1 - level
    with np.errstate(all="ignore"):
        lower = np.where(x == 0, 0.0, stats.beta.ppf(a / 2, x, total - x + 1))
        top = x + missing
        upper = np.where(top == total, 1.0, stats.beta.ppf(1 - a / 2, top + 1, total - top))
    if direction == "min":
        decided = (lower >= t) | (upper < t)
    else:
        decided = (upper <= t) | (lower > t)
    return float(stats.binom.pmf(x - k0, seen - n0, rate)[decided].sum())


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
            if _probability(total, m, k / n, t, direction, 0.95, (k, n)) >= target
        ),
        None,
    )
    assert result.status == "sized" and result.total == brute
    assert result.more == brute - n - m
    assert result.probability == pytest.approx(
        _probability(brute, m, k / n, t, direction, 0.95, (k, n)), abs=1e-9
    )


@pytest.mark.parametrize(
    ("k", "n", "m", "t", "direction", "target"),
    [
        (25, 27, 0, 0.8, "min", 0.8),
        (74, 100, 0, 0.7, "min", 0.2),
        (9, 10, 0, 0.7, "min", 0.9),
        (48, 50, 2, 0.9, "min", 0.8),
        (3, 20, 0, 0.3, "max", 0.8),
        (4, 5, 0, 0.99, "min", 0.8),
    ],
)
def test_adding_the_planned_cases_decides_as_often_as_promised(
    k: int, n: int, m: int, t: float, direction: Direction, target: float
) -> None:
    """The promise, simulated: keep the run's k of n (and its m missing cases), add the
    planned number of cases passing at k/n, and decide each suite with scipy's
    Clopper-Pearson limits. It decides in the promised share of suites, and one case fewer
    does not reach it. (Earlier versions drew all N cases afresh: 25 of 27 was planned at
    62 cases for 80%, which decide it 89% of the time, and 74 of 100 at 170 for 20%, which
    decide it 10% of the time.)"""
    judge = threshold_judge(t, direction)
    result = binary_assurance_size(k, n, t, judge, target, 0.95, missing=m)
    assert result.status == "sized" and result.total is not None
    assert result.probability is not None and result.probability >= target
    rng = np.random.default_rng(20261204)
    draws = 200_000
    passes = k + rng.binomial(result.more, k / n, size=draws)
    seen = result.total - m
    lower = np.where(passes == 0, 0.0, stats.beta.ppf(0.025, passes, result.total - passes + 1))
    top = passes + m
    upper = np.where(top == result.total, 1.0,
                     stats.beta.ppf(0.975, top + 1, np.maximum(result.total - top, 1)))
    assert seen == n + result.more
    if direction == "min":
        decided = (lower >= t) | (upper < t)
    else:
        decided = (upper <= t) | (lower > t)
    share = float(decided.mean())
    # 200,000 suites: the share is within 0.005 of the probability (over 5 standard errors)
    assert share == pytest.approx(result.probability, abs=0.005)
    assert _probability(result.total - 1, m, k / n, t, direction, 0.95, (k, n)) < target


def test_decision_probability_matches_the_sum_over_outcomes() -> None:
    judge = threshold_judge(0.7, "min")
    for total in (19, 100, 500, 1632):
        assert binary_decision_probability(total, 13 / 18, 0.7, judge) == pytest.approx(
            _probability(total, 0, 13 / 18, 0.7, "min", 0.95), abs=1e-9
        )
        assert binary_decision_probability(
            total, 13 / 18, 0.7, judge, kept=(13, 18)
        ) == pytest.approx(_probability(total, 0, 13 / 18, 0.7, "min", 0.95, (13, 18)), abs=1e-9)


def _every_size(k: int, n: int, m: int, t: float, judge: object, target: float, level: float,
                limit: int) -> int | None:
    """What the search answered before issue 33: the exact probability at every size."""
    for total in range(n + m + 1, limit + 1):
        if binary_decision_probability(total, k / n, t, judge, level, missing=m,
                                       kept=(k, n)) >= target:
            return total
    return None


def _configs(seed: int, count: int) -> list[tuple[int, int, int, float, Direction, float, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(5, 200))
        k = int(rng.integers(0, n + 1))
        m = int(rng.integers(0, 4))
        t = float(np.round(rng.uniform(0.05, 0.95), 2))
        direction: Direction = "min" if rng.random() < 0.5 else "max"
        out.append((k, n, m, t, direction, float(rng.choice([0.5, 0.8, 0.9])),
                    float(rng.choice([0.9, 0.95, 0.99]))))
    return out


@pytest.mark.parametrize(("k", "n", "m", "t", "direction", "target", "level"),
                         [*_configs(1, 8), *(pytest.param(*c, marks=pytest.mark.slow)
                                            for c in _configs(2, 40))])
def test_passing_sizes_over_by_bounds_changes_no_answer(
    k: int, n: int, m: int, t: float, direction: Direction, target: float, level: float
) -> None:
    """The bounds that let the search pass over sizes (Zubkov & Serov) never pass over the
    answer: the same size as computing the exact probability at every size."""
    judge = threshold_judge(t, direction)
    result = binary_assurance_size(k, n, t, judge, target, level, missing=m, limit=1500)
    expected = _every_size(k, n, m, t, judge, target, level, 1500)
    assert result.total == expected
    assert result.status == ("sized" if expected is not None else "beyond_limit")


def test_a_rate_just_above_the_bar_is_answered_without_summing_every_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 33: 701 of 1000 against min 0.70 took 345 s to answer beyond_limit, summing the
    exact probability at each of 200,000 sizes. It needs about 1.6 million cases at 80%; the
    bounds pass over every size up to the limit, so no exact sum is needed at all
    (bench/stats_speed.py times it: well under a second)."""
    from oloproof.stats import sample_size

    exact_sums = 0
    original = sample_size._decided_cuts

    def counted(*args: object) -> tuple[int, int]:
        nonlocal exact_sums
        exact_sums += 1
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sample_size, "_decided_cuts", counted)
    judge = threshold_judge(0.70, "min")
    result = binary_assurance_size(701, 1000, 0.70, judge, 0.8, 0.95)
    assert result.status == "beyond_limit" and result.reason == "more than 200000 cases"
    assert exact_sums < 100  # it was one per size: 199,000
