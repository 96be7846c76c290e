"""A judge measured against a person's labels, and what that does to a rule.

:func:`judge_report` computes, for one judge criterion of a run, the agreement
statistics on the labelled cases (oloproof.stats.agreement): for a pass/fail judge the
2x2 table, sensitivity, specificity, kappa and the prediction-powered estimate of the
rate a person would give (oloproof.stats.ppi); for a scored judge the mean absolute
difference and the quadratic-weighted kappa. :func:`validate` turns a rule's
``judge_validation`` into ``MANUAL_REVIEW`` while the labels are too few or do not show
the judge good enough. Pure: numbers in, typed results out.

Why sensitivity and specificity, not agreement alone: at 90% prevalence a judge that
passes everything agrees with the person on 90% of cases (its agreement's lower bound
clears 0.85 with a hundred labels) while it never fails what the person fails
(specificity 0). Each of the two has its own Clopper-Pearson bound, so a constant judge
can never be validated, whatever the prevalence.
"""

from __future__ import annotations

import math

from oloproof._records import dataclass
from oloproof.enums import MetricKind
from oloproof.evidence import LabelledScores, LabelledVerdicts
from oloproof.policy.format import estimate_text, interval_text, level_text, value_text
from oloproof.stats.intervals import Interval, clopper_pearson, mean_and_sd

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from oloproof.project.policies import JudgeValidation
    from oloproof.stats.agreement import Agreement, Proportion, ScoreAgreement

__all__ = ["CORRECTED_METHOD", "NEEDS_LABELS", "OUT_OF_RANGE", "AnyJudgeReport", "Corrected",
           "JudgeReport", "ScoredJudgeReport", "corrected_rate", "judge_report", "validate"]

CORRECTED_METHOD = ("prediction-powered (Angelopoulos et al. 2023), lambda = 1, interval calibrated"
                    " for each side")


@dataclass(frozen=True)
class Corrected:
    """The prediction-powered estimate of a person's pass rate over the run's cases."""

    estimate: float
    lower: float
    upper: float
    lam: float
    labelled: int
    unlabelled: int
    missing: int
    level: float


def stale_note(stale: int) -> str:
    """Why labels the run's cases carry are not used, in words ("" when none is stale)."""
    if not stale:
        return ""
    return (f" ({stale} labelled case{'' if stale == 1 else 's'} of this run"
            f" {'was' if stale == 1 else 'were'} labelled on another output: the system or"
            " the case changed since, and a person's verdict on one output is not one on"
            " another; label this run's outputs)")


def _assumption(drawn_uniformly: bool) -> str:
    if drawn_uniformly:
        return ("checked: every label was drawn uniformly at random from the run's"
                " unlabelled cases by oloproof label")
    return ("not checked: the labels do not record a uniform random draw (write them"
            " with oloproof label to have it recorded)")


@dataclass(frozen=True)
class JudgeReport:
    """A pass/fail judge against a person's labels."""

    criterion: str
    labels: int  # labels on the run's cases
    judge_missing: int  # labelled cases without a verdict from the judge
    labels_elsewhere: int  # labels on ids the run does not hold
    agreement: Agreement
    raw_estimate: float | None  # the judge's pass rate over the run's observed cases
    raw_observed: int
    corrected: Corrected | None
    corrected_note: str
    drawn_uniformly: bool = False  # the labels' draw was recorded as uniform (oloproof label)
    corrected_reason: str = "corrected_estimate_needs_labels"  # why corrected is None
    labels_stale: int = 0  # the run's cases labelled on another output: not used
    missing_passed: int = 0  # of judge_missing, the cases the person passes

    @property
    def assumption(self) -> str:
        """Whether the corrected estimate's assumption was checked, in words."""
        return _assumption(self.drawn_uniformly)

    @property
    def n(self) -> int:
        """Labelled cases with a verdict from the judge."""
        return self.agreement.n

    def to_json(self) -> dict[str, Any]:
        from oloproof.stats.agreement import KAPPA_METHOD

        a = self.agreement

        def prop(p: Any) -> dict[str, Any]:
            iv = p.interval
            return {"k": p.k, "n": p.n, "estimate": p.estimate,
                    "lower": iv.lower if iv else None, "upper": iv.upper if iv else None,
                    "method": "Clopper–Pearson"}

        c = self.corrected
        return {
            "criterion": self.criterion, "labels": self.labels,
            "judge_missing": self.judge_missing, "labels_elsewhere": self.labels_elsewhere,
            "labels_on_another_output": self.labels_stale,
            "confidence_level": a.level,
            "confusion": {"judge_pass_person_pass": a.both_pass,
                          "judge_pass_person_fail": a.judge_only,
                          "judge_fail_person_pass": a.person_only,
                          "judge_fail_person_fail": a.both_fail},
            "agreement": prop(a.agreement), "sensitivity": prop(a.sensitivity),
            "specificity": prop(a.specificity),
            "kappa": {"estimate": a.kappa,
                      "lower": a.kappa_interval.lower if a.kappa_interval else None,
                      "upper": a.kappa_interval.upper if a.kappa_interval else None,
                      "method": KAPPA_METHOD},
            "raw": {"estimate": self.raw_estimate, "observed": self.raw_observed},
            "corrected": None if c is None else {
                "estimate": c.estimate, "lower": c.lower, "upper": c.upper, "lambda": c.lam,
                "labelled": c.labelled, "unlabelled": c.unlabelled, "missing": c.missing,
                "method": CORRECTED_METHOD,
                "assumes": "the labelled cases are a uniformly random subset of the run's",
                "assumption": self.assumption,
            },
            "corrected_note": self.corrected_note,
        }


@dataclass(frozen=True)
class ScoredJudgeReport:
    """A scored judge (``scale:``) against a person's scores."""

    criterion: str
    labels: int  # labels on the run's cases
    judge_missing: int  # labelled cases without a score from the judge
    labels_elsewhere: int  # labels on ids the run does not hold
    agreement: ScoreAgreement
    raw_estimate: float | None  # the judge's mean score over the run's observed cases
    raw_observed: int
    drawn_uniformly: bool = False
    labels_stale: int = 0  # the run's cases labelled on another output: not used
    missing_labels: tuple[float, ...] = ()  # the person's scores where the judge gave none

    @property
    def n(self) -> int:
        """Labelled cases with a score from the judge."""
        return self.agreement.n

    @property
    def assumption(self) -> str:
        return _assumption(self.drawn_uniformly)

    def to_json(self) -> dict[str, Any]:
        from oloproof.stats.agreement import MEAN_ABS_DIFF_METHOD, WEIGHTED_KAPPA_METHOD

        a = self.agreement

        def bounds(value: float | None, iv: Interval | None, method: str) -> dict[str, Any]:
            return {"estimate": value, "lower": iv.lower if iv else None,
                    "upper": iv.upper if iv else None, "method": method}

        return {
            "criterion": self.criterion,
            "scale": [int(x) if x == int(x) else x for x in a.scale], "labels": self.labels,
            "judge_missing": self.judge_missing, "labels_elsewhere": self.labels_elsewhere,
            "labels_on_another_output": self.labels_stale,
            "confidence_level": a.level, "pairs": a.n, "exact": a.exact,
            "judge_mean": a.judge_mean, "person_mean": a.person_mean, "mean_diff": a.mean_diff,
            "mean_abs_diff": bounds(a.mean_abs_diff, a.mean_abs_diff_interval,
                                    MEAN_ABS_DIFF_METHOD),
            "weighted_kappa": bounds(a.weighted_kappa, a.weighted_kappa_interval,
                                     WEIGHTED_KAPPA_METHOD),
            "raw": {"estimate": self.raw_estimate, "observed": self.raw_observed},
            "assumption": self.assumption,
        }


AnyJudgeReport = JudgeReport | ScoredJudgeReport


#: Why a rule on the corrected estimate is MANUAL_REVIEW: too few labels with a verdict, or
#: an interval that holds no rate (the labels contradict the judge's other verdicts).
NEEDS_LABELS = "corrected_estimate_needs_labels"
OUT_OF_RANGE = "corrected_estimate_out_of_range"


def corrected_rate(lv: LabelledVerdicts, level: float) -> tuple[Corrected | None, str, str]:
    """PPI on the run's cases, or None, why not and the reason's code.

    Missing verdicts (the system or the judge failed) are bounded: the interval holds the
    interval of every completion of them with passes and fails
    (:func:`oloproof.stats.ppi.ppi_mean_bounds`, exact), and the one of the observed cases
    alone; the estimate leaves them out. The interval is then cut to [0, 1], the estimate
    too. When it lies wholly outside [0, 1] there is no corrected estimate
    (:data:`OUT_OF_RANGE`): no rate is inside it, which says the labelled cases do not look
    like a random subset (:func:`oloproof.stats.ppi.clip_rate`).
    """
    labelled = [(lv.verdicts.get(i), p) for i, p in lv.labels.items() if i in lv.verdicts]
    unlabelled = [v for i, v in lv.verdicts.items() if i not in lv.labels]
    missing = sum(v is None for v, _ in labelled) + sum(v is None for v in unlabelled)
    seen_lab = [(float(v), float(p)) for v, p in labelled if v is not None]
    seen_unl = [float(v) for v in unlabelled if v is not None]
    if len(seen_lab) < 2 or len(seen_unl) < 2:
        return None, (f"needs 2 labelled and 2 unlabelled cases with a verdict; the run has "
                      f"{len(seen_lab)} and {len(seen_unl)}"), NEEDS_LABELS
    from oloproof.stats.ppi import clip_rate, ppi_mean, ppi_mean_bounds  # runs with labels

    base = ppi_mean([p for _, p in seen_lab], [v for v, _ in seen_lab], seen_unl, level)
    lower, upper = base.unclipped.lower, base.unclipped.upper
    if missing:
        iv = ppi_mean_bounds([float(p) for _, p in labelled],
                             [None if v is None else float(v) for v, _ in labelled],
                             [None if v is None else float(v) for v in unlabelled], level)
        lower, upper = min(lower, iv.lower), max(upper, iv.upper)
    if lower > 1.0 or upper < 0.0:
        side = "above 100%" if lower > 1.0 else "below 0%"
        judged = sum(v for v, _ in seen_lab) / len(seen_lab)
        others = sum(seen_unl) / len(seen_unl)
        return None, (
            f"is out of range: its {level_text(level)} PPI interval"
            f" {interval_text(lower, upper, MetricKind.BINARY)} lies wholly {side}, where no"
            f" rate lies: the judge passes {estimate_text(judged, MetricKind.BINARY)} of the"
            f" {len(seen_lab)} labelled cases and {estimate_text(others, MetricKind.BINARY)}"
            f" of the {len(seen_unl)} others, a difference a uniformly random choice of"
            f" labelled cases makes unlikely; check how they were drawn"), OUT_OF_RANGE
    iv = clip_rate(lower, upper)
    estimate = min(iv.upper, max(iv.lower, base.estimate))
    return Corrected(estimate, iv.lower, iv.upper, base.lam, len(seen_lab), len(seen_unl),
                     missing, level), "", ""


def judge_report(lv: LabelledVerdicts | LabelledScores, level: float) -> AnyJudgeReport:
    """Agreement (and, for a pass/fail judge, the corrected estimate) of one judge
    criterion at ``level``."""
    if isinstance(lv, LabelledScores):
        from oloproof.stats.agreement import score_agreement  # only for runs with labels

        judge, person, missing = lv.pairs()
        observed_scores = [s for s in lv.scores.values() if s is not None]
        return ScoredJudgeReport(
            lv.criterion, len(lv.labels), missing, lv.labels_elsewhere,
            score_agreement(judge, person, lv.scale, level),
            mean_and_sd(observed_scores)[0],
            len(observed_scores), lv.drawn_uniformly, lv.labels_stale,
            tuple(p for i, p in lv.labels.items() if lv.scores.get(i) is None),
        )
    from oloproof.stats.agreement import agreement  # only for runs with human labels

    both_pass, judge_only, person_only, both_fail, missing = lv.table()
    stats = agreement(both_pass, judge_only, person_only, both_fail, level)
    observed = [v for v in lv.verdicts.values() if v is not None]
    corrected, note, reason = corrected_rate(lv, level)
    note += stale_note(lv.labels_stale) if note else ""
    return JudgeReport(
        lv.criterion, len(lv.labels), missing, lv.labels_elsewhere, stats,
        sum(observed) / len(observed) if observed else None, len(observed), corrected, note,
        lv.drawn_uniformly, reason or NEEDS_LABELS, lv.labels_stale,
        sum(1 for i, p in lv.labels.items() if p and lv.verdicts.get(i) is None),
    )


# ------------------------------------------------------------------------------ validation


@dataclass(frozen=True)
class _Check:
    """One figure of a judge held to its floor (or ceiling).

    ``state``: ``shown`` (the bound is on the right side), ``unproven`` (the estimate is,
    the bound is not yet), ``hopeless`` (the estimate itself is on the wrong side, or
    undefined where it cannot become defined), ``unmeasured`` (no labelled case of the
    kind it is measured on), ``missing`` (labelled cases without a verdict, counted as
    the misses they could have been, keep it from being shown). ``total``: about how many
    labels in all would show it if the figures held (None: no number would, or it is not
    known). ``missing``: the labelled cases it is measured on that have no verdict.
    """

    name: str
    state: str
    seen: str
    bar: str
    total: int | None = None
    short: str = ""  # the observed figure alone: ``1/2 = 50.0%``, ``0.625``
    missing: int = 0


def _without(missing: int, what: str = "verdict") -> str:
    many = missing != 1
    return (f"{missing} labelled case{'s' if many else ''} {'have' if many else 'has'} no"
            f" {what} (the system or the judge failed): a missing {what} could have been a"
            f" miss; rerun to get the judge's {what}s on them")


def _rate_check(name: str, p: Proportion, floor: float, level: float, share: float | None,
                whom: str, missing: int = 0) -> _Check:
    """A Clopper-Pearson lower bound against ``floor``. ``share``: the part of all labels
    this rate is measured on (sensitivity: the cases the person passes), to turn labels of
    that kind into labels in all. ``missing``: the labelled cases of that kind without a
    verdict: each is counted as a miss (k of n + missing), the worst they could have been,
    since a missing verdict never makes a figure look better (the lower bound only falls
    as n grows at the same k)."""
    from oloproof.stats.agreement import labels_to_settle

    bar = value_text(floor, MetricKind.BINARY)
    observed_hopeless = (p.n > 0 and p.interval is not None and p.interval.lower < floor
                         and labels_to_settle(p.k, p.n, floor, level) is None)
    if missing and not observed_hopeless:
        n = p.n + missing
        bounded = clopper_pearson(p.k, n, level)
        lower, upper = bounded.lower, bounded.upper
        short = f"{p.k}/{n} = {estimate_text(p.k / n, MetricKind.BINARY)}"
        seen = (f"{name} {short} ({missing} without a verdict, counted as misses),"
                f" {level_text(level)} CP {interval_text(lower, upper, MetricKind.BINARY)}")
        if lower >= floor:
            return _Check(name, "shown", seen, bar, short=short)
        return _Check(name, "missing", seen, bar, short=short, missing=missing)
    if p.n == 0 or p.interval is None or p.estimate is None:
        return _Check(name, "unmeasured",
                      f"{name} not measured: no labelled case the person {whom}", bar)
    iv = interval_text(p.interval.lower, p.interval.upper, MetricKind.BINARY)
    short = f"{p.k}/{p.n} = {estimate_text(p.estimate, MetricKind.BINARY)}"
    seen = f"{name} {short}, {level_text(level)} CP {iv}"
    if p.interval.lower >= floor:
        return _Check(name, "shown", seen, bar, short=short)
    needed = labels_to_settle(p.k, p.n, floor, level)
    if needed is None:
        return _Check(name, "hopeless", seen, bar, short=short)
    total = needed if share is None else math.ceil(needed / share)
    return _Check(name, "unproven", seen, bar, total, short=short)


def _binary_checks(config: JudgeValidation, report: JudgeReport, level: float) -> list[_Check]:
    a = report.agreement
    n = a.n
    positives = a.sensitivity.n
    passed = report.missing_passed
    checks = [
        _rate_check("sensitivity", a.sensitivity, config.sensitivity_floor, level,
                    positives / n if n else None, "passes", passed),
        _rate_check("specificity", a.specificity, config.specificity_floor, level,
                    (n - positives) / n if n else None, "fails",
                    report.judge_missing - passed),
    ]
    if config.min_agreement is not None:
        checks.append(_rate_check("agreement", a.agreement, float(config.min_agreement), level,
                                  None, "labels", report.judge_missing))
    return checks


def _about(n: int, half: float, room: float) -> int | None:
    """About how many labels in all bring a half-width of ``half`` at ``n`` labels under
    ``room``, the interval narrowing as 1/sqrt(n) (approximate)."""
    if room <= 0:
        return None
    if half <= 0:
        return n
    return max(n, math.ceil(n * (half / room) ** 2))


def _scored_checks(config: JudgeValidation, report: ScoredJudgeReport,
                   level: float) -> list[_Check]:
    a = report.agreement
    lv = level_text(level)
    checks: list[_Check] = []
    ceiling = config.max_mean_abs_diff
    missing = len(report.missing_labels)
    if ceiling is not None:
        bar = value_text(float(ceiling), MetricKind.MEAN)
        mad, iv = a.mean_abs_diff, a.mean_abs_diff_interval
        if missing and (mad is None or mad < ceiling):
            # Each labelled case without a score counted at the largest difference it
            # could have had: a missing score never makes the judge look closer.
            from oloproof.stats.agreement import mean_abs_diff_worst

            worst, wiv = mean_abs_diff_worst(mad, a.n, report.missing_labels, a.scale, level)
            short = estimate_text(worst, MetricKind.MEAN)
            seen = (f"mean absolute difference {short} points ({missing} without a score,"
                    f" counted at the largest difference each could have had), {lv}"
                    f" {interval_text(wiv.lower, wiv.upper, MetricKind.MEAN)}")
            checks.append(_Check("mean absolute difference",
                                 "shown" if wiv.upper <= ceiling else "missing", seen, bar,
                                 short=short, missing=missing))
        elif mad is None or iv is None:
            checks.append(_Check("mean absolute difference", "unmeasured",
                                 "mean absolute difference not measured", bar))
        else:
            short = estimate_text(mad, MetricKind.MEAN)
            seen = (f"mean absolute difference {short} points, "
                    f"{lv} {interval_text(iv.lower, iv.upper, MetricKind.MEAN)}")
            if iv.upper <= ceiling:
                checks.append(_Check("mean absolute difference", "shown", seen, bar,
                                     short=short))
            elif mad >= ceiling:
                checks.append(_Check("mean absolute difference", "hopeless", seen, bar,
                                     short=short))
            else:
                checks.append(_Check("mean absolute difference", "unproven", seen, bar,
                                     _about(a.n, iv.upper - mad, ceiling - mad), short=short))
    floor = config.min_weighted_kappa
    if floor is not None:
        bar = f"{float(floor):g}"
        kappa, iv = a.weighted_kappa, a.weighted_kappa_interval
        if missing and (kappa is None or kappa > floor):
            # Kappa over every score the missing ones could have had is not bounded here:
            # it is not shown until the judge has scored every labelled case.
            figure = "undefined" if kappa is None else f"{kappa:.2f}"
            checks.append(_Check(
                "weighted kappa", "missing",
                f"weighted kappa {figure} on the {a.n} labelled cases with a score, not"
                f" shown while {missing} other{'s have' if missing != 1 else ' has'} none",
                bar, short=figure, missing=missing))
        elif kappa is None:
            checks.append(_Check("weighted kappa", "unmeasured",
                                 "weighted kappa undefined (the judge and the person gave "
                                 "every labelled case one and the same score)", bar))
        elif iv is None:
            checks.append(_Check("weighted kappa", "unmeasured" if kappa > floor else "hopeless",
                                 f"weighted kappa {kappa:.2f}, no interval (no variance)", bar))
        else:
            short = f"{kappa:.2f}"
            seen = f"weighted kappa {short}, {lv} [{iv.lower:.2f}, {iv.upper:.2f}]"
            if iv.lower >= floor:
                checks.append(_Check("weighted kappa", "shown", seen, bar, short=short))
            elif kappa <= floor:
                checks.append(_Check("weighted kappa", "hopeless", seen, bar, short=short))
            else:
                checks.append(_Check("weighted kappa", "unproven", seen, bar,
                                     _about(a.n, kappa - iv.lower, kappa - floor),
                                     short=short))
    return checks


def _outlook(checks: list[_Check], n: int, scored: bool) -> str:
    """What more labels would do, at the observed figures (nothing to say without any)."""
    if n == 0 and not any(c.state == "missing" for c in checks):
        return ""
    hopeless = [c for c in checks if c.state == "hopeless"]
    if hopeless:
        c = hopeless[0]
        side = "at or under" if c.name == "mean absolute difference" else "at or above"
        figure = f" ({c.short})" if c.short else ""
        return (f"at the observed {c.name}{figure} no number of labels shows it {side} "
                f"{c.bar}: review the rubric or the judge")
    short = [c for c in checks if c.state == "missing"]
    if short:
        return _without(max(c.missing for c in short), "score" if scored else "verdict")
    unmeasured = [c for c in checks if c.state == "unmeasured"]
    if unmeasured:
        return f"{unmeasured[0].seen}: label more cases, drawn at random"
    totals = [c.total for c in checks if c.state == "unproven" and c.total is not None]
    if not totals:
        return ""
    total = max(totals)
    if scored:
        return (f"about {total} labels in all would validate it if its figures held"
                f" ({max(total - n, 0)} more; approximate: the intervals narrow as 1/sqrt(n))")
    return (f"{total} labels in all would validate it at the observed rates"
            f" ({max(total - n, 0)} more)")


_REASON_WORD = {"sensitivity": "sensitivity", "specificity": "specificity",
                "agreement": "agreement", "mean absolute difference": "mean_abs_diff",
                "weighted kappa": "weighted_kappa"}


def validate(
    config: JudgeValidation, report: AnyJudgeReport | None, level: float
) -> tuple[str, str] | None:
    """``(reason, detail)`` when the judge is not validated (the rule is MANUAL_REVIEW);
    None when the labels show it good enough at ``level``.

    A pass/fail judge is validated when the Clopper-Pearson lower bounds of its
    sensitivity and of its specificity each reach their floor (and of its agreement, when
    ``min_agreement`` is set); a scored judge when the upper bound of its mean absolute
    difference is at or under ``max_mean_abs_diff`` and the lower bound of its weighted
    kappa at or above ``min_weighted_kappa`` (those that are set). Always after
    ``min_labels`` labelled cases with a verdict.
    """
    need = config.min_labels
    if report is None:
        return ("judge_labels_too_few",
                (f"no human labels on this run; judge_validation needs {need}: label {need}"
                " cases (human_labels in oloproof.yaml)"))
    scored = isinstance(report, ScoredJudgeReport)
    if scored:
        assert isinstance(report, ScoredJudgeReport)
        checks = _scored_checks(config, report, level)
        if not checks:
            return ("judge_validation_needs_a_threshold",
                    ("a scored judge is validated with max_mean_abs_diff or "
                     "min_weighted_kappa, and this rule's judge_validation sets neither"))
    else:
        assert isinstance(report, JudgeReport)
        checks = _binary_checks(config, report, level)
    n = report.n
    outlook = _outlook(checks, n, scored)
    if n < need:
        what = "labelled cases with a score" if scored else "labelled cases with a verdict"
        return ("judge_labels_too_few",
                (f"{n} {what}{stale_note(report.labels_stale)}; judge_validation needs"
                 f" {need}: label {need - n} more" + (f"; {outlook}" if outlook else "")))
    failing = [c for c in checks if c.state != "shown"]
    if not failing:
        return None
    seen = "; ".join(c.seen for c in checks)
    worst = next((c for c in failing if c.state == "hopeless"), failing[0])
    word = _REASON_WORD[worst.name]
    if worst.state == "hopeless":
        reason = ("judge_mean_abs_diff_above_ceiling" if word == "mean_abs_diff"
                  else f"judge_{word}_below_floor")
    else:
        reason = f"judge_{word}_unproven"
    if worst.state == "unproven":
        side = "upper bound over" if word == "mean_abs_diff" else "lower bound under"
        return (reason, f"{seen}: {worst.name} {side} {worst.bar}; {outlook}")
    return (reason, f"{seen}; {outlook}")


def corrected_interval(report: AnyJudgeReport | None) -> Interval | None:
    if not isinstance(report, JudgeReport) or report.corrected is None:
        return None
    return Interval(report.corrected.lower, report.corrected.upper)


__all__ += ["corrected_interval"]
