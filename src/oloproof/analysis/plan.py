"""How many more cases would decide a rule left undecided (SPEC §7): the computation behind
``oloproof plan``.

- a BINARY run rule, k of n observed and m missing: the smallest total N whose N - m observed
  cases, holding round(k/n · (N - m)) passes, decide the rule's own Clopper–Pearson interval
  bounded for the m missing cases *still missing* (exact). What re-running the missing cases
  would change is reported beside it (:class:`IfResolved`).
- with ``assurance`` P: the smallest total that decides the rule with probability >= P if
  the true pass rate equals the observed one (exact binomial sum), or for a comparison rule
  if the pairs fall in the four cells of the paired table with the observed shares (exact
  multinomial sum); BINARY metrics only.
- a MEAN run rule with a declared range: the first N at which the betting interval (the one
  that decides it) of N cases holding the observed mix of scores, the missing cases held
  missing at their worst, decides the rule (approximate); with ``assurance``, a normal
  approximation around that interval. Without a range: from the stored scores' mean and
  sd, the first N at which the t interval clears the bar (approximate (t)).
- a comparison rule: the observed paired 2x2 table scaled to N pairs, decided by Newcombe's
  interval (exact), or for a MEAN metric the paired t analogue (approximate).

The extra cases are priced from what the run recorded (per-case time bounds, mean tokens and
cost). Nothing here prints: the results are dataclasses with a ``to_json`` form, which
``plan --json`` prints and :mod:`oloproof.render.plan` turns into text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from oloproof._records import dataclass, field
from oloproof.analysis.compare import build_comparison, kind_names, shared_metrics
from oloproof.analysis.stored import (
    StoredEvidenceError,
    labelled_verdicts,
    rule_labels,
    stored_labels,
    stored_policy,
)
from oloproof.enums import CaseStatus, Completeness, ExitCode, MetricKind, RuleState
from oloproof.errors import OloproofError
from oloproof.policy.compare import PairedMetric, decide_comparison, missing_pair_fills
from oloproof.policy.decide import CANNOT_FAIL, Decision, decide_run, with_aggregates
from oloproof.policy.format import difference_text, estimate_text, level_text, value_text
from oloproof.policy.rules import (
    comparison_judge,
    decide_threshold,
    on_comparison_bar,
    threshold_judge,
)
from oloproof.project.config import (
    ComparePolicy,
    CompareRule,
    IntervalRule,
    ObservedCountRule,
    ReleasePolicy,
)
from oloproof.stats.betting import BETTING, projected_bounds
from oloproof.stats.intervals import clopper_pearson_bounded, mean_and_sd, student_t_mean
from oloproof.stats.paired_assurance import paired_binary_assurance_size
from oloproof.stats.sample_size import (
    AssuranceResult,
    SizeResult,
    betting_assurance_size,
    betting_rule_size,
    binary_assurance_size,
    binary_rule_size,
    mean_rule_size,
    paired_binary_rule_size,
    paired_mean_rule_size,
)
from oloproof.stats.trials import clustered_rate_bounded
from oloproof.store.comparisons import get_comparison
from oloproof.store.reader import CaseRow, CriterionEvidence, get_run, load_cases

if TYPE_CHECKING:
    from oloproof.policy.rules import Direction
    from oloproof.store.dbapi import Connection

__all__ = [
    "CaseCosts",
    "ComparisonPlan",
    "IfResolved",
    "IncompleteError",
    "PlanStatus",
    "RulePlan",
    "RunPlan",
    "case_costs",
    "plan_comparison",
    "plan_exit_code",
    "plan_run",
    "plan_stored_comparison",
    "plan_stored_run",
]

PlanStatus = Literal[
    "decided",
    "sized",
    "already_decided",
    "on_the_bar",
    "beyond_limit",
    "not_computable",
    "not_admitted",
    "refused",
]


class IncompleteError(OloproofError):
    """Asked to plan a partial run or a comparison with one: nothing was decided (exit 5)."""

    exit_code = int(ExitCode.INCOMPLETE)


_CONCURRENCY = "cases run one after another; concurrency divides the time and not the cost"


# -- what a case costs --------------------------------------------------------------------


@dataclass(frozen=True)
class CaseCosts:
    """Per-case time bounds and mean usage recorded by a run (or a sum over two runs)."""

    cases: int
    time_min_s: float | None
    time_max_s: float | None
    input_tokens: float | None  # per-case mean; None when nothing was reported
    output_tokens: float | None
    cost_usd: float | None
    #: How many of the cases reported any usage (the means count the others as 0).
    usage_cases: int = 0

    def __add__(self, other: CaseCosts) -> CaseCosts:
        def add(a: float | None, b: float | None) -> float | None:
            return None if a is None and b is None else (a or 0.0) + (b or 0.0)

        time_ok = self.time_min_s is not None and other.time_min_s is not None
        return CaseCosts(
            min(self.cases, other.cases),
            add(self.time_min_s, other.time_min_s) if time_ok else None,
            add(self.time_max_s, other.time_max_s) if time_ok else None,
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
            add(self.cost_usd, other.cost_usd),
            min(self.usage_cases, other.usage_cases),
        )

    def times(self, calls: int) -> CaseCosts:
        """The costs of a case that makes ``calls`` calls of what one call (trial 0, whose
        figures a run stores for each case) cost."""
        if calls == 1:
            return self

        def scale(x: float | None) -> float | None:
            return None if x is None else x * calls

        return CaseCosts(self.cases, scale(self.time_min_s), scale(self.time_max_s),
                         scale(self.input_tokens), scale(self.output_tokens),
                         scale(self.cost_usd), self.usage_cases)

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "time_s_min": self.time_min_s,
            "time_s_max": self.time_max_s,
            "input_tokens_mean": self.input_tokens,
            "output_tokens_mean": self.output_tokens,
            "cost_usd_mean": self.cost_usd,
            "usage_cases": self.usage_cases,
        }


def case_costs(cases: Sequence[CaseRow]) -> CaseCosts:
    """Time per case = its execution latency plus its judgments' latencies (for a cached
    case, the latencies stored are the original calls'); usage = the system's plus the
    judges', averaged over the cases stored (a case that reported none counts as 0; how
    many reported is kept, and the plan says so when some did not)."""
    times: list[float] = []
    tokens_in = tokens_out = cost = 0.0
    saw_tokens = saw_cost = False
    reporting = 0
    for case in cases:
        ms = [case.latency_ms] + [j.latency_ms for j in case.judgments.values()]
        known = [x for x in ms if x is not None]
        if known:
            times.append(math.fsum(known) / 1000.0)
        reported = False
        for usage in [case.usage] + [j.usage for j in case.judgments.values()]:
            if not usage:
                continue
            reported = True
            i = float(usage.get("input_tokens") or 0)
            o = float(usage.get("output_tokens") or 0)
            c = float(usage.get("cost_usd") or 0.0)
            tokens_in += i
            tokens_out += o
            cost += c
            saw_tokens = saw_tokens or bool(i or o)
            saw_cost = saw_cost or bool(c)
        reporting += reported
    n = len(cases)
    return CaseCosts(
        n,
        min(times) if times else None,
        max(times) if times else None,
        tokens_in / n if saw_tokens and n else None,
        tokens_out / n if saw_tokens and n else None,
        cost / n if saw_cost and n else None,
        reporting,
    )


# -- one rule's plan -------------------------------------------------------------------------


@dataclass
class IfResolved:
    """What re-running a rule's missing cases would change.

    ``if_all_pass`` / ``if_all_fail``: the rule's state now if every missing case passed /
    failed (BINARY); ``more``/``total``: the size that decides it once the missing cases are
    observed and resemble the rest (None when that size could not be found).
    """

    missing: int
    more: int | None
    total: int | None
    state_at_total: RuleState | None
    if_all_pass: RuleState | None = None
    if_all_fail: RuleState | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "missing": self.missing,
            "more": self.more,
            "total": self.total,
            "state_at_total": self.state_at_total,
            "if_all_pass": self.if_all_pass,
            "if_all_fail": self.if_all_fail,
        }


@dataclass
class RulePlan:
    """The plan for one rule: decided already, sized, or why no size can be given."""

    rule: str
    metric: str
    kind: str
    state: RuleState
    plan: PlanStatus = "decided"
    more: int | None = None
    total: int | None = None
    state_at_total: RuleState | None = None
    approximate: bool = False
    method: str | None = None
    reason: str | None = None
    message: str = ""
    assuming: list[str] = field(default_factory=list)
    observed: dict[str, Any] | None = None
    time_s: list[float] | None = None
    tokens: dict[str, float] | None = None
    cost_usd: float | None = None
    assurance: dict[str, Any] | None = None
    if_resolved: IfResolved | None = None
    #: Over repeated trials: the extra system calls the size costs (``more`` cases times
    #: the trials of each), and what more trials of the cases already run would do instead.
    calls: int | None = None
    trials: dict[str, Any] | None = None
    #: When the rule's cases are not every case run (a rule on a group, a metric that
    #: excluded some cases): the group, and how many of the run's cases it counts.
    scope: dict[str, Any] | None = None
    #: When more of the rule's cases (pairs) are missing than the policy's ``max_missing``
    #: lets through, the gate holds it as incomplete (exit 5): the share, the bar, and the
    #: fewest more cases (pairs), none missing, that bring it within (None: none do).
    incomplete: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rule": self.rule,
            "metric": self.metric,
            "kind": self.kind,
            "state": self.state,
            "plan": self.plan,
            "more": self.more,
            "total": self.total,
            "state_at_total": self.state_at_total,
            "approximate": self.approximate,
            "method": self.method,
            "reason": self.reason,
            "message": self.message,
            "assuming": list(self.assuming),
        }
        if self.observed is not None:
            data["observed"] = self.observed
        if self.plan == "sized":
            data.update(time_s=self.time_s, tokens=self.tokens, cost_usd=self.cost_usd)
        if self.assurance is not None:
            data["assurance"] = self.assurance
        if self.if_resolved is not None:
            data["if_resolved"] = self.if_resolved.to_json()
        if self.calls is not None:
            data["calls"] = self.calls
        if self.trials is not None:
            data["trials"] = self.trials
        if self.scope is not None:
            data["scope"] = self.scope
        if self.incomplete is not None:
            data["incomplete"] = self.incomplete
        return data

    def price(self, costs: CaseCosts) -> None:
        # Over repeated trials the stored per-case costs are those of one call (trial 0).
        more = int(self.calls if self.calls is not None else (self.more or 0))
        if costs.time_min_s is not None and costs.time_max_s is not None:
            self.time_s = [more * costs.time_min_s, more * costs.time_max_s]
        if costs.input_tokens is not None and costs.output_tokens is not None:
            self.tokens = {
                "input": more * costs.input_tokens,
                "output": more * costs.output_tokens,
            }
        self.cost_usd = None if costs.cost_usd is None else more * costs.cost_usd


def _base(d: Decision) -> RulePlan:
    return RulePlan(rule=d.rule, metric=d.metric, kind=d.kind, state=d.state)


def _from_size(
    entry: RulePlan, size: SizeResult, *, noun: str, estimate_text: str, bar_text: str
) -> None:
    entry.plan = size.status
    entry.method = size.method
    entry.approximate = size.approximate
    entry.reason = size.reason or None
    if size.status == "sized":
        entry.more, entry.total = size.more, size.total
        entry.state_at_total = size.state_at_total
    elif size.status == "on_the_bar":
        entry.message = (
            f"the observed {noun}, {estimate_text}, sits exactly on the bar ({bar_text}):"
            " no number of cases decides it, if it holds"
        )
    elif size.status == "beyond_limit":
        entry.message = f"no size decides it within the search's limit ({size.reason})"
    elif size.status == "already_decided":
        entry.total, entry.more, entry.state_at_total = size.total, 0, size.state_at_total
    else:
        entry.message = f"no size can be computed: {size.reason}"


def _decided(entry: RulePlan, d: Decision) -> None:
    entry.plan = "decided"
    if d.state in (RuleState.PASS, RuleState.FAIL):
        entry.message = f"decided ({d.state}); nothing to plan"
    else:
        entry.message = (
            f"{d.state}: a person has to look at the evidence; more cases do not settle it"
        )


def _assurance_json(result: Any, assumption: str) -> dict[str, Any]:
    """An assurance sizing as plan's JSON shows it (rates, paired tables, bounded means)."""
    return {
        "target": result.target,
        "status": result.status,
        "more": result.more,
        "total": result.total,
        "probability": result.probability,
        "method": result.method,
        "reason": result.reason or None,
        "assumption": assumption,
    }


def _paired_assurance_json(
    result: AssuranceResult, cells: tuple[int, int, int, int]
) -> dict[str, Any]:
    n = sum(cells)
    shares = " · ".join(
        f"{estimate_text(count / n, 'BINARY')} {name}"
        for count, name in zip(
            cells, ("both pass", "candidate only", "baseline only", "both fail"), strict=True
        )
    )
    return _assurance_json(
        result,
        "each pair to come falls in the four cells of the paired table with the observed"
        f" shares ({shares}), and the {_plural(n, 'pair')} compared keep their cells: only"
        " the pairs to come are drawn",
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _max_missing(policy: ReleasePolicy | ComparePolicy) -> float:
    """The policy's ``max_missing``, as the decision reads it (0.2 when a stored policy
    predates it)."""
    value = getattr(policy, "max_missing", None)
    return 0.2 if value is None else float(value)


def _fewest_more(observed: int, missing: int, max_missing: float, per: int = 1) -> int | None:
    """The fewest more cases (or pairs), each adding ``per`` observed units (cases, pairs,
    or a case's trials) and none missing, at which ``missing`` missing units are within
    ``max_missing`` as :func:`oloproof.policy.decide.hold_missing` reads the share (it may
    reach the bar, not pass it): 0 when they are already, None when no number is
    (``max_missing: 0``)."""
    def over(more: int) -> bool:
        seen = observed + more * per + missing
        return bool(seen) and missing / seen > max_missing

    if not over(0):
        return 0
    if not max_missing > 0.0:
        return None
    more = max(0, math.ceil((missing * (1.0 - max_missing) / max_missing - observed) / per))
    while over(more):
        more += 1
    while more > 0 and not over(more - 1):
        more -= 1
    return more


def _held_incomplete(
    entry: RulePlan, d: Decision, observed: int, missing: int, max_missing: float,
    per: int, unit: str, who: str,
) -> int | None:
    """Mark ``entry`` when ``d`` is held as incomplete, its missing share over
    ``max_missing``; return the fewest more cases (pairs) that bring the share within it
    (0 when it is not held; None when nothing does, the entry then not admitted)."""
    if not d.incomplete or not missing:
        return 0
    more = _fewest_more(observed, missing, max_missing, per)
    seen = observed + missing
    entry.incomplete = {
        "missing": missing, "of": seen, "unit": unit, "share": missing / seen,
        "max_missing": max_missing, "more": more,
    }
    what = f"{missing} of the {seen} {unit} missing, over max_missing {100.0 * max_missing:g}%"
    new = "pairs" if unit == "pairs" else "cases"
    if more is None:
        entry.plan = "not_admitted"
        entry.message = (
            f"{who} holds it as incomplete ({what}): no number of {new} brings the share"
            f" within it; run the missing {'cases' if unit != 'pairs' else 'ones'} again"
            " (finished cases come from the cache)"
        )
    return more


def _incomplete_note(entry: RulePlan, who: str) -> str:
    """The ``assuming`` line of a rule held as incomplete."""
    held = entry.incomplete
    assert held is not None
    new = "pairs" if held["unit"] == "pairs" else "cases"
    return (
        f"{who} holds it as incomplete now: {held['missing']} of the {held['of']}"
        f" {held['unit']} missing ({100.0 * held['share']:.1f}%), over max_missing"
        f" {100.0 * held['max_missing']:g}%; no size below {held['more']} more {new}, none"
        " missing,"
        " is taken, since below it the share stays over the bar"
    )


def _binary_run_rule(
    entry: RulePlan,
    rule: IntervalRule,
    ev: CriterionEvidence,
    level: float,
    assurance: float | None,
    assuming: list[str],
    least: int = 0,
) -> None:
    direction, t = _threshold(rule)
    judge = threshold_judge(t, direction)
    k, n, m = ev.passed, ev.observed, ev.missing
    size = binary_rule_size(k, n, t, judge, level, missing=m, least=n + m + least)
    entry.observed = {"passed": k, "observed": n, "missing": m}
    _from_size(
        entry, size, noun="rate",
        estimate_text=estimate_text(k / n, MetricKind.BINARY) if n else "none",
        bar_text=f"{direction} {value_text(t, MetricKind.BINARY)}",
    )
    if m:
        plain = binary_rule_size(k, n, t, judge, level)
        all_pass = clopper_pearson_bounded(k + m, n + m, 0, level)
        all_fail = clopper_pearson_bounded(k, n + m, 0, level)
        entry.if_resolved = IfResolved(
            missing=m,
            more=None if plain.total is None else max(plain.total - (n + m), 0),
            total=plain.total,
            state_at_total=plain.state_at_total,
            if_all_pass=decide_threshold(all_pass.lower, all_pass.upper, t, direction),
            if_all_fail=decide_threshold(all_fail.lower, all_fail.upper, t, direction),
        )
    if assurance is not None and n and entry.plan == "sized":
        result = binary_assurance_size(k, n, t, judge, assurance, level, missing=m,
                                       least=n + m + least)
        entry.assurance = _assurance_json(
            result, f"the true pass rate equals the observed {estimate_text(k / n, 'BINARY')},"
            f" and the {_plural(n, 'case')} observed keep their outcomes: only the cases to"
            " come are drawn"
        )


_MAX_PLAN_CASES = 1_000_000
_MAX_PLAN_TRIALS = 100


def _first_deciding(decides: Any, start: int, limit: int) -> int | None:
    """The smallest size in [start, limit] at which ``decides(size)`` is True, assuming that
    once a size decides every larger one does (the projected interval only narrows): a
    doubling search, then bisection. None when ``limit`` does not decide."""
    if decides(start):
        return start
    low, high = start, start
    while not decides(high):
        if high >= limit:
            return None
        low, high = high, min(limit, high * 2)
    while high - low > 1:
        mid = (low + high) // 2
        if decides(mid):
            high = mid
        else:
            low = mid
    return high


def _trial_fractions(trials: int, rate: float, icc: float | None) -> tuple[list[float], list[float]]:
    """The pass fractions j/k of a case run ``trials`` times, with their probabilities, when
    the cases' pass rates have mean ``rate`` and two trials of a case correlate ``icc``: the
    beta-binomial distribution (binomial when icc is 0 or unknown, every case all-or-nothing
    when it is 1)."""
    k = trials
    values = [j / k for j in range(k + 1)]
    if rate <= 0.0 or rate >= 1.0:
        # Every trial failed (or passed): every case at 0 (or 1), whatever the correlation;
        # log(0) and lgamma(0) below were `internal error: ValueError: math domain error`.
        return values, [float(rate >= 1.0 and j == k or rate <= 0.0 and j == 0)
                        for j in range(k + 1)]
    if icc is None or icc <= 0.0:
        logs = [math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1)
                + (j * math.log(rate) if j else 0.0)
                + ((k - j) * math.log1p(-rate) if k - j else 0.0) for j in range(k + 1)]
    elif icc >= 1.0:
        return [0.0, 1.0], [1.0 - rate, rate]
    else:
        a = rate * (1.0 / icc - 1.0)
        b = (1.0 - rate) * (1.0 / icc - 1.0)
        beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
        logs = [math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1)
                + math.lgamma(j + a) + math.lgamma(k - j + b) - math.lgamma(k + a + b) - beta
                for j in range(k + 1)]
    top = max(logs)
    weights = [math.exp(x - top) for x in logs]
    return values, weights


def _trials_run_rule(
    entry: RulePlan, rule: IntervalRule, ev: CriterionEvidence, level: float,
    assuming: list[str], least: int = 0,
) -> None:
    """A rule on the mean pass fraction over k trials: more cases, or more trials of the
    cases already run? Both are sized by the interval that decides the rule, the betting
    interval on the cases' pass fractions: more cases holding the observed mix of
    fractions, or the same cases with their fractions over more trials modelled from the
    observed rate and intra-class correlation (beta-binomial). Approximate; priced in
    calls. A case with a missing trial is held missing, at its worst."""
    direction, t = _threshold(rule)
    judge = threshold_judge(t, direction)
    counts = ev.case_counts()
    r = clustered_rate_bounded(counts, level)
    n, k = r.cases, ev.trials
    entry.approximate = True
    entry.method = (f"{BETTING} on case pass fractions at {level:g}, projected from the"
                    " observed fractions, rate and intra-class correlation, approximate")
    if r.estimate is None:
        entry.plan, entry.reason = "not_computable", "no case has an observed trial"
        entry.message = f"no size can be computed: {entry.reason}"
        return
    p = r.estimate
    icc = r.icc
    fractions = [pp / (pp + f) for pp, f, m in counts if pp + f and not m]
    missing = sum(1 for pp, f, m in counts if m)
    observed = [(pp, f) for pp, f, _m in counts if pp + f]
    disagree = min(sum(1 for pp, f in observed if f), sum(1 for pp, f in observed if pp))
    entry.observed = {
        "cases": n, "trials": k, "estimate": p, "icc": icc,
        "design_effect": r.design_effect, "informative_cases": disagree,
        "interval": "betting",
    }
    if p == t:
        entry.plan = "on_the_bar"
        entry.message = (
            f"the observed rate, {estimate_text(p, MetricKind.BINARY)}, sits exactly on the"
            f" bar ({direction} {value_text(t, MetricKind.BINARY)}): no number of cases or"
            " trials decides it, if it holds"
        )
        return
    if not fractions:
        entry.plan, entry.reason = "not_computable", "every case has a missing trial"
        entry.message = f"no size can be computed: {entry.reason}"
        return

    def by_cases(total: int) -> bool:
        lower, upper = projected_bounds(fractions, total, missing, level)
        return judge(lower, upper) is not None

    def by_trials(trials: int) -> bool:
        values, weights = _trial_fractions(trials, p, icc)
        lower, upper = projected_bounds(values, n + missing, missing, level, weights)
        return judge(lower, upper) is not None

    now = len(fractions) + missing
    total = _first_deciding(by_cases, now + max(1, least), _MAX_PLAN_CASES)
    # More trials of the n cases add observed trials too: none fewer than bring the missing
    # trials within max_missing (``entry.incomplete``) is taken.
    held = entry.incomplete
    fewest_trials = 1 if held is None else _fewest_more(
        ev.observed, ev.missing, float(held["max_missing"]), n)
    more_trials = (_first_deciding(by_trials, k + max(1, fewest_trials), _MAX_PLAN_TRIALS)
                   if k < 100 and fewest_trials is not None
                   and k + fewest_trials <= _MAX_PLAN_TRIALS else None)
    icc_text = "unknown" if icc is None else f"{icc:.2f}"
    option: dict[str, Any] = {"icc": icc, "current": k}
    if more_trials is not None:
        option.update(status="sized", trials=more_trials, more_calls=n * (more_trials - k))
    else:
        option.update(status="beyond_limit", trials=None, more_calls=None)
        option["reason"] = (
            f"the interval is over the {n} cases (intra-class correlation {icc_text}), and up"
            f" to {_MAX_PLAN_TRIALS} trials per case still leave it across the bar; only more"
            " cases can"
        )
    if total is None:
        entry.plan = "beyond_limit"
        entry.message = f"no number of cases up to {_MAX_PLAN_CASES:,} decides it"
    else:
        entry.plan = "sized"
        entry.more, entry.total = total - now, total
        entry.calls = (total - now) * k
        lower, upper = projected_bounds(fractions, total, missing, level)
        entry.state_at_total = judge(lower, upper)
    if total is not None and more_trials is not None:
        cheaper = "trials" if n * (more_trials - k) < (total - now) * k else "cases"
        option["cheaper"] = cheaper
    entry.trials = option
    assuming[0] += (
        f", with the same mix of case pass fractions (rate {estimate_text(p, MetricKind.BINARY)},"
        f" intra-class correlation {icc_text}) over {k} trials each"
    )
    assuming.append(
        "approximate: the betting interval on the cases' pass fractions, which decides the"
        " rule, computed on cases holding that mix (for more trials per case, the mix a"
        " beta-binomial with that rate and correlation gives)"
    )


def _derived_note(ev: CriterionEvidence, metric: str) -> str:
    return (
        f"{metric} is one outcome per case over {ev.trials} trials: only more cases can"
        f" decide it (more trials would change what it measures, not how precisely); each"
        f" new case costs {ev.trials} calls"
    )


def _threshold(rule: IntervalRule) -> tuple[Direction, float]:
    if rule.min is not None:
        return "min", float(rule.min)
    assert rule.max is not None
    return "max", float(rule.max)


def _mean_run_rule(
    entry: RulePlan,
    rule: IntervalRule,
    ev: CriterionEvidence,
    level: float,
    assurance: float | None,
    assuming: list[str],
    least: int = 0,
) -> bool:
    direction, t = _threshold(rule)
    over_trials = ev.case_trials is not None and ev.trials > 1
    if over_trials:
        scores, missing, _excluded = ev.case_means()
    else:
        scores, missing = ev.scores, ev.missing
    summary = student_t_mean(scores, level)
    if ev.value_range is not None and summary.mean is not None:
        _betting_run_rule(entry, rule, scores, missing, ev.value_range, level, assurance,
                          assuming, least)
        return True
    if summary.n < 2 or summary.mean is None or summary.sd is None:
        entry.plan = "refused"
        entry.reason = (
            f"this run stores {_plural(summary.n, 'observed score')} for it, and sizing needs"
            " the mean and spread of at least two"
        ) if not summary.overflow else (
            "the spread of its scores lies beyond the largest float (about 1.8e308)"
        )
        return False
    entry.observed = {"mean": summary.mean, "sd": summary.sd, "observed": summary.n,
                      "missing": missing}
    judge = threshold_judge(t, direction)
    size = mean_rule_size(
        summary.mean, summary.sd, summary.n, judge, summary.mean == t, level,
        missing=missing, value_range=ev.value_range, least=summary.n + missing + least,
    )
    _from_size(
        entry, size, noun="mean", estimate_text=f"{summary.mean:.4g}",
        bar_text=f"{direction} {value_text(t, MetricKind.MEAN)}",
    )
    entry.method = f"approximate (t): {entry.method}"
    assuming[0] += (
        f", with the mean ({summary.mean:.4g}) and spread (sd {summary.sd:.4g})"
        f" of its {_plural(summary.n, 'score')}"
    )
    assuming.append(
        "approximate (t): the t interval is projected from that mean and spread; the metric"
        " declares no range, so no interval valid at every n exists for it"
    )
    if missing:
        plain = mean_rule_size(
            summary.mean, summary.sd, summary.n, judge, summary.mean == t, level
        )
        ran = summary.n + missing
        entry.if_resolved = IfResolved(
            missing=missing,
            more=None if plain.total is None else max(plain.total - ran, 0),
            total=plain.total,
            state_at_total=plain.state_at_total,
        )
    if assurance is not None and entry.plan == "sized":
        entry.assurance = {
            "target": assurance, "status": "not_computable", "more": None, "total": None,
            "probability": None, "method": None,
            "reason": "a MEAN without a declared range has no distribution to draw the cases"
            " to come from; declare its range",
            "assumption": None,
        }
    return True


def _betting_run_rule(
    entry: RulePlan,
    rule: IntervalRule,
    scores: Sequence[float],
    missing: int,
    value_range: tuple[float, float],
    level: float,
    assurance: float | None,
    assuming: list[str],
    least: int = 0,
) -> None:
    """A MEAN rule with a declared range: sized by the betting interval that decides it,
    on N cases holding the observed mix of scores (stats/sample_size.py
    ``betting_rule_size``), the run's missing cases held missing at their worst."""
    direction, t = _threshold(rule)
    judge = threshold_judge(t, direction)
    mean, _sd = mean_and_sd(scores)
    assert mean is not None  # a rule with no observed score is not sized
    entry.observed = {"mean": mean, "observed": len(scores), "missing": missing,
                      "interval": "betting"}
    now = len(scores) + missing
    size = betting_rule_size(scores, missing, value_range, judge, mean == t, level,
                             least=now + least)
    _from_size(
        entry, size, noun="mean", estimate_text=f"{mean:.4g}",
        bar_text=f"{direction} {value_text(t, MetricKind.MEAN)}",
    )
    assuming[0] += f", with the mix of its {_plural(len(scores), 'score')} (mean {mean:.4g})"
    assuming.append(
        "approximate: the betting interval, which decides the rule, computed on that many"
        " cases holding exactly the observed mix of scores"
    )
    if missing:
        plain = betting_rule_size(scores, 0, value_range, judge, mean == t, level)
        ran = len(scores) + missing
        entry.if_resolved = IfResolved(
            missing=missing,
            more=None if plain.total is None else max(plain.total - ran, 0),
            total=plain.total,
            state_at_total=plain.state_at_total,
        )
    if assurance is not None and entry.plan == "sized":
        result = betting_assurance_size(scores, missing, value_range, t, assurance, level,
                                        least=now + least)
        entry.assurance = _assurance_json(
            result,
            f"the {_plural(len(scores), 'observed score')} (mean {mean:.4g}) keep their"
            " values, and the scores to come are drawn from them",
        )


def plan_run(
    cases: Sequence[CaseRow],
    evidence: Mapping[str, CriterionEvidence],
    decisions: Sequence[Decision],
    policy: ReleasePolicy,
    *,
    assurance: float | None = None,
    groups: Mapping[str, str] | None = None,
) -> list[RulePlan]:
    """One plan per rule of a run's policy, in declared order. ``groups``: the group
    metrics (``exact_label[lang=fr]``) to their group (``lang=fr``), whose rules are sized
    in that group's cases."""
    level = float(policy.confidence_level)
    costs = case_costs(cases)
    ran = len(cases)
    groups = groups or {}
    out: list[RulePlan] = []
    max_missing = _max_missing(policy)
    for rule, d in zip(policy.rules, decisions, strict=True):
        entry = _base(d)
        out.append(entry)
        ev = evidence[rule.metric]
        # A PASS held as incomplete (more missing than max_missing) blocks: it is planned.
        if d.state != RuleState.INSUFFICIENT_EVIDENCE and not (
                d.state == RuleState.PASS and d.incomplete):
            _decided(entry, d)
            continue
        if d.reason == CANNOT_FAIL:
            # A PASS that the cases in the rule's scope could not have turned into a FAIL:
            # the scope is too small (cases excluded), not the interval too wide.
            entry.plan = "refused"
            entry.reason = d.reason
            entry.message = (
                f"not sized: {d.detail.split('; the rule alone:')[0]}; it can pass only on"
                " more cases in its scope (where cases were excluded, oloproof inspect RUN"
                " shows why)"
            )
            continue
        if isinstance(rule, ObservedCountRule):
            entry.plan = "not_admitted"
            entry.message = (
                "sizing is not admitted for an observed_count rule: it counts failures, and"
                " more cases can add failures but never take one away; it is open because"
                f" {_plural(ev.missing, 'missing case')} could be failures:"
                " run them again (the cache keeps the rest)"
            )
            continue
        if isinstance(rule, IntervalRule) and rule.estimate == "corrected":
            entry.plan = "not_admitted"
            entry.message = (
                "sizing is not admitted for a rule with estimate: corrected: its interval"
                " narrows with the number of cases a person labels at least as much as with"
                " the suite's size; label more cases, drawn at random, and decide again"
            )
            continue
        if ev.observed == 0 and ev.missing:
            # Every case failed to give evidence (a dead endpoint, a 401, an unreachable
            # judge): there is nothing to size from, and "more cases" would not help.
            entry.plan = "refused"
            entry.observed = {"observed": 0, "missing": ev.missing}
            entry.reason = f"0 observed, {_plural(ev.missing, 'missing case')}"
            entry.message = (
                f"{entry.reason}: no case of this run gave evidence for {rule.metric}, so"
                " there is nothing to size from; more cases would fail the same way. Fix"
                " what failed (oloproof inspect RUN --failures lists it) and run again"
            )
            continue
        rule_level = d.confidence_level if d.confidence_level is not None else level
        assuming = [_scope(entry, ev, ran, groups.get(rule.metric))]
        over_trials = ev.case_trials is not None and ev.trials > 1
        derived = ev.case_trials is None and ev.trials > 1
        least = _held_incomplete(
            entry, d, ev.observed, ev.missing, max_missing, ev.trials if over_trials else 1,
            "trials" if over_trials else "cases", "the gate")
        if least is None:
            continue
        if over_trials and ev.kind == MetricKind.BINARY:
            _trials_run_rule(entry, rule, ev, rule_level, assuming, least)
            if assurance is not None and entry.plan == "sized":
                entry.assurance = {
                    "target": assurance, "status": "not_computable", "more": None,
                    "total": None, "probability": None, "method": None,
                    "reason": "an assurance is computed exactly for one outcome per case;"
                    " a rate over repeated trials is sized by projection only",
                    "assumption": None,
                }
        elif ev.kind == MetricKind.BINARY:
            _binary_run_rule(entry, rule, ev, rule_level, assurance, assuming, least)
        elif not _mean_run_rule(entry, rule, ev, rule_level, assurance, assuming, least):
            continue
        elif over_trials:
            entry.calls = None if entry.more is None else entry.more * ev.trials
            assuming.append(
                f"the scores are case means over {ev.trials} trials; more trials are not"
                " sized for a MEAN metric, and each new case costs"
                f" {ev.trials} calls"
            )
        if derived:
            entry.calls = None if entry.more is None else entry.more * ev.trials
            assuming.append(_derived_note(ev, rule.metric))
        if ev.missing:
            # Over repeated trials ev.missing counts trials: the cases are those with one.
            gone = (sum(1 for _p, _f, m in ev.case_counts() if m) if over_trials
                    else ev.missing)
            one = gone == 1
            what = _plural(gone, "missing case") if not over_trials else (
                f"{_plural(gone, 'case')} with a missing trial"
                f" ({_plural(ev.missing, 'trial')})")
            assuming.append(
                f"the {what} of this run"
                f" {'stays' if one else 'stay'} missing and"
                f" {'counts' if one else 'count'} against it at"
                f" {'its' if one else 'their'} worst, as the policy bounds"
                f" {'it' if one else 'them'}; none of the cases to come goes missing"
            )
        if rule_level != level:
            assuming.append(
                f"the rule is decided at {level_text(rule_level)}, its level after the"
                " multiplicity adjustment of its family"
            )
        if entry.incomplete is not None:
            assuming.append(_incomplete_note(entry, "the gate"))
        assuming.append(_CONCURRENCY)
        entry.assuming = assuming
        if entry.plan == "sized":
            entry.price(costs)
    return out


def _scope(entry: RulePlan, ev: CriterionEvidence, ran: int, group: str | None) -> str:
    """The first ``assuming`` line: which cases are to come. A rule on a group is sized in
    that group's cases, and a metric that excluded cases in the cases it scores: the size
    counts those, not the suite's cases (``entry.scope`` says so, and the text with it)."""
    excluded = ev.excluded if ev.case_trials is None else 0
    if group is None and not excluded:
        return f"the cases to come resemble the {ran} already run"
    counted = (len(ev.case_trials) if ev.case_trials is not None
               else ev.observed + ev.missing + ev.excluded)
    entry.scope = {"group": group, "cases": counted, "run_cases": ran, "excluded": excluded}
    if group is not None:
        text = (f"the cases to come are in the group {group} and resemble the"
                f" {_plural(counted, 'case')} of it already run (of the {ran} run)")
    else:
        text = (f"the cases to come are scored by {ev.criterion} and resemble the"
                f" {counted - excluded} of the {ran} already run that it scored")
    if excluded:
        text += (f"; {_plural(excluded, 'case')} {'was' if excluded == 1 else 'were'}"
                 " excluded from it, and cases like them do not count towards the size")
    return text


def plan_comparison(
    metrics: Mapping[str, PairedMetric],
    decisions: Sequence[Decision],
    policy: ComparePolicy,
    costs: CaseCosts,
    *,
    assurance: float | None = None,
) -> list[RulePlan]:
    """One plan per rule of a comparison policy, in declared order."""
    level = float(policy.confidence_level)
    max_missing = _max_missing(policy)
    out: list[RulePlan] = []
    for rule, d in zip(policy.rules, decisions, strict=True):
        entry = _base(d)
        out.append(entry)
        # A PASS held as incomplete (more pairs dropped than max_missing) blocks: planned.
        if d.state != RuleState.INSUFFICIENT_EVIDENCE and not (
                d.state == RuleState.PASS and d.incomplete):
            _decided(entry, d)
            continue
        pm = metrics[rule.metric]
        if d.reason == CANNOT_FAIL:
            entry.plan, entry.reason = "refused", d.reason
            entry.message = (
                f"not sized: {d.detail.split('; the rule alone:')[0]}; it can pass only on"
                " more pairs: compare runs that share more cases"
            )
            continue
        if pm.pairs == 0 and pm.dropped_missing:
            entry.plan = "refused"
            entry.observed = {"pairs": 0, "missing": pm.dropped_missing}
            entry.reason = f"0 pairs observed, {_plural(pm.dropped_missing, 'pair')} missing"
            entry.message = (
                f"{entry.reason} (a side failed): no case gave evidence for {rule.metric} in"
                " both runs, so there is nothing to size from. Fix what failed and run again"
            )
            continue
        rule_level = d.confidence_level if d.confidence_level is not None else level
        least = _held_incomplete(entry, d, pm.pairs, pm.dropped_missing, max_missing, 1,
                                 "pairs", "compare")
        if least is None:
            continue
        _comparison_rule(entry, rule, pm, rule_level, costs, assurance, least)
    return out


def _comparison_rule(
    entry: RulePlan,
    rule: CompareRule,
    pm: PairedMetric,
    level: float,
    costs: CaseCosts,
    assurance: float | None = None,
    least: int = 0,
) -> None:
    margin = float(rule.margin or 0.0)
    kind = rule.kind
    judge = comparison_judge(kind, margin)
    cells: tuple[int, int, int, int] | None = None
    # The pairs dropped as missing stay dropped, at their worst as compare bounds them.
    fills = missing_pair_fills(pm, kind) if pm.kind == MetricKind.BINARY else []
    if pm.kind == MetricKind.BINARY:
        a, b, c, dd = cells = (
            int(pm.both_pass or 0), int(pm.cand_only or 0), int(pm.base_only or 0),
            int(pm.both_fail or 0),
        )
        on_bar = bool(pm.pairs) and on_comparison_bar((b - c) / pm.pairs, kind, margin)
        size = paired_binary_rule_size(a, b, c, dd, judge, on_bar, level, fills=fills,
                                       least=pm.pairs + least)
        entry.observed = {"both_pass": a, "candidate_only": b, "baseline_only": c,
                          "both_fail": dd, "pairs": pm.pairs,
                          "dropped_missing": pm.dropped_missing}
        estimate = difference_text((b - c) / pm.pairs, pm.kind) if pm.pairs else "none"
        outcomes = f"{a} both pass · {dd} both fail · {b} candidate only · {c} baseline only"
        assuming = [f"the cases to come resemble the {pm.pairs} already paired ({outcomes})"]
    else:
        mean = pm.estimate if pm.estimate is not None else 0.0
        entry.observed = {"mean_difference": pm.estimate, "sd": pm.sd, "pairs": pm.pairs,
                          "dropped_missing": pm.dropped_missing}
        estimate = f"{pm.estimate:+.4g}" if pm.estimate is not None else "none"
        if pm.value_range is not None:
            # Sized by the interval that decides it: the betting interval on differences in
            # [-w, w], the dropped pairs held missing at their worst.
            width = pm.value_range[1] - pm.value_range[0]
            size = betting_rule_size(
                pm.differences, pm.dropped_missing, (-width, width), judge,
                on_comparison_bar(mean, kind, margin), level,
                least=pm.pairs + pm.dropped_missing + least,
            )
            assuming = [
                (
                    f"the cases to come resemble the {pm.pairs} already paired, with the same"
                    f" mix of differences (mean {estimate})"
                ),
                "approximate: the betting interval is projected from that mix",
            ]
        else:
            size = paired_mean_rule_size(
                mean, pm.sd, pm.pairs, judge, on_comparison_bar(mean, kind, margin), level,
                least=pm.pairs + least,
            )
            if pm.dropped_missing and size.state_at_total == RuleState.PASS:
                # compare holds every PASS of a MEAN without a range while a pair is dropped
                # (missing_pairs_unbounded): no number of pairs passes it, as for a run's
                # missing cases without a range.
                dropped = pm.dropped_missing
                size = SizeResult(
                    "not_computable", approximate=True, method=size.method,
                    reason=f"{_plural(dropped, 'pair')} dropped as missing and {rule.metric}"
                    " declares no range: compare holds every PASS while a pair is missing, so"
                    " no number of pairs passes it; fix what failed and run again",
                )
            assuming = [
                (
                    f"the cases to come resemble the {pm.pairs} already paired, with the mean"
                    f" difference ({estimate}) and its spread (sd {pm.sd or 0:.4g})"
                ),
                "approximate: the paired t interval is projected from that mean and spread",
            ]
    shown = value_text(margin, MetricKind.MEAN)
    bar = {"superiority": shown, "non_inferiority": f"-{shown}"}.get(kind, f"±{shown}")
    _from_size(
        entry, size, noun="difference", estimate_text=estimate, bar_text=f"{kind} at {bar}"
    )
    if pm.dropped_missing:
        dropped = pm.dropped_missing
        held = ""
        if fills:
            held = ("; it stays dropped and counts against the rule at its worst, as compare"
                    " bounds it" if dropped == 1 else "; they stay dropped and count against"
                    " the rule at their worst, as compare bounds them")
        assuming.append(
            f"none of the cases to come goes missing ({dropped}"
            f" {'pair was' if dropped == 1 else 'pairs were'} dropped because a case was"
            f" missing in one run{held})"
        )
    if entry.incomplete is not None:
        assuming.append(_incomplete_note(entry, "compare"))
    assuming.append(
        "each case runs in both systems, one after another; concurrency divides the time"
        " and not the cost"
    )
    entry.assuming = assuming
    if entry.plan == "sized":
        entry.message = ""
        entry.price(costs)
    elif entry.plan == "already_decided":
        entry.message = f"the observed pairs decide it ({entry.state_at_total})"
    if assurance is None or entry.plan != "sized":
        return
    if cells is not None:
        result = paired_binary_assurance_size(*cells, judge, assurance, level, fills=fills,
                                              least=pm.pairs + least)
        entry.assurance = _paired_assurance_json(result, cells)
    else:
        entry.assurance = {
            "target": assurance, "status": "not_computable", "more": None, "total": None,
            "probability": None, "method": None,
            "reason": "an assurance is computed exactly for rates only; the distribution of"
            " a MEAN's paired differences is not known from their mean and spread",
            "assumption": None,
        }


# -- whole plans ---------------------------------------------------------------------------


def _observed(cases: list[CaseRow], trials: int) -> dict[str, int]:
    """The run's cases with an output, and those whose call failed (missing for every
    metric). A case of several trials counts as observed: its trials say the rest."""
    missing = 0 if trials > 1 else sum(c.status != CaseStatus.OK for c in cases)
    return {"observed_cases": len(cases) - missing, "missing_cases": missing}


@dataclass
class RunPlan:
    """``plan RUN_ID --run``: every rule of the run's policy, planned."""

    run_id: str
    project: str
    observed_cases: int
    confidence_level: float
    policy: str
    policy_note: str | None
    per_case: CaseCosts
    rules: list[RulePlan]
    assurance: float | None = None
    trials: int = 1
    #: Cases stored without an output (their call failed): not in ``observed_cases``.
    missing_cases: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            **({"trials": self.trials} if self.trials > 1 else {}),
            "plan_for": "run",
            "run_id": self.run_id,
            "project": self.project,
            "observed_cases": self.observed_cases,
            "missing_cases": self.missing_cases,
            "confidence_level": self.confidence_level,
            "assurance": self.assurance,
            "policy": self.policy,
            "policy_note": self.policy_note,
            "per_case": self.per_case.to_json(),
            "rules": [r.to_json() for r in self.rules],
        }


@dataclass
class ComparisonPlan:
    """``plan CMP_ID``: every rule of the comparison's policy, planned."""

    comparison_id: str
    candidate_run: str
    baseline_run: str
    project: str
    paired_cases: int
    confidence_level: float
    policy: str
    policy_note: str | None
    per_case: CaseCosts
    rules: list[RulePlan]
    assurance: float | None = None
    #: The pairs the rules' metrics count (``paired_cases`` less the pairs dropped as
    #: missing in a run or excluded), when every rule's metric counts the same; else None.
    pairs: int | None = None
    dropped_missing: int | None = None
    dropped_excluded: int | None = None
    #: Over repeated trials: each run's trials per case (the price counts them all).
    trials: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            # ints, as a run plan's "trials" is: each run's trials per case, when one is > 1
            **({"candidate_trials": self.trials["candidate"],
                "baseline_trials": self.trials["baseline"]} if self.trials is not None else {}),
            "plan_for": "comparison",
            "comparison_id": self.comparison_id,
            "candidate_run": self.candidate_run,
            "baseline_run": self.baseline_run,
            "project": self.project,
            "paired_cases": self.paired_cases,
            "pairs": self.pairs,
            "dropped_missing": self.dropped_missing,
            "dropped_excluded": self.dropped_excluded,
            "confidence_level": self.confidence_level,
            "assurance": self.assurance,
            "policy": self.policy,
            "policy_note": self.policy_note,
            "per_case": self.per_case.to_json(),
            "rules": [r.to_json() for r in self.rules],
        }


def plan_exit_code(rules: Sequence[RulePlan]) -> int:
    """2 when the only thing to say is a refusal to size; else 0."""
    refused = any(r.plan == "refused" for r in rules)
    sized = any(r.plan == "sized" for r in rules)
    undecided_other = any(r.plan not in ("refused", "sized", "decided") for r in rules)
    return int(ExitCode.USAGE) if refused and not sized and not undecided_other else 0


def plan_stored_run(
    conn: Connection,
    ref: str,
    *,
    policy_path: str | Path | None = None,
    assurance: float | None = None,
    root: str | None = None,
) -> RunPlan:
    """Plan a stored run under ``policy_path`` or the policy stored with it. ``root``: the
    project, whose kept form of the run's policy spares validating it (as ``gate`` does)."""
    run = get_run(conn, ref)
    metrics = kind_names({m["criterion"]: m["kind"] for m in run.metrics})
    if policy_path:
        from oloproof.project.loader import load_release_policy

        policy = load_release_policy(policy_path, metrics)
        note = None
    else:
        policy = stored_policy(run, root)
        note = "the policy stored with the run declares none"
    if policy.rules:
        note = None
    if run.completeness == Completeness.PARTIAL:  # a SUBSET run is decided: it can be sized
        raise IncompleteError(
            f"run {run.id} is {run.state}: a partial run is not decided, so there is nothing"
            " to size; run it again (finished cases come from the cache), then plan that run"
        )
    cases = load_cases(conn, run.id)
    if run.sequential is not None:
        from oloproof.errors import ConfigError
        from oloproof.policy.sequential import refusal

        why = refusal(policy, run.metrics, run.trials)
        if why is not None:  # as read_run refuses it: the sequential tests cannot decide it
            raise ConfigError(f"run {run.id} is sequential, and {why}")
        rules, cases = _plan_sequential(conn, run, policy, cases, assurance)
        return RunPlan(
            run_id=run.id, project=run.project, **_observed(cases, run.trials),
            confidence_level=float(policy.confidence_level),
            policy=str(policy_path) if policy_path else "stored with the run",
            policy_note=note, per_case=case_costs(cases), rules=rules, assurance=assurance,
            trials=run.trials,
        )
    from oloproof.analysis.stored import grouped_stored_evidence

    # Rules on groups (group:, each_group:) are planned as the per-group rules they
    # are decided as, and rules with an aggregate as rules on the derived metric.
    evidence, policy = grouped_stored_evidence(conn, run, policy)
    groups = _group_labels(evidence, [m["criterion"] for m in run.metrics])
    # Decided as gate decides it: judges measured against the labels stored with the run
    # (on a rule's group, and on the metric its aggregate derives from).
    decisions, _ = decide_run(
        evidence, policy, rule_labels(conn, run, stored_labels(conn, run), policy))
    evidence, policy = with_aggregates(evidence, policy)
    rules = plan_run(cases, evidence, decisions, policy, assurance=assurance, groups=groups)
    subset = run.subset or {}
    if subset.get("shard") is not None:
        index, count = subset["shard"]
        _at_merge(rules, f"{index}/{count}", int(subset["suite_cases"]), len(cases),
                  case_costs(cases), run.trials)
    return RunPlan(
        run_id=run.id,
        project=run.project,
        **_observed(cases, run.trials),
        confidence_level=float(policy.confidence_level),
        policy=str(policy_path) if policy_path else "stored with the run",
        policy_note=note,
        per_case=case_costs(cases),
        rules=rules,
        assurance=assurance,
        trials=run.trials,
    )


def _at_merge(rules: Sequence[RulePlan], slice_: str, suite: int, ran: int,
              costs: CaseCosts, trials: int) -> None:
    """A shard's rules are decided at ``merge``, on the whole suite, not on the shard: a
    size is said in cases of the merged run. Sized from the shard's own cases, "about 1
    more cases would decide it (17 in total)" was a size no run would ever have (a shard's
    slice is fixed, and the merged run holds the suite's 60). ``more`` is now the cases
    beyond the suite (0: the merged run of the suite is enough, if the other slices
    resemble this one), ``scope.shard`` says so; a rule sized in a group's (or a metric's
    scored) cases gives its total only, the suite's count of those being unknown here."""
    for entry in rules:
        if entry.plan != "sized" or entry.total is None:
            continue
        scoped = entry.scope is not None
        entry.scope = {**(entry.scope or {}), "shard": slice_, "suite_cases": suite,
                       "shard_cases": ran}
        entry.more = None if scoped else max(0, entry.total - suite)
        if entry.calls is not None:  # over repeated trials: each new case costs its trials
            entry.calls = None if entry.more is None else entry.more * trials

        resolved = entry.if_resolved
        if resolved is not None and resolved.total is not None:
            # Re-running the shard's missing cases: its size at merge too (it said "7 more
            # would decide it (17 in total)" of a rule decided on the suite's 30).
            resolved.more = None if scoped else max(0, resolved.total - suite)
        if entry.assurance is not None and entry.assurance.get("total") is not None:
            a = entry.assurance
            a["more"] = None if scoped else max(0, int(a["total"]) - suite)
        first = entry.assuming[0]
        usual = f"the cases to come resemble the {ran} already run"
        entry.assuming = [
            f"the cases of the other slices of the suite (and any added to it) resemble the"
            f" {ran} of this shard ({slice_})"
            + (first[len(usual):] if first.startswith(usual) else f"; {first}")
            + "; the rule is decided by `oloproof merge`, on them all",
            *entry.assuming[1:],
        ]
        held = entry.incomplete
        if held is not None:
            # The shard's share is its slice's; `merge` judges the suite's (the floor it
            # sets is said in cases in total, which the merged run counts too).
            note = _incomplete_note(entry, "the gate")
            new = "pairs" if held["unit"] == "pairs" else "cases"
            entry.assuming = [
                (f"this shard's gate holds it as incomplete: {held['missing']} of its"
                 f" {held['of']} {held['unit']} missing ({100.0 * held['share']:.1f}%), over"
                 f" max_missing {100.0 * held['max_missing']:g}%; `oloproof merge` judges the"
                 f" suite's share, and no size below {held['of'] + held['more']} {new} in"
                 " total, none more missing, is taken, since below it the share stays over"
                 " the bar") if line == note else line
                for line in entry.assuming
            ]
        entry.time_s = entry.tokens = entry.cost_usd = None
        if entry.more:
            entry.price(costs)


def _group_labels(evidence: Mapping[str, Any], criteria: Sequence[str]) -> dict[str, str]:
    """The group metrics among ``evidence`` (``exact_label[lang=fr]``) to their groups
    (``lang=fr``): the names that are not a stored criterion but one's group."""
    out: dict[str, str] = {}
    for name in evidence:
        if name in criteria or not name.endswith("]"):
            continue
        base = max((c for c in criteria if name.startswith(c + "[")), key=len, default=None)
        if base is not None:
            out[name] = name[len(base) + 1:-1]
    return out


#: The longest suite a sequential plan looks at (the exact stopping distribution costs about
#: a second per few thousand cases).
SEQUENTIAL_PLAN_HORIZON = 10_000
#: A MEAN rule's stopping time is simulated: this many runs, from this seed (the same plan
#: every time), each of at most this many cases (the suite's size if larger).
SEQUENTIAL_PLAN_RUNS = 400
SEQUENTIAL_PLAN_SEED = 0
SEQUENTIAL_MEAN_PLAN_HORIZON = 5_000


def _stored_labelled(conn: Connection, run: Any) -> Any:
    """The run's judge verdicts beside the human labels stored with it, as gate reads them."""
    return labelled_verdicts(conn, run, stored_labels(conn, run))


def _plan_sequential(
    conn: Connection, run: Any, policy: ReleasePolicy, cases: list[CaseRow],
    assurance: float | None = None,
) -> tuple[list[RulePlan], list[CaseRow]]:
    """A sequential run's plan: the cases its decision read, and for each rule it left
    undecided, how many cases a sequential run needs to decide it if what was observed
    holds: the median and mean of its test's stopping time (stats/sequential.py: exact for
    a rate and a failure budget, simulated with a fixed seed for a bounded mean)."""
    from oloproof.analysis.sequential import decide_sequential

    decisions, _summaries, reading = decide_sequential(
        conn, run, policy, _stored_labelled(conn, run))
    read = set(_read_ids(run, reading.fed))
    cases = [c for c in cases if c.case_id in read]
    costs = case_costs(cases)
    out: list[RulePlan] = []
    released = len(policy.rules)
    for rule, d in zip(policy.rules, decisions[:released], strict=True):
        entry = _base(d)
        out.append(entry)
        if d.state != RuleState.INSUFFICIENT_EVIDENCE and not _sequential_held(
                entry, d, "cases"):
            _decided(entry, d)
            continue
        if entry.plan == "not_admitted":
            continue
        ev = reading.evidence[d.metric]
        if ev.observed == 0:
            entry.plan = "refused"
            entry.message = "no case of the run gave evidence for it: there is nothing to size from"
            continue
        level = d.confidence_level or float(policy.confidence_level)
        if isinstance(rule, ObservedCountRule):
            _size_sequential_count(entry, rule, ev, reading)
        elif ev.kind != MetricKind.BINARY:
            _size_sequential_mean(entry, rule, ev, reading, level)
        else:
            _size_sequential_rate(entry, rule, ev, reading, level, assurance)
        if entry.plan == "sized":
            entry.price(costs)
            if assurance is not None and entry.assurance is None:
                entry.assurance = {
                    "target": assurance, "status": "not_computable", "more": None,
                    "total": None, "probability": None, "method": None,
                    "reason": "a sequential run's assurance is computed for a rate only, from"
                    " its exact stopping distribution; the median and 90th percentile of this"
                    " rule's stopping time are given with its size",
                    "assumption": None,
                }
    for d in decisions[released:]:  # comparison rules against the run's baseline
        entry = _base(d)
        out.append(entry)
        if _sequential_held(entry, d, "pairs"):
            continue
        if d.state != RuleState.INSUFFICIENT_EVIDENCE:
            _decided(entry, d)
        else:
            entry.plan = "not_admitted"
            entry.message = ("sizing a sequential paired comparison is not computed: its pairs"
                             " depend on the baseline's outcomes as well as this run's")
    return out, cases


def _size_sequential_rate(
    entry: RulePlan, rule: Any, ev: CriterionEvidence, reading: Any, level: float,
    assurance: float | None = None,
) -> None:
    """A BINARY rule: the exact stopping distribution at the observed rate."""
    from oloproof.stats.sequential import stopping_distribution

    rate = ev.passed / ev.observed
    direction, t = _threshold(rule)
    horizon = max(SEQUENTIAL_PLAN_HORIZON, reading.spec.cases_total)
    dist = stopping_distribution(t, direction, rate, horizon, level, reading.spec.margin)
    entry.method = "exact stopping distribution of the beta-binomial mixture e-process"
    entry.observed = {"observed": ev.observed, "passed": ev.passed, "missing": ev.missing,
                      "read": reading.fed}
    if dist.median is None:
        entry.plan = "beyond_limit"
        entry.message = (
            f"at the observed rate {rate:.1%}, a sequential run decides it within"
            f" {horizon:,} cases {dist.decided_by[-1]:.0%} of the time, less than half"
        )
        return
    entry.plan = "sized"
    entry.total = dist.median
    entry.more = max(0, dist.median - reading.fed)
    entry.state_at_total = (
        RuleState.PASS if dist.pass_probability >= dist.fail_probability else RuleState.FAIL
    )
    entry.observed["expected_cases"] = dist.mean_within
    nine = next((n for n, p in enumerate(dist.decided_by) if p >= 0.9), None)
    entry.assuming = [
        f"the cases to come pass at the observed rate, {rate:.1%}, and none goes missing",
        f"a sequential run decides it after a median of {dist.median:,} cases in all"
        f" (mean {dist.mean_within:,.0f}"
        + (f"; 90% of runs within {nine:,}" if nine is not None else "")
        + "); the suite needs at least that many cases",
        _CONCURRENCY,
    ]
    if assurance is not None:
        _sequential_assurance(entry, assurance, dist.decided_by, reading)


def _sequential_assurance(
    entry: RulePlan, assurance: float, decided_by: Sequence[float], reading: Any
) -> None:
    """``--assurance P`` on a sequential run's rate: the size by which its test has decided
    the rule with probability P, the P-quantile of the exact stopping distribution
    (``decided_by[n]``: the chance it has decided by case n). Earlier versions dropped the
    option silently ("assurance": null)."""
    n = next((n for n, p in enumerate(decided_by) if p >= assurance), None)
    reason = None if n is not None else (
        f"a sequential run decides it within {len(decided_by) - 1:,} cases"
        f" {decided_by[-1]:.0%} of the time, less than {100.0 * assurance:g}%")
    entry.assurance = {  # the keys and order of every plan's assurance (_assurance_json)
        "target": assurance,
        "status": "sized" if n is not None else "beyond_limit",
        "more": None if n is None else max(0, n - reading.fed),
        "total": n,
        "probability": None if n is None else min(1.0, decided_by[n]),
        "method": entry.method,
        "reason": reason,
        "assumption": entry.assuming[0],
    }


def _size_sequential_mean(
    entry: RulePlan, rule: Any, ev: CriterionEvidence, reading: Any, level: float
) -> None:
    """A MEAN rule with a range: its betting test's stopping time, simulated (seeded) with
    the scores to come drawn from those observed."""
    from oloproof.stats.sequential import mean_stopping

    direction, t = _threshold(rule)
    assert ev.value_range is not None  # a MEAN without a range is refused sequentially
    horizon = max(SEQUENTIAL_MEAN_PLAN_HORIZON, reading.spec.cases_total)
    found = mean_stopping(t, direction, ev.value_range, ev.scores, level,
                          reading.spec.cases_total, horizon,
                          runs=SEQUENTIAL_PLAN_RUNS, seed=SEQUENTIAL_PLAN_SEED)
    mean, _sd = mean_and_sd(ev.scores)
    assert mean is not None  # a rule with no observed score is not sized
    entry.method = f"betting confidence sequence's stopping time, {found.method}"
    entry.approximate = True
    entry.observed = {"observed": ev.observed, "mean": mean, "missing": ev.missing,
                      "interval": "betting",
                      "read": reading.fed, "expected_cases": found.mean,
                      "decided_share": found.decided}
    _sized_by(entry, found, reading, horizon, [
        (f"the scores to come are drawn from the {ev.observed:,} observed (mean"
         f" {value_text(mean, MetricKind.MEAN)}), and none goes missing"),
    ])


def _size_sequential_count(
    entry: RulePlan, rule: Any, ev: CriterionEvidence, reading: Any
) -> None:
    """An observed_count rule: it FAILs at the failure over its budget and PASSes only at
    the suite's last case; the count of cases to either, exact, at the observed failure
    rate."""
    from oloproof.stats.sequential import count_stopping

    horizon = reading.spec.cases_total
    if reading.fed >= horizon:
        entry.plan = "not_admitted"
        entry.message = (f"every case of the suite was read, and {ev.missing} missing cases"
                         " leave it undecided: no more cases decide it; run the missing ones"
                         " again (the others come from the cache)")
        return
    rate = ev.failed / ev.observed
    found = count_stopping(int(rule.max_failures), rate, horizon)
    entry.method = f"observed count's stopping time, {found.method}"
    entry.observed = {"observed": ev.observed, "failed": ev.failed, "missing": ev.missing,
                      "read": reading.fed, "expected_cases": found.mean}
    _sized_by(entry, found, reading, horizon, [
        (f"the cases to come fail at the observed rate, {rate:.1%}, and none goes missing;"
         f" a PASS needs all {horizon:,} cases of the suite, a FAIL comes at failure"
         f" {int(rule.max_failures) + 1}"),
    ])


def _sized_by(entry: RulePlan, found: Any, reading: Any, horizon: int,
              assuming: list[str]) -> None:
    if found.median is None:
        entry.plan = "beyond_limit"
        entry.message = (f"a sequential run decides it within {horizon:,} cases"
                         f" {found.decided:.0%} of the time, less than half ({found.method})")
        return
    entry.plan = "sized"
    entry.total = found.median
    entry.more = max(0, found.median - reading.fed)
    entry.state_at_total = RuleState.PASS if found.pass_share >= 0.5 else RuleState.FAIL
    entry.assuming = [
        *assuming,
        f"a sequential run decides it after a median of {found.median:,} cases in all"
        f" (expected {found.mean:,.0f}"
        + (f"; 90% of runs within {found.q90:,}" if found.q90 is not None else "")
        + f"; {found.method}); the suite needs at least that many cases",
        _CONCURRENCY,
    ]


def _sequential_held(entry: RulePlan, d: Decision, unit: str) -> bool:
    """A sequential decision held as incomplete (its missing share over ``max_missing``):
    not decided, and not sized either, since a sequential run stops where its test decides
    and reads the same cases in the same order again. Earlier versions said "decided
    (PASS); nothing to plan" of a run that exits 5."""
    if not d.incomplete or d.state != RuleState.PASS:  # a FAIL blocks as a FAIL (exit 1)
        return False
    entry.plan = "not_admitted"
    share = f"{100.0 * (d.missing_share or 0.0):.1f}%"
    entry.message = (
        f"PASS on the {unit} read, but {share} of them are missing, over max_missing:"
        f" the gate holds it as incomplete (exit 5); a sequential run stops where its test"
        f" decides, so more cases do not bring the share down: fix what failed and run again"
        " (finished cases come from the cache)"
    )
    return True


def _read_ids(run: Any, fed: int) -> list[str]:
    order = (run.sequential or {}).get("order") or []
    return [str(c) for c in order[:fed]]


def plan_stored_comparison(
    conn: Connection,
    ref: str,
    *,
    policy_path: str | Path | None = None,
    assurance: float | None = None,
) -> ComparisonPlan:
    """Plan a stored comparison under ``policy_path`` or the policy stored with it."""
    record = get_comparison(conn, ref)
    candidate = get_run(conn, record.candidate_run)
    baseline = get_run(conn, record.baseline_run)
    shared, _ = shared_metrics(candidate, baseline)
    kinds = kind_names(shared)
    if policy_path:
        from oloproof.project.loader import load_compare_policy

        policy = load_compare_policy(policy_path, kinds)
        note = None
    else:
        from pydantic import ValidationError

        try:
            policy = ComparePolicy.validate(record.policy)
        except ValidationError:
            raise StoredEvidenceError(
                f"the policy stored with {record.id} cannot be read by this version;"
                " pass one with --policy"
            ) from None
        note = "the comparison was made without rules (no compare.yaml)"
    if policy.rules:
        note = None
    cmp = build_comparison(conn, candidate.id, baseline.id, float(policy.confidence_level))
    if cmp.incomplete:
        raise IncompleteError(
            f"comparison {record.id} pairs a partial run: it is not decided, so there is"
            " nothing to size; complete the run and compare again"
        )
    # A run over repeated trials stores one call's figures per case (trial 0), and runs
    # every case to come that many times: compare pairs trial 0, but the runs to repeat
    # make all their trials (3 trials a side cost three times what trial 0 did).
    costs = (case_costs(cmp.candidate_cases).times(candidate.trials)
             + case_costs(cmp.baseline_cases).times(baseline.trials))
    trials = {"candidate": candidate.trials, "baseline": baseline.trials}
    if candidate.sequential is not None:
        # Decided by sequential paired tests (analysis/sequential.py): a plan states the
        # decisions, and sizes none (docs/sequential-decisions.md, "Comparisons").
        from oloproof.analysis.sequential import decide_sequential_comparison

        decisions = decide_sequential_comparison(conn, cmp, policy)
        rules = []
        for d in decisions:
            entry = _base(d)
            if _sequential_held(entry, d, "pairs"):
                pass
            elif d.state != RuleState.INSUFFICIENT_EVIDENCE:
                _decided(entry, d)
            else:
                entry.plan = "not_admitted"
                entry.message = (
                    "sizing a sequential paired comparison is not computed: the candidate"
                    " stopped once its own release rules were decided; run it without"
                    " --sequential (the cases it already ran come from the cache) and"
                    " compare that run"
                )
            rules.append(entry)
    else:
        decisions = decide_comparison(cmp.metrics, policy)
        rules = plan_comparison(cmp.metrics, decisions, policy, costs, assurance=assurance)
        if max(trials.values()) > 1:
            for entry in rules:
                if entry.plan == "sized":
                    entry.assuming.insert(-1, (
                        f"each case to come runs {trials['candidate']} trials in the candidate"
                        f" and {trials['baseline']} in the baseline, as these runs did, and is"
                        " priced so; compare pairs trial 0 of each"))
    # The pairs the header shows are those the rules count: 13 cases in both runs with 3
    # missing in one are 10 pairs, as each rule's own line says.
    counted = {(metric.pairs, metric.dropped_missing, metric.dropped_excluded)
               for metric in (cmp.metrics[r.metric] for r in policy.rules)}
    pairs, dropped, excluded = counted.pop() if len(counted) == 1 else (None, None, None)
    return ComparisonPlan(
        comparison_id=record.id,
        candidate_run=candidate.id,
        baseline_run=baseline.id,
        project=record.project,
        paired_cases=len(cmp.pairing.shared),
        confidence_level=float(policy.confidence_level),
        policy=str(policy_path) if policy_path else "stored with the comparison",
        policy_note=note,
        per_case=costs,
        rules=rules,
        assurance=assurance,
        pairs=pairs,
        dropped_missing=dropped,
        dropped_excluded=excluded,
        trials=trials if max(trials.values()) > 1 else None,
    )
