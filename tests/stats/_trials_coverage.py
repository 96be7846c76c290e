"""The simulated coverage of the interval that decides a rate over repeated trials (the
betting interval on the cases' pass fractions, policy/decide.py), shared by its tests
(tests/stats/test_stats_trials.py) and by bench/trials.py, which writes the whole grid into
docs/repeated-trials.md. Korn–Graubard's coverage (stats/trials.py, which no longer decides)
is measured beside it for comparison."""

from __future__ import annotations

import numpy as np
from tests.stats import _betting_reference as reference

from oloproof.stats.trials import clustered_rate

#: Mean widths are measured on this many of the simulated suites (a bisection each).
WIDTH_SUITES = 300


def _suites(n: int, k: int, mu: float, rho: float, reps: int,
            seed: int | np.random.Generator) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if rho == 0:
        p = np.full((reps, n), mu)
    else:
        a, b = mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho
        p = rng.beta(a, b, size=(reps, n))
    return rng.binomial(k, p)


def coverage(n: int, k: int, mu: float, rho: float, reps: int, seed: int | np.random.Generator,
             level: float = 0.95, *, width: bool = True) -> tuple[float, float, float, float]:
    """(coverage, share with lower > mu, share with upper < mu, mean width) of the betting
    interval on the case pass fractions, over ``reps`` suites of ``n`` cases of ``k`` trials
    whose cases have pass probabilities drawn from a Beta of mean ``mu`` and intra-class
    correlation ``rho`` (0: every case alike). Each bound lies beyond mu exactly when its
    capital at mu reaches 2/alpha (the numpy reference, which tests/stats/test_stats_betting.py
    holds the runtime code to). ``width=False``: the mean width (a bisection per suite, most
    of the cost) is not measured and comes back as nan; the rest is the same."""
    fractions = _suites(n, k, mu, rho, reps, seed) / k
    at = np.full(reps, mu)
    low = reference.rejects_batch(fractions, at, +1, level)
    high = reference.rejects_batch(fractions, at, -1, level)
    mean_width = float("nan")
    if width:
        lower, upper = reference.batch_bounds(fractions[:WIDTH_SUITES], level)
        mean_width = float(np.mean(upper - lower))
    return (float(np.mean(~low & ~high)), float(np.mean(low)), float(np.mean(high)),
            mean_width)


def korn_graubard_coverage(n: int, k: int, mu: float, rho: float, reps: int,
                           seed: int | np.random.Generator,
                           level: float = 0.95) -> tuple[float, float]:
    """(coverage, mean width) of the Korn–Graubard rule with its case-level fallback
    (stats/trials.py ``clustered_rate``), which decided before issue 33, on the same suites.
    Suites with the same sufficient counts share one interval, computed once."""
    x = _suites(n, k, mu, rho, reps, seed)
    key = np.stack([x.sum(1), (x * x).sum(1), (x < k).sum(1), (x > 0).sum(1)], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    lows = np.empty(len(first))
    highs = np.empty(len(first))
    for j, i in enumerate(first):
        iv, _, _ = clustered_rate(list(x[i] / k), [k] * n, level)
        lows[j], highs[j] = iv.lower, iv.upper
    lo, hi = lows[inverse.ravel()], highs[inverse.ravel()]
    return float(np.mean((lo <= mu) & (mu <= hi))), float(np.mean(hi - lo))
