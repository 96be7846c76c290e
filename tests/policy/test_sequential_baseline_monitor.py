"""The sequential monitor with a baseline (``run --sequential --baseline RUN``): its
comparison rules are fed the pairs in the run's order, the run is ``done`` only once they
are decided too, a case the baseline does not hold makes no pair, and a pair missing in
either run enters at its worst. In process, on plain records."""

from __future__ import annotations

from oloproof.enums import MetricKind
from oloproof.policy.compare import CaseOutcome
from oloproof.policy.sequential import Baseline, Monitor, PairedTest, SequentialSpec
from oloproof.project.config import ComparePolicy, CompareRule, IntervalRule, ReleasePolicy

METRICS = [{"criterion": "label", "kind": MetricKind.BINARY}]
RELEASE = ReleasePolicy(rules=[IntervalRule(id="floor", metric="label", min=0.5)])
TOTAL = 1000


def _baseline(kind: str = "superiority", margin: float = 0.0,
              wrong_every: int = 5, held: int = TOTAL) -> Baseline:
    """A baseline that got case i wrong when i % wrong_every == 0, holding the first
    ``held`` cases."""
    policy = ComparePolicy(rules=[CompareRule(id="better", kind=kind, metric="label",
                                              margin=margin)])
    outcomes = {"label": {f"c{i}": CaseOutcome("OBSERVED", i % wrong_every != 0)
                          for i in range(held)}}
    return Baseline("run_base", policy, outcomes, {"label": 1.0})


def _feed(monitor: Monitor, passes: bool = True) -> int:
    for i in range(TOTAL):
        if monitor.done:
            break
        monitor.feed(None, {"label": ("OK", passes, None)}, f"c{i}")
    return monitor.position


def test_the_run_is_done_only_once_the_comparison_is_decided_too() -> None:
    alone = Monitor(RELEASE, METRICS, SequentialSpec(0, TOTAL))
    with_base = Monitor(RELEASE, METRICS, SequentialSpec(0, TOTAL), _baseline())
    released = _feed(alone)
    stopped = _feed(with_base)
    assert with_base.results["floor"].position == released  # the release rule as before
    pair = with_base.paired["better"]
    assert pair.result.state == "PASS" and pair.result.position == stopped
    assert released < stopped < TOTAL
    # The test that decided it is the plain paired test fed the same differences.
    reference = PairedTest("superiority", 0.0, 1.0, 0.95, TOTAL)
    states = [reference.add(1.0 if i % 5 == 0 else 0.0) for i in range(stopped)]
    assert states[-1] == "PASS" and states[-2] is None
    assert pair.diffs == [1.0 if i % 5 == 0 else 0.0 for i in range(stopped)]


def test_cases_the_baseline_lacks_make_no_pair_and_missing_pairs_count_at_their_worst() -> None:
    monitor = Monitor(RELEASE, METRICS, SequentialSpec(0, TOTAL), _baseline(held=500))
    for i in range(10):
        monitor.feed(None, {"label": ("ERROR", None, None)}, f"c{i}")  # candidate missing
    for i in range(600, 610):
        monitor.feed(None, {"label": ("OK", True, None)}, f"c{i}")  # not in the baseline
    pair = monitor.paired["better"]
    assert pair.result.n == 10 and pair.result.missing == 10
    assert pair.diffs == [None] * 10
    # A candidate that fails on every case cannot look better by failing: it FAILs.
    worse = Monitor(RELEASE, METRICS, SequentialSpec(0, TOTAL),
                    _baseline("non_inferiority", 0.05, wrong_every=1000))
    _feed(worse, passes=False)
    assert worse.paired["better"].result.state == "FAIL"


def test_a_comparison_that_could_never_fail_is_found() -> None:
    monitor = Monitor(RELEASE, METRICS, SequentialSpec(0, 12), _baseline())
    assert "could not FAIL it within the 3 cases" in (monitor.unfailable_comparison(3) or "")
    assert Monitor(RELEASE, METRICS, SequentialSpec(0, TOTAL),
                   _baseline()).unfailable_comparison(TOTAL) is None
