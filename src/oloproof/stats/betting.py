"""Confidence intervals for the mean of bounded scores, by betting.

Method: Waudby-Smith, I. & Ramdas, A. (2023), "Estimating means of bounded random variables
by betting", Journal of the Royal Statistical Society Series B 86(1):1-27 (arXiv:2010.09686).
Of the capital processes the paper builds, this is the *diversified Kelly* one (an average of
capital processes that each bet a constant fraction), with the bets on a geometric grid tuned
to the sample size, truncated as the paper's hedged process is, and its running intersection.
docs/statistics.md says why this one and not the predictable plug-in: it is monotone in every
score, which makes the worst case over missing scores exact.

Scores lie in a declared range [lo, hi]; everything here works on u = (x - lo)/(hi - lo) in
[0, 1] and maps the bounds back. For a candidate mean m:

- A bettor who stakes a constant fraction b of her wealth on "the next score is above m"
  ends a prefix of t scores with ``K+_b(m) = prod (1 + min(b, c/m) (u_i - m))``, and one
  who bets on "below m" with ``K-_b(m) = prod (1 - min(b, c/(1 - m)) (u_i - m))``. The
  truncation c = 3/4 (the paper's hedged process uses 1/2 or 3/4) keeps every factor at
  least 1/4, whatever the score. When the true mean is m and the scores are independent,
  each is a nonnegative martingale starting at 1, and so is the average K+(m) of K+_b(m)
  over the grid of bets b (likewise K-).
- By Ville's inequality such a martingale ever reaches 2/alpha with probability at most
  alpha/2. The lower bound is therefore the largest m at which K+ reaches 2/alpha at some
  prefix, the upper bound the smallest m at which K- does: each misses the true mean with
  probability at most alpha/2, for every distribution on the range and every sample size.
  (The paper's hedged process max(K+/2, K-/2) < 1/alpha, theta = 1/2, with its running
  intersection.) The prefixes looked at are every one up to 256 scores, and beyond that the
  ends of 256 equal blocks: a maximum over fewer prefixes is never larger, so still valid.
- The grid: ``GRID_SIZE`` bets from b_1 = sqrt(8 log(2/alpha) / n), the bet that suits a
  spread of 1/2 (the largest on [0, 1]), up to ``GRID_SPAN`` times that (a spread 30 times
  smaller), evenly spaced in log b, equal weights. Averaging pays for not knowing the spread
  in advance with about log(GRID_SIZE) in the threshold, much less than a wrong bet costs.

Every factor is non-increasing in m, so K+ is non-increasing and K- non-decreasing: the m
each side keeps form an interval, found by a bracketing root search on the log capital.
Every factor is also non-decreasing in its score, with the bets fixed in advance: **the lower
bound is non-decreasing in every score, and so is the upper bound**. So a missing score is
bounded exactly by its worst value (0 for the lower bound, 1 for the upper), and the
interval contains the interval of every completion of the missing scores.

**Order.** The running intersection depends on the order of the scores (the average of the
final capitals does not). Decisions feed them in a canonical order fixed by the case ids
(:func:`oloproof.evidence.case_order_key`), never in the order calls finished. The guarantee
assumes that order carries no information about the scores: a suite sorted from easy to hard,
fed in file order, would break it (docs/statistics.md measures how badly).

Pure Python (``math`` only); checked in tests/stats/test_stats_betting.py against an
independent numpy implementation, against Hoeffding and empirical-Bernstein bounds, and by
simulated coverage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from oloproof.stats.intervals import Interval, MeanSummary, _check_level, mean_and_sd

__all__ = [
    "BETTING",
    "GRID_SIZE",
    "GRID_SPAN",
    "TRUNCATION",
    "Bets",
    "betting_bounds",
    "betting_mean",
    "betting_ranges",
    "log_capital",
    "projected_bounds",
]

BETTING = "Waudby-Smith & Ramdas betting, 2023"

#: c: no bet stakes more than c of what a score at the far end of the range could lose.
TRUNCATION = 0.75
#: How many constant bets are averaged, and the ratio of the largest to the smallest.
GRID_SIZE = 10
GRID_SPAN = 30.0
#: Up to this many scores the running intersection looks at every prefix; beyond, at the
#: ends of this many equal blocks.
CHECKPOINTS = 256

#: The root search stops when the bracket is this narrow (on [0, 1]); the bound returned is
#: the end of the bracket on the rejected side, so it is never inside the exact one.
_TOLERANCE = 1e-10


class Bets:
    """The grid of constant bets for ``n`` scores at ``level`` (see the module's notes),
    with equal weights. ``n`` is the number of scores the interval is computed on (the
    horizon of a fixed-n interval; a confidence sequence would fix it in advance)."""

    __slots__ = ("values",)

    def __init__(self, n: int, level: float) -> None:
        if n < 1:
            raise ValueError("the bets need at least one score")
        alpha = _check_level(level)
        first = math.sqrt(8.0 * math.log(2.0 / alpha) / n)
        step = GRID_SPAN ** (1.0 / (GRID_SIZE - 1))
        self.values = tuple(first * step**g for g in range(GRID_SIZE))


def _blocks(n: int) -> list[tuple[int, int]]:
    """The prefixes the running intersection looks at, as consecutive blocks [start, end)."""
    k = min(n, CHECKPOINTS)
    ends = [-(-(i + 1) * n // k) for i in range(k)]  # ceil((i + 1) n / k)
    return list(zip([0, *ends[:-1]], ends, strict=True))


class _Compressed:
    """A sequence of scores cut into the blocks of :func:`_blocks`. Each block is held as
    its distinct values with their counts (the order within a block does not change its
    product), and as its count, mean, central moment sums of order 2 to 6, least and
    largest value (for :func:`_capital_bounds`)."""

    __slots__ = ("blocks", "large", "moments")

    def __init__(self, units: Sequence[float]) -> None:
        # Below 8 scores a block on average, the exact capital costs about what the bounds do.
        self.large = len(units) >= 8 * CHECKPOINTS
        self.blocks: list[tuple[list[float], list[int]]] = []
        self.moments: list[tuple[int, float, tuple[float, ...], float, float]] = []
        for start, end in _blocks(len(units)):
            block = units[start:end]
            counts: dict[float, int] = {}
            for u in block:
                counts[u] = counts.get(u, 0) + 1
            self.blocks.append((list(counts), list(counts.values())))
            if not self.large:
                continue
            n = len(block)
            mean = math.fsum(block) / n
            d = [u - mean for u in block]
            power = d
            sums = []
            for _ in range(5):  # central moment sums of order 2 to 6
                power = [x * y for x, y in zip(power, d, strict=True)]
                sums.append(math.fsum(power))
            self.moments.append((n, mean, tuple(sums), min(block), max(block)))


def _log_capital(data: _Compressed, bets: Bets, m: float, side: int) -> float:
    """The running maximum of the log mixture capital at m, exactly (see log_capital)."""
    log1p = math.log1p
    far = m if side > 0 else 1.0 - m  # what a score at the far end of the range loses
    cap = TRUNCATION / far if far > 0.0 else math.inf
    lams = [min(cap, b) for b in bets.values]
    sums = [0.0] * len(lams)
    best = 0.0  # the empty prefix: capital 1
    for values, counts in data.blocks:
        gains = [v - m for v in values] if side > 0 else [m - v for v in values]
        ones = len(values) == len(counts) and all(c == 1 for c in counts)
        for g, lam in enumerate(lams):
            if ones:
                sums[g] += sum([log1p(lam * x) for x in gains])
            else:
                sums[g] += sum([c * log1p(lam * x) for x, c in zip(gains, counts)])
        mixture = _log_mean_exp(sums)
        best = max(best, mixture)
    return best


def _log_mean_exp(sums: Sequence[float]) -> float:
    top = max(sums)
    return top + math.log(math.fsum([math.exp(s - top) for s in sums]) / len(sums))


#: Scales what is added to each side of a block's bounds in :func:`_capital_bounds` for
#: rounding: with scores and m in [0, 1], the power sums of a block of n gains are at most
#: n 2^k, each computed to a few ulps, so the polynomial's rounding error is below
#: 1e-15 n (1 + 2 lambda)^6; the slack is ten times that.
_BOUND_SLACK = 1e-14


def _capital_bounds(data: _Compressed, bets: Bets, m: float, side: int) -> tuple[float, float]:
    """Bounds (low, high) on what :func:`_log_capital` returns, in O(blocks x bets).

    For a factor 1 + z, log(1 + z) = z - z^2/2 + z^3/3 - z^4/4 + z^5/5 - z^6/6 + r(z), and
    by Taylor's theorem with Lagrange's remainder r(z) = z^7 / (7 (1 + xi)^7) for some xi
    between 0 and z: 0 <= r(z) <= z^6 b / 7 when 0 <= z <= b, and
    0 >= r(z) >= -z^6 a / (7 (1 - a)^7) when -a <= z < 0. The polynomial summed over a
    block needs only the block's power sums of the gains, which its central moments give
    for any m (a binomial shift); so does the bound on the remainder. With the bets small
    (large samples) the two bounds lie well within 1e-6 of each other, and the root search
    needs the exact capital only for the last digits, if at all."""
    far = m if side > 0 else 1.0 - m
    cap = TRUNCATION / far if far > 0.0 else math.inf
    lams = [min(cap, b) for b in bets.values]
    low = [0.0] * len(lams)
    high = [0.0] * len(lams)
    best_low = best_high = 0.0
    sign = 1.0 if side > 0 else -1.0
    for n, mean, central, smallest, largest in data.moments:
        d = (mean - m) * sign  # the block's mean gain
        c2, c3, c4, c5, c6 = central
        c3 *= sign
        c5 *= sign
        d2 = d * d
        d3 = d2 * d
        d4 = d3 * d
        # power sums of the gains: a binomial shift of the central moment sums
        p1 = n * d
        p2 = c2 + n * d2
        p3 = c3 + 3.0 * d * c2 + n * d3
        p4 = c4 + 4.0 * d * c3 + 6.0 * d2 * c2 + n * d4
        p5 = c5 + 5.0 * d * c4 + 10.0 * d2 * c3 + 10.0 * d3 * c2 + n * d4 * d
        p6 = c6 + 6.0 * d * c5 + 15.0 * d2 * c4 + 20.0 * d3 * c3 + 15.0 * d4 * c2 + n * d3 * d3
        if side > 0:
            worst, best_gain = m - smallest, largest - m
        else:
            worst, best_gain = largest - m, m - smallest
        worst = max(worst, 0.0)
        best_gain = max(best_gain, 0.0)
        for g, lam in enumerate(lams):
            poly = lam * (p1 - lam * (p2 / 2.0 - lam * (p3 / 3.0 - lam * (
                p4 / 4.0 - lam * (p5 / 5.0 - lam * p6 / 6.0)))))
            sixth = lam**6 * p6 / 7.0
            a = lam * worst
            slack = _BOUND_SLACK * (n + 1) * (1.0 + 2.0 * lam) ** 6
            low[g] += poly - (sixth * a / (1.0 - a) ** 7 if a > 0.0 else 0.0) - slack
            high[g] += poly + sixth * lam * best_gain + slack
        mixture = _log_mean_exp(low)
        best_low = max(best_low, mixture)
        mixture = _log_mean_exp(high)
        best_high = max(best_high, mixture)
    return best_low, best_high


def _excess(data: _Compressed, bets: Bets, m: float, side: int, threshold: float) -> float:
    """log capital - log threshold at m: its sign exact, its size close. From the bounds
    of :func:`_capital_bounds` when they lie on one side of the threshold, else from the
    capital itself."""
    if data.large:
        low, high = _capital_bounds(data, bets, m, side)
        if low >= threshold:
            return low - threshold
        if high < threshold:
            return high - threshold
    return _log_capital(data, bets, m, side) - threshold


def log_capital(units: Sequence[float], m: float, side: int, level: float) -> float:
    """The running maximum, over the prefixes of :func:`_blocks`, of the log of the mixture
    capital at m, on scores ``units`` in [0, 1] in the order given. ``side`` +1 bets on
    scores above m (it rejects m below the mean), -1 on scores below m."""
    return _log_capital(_Compressed(units), Bets(len(units), level), m, side)


def _root(
    f: Callable[[float], float], side: int, guess: float, step: float, far_value: float,
    tolerance: float = _TOLERANCE,
) -> float:
    """The bound of one side on [0, 1], from f(m) = log capital - log threshold: side +1,
    the largest m rejected (f >= 0), 0 when none is; side -1, the smallest, 1 when none is.

    The capital of side +1 is non-increasing in m and that of side -1 non-decreasing, so
    the rejected m form [0, L] (or [U, 1]). From ``guess`` the search steps away by
    ``step``, doubling, until the boundary is bracketed (``far_value`` is f at the far end
    of the range, known without computing it: there every factor is at most 1), then
    narrows the bracket by the Anderson-Bjorck variant of the regula falsi (Anderson &
    Bjorck 1973), bisecting when that stalls. The end of the bracket on the rejected side is
    returned, so the bound is never inside the exact one."""
    near, far = (0.0, 1.0) if side > 0 else (1.0, 0.0)
    x = min(1.0, max(0.0, guess))
    fx = f(x) if x != far else far_value
    if fx >= 0.0:
        rejected, fr = x, fx
        while True:  # move towards the far end until an m is kept
            x = x + side * step
            step *= 2.0
            if (x - far) * side >= 0.0:
                kept, fk = far, far_value
                break
            fx = f(x)
            if fx < 0.0:
                kept, fk = x, fx
                break
            rejected, fr = x, fx
    else:
        kept, fk = x, fx
        while True:  # move towards the near end until an m is rejected
            x = x - side * step
            step *= 2.0
            if (x - near) * side <= 0.0:
                fx = f(near)
                if fx < 0.0:
                    return near  # nothing is rejected: the bound is the end of the range
                rejected, fr = near, fx
                break
            fx = f(x)
            if fx >= 0.0:
                rejected, fr = x, fx
                break
            kept, fk = x, fx
    last = 0
    width = abs(kept - rejected)
    slow = 0
    for _ in range(200):
        if abs(kept - rejected) <= tolerance:
            break
        m = 0.5 * (rejected + kept)
        # Secant steps while the bracket is wide; bisection for the last few digits, whose
        # points stay clear of the boundary, so the cheap bounds of the capital settle them.
        if slow < 3 and fr != fk and abs(kept - rejected) > 64.0 * tolerance:
            guess = rejected + (kept - rejected) * fr / (fr - fk)
            if min(rejected, kept) < guess < max(rejected, kept):
                m = guess
        # Never closer than 0.9 tolerance to an end (unless the bracket is that narrow):
        # a step landing next to an end would shrink the bracket by almost nothing.
        toward = 1.0 if kept > rejected else -1.0
        step_in = 0.9 * tolerance
        if abs(kept - rejected) > 2.0 * step_in:
            if abs(m - rejected) < step_in:
                m = rejected + toward * step_in
            elif abs(kept - m) < step_in:
                m = kept - toward * step_in
        fm = f(m)
        if fm >= 0.0:
            if last == 1:
                scale = 1.0 - fm / fr
                fk *= scale if scale > 0.0 else 0.5
            rejected, fr, last = m, fm, 1
        else:
            if last == -1:
                scale = 1.0 - fm / fk
                fr *= scale if scale > 0.0 else 0.5
            kept, fk, last = m, fm, -1
        now = abs(kept - rejected)
        slow = slow + 1 if now > 0.5 * width else 0
        width = now
    return rejected


def _start(units: Sequence[float], threshold: float, sign: float) -> tuple[float, float]:
    """Where the root search starts, and its first step: the mean plus or minus an
    empirical-Bernstein-like half-width (Maurer & Pontil 2009), which the betting bound
    is usually close to."""
    n = len(units)
    mean = math.fsum(units) / n
    variance = math.fsum((u - mean) ** 2 for u in units) / n
    half = math.sqrt(2.0 * variance * threshold / n) + threshold / n
    return mean + sign * half, 0.25 * half + 1e-9


def betting_bounds(
    lows: Sequence[float], highs: Sequence[float] | None = None, level: float = 0.95,
    horizon: int | None = None, tune_level: float | None = None,
) -> tuple[float, float]:
    """The betting interval on [0, 1]: the lower bound from the scores ``lows``, the upper
    from ``highs`` (the same scores by default), both in the order given.

    A score known only to lie in [a, b] (a missing case: [0, 1]) enters ``lows`` as a and
    ``highs`` as b; since each bound is non-decreasing in every score, the interval then
    contains the interval of every value it could have had. No score at all: (0, 1).
    Should the two sides cross (each rejects the other's bound, which happens with
    probability at most 1 - level), the interval is taken between them.

    ``horizon``: the bets are tuned to that many scores instead of ``len(lows)``: fixed
    before the first score, as a confidence sequence needs them (a sequential run passes
    its suite's size; stats/sequential.py).

    ``tune_level``: the bets are tuned to that level instead of ``level`` (only the
    threshold then follows ``level``): the capital is the same at every level, so the
    intervals are nested in the level, as Holm's procedure with intervals needs
    (analysis/matrix.py)."""
    alpha = _check_level(level)
    highs = lows if highs is None else highs
    if len(lows) != len(highs):
        raise ValueError("lows and highs must have the same length")
    if not lows:
        return 0.0, 1.0
    for a, b in zip(lows, highs, strict=True):
        if not 0.0 <= a <= b <= 1.0:
            raise ValueError(f"scores on [0, 1] with low <= high were expected, got {a!r}, {b!r}")
    threshold = math.log(2.0 / alpha)
    bets = Bets(max(len(lows), horizon or 0), level if tune_level is None else tune_level)
    low_data = _Compressed(lows)
    high_data = low_data if highs is lows else _Compressed(highs)
    lower = _root(lambda m: _excess(low_data, bets, m, +1, threshold), +1,
                  *_start(lows, threshold, -1.0), -threshold)
    upper = _root(lambda m: _excess(high_data, bets, m, -1, threshold), -1,
                  *_start(highs, threshold, +1.0), -threshold)
    return (lower, upper) if lower <= upper else (upper, lower)


def betting_mean(
    scores: Sequence[float | None],
    value_range: tuple[float, float],
    level: float = 0.95,
) -> MeanSummary:
    """The mean of the observed scores and their betting interval at ``level``.

    ``scores`` in the canonical case order, None for a missing case (bounded by the worst
    value in ``value_range`` on each side). Each side of the interval misses the true mean
    with probability at most (1 - level)/2 at every sample size, for any distribution on
    the range (Waudby-Smith & Ramdas 2023; see the module's notes). An interval exists from
    one score on; with none observed and m missing it is the whole range.
    """
    lo, hi = float(value_range[0]), float(value_range[1])
    lows, highs, observed = _to_units(scores, lo, hi)
    n = len(observed)
    mean, sd = mean_and_sd(observed)  # without overflow, whatever the scores' size
    interval = _interval(lows, highs, lo, hi, level)
    return MeanSummary(
        mean=mean, sd=sd, n=n, interval=interval, missing=len(lows) - n, method=BETTING
    )


def _to_units(
    scores: Sequence[float | None], lo: float, hi: float
) -> tuple[list[float], list[float], list[float]]:
    half, low, width = _scale(lo, hi)
    lows: list[float] = []
    highs: list[float] = []
    observed: list[float] = []
    for x in scores:
        if x is None:
            lows.append(0.0)
            highs.append(1.0)
            continue
        v = float(x)
        if not lo <= v <= hi:
            raise ValueError(f"score {v!r} lies outside the range [{lo!r}, {hi!r}]")
        observed.append(v)
        u = min(1.0, max(0.0, (v * half - low) / width))
        lows.append(u)
        highs.append(u)
    return lows, highs, observed


def _interval(
    lows: Sequence[float], highs: Sequence[float], lo: float, hi: float, level: float
) -> Interval | None:
    if not lows:
        return None
    a, b = betting_bounds(lows, highs, level)
    half, low, width = _scale(lo, hi)
    return Interval(max(lo, (low + a * width) / half), min(hi, (low + b * width) / half))


def _scale(lo: float, hi: float) -> tuple[float, float, float]:
    """``(s, lo * s, (hi - lo) * s)``: s is 1, or 1/2 when hi - lo is beyond the largest
    float (a range such as [-1e308, 1e308]); a unit is ``(x * s - lo * s) / width``, exact
    as ``(x - lo) / (hi - lo)`` is, and never infinite or NaN."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"value_range must be finite with low < high, got [{lo!r}, {hi!r}]")
    half = 1.0 if math.isfinite(hi - lo) else 0.5
    return half, lo * half, hi * half - lo * half


def betting_ranges(
    ranges: Sequence[tuple[float, float]],
    value_range: tuple[float, float],
    level: float = 0.95,
) -> Interval | None:
    """The betting interval of scores each known only to lie in a range [a_i, b_i] inside
    ``value_range`` (an observed score: a_i = b_i; a case mean over trials with some trials
    missing: the means of its two extreme completions). Contains the interval of every
    choice of the scores within their ranges. None when there is no score."""
    lo, hi = float(value_range[0]), float(value_range[1])
    half, low, width = _scale(lo, hi)
    lows: list[float] = []
    highs: list[float] = []
    for a, b in ranges:
        if not lo <= a <= b <= hi:
            raise ValueError(f"a score range [{a!r}, {b!r}] must lie inside [{lo!r}, {hi!r}]")
        lows.append(min(1.0, max(0.0, (a * half - low) / width)))
        highs.append(min(1.0, max(0.0, (b * half - low) / width)))
    return _interval(lows, highs, lo, hi, level)


#: A projection (:func:`projected_bounds`) keeps at most this many distinct scores, rounded
#: towards each side's worst; it sizes a plan, approximately, and never decides a rule.
_PROJECTION_BINS = 1024


def projected_bounds(
    units: Sequence[float],
    total: int,
    missing: int = 0,
    level: float = 0.95,
    weights: Sequence[float] | None = None,
) -> tuple[float, float]:
    """The betting interval on [0, 1] that ``total`` cases would get if ``missing`` of them
    were missing and the others had exactly the mix of scores of ``units`` (each value in
    the share it has there), spread evenly along the canonical order.

    Along such a sequence every bet's log capital grows in proportion to the number of
    scores fed, so its running maximum is at the start or the end: the capital is
    exp((total - missing) E[log(1 + lambda gain)] + missing log(1 - lambda far)), with the
    expectation over the observed mix and each missing score at its worst. This is what
    ``oloproof plan`` sizes a MEAN rule with: the interval that decides it, on the cases to
    come "if the observed scores hold". ``weights`` (summing to 1) gives each value of
    ``units`` its share instead of its count (a modelled mix, such as the pass fractions
    of k trials). Computed to 1e-10; with more than 1024 distinct scores they are first
    rounded to 1024 steps of the range, down for the lower bound and up for the upper (so
    the projection errs wide)."""
    if not units:
        raise ValueError("a projection needs at least one observed score")
    if total < 1:
        raise ValueError("total must be at least 1")
    observed = total - missing
    if observed < 0:
        raise ValueError("total must be at least the number of missing cases")
    threshold = math.log(2.0 / _check_level(level))
    bets = Bets(total, level)
    n = len(units)

    shares = [1.0 / n] * n if weights is None else [float(w) for w in weights]
    if len(shares) != n or any(w < 0.0 for w in shares):
        raise ValueError("one nonnegative weight per score is needed")

    def mix(rounding: Callable[[float], float]) -> tuple[list[float], list[float]]:
        counts: dict[float, float] = {}
        for u, w in zip(units, shares, strict=True):
            counts[u] = counts.get(u, 0.0) + w
        if len(counts) > _PROJECTION_BINS:
            binned: dict[float, float] = {}
            for u, w in counts.items():
                v = rounding(u * _PROJECTION_BINS) / _PROJECTION_BINS
                binned[v] = binned.get(v, 0.0) + w
            counts = binned
        scale = math.fsum(counts.values())
        return list(counts), [w / scale for w in counts.values()]

    def excess(values: list[float], weights: list[float], m: float, side: int) -> float:
        far = m if side > 0 else 1.0 - m
        cap = TRUNCATION / far if far > 0.0 else math.inf
        gains = [v - m for v in values] if side > 0 else [m - v for v in values]
        sums = []
        for b in bets.values:
            lam = min(b, cap)
            per_score = math.fsum([w * math.log1p(lam * x) for x, w in zip(gains, weights)])
            worst = math.log1p(-lam * far) if missing else 0.0
            sums.append(observed * per_score + missing * worst)
        return max(0.0, _log_mean_exp(sums)) - threshold

    low_values, low_weights = mix(math.floor)
    high_values, high_weights = mix(math.ceil)
    mean = math.fsum([u * w for u, w in zip(units, shares, strict=True)]) / math.fsum(shares)
    spread = math.sqrt(math.fsum([w * (u - mean) ** 2 for u, w in zip(units, shares,
                                                                      strict=True)])
                       / math.fsum(shares))
    half = math.sqrt(2.0 * spread * spread * threshold / total) + threshold / total
    lower = _root(lambda m: excess(low_values, low_weights, m, +1), +1,
                  mean - half, 0.25 * half + 1e-9, -threshold)
    upper = _root(lambda m: excess(high_values, high_weights, m, -1), -1,
                  mean + half, 0.25 * half + 1e-9, -threshold)
    return (lower, upper) if lower <= upper else (upper, lower)
