"""Decisions from stored evidence, and the gate (SPEC §5).

``decide_run`` takes what a run stored (store/reader.py ``load_evidence``)
and a release policy, and returns one decision per rule; ``gate`` turns
decisions into a release action and an exit code. Nothing here reads files
or the clock: the same evidence always gets the same answer.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from oloproof.stats.intervals import clopper_pearson_bounded, student_t_mean_bounded
from oloproof.store.reader import CriterionEvidence

PASS, FAIL, INSUFFICIENT, MANUAL = "PASS", "FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW"

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INSUFFICIENT, EXIT_MANUAL, EXIT_INCOMPLETE = 0, 1, 2, 3, 4, 5


def pct(x: float | None) -> str:
    return "" if x is None else f"{100.0 * x:.1f}%"


def fmt_interval(lower: float | None, upper: float | None) -> str:
    """An interval in percent with one decimal, rounded outward.

    The lower bound is rounded down and the upper bound up, so the printed
    interval always contains the computed one: 13 of 18 at 95% is
    [0.46520, 0.90305] and prints as ``[46.5%, 90.4%]``. (The 1e-9 guards
    keep exact values such as 0.7 from being pushed a step outward by
    floating-point noise.)
    """
    if lower is None or upper is None:
        return ""
    lo = math.floor(lower * 1000.0 + 1e-9) / 10.0
    hi = math.ceil(upper * 1000.0 - 1e-9) / 10.0
    return f"[{lo:.1f}%, {hi:.1f}%]"


@dataclass
class MetricSummary:
    """A metric of a run: estimate, interval and counts (SPEC §4)."""

    metric: str
    kind: str
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
        observed = f"{self.passed} / {self.observed}" if self.kind == "BINARY" else str(self.observed)
        return f"{observed} observed · {self.missing} missing · {self.excluded} excluded"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["value_range"] = list(self.value_range) if self.value_range else None
        return data


def summarize(ev: CriterionEvidence, level: float) -> MetricSummary:
    if ev.kind == "BINARY":
        n = ev.passed + ev.failed
        iv = clopper_pearson_bounded(ev.passed, n, ev.missing, level)
        return MetricSummary(
            ev.criterion, "BINARY", ev.passed / n if n else None, iv.lower, iv.upper, n,
            ev.missing, ev.excluded, passed=ev.passed,
            method=f"Clopper–Pearson {level:.0%}, bounded for missing cases",
        )
    ms = student_t_mean_bounded(ev.scores, ev.missing, ev.value_range, level)
    lower = ms.interval.lower if ms.interval is not None else None
    upper = ms.interval.upper if ms.interval is not None else None
    return MetricSummary(
        ev.criterion, "MEAN", ms.mean, lower, upper, ms.n, ev.missing, ev.excluded,
        sd=ms.sd, method=f"Student t {level:.0%}" + (
            ", missing bounded at the range" if ev.value_range else ""
        ),
        unbounded_missing=ms.unbounded_missing, value_range=ev.value_range,
    )


@dataclass
class Decision:
    rule: str
    metric: str
    kind: str  # interval_threshold | observed_count | superiority | ...
    state: str
    reason: str
    detail: str
    action: str = "ALLOW"
    threshold: float | None = None
    direction: str | None = None  # min | max
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _fmt_value(x: float, kind: str) -> str:
    return pct(x) if kind == "BINARY" else f"{x:g}"


def decide_interval_rule(rule: Any, s: MetricSummary, level: float) -> Decision:
    direction = "min" if rule.min is not None else "max"
    t = float(rule.min if rule.min is not None else rule.max)
    state, reason, detail = _interval_state(direction, t, s, level)
    return Decision(
        rule=rule.id, metric=rule.metric, kind="interval_threshold", state=state,
        reason=reason, detail=detail, threshold=t, direction=direction,
        estimate=s.estimate, lower=s.lower, upper=s.upper,
    )


def _interval_state(
    direction: str, t: float, s: MetricSummary, level: float
) -> tuple[str, str, str]:
    tv = _fmt_value(t, s.kind)
    if s.kind == "MEAN" and s.unbounded_missing:
        return (INSUFFICIENT, "missing_cases_unbounded",
                f"{s.missing} missing cases and no declared range to bound them")
    if s.lower is None or s.upper is None:
        return (INSUFFICIENT, "too_few_observed",
                f"{s.observed} observed scores; an interval needs at least 2")
    iv = (
        fmt_interval(s.lower, s.upper)
        if s.kind == "BINARY"
        else f"[{s.lower:.4g}, {s.upper:.4g}]"
    )
    label = f"{level:.0%} {'CP' if s.kind == 'BINARY' else 't'} {iv}"
    if direction == "min":
        if s.lower >= t:
            return PASS, "lower_bound_meets_min", f"{label}: lower ≥ {tv}"
        if s.upper < t:
            return FAIL, "upper_bound_below_min", f"{label}: upper < {tv}"
    else:
        if s.upper <= t:
            return PASS, "upper_bound_meets_max", f"{label}: upper ≤ {tv}"
        if s.lower > t:
            return FAIL, "lower_bound_above_max", f"{label}: lower > {tv}"
    return INSUFFICIENT, "interval_contains_threshold", f"{label} contains {tv}"


def decide_observed_count(rule: Any, ev: CriterionEvidence) -> Decision:
    n_max = int(rule.max_failures)
    failures = ev.failed if ev.kind == "BINARY" else 0
    detail = f"{failures} failed, {ev.missing} missing; at most {n_max} allowed"
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


def decide_run(
    evidence: dict[str, CriterionEvidence], policy: Any
) -> tuple[list[Decision], dict[str, MetricSummary]]:
    level = float(policy.confidence_level)
    summaries = {name: summarize(ev, level) for name, ev in evidence.items()}
    decisions: list[Decision] = []
    for rule in policy.rules:
        ev = evidence[rule.metric]
        if getattr(rule, "kind", "interval_threshold") == "observed_count":
            d = decide_observed_count(rule, ev)
        else:
            d = decide_interval_rule(rule, summaries[rule.metric], level)
        d.action = action_for(d.state, policy)
        decisions.append(d)
    return decisions, summaries


def action_for(state: str, policy: Any) -> str:
    if state in policy.block_on:
        return "BLOCK"
    if state in policy.warn_on:
        return "WARN"
    return "ALLOW"


def gate(decisions: list[Decision], *, incomplete: bool = False) -> tuple[str, int]:
    """The release action and exit code. Precedence (SPEC §5): FAIL, incomplete,
    MANUAL_REVIEW, INSUFFICIENT_EVIDENCE."""
    blocking = {d.state for d in decisions if d.action == "BLOCK"}
    if FAIL in blocking:
        return "BLOCK", EXIT_FAIL
    if incomplete:
        return "BLOCK", EXIT_INCOMPLETE
    if MANUAL in blocking:
        return "BLOCK", EXIT_MANUAL
    if INSUFFICIENT in blocking:
        return "BLOCK", EXIT_INSUFFICIENT
    if any(d.action == "WARN" for d in decisions):
        return "WARN", EXIT_OK
    return "ALLOW", EXIT_OK
