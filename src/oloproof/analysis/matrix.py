"""A matrix of variants, concluded from their stored runs: the table and the comparisons.

Each variant of ``run --matrix`` is a run of its own, decided under the release policy as
any run is. What the matrix adds (:func:`conclude_matrix`):

- the table: every variant's metrics (estimate, interval at the policy's level) and gate;
- the comparisons that decide something: every other variant against the baseline, on
  every metric, paired by case id. The interval on the difference (variant - baseline) is
  Newcombe's hybrid score interval for a BINARY metric, for a MEAN metric with a declared
  range the betting interval on the paired differences (valid at every n for bounded
  differences: stats/betting.py), and otherwise a paired Student t interval (labelled
  approximate). A pair missing in either run (the system or the judge failed on that case)
  is held at its worst, as `compare` holds it: the lower end with the missing sides filled
  against the variant, the upper end with them filled for it (no interval for a MEAN
  without a range), so a variant is never "better" by failing to answer its hard cases;
- family-wise control: the comparisons are one family under Holm's step-down procedure
  (Holm 1979), so that the chance of any false "better" or "worse" in the whole table is at
  most 1 - confidence_level. With R the comparisons not yet decided, each is computed at
  1 - alpha/|R|; those that exclude 0 are decided there (``better`` or ``worse``), and the
  step repeats with the rest until a step decides nothing. An interval method whose
  intervals are nested in their level makes this Holm's procedure on the p-values that
  the intervals invert (the same argument as policy/decide.py's rule families).

A matrix of **sequential** runs (``run --matrix --sequential``): every variant is decided
sequentially on its own, its cases taken in the same seeded order (the order depends on the
seed and the case ids only), and each stops calling once its own rules are decided. The pairs
of a comparison are then the cases both runs read before their decisions: the first
min(N_variant, N_baseline) cases of that order, a stopping time of the pairs' own sequence.
A fixed-n interval read at such a time is not valid (it was looked at because the runs
stopped there), so each comparison's interval is the betting confidence sequence on the
paired differences (stats/betting.py, its bets fixed before the first case for the suite's
size), valid at any stopping time; a pair missing in either run enters it at its worst
(both ends). A MEAN metric without a declared range has no such interval and is not
separated. Holm's procedure runs over these intervals as over the fixed-n ones; their bets
are tuned at the family's level and only the threshold follows each step's level, so they
are nested in the level.

"Better" follows the metric's direction: higher for a rate and for a MEAN metric, lower
for an ``absolute_error`` metric and for a rate or a MEAN whose release rules are all
``max`` (:func:`metric_direction`).
Nothing here prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from oloproof._records import dataclass
from oloproof.analysis.compare import _outcomes, shared_metrics
from oloproof.enums import Completeness, ExitCode, MetricKind, RuleState
from oloproof.policy.compare import (
    CaseOutcome,
    PairedMetric,
    _with_missing_ranges,
    _worst_binary,
    pair_metric,
    pair_runs,
)
from oloproof.stats.intervals import mean_and_sd
from oloproof.stats.paired import (
    paired_betting_difference,
    paired_mean_difference,
    paired_proportion_difference,
)
from oloproof.store.reader import RunRecord, get_run, load_cases

if TYPE_CHECKING:
    from oloproof.store.dbapi import Connection

__all__ = [
    "BETTER",
    "NOT_SEPARATED",
    "WORSE",
    "MatrixComparison",
    "conclude_matrix",
    "holm_intervals",
    "matrix_exit_code",
    "metric_direction",
]

BETTER, WORSE, NOT_SEPARATED = "better", "worse", "not separated"
T = TypeVar("T")
BOUNDED_PAIRED = "betting interval on paired differences (bounded)"
SEQUENTIAL_PAIRED = "betting confidence sequence on paired differences (anytime-valid)"
UNRANGED_SEQUENTIAL = "none: a sequential comparison needs a declared range"


@dataclass
class MatrixComparison:
    """One variant against the baseline on one metric, as Holm left it."""

    variant: str
    metric: str
    kind: str
    method: str
    pairs: int
    dropped: int
    estimate: float | None
    lower: float | None
    upper: float | None
    level: float
    verdict: str
    direction: str = "higher"
    candidate: float | None = None
    baseline: float | None = None
    step: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant, "metric": self.metric, "kind": self.kind,
            "method": self.method, "pairs": self.pairs, "dropped": self.dropped,
            "candidate": self.candidate, "baseline": self.baseline,
            "difference": self.estimate, "lower": self.lower, "upper": self.upper,
            "confidence_level": self.level, "verdict": self.verdict,
            "better_is": self.direction, "holm_step": self.step,
        }


# -- the paired intervals ---------------------------------------------------------------


@dataclass
class _Test:
    """What one comparison needs to be computed again at another level."""

    variant: str
    metric: str
    kind: str
    value_range: tuple[float, float] | None
    shared: list[str]
    candidate: Mapping[str, CaseOutcome]
    baseline: Mapping[str, CaseOutcome]
    direction: str = "higher"
    #: A sequential matrix: the case ids both runs read, in their seeded order; the suite's
    #: size (the horizon the bets were fixed for); the family's level (what they are tuned
    #: at). None: a fixed-n matrix.
    ordered: list[str] | None = None
    horizon: int = 0
    family_level: float = 0.95


def _sequential_interval(test: _Test, level: float) -> MatrixComparison:
    """The comparison of a sequential matrix (see the module's doc)."""
    from oloproof.evidence import Outcome
    from oloproof.stats.betting import betting_bounds

    assert test.ordered is not None
    if test.kind == MetricKind.BINARY:
        width = 1.0
    elif test.value_range is not None:
        width = float(test.value_range[1]) - float(test.value_range[0])
    else:
        width = 0.0
    lows: list[float] = []
    highs: list[float] = []
    diffs: list[float] = []
    cand_values: list[float] = []
    base_values: list[float] = []
    missing = excluded = 0
    for case_id in test.ordered:
        c, b = test.candidate.get(case_id), test.baseline.get(case_id)
        if c is None or b is None or Outcome.EXCLUDED in (c.status, b.status):
            excluded += 1
            continue
        if c.status != Outcome.OBSERVED or b.status != Outcome.OBSERVED:
            missing += 1
            lows.append(0.0)
            highs.append(1.0)
            continue
        if test.kind == MetricKind.BINARY:
            cv, bv = float(bool(c.passed)), float(bool(b.passed))
        else:
            cv, bv = float(c.score or 0.0), float(b.score or 0.0)
        cand_values.append(cv)
        base_values.append(bv)
        diffs.append(cv - bv)
        if width > 0:
            unit = min(1.0, max(0.0, (cv - bv + width) / (2.0 * width)))
            lows.append(unit)
            highs.append(unit)
    estimate = sum(diffs) / len(diffs) if diffs else None
    if estimate is not None and not math.isfinite(estimate):
        # Scores near 1e308: their mean difference without overflow (None beyond it).
        estimate = paired_mean_difference(cand_values, base_values).estimate
    lower = upper = None
    method = SEQUENTIAL_PAIRED if width > 0 else UNRANGED_SEQUENTIAL
    if width > 0 and diffs:
        a, z = betting_bounds(lows, highs, level, max(test.horizon, len(lows)),
                              tune_level=test.family_level)
        lower, upper = -width + 2.0 * width * a, -width + 2.0 * width * z
    return MatrixComparison(
        test.variant, test.metric, test.kind, method, len(diffs), missing + excluded,
        estimate, lower, upper, level, _verdict(lower, upper, test.direction), test.direction,
        mean_and_sd(cand_values)[0], mean_and_sd(base_values)[0],
    )


def _interval(test: _Test, level: float) -> MatrixComparison:
    if test.ordered is not None:
        return _sequential_interval(test, level)
    # A MEAN with a range: the betting interval on the paired differences, in the canonical
    # case order, as `compare` decides it (policy/compare.py pair_metric).
    value_range = None if test.kind == MetricKind.BINARY or test.value_range is None else (
        float(test.value_range[0]), float(test.value_range[1]))
    pm = pair_metric(test.metric, test.kind, test.shared, test.candidate, test.baseline, level,
                     value_range)
    method, lower, upper, estimate = pm.method, pm.lower, pm.upper, pm.estimate
    if value_range is not None:
        method = BOUNDED_PAIRED
    if pm.missing_pairs:
        lower, upper, method = _held_at_worst(pm, method)
    return MatrixComparison(
        test.variant, test.metric, test.kind, method, pm.pairs,
        pm.dropped_missing + pm.dropped_excluded, estimate, lower, upper, level,
        _verdict(lower, upper, test.direction), test.direction,
        pm.candidate_value, pm.baseline_value,
    )


def _held_at_worst(pm: PairedMetric, method: str) -> tuple[float | None, float | None, str]:
    """The interval of a fixed-n comparison with its dropped missing pairs at their worst,
    as `compare` holds a PASS (policy/compare.py ``hold_missing_pairs``): the lower end
    with every missing side filled against the variant (the variant failing, the baseline
    passing), the upper end with every one filled for it. A variant that errors on the
    cases it would fail, or a baseline that errored on those it would have passed, is then
    never "better" (nor "worse") for it. Each end is monotone in the level, so the
    intervals stay nested for Holm. A MEAN without a range cannot bound a missing score:
    no interval, not separated."""
    m = len(pm.missing_pairs)
    said = f"{method}; {m} missing pair{'' if m == 1 else 's'} held at their worst"
    if pm.kind == MetricKind.BINARY:
        low = paired_proportion_difference(*_worst_binary(pm, True), pm.level).interval
        high = paired_proportion_difference(*_worst_binary(pm, False), pm.level).interval
        return (None if low is None else low.lower, None if high is None else high.upper,
                said)
    if pm.value_range is None:
        return None, None, (f"{method}; {m} missing pair{'' if m == 1 else 's'}, unbounded"
                            " without a declared range")
    iv = paired_betting_difference(_with_missing_ranges(pm), pm.value_range, pm.level)
    return (None, None, said) if iv is None else (iv.lower, iv.upper, said)


def _verdict(lower: float | None, upper: float | None, direction: str) -> str:
    if lower is None or upper is None:
        return NOT_SEPARATED
    if lower > 0:
        return BETTER if direction == "higher" else WORSE
    if upper < 0:
        return WORSE if direction == "higher" else BETTER
    return NOT_SEPARATED


def holm_intervals(
    tests: Sequence[T], compute: Callable[[T, float], MatrixComparison], level: float
) -> list[MatrixComparison]:
    """Holm's step-down procedure over ``tests`` with intervals (see the module's doc):
    ``compute(test, level)`` gives a :class:`MatrixComparison` at that level. Returned in
    the order of ``tests``, each at the level that decided it (or, undecided, at the level
    of the last step)."""
    alpha = 1.0 - level
    out: dict[int, MatrixComparison] = {}
    remaining = list(range(len(tests)))
    step = 0
    while remaining:
        step += 1
        adjusted = 1.0 - alpha / len(remaining)
        found = {i: compute(tests[i], adjusted) for i in remaining}
        decided = [i for i in remaining if found[i].verdict != NOT_SEPARATED]
        if not decided:
            for i in remaining:
                out[i] = found[i]
            break
        for i in decided:
            found[i].step = step
            out[i] = found[i]
        remaining = [i for i in remaining if i not in out]
    return [out[i] for i in range(len(tests))]


# -- the matrix -------------------------------------------------------------------------


def metric_direction(
    criterion: str, kind: str, evaluator_type: str | None, policy: Mapping[str, Any] | None
) -> str:
    """Which way is better for a metric: ``higher`` or ``lower`` (see the module's doc).

    Lower for an ``absolute_error`` and for a metric whose release rules are all ``max:``
    ceilings: a MEAN, or a rate (a regex that passes when a forbidden phrase appears,
    ``max: 0.05``). A ``flaky_share`` ceiling says nothing of which way a pass goes and is
    not counted; a failure budget (``max_failures``) says a pass is better."""
    if kind != MetricKind.BINARY and evaluator_type == "absolute_error":
        return "lower"
    rules = [r for r in (policy or {}).get("rules", [])
             if r.get("metric") == criterion and r.get("aggregate") != "flaky_share"]
    if rules and all(r.get("max") is not None for r in rules):
        return "lower"
    return "higher"


def matrix_exit_code(baseline: RunRecord | None, others: Sequence[RunRecord]) -> int:
    """The matrix's exit code: the baseline's gate (what runs in production today must hold),
    except that a variant run that did not finish (RUN_ERROR/PARTIAL) makes the matrix
    incomplete (5) unless the baseline FAILs: its comparisons are not decided."""
    if baseline is None or baseline.exit_code is None:
        return int(ExitCode.INCOMPLETE)
    code = int(baseline.exit_code)
    if code == int(ExitCode.FAIL):
        return code
    if any(r.completeness == Completeness.PARTIAL for r in others):
        return int(ExitCode.INCOMPLETE)
    return code


def conclude_matrix(
    conn: Connection,
    variants: Sequence[tuple[str, str]],
    baseline: str,
    level: float,
    directions: Mapping[str, str],
    estimates: Mapping[str, Mapping[str, float | None]],
) -> tuple[list[MatrixComparison], list[str], dict[str, list[dict[str, Any]]]]:
    """The comparisons of every variant against ``baseline`` under Holm, the warnings, and
    per metric the variants ranked by their estimate (best first).

    ``variants``: (name, run id) in the matrix's order; ``directions``: metric -> which
    way is better (:func:`metric_direction`); ``estimates``: variant -> metric -> its
    estimate (the run's own, from its decided summaries)."""
    records = {name: get_run(conn, run_id) for name, run_id in variants}
    base = records[baseline]
    base_cases = load_cases(conn, base.id)
    warnings: list[str] = []
    tests: list[_Test] = []
    ranges = {m["criterion"]: m.get("range") for m in base.metrics}
    base_read = _read_prefix(conn, base)
    for name, _ in variants:
        if name == baseline:
            continue
        record = records[name]
        if record.completeness == Completeness.PARTIAL:
            warnings.append(
                f"variant {name} ({record.id}) is {record.state}: it is not compared"
            )
            continue
        cases = load_cases(conn, record.id)
        pairing = pair_runs([c.case_id for c in cases], [c.case_id for c in base_cases])
        metrics, notes = shared_metrics(record, base)
        warnings += [f"variant {name}: {n}" for n in notes]
        cand_out = _outcomes(cases, metrics)
        base_out = _outcomes(base_cases, metrics)
        read = _read_prefix(conn, record)
        ordered: list[str] | None = None
        if (read is None) != (base_read is None):
            warnings.append(f"variant {name}: one of it and the baseline is a sequential run"
                            " and the other is not: it is not compared")
            continue
        if read is not None and base_read is not None:
            if read[0][:len(base_read[0])] != base_read[0][:len(read[0])]:
                warnings.append(f"variant {name}: its sequential order is not the baseline's"
                                " (another seed or suite): it is not compared")
                continue
            ordered = read[0][:min(read[1], base_read[1])]
        for metric, kind in metrics.items():
            value_range = ranges.get(metric)
            tests.append(_Test(
                name, metric, kind,
                (float(value_range[0]), float(value_range[1])) if value_range else None,
                pairing.shared, cand_out[metric], base_out[metric],
                directions.get(metric, "higher"), ordered,
                len(read[0]) if read is not None else 0, level,
            ))
        if record.trials > 1 or base.trials > 1:
            warnings.append(f"variant {name}: the comparison pairs trial 0 of each case only")
    if base.completeness == Completeness.PARTIAL:
        warnings.append(f"the baseline run {base.id} is {base.state}: nothing is compared")
        tests = []
    comparisons = holm_intervals(tests, _interval, level)
    # A variant whose run did not finish is not ranked either: its estimate is over the
    # cases that happened to finish, and `plan` would size the top two from them.
    finished = [n for n, _ in variants if records[n].completeness != Completeness.PARTIAL]
    return comparisons, warnings, _ranking(finished, directions, estimates)


def _read_prefix(conn: Connection, record: RunRecord) -> tuple[list[str], int] | None:
    """A sequential run's case ids in its seeded order, and how many of them its decision
    read (analysis/sequential.py); None for a fixed-n run."""
    if not record.sequential:
        return None
    from oloproof.analysis.sequential import read_sequential
    from oloproof.analysis.stored import stored_policy

    reading = read_sequential(conn, record, stored_policy(record))
    return [str(c) for c in record.sequential.get("order") or []], reading.fed


def _ranking(
    names: Sequence[str], directions: Mapping[str, str],
    estimates: Mapping[str, Mapping[str, float | None]],
) -> dict[str, list[dict[str, Any]]]:
    """Per metric, the variants by their estimate, best first (ties: matrix order)."""
    ranking: dict[str, list[dict[str, Any]]] = {}
    for metric, direction in directions.items():
        rows = []
        for order, name in enumerate(names):
            estimate = estimates.get(name, {}).get(metric)
            if estimate is not None and math.isfinite(estimate):
                rows.append((order, name, float(estimate)))
        sign = -1.0 if direction == "higher" else 1.0
        rows.sort(key=lambda r: (sign * r[2], r[0]))
        ranking[metric] = [{"variant": n, "estimate": e} for _, n, e in rows]
    return ranking


# -- plan: how many more cases would separate the top two -------------------------------


def _separates(lower: float, upper: float) -> RuleState | None:
    """A two-sided judge: decided when the interval on the difference excludes 0."""

    if lower > 0:
        return RuleState.PASS
    if upper < 0:
        return RuleState.FAIL
    return None


def plan_matrix(conn: Connection, doc: Mapping[str, Any]) -> dict[str, Any]:
    """Per metric, how many more cases would separate the matrix's top two variants: the
    smallest total N of pairs at which the interval on their paired difference (the
    comparison's own method, at the matrix's confidence level, both sides) excludes 0, if
    the cases to come resemble those already paired. A plan, not a decision: the top two
    are chosen after looking, so a later test of them is one more comparison to count."""
    from oloproof.analysis.compare import build_comparison
    from oloproof.stats.sample_size import paired_binary_rule_size, paired_mean_rule_size

    level = float(doc["confidence_level"])
    runs = {v["name"]: v["run_id"] for v in doc["variants"]}
    states = {v["name"]: str(v.get("state", "")) for v in doc["variants"]}
    out: list[dict[str, Any]] = []
    for metric, ranked in (doc.get("ranking") or {}).items():
        entry: dict[str, Any] = {"metric": metric}
        out.append(entry)
        if len(ranked) < 2:
            entry.update(status="not_computable", reason="fewer than two variants have an"
                         " estimate on this metric")
            continue
        top, second = ranked[0]["variant"], ranked[1]["variant"]
        entry.update(top=top, second=second)
        unfinished = [v for v in (top, second) if states[v].endswith("/PARTIAL")]
        if unfinished:
            # As `plan` on a run: a stopped run's cases are the ones that happened to
            # finish, not a draw of the suite to size more cases from.
            entry.update(status="not_computable", reason=(
                f"the run of {unfinished[0]} did not finish ({states[unfinished[0]]}): run"
                " the matrix again to plan from whole runs"))
            continue
        cmp = build_comparison(conn, runs[top], runs[second], level)
        pm = cmp.metrics.get(metric)
        if pm is None or pm.pairs == 0:
            entry.update(status="not_computable", reason="no case was observed in both runs")
            continue
        entry.update(pairs=pm.pairs, difference=pm.estimate, lower=pm.lower, upper=pm.upper,
                     kind=pm.kind)
        if pm.kind == MetricKind.BINARY:
            cells = (int(pm.both_pass or 0), int(pm.cand_only or 0), int(pm.base_only or 0),
                     int(pm.both_fail or 0))
            entry["observed"] = dict(zip(
                ("both_pass", "top_only", "second_only", "both_fail"), cells, strict=True))
            size = paired_binary_rule_size(*cells, _separates, pm.estimate == 0, level)
        else:
            mean = pm.estimate or 0.0
            size = paired_mean_rule_size(mean, pm.sd, pm.pairs, _separates, mean == 0, level)
            entry["observed"] = {"mean_difference": pm.estimate, "sd": pm.sd}
        entry.update(status=size.status, total=size.total, more=size.more,
                     method=size.method, approximate=size.approximate, reason=size.reason)
    return {"matrix_id": doc["matrix_id"], "confidence_level": level, "metrics": out}


def plan_text(plan: Mapping[str, Any]) -> str:
    """The plan of a matrix as the ``plan`` command prints it."""
    from oloproof.policy.format import difference_interval_text, difference_text, level_text

    lines = [f"Matrix {plan['matrix_id']}"]
    for m in plan["metrics"]:
        if "top" not in m:
            lines.append(f"{m['metric']}: {m.get('reason', 'nothing to size')}")
            continue
        head = f"{m['metric']}: top two {m['top']} and {m['second']}"
        if m["status"] == "not_computable":
            lines.append(f"{head}: {m['reason']}")
            continue
        kind = m["kind"]
        observed = (f"{difference_text(m['difference'], kind)}"
                    f" {difference_interval_text(m['lower'], m['upper'], kind)}"
                    f" over {m['pairs']} pairs")
        status = m["status"]
        if status == "sized":
            said = (f"about {m['more']} more cases would separate them, if the observed"
                    f" difference holds ({m['total']} in total)")
        elif status == "already_decided":
            said = "already separated by the cases run"
        elif status == "on_the_bar":
            said = ("no number of cases separates them: their observed difference is 0"
                    " (they are as good as each other on these cases)")
        elif status == "beyond_limit":
            said = f"no size within reach separates them ({m['reason']})"
        else:
            said = m.get("reason") or status
        lines.append(f"{head}: {said}")
        lines.append(f"  observed  {observed}")
        lines.append(f"  method    {m.get('method', '')} (both sides, at"
                     f" {level_text(float(plan['confidence_level']))})"
                     + (", approximate" if m.get("approximate") else ""))
        lines.append("  assuming  the cases to come resemble those already paired; the top two"
                     " were chosen after looking, so testing them is one more comparison")
    return "\n".join(lines) + "\n"
