"""``oloproof plan``: how many more cases would decide a rule left undecided (SPEC §7).

``oloproof plan RUN_ID --run`` sizes a run's rules, ``oloproof plan CMP_ID`` a comparison's.
The evidence comes from the store (the run's cases, or the two runs of the comparison paired
again as ``compare`` paired them), the policy from what was stored with the run or comparison
unless ``--policy`` names another. The sizes come from :mod:`oloproof.stats.sample_size`:

- a BINARY run rule, k of n observed: the smallest total N > n whose projected
  round(k/n · N) passes the rule's own Clopper–Pearson interval decides (exact);
- a MEAN run rule: from the stored per-case scores' mean and sd, the first N at which the
  t interval would clear the bar (approximate);
- a comparison rule: the observed paired 2x2 table scaled to N pairs, decided by Newcombe's
  interval (exact), or for a MEAN metric the paired t analogue (approximate).

The extra cases are priced from what the run recorded: the shortest and longest per-case time
(execution plus that case's judging) and the per-case mean of reported tokens and cost.
Exit code: 0 when a plan was printed, 2 for usage errors and for the refusal of a rule
that cannot be sized when it is all there is to say, 5 for a partial run.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from oloproof.cli._common import read_project_store
from oloproof.errors import OloproofError, UsageError
from oloproof.policy.compare import PairedMetric, decide_comparison
from oloproof.policy.decide import FAIL, INSUFFICIENT, PASS, Decision, pct
from oloproof.project import load_compare_policy, load_release_policy
from oloproof.project.models import ComparePolicy, MetricKind, ReleasePolicy
from oloproof.render.plan import plan_text
from oloproof.runner import decide_stored
from oloproof.stats.intervals import student_t_mean
from oloproof.stats.sample_size import (
    Direction,
    SizeResult,
    binary_rule_size,
    mean_rule_size,
    paired_binary_rule_size,
    paired_mean_rule_size,
)
from oloproof.store.comparisons import get_comparison
from oloproof.store.reader import (
    CaseRow,
    CriterionEvidence,
    RunRecord,
    get_run,
    load_cases,
    load_evidence,
)

__all__ = ["CaseCosts", "case_costs", "command", "plan_comparison", "plan_run"]



class IncompleteError(OloproofError):
    """Asked to plan a partial run or a comparison with one: nothing was decided (exit 5)."""

    exit_code = 5


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
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "time_s_min": self.time_min_s,
            "time_s_max": self.time_max_s,
            "input_tokens_mean": self.input_tokens,
            "output_tokens_mean": self.output_tokens,
            "cost_usd_mean": self.cost_usd,
        }


def case_costs(cases: Sequence[CaseRow]) -> CaseCosts:
    """Time per case = its execution latency plus its judgments' latencies (for a cached
    case, the latencies stored are the original calls'); usage = the system's plus the
    judges', averaged over the cases stored."""
    times: list[float] = []
    tokens_in = tokens_out = cost = 0.0
    saw_tokens = saw_cost = False
    for case in cases:
        ms = [case.latency_ms] + [j.latency_ms for j in case.judgments.values()]
        known = [x for x in ms if x is not None]
        if known:
            times.append(math.fsum(known) / 1000.0)
        for usage in [case.usage] + [j.usage for j in case.judgments.values()]:
            if not usage:
                continue
            i = float(usage.get("input_tokens") or 0)
            o = float(usage.get("output_tokens") or 0)
            c = float(usage.get("cost_usd") or 0.0)
            tokens_in += i
            tokens_out += o
            cost += c
            saw_tokens = saw_tokens or bool(i or o)
            saw_cost = saw_cost or bool(c)
    n = len(cases)
    return CaseCosts(
        n,
        min(times) if times else None,
        max(times) if times else None,
        tokens_in / n if saw_tokens and n else None,
        tokens_out / n if saw_tokens and n else None,
        cost / n if saw_cost and n else None,
    )


def _price(entry: dict[str, Any], costs: CaseCosts) -> None:
    more = int(entry["more"])
    if costs.time_min_s is not None and costs.time_max_s is not None:
        entry["time_s"] = [more * costs.time_min_s, more * costs.time_max_s]
    else:
        entry["time_s"] = None
    if costs.input_tokens is not None and costs.output_tokens is not None:
        entry["tokens"] = {
            "input": more * costs.input_tokens,
            "output": more * costs.output_tokens,
        }
    else:
        entry["tokens"] = None
    entry["cost_usd"] = None if costs.cost_usd is None else more * costs.cost_usd


# -- sizes to plan entries ------------------------------------------------------------------


def _base_entry(d: Decision) -> dict[str, Any]:
    return {
        "rule": d.rule,
        "metric": d.metric,
        "kind": d.kind,
        "state": d.state,
        "plan": "",
        "more": None,
        "total": None,
        "state_at_total": None,
        "approximate": False,
        "method": None,
        "reason": None,
        "message": "",
        "assuming": [],
    }


def _from_size(
    entry: dict[str, Any], size: SizeResult, *, noun: str, estimate_text: str, bar_text: str
) -> None:
    entry.update(
        plan=size.status, method=size.method, approximate=size.approximate,
        reason=size.reason or None,
    )
    if size.status == "sized":
        entry.update(more=size.more, total=size.total, state_at_total=size.state_at_total)
    elif size.status == "on_the_bar":
        entry["message"] = (
            f"the observed {noun}, {estimate_text}, sits exactly on the bar ({bar_text}):"
            " no number of cases decides it, if it holds"
        )
    elif size.status == "beyond_limit":
        entry["message"] = f"no size decides it within the search's limit ({size.reason})"
    elif size.status == "already_decided":
        entry.update(total=size.total, more=0, state_at_total=size.state_at_total)
    else:
        entry["message"] = f"no size can be computed: {size.reason}"


def _decided(entry: dict[str, Any], d: Decision) -> None:
    entry["plan"] = "decided"
    if d.state in (PASS, FAIL):
        entry["message"] = f"decided ({d.state}); nothing to plan"
    else:
        entry["message"] = (
            f"{d.state}: a person has to look at the evidence; more cases do not settle it"
        )


def plan_run(
    cases: Sequence[CaseRow],
    evidence: dict[str, CriterionEvidence],
    decisions: Sequence[Decision],
    policy: ReleasePolicy,
) -> list[dict[str, Any]]:
    """One plan entry per rule of a run's policy."""
    level = float(policy.confidence_level)
    costs = case_costs(cases)
    ran = len(cases)
    out: list[dict[str, Any]] = []
    for rule, d in zip(policy.rules, decisions, strict=True):
        entry = _base_entry(d)
        out.append(entry)
        ev = evidence[rule.metric]
        if d.state != INSUFFICIENT:
            _decided(entry, d)
            continue
        if d.kind == "observed_count":
            entry["plan"] = "not_admitted"
            entry["message"] = (
                "sizing is not admitted for an observed_count rule: it counts failures, and"
                " more cases can add failures but never take one away; it is open because"
                f" {ev.missing} missing case{'s' if ev.missing != 1 else ''} could be failures:"
                " run them again (the cache keeps the rest)"
            )
            continue
        assert d.threshold is not None and d.direction in ("min", "max")
        t = float(d.threshold)
        direction: Direction = "min" if d.direction == "min" else "max"
        assuming = [f"the cases to come resemble the {ran} already run"]
        if ev.kind == "BINARY":
            size = binary_rule_size(ev.passed, ev.observed, t, direction, level)
            entry["observed"] = {"passed": ev.passed, "observed": ev.observed,
                                 "missing": ev.missing}
            _from_size(
                entry, size, noun="rate",
                estimate_text=pct(ev.passed / ev.observed) if ev.observed else "none",
                bar_text=f"{direction} {pct(t)}",
            )
        else:
            summary = student_t_mean(ev.scores, level)
            if summary.n < 2 or summary.mean is None or summary.sd is None:
                entry.update(
                    plan="refused",
                    reason=(
                        f"this run stores {summary.n} observed score{'s' if summary.n != 1 else ''}"
                        " for it, and sizing needs the mean and spread of at least two"
                    ),
                )
                continue
            entry["observed"] = {"mean": summary.mean, "sd": summary.sd, "observed": summary.n,
                                 "missing": ev.missing}
            size = mean_rule_size(
                summary.mean, summary.sd, summary.n, t, direction, level, ev.value_range
            )
            _from_size(
                entry, size, noun="mean", estimate_text=f"{summary.mean:.4g}",
                bar_text=f"{direction} {t:g}",
            )
            assuming[0] += (
                f", with the mean ({summary.mean:.4g}) and spread (sd {summary.sd:.4g})"
                f" of its {summary.n} scores"
            )
            assuming.append(
                "approximate: the t interval is projected from that mean and spread"
            )
        if entry["plan"] == "already_decided":
            entry["message"] = (
                f"the {ev.observed} observed cases alone would decide it"
                f" ({entry['state_at_total']}); its {ev.missing} missing case"
                f"{'s' if ev.missing != 1 else ''} keep{'s' if ev.missing == 1 else ''} it"
                " open: run them again (the cache keeps the rest)"
            )
        if ev.missing:
            assuming.append(
                f"none of the cases to come goes missing ({ev.missing} of this run's did, and"
                " they keep the rule open whatever the size: run them again)"
            )
        assuming.append(_CONCURRENCY)
        entry["assuming"] = assuming
        if entry["plan"] == "sized":
            _price(entry, costs)
    return out


def plan_comparison(
    metrics: dict[str, PairedMetric],
    decisions: Sequence[Decision],
    policy: ComparePolicy,
    costs: CaseCosts,
) -> list[dict[str, Any]]:
    """One plan entry per rule of a comparison policy."""
    level = float(policy.confidence_level)
    out: list[dict[str, Any]] = []
    for rule, d in zip(policy.rules, decisions, strict=True):
        entry = _base_entry(d)
        out.append(entry)
        if d.state != INSUFFICIENT:
            _decided(entry, d)
            continue
        pm = metrics[rule.metric]
        margin = float(rule.margin or 0.0)
        kind = rule.kind
        if pm.kind == "BINARY":
            assert None not in (pm.both_pass, pm.cand_only, pm.base_only, pm.both_fail)
            a, b, c, dd = (int(x or 0) for x in (pm.both_pass, pm.cand_only, pm.base_only,
                                                 pm.both_fail))
            size = paired_binary_rule_size(a, b, c, dd, kind, margin, level)
            entry["observed"] = {"both_pass": a, "candidate_only": b, "baseline_only": c,
                                 "both_fail": dd}
            estimate = f"{100.0 * (b - c) / pm.pairs:+.1f} pts" if pm.pairs else "none"
            outcomes = (
                f"{a} both pass · {dd} both fail · {b} candidate only · {c} baseline only"
            )
            assuming = [f"the cases to come resemble the {pm.pairs} already paired ({outcomes})"]
        else:
            size = paired_mean_rule_size(
                pm.estimate if pm.estimate is not None else 0.0, pm.sd, pm.pairs, kind, margin,
                level,
            )
            entry["observed"] = {"mean_difference": pm.estimate, "sd": pm.sd, "pairs": pm.pairs}
            estimate = f"{pm.estimate:+.4g}" if pm.estimate is not None else "none"
            assuming = [
                (
                    f"the cases to come resemble the {pm.pairs} already paired, with the mean"
                    f" difference ({estimate}) and its spread (sd {pm.sd or 0:.4g})"
                ),
                "approximate: the paired t interval is projected from that mean and spread",
            ]
        bar = {"superiority": f"{margin:g}", "non_inferiority": f"-{margin:g}"}.get(
            kind, f"±{margin:g}"
        )
        _from_size(
            entry, size, noun="difference", estimate_text=estimate,
            bar_text=f"{kind} at {bar}",
        )
        if pm.dropped_missing:
            dropped = pm.dropped_missing
            assuming.append(
                f"none of the cases to come goes missing ({dropped}"
                f" {'pair was' if dropped == 1 else 'pairs were'} dropped because a case was"
                " missing in one run)"
            )
        assuming.append(
            "each case runs in both systems, one after another; concurrency divides the time"
            " and not the cost"
        )
        entry["assuming"] = assuming
        if entry["plan"] == "sized":
            entry["message"] = ""
            _price(entry, costs)
        elif entry["plan"] == "already_decided":
            entry["message"] = f"the observed pairs decide it ({entry['state_at_total']})"
    return out


# -- the command ------------------------------------------------------------------------------


def _stored_release_policy(run: RunRecord) -> ReleasePolicy:
    if run.policy is None:
        return ReleasePolicy(version=1)
    try:
        return ReleasePolicy.model_validate(run.policy)
    except ValidationError as exc:
        raise UsageError(
            f"the policy stored with {run.id} cannot be read by this version ({exc.error_count()}"
            " problem(s)); pass one with --policy"
        ) from None


def _exit_code(rules: list[dict[str, Any]]) -> int:
    refused = any(r["plan"] == "refused" for r in rules)
    sized = any(r["plan"] == "sized" for r in rules)
    undecided_other = any(
        r["plan"] not in ("refused", "sized", "decided") for r in rules
    )
    return 2 if refused and not sized and not undecided_other else 0


def _print(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(plan_text(doc))


def _plan_run_command(conn: sqlite3.Connection, args: argparse.Namespace) -> int:
    run = get_run(conn, args.ref)
    metrics: dict[str, MetricKind] = {m["criterion"]: m["kind"] for m in run.metrics}
    if args.policy:
        policy = load_release_policy(args.policy, metrics)
        note = None
    else:
        policy = _stored_release_policy(run)
        note = "the policy stored with the run declares none"
    if policy.rules:
        note = None
    if run.completeness != "COMPLETE":
        raise IncompleteError(
            f"run {run.id} is {run.state}: a partial run is not decided, so there is nothing"
            " to size; run it again (finished cases come from the cache), then plan that run"
        )
    cases = load_cases(conn, run.id)
    evidence = load_evidence(conn, run)
    decisions, _ = decide_stored(conn, run.id, policy)
    rules = plan_run(cases, evidence, decisions, policy)
    doc = {
        "plan_for": "run",
        "run_id": run.id,
        "project": run.project,
        "observed_cases": len(cases),
        "confidence_level": float(policy.confidence_level),
        "policy": args.policy or "stored with the run",
        "policy_note": note,
        "per_case": case_costs(cases).to_json(),
        "rules": rules,
    }
    _print(doc, args.json)
    return _exit_code(rules)


def _plan_comparison_command(conn: sqlite3.Connection, args: argparse.Namespace) -> int:
    from oloproof.cli.compare import build_comparison, shared_metrics

    record = get_comparison(conn, args.ref)
    candidate = get_run(conn, record.candidate_run)
    baseline = get_run(conn, record.baseline_run)
    shared, _ = shared_metrics(candidate, baseline)
    kinds: dict[str, MetricKind] = {
        k: ("BINARY" if v == "BINARY" else "MEAN") for k, v in shared.items()
    }
    if args.policy:
        policy = load_compare_policy(args.policy, kinds)
        note = None
    else:
        try:
            policy = ComparePolicy.model_validate(record.policy)
        except ValidationError:
            raise UsageError(
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
    decisions = decide_comparison(cmp.metrics, policy)
    costs = case_costs(cmp.candidate_cases) + case_costs(cmp.baseline_cases)
    rules = plan_comparison(cmp.metrics, decisions, policy, costs)
    doc = {
        "plan_for": "comparison",
        "comparison_id": record.id,
        "candidate_run": candidate.id,
        "baseline_run": baseline.id,
        "project": record.project,
        "paired_cases": len(cmp.pairing.shared),
        "confidence_level": float(policy.confidence_level),
        "policy": args.policy or "stored with the comparison",
        "policy_note": note,
        "per_case": costs.to_json(),
        "rules": rules,
    }
    _print(doc, args.json)
    return _exit_code(rules)


def command(args: argparse.Namespace) -> int:
    ref: str = args.ref
    if ref.startswith("cmp_"):
        if args.run:
            raise UsageError(
                f"'{ref}' is a comparison id: drop --run (oloproof plan {ref})"
            )
        conn = read_project_store(args.config)
        return _plan_comparison_command(conn, args)
    if ref.startswith("run_") or ref == "latest":
        if not args.run:
            raise UsageError(
                f"'{ref}' names a run: add --run to size its rules (oloproof plan {ref} --run)"
            )
        conn = read_project_store(args.config)
        return _plan_run_command(conn, args)
    raise UsageError(
        f"'{ref}' is neither a run id (run_…, with --run; or 'latest' --run) nor a comparison"
        " id (cmp_…)"
    )
