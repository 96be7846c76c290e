"""Observed, missing, excluded: the one rule that sorts a case's outcome (SPEC §4).

Per case and criterion an outcome is **observed** (a verdict or a score the
metric can use), **missing** (the system or the evaluator failed, or gave
nothing the metric can use) or **excluded** (the evaluator does not apply).
Everything that counts evidence (the engine's provisional metrics, the live
view, the store reader, the paired comparison) sorts outcomes through
:func:`classify_outcome` and counts them in a :class:`CriterionEvidence`, so
the four can never disagree on what a case contributes.

It also fixes the canonical order of cases (:func:`case_order_key`) in which statistics
whose value depends on the order of the scores (the betting interval of a bounded MEAN)
read them: never the order calls finished.

A pure module: it imports only the enums (and hashlib, where the case order is made).
"""

from __future__ import annotations

import math
from enum import StrEnum

from oloproof._records import dataclass, field
from oloproof.enums import JudgmentStatus, MetricKind

# How a panel judge's reason starts (evaluators/judge.py PanelJudge): whether its judges
# disagreed on the case (a flakiness signal, counted by analysis.stored.panel_splits).
PANEL_SPLIT = "split panel"
PANEL_AGREED = "panel agrees"

__all__ = [
    "AGGREGATES",
    "PANEL_AGREED",
    "PANEL_SPLIT",
    "CriterionEvidence",
    "LabelledScores",
    "LabelledVerdicts",
    "Outcome",
    "TrialOutcome",
    "aggregate_name",
    "case_order_key",
    "classify_outcome",
    "group_name",
]


def case_order_key(case_id: str) -> bytes:
    """Where a case falls in the canonical order: the SHA-256 of its id.

    The betting interval of a bounded MEAN (stats/betting.py) depends on the order its
    scores are fed in, and a decision must not: not on which call finished first, nor on
    how the suite file happens to be sorted (a file listing its easy cases first, fed in
    that order, would make the interval wrong). Sorting by a hash of the id gives an order
    that is the same on every reading, in every shard and subset of a run, and carries no
    information about the scores.
    """
    # Imported here, as every digest-making module does (docs/design-notes.md, "Imports: one
    # rule"): hashlib loads OpenSSL, and `oloproof runs` reads this module and sorts nothing.
    from hashlib import sha256

    return sha256(b"oloproof case order 1\0" + case_id.encode()).digest()


def _mean(scores: list[float], extra: float = 0.0, copies: int = 0) -> float:
    """The mean of finite ``scores`` and ``copies`` more ``extra``, also when their sum lies
    beyond the largest float (scores near 1e308): each term is then divided by the count
    first, so that no partial sum can pass the largest term."""
    count = len(scores) + copies
    try:
        total = math.fsum(scores) + copies * extra
    except OverflowError:
        total = math.inf
    if math.isfinite(total):
        return total / count
    return math.fsum([*(x / count for x in scores), copies * (extra / count)])


class Outcome(StrEnum):
    """What one case contributes to one criterion's metric."""

    OBSERVED = "OBSERVED"
    MISSING = "MISSING"
    EXCLUDED = "EXCLUDED"


# The members read for every judgment (classify_outcome, CriterionEvidence.add), held as
# module constants: on Python 3.11 each read of an enum class's attribute goes through
# EnumType.__getattr__'s slot, some 900 instructions where a global costs a few dozen
# (about 2,000 reads, 0.8% of an unchanged rerun of 120 cases: docs/performance.md, 2026-12-05).
_OBSERVED, _MISSING, _EXCLUDED = Outcome.OBSERVED, Outcome.MISSING, Outcome.EXCLUDED
_STATUS_OK, _STATUS_EXCLUDED = JudgmentStatus.OK, JudgmentStatus.EXCLUDED
_BINARY = MetricKind.BINARY


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
    if status == _STATUS_EXCLUDED:
        return _EXCLUDED
    if status != _STATUS_OK:
        return _MISSING
    if kind == _BINARY:
        return _MISSING if passed is None else _OBSERVED
    return _MISSING if score is None else _OBSERVED


#: One trial's judgment of one case: ``(status, passed, score)`` as stored.
TrialOutcome = tuple[str, bool | None, float | None]

#: What a rule may ask of a criterion measured over repeated trials (``aggregate:``):
#: ``mean`` (the mean over cases of each case's pass fraction; the default), ``pass_at_k``
#: (a case passes when at least one of its k trials passed), ``pass_all_k`` (pass^k: when all
#: k passed), ``flaky_share`` (the share of cases whose trials disagree).
AGGREGATES = ("mean", "pass_at_k", "pass_all_k", "flaky_share")


def group_name(metric: str, key: str, value: object) -> str:
    """``exact_label[lang=fr]``: the metric of one group (docs/groups.md); strings as they
    are, other values as JSON. The one spelling, for the groups of a run
    (analysis/groups.py) and for the refusal of a group no case has (policy/can_fail.py)."""
    import json

    shown = value if isinstance(value, str) else json.dumps(value)
    return f"{metric}[{key}={shown}]"


def aggregate_name(metric: str, aggregate: str, trials: int) -> str:
    """The name of a derived metric: ``exact_label[pass@5]``, ``exact_label[pass^5]``,
    ``exact_label[flaky]``."""
    if aggregate == "pass_at_k":
        return f"{metric}[pass@{trials}]"
    if aggregate == "pass_all_k":
        return f"{metric}[pass^{trials}]"
    if aggregate == "flaky_share":
        return f"{metric}[flaky]"
    raise ValueError(f"unknown aggregate {aggregate!r}")


@dataclass
class CriterionEvidence:
    """The counts (BINARY) or scores (MEAN) of one criterion over the cases seen so far.

    Fed one judgment at a time through :meth:`add`; ``observed + missing +
    excluded`` is always the number of judgments added.

    With repeated trials (``trials`` > 1) it is fed one case at a time through
    :meth:`add_case`: the counts are then counts of trials, and ``case_trials`` keeps each
    case's trial outcomes in trial order, from which the per-case figures are derived.
    """

    criterion: str
    kind: MetricKind | str
    value_range: tuple[float, float] | None = None
    passed: int = 0
    failed: int = 0
    scores: list[float] = field(default_factory=list)
    missing: int = 0
    excluded: int = 0
    trials: int = 1
    case_trials: dict[str, list[TrialOutcome]] | None = None
    #: MEAN, one trial per case: ``(case id, score or None when missing)`` per case added
    #: with its id, for :meth:`ordered_scores`.
    case_scores: list[tuple[str, float | None]] = field(default_factory=list)

    @property
    def observed(self) -> int:
        return self.passed + self.failed if self.kind == _BINARY else len(self.scores)

    def add(
        self, status: str, passed: bool | None, score: float | None, case_id: str | None = None
    ) -> Outcome:
        """Count one judgment of this criterion and say how it was counted. ``case_id``
        (MEAN metrics) places the score in the canonical order (:meth:`ordered_scores`)."""
        outcome = classify_outcome(self.kind, status, passed, score)
        if outcome is _EXCLUDED:
            self.excluded += 1
        elif outcome is _MISSING:
            self.missing += 1
            if case_id is not None and self.kind != _BINARY:
                self.case_scores.append((case_id, None))
        elif self.kind == _BINARY:
            if passed:
                self.passed += 1
            else:
                self.failed += 1
        else:
            assert score is not None
            self.scores.append(float(score))
            if case_id is not None:
                self.case_scores.append((case_id, float(score)))
        return outcome

    def ordered_scores(self) -> list[float | None]:
        """MEAN, one trial per case: every observed score and None for every missing case,
        in the canonical order (:func:`case_order_key`). Evidence added without case ids
        (by hand, in a test) keeps the order it was added in, missing cases last."""
        if len(self.case_scores) == len(self.scores) + self.missing:
            ordered = sorted(self.case_scores, key=lambda pair: case_order_key(pair[0]))
            return [score for _case, score in ordered]
        return [*self.scores, *([None] * self.missing)]

    def add_case(self, case_id: str, outcomes: list[TrialOutcome]) -> None:
        """Count every trial of one case, and keep them for the per-case figures."""
        if self.case_trials is None:
            self.case_trials = {}
        self.case_trials[case_id] = list(outcomes)
        for status, passed, score in outcomes:
            self.add(status, passed, score)

    def case_counts(self) -> list[tuple[int, int, int]]:
        """BINARY over trials: per case, ``(passed, failed, missing)`` trials (excluded
        trials left out; a case whose every trial was excluded gives (0, 0, 0))."""
        out = []
        for outcomes in (self.case_trials or {}).values():
            p = f = m = 0
            for status, passed, score in outcomes:
                sorted_as = classify_outcome(self.kind, status, passed, score)
                if sorted_as is Outcome.MISSING:
                    m += 1
                elif sorted_as is Outcome.OBSERVED:
                    if passed:
                        p += 1
                    else:
                        f += 1
            out.append((p, f, m))
        return out

    def case_means(self) -> tuple[list[float], int, int]:
        """MEAN over trials: ``(means, missing, excluded)``: the mean score of every case
        whose trials were all observed; a case with any missing trial is a missing case
        (its mean could be anything its range allows), one with every trial excluded is
        excluded."""
        means: list[float] = []
        missing = excluded = 0
        for outcomes in (self.case_trials or {}).values():
            scores: list[float] = []
            gap = False
            for status, passed, score in outcomes:
                sorted_as = classify_outcome(self.kind, status, passed, score)
                if sorted_as is Outcome.MISSING:
                    gap = True
                elif sorted_as is Outcome.OBSERVED:
                    assert score is not None
                    scores.append(float(score))
            if gap:
                missing += 1
            elif scores:
                mean = sum(scores) / len(scores)
                means.append(mean if math.isfinite(mean) else _mean(scores))
            else:
                excluded += 1
        return means, missing, excluded

    def case_ranges(self, low: float = 0.0, high: float = 1.0) -> list[tuple[float, float]]:
        """Over trials, per case with a trial not excluded, in the canonical order
        (:func:`case_order_key`), the range its mean over those trials could have: the
        observed scores with every missing trial at ``low``, and at ``high`` (equal ends when
        no trial is missing). A MEAN's scores lie in its declared range [low, high] (a score
        outside it, refused upstream since scores are checked, counts as missing); a BINARY
        trial scores 1 when it passed and 0 when it failed, so the mean is the case's pass
        fraction, in [0, 1]."""
        binary = self.kind == MetricKind.BINARY
        out: list[tuple[bytes, float, float]] = []
        for case_id, outcomes in (self.case_trials or {}).items():
            scores: list[float] = []
            gaps = 0
            for status, passed, score in outcomes:
                sorted_as = classify_outcome(self.kind, status, passed, score)
                if sorted_as is Outcome.MISSING:
                    gaps += 1
                elif sorted_as is Outcome.OBSERVED:
                    if binary:
                        scores.append(1.0 if passed else 0.0)
                        continue
                    assert score is not None
                    if low <= score <= high:
                        scores.append(float(score))
                    else:
                        gaps += 1
            count = len(scores) + gaps
            if count == 0:
                continue
            a = min(high, max(low, _mean(scores, low, gaps)))
            b = min(high, max(low, _mean(scores, high, gaps)))
            out.append((case_order_key(case_id), a, b))
        out.sort(key=lambda item: item[0])
        return [(a, b) for _key, a, b in out]

    def flaky_cases(self) -> dict[str, tuple[int, int, int]]:
        """BINARY over trials: the cases whose observed trials disagree, with their
        ``(passed, failed, missing)`` trial counts, in the order they were added."""
        out = {}
        for (case_id, _), counts in zip(
            (self.case_trials or {}).items(), self.case_counts(), strict=True
        ):
            if counts[0] and counts[1]:
                out[case_id] = counts
        return out

    def derive(self, aggregate: str) -> CriterionEvidence:
        """A BINARY metric with one outcome per case, derived from the trials of each.

        - ``pass_at_k``: passes if a trial passed; fails if every trial was observed and
          failed; otherwise missing (a missing trial could have passed).
        - ``pass_all_k``: fails if a trial failed; passes if every trial was observed and
          passed; otherwise missing.
        - ``flaky_share``: "passes" (is flaky) if its observed trials disagree; "fails"
          (is steady) if every trial was observed and they agree; otherwise missing.

        A case whose every trial was excluded is excluded. With one trial per case,
        ``pass_at_k`` and ``pass_all_k`` are the metric itself, case by case.
        """
        name = aggregate_name(self.criterion, aggregate, self.trials)
        # ``trials`` without ``case_trials``: one outcome per case, derived from k trials.
        out = CriterionEvidence(name, MetricKind.BINARY, trials=self.trials)
        if self.case_trials is None:
            # One trial per case: each judgment is its case's only trial.
            if aggregate == "flaky_share":
                raise ValueError("flakiness needs repeated trials")
            out.passed, out.failed = self.passed, self.failed
            out.missing, out.excluded = self.missing, self.excluded
            return out
        for p, f, m in self.case_counts():
            if p + f + m == 0:
                out.excluded += 1
                continue
            if aggregate == "pass_at_k":
                verdict = True if p else (None if m else False)
            elif aggregate == "pass_all_k":
                verdict = False if f else (None if m else True)
            elif aggregate == "flaky_share":
                verdict = True if (p and f) else (None if m else False)
            else:
                raise ValueError(f"unknown aggregate {aggregate!r}")
            if verdict is None:
                out.missing += 1
            elif verdict:
                out.passed += 1
            else:
                out.failed += 1
        return out


@dataclass
class LabelledScores:
    """A scored judge's scores on a run's cases, beside a person's scores where there are
    any (the scored counterpart of :class:`LabelledVerdicts`).

    ``scores``: case id -> the judge's score, or None (missing: the system or the judge
    failed). ``labels``: case id -> the person's score, for the run's cases only.
    ``scale``: the judge's ``[low, high]``.
    """

    criterion: str
    scale: tuple[float, float]
    scores: dict[str, float | None]
    labels: dict[str, float]
    labels_elsewhere: int = 0
    drawn_uniformly: bool = False
    labels_stale: int = 0  # cases labelled on another output than the run's: not used

    def pairs(self) -> tuple[list[float], list[float], int]:
        """``(judge scores, person scores, judge_missing)`` on the labelled cases, pairs in
        the labels' order; a labelled case without a judge score is counted apart."""
        judge: list[float] = []
        person: list[float] = []
        missing = 0
        for case_id, label in self.labels.items():
            score = self.scores.get(case_id)
            if score is None:
                missing += 1
            else:
                judge.append(score)
                person.append(label)
        return judge, person, missing


@dataclass
class LabelledVerdicts:
    """A judge's verdicts on a run's cases, beside a person's labels where there are any.

    ``verdicts``: case id -> the judge's pass (True/False) or None (missing: the system
    or the judge failed). ``labels``: case id -> the person's pass, for the run's cases
    only; ``labels_elsewhere`` counts labels on ids the run does not hold, ``labels_stale``
    the run's cases whose labels are about another output (the person saw another one).
    """

    criterion: str
    verdicts: dict[str, bool | None]
    labels: dict[str, bool]
    labels_elsewhere: int = 0
    drawn_uniformly: bool = False  # every label chosen by a uniform draw (oloproof label)
    labels_stale: int = 0  # cases labelled on another output than the run's: not used

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
