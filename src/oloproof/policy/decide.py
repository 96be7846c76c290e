"""Decisions from stored evidence, and the gate (SPEC §5).

``decide_run`` takes what a run stored (store/reader.py ``load_evidence``)
and a release policy, and returns one decision per rule; ``gate`` turns
decisions into a release action and an exit code. Nothing here reads files
or the clock: the same evidence always gets the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

from oloproof._records import asdict, dataclass, replace
from oloproof.enums import ExitCode, GateAction, MetricKind, RuleState
from oloproof.errors import ConfigError
from oloproof.evidence import (
    CriterionEvidence,
    LabelledScores,
    LabelledVerdicts,
    Outcome,
    aggregate_name,
    classify_outcome,
)
from oloproof.policy.format import (
    as_decimal,
    estimate_text,
    interval_text,
    level_text,
    value_text,
)
from oloproof.policy.judges import (
    CORRECTED_METHOD,
    NEEDS_LABELS,
    AnyJudgeReport,
    Corrected,
    JudgeReport,
    judge_report,
    validate,
)
from oloproof.policy.rules import decide_threshold
from oloproof.project.policies import IntervalRule, ObservedCountRule
from oloproof.stats.intervals import (
    CASE_EXACT,
    KORN_GRAUBARD,
    clopper_pearson_bounded,
    mean_and_sd,
    student_t_mean_bounded,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.policy.rules import Direction
    from oloproof.project.policies import ComparePolicy, ReleasePolicy, ReleaseRule

PASS, FAIL = RuleState.PASS, RuleState.FAIL
INSUFFICIENT, MANUAL = RuleState.INSUFFICIENT_EVIDENCE, RuleState.MANUAL_REVIEW

EXIT_OK, EXIT_FAIL, EXIT_USAGE = ExitCode.OK, ExitCode.FAIL, ExitCode.USAGE
EXIT_INSUFFICIENT, EXIT_MANUAL = ExitCode.INSUFFICIENT_EVIDENCE, ExitCode.MANUAL_REVIEW
EXIT_INCOMPLETE = ExitCode.INCOMPLETE

#: The reason of every rule, of any kind, whose scope holds no observed case: it is
#: INSUFFICIENT_EVIDENCE, never a pass (docs/statistics.md, "ALLOW is earned").
NO_OBSERVED = "no_observed_cases"


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
    #: Over repeated trials (``trials`` > 1): ``observed``, ``missing``, ``excluded`` and
    #: ``passed`` count trials; ``cases`` counts the cases with an observed trial;
    #: ``effective_cases``, ``design_effect`` and ``icc`` describe how much the trials of a
    #: case resemble each other (stats/trials.py). All None for one trial per case.
    trials: int | None = None
    cases: int | None = None
    effective_cases: float | None = None
    design_effect: float | None = None
    icc: float | None = None
    interval_method: str | None = None
    #: A MEAN metric whose interval lies beyond the largest float (scores near 1e308):
    #: ``lower`` and ``upper`` are None, and a rule on it is INSUFFICIENT_EVIDENCE.
    overflow: bool = False

    def cases_text(self) -> str:
        if self.trials is not None:
            shown = (
                f"{self.passed} / {self.observed}" if self.kind == MetricKind.BINARY
                else str(self.observed)
            )
            return (
                f"{self.cases} cases × {self.trials} trials: {shown} observed ·"
                f" {self.missing} missing · {self.excluded} excluded"
            )
        observed = (
            f"{self.passed} / {self.observed}"
            if self.kind == MetricKind.BINARY
            else str(self.observed)
        )
        return f"{observed} observed · {self.missing} missing · {self.excluded} excluded"

    @property
    def guarantee(self) -> str:
        """What the interval promises: ``exact`` (Clopper–Pearson: at least the level, at
        every n), ``valid at every n`` (betting, for any scores inside the range) or
        ``approximate`` (Student t, Korn–Graubard)."""
        return GUARANTEES.get(self.interval_method or "", "approximate")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["value_range"] = list(self.value_range) if self.value_range else None
        if self.trials is None:
            # One trial per case: the form earlier versions wrote, plus the interval's
            # method for a MEAN metric (betting, or t labelled approximate).
            for key in _TRIAL_KEYS:
                del data[key]
            if self.interval_method is None:
                del data["interval_method"]
        data["guarantee"] = self.guarantee
        return data


_TRIAL_KEYS = ("trials", "cases", "effective_cases", "design_effect", "icc")


#: ``MetricSummary.interval_method`` of a MEAN metric: which interval decides it.
BETTING = "betting"
T_APPROXIMATE = "t_approximate"
CASE_BETTING = "case_means_betting"
CASE_T_APPROXIMATE = "case_means_t_approximate"
#: What the interval of each method guarantees (``MetricSummary.guarantee``, docs/statistics.md).
SEQUENTIAL_CS = "sequential_betting"
GUARANTEES = {
    "": "exact",  # Clopper–Pearson, one trial per case
    SEQUENTIAL_CS: "anytime-valid",
    BETTING: "valid at every n",
    CASE_BETTING: "valid at every n",
    T_APPROXIMATE: "approximate",
    CASE_T_APPROXIMATE: "approximate",
    KORN_GRAUBARD: "approximate",
    CASE_EXACT: "approximate",
}


def _mean_method(level: float, ranged: bool, missing: bool, over: str = "") -> str:
    """How a MEAN metric's interval is named in tables, details and JSON."""
    lv = level_text(level)
    if ranged:
        text = f"betting (Waudby-Smith & Ramdas) {lv}{over}, valid at every n"
        return text + (", missing bounded over the range" if missing else "")
    return f"approximate (t): Student t {lv}{over}; declare a range for an interval valid at every n"


def _summarize_trials(ev: CriterionEvidence, level: float) -> MetricSummary:
    """A metric over repeated trials: cases are clusters (docs/repeated-trials.md)."""
    # The option's own modules, imported where it is handled (docs/design-notes.md).
    from oloproof.stats.betting import betting_ranges
    from oloproof.stats.trials import clustered_rate_bounded

    lv = level_text(level)
    if ev.kind == MetricKind.BINARY:
        # Decided by the betting interval on the cases' pass fractions (each in [0, 1]; a
        # case with missing trials as the range its completions span): monotone in every
        # trial's outcome and valid at every n (issue 33). The clustered-rate figures
        # (effective cases, design effect, ICC) describe the trials; they decide nothing.
        r = clustered_rate_bounded(ev.case_counts(), level)
        iv = betting_ranges(ev.case_ranges(), (0.0, 1.0), level)
        lower, upper = (0.0, 1.0) if iv is None else (iv.lower, iv.upper)
        method = (f"betting (Waudby-Smith & Ramdas) {lv} on case pass fractions, valid at"
                  " every n" + (", missing trials bounded" if ev.missing else ""))
        return MetricSummary(
            ev.criterion, MetricKind.BINARY, r.estimate, lower, upper,
            ev.observed, ev.missing, ev.excluded, passed=ev.passed, method=method,
            trials=ev.trials, cases=r.cases, effective_cases=r.effective_cases,
            design_effect=r.design_effect, icc=r.icc, interval_method=CASE_BETTING,
        )
    means, missing_cases, _excluded = ev.case_means()
    if ev.value_range is not None:
        # Each case's mean over its trials, a case with missing trials as the range of
        # means its completions could have: the betting interval bounds it at each end.
        lo, hi = ev.value_range
        ranges = ev.case_ranges(lo, hi)
        iv = betting_ranges(ranges, ev.value_range, level)
        summary = student_t_mean_bounded(means, 0, None, level)  # the mean and sd shown
        return MetricSummary(
            ev.criterion, MetricKind.MEAN, summary.mean,
            None if iv is None else iv.lower, None if iv is None else iv.upper,
            ev.observed, ev.missing, ev.excluded, sd=summary.sd,
            method=_mean_method(level, True, bool(ev.missing), " on case means"),
            value_range=ev.value_range, trials=ev.trials, cases=len(means),
            interval_method=CASE_BETTING,
        )
    ms = student_t_mean_bounded(means, missing_cases, ev.value_range, level)
    return MetricSummary(
        ev.criterion, MetricKind.MEAN, ms.mean,
        ms.interval.lower if ms.interval is not None else None,
        ms.interval.upper if ms.interval is not None else None, ev.observed, ev.missing,
        ev.excluded, sd=ms.sd, method=_mean_method(level, False, False, " on case means"),
        unbounded_missing=ms.unbounded_missing, value_range=ev.value_range,
        trials=ev.trials, cases=len(means), interval_method=CASE_T_APPROXIMATE,
        overflow=ms.overflow,
    )


def summarize(ev: CriterionEvidence, level: float) -> MetricSummary:
    """The estimate and interval of one metric at ``level``, bounded for missing cases.

    BINARY: Clopper–Pearson. MEAN with a declared range: the betting interval, valid at
    every n, on the scores in the canonical case order (evidence.case_order_key), each
    missing case bounded at its worst. MEAN without a range: Student t, approximate; with
    missing cases no interval (they could have scored anything)."""
    if ev.case_trials is not None and ev.trials > 1:
        return _summarize_trials(ev, level)
    if ev.kind == MetricKind.BINARY:
        n = ev.passed + ev.failed
        iv = clopper_pearson_bounded(ev.passed, n, ev.missing, level)
        return MetricSummary(
            ev.criterion, MetricKind.BINARY, ev.passed / n if n else None, iv.lower, iv.upper,
            n, ev.missing, ev.excluded, passed=ev.passed,
            method=f"Clopper–Pearson {level_text(level)}, bounded for missing cases",
        )
    if ev.value_range is not None:
        lo, hi = ev.value_range
        # A score outside its declared range is refused when it is judged; one stored by an
        # older version counts as missing here, never clipped.
        ordered = [s if s is None or lo <= s <= hi else None for s in ev.ordered_scores()]
        # A MEAN metric with a declared range only: a run of rates never imports it.
        from oloproof.stats.betting import betting_mean

        ms = betting_mean(ordered, ev.value_range, level)
        missing = ms.missing
        return MetricSummary(
            ev.criterion, MetricKind.MEAN, ms.mean,
            ms.interval.lower if ms.interval is not None else None,
            ms.interval.upper if ms.interval is not None else None,
            ms.n, missing, ev.excluded, sd=ms.sd,
            method=_mean_method(level, True, bool(missing)),
            value_range=ev.value_range, interval_method=BETTING,
        )
    ms = student_t_mean_bounded(ev.scores, ev.missing, None, level)
    lower = ms.interval.lower if ms.interval is not None else None
    upper = ms.interval.upper if ms.interval is not None else None
    return MetricSummary(
        ev.criterion, MetricKind.MEAN, ms.mean, lower, upper, ms.n, ev.missing, ev.excluded,
        sd=ms.sd, method=_mean_method(level, False, False),
        unbounded_missing=ms.unbounded_missing, value_range=None,
        interval_method=T_APPROXIMATE, overflow=ms.overflow,
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
    #: The share of the rule's scope that is missing (missing / (observed + missing), in
    #: the units the rule counts: cases, or trials), and whether it passed the policy's
    #: ``max_missing``: then the evidence is incomplete, the rule blocks and the gate exits
    #: 5 whatever ``warn_on`` says (:func:`gate`). None for a comparison rule without pairs.
    missing_share: float | None = None
    incomplete: bool = False

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
    if s.observed == 0 or (s.trials is not None and not s.cases):
        state, reason = INSUFFICIENT, NO_OBSERVED
        unit = " trials" if s.trials is not None else ""
        detail = (f"no observed case: {s.observed} observed, {s.missing} missing,"
                  f" {s.excluded} excluded{unit}")
        return Decision(
            rule=rule.id, metric=rule.metric, kind="interval_threshold", state=state,
            reason=reason, detail=detail + note, threshold=t, direction=direction,
            estimate=s.estimate, lower=s.lower, upper=s.upper, confidence_level=level,
        )
    state, reason, detail = _interval_state(direction, t, s, level, method)
    if s.missing:
        # Say how much of the evidence is there: "0 observed, 18 missing" when every call
        # failed must never read like a run that was merely too small.
        unit = " trials" if s.trials is not None else ""
        detail += f"; {s.observed} observed, {s.missing} missing{unit}"
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
    if s.kind == MetricKind.MEAN and s.observed == 0:
        # The betting interval of nothing observed is the whole range: evidence of
        # nothing, whatever a threshold beyond the range would make of it.
        return INSUFFICIENT, "no_observed_cases", "no observed score"
    if s.overflow:
        return (INSUFFICIENT, "interval_overflow",
                ("the interval of these scores lies beyond the largest float (about"
                 " 1.8e308), so it cannot be computed"))
    if s.lower is None or s.upper is None:
        return (INSUFFICIENT, "too_few_observed",
                f"{s.observed} observed scores; an interval needs at least 2")
    state = decide_threshold(s.lower, s.upper, t, direction)
    exact_t = as_decimal(t)

    def agrees(lo: Decimal, hi: Decimal) -> bool:
        return decide_threshold(lo, hi, exact_t, direction) == state  # type: ignore[arg-type]

    iv = interval_text(s.lower, s.upper, s.kind, agrees)
    name = method or _short_method(s)
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


def _short_method(s: MetricSummary) -> str:
    """How a decision's detail names the interval: CP, betting, approximate (t), KG
    (Korn–Graubard over trials), case CP (Clopper–Pearson on case means), case betting,
    case approximate (t)."""
    return {
        KORN_GRAUBARD: "KG",
        CASE_EXACT: "case CP",
        BETTING: "betting",
        T_APPROXIMATE: "approximate (t)",
        CASE_BETTING: "case betting",
        CASE_T_APPROXIMATE: "case approximate (t)",
        # earlier names, for summaries made by older versions
        "case_means_t": "case t",
    }.get(s.interval_method or "", "CP" if s.kind == MetricKind.BINARY else "t")


def decide_observed_count(rule: ObservedCountRule, ev: CriterionEvidence) -> Decision:
    n_max = int(rule.max_failures)
    failures = ev.failed if ev.kind == MetricKind.BINARY else 0
    seen = f"{ev.observed} observed, " if ev.missing else ""  # "0 observed, …, 18 missing"
    detail = f"{seen}{failures} failed, {ev.missing} missing; at most {n_max} allowed"
    if ev.case_trials is not None and ev.trials > 1:
        # Over repeated trials the rule counts failed trials, each a call that failed.
        detail = (f"{seen}{failures} failed, {ev.missing} missing trials of {ev.trials} per"
                  f" case; at most {n_max} failed trials allowed")
    if ev.observed == 0:
        # Nothing was seen: "0 failed" would be a pass on no evidence at all.
        state, reason = INSUFFICIENT, NO_OBSERVED
        unit = " trials" if ev.case_trials is not None and ev.trials > 1 else ""
        detail = (f"no observed case: 0 observed, {ev.missing} missing, {ev.excluded}"
                  f" excluded{unit}; at most {n_max} failed allowed")
    elif failures + ev.missing <= n_max:
        state, reason = PASS, "failures_within_budget"
    elif failures > n_max:
        state, reason = FAIL, "failures_over_budget"
    else:
        state, reason = INSUFFICIENT, "missing_cases_could_exceed_budget"
    return Decision(
        rule=rule.id, metric=rule.metric, kind="observed_count", state=state, reason=reason,
        detail=detail, threshold=n_max,
    )


# -- ALLOW is earned, at decision time ------------------------------------------------


def _worst_evidence(ev: CriterionEvidence, direction: Direction) -> CriterionEvidence:
    """The outcome of ``ev``'s scope most against a rule of ``direction``: every case (or
    trial) that was observed or missing, observed and failed under a floor (``min``),
    passed under a ceiling (``max``); for a MEAN with a range, every score at the end a
    ceiling (floor) is against. Excluded ones stay excluded, and the cases keep their order."""
    passed = direction == "max"
    score = 0.0
    if ev.value_range is not None:
        score = ev.value_range[1] if direction == "max" else ev.value_range[0]
    scope = ev.observed + ev.missing
    worst = replace(ev, missing=0, scores=[score] * scope,
                    case_scores=[(case_id, score) for case_id, _ in ev.case_scores])
    if ev.kind == MetricKind.BINARY:
        worst.passed, worst.failed = (scope, 0) if passed else (0, scope)
    if ev.case_trials is not None:
        worst.case_trials = {
            case_id: [
                outcome if classify_outcome(ev.kind, *outcome) is Outcome.EXCLUDED
                else ("OK", passed, None if ev.kind == MetricKind.BINARY else score)
                for outcome in outcomes
            ]
            for case_id, outcomes in ev.case_trials.items()
        }
    return worst


def _unfailable(
    rule: ReleaseRule, ev: CriterionEvidence, level: float
) -> tuple[str, str] | None:
    """Whether no outcome of the cases in a rule's scope could have made it FAIL (SPEC §5,
    "ALLOW is earned"): the check policy/can_fail.py makes at load on the suite, made again
    on the scope the run found, its excluded cases (or trials) left out. Then (the rule as
    written, why), else None.

    ``observed_count``: no FAIL when the cases (or trials, when it counts failed trials)
    observed or missing are at most the budget. ``min``/``max``: the interval the rule is
    decided on (Clopper–Pearson; betting, on case pass fractions over trials), computed by
    :func:`summarize` at the rule's level for every case of the scope at its worst
    (:func:`_worst_evidence`), would not FAIL. A MEAN without a range is left out: any two
    scores can lie beyond its threshold, and with fewer its rule is undecided already."""
    if isinstance(rule, ObservedCountRule):
        if ev.observed + ev.missing > int(rule.max_failures):
            return None
        return f"max_failures: {int(rule.max_failures)}", ""
    if ev.kind == MetricKind.MEAN and ev.value_range is None:
        return None
    direction, t = _threshold_of(rule)
    s = summarize(_worst_evidence(ev, direction), level)
    if s.lower is not None and s.upper is not None and decide_threshold(
        s.lower, s.upper, t, direction
    ) == FAIL:
        return None
    if ev.kind == MetricKind.BINARY:
        worst = "every case passed" if direction == "max" else "every case failed"
    else:
        worst = f"every score were at the {'top' if direction == 'max' else 'bottom'} of the range"
    shown = interval_text(s.lower, s.upper, s.kind)
    side = "above" if direction == "max" else "below"
    why = (f": even if {worst}, its {level_text(level)} {_short_method(s)} interval {shown}"
           f" would not lie {side} {value_text(t, s.kind)}")
    return f"{direction}: {t:g}", why


#: The reason of a rule whose observed evidence could not have made it FAIL, whatever the
#: outcomes: it is INSUFFICIENT_EVIDENCE, never a pass (docs/statistics.md, "ALLOW is earned").
CANNOT_FAIL = "evidence_cannot_fail"


def hold_unfailable(d: Decision, rule: ReleaseRule, ev: CriterionEvidence) -> None:
    """Turn a PASS whose evidence could not have failed into INSUFFICIENT_EVIDENCE
    (:data:`CANNOT_FAIL`), saying how many cases were in the rule's scope and why. The load
    checks (policy/can_fail.py) size a rule's scope from the suite; what only the run shows
    (cases excluded by the evaluator, missing ones) is checked here, on the evidence."""
    if d.state != PASS or d.basis == "corrected":
        return
    level = d.confidence_level if d.confidence_level is not None else 0.95
    found = _unfailable(rule, ev, level)
    if found is None:
        return
    what, why = found
    unit = "trial" if ev.case_trials is not None and ev.trials > 1 else "case"

    def count(n: int) -> str:
        return f"{n} {unit}{'' if n == 1 else 's'}"

    n = ev.observed + ev.missing
    if ev.missing:
        scope = f"{count(n)} in scope ({ev.missing} missing, {ev.excluded} excluded)"
    else:
        scope = f"{count(n)} in scope after {ev.excluded} excluded"
    them = "it" if n == 1 else f"those {count(n)}"
    d.detail = (f"{scope}: no outcome of {them} could fail `{what}`{why}; the rule alone:"
                f" PASS ({d.detail})")
    d.state, d.reason = INSUFFICIENT, CANNOT_FAIL


def hold_unfailable_sequential(
    d: Decision, rule: ReleaseRule, ev: CriterionEvidence, seq: SequentialEvidence
) -> None:
    """:func:`hold_unfailable` for a rule of a sequential run: its PASS is
    INSUFFICIENT_EVIDENCE (:data:`CANNOT_FAIL`) when its sequential test could not have
    FAILed it on every case its scope may hold, had they all gone against it. The load
    check sized the scope from the suite; the cases the evaluator excluded, and a policy
    given to ``gate`` afterwards, are only known here. The scope counted: the cases read
    that were in it (observed or missing), and every case of the suite not read. An
    ``observed_count`` rule passes only once the whole suite is read: its scope is what
    was read, as in a fixed run."""
    if d.state != PASS:
        return
    if isinstance(rule, ObservedCountRule):
        hold_unfailable(d, rule, ev)
        return
    from oloproof.policy.sequential import fails_within  # only for a sequential run

    r = seq.results[rule.id]
    read = ev.observed + ev.missing
    unread = max(0, seq.horizon - seq.fed)
    cases = read + unread
    mean = ev.kind == MetricKind.MEAN
    if fails_within(r, cases, seq.margin, seq.horizon, ev.value_range if mean else None):
        return
    direction, t = _threshold_of(rule)
    if mean:
        worst = f"scored at the {'top' if direction == 'max' else 'bottom'} of the range"
    else:
        worst = "passed" if direction == "max" else "failed"
    d.detail = (f"at most {cases} case{'' if cases == 1 else 's'} in scope ({read} read,"
                f" {ev.excluded} excluded, {unread} not read): the sequential test could not"
                f" FAIL `{direction}: {t:g}` even if every one {worst}; the rule alone: PASS"
                f" ({d.detail})")
    d.state, d.reason = INSUFFICIENT, CANNOT_FAIL


#: The reason of a sequential PASS held because the same system and suite were decided
#: before by another analysis: a sequential run under another seed or margin, or a fixed run
#: that did not allow (:func:`hold_other_seeds`).
OTHER_SEEDS = "other_seeds_tried"


def hold_other_seeds(d: Decision, tried: Sequence[tuple[str, str]]) -> None:
    """A PASS of a sequential run whose system and suite were decided before by another
    analysis (``tried``: run id, what it was: ``a sequential run under seed 7``, ``... under
    seed 0 with margin 0.1``, ``a fixed run of the whole suite that did not allow, exit
    3``) is MANUAL_REVIEW: each analysis keeps the stated error level on its own, but
    trying one after another until one passes does not (the cache makes each try cheap),
    so a person decides whether this one was fixed before those results were seen."""
    if d.state != PASS or not tried:
        return
    runs: dict[str, list[str]] = {}
    for run_id, what in tried:
        runs.setdefault(what, []).append(run_id)
    items = [f"{what} ({', '.join(ids[:3])}{f' and {len(ids) - 3} more' if len(ids) > 3 else ''})"
             for what, ids in runs.items()]
    listing = "; ".join(items[:3]) + (f"; and {len(items) - 3} more" if len(items) > 3 else "")
    d.detail = (f"this system and suite were decided before by {listing}: each analysis keeps"
                " the error level on its own, trying one after another until one passes does"
                " not; a person decides whether this run's seed and margin were fixed before"
                f" those results were seen; the rule alone: PASS ({d.detail})")
    d.state, d.reason = MANUAL, OTHER_SEEDS


# -- multiplicity ----------------------------------------------------------------------


def _family_note(method: str, family: str, size: int, level: float) -> str:
    return (
        f" ({method} over the {'1 rule' if size == 1 else f'{size} rules'} of family {family};"
        " family-wise"
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


@dataclass
class SequentialEvidence:
    """What decides a sequential run (policy/sequential.py), beside the evidence of the
    prefix of its order that was read: per rule, its test's result (``RuleResult``); per
    metric, its values on [0, 1] in the run's order, as (lows, highs) (a missing case at
    0 and at 1); the suite's size (``horizon``) and how many cases of the order were
    read (``fed``)."""

    results: Mapping[str, Any]
    ordered: Mapping[str, tuple[list[float], list[float]]]
    horizon: int
    fed: int
    margin: float = 0.05
    #: The runs of the same system and suite stored before this one that decided it by
    #: another analysis, as (run id, what it was), oldest first (:func:`hold_other_seeds`).
    tried: Sequence[tuple[str, str]] = ()


def summarize_sequence(
    ev: CriterionEvidence, ordered: tuple[list[float], list[float]] | None, level: float,
    horizon: int, margin: float = 0.05, known: tuple[float, float] = (0.0, 1.0),
) -> MetricSummary:
    """A metric of a sequential run: the estimate over the cases read, and a confidence
    sequence over them in the run's order, valid at the data-dependent point where the run
    stopped, where a fixed-n interval is not (docs/sequential-decisions.md): for a rate, the
    one the rules' e-processes give (stats/sequential.py), so that a rule that passed has
    its threshold inside what the interval rules out; for a bounded mean, the betting one
    with its bets fixed by the suite's size. A MEAN without a range keeps its t interval,
    labelled approximate (its rules are refused in a sequential run)."""
    if ev.kind == MetricKind.MEAN and ev.value_range is None:
        return summarize(ev, level)
    lows, highs = ordered if ordered is not None else ([], [])
    if ev.kind == MetricKind.BINARY:
        # Imported here: only a sequential run needs it (`gate` on any other stays as fast).
        from oloproof.stats.sequential import binary_confidence_sequence

        lower, upper = (binary_confidence_sequence(lows, highs, level, margin, *known)
                        if lows else (0.0, 1.0))
        method = (f"beta-binomial mixture confidence sequence {level_text(level)},"
                  " anytime-valid over the run's order")
    else:
        from oloproof.stats.betting import betting_bounds

        lower, upper = betting_bounds(lows, highs, level, horizon) if lows else (0.0, 1.0)
        method = (f"betting confidence sequence (Waudby-Smith & Ramdas) {level_text(level)},"
                  " anytime-valid over the run's order")
    method += ", missing bounded" if ev.missing else ""
    if ev.kind == MetricKind.BINARY:
        n = ev.passed + ev.failed
        return MetricSummary(
            ev.criterion, MetricKind.BINARY, ev.passed / n if n else None, lower, upper,
            n, ev.missing, ev.excluded, passed=ev.passed, method=method,
            interval_method=SEQUENTIAL_CS,
        )
    assert ev.value_range is not None
    lo, hi = ev.value_range
    scores = ev.scores
    mean, sd = mean_and_sd(scores)  # without overflow, whatever the scores' size
    return MetricSummary(
        ev.criterion, MetricKind.MEAN, mean, lo + lower * (hi - lo), lo + upper * (hi - lo),
        len(scores), ev.missing, ev.excluded, sd=sd, method=method, value_range=ev.value_range,
        interval_method=SEQUENTIAL_CS,
    )


def _rejected(seq: SequentialEvidence, metric: str) -> tuple[float, float]:
    """The rates the decided rules of ``metric`` rejected: a floor (the largest threshold a
    ``min`` rule passed or a ``max`` rule failed above) and a ceiling."""
    floor, ceiling = 0.0, 1.0
    for r in seq.results.values():
        if r.metric != metric or r.state is None or r.threshold is None:
            continue
        above = (r.state == PASS) == (r.direction == "min")
        if above:
            floor = max(floor, float(r.threshold))
        else:
            ceiling = min(ceiling, float(r.threshold))
    return floor, ceiling


def _decide_sequential(
    rule: ReleaseRule, seq: SequentialEvidence, s: MetricSummary, ev: CriterionEvidence,
) -> Decision:
    """One rule of a sequential run, from its test's result (policy/sequential.py)."""
    r = seq.results[rule.id]
    where = f"after {r.position:,} of {seq.horizon:,} cases" if r.state is not None else (
        f"over {seq.fed:,} of {seq.horizon:,} cases")
    scope = f" ({r.n:,} in its group)" if r.metric != rule.metric else ""
    if isinstance(rule, ObservedCountRule):
        if r.state == FAIL:
            return Decision(
                rule=rule.id, metric=r.metric, kind="observed_count", state=FAIL,
                reason="failures_over_budget",
                detail=(f"{r.failures} failed > {r.max_failures} allowed, decided {where}{scope}"
                        " (sequential: a failure over the budget is final)"),
                threshold=r.max_failures,
            )
        if seq.fed >= seq.horizon:
            return decide_observed_count(rule, ev)
        return Decision(
            rule=rule.id, metric=r.metric, kind="observed_count", state=INSUFFICIENT,
            reason="sequential_cases_not_run",
            detail=(f"{r.failures} failed, {r.missing} missing {where}: a budget of"
                    f" {r.max_failures} can pass only over every case of the suite"),
            threshold=r.max_failures,
        )
    direction, t = _threshold_of(rule)
    bar = 2.0 / (1.0 - r.level)
    common = {
        "rule": rule.id, "metric": r.metric, "kind": "interval_threshold", "threshold": t,
        "direction": direction, "estimate": s.estimate, "lower": s.lower, "upper": s.upper,
        "confidence_level": r.level,
    }
    if s.observed == 0:
        return Decision(
            state=INSUFFICIENT, reason=NO_OBSERVED,
            detail=(f"no observed case: 0 observed, {s.missing} missing, {s.excluded}"
                    f" excluded {where}"), **common,
        )
    method = f"{r.method} at {level_text(r.level)}"
    if r.state is None:
        detail = (f"undecided {where}{scope}: the largest e-value, {r.e_value:.3g}, stayed"
                  f" below {bar:g} ({method}); estimate {estimate_text(s.estimate, s.kind)}")
        state, reason = INSUFFICIENT, "sequential_undecided"
    else:
        state = RuleState(r.state)
        reason = "sequential_pass" if state == PASS else "sequential_fail"
        side = "above" if (state == PASS) == (direction == "min") else "below"
        detail = (f"decided {where}{scope}: e-value {r.e_value:.3g} >= {bar:g} that the"
                  f" {'rate' if s.kind == MetricKind.BINARY else 'mean'} is {side}"
                  f" {value_text(t, s.kind)} ({method}); estimate"
                  f" {estimate_text(s.estimate, s.kind)}")
    if s.missing:
        detail += f"; {s.observed} observed, {s.missing} missing"
    return Decision(state=state, reason=reason, detail=detail, **common)


def decide_run(
    evidence: Mapping[str, CriterionEvidence],
    policy: ReleasePolicy,
    labelled: Mapping[str, LabelledVerdicts | LabelledScores] | None = None,
    sequential: SequentialEvidence | None = None,
) -> tuple[list[Decision], dict[str, MetricSummary]]:
    """Every rule of ``policy`` on a run's evidence, in declared order, with its action.

    Rules outside a family (or in a family with ``multiplicity: none``) are decided at the
    policy's confidence level, each on its own; the rules of a ``holm`` or ``bonferroni``
    family share one family-wise error of at most 1 - confidence_level.

    ``labelled``: per judge criterion, its verdicts beside a person's labels. A rule with
    ``estimate: corrected`` is decided on the prediction-powered interval; a rule with
    ``judge_validation`` is ``MANUAL_REVIEW`` while the judge is not validated, whatever
    its interval says (an unvalidated judge's PASS or FAIL is not evidence).

    ``sequential``: a sequential run, its rules decided by their anytime-valid tests and
    its metrics summarised by confidence sequences (``evidence`` then holds the prefix of
    the run's order that was read; families were split by Bonferroni in the tests).
    """
    level = float(policy.confidence_level)
    # The metric each rule names before an aggregate points it at a derived one: its
    # missing share counts that metric's trials (docs/repeated-trials.md).
    named = [rule.metric for rule in policy.rules]
    evidence, policy = with_aggregates(evidence, policy)
    reports = {c: judge_report(lv, level) for c, lv in (labelled or {}).items()}
    if sequential is not None:
        summaries = {
            name: summarize_sequence(ev, sequential.ordered.get(name), level,
                                     sequential.horizon, sequential.margin,
                                     _rejected(sequential, name))
            for name, ev in evidence.items()
        }
    else:
        summaries = {name: summarize(ev, level) for name, ev in evidence.items()}
    adjusted: dict[str, Decision] = {}
    members: dict[str, list[IntervalRule]] = {}
    for rule in policy.rules:
        if sequential is not None:
            adjusted[rule.id] = _decide_sequential(
                rule, sequential, summaries[rule.metric], evidence[rule.metric]
            )
        elif isinstance(rule, IntervalRule) and rule.family is not None:
            members.setdefault(rule.family, []).append(rule)
    for family, rules in members.items():
        method = policy.families[family].multiplicity
        if method != "none":
            adjusted.update(_decide_family(rules, method, family, evidence, level))
    decisions: list[Decision] = []
    for rule, metric in zip(policy.rules, named, strict=True):
        d = adjusted.get(rule.id) or _decide_one(rule, evidence, summaries, level, reports)
        if sequential is None:
            hold_unfailable(d, rule, evidence[rule.metric])
        else:
            hold_unfailable_sequential(d, rule, evidence[rule.metric], sequential)
            hold_other_seeds(d, sequential.tried)
        if isinstance(rule, IntervalRule) and rule.judge_validation is not None:
            # The metric it names before an aggregate pointed it at a derived one: the
            # judge is measured on the cases (of its group) its verdicts are on.
            report = reports.get(rule.metric) or reports.get(metric)
            unproven = validate(rule.judge_validation, report, level)
            if unproven is not None:
                alone = f"; the rule alone: {d.state} ({d.detail})"
                d.state, d.reason, d.detail = MANUAL, unproven[0], unproven[1] + alone
        d.action = action_for(d.state, policy, d.reason)
        ev = evidence[metric]
        unit = "trials" if ev.case_trials is not None and ev.trials > 1 else "cases"
        hold_missing(d, ev.observed, ev.missing, _max_missing(policy), unit)
        decisions.append(d)
    return decisions, summaries


def _max_missing(policy: ReleasePolicy | ComparePolicy) -> float:
    value = getattr(policy, "max_missing", None)  # a policy stored before it existed: 0.2
    return 0.2 if value is None else float(value)


def hold_missing(
    d: Decision, observed: int, missing: int, max_missing: float, unit: str = "cases"
) -> None:
    """Set ``d``'s missing share, and mark it incomplete (it blocks, the gate exits 5)
    when the share passes ``max_missing``: a run whose system or judge failed on a large
    part of a rule's cases is not a small run, and ``warn_on`` must not turn it into a
    release (docs/statistics.md, "ALLOW is earned").

    The share is missing / (observed + missing) over the rule's own scope (its metric,
    group, aggregate; trials for a rule over repeated trials); excluded cases are not in
    it, since the rule does not apply to them. ``max_missing`` may be reached, not passed.
    Such a rule blocks, except a FAIL that the policy declares in ``warn_on``: it stays a
    warning, and :func:`gate` exits 5 (incomplete) all the same."""
    seen = observed + missing
    d.missing_share = missing / seen if seen else 0.0
    if d.missing_share > max_missing:
        d.incomplete = True
        if d.state != FAIL:  # a FAIL in warn_on stays declared; the gate is incomplete anyway
            d.action = GateAction.BLOCK
        shown, bar = _share_texts(d.missing_share, max_missing)
        d.detail += f"; {shown} of the {unit} missing, over max_missing {bar}: incomplete evidence"


def _share_text(x: float, digits: int = 1) -> str:
    """A share as a percentage, with at most ``digits`` decimals (``33.3%``, ``100%``)."""
    text = f"{x * 100:.{digits}f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _share_texts(share: float, bar: float) -> tuple[str, str]:
    """A share and the bar it passed, with as many decimals as it takes for the printed
    share not to read as the bar (``20.04%`` over ``20%``, never ``20%`` over ``20%``)."""
    for digits in range(1, 8):
        shown, limit = _share_text(share, digits), _share_text(bar, digits)
        if shown != limit:
            return shown, limit
    return repr(share * 100) + "%", repr(bar * 100) + "%"


def with_aggregates(
    evidence: Mapping[str, CriterionEvidence], policy: ReleasePolicy
) -> tuple[dict[str, CriterionEvidence], ReleasePolicy]:
    """The evidence with the derived metrics the rules ask for (``aggregate: pass_at_k``,
    ``pass_all_k``, ``flaky_share``), each right after its metric, and the policy with those
    rules pointed at them (docs/repeated-trials.md).

    ``flaky_share`` on a run of one trial per case is a configuration error: no case can
    disagree with itself, and a share of 0 flaky cases would be a pass the evidence cannot
    give."""
    wanted = [
        (i, r) for i, r in enumerate(policy.rules)
        if getattr(r, "aggregate", None) not in (None, "mean")
    ]
    if not wanted:
        return dict(evidence), policy
    derived: dict[str, list[CriterionEvidence]] = {}
    rules = list(policy.rules)
    for index, rule in wanted:
        base = evidence[rule.metric]
        aggregate = str(rule.aggregate)
        if aggregate == "flaky_share" and base.case_trials is None:
            raise ConfigError(
                f"rule {rule.id} bounds the flaky share of {rule.metric}, and this run made"
                " one trial per case: a case can only be flaky over repeated trials (run"
                " with trials: 2 or more, or remove the rule)",
                field=f"rules[{index}].aggregate", accepted="mean, pass_at_k, pass_all_k",
            )
        name = aggregate_name(rule.metric, aggregate, base.trials)
        siblings = derived.setdefault(rule.metric, [])
        if all(d.criterion != name for d in siblings):
            siblings.append(base.derive(aggregate))
        rules[index] = replace(rule, metric=name, aggregate=None)
    merged: dict[str, CriterionEvidence] = {}
    for name, ev in evidence.items():
        merged[name] = ev
        for d in derived.get(name, []):
            merged[d.criterion] = d
    return merged, replace(policy, rules=rules)


def _decide_corrected(
    rule: IntervalRule, s: MetricSummary, report: AnyJudgeReport | None, level: float
) -> Decision:
    if s.observed == 0:
        d = decide_interval_rule(rule, s, level)  # no verdict of the judge at all
        d.basis = "corrected"
        return d
    corrected = report.corrected if isinstance(report, JudgeReport) else None
    if corrected is None:
        reason = NEEDS_LABELS
        if isinstance(report, JudgeReport):
            why, reason = report.corrected_note, report.corrected_reason
        elif report is not None:
            why = "estimates a pass rate, and this judge gives scores"
        else:
            why = "the run has no human labels"
        direction, t = _threshold_of(rule)
        return Decision(
            rule=rule.id, metric=rule.metric, kind="interval_threshold", state=MANUAL,
            reason=reason,
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
        method="PPI",
    )
    d.basis = "corrected"
    _hold_corrected_unfailable(d, rule, corrected, level)
    return d


def _hold_corrected_unfailable(
    d: Decision, rule: IntervalRule, corrected: Corrected, level: float
) -> None:
    """ALLOW is earned for a corrected estimate too: a PASS whose interval, with as many
    labelled and unlabelled cases, would not FAIL even if every case went against the rule
    for the judge and the person alike (every one failed, for a floor) is
    INSUFFICIENT_EVIDENCE (:data:`CANNOT_FAIL`): with few labels the prediction-powered
    interval stays wide on the side the labels have not shown, and a floor inside that
    width could only pass."""
    if d.state != PASS:
        return
    from oloproof.stats.ppi import ppi_mean  # only for a run with human labels

    direction, t = _threshold_of(rule)
    worst = 0.0 if direction == "min" else 1.0
    n, others = corrected.labelled, corrected.unlabelled + corrected.missing
    iv = ppi_mean([worst] * n, [worst] * n, [worst] * others, level).interval
    if decide_threshold(iv.lower, iv.upper, t, direction) == FAIL:
        return
    everyone = "failed" if direction == "min" else "passed"
    side = "below" if direction == "min" else "above"
    d.detail = (f"{n} labelled and {others} unlabelled cases: even if every case {everyone},"
                f" for the judge and the person alike, the {level_text(level)} PPI interval"
                f" {interval_text(iv.lower, iv.upper, MetricKind.BINARY)} would not lie"
                f" {side} {value_text(t, MetricKind.BINARY)}: label more cases, drawn at"
                f" random; the rule alone: PASS ({d.detail})")
    d.state, d.reason = INSUFFICIENT, CANNOT_FAIL


def _decide_one(
    rule: ReleaseRule,
    evidence: Mapping[str, CriterionEvidence],
    summaries: Mapping[str, MetricSummary],
    level: float,
    reports: Mapping[str, AnyJudgeReport] | None = None,
) -> Decision:
    if isinstance(rule, ObservedCountRule):
        return decide_observed_count(rule, evidence[rule.metric])
    if rule.estimate == "corrected":
        return _decide_corrected(rule, summaries[rule.metric], (reports or {}).get(rule.metric),
                                 level)
    return decide_interval_rule(rule, summaries[rule.metric], level)


def action_for(
    state: str, policy: ReleasePolicy | ComparePolicy, reason: str | None = None
) -> GateAction:
    """What a state does to the release under a policy's ``block_on`` and ``warn_on``.

    A rule with no observed case (``reason`` ``no_observed_cases``), or whose evidence
    could not have failed it (``evidence_cannot_fail``), whose state is in neither list
    warns instead of allowing silently: an ALLOW resting on nothing would be a release
    the evidence does not show."""
    if state in policy.block_on:
        return GateAction.BLOCK
    if state in policy.warn_on or reason in (NO_OBSERVED, CANNOT_FAIL):
        return GateAction.WARN
    return GateAction.ALLOW


def gate_notes(
    decisions: Sequence[Decision], policy: ReleasePolicy | ComparePolicy,
    ref: str | None = None, *, shard: Sequence[int] | None = None,
) -> list[str]:
    """The line to show with the gate when rules' evidence is incomplete (more of their
    cases missing than ``max_missing``), naming them; ``ref`` (a run id) adds where to look.
    ``shard`` (``(I, K)``): the run is a shard, whose share is its slice's; the limit is the
    suite's, applied by ``merge`` to the shards together (docs/scaling.md)."""
    over = [d for d in decisions if d.incomplete]
    if not over:
        return []
    limit = _max_missing(policy)
    each = "of its cases" if shard is not None else "missing"
    shown = ", ".join(
        f"{d.rule} ({_share_texts(d.missing_share or 0.0, limit)[0]} {each})" for d in over[:5]
    )
    more = f" and {len(over) - 5} more" if len(over) > 5 else ""
    look = f"; see what failed with  oloproof inspect {ref} --failures." if ref else "."
    if shard is not None:
        return [
            f"Missing on shard {shard[0]}/{shard[1]}: {shown}{more}, more than max_missing"
            f" {_share_text(limit, 3)}. The limit is the suite's: `oloproof merge` holds it"
            " against the share missing in all the shards together, which this slice alone"
            " does not decide (a shard never allows, exit 5 whatever its share)" + look
        ]
    return [
        f"Incomplete evidence: {shown}{more}: more than max_missing"
        f" {_share_text(limit, 3)} of the cases are missing, so the gate"
        " blocks (exit 5) whatever warn_on says" + look
    ]


def patched_notes(names: object) -> list[str]:
    """The line to show with the gate of a run whose system code a patch had replaced in
    the process that ran it (``names``: the ``patched`` of its system's description,
    systems/loading.py ``patched_code``): its outputs are not the project's code's, so its
    gate never allows (:func:`gate` with ``incomplete``)."""
    if not isinstance(names, list) or not names:
        return []
    shown = ", ".join(map(str, names[:5])) + (
        f" and {len(names) - 5} more" if len(names) > 5 else "")
    note = (f"Patched code: {shown} replaced in the process that ran it, so its outputs are"
            " not the project's code's; it never allows a release (exit 5 unless a rule"
            " FAILs): `oloproof run` calls the project's own code.")
    return [note]


def fail_declared_not_blocking(policy: ReleasePolicy | ComparePolicy) -> bool:
    """Whether the policy puts FAIL in ``warn_on`` (the one way FAIL may not block)."""
    return "FAIL" not in policy.block_on and "FAIL" in policy.warn_on


#: Said on the gate line of a policy that puts FAIL in ``warn_on``.
FAIL_DOES_NOT_BLOCK = "FAIL does not block, by declaration: FAIL is in warn_on"


def gate_declaration(policy: ReleasePolicy | ComparePolicy) -> str | None:
    """What the gate line adds for a policy that declares that FAIL does not block."""
    return FAIL_DOES_NOT_BLOCK if fail_declared_not_blocking(policy) else None


def gate(decisions: Sequence[Decision], *, incomplete: bool = False) -> tuple[GateAction, int]:
    """The release action and exit code. Precedence (SPEC §5): FAIL, incomplete,
    MANUAL_REVIEW, INSUFFICIENT_EVIDENCE. A rule marked ``incomplete`` (more missing than
    ``max_missing``) makes the evidence incomplete, as a stopped run is."""
    blocking = {d.state for d in decisions if d.action == GateAction.BLOCK}
    if FAIL in blocking:
        return GateAction.BLOCK, EXIT_FAIL
    if incomplete or any(d.incomplete for d in decisions):
        return GateAction.BLOCK, EXIT_INCOMPLETE
    if MANUAL in blocking:
        return GateAction.BLOCK, EXIT_MANUAL
    if INSUFFICIENT in blocking:
        return GateAction.BLOCK, EXIT_INSUFFICIENT
    if any(d.action == GateAction.WARN for d in decisions):
        return GateAction.WARN, EXIT_OK
    return GateAction.ALLOW, EXIT_OK
