"""Decisions from stored evidence, and the gate (SPEC §5).

``decide_run`` takes what a run stored (store/reader.py ``load_evidence``)
and a release policy, and returns one decision per rule; ``gate`` turns
decisions into a release action and an exit code. Nothing here reads files
or the clock: the same evidence always gets the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

from oloproof.enums import ExitCode, GateAction, MetricKind, RuleState
from oloproof.evidence import CriterionEvidence, LabelledVerdicts
from oloproof.policy.format import (
    as_decimal,
    estimate_text,
    interval_text,
    level_text,
    value_text,
)
from oloproof.policy.judges import CORRECTED_METHOD, JudgeReport, judge_report, validate
from oloproof.policy.rules import Direction, decide_threshold
from oloproof.project.models import (
    ComparePolicy,
    IntervalRule,
    ObservedCountRule,
    ReleasePolicy,
    ReleaseRule,
)
from oloproof.stats.intervals import clopper_pearson_bounded, student_t_mean_bounded

PASS, FAIL = RuleState.PASS, RuleState.FAIL
INSUFFICIENT, MANUAL = RuleState.INSUFFICIENT_EVIDENCE, RuleState.MANUAL_REVIEW

EXIT_OK, EXIT_FAIL, EXIT_USAGE = ExitCode.OK, ExitCode.FAIL, ExitCode.USAGE
EXIT_INSUFFICIENT, EXIT_MANUAL = ExitCode.INSUFFICIENT_EVIDENCE, ExitCode.MANUAL_REVIEW
EXIT_INCOMPLETE = ExitCode.INCOMPLETE


def pct(x: float | None) -> str:
    """An estimate in percent, to nearest (kept for the renderers; see policy/format.py)."""
    return estimate_text(x, MetricKind.BINARY)


def fmt_interval(lower: float | None, upper: float | None) -> str:
    """A rate's interval in percent, rounded outward (policy/format.py, the one copy):
    13 of 18 at 95% is [0.46520, 0.90305] and prints as ``[46.5%, 90.4%]``."""
    return interval_text(lower, upper, MetricKind.BINARY)


@dataclass
class MetricSummary:
    """A metric of a run: estimate, interval and counts (SPEC §4)."""

    metric: str
    kind: MetricKind
    estimate: float | None
    lower: float | None
    upper: float | None
    observed: int
    missing: int
    excluded: int
    passed: int | None = None  # BINARY
    sd: float | None = None  # MEAN
    method: str = ""
    unbounded_missing: bool = False
    value_range: tuple[float, float] | None = None

    def cases_text(self) -> str:
        observed = (
            f"{self.passed} / {self.observed}"
            if self.kind == MetricKind.BINARY
            else str(self.observed)
        )
        return f"{observed} observed · {self.missing} missing · {self.excluded} excluded"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["value_range"] = list(self.value_range) if self.value_range else None
        return data


def summarize(ev: CriterionEvidence, level: float) -> MetricSummary:
    """The estimate and interval of one metric at ``level``, bounded for missing cases."""
    if ev.kind == MetricKind.BINARY:
        n = ev.passed + ev.failed
        iv = clopper_pearson_bounded(ev.passed, n, ev.missing, level)
        return MetricSummary(
            ev.criterion, MetricKind.BINARY, ev.passed / n if n else None, iv.lower, iv.upper,
            n, ev.missing, ev.excluded, passed=ev.passed,
            method=f"Clopper–Pearson {level_text(level)}, bounded for missing cases",
        )
    ms = student_t_mean_bounded(ev.scores, ev.missing, ev.value_range, level)
    lower = ms.interval.lower if ms.interval is not None else None
    upper = ms.interval.upper if ms.interval is not None else None
    return MetricSummary(
        ev.criterion, MetricKind.MEAN, ms.mean, lower, upper, ms.n, ev.missing, ev.excluded,
        sd=ms.sd, method=f"Student t {level_text(level)}" + (
            ", missing bounded over the range" if ev.value_range else ""
        ),
        unbounded_missing=ms.unbounded_missing, value_range=ev.value_range,
    )


@dataclass
class Decision:
    """One rule decided: its state, why (``reason``, a stable word) and the printed detail.

    ``confidence_level`` is the level the rule's interval was computed at: the policy's, or
    the level a multiplicity adjustment gave it (None for rules without an interval).
    """

    rule: str
    metric: str
    kind: str  # interval_threshold | observed_count | superiority | ...
    state: RuleState
    reason: str
    detail: str
    action: GateAction = GateAction.ALLOW
    threshold: float | None = None
    direction: str | None = None  # min | max
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    confidence_level: float | None = None
    #: "corrected" for a rule decided on the prediction-powered estimate; None otherwise.
    basis: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _threshold_of(rule: IntervalRule) -> tuple[Direction, float]:
    if rule.min is not None:
        return "min", float(rule.min)
    assert rule.max is not None
    return "max", float(rule.max)


def decide_interval_rule(
    rule: IntervalRule, s: MetricSummary, level: float, note: str = "",
    method: str | None = None,
) -> Decision:
    """An interval rule on a metric summarised at ``level``; ``note`` ends the detail;
    ``method`` names the interval in it (``CP`` or ``t`` by default)."""
    direction, t = _threshold_of(rule)
    state, reason, detail = _interval_state(direction, t, s, level, method)
    if s.missing:
        # Say how much of the evidence is there: "0 observed, 18 missing" when every call
        # failed must never read like a run that was merely too small.
        detail += f"; {s.observed} observed, {s.missing} missing"
    return Decision(
        rule=rule.id, metric=rule.metric, kind="interval_threshold", state=state,
        reason=reason, detail=detail + note, threshold=t, direction=direction,
        estimate=s.estimate, lower=s.lower, upper=s.upper, confidence_level=level,
    )


def _interval_state(
    direction: Direction, t: float, s: MetricSummary, level: float, method: str | None = None
) -> tuple[RuleState, str, str]:
    tv = value_text(t, s.kind)
    if s.kind == MetricKind.MEAN and s.unbounded_missing:
        return (INSUFFICIENT, "missing_cases_unbounded",
                f"{s.missing} missing cases and no declared range to bound them")
    if s.lower is None or s.upper is None:
        return (INSUFFICIENT, "too_few_observed",
                f"{s.observed} observed scores; an interval needs at least 2")
    state = decide_threshold(s.lower, s.upper, t, direction)
    exact_t = as_decimal(t)

    def agrees(lo: Decimal, hi: Decimal) -> bool:
        return decide_threshold(lo, hi, exact_t, direction) == state  # type: ignore[arg-type]

    iv = interval_text(s.lower, s.upper, s.kind, agrees)
    name = method or ("CP" if s.kind == MetricKind.BINARY else "t")
    label = f"{level_text(level)} {name} {iv}"
    if direction == "min":
        if state == PASS:
            return PASS, "lower_bound_meets_min", f"{label}: lower ≥ {tv}"
        if state == FAIL:
            return FAIL, "upper_bound_below_min", f"{label}: upper < {tv}"
    else:
        if state == PASS:
            return PASS, "upper_bound_meets_max", f"{label}: upper ≤ {tv}"
        if state == FAIL:
            return FAIL, "lower_bound_above_max", f"{label}: lower > {tv}"
    return INSUFFICIENT, "interval_contains_threshold", f"{label} contains {tv}"


def decide_observed_count(rule: ObservedCountRule, ev: CriterionEvidence) -> Decision:
    n_max = int(rule.max_failures)
    failures = ev.failed if ev.kind == MetricKind.BINARY else 0
    seen = f"{ev.observed} observed, " if ev.missing else ""  # "0 observed, …, 18 missing"
    detail = f"{seen}{failures} failed, {ev.missing} missing; at most {n_max} allowed"
    if failures + ev.missing <= n_max:
        state, reason = PASS, "failures_within_budget"
    elif failures > n_max:
        state, reason = FAIL, "failures_over_budget"
    else:
        state, reason = INSUFFICIENT, "missing_cases_could_exceed_budget"
    return Decision(
        rule=rule.id, metric=rule.metric, kind="observed_count", state=state, reason=reason,
        detail=detail, threshold=n_max,
    )


# -- multiplicity ----------------------------------------------------------------------


def _family_note(method: str, family: str, size: int, level: float) -> str:
    return (
        f" ({method} over the {size} rules of family {family}; family-wise"
        f" {level_text(level)})"
    )


def _decide_family(
    rules: Sequence[IntervalRule],
    method: str,
    family: str,
    evidence: Mapping[str, CriterionEvidence],
    level: float,
) -> dict[str, Decision]:
    """The rules of one family, their levels adjusted so that the chance of deciding any of
    them wrongly is at most 1 - ``level`` (see docs/statistics.md, "Multiplicity").

    - ``bonferroni``: each of the k rules at 1 - alpha/k.
    - ``holm``: step-down. With R the rules not yet decided, every rule of R that its
      interval at 1 - alpha/|R| decides is decided there; the others stay in R and the step
      repeats with the smaller R, until a step decides nothing: those left are undecided at
      the level of that last step. This is Holm's procedure on each rule's p-value (the
      largest alpha' whose 1 - alpha' interval leaves the rule undecided), since the
      intervals are nested in their level: a rule is decided at level 1 - a exactly when
      its p-value is at most a.
    """
    alpha = 1.0 - level
    k = len(rules)
    out: dict[str, Decision] = {}
    if method == "bonferroni":
        adjusted = 1.0 - alpha / k
        note = _family_note("Bonferroni", family, k, level)
        for rule in rules:
            out[rule.id] = decide_interval_rule(
                rule, summarize(evidence[rule.metric], adjusted), adjusted, note
            )
        return out
    note = _family_note("Holm", family, k, level)
    remaining = list(rules)
    while remaining:
        adjusted = 1.0 - alpha / len(remaining)
        step = {
            rule.id: decide_interval_rule(
                rule, summarize(evidence[rule.metric], adjusted), adjusted, note
            )
            for rule in remaining
        }
        decided = [r for r in remaining if step[r.id].state in (PASS, FAIL)]
        if not decided:
            out.update(step)
            break
        for rule in decided:
            out[rule.id] = step[rule.id]
        remaining = [r for r in remaining if r.id not in out]
    return out


def decide_run(
    evidence: Mapping[str, CriterionEvidence],
    policy: ReleasePolicy,
    labelled: Mapping[str, LabelledVerdicts] | None = None,
) -> tuple[list[Decision], dict[str, MetricSummary]]:
    """Every rule of ``policy`` on a run's evidence, in declared order, with its action.

    Rules outside a family (or in a family with ``multiplicity: none``) are decided at the
    policy's confidence level, each on its own; the rules of a ``holm`` or ``bonferroni``
    family share one family-wise error of at most 1 - confidence_level.

    ``labelled``: per judge criterion, its verdicts beside a person's labels. A rule with
    ``estimate: corrected`` is decided on the prediction-powered interval; a rule with
    ``judge_validation`` is ``MANUAL_REVIEW`` while the judge is not validated, whatever
    its interval says (an unvalidated judge's PASS or FAIL is not evidence).
    """
    level = float(policy.confidence_level)
    reports = {c: judge_report(lv, level) for c, lv in (labelled or {}).items()}
    summaries = {name: summarize(ev, level) for name, ev in evidence.items()}
    adjusted: dict[str, Decision] = {}
    members: dict[str, list[IntervalRule]] = {}
    for rule in policy.rules:
        if isinstance(rule, IntervalRule) and rule.family is not None:
            members.setdefault(rule.family, []).append(rule)
    for family, rules in members.items():
        method = policy.families[family].multiplicity
        if method != "none":
            adjusted.update(_decide_family(rules, method, family, evidence, level))
    decisions: list[Decision] = []
    for rule in policy.rules:
        d = adjusted.get(rule.id) or _decide_one(rule, evidence, summaries, level, reports)
        if isinstance(rule, IntervalRule) and rule.judge_validation is not None:
            unproven = validate(rule.judge_validation, reports.get(rule.metric), level)
            if unproven is not None:
                alone = f"; the rule alone: {d.state} ({d.detail})"
                d.state, d.reason, d.detail = MANUAL, unproven[0], unproven[1] + alone
        d.action = action_for(d.state, policy)
        decisions.append(d)
    return decisions, summaries


def _decide_corrected(
    rule: IntervalRule, s: MetricSummary, report: JudgeReport | None, level: float
) -> Decision:
    corrected = None if report is None else report.corrected
    if corrected is None:
        why = report.corrected_note if report is not None else "the run has no human labels"
        direction, t = _threshold_of(rule)
        return Decision(
            rule=rule.id, metric=rule.metric, kind="interval_threshold", state=MANUAL,
            reason="corrected_estimate_needs_labels",
            detail=f"estimate: corrected {why}: label a random sample of cases",
            threshold=t, direction=direction, basis="corrected",
        )
    person = MetricSummary(
        s.metric, MetricKind.BINARY, corrected.estimate, corrected.lower, corrected.upper,
        corrected.labelled + corrected.unlabelled, corrected.missing, s.excluded,
        method=CORRECTED_METHOD,
    )
    d = decide_interval_rule(
        rule, person, level,
        f" (corrected by {corrected.labelled} human labels; judge alone"
        f" {estimate_text(s.estimate, MetricKind.BINARY)})",
        method="PPI++",
    )
    d.basis = "corrected"
    return d


def _decide_one(
    rule: ReleaseRule,
    evidence: Mapping[str, CriterionEvidence],
    summaries: Mapping[str, MetricSummary],
    level: float,
    reports: Mapping[str, JudgeReport] | None = None,
) -> Decision:
    if isinstance(rule, ObservedCountRule):
        return decide_observed_count(rule, evidence[rule.metric])
    if rule.estimate == "corrected":
        return _decide_corrected(rule, summaries[rule.metric], (reports or {}).get(rule.metric),
                                 level)
    return decide_interval_rule(rule, summaries[rule.metric], level)


def action_for(state: str, policy: ReleasePolicy | ComparePolicy) -> GateAction:
    """What a state does to the release under a policy's ``block_on`` and ``warn_on``."""
    if state in policy.block_on:
        return GateAction.BLOCK
    if state in policy.warn_on:
        return GateAction.WARN
    return GateAction.ALLOW


def gate(decisions: Sequence[Decision], *, incomplete: bool = False) -> tuple[GateAction, int]:
    """The release action and exit code. Precedence (SPEC §5): FAIL, incomplete,
    MANUAL_REVIEW, INSUFFICIENT_EVIDENCE."""
    blocking = {d.state for d in decisions if d.action == GateAction.BLOCK}
    if FAIL in blocking:
        return GateAction.BLOCK, EXIT_FAIL
    if incomplete:
        return GateAction.BLOCK, EXIT_INCOMPLETE
    if MANUAL in blocking:
        return GateAction.BLOCK, EXIT_MANUAL
    if INSUFFICIENT in blocking:
        return GateAction.BLOCK, EXIT_INSUFFICIENT
    if any(d.action == GateAction.WARN for d in decisions):
        return GateAction.WARN, EXIT_OK
    return GateAction.ALLOW, EXIT_OK
