"""A judge measured against a person's labels, and what that does to a rule.

:func:`judge_report` computes, for one judge criterion of a run, the agreement
statistics on the labelled cases (oloproof.stats.agreement) and the prediction-powered
estimate of the rate a person would give (oloproof.stats.ppi). :func:`validate` turns a
rule's ``judge_validation`` into ``MANUAL_REVIEW`` while the labels are too few or do not
show agreement above the floor. Pure: numbers in, typed results out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oloproof._records import dataclass
from oloproof.enums import MetricKind
from oloproof.evidence import LabelledVerdicts
from oloproof.policy.format import estimate_text, interval_text, level_text, value_text
from oloproof.stats.intervals import Interval

if TYPE_CHECKING:
    from typing import Any

    from oloproof.project.models import JudgeValidation
    from oloproof.stats.agreement import Agreement

__all__ = ["CORRECTED_METHOD", "Corrected", "JudgeReport", "corrected_rate", "judge_report",
           "validate"]

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


@dataclass(frozen=True)
class JudgeReport:
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

    @property
    def assumption(self) -> str:
        """Whether the corrected estimate's assumption was checked, in words."""
        if self.drawn_uniformly:
            return ("checked: every label was drawn uniformly at random from the run's"
                    " unlabelled cases by oloproof label")
        return ("not checked: the labels do not record a uniform random draw (write them"
                " with oloproof label to have it recorded)")

    def to_json(self) -> dict[str, Any]:
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
                      "method": "Fleiss, Cohen and Everitt (1969), large-sample"},
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


def corrected_rate(lv: LabelledVerdicts, level: float) -> tuple[Corrected | None, str]:
    """PPI++ on the run's cases, or None and why not.

    Missing verdicts (the system or the judge failed) are bounded: the interval is the
    hull of the intervals with every missing verdict a pass and every one a fail; the
    estimate leaves them out.
    """
    labelled = [(lv.verdicts.get(i), p) for i, p in lv.labels.items() if i in lv.verdicts]
    unlabelled = [v for i, v in lv.verdicts.items() if i not in lv.labels]
    missing = sum(v is None for v, _ in labelled) + sum(v is None for v in unlabelled)
    seen_lab = [(float(v), float(p)) for v, p in labelled if v is not None]
    seen_unl = [float(v) for v in unlabelled if v is not None]
    if len(seen_lab) < 2 or len(seen_unl) < 2:
        return None, (f"needs 2 labelled and 2 unlabelled cases with a verdict; the run has "
                      f"{len(seen_lab)} and {len(seen_unl)}")
    from oloproof.stats.ppi import ppi_mean  # only for runs with human labels

    base = ppi_mean([p for _, p in seen_lab], [v for v, _ in seen_lab], seen_unl, level)
    lower, upper = base.interval.lower, base.interval.upper
    if missing:
        for fill in (0.0, 1.0):
            lab = [(fill if v is None else float(v), float(p)) for v, p in labelled]
            unl = [fill if v is None else float(v) for v in unlabelled]
            iv = ppi_mean([p for _, p in lab], [v for v, _ in lab], unl, level).interval
            lower, upper = min(lower, iv.lower), max(upper, iv.upper)
    return Corrected(base.estimate, lower, upper, base.lam, len(seen_lab), len(seen_unl),
                     missing, level), ""


def judge_report(lv: LabelledVerdicts, level: float) -> JudgeReport:
    """Agreement and the corrected estimate of one judge criterion at ``level``."""
    from oloproof.stats.agreement import agreement  # only for runs with human labels

    both_pass, judge_only, person_only, both_fail, missing = lv.table()
    stats = agreement(both_pass, judge_only, person_only, both_fail, level)
    observed = [v for v in lv.verdicts.values() if v is not None]
    corrected, note = corrected_rate(lv, level)
    return JudgeReport(
        lv.criterion, len(lv.labels), missing, lv.labels_elsewhere, stats,
        sum(observed) / len(observed) if observed else None, len(observed), corrected, note,
        lv.drawn_uniformly,
    )


def validate(
    config: JudgeValidation, report: JudgeReport | None, level: float
) -> tuple[str, str] | None:
    """``(reason, detail)`` when the judge is not validated (the rule is MANUAL_REVIEW);
    None when the labels show agreement at or above the floor at ``level``."""
    need = config.min_labels
    floor = config.min_agreement
    if report is None:
        return ("judge_labels_too_few",
                (f"no human labels on this run; judge_validation needs {need}: label {need}"
                " cases (human_labels in oloproof.yaml)"))
    a = report.agreement
    n = a.n
    if n < need:
        return ("judge_labels_too_few",
                (f"{n} labelled cases with a verdict; judge_validation needs {need}: label "
                f"{need - n} more"))
    prop = a.agreement
    assert prop.interval is not None and prop.estimate is not None
    iv = interval_text(prop.interval.lower, prop.interval.upper, MetricKind.BINARY)
    seen = (f"agreement {prop.k}/{n} = {estimate_text(prop.estimate, MetricKind.BINARY)}, "
            f"{level_text(level)} CP {iv}")
    floor_text = value_text(floor, MetricKind.BINARY)
    if prop.interval.lower >= floor:
        return None
    from oloproof.stats.agreement import labels_to_settle

    total = labels_to_settle(prop.k, n, floor, level)
    if total is None:
        return ("judge_agreement_below_floor",
                (f"{seen}; at this rate no number of labels shows {floor_text}: review the "
                "rubric or the judge"))
    return ("judge_agreement_unproven",
            (f"{seen}: lower bound under {floor_text}; about {total - n} more labels would "
            f"settle it if agreement holds at "
            f"{estimate_text(prop.estimate, MetricKind.BINARY)}"))


def corrected_interval(report: JudgeReport | None) -> Interval | None:
    if report is None or report.corrected is None:
        return None
    return Interval(report.corrected.lower, report.corrected.upper)


__all__ += ["corrected_interval"]
