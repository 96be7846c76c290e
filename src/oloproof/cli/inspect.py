"""``oloproof inspect``: a stored run, one of its cases, or its failures."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from oloproof.analysis.stored import decide_stored, judge_reports, stored_policy
from oloproof.cli._common import read_project_store
from oloproof.enums import JUDGMENT_MISSING, CaseStatus, JudgmentStatus, RuleState
from oloproof.errors import UsageError
from oloproof.render.console import print_to, text
from oloproof.render.fit import fit
from oloproof.render.tables import (
    cache_line,
    decisions_table,
    judge_tables,
    metrics_table,
    run_title,
)
from oloproof.store.db import StoreUnreadable, has_table
from oloproof.store.reader import (
    CaseRow,
    JudgmentRow,
    TrialRow,
    get_run,
    load_cases,
    load_decisions,
    load_trial_cases,
    panel_splits,
    panels_json,
)
from oloproof.textsafe import dumps

if TYPE_CHECKING:
    import argparse
    from typing import Any

_MISSING_STATES = (JudgmentStatus.ERROR, JUDGMENT_MISSING)


def _case_json(c: CaseRow) -> dict[str, Any]:
    return {
        "id": c.case_id, "input": c.input, "expected": c.expected, "metadata": c.metadata,
        "status": c.status, "output": c.output, "error": c.error, "attempts": c.attempts,
        "latency_ms": c.latency_ms, "usage": c.usage, "from_cache": c.from_cache,
        "judgments": {
            k: {
                "status": j.status, "passed": j.passed, "score": j.score, "reason": j.reason,
                "from_cache": j.from_cache, "attempts": j.attempts, "latency_ms": j.latency_ms,
                "usage": j.usage,
            }
            for k, j in c.judgments.items()
        },
    }


def _trial_json(t: TrialRow) -> dict[str, Any]:
    return {
        "trial": t.trial, "status": t.status, "output": t.output, "error": t.error,
        "attempts": t.attempts, "latency_ms": t.latency_ms, "usage": t.usage,
        "from_cache": t.from_cache,
        "judgments": {
            k: {"status": j.status, "passed": j.passed, "score": j.score, "reason": j.reason,
                "from_cache": j.from_cache}
            for k, j in t.judgments.items()
        },
    }


def _is_bad(j: JudgmentRow) -> bool:
    return j.status in _MISSING_STATES or (j.status == JudgmentStatus.OK and j.passed is False)


def _is_failure(c: CaseRow) -> bool:
    if c.status != CaseStatus.OK:
        return True
    return any(_is_bad(j) for j in c.judgments.values())


def _dump(value: Any) -> str:
    # For people: compact, keys sorted; NaN shown as JSON cannot say it.
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _usage_text(usage: dict[str, Any] | None) -> str:
    """``9 in · 13 out tokens · $0.000044``; empty when nothing was reported."""
    if not usage:
        return ""
    text = f"{usage.get('input_tokens') or 0} in · {usage.get('output_tokens') or 0} out tokens"
    cost = float(usage.get("cost_usd") or 0.0)
    return text + (f" · ${cost:.6f}".rstrip("0").rstrip(".") if cost else "")


def _flaky(conn: Any, run: Any, cases: int, *, as_json: bool) -> int:
    """``inspect --flaky``: the cases whose trials disagree, per criterion."""
    from oloproof.analysis.trials import flaky_cases, flaky_json

    flaky = flaky_cases(conn, run)
    if as_json:
        sys.stdout.write(dumps(flaky_json(run, flaky, cases)) + "\n")
        return 0
    if run.trials < 2:
        print_to(sys.stdout, text(
            f"Run {run.id} made one trial per case: no case can be flaky. Run with"
            " --trials K (or trials: K in oloproof.yaml) to see which cases are."
        ))
        return 0
    distinct = len({f.case_id for f in flaky})
    title = text(f"Flaky cases in {run.id}: {distinct} of {cases} cases, {run.trials} trials"
                 " each", "bold")
    table = Table()
    for col in ("Case", "Criterion", "Passed", "Trials"):
        table.add_column(col, no_wrap=True)
    for f in flaky:
        shown = f"{f.passed} / {f.passed + f.failed}"
        if f.missing:
            shown += f" ({f.missing} missing)"
        table.add_row(*map(text, (f.case_id, f.criterion, shown, f.trials_text)))
    print_to(sys.stdout, Group(title, fit(table)) if flaky else title)
    return 0


def _trials_table(trials: list[Any]) -> Table:
    """``inspect --case`` of a run with trials: trials 1 .. k - 1 after the case's own."""
    table = Table(title=text("Other trials"), title_justify="left")
    for col in ("Trial", "Status", "Output", "Judgments"):
        table.add_column(col, no_wrap=True)
    for t in trials:
        verdicts = " ".join(
            f"{j.criterion}={'missing' if j.passed is None else ('pass' if j.passed else 'fail')}"
            if j.score is None else f"{j.criterion}={j.score:g}"
            for j in t.judgments.values()
        )
        shown = (t.error or "").splitlines()[:1] if t.status != CaseStatus.OK else [_dump(t.output)]
        table.add_row(*map(text, (str(t.trial), t.status, shown[0] if shown else "", verdicts)))
    return table


def command(args: argparse.Namespace) -> int:
    conn = read_project_store(args.config)
    if args.run_id.startswith("cmp_"):
        from oloproof.cli.compare import inspect_comparison

        if not has_table(conn, "comparisons"):  # a store older than comparisons, read as it is
            raise UsageError(f"no comparison '{args.run_id}' in this project's store")

        return int(inspect_comparison(conn, args.run_id, as_json=args.json))
    run = get_run(conn, args.run_id)
    if args.case is not None:
        cases = load_cases(conn, run.id, args.case)
        if not cases:
            raise UsageError(f"run {run.id} has no case '{args.case}'")
        c = cases[0]
        others = load_trial_cases(conn, run.id, c.case_id).get(c.case_id, [])
        if args.json:
            doc = _case_json(c)
            if run.trials > 1:
                doc["trial"] = 0
                doc["trials"] = [_trial_json(t) for t in others]
            sys.stdout.write(dumps(doc) + "\n")
            return 0
        lines = [
            Text.assemble(("Case ", "bold"), text(c.case_id, "bold cyan"), text(f"  in {run.id}")),
            text(f"  input     {_dump(c.input)}"),
            text(f"  expected  {_dump(c.expected)}"),
            text(f"  status    {c.status}   attempts {c.attempts}   "
                 f"latency {c.latency_ms or 0:.1f} ms   {'cached' if c.from_cache else 'called'}"),
        ]
        if c.usage:
            lines.append(text(f"  usage     {_usage_text(c.usage)}"))
        if c.error:
            lines.append(text("  error     " + c.error.replace("\n", "\n            ")))
        else:
            lines.append(text(f"  output    {_dump(c.output)}"))
        table = Table(title=text("Judgments"), title_justify="left")
        for col in ("Criterion", "Status", "Passed", "Score", "Attempts", "Latency", "Usage",
                    "Cached", "Reason"):
            table.add_column(col, no_wrap=True)
        for j in c.judgments.values():
            table.add_row(*map(text, (
                j.criterion, j.status, "" if j.passed is None else str(j.passed),
                "" if j.score is None else f"{j.score:g}", str(j.attempts),
                "" if j.latency_ms is None else f"{j.latency_ms:.1f} ms", _usage_text(j.usage),
                "yes" if j.from_cache else "no", j.reason or "",
            )))
        shown: list[Any] = [*lines, fit(table)]
        if run.trials > 1:
            shown.insert(1, text(f"  trial     0 of {run.trials} (the others below)"))
            shown.append(fit(_trials_table(others)))
        print_to(sys.stdout, Group(*shown))
        return 0

    if args.judges:
        level = float(stored_policy(run).confidence_level)
        reports = judge_reports(conn, run.id, level)
        if args.json:
            panels = panels_json(panel_splits(conn, run.id))
            sys.stdout.write(dumps({"run_id": run.id, "judges": [r.to_json() for r in reports],
                                    "panels": panels}) + "\n")
            return 0
        if not reports:
            print_to(sys.stdout, text(f"Run {run.id} has no human labels on a judge's criterion"
                                      " (human_labels in oloproof.yaml)."))
            return 0
        for judges_shown in judge_tables(reports):
            print_to(sys.stdout, judges_shown)
        return 0
    cases = load_cases(conn, run.id)
    if getattr(args, "flaky", False):
        return _flaky(conn, run, len(cases), as_json=args.json)
    if args.failures:
        failures = [c for c in cases if _is_failure(c)]
        if args.json:
            sys.stdout.write(dumps([_case_json(c) for c in failures]) + "\n")
            return 0
        table = Table(title=text(f"Failures in {run.id}: {len(failures)} of {len(cases)} cases"),
                      title_justify="left")
        for col in ("Case", "Execution", "Attempts", "Criterion", "Status", "Reason"):
            table.add_column(col, no_wrap=True)
        for c in failures:
            bad = [j for j in c.judgments.values() if _is_bad(j)]
            first = True
            rows: list[JudgmentRow | None] = list(bad) or [None]
            for jr in rows:
                error_lines = (c.error or "").splitlines()
                if c.status != CaseStatus.OK:
                    reason = error_lines[0] if error_lines else ""
                else:
                    reason = (jr.reason if jr else "") or ""
                state = ""
                if jr is not None:
                    state = RuleState.FAIL if jr.status == JudgmentStatus.OK else jr.status
                table.add_row(*map(text, (
                    c.case_id if first else "", c.status if first else "",
                    str(c.attempts) if first else "",
                    jr.criterion if jr else "", state, reason,
                )))
                first = False
        print_to(sys.stdout, fit(table))
        return 0

    decisions = load_decisions(conn, run.id)
    # Metrics at the level the run was decided at.
    _, summaries = decide_stored(conn, run.id, stored_policy(run))
    if args.json:
        sys.stdout.write(
            dumps(
                {
                    "run": {
                        "id": run.id, "project": run.project, "created_at": run.created_at,
                        "finished_at": run.finished_at, "status": run.status,
                        "completeness": run.completeness, "gate": run.gate,
                        "exit_code": run.exit_code, "suite_digest": run.suite_digest,
                        "cases_total": run.cases_total, "cases_stored": len(cases),
                        "system": run.system, "system_identity": run.system_identity,
                        "cache": run.cache, "stop_reason": run.stop_reason,
                        **({"trials": run.trials} if run.trials > 1 else {}),
                    },
                    "decisions": decisions,
                    "metrics": [s.to_json() for s in summaries.values()],
                    "judges": [r.to_json() for r in judge_reports(
                        conn, run.id, float(stored_policy(run).confidence_level))],
                    "cases": [_case_json(c) for c in cases],
                },
            )
            + "\n"
        )
        return 0
    from oloproof.policy.decide import Decision

    parts: list[Any] = [
        run_title(run.id, run.status, run.completeness),
        text(f"  project   {run.project}   system {run.system.get('name')} "
             f"{run.system.get('version')}   started {run.created_at}"),
        text(f"  cases     {len(cases)} of {run.cases_total} stored   "
             f"{sum(c.status != CaseStatus.OK for c in cases)} errors"
             f"   suite {run.suite_digest[:19]}…"),
    ]
    if run.stop_reason:
        parts.append(text(f"  stopped   {run.stop_reason}", "red"))
    if decisions:
        try:
            shown = [Decision(**d) for d in decisions]
        except TypeError as exc:
            raise StoreUnreadable(f"run {run.id}: its stored decisions are damaged ({exc})") from exc
        parts.append(decisions_table(shown))
    parts.append(metrics_table(list(summaries.values())))
    parts.append(cache_line(run.cache))
    if run.gate:
        parts.append(text(f"Gate      {run.gate}   exit code {run.exit_code}"))
    print_to(sys.stdout, Group(*parts))
    return 0
