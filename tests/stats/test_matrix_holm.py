"""The matrix's family: Holm's step-down procedure run on intervals (analysis/matrix.py),
checked against statsmodels' Holm on the p-values those intervals invert, and the bounded
paired interval checked by simulation."""

from __future__ import annotations

import gc
import random

import pytest

from oloproof.analysis.matrix import (
    BETTER,
    BOUNDED_PAIRED,
    NOT_SEPARATED,
    SEQUENTIAL_PAIRED,
    WORSE,
    MatrixComparison,
    _interval,
    _Test,
    holm_intervals,
)
from oloproof.enums import MetricKind
from oloproof.policy.compare import OBSERVED, CaseOutcome
from oloproof.stats.paired import paired_mean_difference

scipy_stats = pytest.importorskip("scipy.stats")
multitest = pytest.importorskip("statsmodels.stats.multitest")


def _t_compute(diffs: list[float], level: float) -> MatrixComparison:
    d = paired_mean_difference(diffs, [0.0] * len(diffs), level)
    assert d.interval is not None
    lower, upper = d.interval.lower, d.interval.upper
    verdict = BETTER if lower > 0 else WORSE if upper < 0 else NOT_SEPARATED
    return MatrixComparison("v", "m", MetricKind.MEAN, d.method, len(diffs), 0, d.estimate,
                            lower, upper, level, verdict)


# Eight setups in the fast tier, all forty in the slow one (0.4 s each).
@pytest.mark.parametrize(
    "seed", [*range(8), *(pytest.param(s, marks=pytest.mark.slow) for s in range(8, 40))]
)
def test_holm_on_intervals_rejects_what_statsmodels_holm_rejects(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # statsmodels' Holm ends with gc.collect(), memory housekeeping that is no part of its
    # result: a full collection of the test process each time, most of this test's time in
    # a suite's worker. It is left out here; the p-values and the rejections are the same.
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    rng = random.Random(seed)
    k = rng.randint(2, 7)
    tests = []
    for _ in range(k):
        n = rng.randint(8, 40)
        shift = rng.choice([0.0, 0.0, 0.3, 0.6, -0.5, 1.0])
        tests.append([rng.gauss(shift, 1.0) for _ in range(n)])
    ours = holm_intervals(tests, _t_compute, 0.95)
    pvalues = [float(scipy_stats.ttest_1samp(t, 0.0).pvalue) for t in tests]
    reject = multitest.multipletests(pvalues, alpha=0.05, method="holm")[0]
    assert [c.verdict != NOT_SEPARATED for c in ours] == list(reject), (pvalues, ours)
    for c, t in zip(ours, tests, strict=True):
        if c.verdict != NOT_SEPARATED:
            assert (c.verdict == BETTER) == (sum(t) > 0)


def _bounded_test(cand: list[float], base: list[float]) -> _Test:
    ids = [f"c{i}" for i in range(len(cand))]
    return _Test(
        "v", "score", MetricKind.MEAN, (0.0, 1.0), ids,
        {i: CaseOutcome(OBSERVED, score=x) for i, x in zip(ids, cand, strict=True)},
        {i: CaseOutcome(OBSERVED, score=x) for i, x in zip(ids, base, strict=True)},
    )


def test_a_ranged_metric_uses_the_bounded_interval_where_t_collapses() -> None:
    # Three pairs that all differ by 0.5: Student t gives [0.5, 0.5], which no honest
    # interval on three cases can; the betting interval stays wide.
    found = _interval(_bounded_test([1.0, 1.0, 1.0], [0.5, 0.5, 0.5]), 0.95)
    assert found.method == BOUNDED_PAIRED
    assert found.lower is not None and found.upper is not None
    assert found.lower < 0.5 < found.upper and found.upper - found.lower > 0.3


@pytest.mark.slow
def test_the_bounded_paired_interval_covers_at_its_level() -> None:
    rng = random.Random(11)
    misses = 0
    reps = 300
    for _ in range(reps):
        cand = [min(1.0, max(0.0, rng.betavariate(2, 3))) for _ in range(25)]
        base = [min(1.0, max(0.0, rng.betavariate(3, 3))) for _ in range(25)]
        truth = 2 / 5 - 3 / 6
        found = _interval(_bounded_test(cand, base), 0.9)
        assert found.lower is not None and found.upper is not None
        misses += not found.lower <= truth <= found.upper
    # At 90% the miss rate is at most 10%; the binomial's 99.9% bound over 300 draws is
    # about 0.165, so a valid interval fails this with probability under 0.1%.
    assert misses / reps <= 0.165, misses


# -- a sequential matrix: the comparisons read at the runs' stopping times ---------------


def _sequential_test(cand: list[bool], base: list[bool], horizon: int,
                     family_level: float = 0.95) -> _Test:
    ids = [f"c{i}" for i in range(len(cand))]
    return _Test(
        "v", "correct", MetricKind.BINARY, None, ids,
        {i: CaseOutcome(OBSERVED, passed=x) for i, x in zip(ids, cand, strict=True)},
        {i: CaseOutcome(OBSERVED, passed=x) for i, x in zip(ids, base, strict=True)},
        ordered=ids, horizon=horizon, family_level=family_level,
    )


def test_sequential_comparison_intervals_are_nested_in_the_level() -> None:
    """Holm's procedure with intervals needs an interval at a higher level to contain the
    one at a lower level: the bets are tuned at the family's level, only the threshold
    follows the step's level."""
    rng = random.Random(5)
    for _ in range(6):  # six setups (about 0.1 s each): the fast tier stays fast
        n = rng.randint(10, 120)
        cand = [rng.random() < 0.8 for _ in range(n)]
        base = [rng.random() < 0.6 for _ in range(n)]
        test = _sequential_test(cand, base, 200)
        found = [_interval(test, 1 - 0.05 / k) for k in (1, 2, 3, 5)]
        assert all(f.method == SEQUENTIAL_PAIRED for f in found)
        for wider, narrower in zip(found[1:], found, strict=False):
            assert wider.lower is not None and narrower.lower is not None
            assert wider.upper is not None and narrower.upper is not None
            assert wider.lower <= narrower.lower + 1e-12
            assert wider.upper >= narrower.upper - 1e-12


def test_a_missing_pair_counts_at_its_worst_in_a_sequential_comparison() -> None:
    cand = [True] * 40
    base = [False] * 40
    clean = _interval(_sequential_test(cand, base, 40), 0.95)
    test = _sequential_test(cand, base, 40)
    test.candidate["c0"] = CaseOutcome("MISSING")
    holed = _interval(test, 0.95)
    assert holed.pairs == 39 and holed.dropped == 1
    assert clean.lower is not None and holed.lower is not None and holed.lower < clean.lower


@pytest.mark.slow
def test_a_sequential_comparison_read_at_a_data_dependent_time_keeps_its_level() -> None:
    """Two variants of the same rate, looked at after every 20 pairs and stopped at the
    first look that separates them (the worst stopping a run could make): the confidence
    sequence says 'better' or 'worse' at most about 10% of the time at level 90%, where
    Newcombe's fixed-n interval, looked at the same way, errs far more often (why a
    sequential matrix does not use it)."""
    from oloproof.stats.paired import paired_proportion_difference

    rng = random.Random(2024)
    reps, horizon, level = 150, 200, 0.90
    ours = fixed = 0
    for _ in range(reps):
        cand = [rng.random() < 0.7 for _ in range(horizon)]
        base = [rng.random() < 0.7 for _ in range(horizon)]
        looks = range(20, horizon + 1, 20)
        ours += any(
            _interval(_sequential_test(cand[:n], base[:n], horizon, level), level).verdict
            != NOT_SEPARATED for n in looks)
        hit = False
        for n in looks:
            cells = [0, 0, 0, 0]
            for c, b in zip(cand[:n], base[:n], strict=True):
                cells[(0 if c else 2) + (0 if b else 1)] += 1
            d = paired_proportion_difference(cells[0], cells[1], cells[2], cells[3], level)
            if d.interval is not None and (d.interval.lower > 0 or d.interval.upper < 0):
                hit = True
                break
        fixed += hit
    # A valid procedure errs at most 10%; Binomial(150, 0.1)'s 99.9% quantile is 26.
    assert ours <= 26, ours
    assert fixed > ours, (fixed, ours)


def test_a_rate_whose_release_rules_are_ceilings_ranks_lower_as_better() -> None:
    """A regex that passes when a forbidden phrase appears, `max: 0.3`: fewer passes are
    better, in the matrix as in a comparison's check (analysis/compare.py metric_better)."""
    from oloproof.analysis.matrix import metric_direction

    ceiling = {"rules": [{"metric": "promise", "max": 0.3}]}
    assert metric_direction("promise", "BINARY", "regex", ceiling) == "lower"
    both = {"rules": [{"metric": "promise", "max": 0.3}, {"metric": "promise", "min": 0.1}]}
    assert metric_direction("promise", "BINARY", "regex", both) == "higher"
    flaky = {"rules": [{"metric": "promise", "max": 0.1, "aggregate": "flaky_share"}]}
    assert metric_direction("promise", "BINARY", "regex", flaky) == "higher"
    assert metric_direction("promise", "BINARY", "regex", None) == "higher"
    assert metric_direction("err", "MEAN", "absolute_error", None) == "lower"
