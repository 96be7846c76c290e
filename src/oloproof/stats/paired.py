"""Intervals for the paired difference candidate - baseline over cases both runs observed."""

from __future__ import annotations

import math
from collections.abc import Sequence

from oloproof._records import dataclass
from oloproof.stats.intervals import (
    Interval,
    _check_level,
    _unscaled,
    _wilson_bounds,
    student_t_mean,
)


def _z_quantile(p: float) -> float:
    """The exact standard normal quantile. ``statistics`` is imported here, not at the top:
    it costs more start-up than a cached rerun of a small suite takes, and only deciding a
    comparison or sizing a rule needs it."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def z_upper(tail: float) -> float:
    """The normal quantile with upper tail ``tail``: -Φ⁻¹(tail). Not Φ⁻¹(1 - tail), which
    loses digits for a small tail and at a level of 0.9999999999999999 asks for Φ⁻¹(1.0)."""
    return -_z_quantile(tail)


__all__ = [
    "NEWCOMBE_PAIRED",
    "PAIRED_BETTING",
    "PAIRED_T",
    "PairedDifference",
    "newcombe_phi",
    "paired_betting_difference",
    "paired_mean_difference",
    "paired_proportion_difference",
]

NEWCOMBE_PAIRED = "Newcombe hybrid score (paired), 1998"
PAIRED_T = "paired Student t, 1908"
PAIRED_BETTING = "Waudby-Smith & Ramdas betting on the paired differences, 2023"


@dataclass(frozen=True)
class PairedDifference:
    """A paired difference candidate - baseline.

    ``estimate`` is None when no pair was observed; ``interval`` is None when it cannot be
    computed (no pair, or fewer than two pairs for the t interval). ``sd`` is the standard
    deviation of the per-case differences (MEAN metrics only; None otherwise).
    """

    estimate: float | None
    interval: Interval | None
    n: int
    method: str
    sd: float | None = None


def newcombe_phi(both_pass: int, cand_only: int, base_only: int, both_fail: int) -> float:
    """Newcombe's corrected estimate of the correlation between the two paired proportions.

    With the 2x2 table a = both_pass, b = cand_only, c = base_only, d = both_fail and
    n = a + b + c + d, phi = (ad - bc) / sqrt((a+b)(c+d)(a+c)(b+d)), where a positive
    numerator is first reduced by n/2 (and set to 0 when it does not exceed n/2); a negative
    one is used as it is. phi is 0 when any margin is empty (Newcombe 1998, method 10).
    """
    a, b, c, d = both_pass, cand_only, base_only, both_fail
    n = a + b + c + d
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        return 0.0
    cross = a * d - b * c
    if cross > n / 2:
        numerator = cross - n / 2
    elif cross >= 0:
        numerator = 0.0
    else:
        numerator = float(cross)
    return numerator / math.sqrt(margins)


def _newcombe_bounds(
    both_pass: int, cand_only: int, base_only: int, both_fail: int, z: float
) -> tuple[float, float]:
    n = both_pass + cand_only + base_only + both_fail
    cand_passes = both_pass + cand_only
    base_passes = both_pass + base_only
    p1 = cand_passes / n
    p2 = base_passes / n
    l1, u1 = _wilson_bounds(cand_passes, n, z)
    l2, u2 = _wilson_bounds(base_passes, n, z)
    phi = newcombe_phi(both_pass, cand_only, base_only, both_fail)
    estimate = (cand_only - base_only) / n
    d_low1, d_up2 = p1 - l1, u2 - p2
    d_low2, d_up1 = p2 - l2, u1 - p1
    below = d_low1 * d_low1 - 2.0 * phi * d_low1 * d_up2 + d_up2 * d_up2
    above = d_low2 * d_low2 - 2.0 * phi * d_low2 * d_up1 + d_up1 * d_up1
    lower = estimate - math.sqrt(max(below, 0.0))
    upper = estimate + math.sqrt(max(above, 0.0))
    return max(lower, -1.0), min(upper, 1.0)


def paired_proportion_difference(
    both_pass: int,
    cand_only: int,
    base_only: int,
    both_fail: int,
    level: float = 0.95,
) -> PairedDifference:
    """Difference of paired pass rates, candidate - baseline, with Newcombe's hybrid score CI.

    Method: Newcombe, R. G. (1998), "Improved confidence intervals for the difference between
    binomial proportions based on paired data", Statistics in Medicine 17:2635-2650,
    method 10. Each marginal pass rate p1 = (a+b)/n (candidate) and p2 = (a+c)/n (baseline)
    gets a Wilson score interval [l1, u1], [l2, u2] (no continuity correction), and with the
    estimate D = (b - c)/n and the corrected correlation phi (:func:`newcombe_phi`):

        lower = D - sqrt((p1-l1)^2 - 2 phi (p1-l1)(u2-p2) + (u2-p2)^2)
        upper = D + sqrt((p2-l2)^2 - 2 phi (p2-l2)(u1-p1) + (u1-p1)^2)

    The z is the exact normal quantile at 1 - alpha/2 (not Acklam's approximation, which is
    kept only for the provisional figures). No pair at all gives estimate and interval None.
    """
    counts = (both_pass, cand_only, base_only, both_fail)
    if any(c < 0 for c in counts):
        raise ValueError(f"paired counts must be >= 0, got {counts}")
    alpha = _check_level(level)
    n = sum(counts)
    if n == 0:
        return PairedDifference(estimate=None, interval=None, n=0, method=NEWCOMBE_PAIRED)
    z = z_upper(0.5 * alpha)
    lower, upper = _newcombe_bounds(both_pass, cand_only, base_only, both_fail, z)
    return PairedDifference(
        estimate=(cand_only - base_only) / n,
        interval=Interval(lower, upper),
        n=n,
        method=NEWCOMBE_PAIRED,
    )


def paired_mean_difference(
    cand: Sequence[float], base: Sequence[float], level: float = 0.95
) -> PairedDifference:
    """Mean of the per-case differences cand[i] - base[i] with a paired t interval.

    Method: Student (1908), Biometrika 6(1):1-25, applied to the differences:
    mean(d) +/- t(1-alpha/2, n-1) * sd(d) / sqrt(n). Fewer than two pairs give interval None.
    """
    if len(cand) != len(base):
        raise ValueError(f"paired scores differ in length: {len(cand)} and {len(base)}")
    differences = [float(c) - float(b) for c, b in zip(cand, base, strict=True)]
    k = 0
    if not all(map(math.isfinite, differences)):
        # A difference beyond the largest float (1.7e308 against -1.7e308): the halves
        # of the differences, exact, and their summary scaled back where it can be.
        k = 1
        differences = [0.5 * float(c) - 0.5 * float(b) for c, b in zip(cand, base, strict=True)]
    summary = _unscaled(student_t_mean(differences, level), k)
    return PairedDifference(
        estimate=summary.mean,
        interval=summary.interval,
        n=summary.n,
        method=PAIRED_T,
        sd=summary.sd,
    )


def paired_betting_difference(
    differences: Sequence[tuple[float, float]],
    value_range: tuple[float, float],
    level: float = 0.95,
) -> Interval | None:
    """The betting interval (stats/betting.py) on the mean paired difference candidate -
    baseline of a metric whose scores lie in ``value_range`` [lo, hi]: each difference lies
    in [-(hi - lo), hi - lo], so the interval is valid at every number of pairs, for every
    joint distribution of the two scores (each side misses at most (1 - level)/2).

    ``differences``: each pair's difference as a range [a, b] (a = b for a pair observed in
    both runs; a pair whose case is missing in one run: every difference the missing score
    could give), in the canonical case order. The interval contains the interval of every
    choice inside those ranges. None when there is no pair (or the range is wider than the
    largest float)."""
    from oloproof.stats.betting import betting_ranges

    if not differences:
        return None
    lo, hi = float(value_range[0]), float(value_range[1])
    width = hi - lo
    if not math.isfinite(width):
        return None  # a range wider than the largest float: no difference can be bounded
    clipped = [(max(-width, min(width, a)), max(-width, min(width, b))) for a, b in differences]
    return betting_ranges(clipped, (-width, width), level)
