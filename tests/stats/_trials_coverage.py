"""The simulated coverage of the interval over repeated trials, shared by its tests
(tests/stats/test_stats_trials.py) and by bench/trials.py, which writes the whole grid
into docs/repeated-trials.md."""

from __future__ import annotations

import numpy as np

from oloproof.stats.trials import clustered_rate


def coverage(n: int, k: int, mu: float, rho: float, reps: int, seed: int | np.random.Generator,
             level: float = 0.95) -> tuple[float, float, float, float]:
    """(coverage, share with lower > mu, share with upper < mu, mean width) over ``reps``
    suites of ``n`` cases of ``k`` trials whose cases have pass probabilities drawn from a
    Beta of mean ``mu`` and intra-class correlation ``rho`` (0: every case alike). Suites
    with the same sufficient counts share one interval, computed once."""
    rng = np.random.default_rng(seed)
    if rho == 0:
        p = np.full((reps, n), mu)
    else:
        a, b = mu * (1 - rho) / rho, (1 - mu) * (1 - rho) / rho
        p = rng.beta(a, b, size=(reps, n))
    x = rng.binomial(k, p)
    key = np.stack([x.sum(1), (x * x).sum(1), (x < k).sum(1), (x > 0).sum(1)], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    lows = np.empty(len(first))
    highs = np.empty(len(first))
    for j, i in enumerate(first):
        iv, _, _ = clustered_rate(list(x[i] / k), [k] * n, level)
        lows[j], highs[j] = iv.lower, iv.upper
    lo, hi = lows[inverse.ravel()], highs[inverse.ravel()]
    return (float(np.mean((lo <= mu) & (mu <= hi))), float(np.mean(lo > mu)),
            float(np.mean(hi < mu)), float(np.mean(hi - lo)))
