"""How often a judge agrees with a person: a 2x2 table (pass/fail judges) or pairs of
scores (scored judges), and what they say.

Pure functions on counts and scores.

- For the proportions of a pass/fail judge (agreement, sensitivity, specificity) the
  interval is exact: Clopper-Pearson.
- Cohen's kappa has no exact interval; it gets the large-sample one of Fleiss, Cohen and
  Everitt (1969), "Large sample standard errors of kappa and weighted kappa",
  Psychological Bulletin 72(5):323-327, the one statsmodels' ``cohens_kappa`` reports
  (checked against it in tests/stats/), clamped to kappa's range [-1, 1].
- A scored judge against a person: the quadratic-weighted kappa (Cohen 1968, "Weighted
  kappa", Psychological Bulletin 70(4):213-220) with the same large-sample interval
  (:func:`quadratic_weighted_kappa`), and the mean absolute difference with an interval
  valid for bounded differences at every n (:func:`mean_abs_diff`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from oloproof._records import dataclass
from oloproof.stats._special import betainc
from oloproof.stats.intervals import Interval, clopper_pearson

__all__ = [
    "KAPPA_METHOD",
    "MEAN_ABS_DIFF_METHOD",
    "WEIGHTED_KAPPA_METHOD",
    "Agreement",
    "Proportion",
    "ScoreAgreement",
    "agreement",
    "cohens_kappa",
    "labels_to_settle",
    "mean_abs_diff",
    "mean_abs_diff_worst",
    "quadratic_weighted_kappa",
    "score_agreement",
]

KAPPA_METHOD = "Fleiss, Cohen and Everitt (1969), large-sample, clamped to [-1, 1]"
WEIGHTED_KAPPA_METHOD = (
    "quadratic weights; Fleiss, Cohen and Everitt (1969), large-sample, clamped to [-1, 1]"
)
MEAN_ABS_DIFF_METHOD = "Hoeffding (1963), valid for bounded differences at every n"


@dataclass(frozen=True)
class Proportion:
    """``k`` of ``n``, its estimate and its Clopper-Pearson interval (None when n = 0)."""

    k: int
    n: int
    estimate: float | None
    interval: Interval | None


@dataclass(frozen=True)
class Agreement:
    """A judge against a person on the same cases.

    ``both_pass``: the judge and the person pass the case; ``judge_only``: the judge
    passes what the person fails; ``person_only``: the person passes what the judge
    fails; ``both_fail``. Sensitivity is P(judge passes | person passes), specificity
    P(judge fails | person fails).
    """

    both_pass: int
    judge_only: int
    person_only: int
    both_fail: int
    level: float
    agreement: Proportion
    sensitivity: Proportion
    specificity: Proportion
    kappa: float | None
    kappa_interval: Interval | None

    @property
    def n(self) -> int:
        return self.both_pass + self.judge_only + self.person_only + self.both_fail


def _proportion(k: int, n: int, level: float) -> Proportion:
    if n == 0:
        return Proportion(k, n, None, None)
    return Proportion(k, n, k / n, clopper_pearson(k, n, level))


def _z(level: float) -> float:
    return -NormalDist().inv_cdf((1 - level) / 2)  # 1 - (1 - level) / 2 can round to 1


def _clamped(centre: float, half: float) -> Interval:
    """``centre -/+ half`` inside kappa's range [-1, 1]: a normal interval knows no range,
    and a bound beyond 1 (``0.60 [-0.07, 1.27]``) says nothing the range does not."""
    return Interval(max(-1.0, centre - half), min(1.0, centre + half))


def cohens_kappa(
    both_pass: int, judge_only: int, person_only: int, both_fail: int, level: float = 0.95
) -> tuple[float | None, Interval | None]:
    """Cohen's kappa and its large-sample interval (Fleiss, Cohen and Everitt, 1969).

    None when kappa is undefined (chance agreement is 1: both raters gave one answer
    only); the interval is None when its variance is not positive. The interval is the
    method's, kappa -/+ z * se, clamped to [-1, 1] (kappa's range).
    """
    n = both_pass + judge_only + person_only + both_fail
    if n == 0:
        return None, None
    table = ((both_pass, judge_only), (person_only, both_fail))
    p = [[cell / n for cell in row] for row in table]
    rows = [sum(row) for row in p]  # the judge's margins
    cols = [p[0][j] + p[1][j] for j in range(2)]  # the person's margins
    observed = p[0][0] + p[1][1]
    expected = rows[0] * cols[0] + rows[1] * cols[1]
    if expected >= 1.0:
        return None, None
    kappa = (observed - expected) / (1 - expected)
    term_a = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in range(2))
    term_b = (1 - kappa) ** 2 * sum(
        p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j
    )
    term_c = (kappa - expected * (1 - kappa)) ** 2
    variance = (term_a + term_b - term_c) / (1 - expected) ** 2 / n
    if not variance > 0:
        return kappa, None
    return kappa, _clamped(kappa, _z(level) * math.sqrt(variance))


def agreement(
    both_pass: int, judge_only: int, person_only: int, both_fail: int, level: float = 0.95
) -> Agreement:
    """The agreement statistics of a judge against a person at ``level``."""
    for count in (both_pass, judge_only, person_only, both_fail):
        if count < 0:
            raise ValueError("counts must be non-negative")
    n = both_pass + judge_only + person_only + both_fail
    kappa, kappa_interval = cohens_kappa(both_pass, judge_only, person_only, both_fail, level)
    return Agreement(
        both_pass, judge_only, person_only, both_fail, level,
        agreement=_proportion(both_pass + both_fail, n, level),
        sensitivity=_proportion(both_pass, both_pass + person_only, level),
        specificity=_proportion(both_fail, judge_only + both_fail, level),
        kappa=kappa, kappa_interval=kappa_interval,
    )


# ----------------------------------------------------------------- how many labels settle it

# Within this relative distance of alpha/2, the binomial tail and the Clopper-Pearson bound
# could disagree in their last digits; the bound (what decides) is asked then.
_TIE = 1e-9


def _settles(k: int, total: int, floor: float, half: float, level: float) -> bool:
    """Whether k of ``total`` puts the Clopper-Pearson lower bound at or above ``floor``.

    The lower bound L solves P(Bin(total, L) >= k) = alpha/2 and that tail grows with L, so
    L >= floor exactly when P(Bin(total, floor) >= k) = I_floor(k, total - k + 1) <= alpha/2:
    one incomplete beta function instead of its inverse (a few times faster).
    """
    if k <= 0:
        return False
    tail = floor**total if k == total else betainc(float(k), float(total - k + 1), floor)
    if abs(tail - half) > _TIE * half:
        return tail <= half
    return clopper_pearson(k, total, level).lower >= floor


def _fewest(total: int, floor: float, half: float, level: float, z: float) -> int:
    """The fewest agreements of ``total`` that settle it (``total + 1``: none does).

    Started from the normal approximation and stepped one at a time: the answer is
    monotone in k, and the guess is within a few steps of it.
    """
    guess = floor * total + z * math.sqrt(total * floor * (1 - floor))
    k = min(max(round(guess), 1), total + 1)
    if k <= total and _settles(k, total, floor, half, level):
        while k > 1 and _settles(k - 1, total, floor, half, level):
            k -= 1
        return k
    while k <= total and not _settles(k, total, floor, half, level):
        k += 1
    return k


def _round_half_even(numerator: int, denominator: int) -> int:
    """numerator / denominator to the nearest integer, halves to even, exactly (Python's
    ``round`` of the rational; ``sample_size.round_half_even``, not imported for this)."""
    q, r = divmod(numerator, denominator)
    return q + 1 if 2 * r > denominator or (2 * r == denominator and q % 2 == 1) else q


def labels_to_settle(
    agreed: int, n: int, floor: float, level: float = 0.95, max_total: int = 100_000
) -> int | None:
    """The smallest total number of labels N >= n at which ``round(p * N)`` agreements of N
    (p = agreed / n, the observed rate) put the Clopper-Pearson lower bound at ``level``
    at or above ``floor``; None when none does up to ``max_total`` (p at or below the
    floor: more labels at this rate cannot show it). ``round`` is of the exact fraction
    agreed * N / n, halves to even.

    The lower bound at ``round(p * N)`` of N is not monotone in N (the rounding wobbles),
    so a search that steps up and then looks only below its first hit can miss a smaller
    N. This one is exact: the fewest agreements that settle N, kmin(N), never decreases
    with N, and ``round(p * N)`` never decreases either, so no N in [a, b] settles when
    ``round(p * b) < kmin(a)``; whole blocks are ruled out that way, and every N in a block
    that is not is checked, smallest first.
    """
    if n == 0:
        return None
    p = agreed / n
    if p <= floor:
        return None
    half = 0.5 * (1.0 - level)
    z = _z(level)

    def k_at(total: int) -> int:
        # The exact agreed * total / n, halves to even, as plan rounds: the float
        # p * total reads 15/22 of 143 (97.5) as 97.49999999999999.
        return agreed if total == n else _round_half_even(agreed * total, n)

    def first(a: int, b: int) -> int | None:
        if k_at(b) < _fewest(a, floor, half, level, z):
            return None
        if b - a < 24:
            return next(
                (t for t in range(a, b + 1) if _settles(k_at(t), t, floor, half, level)), None
            )
        mid = (a + b) // 2
        found = first(a, mid)
        return found if found is not None else first(mid + 1, b)

    # An N that settles, found by doubling, bounds the search; the minimum is found below it.
    hi = n
    while not _settles(k_at(hi), hi, floor, half, level):
        if hi >= max_total:
            break
        hi = min(max(hi * 2, hi + 1), max_total)
    return first(n, hi)


# ----------------------------------------------------------------------- scored judges


@dataclass(frozen=True)
class ScoreAgreement:
    """A scored judge against a person on the same cases: ``n`` pairs of scores.

    ``mean_abs_diff`` is the mean of |judge - person|; ``mean_diff`` the mean of
    judge - person (positive: the judge scores higher); ``exact`` the cases where the two
    scores are equal. ``weighted_kappa`` is the quadratic-weighted kappa. Each interval is
    None when it is undefined (no pairs, or kappa with no variance to compare against).
    """

    n: int
    level: float
    scale: tuple[float, float]
    judge_mean: float | None
    person_mean: float | None
    mean_diff: float | None
    exact: int
    mean_abs_diff: float | None
    mean_abs_diff_interval: Interval | None
    weighted_kappa: float | None
    weighted_kappa_interval: Interval | None


def _check_pairs(judge: Sequence[float], person: Sequence[float]) -> tuple[list[float], list[float]]:
    if len(judge) != len(person):
        raise ValueError("judge and person need one score each per case")
    xs, ys = [float(v) for v in judge], [float(v) for v in person]
    if not all(math.isfinite(v) for v in (*xs, *ys)):
        raise ValueError("scores must be finite numbers")
    return xs, ys


def quadratic_weighted_kappa(
    judge: Sequence[float], person: Sequence[float], level: float = 0.95
) -> tuple[float | None, Interval | None]:
    """Cohen's quadratic-weighted kappa of paired scores, and its large-sample interval.

    kappa_w = 1 - D_o / D_e, with D_o the mean of (x_i - y_i)^2 over the pairs and D_e the
    mean of (x_i - y_j)^2 over every i, j (what the two raters' own score distributions
    would disagree by at random). On whole-number scores this is scikit-learn's
    ``cohen_kappa_score(weights="quadratic", labels=<every point of the scale>)`` and
    statsmodels' ``cohens_kappa(table, wt="quadratic")``; written on the values, it also
    holds for a panel's half-point medians and means.

    Interval: Fleiss, Cohen and Everitt (1969), Psychological Bulletin 72(5):323-327, the
    large-sample variance statsmodels reports for weighted kappa, written with squared
    differences d_ij (the variance does not change with the weights' scale):
    var = [mean_k (d_k - (dbar(x_k) + dbar'(y_k)) (1 - kappa))^2 - (D_e (1 - kappa))^2]
    / (n D_e^2), where dbar(x) is the mean of (x - y_j)^2 over the person's scores and
    dbar'(y) that of (x_i - y)^2 over the judge's. Approximate (no exact interval exists);
    clamped to [-1, 1]. None when D_e = 0 (both raters gave one and the same score to every
    case); the interval is None when the variance is not positive.
    """
    xs, ys = _check_pairs(judge, person)
    n = len(xs)
    if n == 0:
        return None, None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    vx = math.fsum((x - mx) ** 2 for x in xs) / n
    vy = math.fsum((y - my) ** 2 for y in ys) / n
    expected = (mx - my) ** 2 + vx + vy
    if not expected > 0:
        return None, None
    observed = math.fsum((x - y) ** 2 for x, y in zip(xs, ys, strict=True)) / n
    kappa = 1.0 - observed / expected
    spread = 1.0 - kappa
    total = math.fsum(
        ((x - y) ** 2 - ((x - my) ** 2 + vy + (y - mx) ** 2 + vx) * spread) ** 2
        for x, y in zip(xs, ys, strict=True)
    ) / n
    variance = (total - (expected * spread) ** 2) / (n * expected**2)
    if not variance > 0:
        return kappa, None
    return kappa, _clamped(kappa, _z(level) * math.sqrt(variance))


def mean_abs_diff(
    judge: Sequence[float], person: Sequence[float], width: float, level: float = 0.95
) -> tuple[float | None, Interval | None]:
    """The mean of |judge - person| and an interval valid for bounded values at every n.

    Each difference lies in [0, width] (``width``: the scale's high minus its low), so the
    interval is Hoeffding's: mean -/+ width * sqrt(ln(2 / alpha) / (2 n)), cut to
    [0, width]. Hoeffding (1963), "Probability inequalities for sums of bounded random
    variables", JASA 58(301):13-30, Theorem 2, each side at alpha/2. Conservative (its
    coverage is at least ``level`` for every distribution of the differences, whatever
    n); no Student t, which gives [0, 0] to differences that happen to be all 0.
    """
    xs, ys = _check_pairs(judge, person)
    if not width > 0:
        raise ValueError(f"a scale's width must be positive, got {width!r}")
    n = len(xs)
    if n == 0:
        return None, None
    diffs = [abs(x - y) for x, y in zip(xs, ys, strict=True)]
    mean = math.fsum(diffs) / n
    return mean, _hoeffding(mean, n, width, level)


def _hoeffding(mean: float, n: int, width: float, level: float) -> Interval:
    half = width * math.sqrt(math.log(2.0 / (1.0 - level)) / (2.0 * n))
    return Interval(max(0.0, mean - half), min(width, mean + half))


def mean_abs_diff_worst(
    mean: float | None, n: int, missing: Sequence[float], scale: tuple[float, float],
    level: float = 0.95,
) -> tuple[float, Interval]:
    """:func:`mean_abs_diff` of ``n`` pairs (their mean ``mean``) and of the labelled cases
    the judge gave no score (``missing``: the person's scores), each of those counted at
    the largest difference it could have had: the judge at the end of the scale farthest
    from the person's score. Hoeffding's upper bound only grows with the mean at a given
    number of pairs, so this is its largest value over every score the judge could have
    given them."""
    low, high = float(scale[0]), float(scale[1])
    total = (mean or 0.0) * n + math.fsum(max(p - low, high - p) for p in missing)
    count = n + len(missing)
    if count == 0:
        raise ValueError("no pair and no missing score")
    worst = total / count
    return worst, _hoeffding(worst, count, high - low, level)


def score_agreement(
    judge: Sequence[float], person: Sequence[float], scale: tuple[float, float],
    level: float = 0.95,
) -> ScoreAgreement:
    """A scored judge against a person: pairs of scores on the same cases, at ``level``."""
    xs, ys = _check_pairs(judge, person)
    low, high = float(scale[0]), float(scale[1])
    n = len(xs)
    mad, mad_interval = mean_abs_diff(xs, ys, high - low, level)
    kappa, kappa_interval = quadratic_weighted_kappa(xs, ys, level)
    return ScoreAgreement(
        n=n, level=level, scale=(low, high),
        judge_mean=math.fsum(xs) / n if n else None,
        person_mean=math.fsum(ys) / n if n else None,
        mean_diff=math.fsum(x - y for x, y in zip(xs, ys, strict=True)) / n if n else None,
        exact=sum(x == y for x, y in zip(xs, ys, strict=True)),
        mean_abs_diff=mad, mean_abs_diff_interval=mad_interval,
        weighted_kappa=kappa, weighted_kappa_interval=kappa_interval,
    )
