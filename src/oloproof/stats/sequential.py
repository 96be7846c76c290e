"""Anytime-valid tests of a threshold: what a sequential run decides its rules with.

A fixed-n interval looked at after every case is no longer a 95% interval: peeking with
Clopper-Pearson after every case until it decides gives about 16% false PASS at a nominal
2.5%. The tests here may be looked at after every case, and stopped whenever they decide,
with the error each promises intact (Ville's inequality: a nonnegative supermartingale that
starts at 1 ever reaches 1/a with probability at most a).

**BINARY rules: a beta-binomial mixture e-process** (Robbins 1970; Howard, Ramdas,
McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence
sequences", Ann. Statist. 49(2), section 3; the one-sided truncated mixture of their
Proposition 6 and of Waudby-Smith & Ramdas). To show p > t (a ``min: t`` rule's PASS, a
``max: t`` rule's FAIL), k passes among n cases give

    E+(n, k) = integral over p in (t, 1] of  p^k (1 - p)^(n - k) / (t^k (1 - t)^(n - k))  dpi(p)

with pi a Beta(a, b) prior truncated to (t, 1]. Each integrand is the likelihood ratio of
the rate p against t, a martingale when the true rate is t and a supermartingale when it is
below t (the expected factor p'p/t + (1 - p')(1 - p)/(1 - t) is at most 1 for p' <= t < p),
so E+ is a nonnegative supermartingale starting at 1 under every rate p' <= t. In closed
form, with B the beta function and I the regularized incomplete beta:

    E+(n, k) = B(k + a, n - k + b) (1 - I_t(k + a, n - k + b))
               / (B(a, b) (1 - I_t(a, b)) t^k (1 - t)^(n - k))

and E- (to show p < t) is the same with the prior truncated to [0, t) (I in place of
1 - I). Each side rejects at 2/alpha, so each errs at most alpha/2: the same split as the
two-sided Clopper-Pearson interval that decides a fixed-n run at level 1 - alpha.

The prior is fixed before the first case, from the rule alone: centred on the **design
alternative** t + margin (t - margin for E-), with the weight of about half the cases a
fixed-n test would need to detect that margin with 90% power (normal approximation). A
prior there makes the e-process grow fastest for rates near that alternative, and it still
grows, more slowly, for any rate beyond t. docs/sequential-decisions.md gives the measured
numbers of cases to a decision.

**MEAN rules with a declared range: a betting confidence sequence** (Waudby-Smith & Ramdas
2023): the capital process of stats/betting.py at m = the threshold, with its grid of
constant bets fixed in advance by the suite's size (the largest number of cases the run
may reach). Each constant bet's capital is a test martingale, so is their average, and its
running maximum may be looked at after every case.

Missing cases, as in the fixed-n rules: each side is fed the value that hurts it most (a
failure, or the bottom of the range, for the side that shows the rate or mean is high; a
pass, or the top, for the side that shows it is low).

Pure Python (``math`` only); checked in tests/stats/test_stats_sequential.py against scipy,
by the exact expectation of E under the null for n <= 300, by exact boundary-crossing
probabilities, and by simulation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from oloproof._records import dataclass
from oloproof.stats._special import _betainc_pair, _log_beta
from oloproof.stats.betting import TRUNCATION, Bets
from oloproof.stats.intervals import _check_level

__all__ = [
    "DEFAULT_MARGIN",
    "SEQUENTIAL_BINARY",
    "SEQUENTIAL_MEAN",
    "BinaryPrior",
    "BinaryTest",
    "MeanTest",
    "binary_confidence_sequence",
    "binary_cuts",
    "binary_prior",
    "count_stopping",
    "design_size",
    "log_evalue",
    "mean_stopping",
    "stopping_distribution",
]

SEQUENTIAL_BINARY = "beta-binomial mixture e-process"
SEQUENTIAL_MEAN = "betting confidence sequence"

#: The design alternative's distance from the threshold, for BINARY rules.
DEFAULT_MARGIN = 0.05

#: Power of the fixed-n test whose size weighs the prior (see binary_prior).
_DESIGN_POWER_Z = 1.2815515655446004  # the 0.9 normal quantile

#: The largest weight a + b of a BINARY prior. log E subtracts log B(a, b) from
#: log B(k + a, n - k + b), numbers about (a + b) log(a + b) in size, so its error grows with
#: a + b: about 1e-9 at 1e6, and every digit lost at 1e16 (a margin of 1e-9 asked for that,
#: and 80 passes in 100 at a floor of 0.8 came out as e^50). Any prior fixed before the
#: first case keeps the e-process valid, so a margin too small for its weight gets a wider
#: prior (centred where it asked) rather than a wrong e-value.
_MAX_PRIOR_WEIGHT = 1e6


def _normal_isf(tail: float) -> float:
    """The upper ``tail`` quantile of the standard normal (imported here: a run that is not
    sequential never needs it)."""
    from oloproof.stats.trials import normal_isf

    return normal_isf(tail)


@dataclass(frozen=True)
class BinaryPrior:
    """A Beta(a, b) prior truncated to one side of the threshold t: ``side`` +1, (t, 1]
    (the e-process shows the rate is above t); -1, [0, t) (below)."""

    t: float
    side: int
    a: float
    b: float
    #: log of the prior's mass on its side before truncation (its normalizer).
    log_mass: float


def design_size(t: float, alternative: float, level: float) -> float:
    """Cases a fixed-n one-sided test at (1 - level)/2 needs to tell ``alternative`` from
    ``t`` with 90% power, by the normal approximation (a weight for the prior; never a
    sample size shown to anyone)."""
    alpha = _check_level(level)
    z = _normal_isf(alpha / 2.0)
    spread = z * math.sqrt(t * (1.0 - t)) + _DESIGN_POWER_Z * math.sqrt(
        alternative * (1.0 - alternative)
    )
    return (spread / abs(alternative - t)) ** 2


def binary_prior(t: float, side: int, level: float, margin: float = DEFAULT_MARGIN) -> BinaryPrior:
    """The prior of one side of a BINARY rule at threshold ``t``: centred on the design
    alternative t + margin (side +1) or t - margin (side -1), kept inside the side (at most
    half-way to its end), with a + b = half the :func:`design_size` (at least 2, at most
    ``_MAX_PRIOR_WEIGHT``, where log E is still exact to about 1e-9).

    A threshold at an end of [0, 1] leaves one side: t = 0 (``max: 0``) only side +1, whose
    null, a rate of 0, never passes a case, so a single pass rejects it (its e-value is
    infinite, see :func:`log_evalue`); t = 1 (``min: 1``) only side -1, rejected by a single
    failure."""
    if not (0.0 <= t < 1.0 if side > 0 else 0.0 < t <= 1.0):
        raise ValueError(f"a threshold in {'[0, 1)' if side > 0 else '(0, 1]'} is needed for"
                         f" this side, got {t!r}")
    if not 0.0 < margin < 1.0:
        raise ValueError(f"the margin must lie strictly between 0 and 1, got {margin!r}")
    if side > 0:
        alternative = min(t + margin, 0.5 * (t + 1.0))
    else:
        alternative = max(t - margin, 0.5 * t)
    weight = min(_MAX_PRIOR_WEIGHT, max(2.0, 0.5 * design_size(t, alternative, level)))
    a, b = alternative * weight, (1.0 - alternative) * weight
    below, above = _betainc_pair(a, b, t, 1.0 - t)
    mass = above if side > 0 else below
    return BinaryPrior(t, 1 if side > 0 else -1, a, b, math.log(mass))


def log_evalue(k: int, n: int, prior: BinaryPrior) -> float:
    """log E(n, k): the mixture e-value of k passes among n cases (see the module's notes);
    0 at n = 0, -inf where it is 0. At t = 0 (t = 1) the null rate never passes (fails) a
    case: a pass (a failure) rejects it for good, +inf."""
    if n == 0:
        return 0.0
    t, a, b = prior.t, prior.a, prior.b
    if (t == 0.0 and k > 0) or (t == 1.0 and k < n):
        return math.inf
    below, above = _betainc_pair(k + a, n - k + b, t, 1.0 - t)
    tail = above if prior.side > 0 else below
    if tail <= 0.0:
        return -math.inf
    # k log t and (n - k) log(1 - t), each 0 when its count is (t at an end of [0, 1]).
    null = (k * math.log(t) if k else 0.0) + ((n - k) * math.log1p(-t) if n > k else 0.0)
    return _log_beta(k + a, n - k + b) + math.log(tail) - _log_beta(a, b) - prior.log_mass - null


def binary_cuts(prior: BinaryPrior, horizon: int, level: float) -> list[int]:
    """Where the e-process of ``prior`` rejects, for n = 0 .. ``horizon``: for side +1 the
    least k whose e-value reaches 2/alpha (n + 1 when none), for side -1 the largest
    (-1 when none). The e-value grows with k for side +1 and falls for side -1, so a path
    is decided at n exactly when its k is at or beyond the cut."""
    threshold = math.log(2.0 / _check_level(level))
    cuts = [1 if prior.side > 0 else -1]  # n = 0: nothing rejects
    for n in range(1, horizon + 1):
        if prior.side > 0:
            previous = cuts[-1]
            k = min(max(previous - 1, 0), n)  # cuts move by about one per case
            if log_evalue(k, n, prior) >= threshold:
                while k > 0 and log_evalue(k - 1, n, prior) >= threshold:
                    k -= 1
                cuts.append(k)
                continue
            while k <= n and log_evalue(k, n, prior) < threshold:
                k += 1
            cuts.append(k)
        else:
            previous = cuts[-1]
            k = max(min(previous + 1, n), 0)
            if log_evalue(k, n, prior) >= threshold:
                while k < n and log_evalue(k + 1, n, prior) >= threshold:
                    k += 1
                cuts.append(k)
                continue
            while k >= 0 and log_evalue(k, n, prior) < threshold:
                k -= 1
            cuts.append(k)
    return cuts


class BinaryTest:
    """One BINARY rule's two e-processes, fed one case at a time.

    ``direction`` ``min``: PASS when E+ (on the passes, each missing case a failure) reaches
    2/alpha, FAIL when E- (each missing case a pass) does; ``max`` the other way round. The
    first to reach it decides the rule, for good."""

    def __init__(self, t: float, direction: str, level: float,
                 margin: float = DEFAULT_MARGIN) -> None:
        self.direction = direction
        self.threshold = math.log(2.0 / _check_level(level))
        # A threshold at an end of [0, 1] leaves one side nothing to show (min: 1 never
        # passes): that side never rejects.
        self.up = binary_prior(t, +1, level, margin) if t < 1.0 else None
        self.down = binary_prior(t, -1, level, margin) if t > 0.0 else None
        self.n = 0
        self.k_low = 0  # passes, each missing case a failure
        self.k_high = 0  # passes, each missing case a pass
        self.state: str | None = None
        self.log_e = 0.0  # the e-value that decided, or the larger one so far

    def add(self, outcome: bool | None) -> str | None:
        """Feed one case (True passed, False failed, None missing); the state once decided."""
        if self.state is not None:
            return self.state
        self.n += 1
        if outcome is None:
            self.k_high += 1
        elif outcome:
            self.k_low += 1
            self.k_high += 1
        up = log_evalue(self.k_low, self.n, self.up) if self.up else -math.inf
        down = log_evalue(self.k_high, self.n, self.down) if self.down else -math.inf
        self.log_e = max(self.log_e, up, down)
        if up >= self.threshold:
            self.state, self.log_e = ("PASS" if self.direction == "min" else "FAIL"), up
        elif down >= self.threshold:
            self.state, self.log_e = ("FAIL" if self.direction == "min" else "PASS"), down
        return self.state


class MeanTest:
    """One MEAN rule (with a declared range) by the betting capital at the threshold, fed one
    score at a time; the grid of bets fixed by ``horizon`` (the suite's size)."""

    def __init__(self, t: float, direction: str, value_range: tuple[float, float],
                 level: float, horizon: int) -> None:
        lo, hi = float(value_range[0]), float(value_range[1])
        self.lo, self.width = lo, hi - lo
        self.m = min(1.0, max(0.0, (t - lo) / (hi - lo)))
        self.direction = direction
        self.threshold = math.log(2.0 / _check_level(level))
        bets = Bets(max(1, horizon), level).values
        m = self.m
        self.up_bets = [min(b, TRUNCATION / m) if m > 0.0 else b for b in bets]
        self.down_bets = [min(b, TRUNCATION / (1.0 - m)) if m < 1.0 else b for b in bets]
        self.up = [0.0] * len(bets)
        self.down = [0.0] * len(bets)
        self.n = 0
        self.state: str | None = None
        self.log_e = 0.0

    def add(self, score: float | None) -> str | None:
        """Feed one score (None: missing, at the worst end of the range for each side)."""
        if self.state is not None:
            return self.state
        self.n += 1
        m = self.m
        low = 0.0 if score is None else min(1.0, max(0.0, (score - self.lo) / self.width))
        high = 1.0 if score is None else low
        # At m = 0 no score lies below the threshold: the side that shows the mean is above it
        # can only gain (any score above the bottom is evidence, and under its null, every
        # score at the bottom, its capital stays 1), and the other side never gains, so never
        # rejects. m = 1 the other way round.
        for g, lam in enumerate(self.up_bets):
            self.up[g] += math.log1p(lam * (low - m))
        for g, lam in enumerate(self.down_bets):
            self.down[g] += math.log1p(-lam * (high - m))
        up = _log_mean_exp(self.up)
        down = _log_mean_exp(self.down)
        self.log_e = max(self.log_e, up, down)
        if up >= self.threshold:
            self.state, self.log_e = ("PASS" if self.direction == "min" else "FAIL"), up
        elif down >= self.threshold:
            self.state, self.log_e = ("FAIL" if self.direction == "min" else "PASS"), down
        return self.state


def _log_mean_exp(sums: Sequence[float]) -> float:
    top = max(sums)
    return top + math.log(math.fsum([math.exp(s - top) for s in sums]) / len(sums))


_EDGE = 1e-9


def binary_confidence_sequence(
    lows: Sequence[float], highs: Sequence[float], level: float,
    margin: float = DEFAULT_MARGIN, floor: float = 0.0, ceiling: float = 1.0,
) -> tuple[float, float]:
    """The confidence sequence of a rate, by the same e-processes that decide its rules,
    over cases fed in order (``lows``: 1 for a pass, 0 otherwise; ``highs``: 1 for a pass or
    a missing case). Each E is an e-process for its own threshold t, so the set of t that
    neither side has rejected at any prefix covers the true rate at every n at once with
    probability at least ``level``; E+ falls and E- rises with t (checked on a grid in the
    tests), so each side's rejected set is an interval [0, L_n] or [U_n, 1].

    Returned: the intersection over the prefixes whose length is a power of two and the
    last one (any subset of the prefixes gives a valid, if wider, sequence), and the
    ``floor`` and ``ceiling`` already known rejected: the thresholds of the rules that the
    same e-processes decided (a ``min: t`` that passed rejected every rate below t), so that
    a rule's decision and its metric's interval always agree."""
    threshold = math.log(2.0 / _check_level(level))
    lower, upper = max(0.0, floor), min(1.0, ceiling)
    k_low = k_high = 0
    last = len(lows)
    for n, (a, b) in enumerate(zip(lows, highs, strict=True), 1):
        k_low += int(a >= 0.5)
        k_high += int(b >= 0.5)
        if n != last and n & (n - 1):
            continue  # not a power of two, nor the last prefix

        def up(t: float, k: int = k_low, n: int = n) -> float:
            return log_evalue(k, n, binary_prior(t, +1, level, margin)) - threshold

        def down(t: float, k: int = k_high, n: int = n) -> float:
            return log_evalue(k, n, binary_prior(t, -1, level, margin)) - threshold

        probe = min(max(lower, _EDGE), 1.0 - _EDGE)
        if lower < 1.0 - _EDGE and up(probe) >= 0.0:
            lower = _bisect_bound(up, probe, 1.0 - _EDGE, rising=False)
        probe = min(max(upper, _EDGE), 1.0 - _EDGE)
        if upper > _EDGE and down(probe) >= 0.0:
            upper = _bisect_bound(down, _EDGE, probe, rising=True)
    return lower, max(lower, upper)


def _bisect_bound(f: Callable[[float], float], lo: float, hi: float, rising: bool) -> float:
    """The end of the region f >= 0 inside [lo, hi]: f falls with t (``rising`` False: the
    region is [lo, x], x returned) or rises (True: [x, hi]). The end returned lies inside
    the region, so the bound never claims a t that was not rejected."""
    if not rising and f(hi) >= 0.0:
        return hi
    if rising and f(lo) >= 0.0:
        return lo
    good, bad = (lo, hi) if not rising else (hi, lo)
    for _ in range(60):
        if abs(good - bad) <= 1e-10:
            break
        mid = 0.5 * (good + bad)
        if f(mid) >= 0.0:
            good = mid
        else:
            bad = mid
    return good


@dataclass(frozen=True)
class StoppingDistribution:
    """When a BINARY rule's sequential test decides, if every case passes with probability
    ``rate``: the chance it has decided by each n (``decided_by[n]``), of it deciding PASS
    and FAIL within the horizon, and the median and mean number of cases to a decision
    (None when it is not decided within the horizon half the time)."""

    decided_by: list[float]
    pass_probability: float
    fail_probability: float
    median: int | None
    mean_within: float | None


def stopping_distribution(
    t: float, direction: str, rate: float, horizon: int, level: float,
    margin: float = DEFAULT_MARGIN,
) -> StoppingDistribution:
    """Exact (no simulation): the distribution of the number of cases a BINARY rule's test
    needs when the cases pass independently with probability ``rate``, up to ``horizon``
    cases, by dynamic programming over the passes so far among the paths still undecided."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"a rate in [0, 1] is needed, got {rate!r}")
    up = binary_cuts(binary_prior(t, +1, level, margin), horizon, level) if t < 1.0 else None
    down = binary_cuts(binary_prior(t, -1, level, margin), horizon, level) if t > 0.0 else None
    # alive[j]: P(base + j passes so far, and undecided). Only the k between the two cuts
    # can be undecided, so the list stays about as wide as the gap between them.
    alive = [1.0]
    base = 0
    decided = [0.0]
    above = below = 0.0
    q = 1.0 - rate
    for n in range(1, horizon + 1):
        nxt = [0.0] * (len(alive) + 1)
        for j, w in enumerate(alive):
            if w:
                nxt[j] += w * q
                nxt[j + 1] += w * rate
        hi = up[n] if up is not None else n + 1
        lo = down[n] if down is not None else -1
        # k >= hi decides from above, k <= lo from below; keep base + j in (lo, hi).
        start = max(0, lo + 1 - base)
        stop = min(len(nxt), hi - base)
        above += math.fsum(nxt[max(stop, 0):])
        below += math.fsum(nxt[:min(start, len(nxt))])
        if stop <= start:
            alive = []
            decided.append(above + below)
            break
        alive = nxt[start:stop]
        base += start
        decided.append(above + below)
    decided += [decided[-1]] * (horizon + 1 - len(decided))
    passed, failed = (above, below) if direction == "min" else (below, above)
    median = next((n for n, p in enumerate(decided) if p >= 0.5), None)
    total = decided[-1]
    mean = None
    if total > 0.0:
        mean = math.fsum((decided[n] - decided[n - 1]) * n for n in range(1, len(decided)))
        mean /= total
    return StoppingDistribution(decided, passed, failed, median, mean)


@dataclass(frozen=True)
class StoppingSummary:
    """When a sequential test decides, in cases: the median, the mean (each run's count
    capped at ``horizon``), the 90th percentile (None beyond the horizon), the share of
    runs decided within the horizon, and the share that PASS. ``method`` says how it was
    computed (exact, or simulated with its number of runs and seed)."""

    median: int | None
    mean: float
    q90: int | None
    decided: float
    pass_share: float
    method: str


def mean_stopping(
    t: float, direction: str, value_range: tuple[float, float], scores: Sequence[float],
    level: float, bets_horizon: int, horizon: int, runs: int = 400, seed: int = 0,
) -> StoppingSummary:
    """Simulated: the number of cases a MEAN rule's betting test (:class:`MeanTest`, its
    bets fixed by ``bets_horizon``) needs when each case's score is drawn with replacement
    from ``scores`` (the observed scores: the alternative "the scores to come resemble
    those seen"), over ``runs`` runs of at most ``horizon`` cases, from a
    ``random.Random(seed)``: the same answer every time it is asked."""
    import random

    if not scores:
        raise ValueError("no observed score to draw from")
    rng = random.Random(seed)
    pool = [float(s) for s in scores]
    counts: list[int] = []
    passes = 0
    for _ in range(runs):
        test = MeanTest(t, direction, value_range, level, bets_horizon)
        n = horizon + 1  # undecided within the horizon
        for i in range(1, horizon + 1):
            if test.add(pool[rng.randrange(len(pool))]) is not None:
                n = i
                passes += test.state == "PASS"
                break
        counts.append(n)
    return _summary(counts, horizon, passes,
                    f"simulated: {runs} runs drawing the observed scores with replacement"
                    f" (seed {seed})")


def count_stopping(max_failures: int, failure_rate: float, horizon: int) -> StoppingSummary:
    """Exact (no simulation): the number of cases an ``observed_count`` rule of a
    sequential run needs when each case fails with probability ``failure_rate``
    independently, in a suite of ``horizon`` cases: it FAILs at failure ``max_failures +
    1``, and PASSes only at the suite's last case, so the count is min(T, horizon) with T
    negative binomial; P(count > n) = P(Binomial(n, rate) <= max_failures) for n < horizon,
    summed by dynamic programming over the failures so far."""
    if not 0.0 <= failure_rate <= 1.0:
        raise ValueError(f"a rate in [0, 1] is needed, got {failure_rate!r}")
    q = failure_rate
    alive = [1.0] + [0.0] * max_failures  # alive[j]: j failures so far, not yet failed
    survive = [1.0]  # survive[n] = P(count > n), n = 0 .. horizon - 1
    failed = 0.0
    for _n in range(1, horizon):
        failed += alive[max_failures] * q
        for j in range(max_failures, 0, -1):
            alive[j] = alive[j] * (1.0 - q) + alive[j - 1] * q
        alive[0] *= 1.0 - q
        survive.append(math.fsum(alive))
    failed += alive[max_failures] * q  # the suite's last case may still FAIL it
    mean = math.fsum(survive)
    median = next((n for n, s in enumerate(survive) if 1.0 - s >= 0.5), horizon)
    q90 = next((n for n, s in enumerate(survive) if 1.0 - s >= 0.9), horizon)
    return StoppingSummary(median, mean, q90, 1.0, 1.0 - failed,
                           "exact: the negative binomial time of the failure over the budget,"
                           " capped at the suite's size")


def _summary(counts: list[int], horizon: int, passes: int, method: str) -> StoppingSummary:
    ordered = sorted(counts)
    runs = len(ordered)

    def quantile(p: float) -> int | None:
        n = ordered[min(runs - 1, math.ceil(p * runs) - 1)]
        return n if n <= horizon else None

    decided = sum(1 for n in ordered if n <= horizon)
    mean = math.fsum(min(n, horizon) for n in ordered) / runs
    return StoppingSummary(quantile(0.5), mean, quantile(0.9), decided / runs,
                           passes / runs, method)
