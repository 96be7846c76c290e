"""How often a judge agrees with a person: a 2x2 table and what it says.

Pure functions on counts. For the proportions (agreement, sensitivity, specificity) the
interval is exact: Clopper-Pearson. Cohen's kappa has no exact interval; it gets the
large-sample one of Fleiss, Cohen and Everitt (1969), "Large sample standard errors of
kappa and weighted kappa", Psychological Bulletin 72(5), the one statsmodels'
``cohens_kappa`` reports (checked against it in tests/stats/).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from oloproof._records import dataclass
from oloproof.stats.intervals import Interval, clopper_pearson

__all__ = ["Agreement", "Proportion", "agreement", "cohens_kappa", "labels_to_settle"]


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


def cohens_kappa(
    both_pass: int, judge_only: int, person_only: int, both_fail: int, level: float = 0.95
) -> tuple[float | None, Interval | None]:
    """Cohen's kappa and its large-sample interval (Fleiss, Cohen and Everitt, 1969).

    None when kappa is undefined (chance agreement is 1: both raters gave one answer
    only); the interval is None when its variance is not positive. The interval is
    not clipped to [-1, 1]: it is what the method says.
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
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    half = z * math.sqrt(variance)
    return kappa, Interval(kappa - half, kappa + half)


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


def labels_to_settle(
    agreed: int, n: int, floor: float, level: float = 0.95, max_total: int = 100_000
) -> int | None:
    """The smallest total number of labels N >= n at which ``round(p * N)`` agreements of N
    (p = agreed / n, the observed rate) put the Clopper-Pearson lower bound at ``level``
    at or above ``floor``; None when none does up to ``max_total`` (p at or below the
    floor: more labels at this rate cannot show it). ``round`` halves to even."""
    if n == 0:
        return None
    p = agreed / n
    if p <= floor:
        return None
    if clopper_pearson(agreed, n, level).lower >= floor:
        return n
    # The lower bound at a fixed rate grows with N, up to rounding wobble: step up, then
    # the first N found is checked from below one at a time.
    lo, hi = n, n
    while True:
        hi = min(max(hi * 2, hi + 1), max_total)
        if clopper_pearson(round(p * hi), hi, level).lower >= floor:
            break
        if hi >= max_total:
            return None
        lo = hi
    for total in range(lo + 1, hi + 1):
        if clopper_pearson(round(p * total), total, level).lower >= floor:
            return total
    return hi
