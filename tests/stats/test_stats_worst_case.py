"""The missing-bounded MEAN interval contains the t interval of every completion.

Brute force written here: every completion on a grid of the missing scores (the extremes
included) and random completions, each given its own t interval by scipy.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from scipy import stats

from oloproof.stats import student_t_mean_bounded


def _scipy_t(values: list[float], level: float) -> tuple[float, float]:
    xs = np.asarray(values, dtype=float)
    n = len(xs)
    sd = float(np.std(xs, ddof=1))
    mean = float(np.mean(xs))
    if sd == 0.0:
        return mean, mean
    low, high = stats.t.interval(level, n - 1, loc=mean, scale=sd / math.sqrt(n))
    return float(low), float(high)


def _contains_every_completion(
    values: list[float], missing: int, lo: float, hi: float, level: float, rng: random.Random
) -> None:
    summary = student_t_mean_bounded(values, missing, (lo, hi), level)
    assert summary.interval is not None
    got = summary.interval
    grid = [lo + (hi - lo) * i / 4 for i in range(5)]
    completions = list(itertools.product(grid, repeat=missing)) if missing <= 3 else []
    completions += [tuple(rng.uniform(lo, hi) for _ in range(missing)) for _ in range(200)]
    completions += [tuple([lo] * j + [hi] * (missing - j)) for j in range(missing + 1)]
    tight_low = math.inf
    tight_high = -math.inf
    for completion in completions:
        low, high = _scipy_t([*values, *completion], level)
        tol = 1e-9 * max(1.0, abs(hi - lo))
        assert got.lower <= low + tol, (values, completion, got, low)
        assert got.upper >= high - tol, (values, completion, got, high)
        tight_low = min(tight_low, low)
        tight_high = max(tight_high, high)
    # and it is no wider than the worst completion: the extremes are attained
    assert got.lower == pytest.approx(tight_low, abs=1e-9)
    assert got.upper == pytest.approx(tight_high, abs=1e-9)


def test_the_issue_example_is_worst_case() -> None:
    # 9 scores of 0.2 and 1 missing in [0, 1]: had it scored 1.0, the lower bound drops
    # below 0.12, so `min: 0.12` cannot pass.
    summary = student_t_mean_bounded([0.2] * 9, 1, (0.0, 1.0), 0.95)
    assert summary.interval is not None
    worst = _scipy_t([0.2] * 9 + [1.0], 0.95)
    assert summary.interval.lower == pytest.approx(worst[0], abs=1e-12)
    assert summary.interval.lower < 0.12


@pytest.mark.parametrize("seed", range(12))
def test_bounded_mean_interval_contains_every_completion(seed: int) -> None:
    rng = random.Random(seed)
    lo, hi = rng.choice([(0.0, 1.0), (0.0, 30.0), (-5.0, 5.0), (1.0, 10.0)])
    n = rng.choice([0, 1, 2, 3, 5, 9, 20])
    missing = rng.choice([1, 2, 3, 5, 8])
    if n + missing < 2:
        missing = 2
    shape = rng.choice(["uniform", "clustered", "edges"])
    values: list[float] = []
    for _ in range(n):
        if shape == "uniform":
            values.append(rng.uniform(lo, hi))
        elif shape == "clustered":
            values.append(lo + (hi - lo) * min(1.0, max(0.0, rng.gauss(0.2, 0.02))))
        else:
            values.append(rng.choice([lo, hi]))
    level = rng.choice([0.8, 0.9, 0.95, 0.99])
    _contains_every_completion(values, missing, lo, hi, level, rng)
