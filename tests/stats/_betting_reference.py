"""An independent numpy implementation of the betting interval, written from its definition
(Waudby-Smith & Ramdas 2023, diversified constant bets with the running intersection, as
docs/statistics.md states it), for the tests to check ``oloproof.stats.betting`` against.

Deliberately plain: every prefix capital of every bet computed with ``np.log1p`` and
``np.cumsum``, the mixture with ``scipy.special.logsumexp``, and each bound found by
bisection to 1e-15, without the cheap bounds, the root search or the blocks of distinct
values the runtime code uses to be fast.
"""

from __future__ import annotations

import hashlib

import numpy as np
from scipy.special import logsumexp

TRUNCATION = 0.75
GRID_SIZE = 10
GRID_SPAN = 30.0
CHECKPOINTS = 256


def bets(n: int, level: float) -> np.ndarray:
    alpha = 1.0 - level
    first = np.sqrt(8.0 * np.log(2.0 / alpha) / n)
    return first * GRID_SPAN ** (np.arange(GRID_SIZE) / (GRID_SIZE - 1))


def checkpoints(n: int) -> np.ndarray:
    """0-based indices of the last score of each prefix looked at."""
    k = min(n, CHECKPOINTS)
    return -(-np.arange(1, k + 1) * n // k) - 1


def log_capital(units: np.ndarray, m: float, side: int, level: float) -> float:
    """max(0, max over the checkpoints of log(mean over bets of prod(1 + lam gain)))."""
    units = np.asarray(units, dtype=float)
    far = m if side > 0 else 1.0 - m
    cap = TRUNCATION / far if far > 0 else np.inf
    lam = np.minimum(bets(len(units), level), cap)
    gains = units - m if side > 0 else m - units
    prefix = np.cumsum(np.log1p(lam[:, None] * gains[None, :]), axis=1)
    at = prefix[:, checkpoints(len(units))]
    mixture = logsumexp(at, axis=0) - np.log(len(lam))
    return float(max(0.0, mixture.max()))


def bounds(
    lows: np.ndarray, highs: np.ndarray | None = None, level: float = 0.95
) -> tuple[float, float]:
    """The interval on [0, 1]: the largest m the bet on 'above' rejects (from ``lows``) and
    the smallest m the bet on 'below' rejects (from ``highs``), by bisection."""
    lows = np.asarray(lows, dtype=float)
    highs = lows if highs is None else np.asarray(highs, dtype=float)
    if len(lows) == 0:
        return 0.0, 1.0
    threshold = np.log(2.0 / (1.0 - level))

    def rejects(units: np.ndarray, m: float, side: int) -> bool:
        return log_capital(units, m, side, level) >= threshold

    if rejects(lows, 0.0, +1):
        a, b = 0.0, 1.0  # a rejected, b kept
        for _ in range(60):
            mid = 0.5 * (a + b)
            a, b = (mid, b) if rejects(lows, mid, +1) else (a, mid)
        lower = a
    else:
        lower = 0.0
    if rejects(highs, 1.0, -1):
        a, b = 1.0, 0.0
        for _ in range(60):
            mid = 0.5 * (a + b)
            a, b = (mid, b) if rejects(highs, mid, -1) else (a, mid)
        upper = a
    else:
        upper = 1.0
    return (lower, upper) if lower <= upper else (upper, lower)


def rejects_batch(units: np.ndarray, m: np.ndarray, side: int, level: float) -> np.ndarray:
    """For R suites at once (``units`` R x n, ``m`` R): does the side's capital reach the
    threshold at m? That is: lower bound >= m (side +1) or upper bound <= m (side -1)."""
    n = units.shape[1]
    m = np.asarray(m, dtype=float)[:, None]
    far = m if side > 0 else 1.0 - m
    cap = TRUNCATION / far
    lam = np.minimum(bets(n, level)[None, :], cap)  # R x G
    gains = units - m if side > 0 else m - units  # R x n
    prefix = np.cumsum(np.log1p(lam[:, :, None] * gains[:, None, :]), axis=2)
    at = prefix[:, :, checkpoints(n)]
    mixture = logsumexp(at, axis=1) - np.log(lam.shape[1])
    best = np.maximum(mixture.max(axis=1), 0.0)
    return best >= np.log(2.0 / (1.0 - level))


def order_key(case_id: str) -> bytes:
    """The canonical order of cases, as docs/statistics.md states it: SHA-256 of the id."""
    return hashlib.sha256(b"oloproof case order 1\0" + case_id.encode()).digest()


def mean_interval(
    scores: dict[str, float | None], lo: float, hi: float, level: float = 0.95
) -> tuple[float, float]:
    """The betting interval of a MEAN metric with range [lo, hi] whose case ``id`` scored
    ``scores[id]`` (None: missing), its scores taken in the canonical order."""
    ids = sorted(scores, key=order_key)
    lows = [0.0 if scores[i] is None else (scores[i] - lo) / (hi - lo) for i in ids]
    highs = [1.0 if scores[i] is None else (scores[i] - lo) / (hi - lo) for i in ids]
    a, b = bounds(np.array(lows), np.array(highs), level)
    return max(lo, lo + a * (hi - lo)), min(hi, lo + b * (hi - lo))


def projected_log_capital(
    units: np.ndarray, total: int, missing: int, m: float, side: int, level: float = 0.95,
    weights: np.ndarray | None = None,
) -> float:
    """The log capital at m of ``total`` cases: ``missing`` at their worst, the rest holding
    exactly the mix of ``units`` (in the shares ``weights`` when given), spread evenly (so
    the running maximum is at an end)."""
    units = np.asarray(units, dtype=float)
    shares = np.full(len(units), 1.0 / len(units)) if weights is None else (
        np.asarray(weights, dtype=float) / np.sum(weights))
    far = m if side > 0 else 1.0 - m
    lam = np.minimum(bets(total, level), TRUNCATION / far if far > 0 else np.inf)
    gains = units - m if side > 0 else m - units
    per_score = np.log1p(lam[:, None] * gains[None, :]) @ shares
    worst = np.log1p(-lam * far)
    capital = logsumexp((total - missing) * per_score + missing * worst) - np.log(len(lam))
    return float(max(0.0, capital))


def batch_bounds(
    units: np.ndarray, level: float = 0.95, iters: int = 34
) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of R suites at once (``units`` R x n), by bisection to 2**-iters."""
    r = units.shape[0]
    lo, hi = np.zeros(r), np.ones(r)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        rejected = rejects_batch(units, mid, +1, level)
        lo, hi = np.where(rejected, mid, lo), np.where(rejected, hi, mid)
    lower = lo
    lo, hi = np.zeros(r), np.ones(r)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        rejected = rejects_batch(units, mid, -1, level)
        lo, hi = np.where(rejected, lo, mid), np.where(rejected, mid, hi)
    return lower, hi
