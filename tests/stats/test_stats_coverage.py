"""Coverage: Clopper-Pearson is exact-conservative; the paired interval stays near its level.

The assertions use exact coverage (a sum of binomial or multinomial probabilities over every
possible outcome), which is deterministic. A seeded simulation is checked to agree with it.
The full tables, with Wilson and Student t, are produced by ``bench/coverage.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from oloproof.stats import clopper_pearson, paired_proportion_difference

P_GRID = [0.001, 0.01, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
          0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99, 0.999]  # fmt: skip


def _cp_bounds(n: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    intervals = [clopper_pearson(k, n, level) for k in range(n + 1)]
    return np.array([i.lower for i in intervals]), np.array([i.upper for i in intervals])


@pytest.mark.parametrize("n", [10, 30, 100])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_clopper_pearson_exact_coverage_is_at_least_the_level(n: int, level: float) -> None:
    lower, upper = _cp_bounds(n, level)
    ks = np.arange(n + 1)
    for p in P_GRID:
        pmf = stats.binom.pmf(ks, n, p)
        coverage = pmf[(lower <= p) & (p <= upper)].sum()
        assert coverage >= level - 1e-12, (n, p, coverage)


def test_clopper_pearson_simulated_coverage_agrees_with_the_exact_one() -> None:
    rng = np.random.default_rng(20240601)
    n, level, reps = 30, 0.95, 20_000
    lower, upper = _cp_bounds(n, level)
    ks = np.arange(n + 1)
    for p in [0.05, 0.3, 0.5, 0.8]:
        draws = rng.binomial(n, p, size=reps)
        simulated = np.mean((lower[draws] <= p) & (p <= upper[draws]))
        exact = stats.binom.pmf(ks, n, p)[(lower <= p) & (p <= upper)].sum()
        se = np.sqrt(exact * (1 - exact) / reps)
        assert abs(simulated - exact) <= 5 * se + 1e-12
        assert exact >= level


PAIRED_CONFIGS = [
    (0.4, 0.1, 0.1, 0.4),
    (0.7, 0.1, 0.05, 0.15),
    (0.85, 0.05, 0.02, 0.08),
    (0.3, 0.2, 0.1, 0.4),
    (0.5, 0.05, 0.05, 0.4),
    (0.1, 0.3, 0.3, 0.3),
    (0.6, 0.15, 0.0, 0.25),
]


def test_paired_interval_exact_coverage_is_near_the_level() -> None:
    n = 30
    tables = np.array(
        [(a, b, c, n - a - b - c) for a in range(n + 1) for b in range(n + 1 - a)
         for c in range(n + 1 - a - b)]
    )  # fmt: skip
    intervals = [paired_proportion_difference(*map(int, t)).interval for t in tables]
    lower = np.array([i.lower for i in intervals if i is not None])
    upper = np.array([i.upper for i in intervals if i is not None])
    coverages = []
    for cells in PAIRED_CONFIGS:
        theta = cells[1] - cells[2]
        pmf = stats.multinomial.pmf(tables, n, cells)
        coverage = pmf[(lower <= theta) & (theta <= upper)].sum()
        coverages.append(coverage)
        # Newcombe's method 10 is approximate: near, not always above, the level
        assert coverage >= 0.94, (cells, coverage)
    assert 0.94 <= float(np.mean(coverages)) <= 0.995
