"""Comparison decisions: a candidate run against a baseline, paired by case id (SPEC §5).

Pairing
    Two runs are paired on the case ids both stored. For each metric, a pair counts only
    when the case was *observed* for that criterion in both runs (status OK, with a pass or
    a score). A case missing (the system or the judge failed) or excluded (the evaluator
    does not apply) in either run is dropped from that metric's pairs, and the count of
    dropped pairs is reported. The interval is on the pairs observed in both runs; a rule
    PASSes only if it would still PASS with every dropped missing pair at its worst
    (:func:`hold_missing_pairs`): a candidate cannot pass by failing to answer.

Intervals (candidate − baseline)
    BINARY metrics: Newcombe's hybrid score interval for a difference of paired proportions
    (Newcombe 1998, Statistics in Medicine 17:2635–2650, method 10), computed by
    :func:`oloproof.stats.paired.paired_proportion_difference` from the paired 2x2 table.
    MEAN metrics with a range declared alike in both runs: the betting interval on the
    per-case differences, which lie in [-w, w] (w the range's width), fed in the canonical
    case order; valid at every number of pairs
    (:func:`oloproof.stats.paired.paired_betting_difference`). MEAN metrics without a range:
    a paired Student t interval on the per-case differences, approximate
    (:func:`oloproof.stats.paired.paired_mean_difference`).

Rules, with margin δ (``superiority`` may have δ = 0)
    superiority:      PASS if lower > δ,  FAIL if upper ≤ δ.
    non_inferiority:  PASS if lower > −δ, FAIL if upper ≤ −δ.
    equivalence:      PASS if −δ < lower and upper < δ (inside (−δ, δ)),
                      FAIL if upper ≤ −δ or lower ≥ δ (wholly outside it).
    Otherwise INSUFFICIENT_EVIDENCE. Nothing here reads files or the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from oloproof._records import dataclass, field
from oloproof.enums import MetricKind
from oloproof.evidence import Outcome
from oloproof.policy.decide import (
    CANNOT_FAIL,
    FAIL,
    INSUFFICIENT,
    NO_OBSERVED,
    PASS,
    Decision,
    action_for,
    hold_missing,
)
from oloproof.policy.format import (
    as_decimal,
    difference_interval_text,
    difference_text,
    level_text,
    percent_text,
    value_text,
)
from oloproof.policy.rules import comparison_bar, decide_comparison_interval

if TYPE_CHECKING:
    from oloproof.policy.rules import ComparisonKind
from oloproof.project.config import ComparePolicy, CompareRule
from oloproof.stats.intervals import mean_and_sd
from oloproof.stats.paired import (
    PAIRED_BETTING,
    paired_betting_difference,
    paired_mean_difference,
    paired_proportion_difference,
)

__all__ = [
    "CaseOutcome",
    "PairedMetric",
    "Pairing",
    "decide_compare_rule",
    "decide_comparison",
    "fmt_difference",
    "fmt_difference_interval",
    "hold_missing_pairs",
    "hold_unfailable_pairs",
    "missing_pair_fills",
    "pair_metric",
    "pair_runs",
]

# The one classification (oloproof.evidence): the same names, the same strings.
OBSERVED, MISSING, EXCLUDED = Outcome.OBSERVED, Outcome.MISSING, Outcome.EXCLUDED


@dataclass(frozen=True)
class CaseOutcome:
    """One case's outcome for one criterion in one run: OBSERVED, MISSING or EXCLUDED."""

    status: str
    passed: bool | None = None
    score: float | None = None


@dataclass
class PairedMetric:
    """One metric compared over the pairs: counts, difference and its interval."""

    metric: str
    kind: str  # BINARY | MEAN
    pairs: int
    dropped_missing: int
    dropped_excluded: int
    method: str
    level: float
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    # BINARY: the paired 2x2 table
    both_pass: int | None = None
    cand_only: int | None = None
    base_only: int | None = None
    both_fail: int | None = None
    # MEAN: the paired scores (kept for sizing; not part of the JSON form)
    cand_scores: list[float] = field(default_factory=list, repr=False)
    base_scores: list[float] = field(default_factory=list, repr=False)
    sd: float | None = None  # MEAN: sd of the per-case differences
    #: MEAN: the range the metric declares in both runs (its scores lie in it), or None.
    value_range: tuple[float, float] | None = field(default=None, repr=False)
    #: The pairs dropped as missing, each as (its place in the canonical case order,
    #: candidate, baseline) (not part of the JSON form): what :func:`hold_missing_pairs`
    #: bounds.
    missing_pairs: list[tuple[bytes, CaseOutcome, CaseOutcome]] = field(
        default_factory=list, repr=False)
    #: MEAN with a range: the observed pairs' differences in the canonical case order, and
    #: their places in it.
    differences: list[float] = field(default_factory=list, repr=False)
    difference_keys: list[bytes] = field(default_factory=list, repr=False)

    @property
    def candidate_value(self) -> float | None:
        """The candidate's pass rate (BINARY) or mean (MEAN) over the pairs."""
        if not self.pairs:
            return None
        if self.kind == MetricKind.BINARY:
            assert self.both_pass is not None and self.cand_only is not None
            return (self.both_pass + self.cand_only) / self.pairs
        return mean_and_sd(self.cand_scores)[0]  # without overflow, near 1e308 too

    @property
    def baseline_value(self) -> float | None:
        if not self.pairs:
            return None
        if self.kind == MetricKind.BINARY:
            assert self.both_pass is not None and self.base_only is not None
            return (self.both_pass + self.base_only) / self.pairs
        return mean_and_sd(self.base_scores)[0]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "metric": self.metric,
            "kind": self.kind,
            "pairs": self.pairs,
            "candidate": self.candidate_value,
            "baseline": self.baseline_value,
            "difference": self.estimate,
            "lower": self.lower,
            "upper": self.upper,
            "method": self.method,
            "confidence_level": self.level,
            "dropped_missing": self.dropped_missing,
            "dropped_excluded": self.dropped_excluded,
        }
        if self.kind == MetricKind.BINARY:
            data.update(
                both_pass=self.both_pass,
                both_fail=self.both_fail,
                candidate_only=self.cand_only,
                baseline_only=self.base_only,
            )
        else:
            data["sd_of_differences"] = self.sd
        return data


@dataclass
class Pairing:
    """Which case ids two runs share, and which only one of them holds."""

    shared: list[str]
    only_candidate: list[str]
    only_baseline: list[str]
    differing_inputs: list[str] = field(default_factory=list)


def pair_runs(
    candidate_ids: Sequence[str],
    baseline_ids: Sequence[str],
    candidate_cases: Mapping[str, Any] | None = None,
    baseline_cases: Mapping[str, Any] | None = None,
) -> Pairing:
    """Pair two runs on case id, keeping the candidate's order.

    ``*_cases`` map a case id to what identifies its content (input and expected); shared
    ids whose content differs are listed in ``differing_inputs`` (they are still paired: a
    case id names a case, and the user is warned).
    """
    base_set = set(baseline_ids)
    cand_set = set(candidate_ids)
    shared = [c for c in candidate_ids if c in base_set]
    differing: list[str] = []
    if candidate_cases is not None and baseline_cases is not None:
        differing = [c for c in shared if candidate_cases.get(c) != baseline_cases.get(c)]
    return Pairing(
        shared=shared,
        only_candidate=[c for c in candidate_ids if c not in base_set],
        only_baseline=[c for c in baseline_ids if c not in cand_set],
        differing_inputs=differing,
    )


_ABSENT = CaseOutcome(MISSING)


def pair_metric(
    metric: str,
    kind: str,
    shared: Sequence[str],
    candidate: Mapping[str, CaseOutcome],
    baseline: Mapping[str, CaseOutcome],
    level: float,
    value_range: tuple[float, float] | None = None,
) -> PairedMetric:
    """Pair one metric over the shared case ids and put an interval on the difference.

    A shared case with no outcome stored in a run (a partial run) is missing there.
    ``value_range``: a MEAN metric's range, declared alike in both runs (the betting
    interval then decides; without it, paired t).
    """
    from oloproof.evidence import case_order_key

    dropped_missing = dropped_excluded = 0
    a = b = c = d = 0
    cand_scores: list[float] = []
    base_scores: list[float] = []
    missing_pairs: list[tuple[bytes, CaseOutcome, CaseOutcome]] = []
    ordered: list[tuple[bytes, float]] = []
    for case_id in shared:
        co = candidate.get(case_id, _ABSENT)
        bo = baseline.get(case_id, _ABSENT)
        if co.status == EXCLUDED or bo.status == EXCLUDED:
            dropped_excluded += 1
            continue
        if co.status != OBSERVED or bo.status != OBSERVED:
            dropped_missing += 1
            missing_pairs.append((case_order_key(case_id), co, bo))
            continue
        if kind == MetricKind.BINARY:
            if co.passed and bo.passed:
                a += 1
            elif co.passed:
                b += 1
            elif bo.passed:
                c += 1
            else:
                d += 1
        else:
            assert co.score is not None and bo.score is not None
            cand_scores.append(co.score)
            base_scores.append(bo.score)
            ordered.append((case_order_key(case_id), co.score - bo.score))
    if kind == MetricKind.BINARY:
        diff = paired_proportion_difference(a, b, c, d, level)
        pm = PairedMetric(
            metric, kind, a + b + c + d, dropped_missing, dropped_excluded, diff.method, level,
            both_pass=a, cand_only=b, base_only=c, both_fail=d,
        )
    else:
        diff = paired_mean_difference(cand_scores, base_scores, level)
        pm = PairedMetric(
            metric, kind, len(cand_scores), dropped_missing, dropped_excluded, diff.method,
            level, cand_scores=cand_scores, base_scores=base_scores, sd=diff.sd,
        )
    pm.estimate = diff.estimate
    if diff.interval is not None:
        pm.lower, pm.upper = diff.interval.lower, diff.interval.upper
    pm.missing_pairs = missing_pairs
    if kind != MetricKind.BINARY and value_range is not None:
        pm.value_range = (float(value_range[0]), float(value_range[1]))
        ordered.sort(key=lambda pair: pair[0])
        pm.difference_keys = [key for key, _ in ordered]
        pm.differences = [x for _, x in ordered]
        betting = paired_betting_difference([(x, x) for x in pm.differences],
                                            pm.value_range, level)
        pm.method = PAIRED_BETTING
        pm.lower = pm.upper = None
        if betting is not None:
            pm.lower, pm.upper = betting.lower, betting.upper
    return pm


# -- formatting a difference ----------------------------------------------------------


def fmt_difference(x: float | None, kind: str) -> str:
    """A difference: ``+22.2 pts`` (percentage points) for a rate, ``-0.125`` for a mean."""
    return difference_text(x, kind)


def fmt_difference_interval(lower: float | None, upper: float | None, kind: str) -> str:
    """An interval on a difference, rounded outward like a run's: ``[-1.6, +45.3] pts``."""
    return difference_interval_text(lower, upper, kind)


def _fmt_bar(x: float, kind: str) -> str:
    """A margin as the user wrote it: ``+2.5 pts`` on a rate, ``-0.05`` on a mean."""
    if not x:
        return "0"
    if kind == MetricKind.BINARY:
        return percent_text(x, signed=True).replace("%", " pts")
    text = value_text(x, kind)
    return text if text.startswith("-") else "+" + text


# -- decisions -------------------------------------------------------------------------

_KIND_WORDS = {
    "superiority": "superiority",
    "non_inferiority": "non-inferiority",
    "equivalence": "equivalence",
}


def decide_compare_rule(rule: CompareRule, pm: PairedMetric) -> Decision:
    """One comparison rule on one paired metric (SPEC §5); ``action`` is set by the caller."""
    margin = float(rule.margin or 0.0)
    kind: ComparisonKind = rule.kind
    bar = comparison_bar(kind, margin)
    base: dict[str, Any] = {
        "rule": rule.id, "metric": rule.metric, "kind": kind, "threshold": margin,
        "direction": None, "estimate": pm.estimate, "lower": pm.lower, "upper": pm.upper,
        "confidence_level": pm.level,
    }
    words = _KIND_WORDS[kind]
    if kind != "superiority" or margin:
        words += f" (margin {_fmt_bar(margin, pm.kind).lstrip('+')})"
    if pm.pairs == 0:
        return Decision(
            state=INSUFFICIENT, reason=NO_OBSERVED,
            detail=(f"{words}: no case was observed in both runs ({pm.dropped_missing}"
                    f" pairs dropped as missing, {pm.dropped_excluded} as excluded)"),
            **base,
        )
    if (pm.lower is None or pm.upper is None) and pm.pairs >= 2:
        # Two pairs and no interval: the paired t interval lies beyond the largest float
        # (stats/paired.py), scores near 1e308.
        return Decision(
            state=INSUFFICIENT, reason="interval_overflow",
            detail=(f"{words}: the interval of the {pm.pairs} paired differences lies beyond"
                    " the largest float (about 1.8e308), so it cannot be computed"), **base,
        )
    if pm.lower is None or pm.upper is None:
        return Decision(
            state=INSUFFICIENT, reason="too_few_pairs",
            detail=f"{words}: {pm.pairs} pair; an interval needs at least 2", **base,
        )
    lo, hi = pm.lower, pm.upper
    state = decide_comparison_interval(lo, hi, kind, margin)
    exact_margin = as_decimal(margin)

    def agrees(printed_lo: Decimal, printed_hi: Decimal) -> bool:
        again = decide_comparison_interval(
            printed_lo, printed_hi, kind, exact_margin  # type: ignore[arg-type]
        )
        return again == state

    short = ("Newcombe" if pm.kind == MetricKind.BINARY
             else "betting" if pm.method == PAIRED_BETTING else "paired t")
    iv = difference_interval_text(lo, hi, pm.kind, agrees)
    label = f"{words}: {level_text(pm.level)} {short} {iv}"
    if kind in ("superiority", "non_inferiority"):
        b = _fmt_bar(bar, pm.kind)
        if state == PASS:
            reason = "candidate_better" if kind == "superiority" else "candidate_not_worse"
            return Decision(state=PASS, reason=reason, detail=f"{label}: lower > {b}", **base)
        if state == FAIL:
            reason = "candidate_not_better" if kind == "superiority" else "candidate_worse"
            return Decision(state=FAIL, reason=reason, detail=f"{label}: upper ≤ {b}", **base)
        return Decision(
            state=INSUFFICIENT, reason="interval_contains_margin",
            detail=f"{label} contains {b}", **base,
        )
    lo_bar, hi_bar = _fmt_bar(-margin, pm.kind), _fmt_bar(margin, pm.kind)
    if state == PASS:
        return Decision(
            state=PASS, reason="interval_inside_margins",
            detail=f"{label}: inside ({lo_bar}, {hi_bar})", **base,
        )
    if state == FAIL:
        return Decision(
            state=FAIL, reason="interval_outside_margins",
            detail=f"{label}: wholly outside ({lo_bar}, {hi_bar})", **base,
        )
    return Decision(
        state=INSUFFICIENT, reason="interval_crosses_margin",
        detail=f"{label} crosses {lo_bar} or {hi_bar}", **base,
    )


def hold_unfailable_pairs(d: Decision, rule: CompareRule, pm: PairedMetric) -> None:
    """Turn a PASS that no paired outcome of the same number of pairs could have made a FAIL
    into INSUFFICIENT_EVIDENCE (``evidence_cannot_fail``; docs/statistics.md, "ALLOW is
    earned"): the rule is decided again, by Newcombe's interval at its level, on the pairs
    most against it (the candidate failing every case the baseline passes: a difference of
    -100 points), and that must be able to FAIL. Two pairs under a margin of 10 points
    cannot: even then the interval is [-100.0, -6.9] pts. A MEAN with a range is asked the
    same of its betting interval, every difference at -w (the range's width): a few pairs
    cannot fail. A MEAN's paired t interval (no range) is not asked: on two pairs or more,
    differences anywhere give an interval wholly beyond any margin."""
    if d.state != PASS or (pm.kind != MetricKind.BINARY and pm.value_range is None):
        return
    margin = float(rule.margin or 0.0)
    if pm.kind == MetricKind.BINARY:
        worst = paired_proportion_difference(0, 0, pm.pairs, 0, pm.level).interval
        method = "Newcombe"
    else:
        # The betting interval of a few pairs may be too wide to ever fail (stats/paired.py).
        assert pm.value_range is not None
        width = pm.value_range[1] - pm.value_range[0]
        worst = paired_betting_difference([(-width, -width)] * pm.pairs, pm.value_range,
                                          pm.level)
        method = "betting"
    if worst is not None and decide_comparison_interval(
        worst.lower, worst.upper, rule.kind, margin
    ) == FAIL:
        return
    shown = "no interval" if worst is None else difference_interval_text(
        worst.lower, worst.upper, pm.kind)
    pairs = f"{pm.pairs} pair{'' if pm.pairs == 1 else 's'}"
    written = rule.kind + (f", margin: {margin:g}" if rule.kind != "superiority" or margin
                           else "")
    even = ("even if the candidate failed every case the baseline passed" if method ==
            "Newcombe" else "even if every difference were the widest the range allows")
    d.detail = (f"{pairs}: no paired outcome of {'it' if pm.pairs == 1 else 'them'} could fail"
                f" `{written}`: {even},"
                f" the {level_text(pm.level)} {method} interval {shown} would not lie at or"
                f" below {_fmt_bar(-margin if rule.kind != 'superiority' else margin, pm.kind)}"
                f"; the rule alone: PASS ({d.detail})")
    d.state, d.reason = INSUFFICIENT, CANNOT_FAIL


#: A comparison rule that PASSed on its observed pairs, but not with its dropped missing
#: pairs at their worst (:func:`hold_missing_pairs`).
MISSING_PAIRS_COULD_FAIL = "missing_pairs_could_fail"
MISSING_PAIRS_UNBOUNDED = "missing_pairs_unbounded"


def _worst_binary(pm: PairedMetric, low: bool) -> tuple[int, int, int, int]:
    """The paired table with every missing side of the dropped pairs filled against the
    candidate (``low``: the candidate failing, the baseline passing) or for it."""
    a, b, c, d = (int(pm.both_pass or 0), int(pm.cand_only or 0), int(pm.base_only or 0),
                  int(pm.both_fail or 0))
    for _, co, bo in pm.missing_pairs:
        cand = bool(co.passed) if co.status == OBSERVED else not low
        base = bool(bo.passed) if bo.status == OBSERVED else low
        if cand and base:
            a += 1
        elif cand:
            b += 1
        elif base:
            c += 1
        else:
            d += 1
    return a, b, c, d


def missing_pair_fills(pm: PairedMetric, kind: str) -> list[tuple[int, int, int, int]]:
    """The dropped pairs of a rate as :func:`hold_missing_pairs` fills them, one paired table
    (both pass, candidate only, baseline only, both fail) of them per fill it tries: against
    the candidate, and for ``equivalence`` for it as well; none when no pair was dropped.
    A PASS holds only if the observed table plus each of these still PASSes (what ``plan``
    sizes with)."""
    if not pm.missing_pairs:
        return []
    observed = (int(pm.both_pass or 0), int(pm.cand_only or 0), int(pm.base_only or 0),
                int(pm.both_fail or 0))
    sides = [True] if kind != "equivalence" else [True, False]
    fills = []
    for low in sides:
        worst = _worst_binary(pm, low)
        fills.append((worst[0] - observed[0], worst[1] - observed[1], worst[2] - observed[2],
                      worst[3] - observed[3]))
    return fills


def _with_missing_ranges(pm: PairedMetric) -> list[tuple[float, float]]:
    """Every pair's difference as a range, the dropped missing pairs as every difference
    their missing score could give, in the canonical case order."""
    assert pm.value_range is not None
    lo, hi = pm.value_range
    keyed: list[tuple[bytes, float, float]] = []
    observed = sorted(
        (key, x) for key, x in zip(pm.difference_keys, pm.differences, strict=True))
    keyed += [(key, x, x) for key, x in observed]
    for key, co, bo in pm.missing_pairs:
        c_lo, c_hi = (co.score, co.score) if co.status == OBSERVED else (lo, hi)
        b_lo, b_hi = (bo.score, bo.score) if bo.status == OBSERVED else (lo, hi)
        assert c_lo is not None and c_hi is not None and b_lo is not None and b_hi is not None
        keyed.append((key, c_lo - b_hi, c_hi - b_lo))
    keyed.sort(key=lambda item: item[0])
    return [(x, y) for _, x, y in keyed]


def hold_missing_pairs(d: Decision, rule: CompareRule, pm: PairedMetric) -> None:
    """Turn a PASS that the dropped missing pairs could undo into INSUFFICIENT_EVIDENCE.

    A pair is dropped when its case is missing in either run (the system or the judge
    failed). The rule is decided again with every missing side at its worst for the PASS:
    for a rate, the candidate failing and the baseline passing where they are missing (and,
    for ``equivalence``, the opposite fill as well); for a MEAN with a range, the betting
    interval of every difference the missing scores could give, which contains the interval
    of every completion (stats/betting.py). A MEAN without a range cannot be bounded: any
    missing pair holds the PASS. So a candidate that errors on the cases it would fail, or
    a baseline that errored on the cases it would have passed, cannot make a PASS; the
    sequential comparison bounds them the same way (policy/sequential.py, PairedTest)."""
    if d.state != PASS or not pm.missing_pairs:
        return
    margin = float(rule.margin or 0.0)
    m = len(pm.missing_pairs)
    dropped = f"{m} pair{'' if m == 1 else 's'} dropped as missing (the case failed in a run)"
    fix = ("; fix what failed and run again (finished cases come from the cache); the rule"
           f" alone: PASS ({d.detail})")
    if pm.kind == MetricKind.BINARY:
        sides = [True] if rule.kind != "equivalence" else [True, False]
        for low in sides:
            diff = paired_proportion_difference(*_worst_binary(pm, low), pm.level)
            iv = diff.interval
            if iv is not None and decide_comparison_interval(
                    iv.lower, iv.upper, rule.kind, margin) == PASS:
                continue
            shown = "no interval" if iv is None else difference_interval_text(
                iv.lower, iv.upper, pm.kind)
            against = "failing" if low else "passing"
            d.detail = (f"{dropped}: with the candidate {against} and the baseline"
                        f" {'passing' if low else 'failing'} where they are missing, the"
                        f" {level_text(pm.level)} Newcombe interval would be {shown}, and"
                        f" the rule would not pass{fix}")
            d.state, d.reason = INSUFFICIENT, MISSING_PAIRS_COULD_FAIL
            return
        return
    if pm.value_range is None:
        d.detail = (f"{dropped}: {rule.metric} declares no range, so a missing score could"
                    f" have been anything and no interval bounds them{fix}")
        d.state, d.reason = INSUFFICIENT, MISSING_PAIRS_UNBOUNDED
        return
    iv = paired_betting_difference(_with_missing_ranges(pm), pm.value_range, pm.level)
    if iv is not None and decide_comparison_interval(
            iv.lower, iv.upper, rule.kind, margin) == PASS:
        return
    shown = "no interval" if iv is None else difference_interval_text(
        iv.lower, iv.upper, pm.kind)
    d.detail = (f"{dropped}: with every score the missing ones could have had, the"
                f" {level_text(pm.level)} betting interval would be {shown}, and the rule"
                f" would not pass{fix}")
    d.state, d.reason = INSUFFICIENT, MISSING_PAIRS_COULD_FAIL


def decide_comparison(
    paired: Mapping[str, PairedMetric], policy: ComparePolicy
) -> list[Decision]:
    """Every rule of a comparison policy, in declared order, with its release action."""
    decisions: list[Decision] = []
    max_missing = getattr(policy, "max_missing", None)
    for rule in policy.rules:
        pm = paired[rule.metric]
        d = decide_compare_rule(rule, pm)
        hold_unfailable_pairs(d, rule, pm)
        hold_missing_pairs(d, rule, pm)
        d.action = action_for(d.state, policy, d.reason)
        # A pair is dropped as missing when the case is missing in either run: an outage of
        # the candidate (or the baseline) is not a small comparison.
        hold_missing(d, pm.pairs, pm.dropped_missing,
                     0.2 if max_missing is None else float(max_missing), "pairs")
        decisions.append(d)
    return decisions
