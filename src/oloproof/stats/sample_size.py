"""How many cases would decide a rule that the evidence so far leaves undecided.

The question ``oloproof plan`` answers (SPEC section 7): if the cases still to come look like
the ones already run, what is the smallest total that the rule's own method would decide?

- :func:`binary_rule_size` is exact for BINARY run rules (Clopper–Pearson).
- :func:`paired_binary_rule_size` is exact for BINARY comparison rules (Newcombe).
- :func:`betting_rule_size` and :func:`betting_assurance_size` size a MEAN run rule with a
  declared range by the interval that decides it, the betting interval, computed on the
  observed mix of scores (approximate).
- :func:`mean_rule_size` and :func:`paired_mean_rule_size` are approximate: they hold the
  observed mean and standard deviation fixed and let only the t interval shrink (a MEAN
  without a declared range, and paired MEAN comparisons).

"Decided" is whatever the ``judge`` passed in says: the rule semantics live in
:mod:`oloproof.policy.rules` (one home), and this module, which stays pure and below the
policy layer, only receives them as a function from an interval to a state. The searches
rely on one property of every rule there: PASS and FAIL are each monotone in the interval,
so a decision that some interval with lower <= L and upper >= U could make is made by (L, U).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from oloproof._records import dataclass
from oloproof.enums import RuleState
from oloproof.stats._special import _log1pmx, binom_pmf, binom_tails, t_isf
from oloproof.stats.intervals import (
    CLOPPER_PEARSON,
    STUDENT_T,
    _check_level,
    clopper_pearson,
    clopper_pearson_bounded,
    worst_case_t_bounds,
)
from oloproof.stats.paired import NEWCOMBE_PAIRED, _newcombe_bounds


def _z_quantile(p: float) -> float:
    """The exact standard normal quantile. ``statistics`` is imported here, not at the top:
    it costs more start-up than a cached rerun of a small suite takes, and only deciding a
    comparison or sizing a rule needs it."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


__all__ = [
    "Judge",
    "SizeResult",
    "SizeStatus",
    "apportion",
    "betting_assurance_size",
    "betting_rule_size",
    "binary_rule_size",
    "mean_rule_size",
    "paired_binary_rule_size",
    "paired_fewest_failable",
    "paired_mean_rule_size",
    "paired_table_state",
    "round_half_even",
]

#: An interval (lower, upper) to the rule's decision, None when it does not decide.
Judge = Callable[[float, float], RuleState | None]
SizeStatus = Literal["sized", "on_the_bar", "already_decided", "beyond_limit", "not_computable"]

DEFAULT_LIMIT = 10_000_000


@dataclass(frozen=True)
class SizeResult:
    """The answer to "how many cases would decide this rule?".

    - ``sized``: ``total`` cases in all (``more`` beyond those run) would decide the rule, to
      ``state_at_total``, if the observed rates hold;
    - ``already_decided``: the evidence decides it now (``total`` = cases run, ``more`` = 0);
    - ``on_the_bar``: the estimate sits exactly on the rule's bar, so no size decides it;
    - ``beyond_limit``: no size up to ``limit`` decides it;
    - ``not_computable``: nothing to size from (no case observed, or no spread for a MEAN
      rule); ``reason`` says why.

    ``approximate`` is True for the MEAN sizes, which hold the observed spread fixed.
    """

    status: SizeStatus
    total: int | None = None
    more: int | None = None
    state_at_total: RuleState | None = None
    approximate: bool = False
    method: str = ""
    reason: str = ""


# ------------------------------------------------------------------------------- rounding


def round_half_even(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded to the nearest integer, halves to even, exactly.

    This is Python's ``round`` applied to the exact rational value; ``round(k / n * N)`` on
    floats can differ from it when k*N/n is a half (e.g. it may see 1176.4999999999998).
    """
    if denominator <= 0 or numerator < 0:
        raise ValueError("need numerator >= 0 and denominator > 0")
    q, r = divmod(numerator, denominator)
    twice = 2 * r
    if twice > denominator or (twice == denominator and q % 2 == 1):
        return q + 1
    return q


# Ties in the largest-remainder apportionment go to the concordant cells first, then to the
# baseline's discordant cell, and last to the candidate's, so that a tie never flatters the
# candidate.
_TIE_ORDER = (0, 3, 2, 1)


def apportion(cells: tuple[int, int, int, int], total: int) -> tuple[int, int, int, int]:
    """Scale four cell counts to ``total`` by the largest-remainder method (Hamilton).

    Each cell gets floor(cell * total / n); the units still missing go, one each, to the cells
    with the largest remainders (ties: both_pass, both_fail, base_only, then cand_only). So
    every cell is within one of its exact share and the cells sum to ``total``.
    """
    n = sum(cells)
    if n <= 0:
        raise ValueError("cannot scale an empty table")
    floors: list[int] = []
    remainders: list[int] = []
    for cell in cells:
        q, r = divmod(cell * total, n)
        floors.append(q)
        remainders.append(r)
    units = total - sum(floors)
    if units:
        order = sorted(range(4), key=lambda i: (-remainders[i], _TIE_ORDER.index(i)))
        for i in order[:units]:
            floors[i] += 1
    return floors[0], floors[1], floors[2], floors[3]


# -------------------------------------------------------------------------- binary run rule


def _kl_bernoulli(x: float, t: float) -> float:
    """Kullback-Leibler divergence H(x, t) = x log(x/t) + (1-x) log((1-x)/(1-t)), 0 < t < 1.

    Written as (x-t)^2/(t(1-t)) + x*g((x-t)/t) + (1-x)*g((t-x)/(1-t)) with
    g(e) = log(1+e) - e, which has no cancellation when x is near t.
    """
    if x <= 0.0:
        return -math.log1p(-t)
    if x >= 1.0:
        return -math.log(t)
    d = x - t
    return d * d / (t * (1.0 - t)) + x * _log1pmx(d / t) + (1.0 - x) * _log1pmx(-d / (1.0 - t))


def _binary_safe_start(p: float, t: float, z: float, start: int, limit: int) -> int:
    """A size below which no N can decide a binary rule (see :func:`binary_rule_size`)."""
    target = z * z * (1.0 - 1e-6)  # the slack keeps the bound on the safe side of rounding
    n_lo = start
    for _ in range(200):
        half = 0.5 / n_lo + 1e-15
        worst = max(_kl_bernoulli(max(p - half, 0.0), t), _kl_bernoulli(min(p + half, 1.0), t))
        if worst <= 0.0:
            return n_lo
        need = target / (2.0 * worst)
        if need > limit + 1:
            return limit + 1
        nxt = math.ceil(need)
        if nxt <= n_lo:
            return n_lo
        n_lo = nxt
    return n_lo


def binary_rule_size(
    k: int,
    n: int,
    threshold: float,
    judge: Judge,
    level: float = 0.95,
    *,
    missing: int = 0,
    limit: int = DEFAULT_LIMIT,
    least: int = 0,
) -> SizeResult:
    """The smallest total N that would decide a ``min``/``max`` rule on a BINARY metric.

    ``judge`` is the rule (:func:`oloproof.policy.rules.threshold_judge`), ``threshold`` its
    bar, used only to skip sizes that cannot decide. Without missing cases this is
    :func:`_observed_size`. With ``missing`` cases held missing, N totals the cases of which
    the ``missing`` stay missing: N - missing are observed with round(p*(N - missing))
    passes, and N decides when the interval bounded for the missing cases
    (:func:`~oloproof.stats.intervals.clopper_pearson_bounded`, the one the policy uses)
    decides. Since that interval contains the plain Clopper–Pearson interval of the same
    observed cases, nothing below (first size deciding without missing) + missing can
    decide; from there each N is screened by the binomial tails at the two ends and checked
    exactly near the bar.

    ``least``: no total below it is taken (the fewest cases at which the missing ones are
    within the policy's ``max_missing``: below it the rule is held as incomplete).
    """
    if missing < 0:
        raise ValueError(f"missing must be >= 0, got {missing}")
    plain = _observed_size(k, n, threshold, judge, level, limit)
    if missing == 0 or plain.status in ("not_computable", "on_the_bar", "beyond_limit"):
        return plain
    assert plain.total is not None
    alpha = _check_level(level)
    screen = 0.5 * alpha * (1.0 + 1e-6) + 1e-300
    method = plain.method + ", the missing cases held missing"
    t = threshold
    total = max(plain.total + missing, n + missing, least)
    budget = 200_000
    while total <= limit and budget > 0:
        seen = total - missing
        kk = round_half_even(k * seen, n)
        if 0.0 < t < 1.0:
            lower_tail = binom_tails(kk - 1, total, t)[1]  # P(X >= kk)
            upper_tail = binom_tails(kk + missing, total, t)[0]  # P(X <= kk + missing)
            near = lower_tail <= screen or upper_tail <= screen
        else:
            near = True
        if near:
            interval = clopper_pearson_bounded(kk, seen, missing, level)
            state = judge(interval.lower, interval.upper)
            if state is not None:
                if total == n + missing:
                    return SizeResult(
                        "already_decided",
                        total=total,
                        more=0,
                        state_at_total=state,
                        method=method,
                    )
                return _sized(total, n + missing, state, method)
        total += 1
        budget -= 1
    return SizeResult("beyond_limit", method=method, reason=f"more than {total - 1} cases")


def _observed_size(
    k: int,
    n: int,
    threshold: float,
    judge: Judge,
    level: float,
    limit: int,
) -> SizeResult:
    """The smallest total N > n that would decide a ``min``/``max`` rule on a BINARY metric.

    With p = k/n, N cases are taken to hold round(p*N) passes (the exact rational value,
    rounded half to even like Python's ``round``), and N is "deciding" when the Clopper–Pearson
    interval at ``level`` of round(p*N) out of N decides the rule. Missing cases are not
    projected: the cases to come are assumed to resemble the observed ones.

    Decidedness is not monotone in N (the rounding of p*N makes it flicker near the
    answer), so the search cannot bisect. It goes in two steps:

    1. A safe start. Write X ~ Binomial(N, t). The rule is decided at N only if one tail of X
       beyond round(p*N) is at most alpha/2 (lower >= t iff P(X >= k) <= alpha/2, upper < t
       iff P(X <= k) < alpha/2, and the same for the max rule). By the inequalities of
       Zubkov & Serov (2013, "A complete proof of universal inequalities for the distribution
       function of the binomial law", Theory Probab. Appl. 57(3):539-544),
       Phi(-sqrt(2N H(k/N, t))) lies between those tails and the next ones, so a decision
       needs 2N H(k/N, t) >= z^2, z = Phi^-1(1 - alpha/2), where H is the Kullback-Leibler
       divergence between Bernoulli(k/N) and Bernoulli(t). Since |k/N - p| <= 1/(2N) and H is
       convex in its first argument, no N' in [N, z^2 / (2 M(N))) can decide, where M(N) is
       the largest H on [p - 1/(2N), p + 1/(2N)]; iterating this jump from N = n + 1 gives a
       start below which nothing decides.
    2. From there, every N is checked in turn. The two binomial tails at (N, round(p*N)) are
       carried from one N to the next by the pmf recurrences in O(1) (and recomputed exactly
       every few thousand steps); when one comes within a hair of alpha/2 the N is checked by
       computing the actual Clopper–Pearson interval, the same function the policy uses.

    The cost is a few microseconds per N between the safe start and the answer, which is
    within a few times 1/|p - t| of it: answers in the millions take well under a second.

    For 13 of 18 against ``min: 0.70`` at 95%, N = 1632 (1614 more); at N = 1629 the
    projected count 1176.5 rounds to 1176, which does not decide.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    alpha = _check_level(level)
    method = f"{CLOPPER_PEARSON} at {level:g}"
    if n == 0:
        return SizeResult("not_computable", method=method, reason="no case was observed")

    def state_at(passes: int, total: int) -> RuleState | None:
        interval = clopper_pearson(passes, total, level)
        return judge(interval.lower, interval.upper)

    now = state_at(k, n)
    if now is not None:
        return SizeResult("already_decided", total=n, more=0, state_at_total=now, method=method)
    if k / n == threshold:
        return SizeResult(
            "on_the_bar",
            method=method,
            reason="the observed rate equals the threshold, so no number of cases decides it",
        )
    if not 0.0 < threshold < 1.0:
        # Every threshold outside (0, 1) is either decided at once or on the bar (checked
        # above); this is only reached for non-finite input.
        return SizeResult("not_computable", method=method, reason="threshold outside (0, 1)")

    half_alpha = 0.5 * alpha
    z = -_z_quantile(half_alpha)  # not of 1 - half_alpha, which can round to 1
    t = threshold
    first = _binary_safe_start(k / n, t, z, n + 1, limit)
    if first > limit:
        return SizeResult("beyond_limit", method=method, reason=f"more than {limit} cases")

    # Step 2: walk N upwards, carrying F = P(X <= kk) and f = P(X = kk), X ~ Bin(N, t).
    screen = half_alpha * (1.0 + 1e-6) + 1e-300
    big_n = first
    floor_part, rem = divmod(k * big_n, n)
    kk = round_half_even(k * big_n, n)
    resync_every = 4096
    since_sync = resync_every  # forces an exact start
    cdf = pmf = 0.0
    one_minus_t = 1.0 - t
    ratio_up = t / one_minus_t
    while big_n <= limit:
        if since_sync >= resync_every or not (pmf > 0.0 and math.isfinite(pmf)):
            cdf = binom_tails(kk, big_n, t)[0]
            pmf = binom_pmf(kk, big_n, t)
            since_sync = 0
            if not pmf > 0.0:
                # Deep in a tail, where the recurrences underflow: check this N exactly.
                state = state_at(kk, big_n)
                if state is not None:
                    return _sized(big_n, n, state, method)
        upper_tail = 1.0 - cdf + pmf  # P(X >= kk)
        if cdf <= screen or upper_tail <= screen:
            state = state_at(kk, big_n)
            if state is not None:
                return _sized(big_n, n, state, method)
        # advance N -> N + 1 with kk fixed: P(X' <= kk) = P(X <= kk) - t P(X = kk)
        cdf -= t * pmf
        pmf *= one_minus_t * (big_n + 1) / (big_n + 1 - kk)
        big_n += 1
        since_sync += 1
        rem += k
        if rem >= n:
            rem -= n
            floor_part += 1
        twice = 2 * rem
        new_k = floor_part + 1 if twice > n or (twice == n and floor_part % 2 == 1) else floor_part
        if new_k != kk:
            # P(X' = kk + 1) from P(X' = kk)
            pmf *= ratio_up * (big_n - kk) / (kk + 1)
            cdf += pmf
            kk = new_k
        if cdf < 0.0:
            cdf = 0.0
        elif cdf > 1.0:
            cdf = 1.0
    return SizeResult("beyond_limit", method=method, reason=f"more than {limit} cases")


def _sized(
    total: int, n: int, state: RuleState, method: str, approximate: bool = False
) -> SizeResult:
    return SizeResult(
        "sized",
        total=total,
        more=total - n,
        state_at_total=state,
        approximate=approximate,
        method=method,
    )


# ------------------------------------------------------------------ approximate MEAN sizes


def _first_true_monotone(decides: Callable[[int], bool], low: int, limit: int) -> int | None:
    """Smallest N in [low, limit] with decides(N), for a predicate that stays true once true."""
    if decides(low):
        return low
    prev = low
    step = 1
    while True:
        probe = min(low + step, limit)
        if decides(probe):
            break
        if probe >= limit:
            return None
        prev = probe
        step *= 2
    lo, hi = prev, probe  # decides(lo) is false, decides(hi) is true
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if decides(mid):
            hi = mid
        else:
            lo = mid
    return hi


_SCAN_FIRST = 2000


def _t_size(
    centre: float,
    sd: float | None,
    n: int,
    judge: Judge,
    on_bar: bool,
    level: float,
    missing: int,
    value_range: tuple[float, float] | None,
    limit: int,
    method: str,
    least: int = 0,
) -> SizeResult:
    _check_level(level)
    if n < 2 or sd is None:
        return SizeResult(
            "not_computable",
            approximate=True,
            method=method,
            reason="at least two observed scores are needed to estimate their spread",
        )
    if not (math.isfinite(centre) and math.isfinite(sd) and sd >= 0.0):
        raise ValueError("mean and sd must be finite, with sd >= 0")
    if missing and value_range is None:
        return SizeResult(
            "not_computable",
            approximate=True,
            method=method,
            reason="missing cases and no declared range: no size bounds them",
        )

    def state_at(size: int) -> RuleState | None:
        # ``size`` cases in all, ``missing`` of them held missing at their worst case.
        seen = size - missing
        ss = sd * sd * (seen - 1)
        if missing and value_range is not None:
            lower, upper = worst_case_t_bounds(
                seen, centre, ss, missing, value_range[0], value_range[1], level
            )
        else:
            half = t_isf(0.5 * (1.0 - level), seen - 1) * sd / math.sqrt(seen)
            lower, upper = centre - half, centre + half
        return judge(lower, upper)

    total_now = n + missing
    now = state_at(total_now) if total_now >= least else None
    if now is not None:
        return SizeResult(
            "already_decided",
            total=total_now,
            more=0,
            state_at_total=now,
            approximate=True,
            method=method,
        )
    if on_bar:
        return SizeResult(
            "on_the_bar",
            approximate=True,
            method=method,
            reason="the observed mean equals the bar, so no number of cases decides it",
        )
    # With mean and spread fixed, the t half-width shrinks as N grows, and the worst case over
    # the missing values moves towards the observed mean, so past the first few sizes, once a
    # size decides, every larger one does: a doubling search then a bisection finds the
    # first. At the smallest sizes the worst case can move the other way (a numerical check
    # found it at 6 observed of a lopsided sample), so those are each tried in turn.
    found: int | None = None
    start = max(total_now + 1, least)
    scan_end = min(start - 1 + _SCAN_FIRST, limit)
    for size in range(start, scan_end + 1):
        if state_at(size) is not None:
            found = size
            break
    if found is None and scan_end < limit:
        found = _first_true_monotone(
            lambda size: state_at(size) is not None, scan_end + 1, limit
        )
    if found is None:
        return SizeResult(
            "beyond_limit", approximate=True, method=method, reason=f"more than {limit} cases"
        )
    state = state_at(found)
    assert state is not None
    return _sized(found, total_now, state, method, approximate=True)


def mean_rule_size(
    mean: float,
    sd: float | None,
    n: int,
    judge: Judge,
    on_bar: bool,
    level: float = 0.95,
    *,
    missing: int = 0,
    value_range: tuple[float, float] | None = None,
    limit: int = DEFAULT_LIMIT,
    least: int = 0,
) -> SizeResult:
    """Approximate smallest total N that would decide a ``min``/``max`` rule on a MEAN.

    Holds the observed mean and standard deviation fixed and asks when the t interval of
    N - ``missing`` such scores, bounded for the ``missing`` cases held missing at the worst
    case over ``value_range`` (as the policy bounds them), decides. Approximate, since the
    real mean and spread of the cases to come will differ; the result is labelled so
    (``approximate=True``). Needs n >= 2. ``least``: no total below it is taken (see
    :func:`binary_rule_size`).
    """
    return _t_size(
        mean,
        sd,
        n,
        judge,
        on_bar,
        level,
        missing,
        value_range,
        limit,
        f"{STUDENT_T} at {level:g}, approximate",
        least,
    )


def _to_unit(
    scores: Sequence[float], value_range: tuple[float, float]
) -> tuple[list[float], float, float]:
    lo, hi = float(value_range[0]), float(value_range[1])
    width = hi - lo
    return [min(1.0, max(0.0, (x - lo) / width)) for x in scores], lo, width


#: The largest total a MEAN plan on the betting interval searches.
BETTING_LIMIT = 1_000_000


def _smallest(decides: Callable[[int], bool], low: int, limit: int) -> int | None:
    """The smallest size in [low, limit] for which ``decides`` holds, taking it to hold for
    every larger size once it holds (a doubling search, then bisection); None beyond."""
    if decides(low):
        return low
    below, size = low, low
    while True:
        size = min(limit, max(size * 2, size + 1))
        if decides(size):
            break
        if size >= limit:
            return None
        below = size
    while size - below > 1:
        mid = (below + size) // 2
        if decides(mid):
            size = mid
        else:
            below = mid
    return size


def betting_rule_size(
    scores: Sequence[float],
    missing: int,
    value_range: tuple[float, float],
    judge: Judge,
    on_bar: bool,
    level: float = 0.95,
    *,
    limit: int = BETTING_LIMIT,
    least: int = 0,
) -> SizeResult:
    """Approximate smallest total N that would decide a ``min``/``max`` rule on a MEAN with
    a declared range, by the interval that decides it.

    N cases are taken to hold the ``missing`` cases of the run, still missing and bounded
    at their worst, and N - missing scores with exactly the observed mix
    (:func:`oloproof.stats.betting.projected_bounds`); N decides when that betting interval
    decides the rule. The search doubles then bisects, taking a size that decides to be
    followed by larger ones that do (the projected interval only narrows as N grows).
    Approximate: the scores to come will not hold the observed mix exactly, and the running
    intersection of a real sequence moves at random around the projected one. ``least``:
    no total below it is taken (see :func:`binary_rule_size`)."""
    from oloproof.stats.betting import BETTING, projected_bounds

    method = f"{BETTING} at {level:g}, projected from the observed mix of scores, approximate"
    if not scores:
        return SizeResult("not_computable", approximate=True, method=method,
                          reason="no score was observed")
    units, lo, width = _to_unit(scores, value_range)
    if on_bar:
        return SizeResult(
            "on_the_bar", approximate=True, method=method,
            reason="the observed mean equals the bar, so no number of cases decides it",
        )

    def state_at(total: int) -> RuleState | None:
        a, b = projected_bounds(units, total, missing, level)
        return judge(lo + a * width, lo + b * width)

    now = len(scores) + missing
    found = _smallest(lambda total: state_at(total) is not None, max(now + 1, least), limit)
    if found is None:
        return SizeResult("beyond_limit", approximate=True, method=method,
                          reason=f"more than {limit} cases")
    state = state_at(found)
    assert state is not None
    return _sized(found, now, state, method, approximate=True)


def betting_assurance_size(
    scores: Sequence[float],
    missing: int,
    value_range: tuple[float, float],
    threshold: float,
    target: float,
    level: float = 0.95,
    *,
    limit: int = BETTING_LIMIT,
    least: int = 0,
) -> AssuranceResult:
    """Approximate smallest total N at which a ``min``/``max`` rule on a MEAN with a declared
    range is decided with probability >= ``target``, if the scores to come are drawn from
    the observed ones.

    The betting interval of N cases (:func:`oloproof.stats.betting.projected_bounds`, the
    missing cases held missing at their worst) moves with the mean of the N - missing
    scores observed then. The n scores observed already keep their values (as a run's
    BINARY assurance keeps its outcomes); only the f = N - missing - n scores to come are
    drawn, so that mean is normal around the observed one with sd spread x sqrt(f) /
    (N - missing) (the central limit theorem), and it moves both bounds with it, scaled by
    (N - missing)/N. So the rule is decided with probability
    Phi((L - t)/sd) + Phi((t - U)/sd), the first term the chance the interval lies above the
    bar t, the second below it, with sd = spread x sqrt(f) / N. (Earlier versions drew all
    N - missing scores afresh, sd = spread x sqrt(N - missing) / N, and sized the first
    configuration of the tests at 73 cases where 67 do.) Approximate: the interval's own
    randomness (its running intersection) is left out, which makes the figure
    conservative; tests/stats/test_stats_betting_plan.py checks it against simulated suites,
    the observed scores kept, decided by the interval itself. ``least``: no total below it
    is taken (see :func:`binary_rule_size`)."""
    from oloproof.stats.betting import BETTING, projected_bounds

    if not 0.0 < target < 1.0:
        raise ValueError(f"the assurance must lie strictly between 0 and 1, got {target!r}")
    method = (f"normal approximation around the {BETTING} interval at {level:g},"
              " projected from the observed mix of scores")
    n = len(scores)
    if n < 2:
        return AssuranceResult("not_computable", target, method=method,
                               reason="at least two observed scores are needed for their spread")
    units, lo, width = _to_unit(scores, value_range)
    t = (threshold - lo) / width
    mean = math.fsum(units) / n
    spread = math.sqrt(math.fsum((u - mean) ** 2 for u in units) / (n - 1))
    normal = _z_cdf

    def probability(total: int) -> float:
        a, b = projected_bounds(units, total, missing, level)
        seen = total - missing
        sd = spread * math.sqrt(seen - n) / total
        if sd <= 0.0:
            return 1.0 if (a >= t or b < t) else 0.0
        return min(1.0, normal((a - t) / sd) + normal((t - b) / sd))

    now = n + missing
    found = _smallest(lambda total: probability(total) >= target, max(now + 1, least), limit)
    if found is None:
        return AssuranceResult("beyond_limit", target, method=method,
                               reason=f"more than {limit} cases")
    return AssuranceResult("sized", target, total=found, more=found - now,
                           probability=probability(found), method=method)


def _z_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def paired_mean_rule_size(
    mean_difference: float,
    sd_difference: float | None,
    n: int,
    judge: Judge,
    on_bar: bool,
    level: float = 0.95,
    limit: int = DEFAULT_LIMIT,
    *,
    least: int = 0,
) -> SizeResult:
    """Approximate smallest number of pairs N > n that would decide a comparison on a MEAN.

    The paired t analogue of :func:`mean_rule_size`: the mean and standard deviation of the
    per-case differences are held fixed, and N is the first size at which
    d +/- t(1-alpha/2, N-1) * sd / sqrt(N) decides the rule. Approximate; needs n >= 2.
    ``least``: no number of pairs below it is taken (see :func:`binary_rule_size`).
    """
    return _t_size(
        mean_difference,
        sd_difference,
        n,
        judge,
        on_bar,
        level,
        0,
        None,
        limit,
        f"paired Student t, 1908 at {level:g}, approximate",
        least,
    )


# ------------------------------------------------------------------- paired BINARY sizes


def _wilson_distance_bounds(
    k_min: int, k_max: int, n1: int, n2: int, z: float
) -> tuple[float, float, float, float]:
    """Bounds, over k in [k_min, k_max] and N in [n1, n2], of the distances from p = k/N to
    the Wilson bounds: (low_min, low_max, up_min, up_max) for p - l and u - p.

    p - l = [z^2 (p - 1/2)/N + z S] / (1 + z^2/N) and u - p = [z^2 (1/2 - p)/N + z S] /
    (1 + z^2/N), with S = sqrt(p(1-p)/N + z^2/(4N^2)); each piece is bounded separately.
    """
    z2 = z * z
    p_min = max(0.0, k_min / n2)
    p_max = min(1.0, k_max / n1)
    pq_ends = (p_min * (1.0 - p_min), p_max * (1.0 - p_max))
    pq_min = min(pq_ends)
    pq_max = 0.25 if p_min <= 0.5 <= p_max else max(pq_ends)
    s_min = math.sqrt(pq_min / n2 + z2 / (4.0 * n2 * n2))
    s_max = math.sqrt(pq_max / n1 + z2 / (4.0 * n1 * n1))
    den_min = 1.0 + z2 / n2
    den_max = 1.0 + z2 / n1

    def lin_min(c: float) -> float:  # min of z^2 c / N over N in [n1, n2]
        return z2 * c / (n1 if c < 0 else n2)

    def lin_max(c: float) -> float:
        return z2 * c / (n2 if c < 0 else n1)

    low_min = max(0.0, lin_min(p_min - 0.5) + z * s_min) / den_max
    low_max = max(0.0, lin_max(p_max - 0.5) + z * s_max) / den_min
    up_min = max(0.0, lin_min(0.5 - p_max) + z * s_min) / den_max
    up_max = max(0.0, lin_max(0.5 - p_min) + z * s_max) / den_min
    return low_min, low_max, up_min, up_max


def _min_quadratic(a_lo: float, a_hi: float, b_lo: float, b_hi: float, phi: float) -> float:
    """min of A^2 - 2 phi A B + B^2 over the box, for 0 <= phi <= 1 (a convex function)."""

    def q(a: float, b: float) -> float:
        return a * a - 2.0 * phi * a * b + b * b

    candidates = [q(a_lo, b_lo), q(a_lo, b_hi), q(a_hi, b_lo), q(a_hi, b_hi)]
    for b in (b_lo, b_hi):
        a = min(max(phi * b, a_lo), a_hi)
        candidates.append(q(a, b))
    for a in (a_lo, a_hi):
        b = min(max(phi * a, b_lo), b_hi)
        candidates.append(q(a, b))
    if a_lo <= 0.0 <= a_hi and b_lo <= 0.0 <= b_hi:
        candidates.append(0.0)
    return max(0.0, min(candidates))


def _paired_block_undecidable(
    cells: tuple[int, int, int, int],
    n: int,
    n1: int,
    n2: int,
    z: float,
    judge: Judge,
) -> bool:
    """True when no N in [n1, n2] can decide the rule, by bounding the Newcombe limits.

    The apportioned cells at N lie between floor(cell*N/n) and ceil(cell*N/n). From those
    ranges the difference D, the Wilson distances and phi are bounded, and with
    Q = A^2 - 2 phi A B + B^2 decreasing in phi (A, B >= 0):
    lower <= D_max - sqrt(min Q) and upper >= D_min + sqrt(min Q').
    """
    lo_cells = [(x * n1) // n for x in cells]
    hi_cells = [-((-x * n2) // n) for x in cells]
    a_lo, b_lo, c_lo, d_lo = lo_cells
    a_hi, b_hi, c_hi, d_hi = hi_cells
    diff_hi = b_hi - c_lo
    diff_lo = b_lo - c_hi
    d_max = max(diff_hi / n1, diff_hi / n2)
    d_min = min(diff_lo / n1, diff_lo / n2)
    # phi <= max(0, ad - bc - N/2) / sqrt(margins); with an empty margin possible, use 1.
    margin_lo = (a_lo + b_lo) * (c_lo + d_lo) * (a_lo + c_lo) * (b_lo + d_lo)
    cross_hi = a_hi * d_hi - b_lo * c_lo - n1 / 2.0
    if cross_hi <= 0.0:
        phi_max = 0.0
    elif margin_lo <= 0:
        phi_max = 1.0
    else:
        phi_max = min(1.0, cross_hi / math.sqrt(margin_lo))
    cand = _wilson_distance_bounds(a_lo + b_lo, a_hi + b_hi, n1, n2, z)
    base = _wilson_distance_bounds(a_lo + c_lo, a_hi + c_hi, n1, n2, z)
    # lower = D - sqrt((p1-l1)^2 - 2 phi (p1-l1)(u2-p2) + (u2-p2)^2)
    q_low = _min_quadratic(cand[0], cand[1], base[2], base[3], phi_max)
    # upper = D + sqrt((p2-l2)^2 - 2 phi (p2-l2)(u1-p1) + (u1-p1)^2)
    q_up = _min_quadratic(base[0], base[1], cand[2], cand[3], phi_max)
    slack = 1e-9
    lower_max = max(d_max - math.sqrt(q_low), -1.0) + slack
    upper_min = min(d_min + math.sqrt(q_up), 1.0) - slack
    # Every decision is monotone in the interval (policy/rules.py), so one is possible in
    # the block only if the most favourable corner (lower_max, upper_min) makes it.
    return judge(lower_max, upper_min) is None


def paired_table_state(
    judge: Judge,
    z: float,
    table: Sequence[int],
    fills: Sequence[tuple[int, int, int, int]] = (),
) -> RuleState | None:
    """The rule's state on a paired table as ``compare`` gives it with the dropped pairs
    ``fills`` at their worst: a PASS that the table plus a fill does not PASS is held."""
    a, b, c, d = table
    state = judge(*_newcombe_bounds(a, b, c, d, z))
    if state == RuleState.PASS:
        for fa, fb, fc, fd in fills:
            if judge(*_newcombe_bounds(a + fa, b + fb, c + fc, d + fd, z)) != RuleState.PASS:
                return None
    return state


def paired_fewest_failable(judge: Judge, level: float, limit: int = DEFAULT_LIMIT) -> int | None:
    """The fewest pairs on which a comparison rule on a rate can FAIL, or None beyond
    ``limit``: the first N at which Newcombe's interval of the N pairs most against the
    candidate (it fails every case the baseline passes: 0, 0, N, 0) is judged FAIL.

    ``compare`` holds a PASS on fewer pairs as ``evidence_cannot_fail`` (policy/compare.py,
    hold_unfailable_pairs), so no table of fewer pairs is decided there: two pairs both
    passing under a non-inferiority margin of 50 points are sized at 4 by the scaled table,
    which compare holds; 8 is the first size it can decide. That table's upper limit is
    -1 + sqrt(2) z^2 / (N + z^2) (phi is 0, an empty margin), falling with N, so the
    sizes that can FAIL are a range from it up, found by bisection."""
    z = -_z_quantile(0.5 * _check_level(level))

    def fails(n: int) -> bool:
        return judge(*_newcombe_bounds(0, 0, n, 0, z)) == RuleState.FAIL

    return _first_true_monotone(fails, 1, limit)


def paired_binary_rule_size(
    both_pass: int,
    cand_only: int,
    base_only: int,
    both_fail: int,
    judge: Judge,
    on_bar: bool,
    level: float = 0.95,
    limit: int = DEFAULT_LIMIT,
    *,
    fills: Sequence[tuple[int, int, int, int]] = (),
    least: int = 0,
) -> SizeResult:
    """The smallest number of pairs N > n that would decide a comparison on a BINARY metric.

    The four observed cells are scaled to N by the largest-remainder method (:func:`apportion`:
    each cell within one of its exact share, summing to N), and N decides when
    :func:`~oloproof.stats.paired.paired_proportion_difference` at ``level`` on the scaled
    table decides the rule (``judge``, :func:`oloproof.policy.rules.comparison_judge`);
    ``on_bar`` says the observed difference sits exactly on the rule's bar.

    As for binary run rules, rounding makes decidedness flicker, so the search checks sizes in
    order. It skips whole blocks of sizes when bounds on the Newcombe limits over the block
    (from the range each scaled cell can take in it) show that none of them can decide; the
    blocks grow while that holds and shrink to single sizes near the answer, where each size
    is computed exactly. The skipping never changes the answer, only the time.

    ``fills``: the pairs dropped as missing, filled at their worst as ``compare`` bounds
    them (:func:`oloproof.policy.compare.missing_pair_fills`): they stay dropped, and a
    PASS counts only if the table plus each fill still PASSes, as ``compare`` holds it
    otherwise (``missing_pairs_could_fail``). ``least``: no number of pairs below it is
    taken (the fewest at which the dropped pairs are within the policy's ``max_missing``).
    """
    cells = (both_pass, cand_only, base_only, both_fail)
    if any(x < 0 for x in cells):
        raise ValueError(f"paired counts must be >= 0, got {cells}")
    alpha = _check_level(level)
    method = f"{NEWCOMBE_PAIRED} at {level:g}"
    n = sum(cells)
    if n == 0:
        return SizeResult("not_computable", method=method, reason="no pair was observed")
    z = -_z_quantile(0.5 * alpha)
    # Below the fewest pairs that can FAIL it, compare decides no table (a PASS is held).
    failable = paired_fewest_failable(judge, level, limit)
    if failable is None:
        return SizeResult("beyond_limit", method=method, reason=f"more than {limit} cases")

    def state_at(total: int) -> RuleState | None:
        if total < failable:
            return None
        scaled = cells if total == n else apportion(cells, total)
        return paired_table_state(judge, z, scaled, fills)

    now = state_at(n) if n >= least else None
    if now is not None:
        return SizeResult("already_decided", total=n, more=0, state_at_total=now, method=method)
    if on_bar:
        return SizeResult(
            "on_the_bar",
            method=method,
            reason="the observed difference sits exactly on the bar, so no number of pairs "
            "decides it",
        )
    size = max(n + 1, failable, least)
    block = 2
    while size <= limit:
        if block >= 2:
            end = min(size + block - 1, limit)
            if _paired_block_undecidable(cells, n, size, end, z, judge):
                size = end + 1
                block = min(block * 2, max(2, size // 4))
                continue
            block //= 4
            if block >= 2:
                continue
        state = state_at(size)
        if state is not None:
            return _sized(size, n, state, method)
        size += 1
        block = 2
    return SizeResult("beyond_limit", method=method, reason=f"more than {limit} cases")


# ---------------------------------------------------------------------------- assurance


@dataclass(frozen=True)
class AssuranceResult:
    """The smallest total that decides a rule with a given probability.

    ``status`` is ``sized`` (``total`` cases in all, ``more`` beyond those run, decide the rule
    with probability ``probability`` >= the target), ``beyond_limit`` or ``not_computable``.
    """

    status: SizeStatus
    target: float
    total: int | None = None
    more: int | None = None
    probability: float | None = None
    method: str = ""
    reason: str = ""


def binary_decision_probability(
    total: int,
    rate: float,
    threshold: float,
    judge: Judge,
    level: float = 0.95,
    *,
    missing: int = 0,
    kept: tuple[int, int] = (0, 0),
) -> float:
    """P(the rule is decided) when ``total`` cases are run, ``missing`` of them stay missing
    and each observed one passes with probability ``rate``, independently; ``kept`` =
    (passes, cases): cases already run and observed, whose outcomes stay as they are.

    Exact: with (k, n) = ``kept``, k + X passes, X ~ Binomial(total - missing - n, rate),
    and the sum of P(X = x) over every x whose interval (Clopper–Pearson bounded for the
    missing cases, the policy's) the ``judge`` (a min/max rule at ``threshold``) decides.
    The decided counts form {<= a} and {>= b}, because both bounds grow with the count, so
    the sum is two binomial tails.
    """
    k, n = kept
    seen = total - missing
    if seen < n or not 0 <= k <= n:
        raise ValueError("total must be at least missing plus the cases kept")
    a, b = _decided_cuts(seen, missing, threshold, judge, level, None)
    return _tails_probability(seen - n, rate, a - k, b - k)


def _tails_probability(seen: int, rate: float, a: int, b: int) -> float:
    if rate <= 0.0:
        return 1.0 if a >= 0 or b <= 0 else 0.0
    if rate >= 1.0:
        return 1.0 if b <= seen or a >= seen else 0.0
    if a >= seen or b <= 0:
        return 1.0
    low = binom_tails(a, seen, rate)[0] if a >= 0 else 0.0
    high = binom_tails(b - 1, seen, rate)[1] if b <= seen else 0.0
    return min(1.0, low + high)


def _decided_cuts(
    seen: int,
    missing: int,
    threshold: float,
    judge: Judge,
    level: float,
    start: tuple[int, int] | None,
) -> tuple[int, int]:
    """(a, b): the largest x deciding from below and the smallest deciding from above
    (-1 and seen + 1 when there is none), walking from ``start`` when given."""
    alpha = _check_level(level)
    total = seen + missing
    screen = 0.5 * alpha * (1.0 + 1e-6) + 1e-300
    t = threshold

    clear = 0.5 * alpha * (1.0 - 1e-6)

    def decided(x: int) -> bool:
        # Clopper-Pearson's bounds are where a binomial tail equals alpha/2, so comparing
        # the tails at t with alpha/2 compares the bounds with t; only a tail within a hair
        # of alpha/2 is settled by computing the interval itself.
        if 0.0 < t < 1.0:
            lower_tail = binom_tails(x - 1, total, t)[1] if x > 0 else 1.0  # P(Y >= x)
            upper_tail = binom_tails(x + missing, total, t)[0]  # P(Y <= x + missing)
            if lower_tail > screen and upper_tail > screen:
                return False  # the interval holds t strictly inside: no min/max decides
            if lower_tail < clear or upper_tail < clear:
                return True  # a bound is strictly beyond t: both min and max decide
        interval = clopper_pearson_bounded(x, seen, missing, level)
        return judge(interval.lower, interval.upper) is not None

    middle = min(max(round(t * seen), 0), seen)
    if decided(middle):
        # Rare (t at 0 or 1, or tiny sizes): look at every x.
        flags = [decided(x) for x in range(seen + 1)]
        a = max((x for x in range(seen + 1) if flags[x] and x <= middle), default=-1)
        b = min((x for x in range(seen + 1) if flags[x] and x > middle), default=seen + 1)
        if all(flags):
            return seen, seen + 1
        return a, b
    if start is None:
        lo, hi = middle, seen + 1  # decided(lo) false; smallest decided in (lo, hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if decided(mid):
                hi = mid
            else:
                lo = mid
        b = hi
        lo, hi = -1, middle  # largest decided in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if decided(mid):
                lo = mid
            else:
                hi = mid
        a = lo
        return a, b
    a, b = start
    b = min(max(b, middle + 1), seen + 1)
    while b - 1 > middle and decided(b - 1):
        b -= 1
    while b <= seen and not decided(b):
        b += 1
    a = max(min(a, middle - 1), -1)
    while a + 1 < middle and decided(a + 1):
        a += 1
    while a >= 0 and not decided(a):
        a -= 1
    return a, b


def _kl_root(t: float, target: float, above: bool, start: float) -> float | None:
    """The q on the ``above`` side of t (q > t, else q < t) with H(q, t) = ``target``, by
    Newton's method from ``start`` kept inside a bracket; None when even q = 1 (or 0) does
    not reach it."""
    end = 1.0 if above else 0.0
    if _kl_bernoulli(end, t) < target:
        return None
    lo, hi = (t, 1.0) if above else (0.0, t)
    q = min(max(start, lo), hi)
    if not lo < q < hi:
        q = 0.5 * (lo + hi)
    for _ in range(100):
        h = _kl_bernoulli(q, t) - target
        # H is increasing in q above t and decreasing below it
        if (h > 0.0) == above:
            hi = q
        else:
            lo = q
        slope = math.log(q * (1.0 - t) / (t * (1.0 - q))) if 0.0 < q < 1.0 else 0.0
        step = q - h / slope if slope != 0.0 else 0.5 * (lo + hi)
        if abs(step - q) <= 1e-13 * q or hi - lo < 1e-15:
            return step
        q = step if lo < step < hi else 0.5 * (lo + hi)
    return q


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _at_most_above(k: int, n: int, p: float) -> float:
    """An upper bound on P(X <= k), X ~ Binomial(n, p), 0 < p < 1 (Zubkov & Serov 2013:
    P(X <= k) <= Phi(sign((k + 1)/n - p) sqrt(2 n H((k + 1)/n, p))))."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    q = (k + 1) / n
    root = math.sqrt(2.0 * n * _kl_bernoulli(q, p))
    return _phi(root if q > p else -root)


def _at_least_above(b: int, n: int, p: float) -> float:
    """An upper bound on P(X >= b) = 1 - P(X <= b - 1), from Zubkov & Serov's lower bound
    P(X <= k) >= Phi(sign(k/n - p) sqrt(2 n H(k/n, p)))."""
    if b <= 0:
        return 1.0
    if b > n:
        return 0.0
    q = (b - 1) / n
    root = math.sqrt(2.0 * n * _kl_bernoulli(q, p))
    return _phi(-root if q > p else root)


def binary_assurance_size(
    k: int,
    n: int,
    threshold: float,
    judge: Judge,
    target: float,
    level: float = 0.95,
    *,
    missing: int = 0,
    limit: int = 200_000,
    least: int = 0,
) -> AssuranceResult:
    """The smallest total N > n + missing that decides a BINARY run rule with probability
    >= ``target`` if the true pass rate equals the observed k/n (and the ``missing`` cases
    stay missing), by :func:`binary_decision_probability` at each N (exact, no
    simulation). The k passes of the n cases run are kept: only the N - n - missing cases
    to come are drawn (drawing all N afresh, as earlier versions did, answers another
    question, and put 25 of 27 at 62 cases for 80% where 62 decide it 89% of the time). The decision probability is not monotone in N, so every N is looked at
    from the smallest up; ``limit`` caps the search.

    Most N are passed over by a bound rather than the exact sum (issue 33: 701 of 1000
    against 0.70 took 345 s to answer ``beyond_limit`` with the exact sum at every N). With
    Y ~ Binomial(N, t), an outcome x is decided from above only if P(Y >= x) <= alpha/2 and
    from below only if P(Y <= x + missing) < alpha/2 (the Clopper-Pearson duality), and the
    inequalities of Zubkov & Serov (2013, Theory Probab. Appl. 57:539-544) bound those
    tails by Phi(+-sqrt(2 N H(x/N, t))), H the Kullback-Leibler divergence: so the decided
    outcomes lie at or below a cut a+ and at or above a cut b-, found by solving
    2 N H(q, t) = z^2. The same inequalities bound P(k + X <= a+) + P(k + X >= b-) for
    the outcomes X ~ Binomial(N - missing - n, rate) of the cases to come from above; only where that bound reaches the target is
    the exact sum computed. Sizes are passed over in blocks of about sqrt(N)/8 where the
    bound holds for the whole block (both cuts grow with N, and so do the outcomes).
    ``least``: no total below it is taken (see :func:`binary_rule_size`).
    """
    if not 0.0 < target < 1.0:
        raise ValueError(f"the assurance must lie strictly between 0 and 1, got {target!r}")
    method = (
        f"exact binomial sum over the outcomes, {CLOPPER_PEARSON} at {level:g}"
    )
    if n == 0:
        return AssuranceResult("not_computable", target, method=method,
                               reason="no case was observed")
    rate = k / n
    alpha = _check_level(level)
    t = threshold
    screen = 0.0 < t < 1.0 and 0.0 < rate < 1.0
    z2 = _z_quantile(0.5 * alpha) ** 2 * (1.0 - 1e-9)  # on the safe side of rounding
    q_up = t + 0.5 * (1.0 - t)
    q_down = 0.5 * t
    def cut_bounds(size: int) -> tuple[int, int]:
        """(a+, b-) at ``size`` cases: every decided outcome is <= a+ or >= b-."""
        nonlocal q_up, q_down
        need = z2 / (2.0 * size)
        up = _kl_root(t, need, True, q_up)
        down = _kl_root(t, need, False, q_down)
        q_up = up if up is not None else q_up
        q_down = down if down is not None else q_down
        b = size + 1 if up is None else max(0, math.ceil(up * size) - 1)
        a = -1 if down is None else math.floor(down * size) + 1 - missing
        return a, b

    cuts: tuple[int, int] | None = None
    total = max(n + missing + 1, least)
    while total <= limit:
        seen = total - missing
        if screen:
            # A block of sizes at once: both cut bounds grow with the size (n q(n) grows,
            # q solving 2 n H(q, t) = z^2), and X grows with it, so over [total, last]
            # P(X <= a+) <= P(X_total <= a+(last)) and P(X >= b-) <= P(X_last >= b-(total)).
            last = min(limit, total + math.isqrt(total) // 8)
            if last > total:
                a_end = cut_bounds(last)[0]
                b_start = cut_bounds(total)[1]
                first_new, last_new = seen - n, last - missing - n
                bound = (_at_most_above(min(a_end, seen) - k, first_new, rate)
                         + _at_least_above(b_start - k, last_new, rate))
                if bound < target * (1.0 - 1e-9):
                    total = last + 1
                    cuts = None
                    continue
            a, b = cut_bounds(total)
            bound = (_at_most_above(min(a, seen) - k, seen - n, rate)
                     + _at_least_above(b - k, seen - n, rate))
            if bound < target * (1.0 - 1e-9):
                total += 1
                cuts = None
                continue
        cuts = _decided_cuts(seen, missing, threshold, judge, level, cuts)
        # The k passes of the n cases run stay; only the seen - n cases to come are drawn.
        probability = _tails_probability(seen - n, rate, cuts[0] - k, cuts[1] - k)
        if probability >= target:
            return AssuranceResult(
                "sized", target, total=total, more=total - n - missing,
                probability=probability, method=method,
            )
        total += 1
    return AssuranceResult("beyond_limit", target, method=method,
                           reason=f"more than {limit} cases")
