"""What an HTML report or the viewer shows of a stored run or comparison, as plain data.

:func:`run_document` and :func:`comparison_report_document` read the store through the
same functions ``inspect`` and ``compare`` use and return JSON-able dictionaries; the
templates in :mod:`oloproof.render.html` draw them. Nothing here writes HTML or escapes
text: what a user or a model supplied is returned as stored, and the templates escape it.

Each case carries one **outcome** over all its criteria, the word the case table filters on:

* ``missing``: the execution failed, or some criterion is missing for it;
* ``failed``: nothing is missing and some criterion was observed failing (BINARY);
* ``passed``: everything observed passed (or was scored, for MEAN), nothing missing;
* ``excluded``: every criterion was excluded.
"""

from __future__ import annotations

from typing import Any

from oloproof.analysis.compare import build_comparison
from oloproof.analysis.stored import decide_stored, stored_policy
from oloproof.analysis.trials import flaky_cases
from oloproof.enums import CaseStatus, MetricKind
from oloproof.evidence import Outcome, classify_outcome
from oloproof.policy.format import estimate_text, interval_text, level_text
from oloproof.store.comparisons import get_comparison
from oloproof.store.dbapi import Connection
from oloproof.store.reader import (
    CaseRow,
    JudgmentRow,
    RunRecord,
    get_run,
    load_cases,
    load_decisions,
    load_trial_cases,
)

__all__ = [
    "case_document",
    "comparison_report_document",
    "criterion_outcome",
    "run_document",
]


def criterion_outcome(kind: str, case: CaseRow, criterion: str) -> str:
    """``passed``, ``failed``, ``scored``, ``missing`` or ``excluded`` for one case and criterion."""
    j = case.judgments.get(criterion)
    if case.status != CaseStatus.OK or j is None:
        return "missing"
    sort = classify_outcome(kind, j.status, j.passed, j.score)
    if sort is Outcome.MISSING:
        return "missing"
    if sort is Outcome.EXCLUDED:
        return "excluded"
    if kind == MetricKind.BINARY:
        return "passed" if j.passed else "failed"
    return "scored"


def _case_outcome(per_criterion: dict[str, str]) -> str:
    states = set(per_criterion.values())
    if "missing" in states or not states:
        return "missing"
    if "failed" in states:
        return "failed"
    if states == {"excluded"}:
        return "excluded"
    return "passed"


def _trial_outcome(kind: str, j: JudgmentRow) -> str:
    """One trial's judgment as the case table words it: passed, failed, missing, excluded,
    or its score."""
    sorted_as = classify_outcome(kind, j.status, j.passed, j.score)
    if sorted_as is Outcome.OBSERVED:
        if kind == MetricKind.MEAN:
            return f"{j.score:g}"
        return "passed" if j.passed else "failed"
    return "excluded" if sorted_as is Outcome.EXCLUDED else "missing"


def case_document(case: CaseRow, kinds: dict[str, str]) -> dict[str, Any]:
    """One case: what went in and came out, every judgment, and its outcome per criterion."""
    per = {c: criterion_outcome(k, case, c) for c, k in kinds.items()}
    if case.status != CaseStatus.OK and not kinds:
        outcome = "missing"
    else:
        outcome = _case_outcome(per) if kinds else "passed"
    return {
        "id": case.case_id,
        "index": case.idx,
        "status": case.status,
        "outcome": outcome,
        "criteria": per,
        "input": case.input,
        "expected": case.expected,
        "metadata": case.metadata,
        "output": case.output,
        "error": case.error,
        "attempts": case.attempts,
        "latency_ms": case.latency_ms,
        "usage": case.usage,
        "from_cache": case.from_cache,
        "judgments": [
            {
                "criterion": j.criterion, "status": j.status, "passed": j.passed,
                "score": j.score, "reason": j.reason, "from_cache": j.from_cache,
                "attempts": j.attempts, "latency_ms": j.latency_ms, "usage": j.usage,
                "outcome": per.get(j.criterion, "missing"),
            }
            for j in case.judgments.values()
        ],
    }


def _run_header(run: RunRecord, cases: list[CaseRow]) -> dict[str, Any]:
    policy = run.policy or {}
    return {
        "id": run.id,
        "project": run.project,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "status": run.status,
        "completeness": run.completeness,
        "state": run.state,
        "gate": run.gate,
        "exit_code": run.exit_code,
        "suite_digest": run.suite_digest,
        "dataset": run.dataset,
        "cases_total": run.cases_total,
        "cases_stored": len(cases),
        "cases_errored": sum(c.status != CaseStatus.OK for c in cases),
        "system": run.system,
        "system_identity": run.system_identity,
        "cache": run.cache,
        "stop_reason": run.stop_reason,
        "policy_path": run.policy_path,
        "confidence_level": policy.get("confidence_level"),
        "trials": run.trials,
        "running": run.status == "RUNNING",
    }


def run_document(conn: Connection, ref: str) -> dict[str, Any]:
    """A stored run: header, gate, decisions, metrics and every case (in suite order).

    The metrics are summarised at the level of the policy the run was decided under; the
    decisions are those the run recorded. A run still going has no decisions yet, and its
    metrics are over the cases stored so far.
    """
    run = get_run(conn, ref)
    cases = load_cases(conn, run.id)
    kinds = {m["criterion"]: m["kind"] for m in run.metrics}
    policy = stored_policy(run)
    _, summaries = decide_stored(conn, run.id, policy)
    metrics = []
    for s in summaries.values():
        m = s.to_json()
        m["estimate_text"] = estimate_text(s.estimate, s.kind)
        m["interval_text"] = interval_text(s.lower, s.upper, s.kind)
        if m["interval_text"] and s.kind == MetricKind.MEAN and s.guarantee == "approximate":
            m["interval_text"] += " approximate (t)"
        m["cases_text"] = s.cases_text()
        metrics.append(m)
    decisions = load_decisions(conn, run.id)
    for d in decisions:
        d["metric_kind"] = kinds.get(d.get("metric", ""), MetricKind.BINARY)
    case_docs = [case_document(c, kinds) for c in cases]
    if run.trials > 1:
        # Trials 1 .. k - 1 of each case, shown on its page after trial 0.
        others = load_trial_cases(conn, run.id)
        for doc, case in zip(case_docs, cases, strict=True):
            doc["trials"] = [
                {
                    "trial": t.trial, "status": t.status, "output": t.output, "error": t.error,
                    "latency_ms": t.latency_ms, "from_cache": t.from_cache,
                    "criteria": {
                        name: _trial_outcome(kinds.get(name, MetricKind.BINARY), j)
                        for name, j in t.judgments.items()
                    },
                }
                for t in others.get(case.case_id, [])
            ]
    index_of = {c.case_id: i for i, c in enumerate(cases)}
    counts = {k: 0 for k in ("passed", "failed", "missing", "excluded")}
    for c in case_docs:
        counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
    flaky = [
        {**f.to_json(), "trials_text": f.trials_text,
         "index": index_of.get(f.case_id)}
        for f in flaky_cases(conn, run)
    ] if run.trials > 1 else []
    return {
        "kind": "run",
        "flaky": flaky,
        "flaky_cases": len({f["case"] for f in flaky}),
        "run": _run_header(run, cases),
        "level_text": level_text(float(policy.confidence_level)),
        "decisions": decisions,
        "metrics": metrics,
        "criteria": list(kinds),
        "criterion_kinds": kinds,
        "cases": case_docs,
        "outcome_counts": counts,
    }


def _discordant(cmp_doc: dict[str, Any], conn: Connection) -> list[dict[str, Any]]:
    """Per paired metric, the cases whose outcome differs between the two runs.

    BINARY: the cases only the candidate passed and those only the baseline passed (the
    discordant pairs the interval is built on). MEAN: every pair whose scores differ,
    largest difference first.
    """
    cmp = build_comparison(
        conn, cmp_doc["candidate"]["run_id"], cmp_doc["baseline"]["run_id"],
        float(cmp_doc["confidence_level"]),
    )
    cand = {c.case_id: c for c in cmp.candidate_cases}
    base = {c.case_id: c for c in cmp.baseline_cases}
    out = []
    for name, pm in cmp.metrics.items():
        rows: list[dict[str, Any]] = []
        for cid in cmp.pairing.shared:
            c, b = cand[cid], base[cid]
            co, bo = criterion_outcome(pm.kind, c, name), criterion_outcome(pm.kind, b, name)
            if pm.kind == MetricKind.BINARY:
                if {co, bo} == {"passed", "failed"}:
                    rows.append({
                        "id": cid, "candidate": co, "baseline": bo,
                        "direction": "candidate_only" if co == "passed" else "baseline_only",
                        "candidate_output": c.output, "baseline_output": b.output,
                        "candidate_reason": c.judgments[name].reason,
                        "baseline_reason": b.judgments[name].reason,
                    })
            elif co == "scored" and bo == "scored":
                cs, bs = c.judgments[name].score, b.judgments[name].score
                if cs is not None and bs is not None and cs != bs:
                    rows.append({
                        "id": cid, "candidate": f"{cs:g}", "baseline": f"{bs:g}",
                        "difference": cs - bs,
                        "direction": "candidate_only" if cs > bs else "baseline_only",
                        "candidate_output": c.output, "baseline_output": b.output,
                        "candidate_reason": c.judgments[name].reason,
                        "baseline_reason": b.judgments[name].reason,
                    })
        if pm.kind != MetricKind.BINARY:
            rows.sort(key=lambda r: -abs(r["difference"]))
        out.append({"metric": name, "kind": pm.kind, "cases": rows})
    return out


def comparison_report_document(conn: Connection, ref: str) -> dict[str, Any]:
    """A stored comparison as ``compare --json`` printed it, with its discordant cases."""
    record = get_comparison(conn, ref)
    doc = dict(record.document)
    level = float(doc["confidence_level"])
    for m in doc["metrics"]:
        for d in doc["decisions"]:
            if d.get("metric") == m["metric"]:
                d["metric_kind"] = m["kind"]
    return {
        "kind": "comparison",
        "comparison": doc,
        "level_text": level_text(level),
        "discordant": _discordant(doc, conn),
    }
