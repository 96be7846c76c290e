"""A rate measured with repeated trials of every case (clustered outcomes): its estimate, and
how much the trials of a case resemble each other.

With k trials of each of n cases, the k·n outcomes are not independent draws: the trials of
one case share its input, so a case that is hard fails most of its trials. The metric is the
mean over cases of each case's pass fraction, and its interval treats the cases as clusters.
An exact binomial interval on the k·n outcomes would be too narrow whenever the cases differ.

**What decides a rule** (since issue 33) is not here: it is the betting interval of
:mod:`oloproof.stats.betting` on the cases' pass fractions (policy/decide.py), which is
monotone in every trial's outcome and valid at every n. The Korn–Graubard rule below, with its
case-level fallback, decided before; it was neither (one more passing trial could lower its
lower bound: the switch between its two methods, and Korn–Graubard's own variance estimate,
both move it the wrong way). It is kept for what a run reports about its trials: the effective
number of cases, the design effect and the intra-class correlation
(:class:`ClusteredRate`), and as the comparison in docs/repeated-trials.md.

Method, :func:`clustered_rate`:

- **Korn–Graubard** (Korn, E. L. & Graubard, B. I. (1998), "Confidence intervals for
  proportions with small expected number of positive counts estimated from survey data",
  Survey Methodology 24(2):193-201): a Clopper–Pearson interval on an effective sample size
  n* = p(1 - p) / v, where p is the mean of the per-case pass fractions and v = s²/n its
  cluster-robust variance (s² the sample variance of the per-case fractions), with the
  degrees-of-freedom adjustment n* · (z / t(n - 1))². n* is kept between that adjusted n (a
  design effect of k: the trials of a case add nothing) and the number of trials (a design
  effect of 1: trials as independent as separate cases). The Beta quantiles take the real
  parameters x = p·n* and n* - x + 1.
- **Case-level exact fallback**: a variance estimated from a handful of cases is not to be
  trusted (with every case all-pass it is 0, and near 0 or 1 the few cases that differ
  decide everything). When fewer than ``MIN_INFORMATIVE_CASES`` (10) cases failed at least
  one trial, or fewer than 10 passed at least one, the interval is Clopper–Pearson on the n
  cases, with the sum of their pass fractions as the (real) count of successes. A per-case
  fraction in [0, 1] with mean μ has variance at most μ(1 - μ), that of a single pass or
  fail, so this interval is conservative: the k trials of a case count as one case.

The simulated coverage of this rule (tests/stats/test_stats_trials.py, docs/repeated-trials.md)
is at least the nominal level, within Monte Carlo error, over beta-binomial suites with
n = 5..50 cases, k = 2..10 trials, suite rates 0.5..0.95 and intra-class correlations 0..0.6.
Korn–Graubard alone, without the fallback, covered as little as 91% at a rate of 0.95 with
strong case effects.

Missing trials are bounded as missing cases are (SPEC §4): the lower bound is computed with
every missing trial a fail, the upper bound with every missing trial a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from oloproof._records import dataclass
from oloproof.stats._special import beta_ppf, t_isf
from oloproof.stats.intervals import CASE_EXACT, KORN_GRAUBARD, Interval

__all__ = [
    "CASE_EXACT",
    "KORN_GRAUBARD",
    "MIN_INFORMATIVE_CASES",
    "ClusteredRate",
    "clustered_rate",
    "clustered_rate_bounded",
    "design_effect",
    "normal_isf",
]

#: Below this many cases on the minority side (cases with a failed trial, or with a passed
#: one), the cluster variance is not trusted and the case-level exact interval is used.
MIN_INFORMATIVE_CASES = 10


def normal_isf(tail: float) -> float:
    """The standard normal quantile with upper tail ``tail`` (``statistics.NormalDist``, as
    every deciding method uses; see stats/normal.py)."""
    from statistics import NormalDist  # only for runs with trials (start-up, issue 16)

    return -NormalDist().inv_cdf(tail)


@dataclass(frozen=True)
class ClusteredRate:
    """A rate measured over repeated trials: the mean of per-case pass fractions.

    ``estimate`` is the mean over cases with at least one observed trial of their observed
    pass fraction (None when there are none). ``interval`` holds for every completion of the
    missing trials. ``method`` is ``korn_graubard`` or ``case_exact`` (the lower and upper
    bounds are computed on two completions and may use different methods: then the less
    precise one is named). ``effective_cases`` is n* of the observed trials (None when it
    cannot be estimated); ``design_effect`` is v / (p(1 - p) / T), the variance of the
    estimate over that of T independent trials, and ``icc`` the intra-class correlation it
    implies, (deff - 1) / (k̄ - 1), both on the observed trials (None when p is 0 or 1).
    """

    estimate: float | None
    interval: Interval
    cases: int
    trials: int
    missing_trials: int
    method: str
    effective_cases: float | None
    design_effect: float | None
    icc: float | None


def _cp_real(x: float, n: float, half: float) -> tuple[float, float]:
    """Clopper–Pearson with a real count: Beta(x, n - x + 1) and Beta(x + 1, n - x)."""
    lower = 0.0 if x <= 0.0 else beta_ppf(half, x, n - x + 1.0)
    upper = 1.0 if x >= n else beta_ppf(1.0 - half, x + 1.0, n - x)
    return lower, upper


def _moments(fractions: Sequence[float]) -> tuple[float, float]:
    n = len(fractions)
    mean = math.fsum(fractions) / n
    ss = math.fsum((f - mean) ** 2 for f in fractions)
    return mean, ss / (n - 1) if n > 1 else 0.0


def clustered_rate(
    fractions: Sequence[float], trials: Sequence[int], level: float = 0.95
) -> tuple[Interval, str, float | None]:
    """The interval of the mean of per-case pass fractions: ``(interval, method, n*)``.

    ``fractions[i]`` is case i's pass fraction over its ``trials[i]`` trials. Korn–Graubard
    when at least ``MIN_INFORMATIVE_CASES`` cases failed a trial and as many passed one,
    else Clopper–Pearson on the n cases (see the module's notes). No case: [0, 1].
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must lie strictly between 0 and 1, got {level!r}")
    if len(fractions) != len(trials):
        raise ValueError("one trial count per case is needed")
    n = len(fractions)
    if n == 0:
        return Interval(0.0, 1.0), CASE_EXACT, None
    for f, k in zip(fractions, trials, strict=True):
        if not 0.0 <= f <= 1.0 or k < 1:
            raise ValueError(f"a pass fraction lies in [0, 1] over k >= 1 trials, got {f}, {k}")
    half = 0.5 * (1.0 - level)
    failed_some = sum(1 for f in fractions if f < 1.0)
    passed_some = sum(1 for f in fractions if f > 0.0)
    mean, s2 = _moments(fractions)
    if min(failed_some, passed_some) >= MIN_INFORMATIVE_CASES and s2 > 0.0:
        adjust = (normal_isf(half) / t_isf(half, n - 1)) ** 2
        n_eff = mean * (1.0 - mean) / (s2 / n) * adjust
        n_eff = min(max(n_eff, n * adjust), float(sum(trials)))
        lower, upper = _cp_real(mean * n_eff, n_eff, half)
        return Interval(lower, upper), KORN_GRAUBARD, n_eff
    lower, upper = _cp_real(mean * n, float(n), half)
    return Interval(lower, upper), CASE_EXACT, float(n)


def design_effect(fractions: Sequence[float], trials: Sequence[int]) -> tuple[float, float] | None:
    """``(deff, icc)`` of per-case pass fractions: deff = (s²/n) / (p(1 - p)/T), the variance
    of the mean over that of T independent trials; icc = (deff - 1) / (T/n - 1) clipped to
    [0, 1] (the correlation of two trials of one case under equal trial counts). None when it
    cannot be estimated (fewer than two cases, p at 0 or 1, or one trial per case)."""
    n = len(fractions)
    total = sum(trials)
    if n < 2 or total <= n:
        return None
    mean, s2 = _moments(fractions)
    if mean <= 0.0 or mean >= 1.0:
        return None
    deff = (s2 / n) / (mean * (1.0 - mean) / total)
    icc = (deff - 1.0) / (total / n - 1.0)
    return deff, min(1.0, max(0.0, icc))


def clustered_rate_bounded(
    cases: Sequence[tuple[int, int, int]], level: float = 0.95
) -> ClusteredRate:
    """The clustered rate of cases given as ``(passed, failed, missing)`` trial counts.

    A case with no trial at all (every trial excluded) is left out. A missing trial could
    have passed or failed: the lower bound is :func:`clustered_rate` with every missing
    trial a fail, the upper bound with every missing trial a pass, so missing trials only
    ever widen the interval. A case whose every trial is missing still counts, as 0 for the
    lower bound and 1 for the upper.
    """
    held = [(p, f, m) for p, f, m in cases if p + f + m > 0]
    if any(min(c) < 0 for c in held):
        raise ValueError("trial counts must be >= 0")
    trials = [p + f + m for p, f, m in held]
    low = [p / t for (p, _f, _m), t in zip(held, trials, strict=True)]
    high = [(p + m) / t for (p, _f, m), t in zip(held, trials, strict=True)]
    lo_iv, lo_method, _ = clustered_rate(low, trials, level)
    hi_iv, hi_method, _ = clustered_rate(high, trials, level)
    observed = [(p / (p + f), p + f) for p, f, _m in held if p + f > 0]
    estimate = math.fsum(x for x, _ in observed) / len(observed) if observed else None
    fractions = [x for x, _ in observed]
    counts = [t for _, t in observed]
    n_eff = None
    shape = None
    if observed:
        _iv, _method, n_eff = clustered_rate(fractions, counts, level)
        shape = design_effect(fractions, counts)
    method = KORN_GRAUBARD if lo_method == hi_method == KORN_GRAUBARD else CASE_EXACT
    return ClusteredRate(
        estimate=estimate,
        interval=Interval(lo_iv.lower, hi_iv.upper),
        cases=len(observed),
        trials=sum(counts),
        missing_trials=sum(m for _p, _f, m in held),
        method=method,
        effective_cases=n_eff,
        design_effect=None if shape is None else shape[0],
        icc=None if shape is None else shape[1],
    )
