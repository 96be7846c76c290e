"""Deciding a stored sequential run: the run's order replayed over what the store holds.

The same :class:`~oloproof.policy.sequential.Monitor` that stopped the run is fed the stored
cases in the run's order, from the first, until every rule is decided or the next case in the
order is not stored. Cases stored beyond that point (calls that were in flight when the run
stopped) are kept in the store, shown by ``inspect``, and never enter the decision: so
``gate`` decides a stored sequential run exactly as the run did, whatever finished first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oloproof._records import dataclass, replace
from oloproof.enums import MetricKind, RuleState
from oloproof.evidence import CriterionEvidence, Outcome, classify_outcome, group_name
from oloproof.policy.decide import Decision, MetricSummary, SequentialEvidence, decide_run
from oloproof.policy.sequential import Monitor, RuleResult, SequentialSpec
from oloproof.store.reader import RunRecord, stored_json

if TYPE_CHECKING:
    from oloproof.evidence import LabelledScores, LabelledVerdicts
    from oloproof.project.config import ReleasePolicy
    from oloproof.store.dbapi import Connection

__all__ = [
    "SequentialReading",
    "decide_sequential",
    "decide_sequential_comparison",
    "read_sequential",
]


@dataclass
class SequentialReading:
    """A stored sequential run read in its order: the monitor after the prefix it read, the
    prefix's evidence (with groups), each metric's values in order, and how many of the
    stored cases lie beyond the prefix (read by no test)."""

    spec: SequentialSpec
    monitor: Monitor
    evidence: dict[str, CriterionEvidence]
    ordered: dict[str, tuple[list[float], list[float]]]
    stored: int
    beyond: int

    @property
    def fed(self) -> int:
        return self.monitor.position

    @property
    def results(self) -> dict[str, RuleResult]:
        return self.monitor.results

    def to_json(self) -> dict[str, Any]:
        """What ``run``, ``gate`` and ``inspect`` say of the reading (RunResult.sequential)."""
        done = self.monitor.done
        return {
            "seed": self.spec.seed, "margin": self.spec.margin,
            "cases_total": self.spec.cases_total, "read": self.fed, "stored": self.stored,
            "beyond": self.beyond, "decided": done,
            "decided_after": self.fed if done else None,
        }

    def describe(self) -> str:
        """One sentence on what the decision read (the report's note)."""
        total = self.spec.cases_total
        if self.monitor.done:
            head = (f"Sequential run (seed {self.spec.seed}): every rule decided after"
                    f" {self.fed:,} of {total:,} cases, read in the run's seeded order")
        else:
            head = (f"Sequential run (seed {self.spec.seed}): {self.fed:,} of {total:,} cases"
                    " read in the run's seeded order, and not every rule was decided")
        if self.beyond:
            head += (f"; {self.stored:,} stored, {self.beyond:,} of them finished after the"
                     " decision and are not part of it")
        return head + ". Decided from the stored evidence by the same tests."


def _unit(kind: MetricKind, rng: Sequence[float] | None, status: str, passed: bool | None,
          score: float | None) -> tuple[float, float] | None:
    """A case's value on [0, 1] for its metric's confidence sequence as (low, high): a
    missing case at both ends; None when excluded."""
    outcome = classify_outcome(kind, status, passed, score)
    if outcome is Outcome.EXCLUDED:
        return None
    if outcome is Outcome.MISSING:
        return 0.0, 1.0
    if kind == MetricKind.BINARY:
        v = 1.0 if passed else 0.0
        return v, v
    if not rng or score is None:
        return 0.0, 1.0
    lo, hi = float(rng[0]), float(rng[1])
    if not lo <= score <= hi:
        return 0.0, 1.0
    v = (float(score) - lo) / (hi - lo)
    return v, v


def read_sequential(
    conn: Connection, record: RunRecord, policy: ReleasePolicy
) -> SequentialReading:
    """Replay a stored sequential run's order over its stored cases (see the module)."""
    data = record.sequential or {}
    spec = SequentialSpec.from_json(data)
    order = [str(c) for c in data.get("order") or []]
    monitor = Monitor(policy, record.metrics, spec)
    metadata: dict[str, Any] = {}
    for case_id, text in conn.execute(
        "SELECT case_id, metadata_json FROM run_cases WHERE run_id = ?", (record.id,)
    ):
        metadata[str(case_id)] = stored_json(record.id, f"metadata of case {case_id!r}", text)
    judged: dict[str, dict[str, tuple[str, bool | None, float | None]]] = {}
    for case_id, criterion, status, passed, score in conn.execute(
        "SELECT case_id, criterion, status, passed, score FROM run_judgments WHERE run_id = ?",
        (record.id,),
    ):
        judged.setdefault(str(case_id), {})[str(criterion)] = (
            str(status), None if passed is None else bool(passed),
            None if score is None else float(score),
        )
    metrics = {str(m["criterion"]): m for m in record.metrics}
    keys = {c: list(m.get("group_by") or []) for c, m in metrics.items()}
    for rule in policy.rules:  # a rule's group is grouped even if the metric stores no key
        group = getattr(rule, "group", None)
        if group:
            (key, _value), = group.items()
            if key not in keys.setdefault(rule.metric, []):
                keys[rule.metric].append(key)
    evidence: dict[str, CriterionEvidence] = {}
    ordered: dict[str, tuple[list[float], list[float]]] = {}

    def add(name: str, m: Mapping[str, Any], case_id: str,
            judgment: tuple[str, bool | None, float | None]) -> None:
        rng = m.get("range")
        ev = evidence.get(name)
        if ev is None:
            ev = evidence[name] = CriterionEvidence(
                name, MetricKind(m["kind"]), (float(rng[0]), float(rng[1])) if rng else None
            )
            ordered[name] = ([], [])
        ev.add(*judgment, case_id)
        unit = _unit(MetricKind(m["kind"]), rng, *judgment)
        if unit is not None:
            ordered[name][0].append(unit[0])
            ordered[name][1].append(unit[1])

    for criterion, m in metrics.items():  # every metric, in the declared order
        add_empty = CriterionEvidence(
            criterion, MetricKind(m["kind"]),
            (float(m["range"][0]), float(m["range"][1])) if m.get("range") else None,
        )
        evidence[criterion] = add_empty
        ordered[criterion] = ([], [])
    expected = len(metrics)
    for case_id in order:
        if monitor.done:
            break
        judgments = judged.get(case_id)
        if judgments is None or len(judgments) < expected:
            break  # the first case of the order that is not stored ends what can be read
        meta = metadata.get(case_id)
        monitor.feed(meta, judgments)
        for criterion, m in metrics.items():
            judgment = judgments.get(criterion, ("MISSING", None, None))
            add(criterion, m, case_id, judgment)
            for key in keys.get(criterion, []):
                value = meta.get(key) if isinstance(meta, Mapping) else None
                add(group_name(criterion, key, value), m, case_id, judgment)
    stored = len(judged)
    return SequentialReading(spec, monitor, evidence, ordered, stored, stored - monitor.position)


def decide_sequential(
    conn: Connection, record: RunRecord, policy: ReleasePolicy,
    labelled: Mapping[str, LabelledVerdicts | LabelledScores] | None = None,
) -> tuple[list[Decision], dict[str, MetricSummary], SequentialReading]:
    """Decide a stored sequential run under ``policy``, as the run did."""
    reading = read_sequential(conn, record, policy)
    expanded = _expand(policy, reading.evidence)
    seq = SequentialEvidence(reading.results, reading.ordered, reading.spec.cases_total,
                             reading.fed, reading.spec.margin)
    decisions, summaries = decide_run(reading.evidence, expanded, labelled, seq)
    return decisions, summaries, reading


def _expand(policy: ReleasePolicy, evidence: dict[str, CriterionEvidence]) -> ReleasePolicy:
    """``group: {key: value}`` rules pointed at their group's metric (empty evidence for a
    group the prefix did not meet: INSUFFICIENT_EVIDENCE, never a pass)."""
    rules: list[Any] = []
    changed = False
    for rule in policy.rules:
        group = getattr(rule, "group", None)
        if not group:
            rules.append(rule)
            continue
        (key, value), = group.items()
        name = group_name(rule.metric, key, value)
        if name not in evidence:
            base = evidence[rule.metric]
            evidence[name] = CriterionEvidence(name, base.kind, base.value_range)
        rules.append(replace(rule, metric=name, group=None))
        changed = True
    return replace(policy, rules=rules) if changed else policy


def decide_sequential_comparison(
    conn: Connection, cmp: Any, policy: Any
) -> list[Decision]:
    """The rules of a comparison whose candidate is a sequential run, each decided by a
    sequential paired test (policy/sequential.py ``PairedTest``) on the pairs taken in the
    candidate's order, over the prefix its own decision read (docs/sequential-decisions.md,
    "Comparisons"). The candidate stopped on its own rules: a stopping time of the same
    order, at which these tests are valid too."""
    from oloproof.analysis.compare import _outcomes
    from oloproof.analysis.stored import stored_policy
    from oloproof.policy.decide import INSUFFICIENT, NO_OBSERVED, action_for, hold_missing
    from oloproof.policy.format import level_text
    from oloproof.policy.sequential import PairedTest
    from oloproof.stats.betting import betting_bounds

    candidate = cmp.candidate
    reading = read_sequential(conn, candidate, stored_policy(candidate))
    order = [str(c) for c in (candidate.sequential or {}).get("order") or []][:reading.fed]
    horizon = reading.spec.cases_total
    kinds = {m: pm.kind for m, pm in cmp.metrics.items()}
    cand = _outcomes(cmp.candidate_cases, kinds)
    base = _outcomes(cmp.baseline_cases, kinds)
    ranges = {str(m["criterion"]): m.get("range") for m in candidate.metrics}
    level = float(policy.confidence_level)
    max_missing = getattr(policy, "max_missing", None)
    decisions: list[Decision] = []
    for rule in policy.rules:
        pm = cmp.metrics[rule.metric]
        margin = float(rule.margin or 0.0)
        common = {"rule": rule.id, "metric": rule.metric, "kind": rule.kind,
                  "threshold": margin, "direction": None, "estimate": pm.estimate,
                  "confidence_level": level}
        if pm.kind == MetricKind.BINARY:
            width = 1.0
        elif ranges.get(rule.metric):
            lo, hi = ranges[rule.metric]
            width = float(hi) - float(lo)
        else:
            d = Decision(state=INSUFFICIENT, reason="sequential_needs_range",
                         detail=(f"{rule.metric} is a MEAN without a declared range: a"
                                 " sequential paired test needs bounded differences"),
                         **common)
            d.action = action_for(d.state, policy, d.reason)
            decisions.append(d)
            continue
        test = PairedTest(str(rule.kind), margin, width, level, horizon)
        lows: list[float] = []
        highs: list[float] = []
        observed = missing = position = 0
        for case_id in order:
            c = cand[rule.metric].get(case_id)
            b = base[rule.metric].get(case_id)
            if c is None or b is None:
                continue  # not in the baseline: no pair
            if Outcome.EXCLUDED in (c.status, b.status):
                continue
            position += 1
            if c.status == Outcome.OBSERVED and b.status == Outcome.OBSERVED:
                if pm.kind == MetricKind.BINARY:
                    diff = float(bool(c.passed)) - float(bool(b.passed))
                else:
                    diff = float(c.score or 0.0) - float(b.score or 0.0)
                observed += 1
                unit = min(1.0, max(0.0, (diff + width) / (2.0 * width)))
                lows.append(unit)
                highs.append(unit)
                test.add(diff)
            else:
                missing += 1
                lows.append(0.0)
                highs.append(1.0)
                test.add(None)
            if test.state is not None:
                break
        a, z = betting_bounds(lows, highs, level, horizon) if lows else (0.0, 1.0)
        common["lower"], common["upper"] = -width + 2 * width * a, -width + 2 * width * z
        bar = 2.0 / (1.0 - level)
        e_value = math.exp(min(test.log_e, 700.0))
        method = f"sequential paired betting test at {level_text(level)}"
        if observed == 0:
            state, reason = INSUFFICIENT, NO_OBSERVED
            detail = f"no pair observed in both runs over {position} pairs of the candidate's order"
        elif test.state is None:
            state, reason = INSUFFICIENT, "sequential_undecided"
            detail = (f"undecided over {position} pairs in the candidate's order: the largest"
                      f" e-value, {e_value:.3g}, stayed below {bar:g} ({method})")
        else:
            state = RuleState(test.state)
            reason = "sequential_pass" if state == RuleState.PASS else "sequential_fail"
            detail = (f"decided after {position} pairs in the candidate's order: e-value"
                      f" {e_value:.3g} >= {bar:g} ({method})")
        if missing:
            detail += f"; {observed} pairs observed, {missing} missing in a run (at their worst)"
        d = Decision(state=state, reason=reason, detail=detail, **common)
        d.action = action_for(d.state, policy, d.reason)
        hold_missing(d, observed, missing, 0.2 if max_missing is None else float(max_missing),
                     "pairs")
        decisions.append(d)
    return decisions
