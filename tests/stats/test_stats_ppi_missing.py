"""The corrected (PPI) interval with missing verdicts: every completion, exactly.

A case without a judge's verdict could have been a pass or a fail. ``ppi_mean_bounds``
gives the smallest lower and the largest upper bound of the small-sample interval over
every completion, without trying them all (the proof is in its docstring); here it is held
to trying them all, on many random small configurations, and the decision built on it is
simulated with verdicts missing where it hurts most.
"""

from __future__ import annotations

import itertools
import math
import random
import time

import pytest
from scipy import stats

from oloproof.evidence import LabelledVerdicts
from oloproof.policy.judges import corrected_rate
from oloproof.stats.ppi import ppi_mean, ppi_mean_bounds


def _interval(y: list[float], f: list[float], fu: list[float], level: float = 0.95,
              lam: float = 1.0) -> tuple[float, float]:
    """The small-sample interval, unclipped, from docs/validating-a-judge.md: t with n - 1
    degrees of freedom, the rectifier padded with +1 and three -lam below, three +1 and one
    -lam above."""
    n, big_n = len(y), len(fu)

    def var(xs: list[float]) -> float:
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)

    rect = [a - lam * b for a, b in zip(y, f, strict=True)]
    imputed = [lam * x for x in fu]
    estimate = sum(imputed) / big_n + sum(rect) / n
    spread = var(imputed) / big_n
    t = float(stats.t.ppf(1 - (1 - level) / 2, n - 1))
    low = math.sqrt(spread + var([*rect, 1.0, -lam, -lam, -lam]) / n)
    high = math.sqrt(spread + var([*rect, 1.0, 1.0, 1.0, -lam]) / n)
    return estimate - t * low, estimate + t * high


def _every_count(y: list[float], f: list[float | None], fu: list[float | None],
                 level: float = 0.95, lam: float = 1.0, *, ends_only: bool = False
                 ) -> tuple[float, float]:
    """Lowest lower and highest upper bound over every count of passes filled in on each
    group of missing verdicts: labelled cases the person passes, fails, unlabelled (with
    ``ends_only``, the counts 0 and all of each group only)."""
    seen = [(a, b) for a, b in zip(y, f, strict=True) if b is not None]
    m1 = sum(1 for a, b in zip(y, f, strict=True) if b is None and a == 1)
    m0 = sum(1 for a, b in zip(y, f, strict=True) if b is None and a == 0)
    seen_u = [x for x in fu if x is not None]
    mu = len(fu) - len(seen_u)
    lowest, highest = math.inf, -math.inf
    counts = [sorted({0, m}) if ends_only else range(m + 1) for m in (m1, m0, mu)]
    for a, b, c in itertools.product(*counts):
        lab = [*seen, *[(1.0, 1.0)] * a, *[(1.0, 0.0)] * (m1 - a), *[(0.0, 1.0)] * b,
               *[(0.0, 0.0)] * (m0 - b)]
        lo, hi = _interval([p for p, _ in lab], [v for _, v in lab],
                           [*seen_u, *[1.0] * c, *[0.0] * (mu - c)], level, lam)
        lowest, highest = min(lowest, lo), max(highest, hi)
    return lowest, highest


def _config(rng: random.Random, n: int, big_n: int, p_missing: float
            ) -> tuple[list[float], list[float | None], list[float | None]]:
    p, sens, spec = rng.uniform(0.05, 0.95), rng.uniform(0.3, 1), rng.uniform(0.3, 1)
    y = [float(rng.random() < p) for _ in range(n)]
    f: list[float | None] = [
        None if rng.random() < p_missing else float(rng.random() < (sens if a else 1 - spec))
        for a in y]
    fu: list[float | None] = [
        None if rng.random() < p_missing else float(rng.random() < p * sens + (1 - p) * (1 - spec))
        for _ in range(big_n)]
    return y, f, fu


def test_the_reference_is_the_runtime_interval() -> None:
    rng = random.Random(1)
    for _ in range(50):
        y, f, fu = _config(rng, rng.randint(2, 40), rng.randint(2, 60), 0.0)
        lo, hi = _interval(y, f, fu)  # type: ignore[arg-type]
        iv = ppi_mean(y, f, fu).interval  # type: ignore[arg-type]
        assert iv.lower == pytest.approx(max(0.0, lo), abs=1e-12)
        assert iv.upper == pytest.approx(min(1.0, hi), abs=1e-12)


@pytest.mark.slow  # measured 2.6 s
def test_the_bounds_are_those_of_the_worst_completion_on_random_configurations() -> None:
    """2,000 random small configurations (2-12 labelled, 2-14 unlabelled cases, up to 60%
    of the verdicts missing, level 80-99%, lam = 1 and, the proof allowing it, lam in
    [0, 1]): the exact search equals the extreme over every count of filled-in passes.
    Neither extreme is always at the ends of each group (every missing verdict of a group
    a pass, or every one a fail): in some configurations it lies strictly inside."""
    rng = random.Random(20260501)
    inside = 0
    for i in range(2000):
        y, f, fu = _config(rng, rng.randint(2, 12), rng.randint(2, 14), rng.uniform(0, 0.6))
        level = rng.choice([0.8, 0.9, 0.95, 0.99])
        lam = 1.0 if i % 4 else rng.uniform(0, 1)
        got = ppi_mean_bounds(y, f, fu, level, lam)
        lo, hi = _every_count(y, f, fu, level, lam)
        assert got.lower == pytest.approx(lo, abs=1e-9), (y, f, fu, level, lam)
        assert got.upper == pytest.approx(hi, abs=1e-9), (y, f, fu, level, lam)
        ends_lo, ends_hi = _every_count(y, f, fu, level, lam, ends_only=True)
        inside += ends_lo > lo + 1e-9 or ends_hi < hi - 1e-9
    assert inside >= 50, inside


def test_only_the_counts_matter_verdict_by_verdict() -> None:
    """On the smallest configurations every completion verdict by verdict (2^missing):
    the same extremes as by counts."""
    rng = random.Random(7)
    for _ in range(200):
        y, f, fu = _config(rng, rng.randint(2, 6), rng.randint(2, 6), 0.5)
        holes = [("l", i) for i, x in enumerate(f) if x is None]
        holes += [("u", i) for i, x in enumerate(fu) if x is None]
        lowest, highest = math.inf, -math.inf
        for fill in itertools.product([0.0, 1.0], repeat=len(holes)):
            ff, ffu = list(f), list(fu)
            for (where, i), v in zip(holes, fill, strict=True):
                (ff if where == "l" else ffu)[i] = v
            lo, hi = _interval(y, ff, ffu)  # type: ignore[arg-type]
            lowest, highest = min(lowest, lo), max(highest, hi)
        got = ppi_mean_bounds(y, f, fu)
        assert got.lower == pytest.approx(lowest, abs=1e-9)
        assert got.upper == pytest.approx(highest, abs=1e-9)


def _verdicts(y: list[float], f: list[float | None], fu: list[float | None]
              ) -> LabelledVerdicts:
    verdicts: dict[str, bool | None] = {f"l{i}": None if v is None else v == 1
                                        for i, v in enumerate(f)}
    verdicts |= {f"u{i}": None if v is None else v == 1 for i, v in enumerate(fu)}
    return LabelledVerdicts("helpful", verdicts, {f"l{i}": a == 1 for i, a in enumerate(y)})


def _audit_case() -> tuple[list[float], list[float | None], list[float | None]]:
    """The audit's case: 32 labels (21 cases both pass, 1 the judge passes and the person
    fails, 2 both fail; 5 the person passes and 3 she fails have no verdict) and 109 other
    cases (78 judge passes, 7 fails, 24 without a verdict)."""
    lab = ([(1.0, 1.0)] * 21 + [(0.0, 1.0)] + [(0.0, 0.0)] * 2 + [(1.0, None)] * 5
           + [(0.0, None)] * 3)
    fu: list[float | None] = [1.0] * 78 + [0.0] * 7 + [None] * 24
    return [a for a, _ in lab], [b for _, b in lab], fu


def test_the_corrected_interval_holds_every_completion_of_the_audit_case() -> None:
    """Every missing verdict a pass, or every one a fail, gave lower bounds of 62.9% or
    more; the worst completion, passes on the 8 labelled cases and fails on the 24 others,
    40.7%."""
    y, f, fu = _audit_case()
    corrected, _, _ = corrected_rate(_verdicts(y, f, fu), 0.95)
    assert corrected is not None and corrected.missing == 32
    lo, hi = _every_count(y, f, fu)
    assert corrected.lower == pytest.approx(max(0.0, lo), abs=1e-12)
    assert corrected.upper == pytest.approx(min(1.0, hi), abs=1e-12)
    assert round(corrected.lower, 3) == 0.407


def test_large_counts_are_exact_and_quick() -> None:
    """400 labels (150 without a verdict) and 5,000 other cases (2,000 without): a few
    thousand evaluations, not 76 x 76 x 2001; no completion tried at random or at a corner
    of the box goes beyond the bounds."""
    rng = random.Random(3)
    y, f, fu = _config(rng, 400, 5000, 0.0)
    f = [None if i % 8 < 3 else v for i, v in enumerate(f)]
    fu = [None if i % 5 < 2 else v for i, v in enumerate(fu)]
    start = time.perf_counter()
    got = ppi_mean_bounds(y, f, fu)
    assert time.perf_counter() - start < 2.0
    holes = [i for i, v in enumerate(f) if v is None]
    holes_u = [i for i, v in enumerate(fu) if v is None]
    fills = [(p, q) for p in (0.0, 1.0) for q in (0.0, 1.0)] + [
        (rng.random(), rng.random()) for _ in range(20)]
    for share, share_u in fills:
        ff, ffu = list(f), list(fu)
        for i in holes:
            ff[i] = float(rng.random() < share)
        for i in holes_u:
            ffu[i] = float(rng.random() < share_u)
        lo, hi = _interval(y, ff, ffu)  # type: ignore[arg-type]
        assert got.lower <= lo + 1e-12 and got.upper >= hi - 1e-12


def _old_hull(y: list[float], f: list[float | None], fu: list[float | None]) -> float:
    """The lower bound before: every missing verdict a pass, or every one a fail."""
    lows = []
    for fill in (0.0, 1.0):
        ff = [fill if v is None else v for v in f]
        ffu = [fill if v is None else v for v in fu]
        lows.append(ppi_mean(y, ff, ffu).interval.lower)
    return min(lows)


@pytest.mark.parametrize(("p", "n", "big_n", "q"), [
    pytest.param(0.7, 30, 300, 0.5, marks=pytest.mark.slow),  # measured 1.5 s
    pytest.param(0.85, 50, 300, 0.8, marks=pytest.mark.slow),  # measured 3.4 s
])
def test_the_decision_keeps_its_level_with_verdicts_missing_where_it_hurts(
        p: float, n: int, big_n: int, q: float) -> None:
    """Simulated: a judge of 90% sensitivity and 80% specificity, labels on a random subset;
    a verdict goes missing (with probability q) where a pass on a labelled case and a fail
    on an unlabelled one would have been, the two ways every-pass and every-fail each get
    one side wrong. 1,500 runs through corrected_rate: its lower bound above the true rate
    at most 2.5% + 3 Monte Carlo standard errors of the time (measured 0.2% and 0.3%); the
    old hull's lay above it 34% and 82% of the time."""
    rng = random.Random(int(p * 1000) + n)
    reps = 1500
    misses = old_misses = 0
    for _ in range(reps):
        y = [float(rng.random() < p) for _ in range(n)]
        f = [float(rng.random() < (0.9 if a else 0.2)) for a in y]
        fu = [float(rng.random() < (0.9 if rng.random() < p else 0.2)) for _ in range(big_n)]
        hidden = [None if v == 1 and rng.random() < q else v for v in f]
        hidden_u = [None if v == 0 and rng.random() < q else v for v in fu]
        corrected, _, _ = corrected_rate(_verdicts(y, hidden, hidden_u), 0.95)
        assert corrected is not None
        misses += corrected.lower > p
        old_misses += _old_hull(y, hidden, hidden_u) > p
    limit = 0.025 + 3 * math.sqrt(0.025 * 0.975 / reps)
    assert misses / reps <= limit, misses / reps
    assert old_misses / reps > limit, old_misses / reps  # what the old hull did
