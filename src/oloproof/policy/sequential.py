"""Sequential decisions: every rule decided by an anytime-valid test, case after case, in the
run's seeded order (docs/sequential-decisions.md).

A sequential run shuffles its cases by a seed stored with it (:func:`sequential_order`) and
feeds their outcomes to the tests **in that order only**: a case that finished early waits
until every case before it in the order has finished. The run stops scheduling new cases as
soon as every rule is decided; the calls already in flight finish and are stored, but the
decision reads the prefix of the order up to the case that decided the last rule, and no
further. So the decision is a function of the outcomes of that prefix alone: the same at
``concurrency.system`` 1 and 64, whatever finished first, and ``gate`` recomputes it from
the stored evidence with the same :class:`Monitor`.

What each rule is decided by (stats/sequential.py):

- ``min``/``max`` on a BINARY metric: the beta-binomial mixture e-process, each side at
  (1 - level)/2 as the two-sided fixed-n interval is;
- ``min``/``max`` on a MEAN metric with a declared ``range``: the betting capital at the
  threshold, its grid of bets fixed by the suite's size;
- ``observed_count``: its FAIL (more failures than ``max_failures``) is final as soon as it
  is seen; its PASS needs every case of the suite, so such a rule keeps the run going to its
  end unless it fails.

Rules in a ``holm`` or ``bonferroni`` family share its family-wise error by Bonferroni: each
of k rules at 1 - alpha/k (Holm's step-down is not carried over to tests looked at after
every case). A rule on a group (``group: {lang: fr}``) is fed that group's cases only, in the
same order. What cannot be decided this way is refused when the run is loaded
(:func:`refusal`): a MEAN without a range (Student t is not anytime-valid), repeated trials,
``estimate: corrected`` and ``each_group``.

Pure: no I/O; the runner feeds it events, ``gate`` feeds it stored rows.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from hashlib import sha256
from typing import TYPE_CHECKING, Any

from oloproof._records import dataclass, field
from oloproof.enums import MetricKind, RuleState
from oloproof.evidence import Outcome, classify_outcome, group_name
from oloproof.stats.sequential import (
    DEFAULT_MARGIN,
    SEQUENTIAL_BINARY,
    SEQUENTIAL_MEAN,
    BinaryTest,
    MeanTest,
)

if TYPE_CHECKING:
    from oloproof.project.config import ReleasePolicy

__all__ = [
    "DEFAULT_SEED",
    "SEQUENTIAL_PAIRED",
    "Baseline",
    "Monitor",
    "PairedTest",
    "RuleResult",
    "SequentialSpec",
    "fails_within",
    "refusal",
    "sequential_order",
    "sequential_order_key",
]

#: The name a sequential comparison rule's method goes by (its detail, ``rule_decided``).
SEQUENTIAL_PAIRED = "sequential paired betting test"

#: The seed a sequential run shuffles with unless one is given: fixed, so that a rerun asks
#: for the same cases in the same order and the cache answers them.
DEFAULT_SEED = 0


@dataclass(frozen=True)
class SequentialSpec:
    """How a sequential run was run, stored with it: the seed of its order, the design
    margin of its BINARY tests, and the size of its suite (the horizon of its MEAN bets)."""

    seed: int
    cases_total: int
    margin: float = DEFAULT_MARGIN

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "cases_total": self.cases_total, "margin": self.margin,
                "methods": {"BINARY": SEQUENTIAL_BINARY, "MEAN": SEQUENTIAL_MEAN}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SequentialSpec:
        return cls(int(data["seed"]), int(data["cases_total"]),
                   float(data.get("margin", DEFAULT_MARGIN)))


def sequential_order_key(seed: int, case_id: str) -> bytes:
    """Where a case falls in a sequential run's order: a hash of the seed and the id. It
    carries no information about the case's outcome, and no call's latency can move it."""
    return sha256(f"oloproof sequential order 1\0{seed}\0".encode() + case_id.encode()).digest()


def sequential_order(case_ids: Sequence[str], seed: int) -> list[str]:
    """``case_ids`` in the order a sequential run with ``seed`` feeds them to its tests."""
    return sorted(case_ids, key=lambda c: sequential_order_key(seed, c))


#: How a sequential run is turned off, as the refusals below advise it by default.
WITHOUT = "run without --sequential"


def refusal(
    policy: ReleasePolicy, metrics: Sequence[Mapping[str, Any]], trials: int,
    off: str = WITHOUT,
) -> str | None:
    """Why the policy cannot be decided sequentially (one line), or None. ``off``: how the
    user turns sequential decisions off (they may have turned them on in oloproof.yaml)."""
    if trials > 1:
        return ("a sequential run makes one trial per case: repeated trials (trials:"
                f" {trials}) are decided on whole cases by a fixed-n interval; {off},"
                " or with trials: 1")
    kinds = {str(m.get("criterion")): m for m in metrics}
    for rule in policy.rules:
        if getattr(rule, "each_group", False):
            return (f"rule {rule.id}: each_group makes one rule per group the run meets, and a"
                    " sequential run meets only the cases it needs; name the groups with"
                    " group: {KEY: VALUE}, one rule each")
        if getattr(rule, "aggregate", None) not in (None, "mean"):
            return f"rule {rule.id}: aggregate needs repeated trials, which a sequential run does not make"
        if getattr(rule, "estimate", "judge") == "corrected":
            return (f"rule {rule.id}: estimate: corrected (a judge corrected by human labels)"
                    f" has no anytime-valid test here; {off}")
        m = kinds.get(rule.metric, {})
        if rule.kind != "observed_count" and m.get("kind") == MetricKind.MEAN and not m.get("range"):
            return (f"rule {rule.id}: metric {rule.metric} is a MEAN without a declared range,"
                    " and only a bounded mean has an anytime-valid test; declare range:"
                    " [LOW, HIGH] on its evaluator")
    return None


@dataclass
class RuleResult:
    """One rule of a sequential run: decided (``state`` PASS or FAIL) at the ``position``-th
    case of the run's order, after ``n`` cases of its own scope, with log e-value
    ``log_e``; or undecided (``state`` None) after all the cases fed."""

    rule: str
    metric: str
    method: str
    level: float
    state: str | None = None
    n: int = 0
    position: int = 0
    log_e: float = 0.0
    threshold: float | None = None
    direction: str | None = None
    max_failures: int | None = None
    failures: int = 0
    missing: int = 0

    @property
    def e_value(self) -> float:
        """The e-value; inf when a case ruled the null out (a pass against ``max: 0``)."""
        return math.inf if self.log_e == math.inf else math.exp(min(self.log_e, 700.0))

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "metric": self.metric, "method": self.method,
                "state": self.state, "n": self.n, "position": self.position,
                "e_value": min(self.e_value, sys.float_info.max), "level": self.level}


@dataclass
class Baseline:
    """A stored run a sequential candidate is compared with while it runs (``run
    --sequential --baseline RUN``): its id, the comparison policy (compare.yaml) whose
    rules the candidate's tests decide, and per metric, per case id, the baseline's outcome
    (``status`` OBSERVED, MISSING or EXCLUDED, with ``passed`` or ``score``: policy/compare.py
    ``CaseOutcome``). ``widths``: per compared metric, the half-width w of its differences
    (1 for a rate, the declared range's width for a bounded mean)."""

    run_id: str
    policy: Any
    outcomes: Mapping[str, Mapping[str, Any]]
    widths: Mapping[str, float]


@dataclass
class _Pair:
    """One comparison rule of a sequential run against its baseline: its test and the
    differences it was fed (None: a pair missing in a run), in the run's order."""

    result: RuleResult
    kind: MetricKind
    test: PairedTest
    diffs: list[float | None] = field(default_factory=list)


@dataclass
class _Tracked:
    result: RuleResult
    criterion: str
    group: tuple[str, str] | None  # (key, the group's name) for a rule on one group
    kind: MetricKind
    test: BinaryTest | MeanTest | None  # None: an observed_count rule


@dataclass
class Monitor:
    """Feeds a sequential run's cases, in its order, to each rule's test; ``done`` once
    every rule is decided."""

    policy: Any
    metrics: Sequence[Mapping[str, Any]]
    spec: SequentialSpec
    baseline: Baseline | None = None
    position: int = 0
    tracked: list[_Tracked] = field(default_factory=list)
    pairs: list[_Pair] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._track_comparisons()
        level = float(self.policy.confidence_level)
        alpha = 1.0 - level
        sizes: dict[str, int] = {}
        families = getattr(self.policy, "families", {}) or {}
        for rule in self.policy.rules:
            fam = getattr(rule, "family", None)
            if fam is not None and families[fam].multiplicity != "none":
                sizes[fam] = sizes.get(fam, 0) + 1
        kinds = {str(m.get("criterion")): m for m in self.metrics}
        for rule in self.policy.rules:
            m = kinds[rule.metric]
            kind = MetricKind(m["kind"])
            fam = getattr(rule, "family", None)
            rule_level = 1.0 - alpha / sizes[fam] if fam in sizes else level
            group = None
            metric = rule.metric
            if getattr(rule, "group", None):
                (key, value), = rule.group.items()
                metric = group_name(rule.metric, key, value)
                group = (key, metric)
            if rule.kind == "observed_count":
                result = RuleResult(rule.id, metric, "observed count", rule_level,
                                    max_failures=int(rule.max_failures))
                self.tracked.append(_Tracked(result, rule.metric, group, kind, None))
                continue
            direction, t = ("min", float(rule.min)) if rule.min is not None else (
                "max", float(rule.max))
            test: BinaryTest | MeanTest
            if kind == MetricKind.BINARY:
                test = BinaryTest(t, direction, rule_level, self.spec.margin)
                method = SEQUENTIAL_BINARY
            else:
                rng = m["range"]
                test = MeanTest(t, direction, (float(rng[0]), float(rng[1])), rule_level,
                                self.spec.cases_total)
                method = SEQUENTIAL_MEAN
            result = RuleResult(rule.id, metric, method, rule_level, threshold=t,
                                direction=direction)
            self.tracked.append(_Tracked(result, rule.metric, group, kind, test))

    def _track_comparisons(self) -> None:
        """A comparison rule per rule of the baseline's policy, each a paired test at the
        comparison policy's level, its bets fixed by the suite's size."""
        if self.baseline is None:
            return
        cmp_policy = self.baseline.policy
        level = float(cmp_policy.confidence_level)
        kinds = {str(m.get("criterion")): m for m in self.metrics}
        for rule in cmp_policy.rules:
            test = PairedTest(str(rule.kind), float(rule.margin or 0.0),
                              float(self.baseline.widths[rule.metric]), level,
                              self.spec.cases_total)
            result = RuleResult(rule.id, rule.metric, SEQUENTIAL_PAIRED, level,
                                threshold=float(rule.margin or 0.0))
            kind = MetricKind(kinds[rule.metric]["kind"])
            self.pairs.append(_Pair(result, kind, test))

    def unfailable_comparison(self, pairs: int) -> str | None:
        """Why a comparison rule could never FAIL within ``pairs`` pairs (the cases the
        suite and the baseline share), had every pair gone the candidate's worst way: one
        line, or None (ALLOW is earned, as for the release rules)."""
        for pair in self.pairs:
            probe = PairedTest(pair.test.kind, float(pair.result.threshold or 0.0),
                               pair.test.width, pair.result.level, self.spec.cases_total)
            worst = -pair.test.width  # every pair lost: below any bar, so a FAIL
            if not any(probe.add(worst) == RuleState.FAIL for _ in range(pairs)):
                return (f"comparison rule {pair.result.rule}: the sequential paired test could"
                        f" not FAIL it within the {pairs} cases the suite and the baseline"
                        " share even if the candidate lost every pair, so it could only pass"
                        " or stay undecided: add cases, or run without --sequential and"
                        " compare the runs")
        return None

    def unfailable(
        self, scope: Mapping[str, int], off: str = WITHOUT
    ) -> tuple[RuleResult, str] | None:
        """The first rule that could never FAIL over the cases of its scope (``scope``: rule
        id to the cases the suite holds for it), had every one of them failed, or scored at
        its worst, and why (one line); or None. ALLOW is earned: a rule that can only pass
        or stay undecided is refused, as the fixed-n check refuses it (policy/can_fail.py).
        ``off`` as for :func:`refusal`."""
        for tracked in self.tracked:
            test, result = tracked.test, tracked.result
            if test is None:
                continue
            cases = scope.get(result.rule, self.spec.cases_total)
            value_range = (None if isinstance(test, BinaryTest)
                           else (test.lo, test.lo + test.width))
            if not fails_within(result, cases, self.spec.margin, self.spec.cases_total,
                                value_range):
                return result, (
                    f"rule {result.rule}: the sequential test could not FAIL it within the"
                    f" {cases} cases of its scope even if every one failed, so it could only"
                    f" pass or stay undecided: add cases, or {off}")
        return None

    @property
    def done(self) -> bool:
        return (all(t.result.state is not None for t in self.tracked)
                and all(p.result.state is not None for p in self.pairs))

    @property
    def results(self) -> dict[str, RuleResult]:
        """The release rules' results (the comparison rules' are in :attr:`paired`)."""
        return {t.result.rule: t.result for t in self.tracked}

    @property
    def paired(self) -> dict[str, _Pair]:
        """Each comparison rule's test, result and the differences it was fed."""
        return {p.result.rule: p for p in self.pairs}

    def feed(
        self, metadata: Any, judgments: Mapping[str, tuple[str, bool | None, float | None]],
        case_id: str | None = None,
    ) -> list[RuleResult]:
        """The next case of the order: its metadata and, per criterion, its stored
        ``(status, passed, score)`` (``case_id`` pairs it with the baseline's). Returns the
        rules this case decided."""
        self.position += 1
        decided = self._feed_pairs(case_id, judgments)
        for tracked in self.tracked:
            result = tracked.result
            if result.state is not None:
                continue
            if tracked.group is not None:
                key, name = tracked.group
                value = metadata.get(key) if isinstance(metadata, Mapping) else None
                if group_name(tracked.criterion, key, value) != name:
                    continue
            status, passed, score = judgments.get(tracked.criterion, ("MISSING", None, None))
            outcome = classify_outcome(tracked.kind, status, passed, score)
            if outcome is Outcome.EXCLUDED:
                continue
            result.n += 1
            if tracked.test is None:  # observed_count: a failure over the budget is final
                if outcome is Outcome.MISSING:
                    result.missing += 1
                elif not passed:
                    result.failures += 1
                if result.max_failures is not None and result.failures > result.max_failures:
                    result.state = RuleState.FAIL
            else:
                if outcome is Outcome.MISSING:
                    value_in: Any = None
                elif tracked.kind == MetricKind.BINARY:
                    value_in = bool(passed)
                else:
                    value_in = float(score) if score is not None else None
                result.state = tracked.test.add(value_in)
                result.log_e = tracked.test.log_e
            if result.state is not None:
                result.position = self.position
                decided.append(result)
        return decided

    def _feed_pairs(
        self, case_id: str | None,
        judgments: Mapping[str, tuple[str, bool | None, float | None]],
    ) -> list[RuleResult]:
        decided: list[RuleResult] = []
        if self.baseline is None or case_id is None:
            return decided
        for pair in self.pairs:
            result = pair.result
            if result.state is not None:
                continue
            base = self.baseline.outcomes.get(result.metric, {}).get(case_id)
            if base is None:
                continue  # a case the baseline did not store: no pair
            status, passed, score = judgments.get(result.metric, ("MISSING", None, None))
            mine = classify_outcome(pair.kind, status, passed, score)
            if Outcome.EXCLUDED in (mine, base.status):
                continue
            result.n += 1
            diff: float | None = None
            if mine is Outcome.OBSERVED and base.status == Outcome.OBSERVED:
                if pair.kind == MetricKind.BINARY:
                    diff = float(bool(passed)) - float(bool(base.passed))
                else:
                    diff = float(score or 0.0) - float(base.score or 0.0)
            else:
                result.missing += 1
            pair.diffs.append(diff)
            result.state = pair.test.add(diff)
            result.log_e = pair.test.log_e
            if result.state is not None:
                result.position = self.position
                decided.append(result)
        return decided


def fails_within(
    result: RuleResult, cases: int, margin: float, horizon: int,
    value_range: tuple[float, float] | None = None,
) -> bool:
    """Whether the sequential test of ``result``'s rule (a ``min``/``max`` rule) would FAIL
    it within ``cases`` cases had every one gone against it: failed a floor or passed a
    ceiling (``value_range`` None: a rate), or scored at the end of the range on the
    threshold's far side (a MEAN, its bets fixed by ``horizon``)."""
    t, direction = float(result.threshold or 0.0), str(result.direction)
    probe: BinaryTest | MeanTest
    worst: Any
    if value_range is None:
        probe, worst = BinaryTest(t, direction, result.level, margin), direction != "min"
    else:
        lo, hi = value_range
        probe = MeanTest(t, direction, (lo, hi), result.level, horizon)
        worst = lo if direction == "min" else hi
    return any(probe.add(worst) is not None for _ in range(cases))


# -- comparisons ------------------------------------------------------------------------


class PairedTest:
    """A comparison rule decided sequentially on the per-case differences candidate −
    baseline, fed pair by pair in the candidate's order (docs/sequential-decisions.md).

    Each difference lies in [−w, w] (w = 1 for a rate, the range's width for a bounded
    mean), so the betting capital of stats/sequential.py ``MeanTest`` on that range tests
    its mean against the rule's bar: ``superiority`` (margin δ) PASSes once the mean is
    shown above δ and FAILs once it is shown at or below it; ``non_inferiority`` the same
    at −δ; ``equivalence`` PASSes once it is shown inside (−δ, δ) (both one-sided tests
    passed) and FAILs once shown wholly outside. A pair whose case is missing in either run
    enters each side at its worst (−w for the side that would pass, +w for the other): a
    candidate cannot look better by failing."""

    def __init__(self, kind: str, margin: float, width: float, level: float,
                 horizon: int) -> None:
        self.kind = kind
        self.width = width
        self.horizon = horizon
        rng = (-width, width)
        if kind == "equivalence":
            self.tests = [MeanTest(-margin, "min", rng, level, horizon),
                          MeanTest(margin, "max", rng, level, horizon)]
        else:
            bar = margin if kind == "superiority" else -margin
            self.tests = [MeanTest(bar, "min", rng, level, horizon)]
        self.n = 0
        self.state: str | None = None
        self.log_e = 0.0

    def add(self, difference: float | None) -> str | None:
        if self.state is not None:
            return self.state
        self.n += 1
        states = [t.add(difference) for t in self.tests]
        self.log_e = max(t.log_e for t in self.tests)
        if any(s == RuleState.FAIL for s in states):
            self.state = RuleState.FAIL
        elif all(s == RuleState.PASS for s in states):
            self.state = RuleState.PASS
        return self.state
