"""Assurance for a comparison rule on a BINARY metric (``plan CMP_ID --assurance P``).

The question: if the true per-pair outcomes are distributed as the observed ones, how many
pairs N make the rule decided with probability at least P? The probability is computed as a
sum over the paired tables, not by simulation.

The model
    The n pairs already compared keep their cells (a, b, c, d); each of the N - n pairs to
    come falls, independently, in one of the four cells of the paired table (both pass,
    candidate only, baseline only, both fail) with the observed shares pi = (a, b, c, d) / n.
    A table of N pairs is then (a, b, c, d) + U, U ~ multinomial(N - n, pi), and it decides
    the rule when Newcombe's interval at the rule's level
    (:func:`oloproof.stats.paired.paired_proportion_difference`, the method the policy
    decides comparisons with) is decided by the rule's ``judge``
    (:func:`oloproof.policy.rules.comparison_judge`). So

        P(decided at N) = sum over U of Mult(U; N - n, pi) [judge decides (a, b, c, d) + U]

    as for a run rule (:func:`~oloproof.stats.sample_size.binary_decision_probability`,
    whose ``kept`` cases keep their outcomes). Earlier versions drew all N pairs afresh,
    which answers another question: for 70/15/8/27 and superiority at 80%, 435 pairs, which
    decide it 84% of the time with the 120 pairs kept (394 do 80%).

    Missing pairs: a comparison drops a pair whose case is missing in either run, and does not
    bound it (policy/compare.py); N counts the pairs observed in both runs, and none of the
    pairs to come is assumed to go missing, as in the paired plan without assurance.

Why it cannot be reduced to the discordant pairs
    Newcombe's interval is built from the two marginal Wilson intervals and a correlation
    estimate phi, so it depends on all four cells, not only on the discordant ones: with 12
    candidate-only and 4 baseline-only pairs among 116, the 95% lower limit is +0.00012 with
    0 or 100 both-pass pairs, +0.00071 with 50 and -0.00001 with 20 or 80, so a superiority
    rule at margin 0 is decided at 0, 50 and 100 both-pass pairs and not at 20 or 80: the
    decided tables are not even a range of both-pass counts. The sum runs over all three
    free cells.

How the sum is organised
    With s = b + c the discordant pairs, s ~ Bin(N, pi_b + pi_c); given s, the candidate-only
    count b ~ Bin(s, q) and the both-pass count a ~ Bin(N - s, r) are independent
    (q = pi_b / (pi_b + pi_c), r = pi_a / (pi_a + pi_d)). With pairs kept, each of these is
    the kept count plus the binomial count of the pairs to come (s - s_kept of the discordant
    ones to come, and so on), and every count below is one of the whole table. For each s the
    (b, a) rectangle is
    cut into boxes, and a box is *certified* decided (every table in it decides the rule) or
    undecided (none does):

    - by interval arithmetic: :func:`_limit_bounds` bounds both Newcombe limits over the box,
      through an exact rearrangement of Newcombe's formula whose leading term is McNemar's
      variance of the discordant pairs (it depends on s, b - c and N only) and whose other
      terms are small, so the bounds are tight; and every rule of policy/rules.py is
      monotone in the interval (narrowing an interval never undoes a decision), so the
      widest interval the box allows deciding proves every table of it decided, and the
      narrowest not deciding proves that none is;
    - or, for a box of at most 8 tables, table by table, with the function the policy uses.

    A box that cannot be certified is split. Nothing is assumed about the shape of the
    decided region; it is certified box by box, and the probability of a certified box is a
    product of two binomial masses. A certificate may hold for a range of sizes at once (the
    bounds take N in a range, and the both-pass counts over the union of their ranges), so
    consecutive sizes share most of the work.

Unresolved probability, and what "exact" means here
    Values of s, of b given s and of a given s whose binomial tail is below EPS = 1e-13 (by
    the Chernoff bound), and boxes weighing less than a threshold eta, are left unresolved:
    :meth:`_PairedSums.probability` returns a bracket [low, high] holding the exact
    probability, high - low being the probability left unresolved. While the search passes
    a size by, eta is 1e-4 and the sum stops as soon as the bracket lies below the target
    (or above it); a bracket holding the target is recomputed with eta a thousand times
    smaller, down to EPS, and at EPS, if it still holds the target, with nothing left
    unresolved. The size found is reported with its probability at eta = EPS, whose bracket
    is below 1e-10 wide. Every pmf is computed in floating point, from a log-space value at
    the mode (:func:`oloproof.stats._special.binom_pmf`) and the ratio recurrences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from oloproof._records import dataclass, field
from oloproof.enums import RuleState
from oloproof.stats._special import binom_pmf
from oloproof.stats.intervals import _check_level
from oloproof.stats.paired import NEWCOMBE_PAIRED
from oloproof.stats.sample_size import (
    AssuranceResult,
    Judge,
    _min_quadratic,
    _z_quantile,
    paired_fewest_failable,
    paired_table_state,
)

PASS = RuleState.PASS

__all__ = [
    "PAIRED_ASSURANCE_LIMIT",
    "paired_binary_assurance_size",
    "paired_decision_probability",
]

#: Unresolved tail probability allowed per truncated range or box.
EPS = 1e-13
#: The largest number of pairs the search tries.
PAIRED_ASSURANCE_LIMIT = 10_000

_DEC, _UND, _OPEN, _COL = 1, 2, 3, 4
_SLACK = 1e-9  # floating-point room between the certified bounds and computed limits
_K_MAX = 4096
_SCAN_ETA = 1e-4  # what a size may leave unresolved while the search passes it by
_FOREVER = 1 << 62


# ---------------------------------------------------------------------- binomial masses


def _kl(x: float, p: float) -> float:
    """Kullback-Leibler divergence of Bernoulli(x) from Bernoulli(p), 0 < p < 1."""
    out = 0.0
    if x > 0.0:
        out += x * math.log(x / p)
    if x < 1.0:
        out += (1.0 - x) * math.log((1.0 - x) / (1.0 - p))
    return out


def _chernoff_point(n: int, p: float, log_eps: float, upper: bool) -> float:
    """The x beyond which the Chernoff bound exp(-n H(x, p)) on a binomial tail is <= eps:
    in (p, 1] for the upper tail, [0, p) for the lower, or the end (1 or 0) when even that
    bound is larger. Bisection, returning the end of the bracket on the safe side."""
    end = 1.0 if upper else 0.0
    if n * _kl(end, p) < log_eps:
        return end
    lo, hi = (p, 1.0) if upper else (0.0, p)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        beyond = n * _kl(mid, p) >= log_eps
        if upper:
            if beyond:
                hi = mid
            else:
                lo = mid
        elif beyond:
            lo = mid
        else:
            hi = mid
    return hi if upper else lo


def _mass_range(n: int, p: float, eps: float) -> tuple[int, int]:
    """[lo, hi] such that P(X < lo) <= eps and P(X > hi) <= eps, X ~ Bin(n, p), by the
    Chernoff bound; the whole support when eps is 0."""
    if p <= 0.0 or n == 0:
        return 0, 0
    if p >= 1.0:
        return n, n
    if eps <= 0.0:
        return 0, n
    log_eps = -math.log(eps)
    x_hi = _chernoff_point(n, p, log_eps, upper=True)
    x_lo = _chernoff_point(n, p, log_eps, upper=False)
    # P(X >= j) <= exp(-n H(j/n, p)) for j >= np, so j = ceil(n x_hi) has a tail <= eps.
    hi = min(n, max(math.ceil(n * x_hi) - 1, 0)) if x_hi < 1.0 else n
    lo = max(0, min(math.floor(n * x_lo) + 1, n)) if x_lo > 0.0 else 0
    return min(lo, hi), hi


@dataclass
class _Masses:
    """Bin(n, p) probabilities over [lo, hi]: cum[i] = P(lo <= X <= lo + i)."""

    lo: int
    hi: int
    pmf: list[float]
    cum: list[float]

    @property
    def total(self) -> float:
        return self.cum[-1]

    def between(self, x1: int, x2: int) -> float:
        x1 = max(x1, self.lo)
        x2 = min(x2, self.hi)
        if x1 > x2:
            return 0.0
        below = self.cum[x1 - 1 - self.lo] if x1 > self.lo else 0.0
        return max(self.cum[x2 - self.lo] - below, 0.0)


def _masses(n: int, p: float, eps: float, shift: int = 0) -> _Masses:
    """Bin(n, p) masses over its mass range, indexed by ``shift`` + X (a count already kept
    plus the count of the pairs to come)."""
    lo, hi = _mass_range(n, p, eps)
    if p <= 0.0 or p >= 1.0 or n == 0:
        return _Masses(lo + shift, hi + shift, [1.0], [1.0])
    mode = min(max(math.floor((n + 1) * p), lo), hi)
    pmf = [0.0] * (hi - lo + 1)
    f = binom_pmf(mode, n, p)
    pmf[mode - lo] = f
    odds = p / (1.0 - p)
    for k in range(mode, hi):
        f *= (n - k) / (k + 1) * odds
        pmf[k + 1 - lo] = f
    f = pmf[mode - lo]
    for k in range(mode, lo, -1):
        f *= k / ((n - k + 1) * odds)
        pmf[k - 1 - lo] = f
    cum = []
    total = 0.0
    for x in pmf:
        total += x
        cum.append(total)
    return _Masses(lo + shift, hi + shift, pmf, cum)


# ------------------------------------------------------------------ certified boxes


def _max_quadratic(x_lo: float, x_hi: float, y_lo: float, y_hi: float, phi: float) -> float:
    """max of X^2 - 2 phi X Y + Y^2 over the box: a convex function for |phi| <= 1, so the
    maximum is at a vertex."""
    best = 0.0
    for x in (x_lo, x_hi):
        for y in (y_lo, y_hi):
            v = x * x - 2.0 * phi * x * y + y * y
            best = max(best, v)
    return best


def _scaled_wilson(
    k1: int, k2: int, n1: int, n2: int, z: float
) -> tuple[float, float, float, float]:
    """Bounds (low_min, low_max, up_min, up_max) on N(p - l) and N(u - p), the Wilson
    distances scaled by N, over k in [k1, k2] and N in [n1, n2] (p = k/N).

    N(p - l) = [z^2 (p - 1/2) + z sqrt(k(N - k)/N + z^2/4)] / (1 + z^2/N) and
    N(u - p) = [z^2 (1/2 - p) + z sqrt(k(N - k)/N + z^2/4)] / (1 + z^2/N); each piece is
    monotone in k or N (k(N - k)/N is concave in k and grows with N), so bounded at its ends.
    """
    z2 = z * z
    p_lo = min(max(k1 / n2, 0.0), 1.0)
    p_hi = min(max(k2 / n1, 0.0), 1.0)

    def g(k: float, n: int) -> float:
        return max(k - k * k / n, 0.0)

    g_lo = min(g(k1, n1), g(k2, n1))
    vertex = min(max(n2 / 2.0, k1), k2)
    g_hi = max(g(vertex, n2), g(k1, n2), g(k2, n2))
    root_lo = z * math.sqrt(g_lo + z2 / 4.0)
    root_hi = z * math.sqrt(g_hi + z2 / 4.0)
    den_lo = 1.0 + z2 / n2
    den_hi = 1.0 + z2 / n1
    return (
        max(z2 * (p_lo - 0.5) + root_lo, 0.0) / den_hi,
        max(z2 * (p_hi - 0.5) + root_hi, 0.0) / den_lo,
        max(z2 * (0.5 - p_hi) + root_lo, 0.0) / den_hi,
        max(z2 * (0.5 - p_lo) + root_hi, 0.0) / den_lo,
    )


def _concave_range(x1: float, x2: float, t1: float, t2: float) -> tuple[float, float]:
    """min and max of x (T - x) over x in [x1, x2], T in [t1, t2] (x >= 0), clamped at 0."""
    low = min(x1 * (t1 - x1), x2 * (t1 - x2))
    vertex = min(max(t2 / 2.0, x1), x2)
    high = max(vertex * (t2 - vertex), x1 * (t2 - x1), x2 * (t2 - x2))
    return max(low, 0.0), max(high, 0.0)


def _phi_at(n: float, s: int, b: float, a: float) -> float:
    """Newcombe's corrected phi (paired.newcombe_phi) with the counts taken as reals."""
    c = s - b
    d = n - s - a
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins <= 0.0:
        return 0.0
    cross = a * d - b * c
    if cross > n / 2.0:
        numerator = cross - n / 2.0
    elif cross >= 0.0:
        numerator = 0.0
    else:
        numerator = cross
    return numerator / math.sqrt(margins)


Interval = tuple[float, float]


def _add(x: Interval, y: Interval) -> Interval:
    return x[0] + y[0], x[1] + y[1]


def _sub(x: Interval, y: Interval) -> Interval:
    return x[0] - y[1], x[1] - y[0]


def _mul(x: Interval, y: Interval) -> Interval:
    corners = (x[0] * y[0], x[0] * y[1], x[1] * y[0], x[1] * y[1])
    return min(corners), max(corners)


def _div(x: Interval, y: Interval) -> Interval:
    """x / y for y > 0."""
    return min(x[0] / y[0], x[0] / y[1]), max(x[1] / y[0], x[1] / y[1])


def _scale(c: float, x: Interval) -> Interval:
    return (c * x[0], c * x[1]) if c >= 0.0 else (c * x[1], c * x[0])


def _dlog_margin(k_lo: int, k_hi: int, n1: int, n2: int) -> Interval:
    """Bounds on d log(k (N - k)) / dk = (N - 2k) / (k (N - k)) over the box (k(N-k) > 0)."""
    return _div((n1 - 2 * k_hi, n2 - 2 * k_lo), _concave_range(k_lo, k_hi, n1, n2))


def _phi_box(
    s: int, b1: int, b2: int, a1: int, a2: int, n1: int, n2: int
) -> tuple[float, float, bool]:
    """Bounds on Newcombe's corrected phi over the box, and whether they are its range.

    phi = num / sqrt(M), with M = k1 (N - k1) k2 (N - k2) the product of the margins and num
    the corrected cross product (paired.newcombe_phi). First the numerator and the margins
    are bounded apart. Where every margin is positive and the correction is the same over
    the box, phi is smooth, and d phi/dx = h_x / sqrt(M) with
    h_x = d num/dx - num (d log M/dx) / 2 for x = a, b, N; h_x is bounded by interval
    arithmetic. If no h_x changes sign, phi is monotone in each of a, b and N over the box,
    so its range is exactly its values at two corners. Otherwise the mean-value form bounds
    it: phi at the centre plus sum_x max|h_x| / sqrt(min M) times half the box's width in x.
    The tightest of these is returned. Those two refinements need every point of the box to
    be a table (d = N - s - a >= 0 for every a and N of it).
    """
    ad_lo, ad_hi = _concave_range(a1, a2, n1 - s, n2 - s)
    bc_lo, bc_hi = _concave_range(b1, b2, s, s)
    cross_lo, cross_hi = ad_lo - bc_hi, ad_hi - bc_lo
    half1, half2 = n1 / 2.0, n2 / 2.0
    if cross_hi > half1:
        num_hi = cross_hi - half1
    else:
        num_hi = min(0.0, cross_hi)
    if cross_lo > half2:
        num_lo = cross_lo - half2
    else:
        num_lo = min(0.0, cross_lo)
    k1_lo, k1_hi = a1 + b1, a2 + b2
    k2_lo, k2_hi = a1 + s - b2, a2 + s - b1
    g1_lo, g1_hi = _concave_range(k1_lo, k1_hi, n1, n2)
    g2_lo, g2_hi = _concave_range(k2_lo, k2_hi, n1, n2)
    m_lo, m_hi = g1_lo * g2_lo, g1_hi * g2_hi
    if m_lo <= 0.0:  # an empty margin makes phi 0; otherwise |phi| <= 1
        return -1.0 if num_lo < 0.0 else 0.0, 1.0 if num_hi > 0.0 else 0.0, False
    root_lo, root_hi = math.sqrt(m_lo), math.sqrt(m_hi)
    phi_hi = min(num_hi / root_lo if num_hi > 0.0 else num_hi / root_hi, 1.0)
    phi_lo = max(num_lo / root_lo if num_lo < 0.0 else num_lo / root_hi, -1.0)
    if a2 > n1 - s:
        # Some points of the box are not tables (d < 0): keep to the bounds above, which
        # hold for every table of it, rather than follow phi's extension beyond them.
        return phi_lo, phi_hi, False
    if cross_lo > half2:
        shift = 0.5  # num = cross - N/2 over the whole box
    elif cross_hi < 0.0:
        shift = 0.0  # num = cross
    elif cross_lo >= 0.0 and cross_hi <= half1:
        return 0.0, 0.0, True  # num = 0
    else:
        return phi_lo, phi_hi, False  # the correction changes inside the box
    t1 = _dlog_margin(k1_lo, k1_hi, n1, n2)
    t2 = _dlog_margin(k2_lo, k2_hi, n1, n2)
    num = (num_lo, num_hi)
    # d num/da = N - s - 2a, d num/db = 2b - s, d num/dN = a - shift;
    # d log M/da = t1 + t2, d log M/db = t1 - t2, d log M/dN = 1/(N - k1) + 1/(N - k2)
    axes = (
        (a1, a2, (float(n1 - s - 2 * a2), float(n2 - s - 2 * a1)), _add(t1, t2)),
        (b1, b2, (float(2 * b1 - s), float(2 * b2 - s)), _sub(t1, t2)),
        (
            n1,
            n2,
            (a1 - shift, a2 - shift),
            (1.0 / (n2 - k1_lo) + 1.0 / (n2 - k2_lo), 1.0 / (n1 - k1_hi) + 1.0 / (n1 - k2_hi)),
        ),
    )
    low_corner = [a1, b1, n1]
    high_corner = [a1, b1, n1]
    spread = 0.0
    monotone = True
    for x, (lo_end, hi_end, dnum, dlog) in enumerate(axes):
        if lo_end == hi_end:
            continue
        product = _mul(num, dlog)
        h_lo = dnum[0] - 0.5 * product[1]
        h_hi = dnum[1] - 0.5 * product[0]
        spread += max(-h_lo, h_hi) / root_lo * (hi_end - lo_end) / 2.0
        if h_lo > 0.0:
            high_corner[x] = hi_end
        elif h_hi < 0.0:
            low_corner[x] = hi_end
        else:
            monotone = False
    if monotone:
        lo = _phi_at(low_corner[2], s, low_corner[1], low_corner[0])
        hi = _phi_at(high_corner[2], s, high_corner[1], high_corner[0])
        rounding = 1e-12 * (1.0 + abs(lo) + abs(hi))
        return max(phi_lo, lo - rounding), min(phi_hi, hi + rounding), True
    centre = _phi_at((n1 + n2) / 2.0, s, (b1 + b2) / 2.0, (a1 + a2) / 2.0)
    return max(phi_lo, centre - spread), min(phi_hi, centre + spread), False


def _delta_bounds(cross: Interval, kappa: Interval, n1: int, n2: int) -> Interval:
    """Bounds on Delta = cross - num * kappa, num the corrected cross product: cross(1 - kappa)
    + kappa N/2 where cross > N/2, cross where 0 <= cross <= N/2, cross(1 - kappa) where
    cross < 0 (the union over the pieces the box reaches)."""
    one_minus = (1.0 - kappa[1], 1.0 - kappa[0])
    found: list[Interval] = []
    if cross[1] > n1 / 2.0:
        part = (max(cross[0], n1 / 2.0), cross[1])
        found.append(_add(_mul(part, one_minus), _mul(kappa, (n1 / 2.0, n2 / 2.0))))
    if cross[1] >= 0.0 and cross[0] <= n2 / 2.0:
        found.append((max(cross[0], 0.0), min(cross[1], n2 / 2.0)))
    if cross[0] < 0.0:
        found.append(_mul((cross[0], min(cross[1], 0.0)), one_minus))
    return min(x[0] for x in found), max(x[1] for x in found)


def _limit_bounds(
    z: float,
    n1: int,
    n2: int,
    s: int,
    b1: int,
    b2: int,
    a1: int,
    a2: int,
    phi: Interval | None = None,
) -> tuple[float, float, float, float]:
    """(lower_min, lower_max, upper_min, upper_max): bounds on Newcombe's limits over every
    table with N in [n1, n2] pairs, s discordant, b in [b1, b2] candidate-only and a in
    [a1, a2] both-pass pairs.

    Newcombe's limits are lower = (e - R_L) / N and upper = (e + R_U) / N (clipped to
    [-1, 1]), e = b - c, where with the Wilson distances the limits are built from, an exact
    rearrangement (checked in the tests to 1e-15) gives

        (R_L S)^2 = z^2 (s - e^2/N) + z^4/2 + 2 z^2 Delta / N + z^4 e^2 (1 - phi) / (2 N^2)
                    + z^4 tau^2 (1 + phi) / 2 + T,            (R_U S)^2: the same with -T,
        T = z^3 e [(W1 + W2)(1 - phi) / N - tau^2 (1 + phi) / (W1 + W2)],

    with S = 1 + z^2/N, tau = (2a + s - N)/N, W_i = sqrt(k_i (N - k_i)/N + z^2/4) for the
    candidate's and the baseline's passes k_1 = a + b, k_2 = a + c, Delta = cross - num kappa,
    kappa = sqrt((1 + z^2/(4 g1))(1 + z^2/(4 g2))), g_i = k_i (N - k_i)/N (phi's numerator
    num, after Newcombe's correction, over sqrt of the margins, times the Wilson roots,
    is num kappa / N^3). The first term is McNemar's variance of the discordant pairs and
    depends on s, e and N only; every other term is small and nearly constant, which is
    why the decided tables hardly depend on a. Each term is bounded over the box by
    interval arithmetic. Where a margin may be empty, the bounds come from
    :func:`_plain_bounds` instead.
    """
    k1_lo, k1_hi = a1 + b1, a2 + b2
    k2_lo, k2_hi = a1 + s - b2, a2 + s - b1
    g1_lo, g1_hi = _g_range(k1_lo, k1_hi, n1, n2)
    g2_lo, g2_hi = _g_range(k2_lo, k2_hi, n1, n2)
    if phi is None:
        phi_lo, phi_hi, _ = _phi_box(s, b1, b2, a1, a2, n1, n2)
    else:
        phi_lo, phi_hi = phi
    if g1_lo <= 0.0 or g2_lo <= 0.0:
        return _plain_bounds(z, n1, n2, s, b1, b2, a1, a2, (phi_lo, phi_hi))
    z2 = z * z
    z4_half = z2 * z2 / 2.0
    quarter = z2 / 4.0
    inv_lo, inv_hi = 1.0 / n2, 1.0 / n1
    e_lo, e_hi = float(2 * b1 - s), float(2 * b2 - s)
    esq_lo = 0.0 if e_lo <= 0.0 <= e_hi else min(e_lo * e_lo, e_hi * e_hi)
    esq_hi = max(e_lo * e_lo, e_hi * e_hi)
    kappa = (
        math.sqrt((1.0 + quarter / g1_hi) * (1.0 + quarter / g2_hi)),
        math.sqrt((1.0 + quarter / g1_lo) * (1.0 + quarter / g2_lo)),
    )
    ad_lo, ad_hi = _concave_range(a1, a2, n1 - s, n2 - s)
    bc_lo, bc_hi = _concave_range(b1, b2, s, s)
    d_lo, d_hi = _mul(_delta_bounds((ad_lo - bc_hi, ad_hi - bc_lo), kappa, n1, n2), (inv_lo, inv_hi))
    om_lo, om_hi = 1.0 - phi_hi, 1.0 - phi_lo  # 1 - phi, 1 + phi: both >= 0
    op_lo, op_hi = 1.0 + phi_lo, 1.0 + phi_hi
    tau_lo, tau_hi = _mul((2 * a1 + s - n2, 2 * a2 + s - n1), (inv_lo, inv_hi))
    tsq_lo = 0.0 if tau_lo <= 0.0 <= tau_hi else min(tau_lo * tau_lo, tau_hi * tau_hi)
    tsq_hi = max(tau_lo * tau_lo, tau_hi * tau_hi)
    # every term below but Delta and T is a product of non-negative factors
    base_lo = (
        z2 * (s - esq_hi * inv_hi) + z4_half + 2.0 * z2 * d_lo
        + z4_half * esq_lo * om_lo * inv_lo * inv_lo + z4_half * tsq_lo * op_lo
    )
    base_hi = (
        z2 * (s - esq_lo * inv_lo) + z4_half + 2.0 * z2 * d_hi
        + z4_half * esq_hi * om_hi * inv_hi * inv_hi + z4_half * tsq_hi * op_hi
    )
    w_lo = math.sqrt(g1_lo + quarter) + math.sqrt(g2_lo + quarter)
    w_hi = math.sqrt(g1_hi + quarter) + math.sqrt(g2_hi + quarter)
    bracket = (
        w_lo * om_lo * inv_lo - tsq_hi * op_hi / w_lo,
        w_hi * om_hi * inv_hi - tsq_lo * op_lo / w_hi,
    )
    t_lo, t_hi = _scale(z2 * z, _mul((e_lo, e_hi), bracket))
    s_lo, s_hi = 1.0 + z2 / n2, 1.0 + z2 / n1  # S = 1 + z^2/N
    rl_lo = math.sqrt(max(base_lo + t_lo, 0.0)) / s_hi
    rl_hi = math.sqrt(max(base_hi + t_hi, 0.0)) / s_lo
    ru_lo = math.sqrt(max(base_lo - t_hi, 0.0)) / s_hi
    ru_hi = math.sqrt(max(base_hi - t_lo, 0.0)) / s_lo
    return (
        max(_smallest(e_lo - rl_hi, n1, n2), -1.0),
        max(_largest(e_hi - rl_lo, n1, n2), -1.0),
        min(_smallest(e_lo + ru_lo, n1, n2), 1.0),
        min(_largest(e_hi + ru_hi, n1, n2), 1.0),
    )


def _g_range(k_lo: int, k_hi: int, n1: int, n2: int) -> Interval:
    """Bounds on k (N - k) / N = k - k^2/N (concave in k, growing with N)."""
    low = min(k_lo - k_lo * k_lo / n1, k_hi - k_hi * k_hi / n1)
    vertex = min(max(n2 / 2.0, k_lo), k_hi)
    high = max(vertex - vertex * vertex / n2, k_lo - k_lo * k_lo / n2, k_hi - k_hi * k_hi / n2)
    return max(low, 0.0), max(high, 0.0)


def _plain_bounds(
    z: float, n1: int, n2: int, s: int, b1: int, b2: int, a1: int, a2: int, phi: Interval
) -> tuple[float, float, float, float]:
    """Bounds on Newcombe's limits from bounds on each Wilson distance and on phi apart:
    lower = (e - sqrt(X^2 - 2 phi X Y + Y^2)) / N with X = N(p1 - l1) and Y = N(u2 - p2)
    (upper alike), each root shrinking as phi grows and convex in (X, Y)."""
    cand = _scaled_wilson(a1 + b1, a2 + b2, n1, n2, z)
    base = _scaled_wilson(a1 + s - b2, a2 + s - b1, n1, n2, z)
    r_low_max = math.sqrt(_max_quadratic(cand[0], cand[1], base[2], base[3], phi[0]))
    r_low_min = math.sqrt(_min_quadratic(cand[0], cand[1], base[2], base[3], phi[1]))
    r_up_max = math.sqrt(_max_quadratic(base[0], base[1], cand[2], cand[3], phi[0]))
    r_up_min = math.sqrt(_min_quadratic(base[0], base[1], cand[2], cand[3], phi[1]))
    e1, e2 = 2 * b1 - s, 2 * b2 - s
    return (
        max(_smallest(e1 - r_low_max, n1, n2), -1.0),
        max(_largest(e2 - r_low_min, n1, n2), -1.0),
        min(_smallest(e1 + r_up_min, n1, n2), 1.0),
        min(_largest(e2 + r_up_max, n1, n2), 1.0),
    )


def _smallest(x: float, n1: int, n2: int) -> float:
    """min of x / N over N in [n1, n2]."""
    return x / n2 if x >= 0.0 else x / n1


def _largest(x: float, n1: int, n2: int) -> float:
    return x / n1 if x >= 0.0 else x / n2


_POINTS = 8  # boxes of at most this many tables are decided table by table


Fills = tuple[tuple[int, int, int, int], ...]


def _certify(
    judge: Judge, z: float, n1: int, n2: int, s: int, b1: int, b2: int, a1: int, a2: int,
    fills: Fills = (),
) -> int:
    """_DEC if every table of the box decides the rule, _UND if none does, 0 if the bounds
    cannot tell. Every rule is monotone in the interval (policy/rules.py): the widest
    interval the box allows deciding proves every table decided; the narrowest not deciding
    proves none is. A box of at most _POINTS tables is decided table by table instead, with
    the function the policy uses (0 when they disagree).

    ``fills``: the dropped pairs at their worst (paired_table_state): a PASS counts only if
    every table plus each fill PASSes too. A box decided by its widest interval has one
    state throughout; if it is PASS, the box shifted by each fill is certified the same way
    (all PASS, or none)."""
    if (n2 - n1 + 1) * (b2 - b1 + 1) * (a2 - a1 + 1) <= _POINTS:
        found = 0
        for n in range(n1, n2 + 1):
            for b in range(b1, b2 + 1):
                for a in range(a1, a2 + 1):
                    if n - s - a < 0:
                        continue
                    state = paired_table_state(judge, z, (a, b, s - b, n - s - a), fills)
                    kind = _DEC if state is not None else _UND
                    if found and kind != found:
                        return 0
                    found = kind
        return found or _UND
    bounds = _limit_bounds(z, n1, n2, s, b1, b2, a1, a2)
    kind = _judge_box(judge, bounds)
    if kind != _DEC or not fills or judge(bounds[0] - _SLACK, bounds[3] + _SLACK) != PASS:
        return kind
    for fa, fb, fc, fd in fills:
        m = fa + fb + fc + fd
        shifted = _limit_bounds(z, n1 + m, n2 + m, s + fb + fc, b1 + fb, b2 + fb, a1 + fa,
                                a2 + fa)
        if judge(shifted[0] - _SLACK, shifted[3] + _SLACK) == PASS:
            continue  # every table plus this fill PASSes
        lower_max, upper_min = shifted[1] + _SLACK, shifted[2] - _SLACK
        if lower_max <= upper_min and judge(lower_max, upper_min) != PASS:
            return _UND  # no table plus this fill PASSes: every PASS of the box is held
        return 0
    return _DEC


def _judge_box(judge: Judge, bounds: tuple[float, float, float, float]) -> int:
    lower_min, lower_max, upper_min, upper_max = bounds
    if judge(lower_min - _SLACK, upper_max + _SLACK) is not None:
        return _DEC
    lower_max += _SLACK
    upper_min -= _SLACK
    if lower_max <= upper_min and judge(lower_max, upper_min) is None:
        return _UND
    return 0


# ---------------------------------------------------------------------------- the sums


@dataclass
class _Segment:
    """Candidate-only counts [b1, b2] of one s, certified for the sizes up to ``end``.

    _DEC/_UND: every table of the segment, for every both-pass count in [a1, a2] (which
    covers the mass range of each size it holds for), decides / does not. _OPEN: not
    certified; its probability is left unresolved while it is small enough. _COL: a single
    b whose both-pass counts are cut into ``parts`` [x1, x2, kind], kind _DEC, _UND or
    _OPEN.
    """

    b1: int
    b2: int
    kind: int
    end: int
    span: int  # the number of sizes it was certified for
    a1: int = 0
    a2: int = -1
    parts: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class _Column:
    """The segments of one discordant count s."""

    segments: list[_Segment] = field(default_factory=list)
    dec: float = 0.0  # P(b in a _DEC segment | s)
    und: float = 0.0
    expiry: int = -1  # the last size every certified segment holds for
    a1: int = 0  # both-pass counts every certified segment covers
    a2: int = -1
    opens: list[_Segment] = field(default_factory=list)
    cols: list[_Segment] = field(default_factory=list)


_MAX_PARTS = 24
_FIRST_SPAN = 8


class _PairedSums:
    """P(decided at N) for one observed table, one judge and one level.

    ``kept`` is the table of the pairs already compared, which keep their cells: a table of
    N pairs is ``kept`` plus a multinomial table of the N - sum(kept) pairs to come. Every
    count below (N, the discordant s, the candidate-only b, the both-pass a, and the masses'
    ranges) is a count of the whole table, kept pairs included; only the masses are those of
    the pairs to come. With ``kept`` all zero, every pair is drawn.

    The certificates are kept from one size to the next, for growing sizes, as the assurance
    search asks for them; a smaller size than the last one starts them afresh (a certificate
    holds from the size it was made at up to its ``end``).
    """

    def __init__(
        self,
        cells: tuple[int, int, int, int],
        judge: Judge,
        level: float,
        eps: float = EPS,
        kept: tuple[int, int, int, int] = (0, 0, 0, 0),
        fills: Fills = (),
    ) -> None:
        a, b, c, d = cells
        self.fills = fills
        n = a + b + c + d
        self.judge = judge
        self.z = -_z_quantile(0.5 * _check_level(level))
        self.eps = eps
        self.p_disc = (b + c) / n
        self.q = b / (b + c) if b + c else 0.0
        self.r = a / (a + d) if a + d else 0.0
        ka, kb, kc, kd = kept
        self.kept_pairs = ka + kb + kc + kd
        self.kept_s = kb + kc  # discordant pairs kept
        self.kept_b = kb
        self.kept_a = ka
        self.kept_ad = ka + kd  # concordant pairs kept
        self._b: dict[int, _Masses] = {}
        self._a: dict[int, _Masses] = {}
        self._ranges: dict[int, tuple[int, int]] = {}
        self._columns: dict[int, _Column] = {}
        self._last = 0  # the last size asked for
        self.certificates = 0  # box certifications tried

    # -- masses ---------------------------------------------------------------------
    def b_masses(self, s: int) -> _Masses:
        """Candidate-only counts of the tables with s discordant pairs."""
        got = self._b.get(s)
        if got is None:
            got = self._b[s] = _masses(s - self.kept_s, self.q, self.eps, self.kept_b)
        return got

    def a_masses(self, m: int) -> _Masses:
        """Both-pass counts of the tables with m concordant pairs."""
        got = self._a.get(m)
        if got is None:
            got = self._a[m] = _masses(m - self.kept_ad, self.r, self.eps, self.kept_a)
            self._ranges[m] = (got.lo, got.hi)
        return got

    def a_range(self, m: int) -> tuple[int, int]:
        got = self._ranges.get(m)
        if got is None:
            lo, hi = _mass_range(m - self.kept_ad, self.r, self.eps)
            got = self._ranges[m] = (lo + self.kept_a, hi + self.kept_a)
        return got

    # -- certificates -----------------------------------------------------------------
    def _cover(self, s: int, n1: int, n2: int) -> tuple[int, int]:
        """Both-pass counts covering the mass range of every N in [n1, n2]."""
        lo1, hi1 = self.a_range(n1 - s)
        lo2, hi2 = self.a_range(n2 - s)
        return min(lo1, lo2), max(hi1, hi2)

    def _column_parts(
        self,
        s: int,
        n1: int,
        n2: int,
        b: int,
        cover: tuple[int, int],
        hint: list[tuple[int, int, int]],
        weight: float,
        eta: float,
    ) -> list[tuple[int, int, int]] | None:
        """Cut the both-pass counts ``cover`` of the single b into certified parts for the
        sizes n1 .. n2, starting from the cuts of ``hint`` (the parts the column had). A part
        that cannot be certified and whose probability at n1 (times ``weight``) is at most
        ``eta`` is left _OPEN. None when a range of sizes would need more than _MAX_PARTS
        parts or a single count could not be certified for all of them."""
        a1, a2 = cover
        stack: list[tuple[int, int]] = []
        for x1, x2, _ in reversed(hint):
            x1, x2 = max(x1, a1), min(x2, a2)
            if x1 <= x2:
                stack.append((x1, x2))
        if stack:  # widen the outer parts to the new cover
            stack[-1] = (a1, stack[-1][1])
            stack[0] = (stack[0][0], a2)
        else:
            stack = [(a1, a2)]
        am = self.a_masses(n1 - s)
        parts: list[tuple[int, int, int]] = []
        judge, z = self.judge, self.z
        most = min(_MAX_PARTS, 2 * len(hint) + 6)
        while stack:
            x1, x2 = stack.pop()
            if weight * am.between(x1, x2) <= eta:
                kind = _OPEN
            else:
                self.certificates += 1
                kind = _certify(judge, z, n1, n2, s, b, b, x1, x2, self.fills)
            if kind:
                parts.append((x1, x2, kind))
                continue
            if x1 == x2 or (n1 < n2 and len(parts) + len(stack) >= most):
                return None
            mid = (x1 + x2) // 2
            stack.append((mid + 1, x2))
            stack.append((x1, mid))
        return parts

    def _split(
        self,
        s: int,
        n: int,
        span: int,
        b1: int,
        b2: int,
        out: list[_Segment],
        weight: float,
        eta: float,
        hint: list[tuple[int, int, int]] | None = None,
    ) -> None:
        """Certify [b1, b2] of column s for sizes n .. n + span - 1, splitting as needed;
        what cannot be certified and weighs at most ``eta`` is left _OPEN."""
        bm = self.b_masses(s)
        if weight * bm.between(b1, b2) <= eta:
            out.append(_Segment(b1, b2, _OPEN, _FOREVER, span))
            return
        while True:
            n2 = n + span - 1
            cover = self._cover(s, n, n2)
            self.certificates += 1
            kind = _certify(
                self.judge, self.z, n, n2, s, b1, b2, cover[0], cover[1], self.fills
            )
            if kind:
                out.append(_Segment(b1, b2, kind, n2, span, cover[0], cover[1]))
                return
            if b1 < b2:
                mid = (b1 + b2) // 2
                self._split(s, n, span, b1, mid, out, weight, eta)
                self._split(s, n, span, mid + 1, b2, out, weight, eta)
                return
            parts = self._column_parts(
                s, n, n2, b1, cover, hint or [], weight * bm.pmf[b1 - bm.lo], eta
            )
            if parts is not None:
                out.append(_Segment(b1, b2, _COL, n2, span, cover[0], cover[1], parts))
                return
            span //= 2

    def _renew(self, s: int, column: _Column, n: int, weight: float, eta: float) -> None:
        """Certify again what has expired in column s, or what no longer covers the
        both-pass counts of size n, or what is open but weighs more than ``eta`` now."""
        bm = self.b_masses(s)
        am = self.a_masses(n - s)
        lo, hi = am.lo, am.hi
        if not column.segments:
            fresh: list[_Segment] = []
            self._split(s, n, _FIRST_SPAN, bm.lo, bm.hi, fresh, weight, eta)
            column.segments = fresh
        else:
            keep: list[_Segment] = []
            for seg in column.segments:
                if seg.kind == _OPEN:
                    if weight * bm.between(seg.b1, seg.b2) * am.total <= eta:
                        keep.append(seg)
                        continue
                    self._split(s, n, _FIRST_SPAN, seg.b1, seg.b2, keep, weight, eta)
                    continue
                valid = seg.end >= n and seg.a1 <= lo and hi <= seg.a2
                if valid and seg.kind == _COL:
                    pmf = weight * bm.pmf[seg.b1 - bm.lo]
                    valid = all(
                        kind != _OPEN or pmf * am.between(x1, x2) <= eta
                        for x1, x2, kind in seg.parts
                    )
                if valid:
                    keep.append(seg)
                    continue
                flips = seg.kind == _COL and len({k for _, _, k in seg.parts} - {_OPEN}) > 1
                if seg.end >= n:
                    span = seg.end - n + 1  # an open part grew: certify the rest of its block
                elif flips:
                    span = seg.span
                else:
                    span = min(2 * seg.span, _K_MAX)
                out: list[_Segment] = []
                self._split(s, n, span, seg.b1, seg.b2, out, weight, eta, seg.parts)
                if len(out) > 1 and span > seg.span:
                    # Renewing for twice as long broke it up: try its old span whole first.
                    retry: list[_Segment] = []
                    self._split(s, n, seg.span, seg.b1, seg.b2, retry, weight, eta)
                    if len(retry) < len(out):
                        out = retry
                keep.extend(out)
            column.segments = keep
        dec = und = 0.0
        expiry = _FOREVER
        a1, a2 = -1, _FOREVER
        opens: list[_Segment] = []
        cols: list[_Segment] = []
        for seg in column.segments:
            if seg.kind == _OPEN:
                opens.append(seg)
                continue
            if seg.kind == _DEC:
                dec += bm.between(seg.b1, seg.b2)
            elif seg.kind == _UND:
                und += bm.between(seg.b1, seg.b2)
            else:
                cols.append(seg)
            a1 = max(a1, seg.a1)
            a2 = min(a2, seg.a2)
            expiry = min(expiry, seg.end)
        column.dec, column.und, column.expiry = dec, und, expiry
        column.opens, column.cols = opens, cols
        column.a1, column.a2 = (a1, a2) if a1 >= 0 else (0, _FOREVER)

    # -- one size -------------------------------------------------------------------------
    def probability(
        self, n: int, eta: float | None = None, target: float | None = None
    ) -> tuple[float, float]:
        """A bracket [low, high] holding P(decided at n pairs).

        Boxes weighing at most ``eta`` (default: EPS) may be left unresolved. With a
        ``target``, the discordant counts are taken from the most probable outwards, and
        the sum stops as soon as the bracket lies on one side of the target.
        """
        eta = self.eps if eta is None else eta
        if n < self.kept_pairs:
            raise ValueError(f"{n} pairs are fewer than the {self.kept_pairs} kept")
        if n < self._last:
            self._columns = {}
        self._last = n
        coming = n - self.kept_pairs
        sm = _masses(coming, self.p_disc, self.eps, self.kept_s)
        mode = min(max(math.floor((coming + 1) * self.p_disc) + self.kept_s, sm.lo), sm.hi)
        order = [mode]
        for step in range(1, max(mode - sm.lo, sm.hi - mode) + 1):
            if mode + step <= sm.hi:
                order.append(mode + step)
            if mode - step >= sm.lo:
                order.append(mode - step)
        low = 0.0
        sure = 0.0  # probability certified either way
        columns = self._columns
        for s in order:
            weight = sm.pmf[s - sm.lo]
            if weight > eta:
                am = self.a_masses(n - s)
                column = columns.get(s)
                if column is None:
                    column = columns[s] = _Column()
                stale = n > column.expiry or am.lo < column.a1 or am.hi > column.a2
                if not stale and (column.opens or column.cols):
                    stale = self._opens_grew(s, column, am, weight, eta)
                if stale or not column.segments:
                    self._renew(s, column, n, weight, eta)
                in_a = am.total
                dec = column.dec * in_a
                und = column.und * in_a
                if column.cols:
                    bm = self.b_masses(s)
                    for seg in column.cols:
                        pmf = bm.pmf[seg.b1 - bm.lo]
                        for x1, x2, kind in seg.parts:
                            if kind == _DEC:
                                dec += pmf * am.between(x1, x2)
                            elif kind == _UND:
                                und += pmf * am.between(x1, x2)
                low += weight * dec
                sure += weight * (dec + und)
            if target is not None:
                high = low + max(0.0, 1.0 - sure)  # the sizes not summed yet are unresolved
                if low >= target or high < target:
                    return min(low, 1.0), min(high, 1.0)
        high = low + max(0.0, 1.0 - sure)
        # A probability: the float sums of the decided tables can pass 1 by a few ulps
        # (0/1/0/2 at 8 pairs, non-inferiority at 0.5: 1.0000000000000007).
        return min(low, 1.0), min(high, 1.0)

    def _opens_grew(self, s: int, column: _Column, am: _Masses, weight: float, eta: float) -> bool:
        """Whether an open segment or part of column s now weighs more than ``eta``."""
        bm = self.b_masses(s)
        for seg in column.opens:
            if weight * bm.between(seg.b1, seg.b2) * am.total > eta:
                return True
        for seg in column.cols:
            pmf = weight * bm.pmf[seg.b1 - bm.lo]
            for x1, x2, kind in seg.parts:
                if kind == _OPEN and pmf * am.between(x1, x2) > eta:
                    return True
        return False


def _exact(
    cells: tuple[int, int, int, int], n: int, judge: Judge, level: float,
    kept: tuple[int, int, int, int], fills: Fills = (),
) -> float:
    """P(decided at n pairs) with nothing left unresolved."""
    low, _ = _PairedSums(cells, judge, level, eps=0.0, kept=kept, fills=fills).probability(n)
    return low


def paired_decision_probability(
    both_pass: int,
    cand_only: int,
    base_only: int,
    both_fail: int,
    pairs: int,
    judge: Judge,
    level: float = 0.95,
    *,
    exhaustive: bool = False,
    kept: tuple[int, int, int, int] = (0, 0, 0, 0),
    fills: Sequence[tuple[int, int, int, int]] = (),
) -> tuple[float, float]:
    """A bracket [low, high] holding P(the comparison rule is decided on ``pairs`` pairs)
    when each pair to come falls in the four cells with the observed proportions; ``kept``
    = (both pass, candidate only, baseline only, both fail): pairs already compared, which
    keep their cells (the table of ``pairs`` pairs is ``kept`` plus the pairs to come);
    ``fills``: the pairs dropped as missing, at their worst as ``compare`` bounds them
    (:func:`~oloproof.stats.sample_size.paired_table_state`).

    ``high - low`` is the probability left unresolved in the far tails (below 1e-10);
    ``exhaustive=True`` leaves nothing unresolved (slower: every table is accounted for).
    """
    cells = _check_cells(both_pass, cand_only, base_only, both_fail)
    if any(x < 0 for x in kept):
        raise ValueError(f"kept counts must be >= 0, got {kept}")
    if pairs < max(1, sum(kept)):
        raise ValueError(f"pairs must be >= 1 and at least the {sum(kept)} kept, got {pairs}")
    sums = _PairedSums(cells, judge, level, eps=0.0 if exhaustive else EPS, kept=kept,
                       fills=tuple(fills))
    return sums.probability(pairs)


def _check_cells(a: int, b: int, c: int, d: int) -> tuple[int, int, int, int]:
    cells = (a, b, c, d)
    if any(x < 0 for x in cells):
        raise ValueError(f"paired counts must be >= 0, got {cells}")
    if sum(cells) == 0:
        raise ValueError("no pair was observed")
    return cells


def paired_binary_assurance_size(
    both_pass: int,
    cand_only: int,
    base_only: int,
    both_fail: int,
    judge: Judge,
    target: float,
    level: float = 0.95,
    *,
    limit: int = PAIRED_ASSURANCE_LIMIT,
    fills: Sequence[tuple[int, int, int, int]] = (),
    least: int = 0,
) -> AssuranceResult:
    """The smallest number of pairs N > n (the observed pairs) such that, if the n pairs
    observed keep their cells and each of the N - n pairs to come falls in the four cells
    with the observed proportions, the comparison rule (``judge``) is decided by Newcombe's
    interval at ``level`` with probability >= ``target``. ``fills``: the pairs dropped as
    missing stay dropped, and a PASS counts only if it holds with them at their worst, as
    ``compare`` decides it (:func:`~oloproof.stats.sample_size.paired_table_state`).
    ``least``: no number of pairs below it is taken (the fewest at which the dropped pairs
    are within the policy's ``max_missing``).

    As for run rules (:func:`~oloproof.stats.sample_size.binary_assurance_size`), the
    probability is not monotone in N, so every N from n + 1 up is tried, to ``limit``.
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"the assurance must lie strictly between 0 and 1, got {target!r}")
    method = f"exact multinomial sum over the paired tables, {NEWCOMBE_PAIRED} at {level:g}"
    cells = (both_pass, cand_only, base_only, both_fail)
    if any(x < 0 for x in cells):
        raise ValueError(f"paired counts must be >= 0, got {cells}")
    n = sum(cells)
    if n == 0:
        return AssuranceResult("not_computable", target, method=method,
                               reason="no pair was observed")
    # compare decides no table of fewer pairs than can FAIL the rule (a PASS there is held
    # as evidence_cannot_fail), so no such size is decided at all.
    failable = paired_fewest_failable(judge, level, limit)
    first = limit + 1 if failable is None else max(n + 1, failable, least)
    sums = _PairedSums(cells, judge, level, kept=cells, fills=tuple(fills))
    for total in range(first, limit + 1):
        eta = _SCAN_ETA
        while True:
            low, high = sums.probability(total, eta, target)
            if high < target or low >= target or eta <= EPS:
                break
            eta = max(eta * 1e-3, EPS)
        if high < target:
            continue
        if low < target:  # the target lies in the unresolved sliver: resolve it all
            exact = _exact(cells, total, judge, level, cells, tuple(fills))
            if exact < target:
                continue
        else:  # both are lower bounds on the sum; the second is within 1e-10 of it
            exact = max(low, sums.probability(total)[0])
        return AssuranceResult(
            "sized", target, total=total, more=total - n, probability=exact, method=method
        )
    return AssuranceResult(
        "beyond_limit", target, method=method,
        reason=f"no number of pairs up to {limit:,} decides it that often",
    )

