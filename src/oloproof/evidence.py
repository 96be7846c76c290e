"""Observed, missing, excluded: the one rule that sorts a case's outcome (SPEC §4).

Per case and criterion an outcome is **observed** (a verdict or a score the
metric can use), **missing** (the system or the evaluator failed, or gave
nothing the metric can use) or **excluded** (the evaluator does not apply).
Everything that counts evidence (the engine's provisional metrics, the live
view, the store reader, the paired comparison) sorts outcomes through
:func:`classify_outcome` and counts them in a :class:`CriterionEvidence`, so
the four can never disagree on what a case contributes.

A pure module: it imports only the enums.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from oloproof.enums import JudgmentStatus, MetricKind

# How a panel judge's reason starts (evaluators/judge.py PanelJudge): whether its judges
# disagreed on the case (a flakiness signal, counted by analysis.stored.panel_splits).
PANEL_SPLIT = "split panel"
PANEL_AGREED = "panel agrees"

__all__ = [
    "PANEL_AGREED",
    "PANEL_SPLIT",
    "CriterionEvidence",
    "LabelledVerdicts",
    "Outcome",
    "classify_outcome",
]


class Outcome(StrEnum):
    """What one case contributes to one criterion's metric."""

    OBSERVED = "OBSERVED"
    MISSING = "MISSING"
    EXCLUDED = "EXCLUDED"


def classify_outcome(
    kind: MetricKind | str, status: str, passed: bool | None, score: float | None
) -> Outcome:
    """Sort one judgment.

    ``EXCLUDED`` is excluded. ``OK`` is observed only when it carries what the
    metric needs (a verdict for BINARY, a score for MEAN); an ``OK`` without it
    is missing, never a silent pass or fail. Every other status (``ERROR``,
    ``MISSING``, ``TIMEOUT``, anything unknown) is missing: missing evidence can
    only widen an interval, so an unknown status can never make a metric look better.
    """
    if status == JudgmentStatus.EXCLUDED:
        return Outcome.EXCLUDED
    if status != JudgmentStatus.OK:
        return Outcome.MISSING
    if kind == MetricKind.BINARY:
        return Outcome.MISSING if passed is None else Outcome.OBSERVED
    return Outcome.MISSING if score is None else Outcome.OBSERVED


@dataclass
class CriterionEvidence:
    """The counts (BINARY) or scores (MEAN) of one criterion over the cases seen so far.

    Fed one judgment at a time through :meth:`add`; ``observed + missing +
    excluded`` is always the number of judgments added.
    """

    criterion: str
    kind: MetricKind | str
    value_range: tuple[float, float] | None = None
    passed: int = 0
    failed: int = 0
    scores: list[float] = field(default_factory=list)
    missing: int = 0
    excluded: int = 0

    @property
    def observed(self) -> int:
        return self.passed + self.failed if self.kind == MetricKind.BINARY else len(self.scores)

    def add(self, status: str, passed: bool | None, score: float | None) -> Outcome:
        """Count one judgment of this criterion and say how it was counted."""
        outcome = classify_outcome(self.kind, status, passed, score)
        if outcome is Outcome.EXCLUDED:
            self.excluded += 1
        elif outcome is Outcome.MISSING:
            self.missing += 1
        elif self.kind == MetricKind.BINARY:
            if passed:
                self.passed += 1
            else:
                self.failed += 1
        else:
            assert score is not None
            self.scores.append(float(score))
        return outcome


@dataclass
class LabelledVerdicts:
    """A judge's verdicts on a run's cases, beside a person's labels where there are any.

    ``verdicts``: case id -> the judge's pass (True/False) or None (missing: the system
    or the judge failed). ``labels``: case id -> the person's pass, for the run's cases
    only; ``labels_elsewhere`` counts labels on ids the run does not hold.
    """

    criterion: str
    verdicts: dict[str, bool | None]
    labels: dict[str, bool]
    labels_elsewhere: int = 0
    drawn_uniformly: bool = False  # every label chosen by a uniform draw (oloproof label)

    def table(self) -> tuple[int, int, int, int, int]:
        """``(both_pass, judge_only, person_only, both_fail, judge_missing)`` on the
        labelled cases."""
        both_pass = judge_only = person_only = both_fail = missing = 0
        for case_id, person in self.labels.items():
            judge = self.verdicts.get(case_id)
            if judge is None:
                missing += 1
            elif judge and person:
                both_pass += 1
            elif judge:
                judge_only += 1
            elif person:
                person_only += 1
            else:
                both_fail += 1
        return both_pass, judge_only, person_only, both_fail, missing
