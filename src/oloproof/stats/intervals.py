"""Confidence intervals for one run's metrics.

Every function here is pure: counts or values in, a small frozen dataclass out.

- BINARY metrics get the exact Clopper–Pearson interval, bounded for missing cases
  (:func:`clopper_pearson_bounded`).
- MEAN metrics get a Student-t interval, bounded for missing cases at the ends of the
  evaluator's declared range (:func:`student_t_mean_bounded`).
- The live view's provisional figures use the Wilson score interval with Acklam's z
  (:func:`wilson`); they are shown, never used to decide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from oloproof._records import dataclass
from oloproof.stats._special import _beta_quantile, beta_ppf, t_isf, t_ppf
from oloproof.stats.normal import Z95

__all__ = [
    "CASE_EXACT",
    "CLOPPER_PEARSON",
    "KORN_GRAUBARD",
    "STUDENT_T",
    "WILSON",
    "Interval",
    "MeanSummary",
    "beta_ppf",
    "clopper_pearson",
    "clopper_pearson_bounded",
    "mean_and_sd",
    "student_t_mean",
    "student_t_mean_bounded",
    "t_ppf",
    "wilson",
    "worst_case_t_bounds",
]

CLOPPER_PEARSON = "Clopper-Pearson exact, 1934"
STUDENT_T = "Student t, 1908"
WILSON = "Wilson score, 1927"
#: How a rate over repeated trials got its interval (``MetricSummary.interval_method``):
#: Korn–Graubard on the effective cases, or exact on the case level (stats/trials.py).
#: Here, not in stats/trials.py, so that naming one does not import the other.
KORN_GRAUBARD = "korn_graubard"
CASE_EXACT = "case_exact"


@dataclass(frozen=True)
class Interval:
    """A closed interval [lower, upper]."""

    lower: float
    upper: float

    @property
    def width(self) -> float:
        return self.upper - self.lower

    def contains(self, value: float) -> bool:
        return self.lower <= value <= self.upper


@dataclass(frozen=True)
class MeanSummary:
    """A MEAN metric: the mean of the observed scores and its interval.

    ``mean`` is None when nothing was observed; ``sd`` (the sample standard deviation, n - 1 in
    the denominator) is None below two observations; ``interval`` is None when it cannot be
    computed (fewer than two values; missing cases without a declared range, in which case
    ``unbounded_missing`` is True; or bounds beyond the largest float, ``overflow``).
    """

    mean: float | None
    sd: float | None
    n: int
    interval: Interval | None
    missing: int = 0
    unbounded_missing: bool = False
    method: str = STUDENT_T
    #: The interval (or the sd) lies beyond the largest float (scores near 1e308): it
    #: cannot be computed, and ``interval`` (or ``sd``) is None.
    overflow: bool = False


def _check_level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must lie strictly between 0 and 1, got {level!r}")
    return 1.0 - level


def _check_counts(k: int, n: int) -> None:
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")


# ------------------------------------------------------------------------- Clopper–Pearson


def _cp_lower(k: int, n: int, half_alpha: float) -> float:
    if k == 0:
        return 0.0
    if k == n:
        # Beta(n, 1) has CDF x^n.
        return math.exp(math.log(half_alpha) / n)
    return _beta_quantile(float(k), float(n - k + 1), half_alpha, 1.0 - half_alpha)[0]


def _cp_upper(k: int, n: int, half_alpha: float) -> float:
    if k == n:
        return 1.0
    if k == 0:
        # Beta(1, n) has upper tail (1 - x)^n.
        return -math.expm1(math.log(half_alpha) / n)
    return _beta_quantile(float(k + 1), float(n - k), 1.0 - half_alpha, half_alpha)[0]


def clopper_pearson(k: int, n: int, level: float = 0.95) -> Interval:
    """Exact binomial interval for k successes in n trials.

    Method: Clopper, C. J. & Pearson, E. S. (1934), "The use of confidence or fiducial limits
    illustrated in the case of the binomial", Biometrika 26(4):404-413. The limits are Beta
    quantiles: lower = B(alpha/2; k, n-k+1) (0 when k = 0), upper = B(1-alpha/2; k+1, n-k)
    (1 when k = n). Its coverage is at least ``level`` for every true proportion.
    ``n = 0`` gives [0, 1].
    """
    _check_counts(k, n)
    alpha = _check_level(level)
    if n == 0:
        return Interval(0.0, 1.0)
    half = 0.5 * alpha
    return Interval(_cp_lower(k, n, half), _cp_upper(k, n, half))


def clopper_pearson_bounded(k: int, n: int, missing: int, level: float = 0.95) -> Interval:
    """Clopper–Pearson interval for k passes among n observed, bounded for missing cases.

    Each of the ``missing`` cases could have passed or failed, so the interval has to hold
    whatever they would have been: lower = CP lower bound of k out of n + m (all missing
    failed), upper = CP upper bound of k + m out of n + m (all missing passed). Missing cases
    therefore only ever widen the interval. With m = 0 this is :func:`clopper_pearson`;
    0 observed and 30 missing gives [0, 1].

    Method: Clopper & Pearson (1934), Biometrika 26(4):404-413, applied at the two extreme
    completions of the missing outcomes.
    """
    _check_counts(k, n)
    if missing < 0:
        raise ValueError(f"missing must be >= 0, got {missing}")
    alpha = _check_level(level)
    total = n + missing
    if total == 0:
        return Interval(0.0, 1.0)
    half = 0.5 * alpha
    return Interval(_cp_lower(k, total, half), _cp_upper(k + missing, total, half))


# ---------------------------------------------------------------------------------- Wilson


def _wilson_bounds(k: int, n: int, z: float) -> tuple[float, float]:
    # This operation order reproduces the published provisional figures bit for bit (other
    # algebraically equal forms differ in the last one or two bits).
    p = k / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denominator
    half_width = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    return max(0.0, centre - half_width), min(1.0, centre + half_width)


def wilson(k: int, n: int, z: float = Z95) -> Interval | None:
    """Wilson score interval for k successes in n trials, without continuity correction.

    Method: Wilson, E. B. (1927), "Probable inference, the law of succession, and statistical
    inference", JASA 22(158):209-212. The default z is Acklam's approximation at 0.975
    (1.959963986120195), the z of the provisional figures. The bounds are clamped to [0, 1].
    Returns None when ``n = 0`` (there is no estimate to put an interval around).
    """
    _check_counts(k, n)
    if n == 0:
        return None
    lower, upper = _wilson_bounds(k, n, z)
    return Interval(lower, upper)


# ----------------------------------------------------------------------------- Student t


def _mean_and_ss(values: Sequence[float], extra: float, copies: int) -> tuple[float, float, int]:
    """Mean and sum of squared deviations of ``values`` plus ``copies`` copies of ``extra``
    (of magnitude below :data:`_LARGE`: :func:`_scale_exponent`)."""
    count = len(values) + copies
    mean = math.fsum([*values, extra * copies]) / count
    ss = math.fsum([(x - mean) ** 2 for x in values]) + copies * (extra - mean) ** 2
    return mean, ss, count


# Below this magnitude, the sums and squares of a t interval (over up to 2**60 values) stay
# far from the largest float (about 2**1024); a score beyond it is scaled down first.
_LARGE = 2.0**400


def _scale_exponent(*values: float) -> int:
    """0 for ordinary values; else the power of two k such that every value times 2**-k
    lies in (-1, 1): a t interval is computed on those, then scaled back by 2**k. Scaling
    by a power of two is exact, and so is every step of the interval with it (sums,
    squares, square roots, quotients: the same rounding, k bits up), so the result is the
    one an unbounded float would give, wherever it is representable."""
    largest = max(map(abs, values), default=0.0)
    return 0 if largest < _LARGE else math.frexp(largest)[1]


def _scaled_back(x: float | None, k: int) -> float | None:
    """``x * 2**k``, or None when that lies beyond the largest float."""
    if x is None or k == 0:
        return x
    try:
        return math.ldexp(x, k)
    except OverflowError:
        return None


def _unscaled(summary: MeanSummary, k: int) -> MeanSummary:
    """A summary computed on values times 2**-k, scaled back (:func:`_scale_exponent`);
    ``overflow`` when its mean (of differences only: a mean lies between its values), sd
    or interval lies beyond the largest float."""
    if k == 0:
        return summary
    sd = _scaled_back(summary.sd, k)
    interval = summary.interval
    if interval is not None:
        lower, upper = _scaled_back(interval.lower, k), _scaled_back(interval.upper, k)
        interval = None if lower is None or upper is None else Interval(lower, upper)
    mean = _scaled_back(summary.mean, k)
    overflow = (
        (mean is None and summary.mean is not None)
        or (sd is None and summary.sd is not None)
        or (interval is None and summary.interval is not None)
    )
    return MeanSummary(
        mean=mean, sd=sd, n=summary.n, interval=interval,
        missing=summary.missing, unbounded_missing=summary.unbounded_missing,
        method=summary.method, overflow=overflow,
    )


def mean_and_sd(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean of finite ``values`` (None when there is none) and their sample standard
    deviation (n - 1 in the denominator; None below two values, or beyond the largest
    float), computed without overflow whatever their size."""
    summary = _unscaled(*_summary(list(values)))
    return summary.mean, summary.sd


def _summary(xs: list[float]) -> tuple[MeanSummary, int]:
    """The mean and sd of ``xs`` on the scale of :func:`_scale_exponent`, and its k."""
    k = _scale_exponent(*xs)
    if k:
        xs = [math.ldexp(x, -k) for x in xs]
    n = len(xs)
    if n == 0:
        return MeanSummary(mean=None, sd=None, n=0, interval=None), k
    mean, ss, _ = _mean_and_ss(xs, 0.0, 0)
    sd = math.sqrt(ss / (n - 1)) if n >= 2 else None
    return MeanSummary(mean=mean, sd=sd, n=n, interval=None), k


def _check_values(values: Sequence[float]) -> list[float]:
    out = [float(v) for v in values]
    for v in out:
        if not math.isfinite(v):
            raise ValueError(f"scores must be finite numbers, got {v!r}")
    return out


def student_t_mean(values: Sequence[float], level: float = 0.95) -> MeanSummary:
    """Mean of the values with a Student-t interval: mean +/- t(1-alpha/2, n-1) * s / sqrt(n).

    Method: "Student" (W. S. Gosset, 1908), "The probable error of a mean", Biometrika
    6(1):1-25. ``s`` is the sample standard deviation (n - 1 denominator). The interval is
    None below two values. Its coverage is exact for normal scores and approximate otherwise
    (see docs/statistics.md for simulated coverage on bounded scores).
    """
    alpha = _check_level(level)
    summary, k = _summary(_check_values(values))
    mean, sd, n = summary.mean, summary.sd, summary.n
    if mean is None or sd is None:
        return _unscaled(summary, k)
    half = t_isf(0.5 * alpha, n - 1) * sd / math.sqrt(n)
    return _unscaled(
        MeanSummary(mean=mean, sd=sd, n=n, interval=Interval(mean - half, mean + half)), k
    )


def _combined(
    count_a: int, mean_a: float, ss_a: float, count_b: int, mean_b: float, ss_b: float
) -> tuple[float, float, int]:
    """Mean and sum of squared deviations of two groups pooled (Chan et al., 1979)."""
    count = count_a + count_b
    if count_b == 0:
        return mean_a, ss_a, count
    if count_a == 0:
        return mean_b, ss_b, count
    delta = mean_b - mean_a
    mean = mean_a + delta * count_b / count
    return mean, ss_a + ss_b + delta * delta * count_a * count_b / count, count


def worst_case_t_bounds(
    count: int,
    mean: float,
    ss: float,
    missing: int,
    low: float,
    high: float,
    level: float,
) -> tuple[float, float]:
    """The smallest t lower bound and the largest t upper bound over every completion.

    ``count`` observed values with mean ``mean`` and sum of squared deviations ``ss``, plus
    ``missing`` values each anywhere in [low, high]. A completion x gives the t interval
    mean(x) -/+ c * sd(x) with c = t(1-alpha/2, N-1)/sqrt(N) fixed (N = count + missing).
    mean(x) is linear in x and sd(x) = ||x - mean(x)|| / sqrt(N-1) is a norm of a linear map,
    so convex; the lower bound mean - c*sd is therefore concave and the upper bound
    mean + c*sd convex in the missing values. A concave function reaches its minimum over a
    box at a vertex, and a convex one its maximum: every missing value at low or high. The
    observed values are fixed and the missing ones exchangeable, so the vertices differ only
    in j, the number of missing values at ``high`` (0..missing), and both extremes are found
    exactly by trying every j. So [min lower, max upper] is the smallest interval that
    contains the t interval of every completion.
    """
    alpha = _check_level(level)
    total = count + missing
    if total < 2:
        raise ValueError("a t interval needs at least two values")
    factor = t_isf(0.5 * alpha, total - 1) / math.sqrt(total)
    lowest = math.inf
    highest = -math.inf
    for j in range(missing + 1):
        rest = missing - j
        mean_b = (j * high + rest * low) / missing if missing else 0.0
        ss_b = j * (high - mean_b) ** 2 + rest * (low - mean_b) ** 2 if missing else 0.0
        m, ss_all, _ = _combined(count, mean, ss, missing, mean_b, ss_b)
        half = factor * math.sqrt(max(ss_all, 0.0) / (total - 1))
        lowest = min(lowest, m - half)
        highest = max(highest, m + half)
    return lowest, highest


def student_t_mean_bounded(
    values: Sequence[float],
    missing: int,
    value_range: tuple[float, float] | None,
    level: float = 0.95,
) -> MeanSummary:
    """Student-t interval for a MEAN metric, bounded for missing cases.

    A missing case could have scored anything in the evaluator's declared range [lo, hi], so
    the interval is the worst case over every completion of the missing scores: its lower
    bound is the smallest t lower bound and its upper bound the largest t upper bound that
    any completion gives (:func:`worst_case_t_bounds`, exact: the extremes lie at the
    completions with each missing score at lo or hi). It therefore contains the t interval
    of every completion. Nothing is clipped: an observed score outside the range is refused
    upstream (the evaluator's outcome becomes missing), and the interval is what the t
    method gives.

    ``mean`` stays the mean of the observed values only. Without a declared range and with
    missing cases no honest bound exists: the interval is None and ``unbounded_missing`` is
    True (the policy reports ``missing_cases_unbounded``). With fewer than two values in a
    completion (n + missing < 2) the interval is None, as for :func:`student_t_mean`.

    Method: Student (1908), Biometrika 6(1):1-25, maximised over the completions.
    """
    if missing < 0:
        raise ValueError(f"missing must be >= 0, got {missing}")
    _check_level(level)
    observed = student_t_mean(values, level)
    if value_range is None or missing == 0:
        if missing == 0:
            return observed
        return MeanSummary(
            mean=observed.mean,
            sd=observed.sd,
            n=observed.n,
            interval=None,
            missing=missing,
            unbounded_missing=True,
        )
    lo, hi = float(value_range[0]), float(value_range[1])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise ValueError(f"value_range must be finite with low <= high, got {value_range!r}")
    xs = _check_values(values)
    interval: Interval | None = None
    overflow = observed.overflow
    if len(xs) + missing >= 2:
        k = _scale_exponent(*xs, lo, hi)
        if k:
            xs = [math.ldexp(x, -k) for x in xs]
        mean, ss, count = _mean_and_ss(xs, 0.0, 0) if xs else (0.0, 0.0, 0)
        lower, upper = worst_case_t_bounds(
            count, mean, ss, missing, math.ldexp(lo, -k), math.ldexp(hi, -k), level
        )
        low, high = _scaled_back(lower, k), _scaled_back(upper, k)
        if low is None or high is None:
            overflow = True
        else:
            interval = Interval(low, high)
    return MeanSummary(
        mean=observed.mean,
        sd=observed.sd,
        n=observed.n,
        interval=interval,
        missing=missing,
        overflow=overflow,
    )
