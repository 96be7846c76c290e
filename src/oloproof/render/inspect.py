"""The text of ``oloproof inspect``: a stored run, one of its cases, its failures, its flaky
cases. Descriptions (:mod:`oloproof.render.doc`): rich draws them in a terminal,
``render/plain.py`` everywhere else."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof.enums import CaseStatus
from oloproof.render.doc import Blocks, Column, Line, Table, assemble, line, system_label
from oloproof.render.tables import cache_line, decisions_table, metrics_table, run_title
from oloproof.textsafe import first_line, one_line

if TYPE_CHECKING:
    from typing import Any

    from oloproof.analysis.cases import FailureRow
    from oloproof.analysis.trials import FlakyCase
    from oloproof.policy.decide import Decision, MetricSummary
    from oloproof.store.reader import CaseRow, RunRecord, TrialRow

__all__ = ["case_view", "failures_table", "flaky_view", "run_view", "usage_text"]


def _dump(value: Any) -> str:
    # For people: compact, keys sorted; NaN shown as JSON cannot say it.
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _columns(*headers: str) -> tuple[Column, ...]:
    return tuple(Column(header, no_wrap=True) for header in headers)


def usage_text(usage: dict[str, Any] | None) -> str:
    """``9 in · 13 out tokens · $0.000044``; empty when nothing was reported."""
    if not usage:
        return ""
    text = f"{usage.get('input_tokens') or 0} in · {usage.get('output_tokens') or 0} out tokens"
    cost = float(usage.get("cost_usd") or 0.0)
    return text + (f" · ${cost:.6f}".rstrip("0").rstrip(".") if cost else "")


def _trials_table(trials: Sequence[TrialRow]) -> Table:
    """``inspect --case`` of a run with trials: trials 1 .. k - 1 after the case's own."""
    table = Table(line("Other trials"), _columns("Trial", "Status", "Output", "Judgments"))
    for t in trials:
        verdicts = " ".join(
            f"{j.criterion}={'missing' if j.passed is None else ('pass' if j.passed else 'fail')}"
            if j.score is None else f"{j.criterion}={j.score:g}"
            for j in t.judgments.values()
        )
        shown = first_line(t.error) if t.status != CaseStatus.OK else _dump(t.output)
        table.add_row(*map(line, (str(t.trial), t.status, shown, verdicts)))
    return table


def case_view(run: RunRecord, c: CaseRow, others: Sequence[TrialRow]) -> Blocks:
    """``inspect --case ID``: the case's input, expected, call and output, its judgments."""
    parts: list[Line | Table] = [
        assemble(line("Case ", "bold"), line(one_line(c.case_id), "bold cyan"), line(f"  in {run.id}")),
        line(f"  input     {_dump(c.input)}"),
        line(f"  expected  {_dump(c.expected)}"),
        line(f"  status    {c.status}   attempts {c.attempts}   "
             f"latency {c.latency_ms or 0:.1f} ms   {'cached' if c.from_cache else 'called'}"),
    ]
    if run.trials > 1:
        parts.insert(1, line(f"  trial     0 of {run.trials} (the others below)"))
    if c.usage:
        parts.append(line(f"  usage     {usage_text(c.usage)}"))
    if c.error:
        parts.append(line("  error     " + c.error.replace("\n", "\n            ")))
    else:
        parts.append(line(f"  output    {_dump(c.output)}"))
    table = Table(line("Judgments"), _columns(
        "Criterion", "Status", "Passed", "Score", "Attempts", "Latency", "Usage", "Cached",
        "Reason"))
    for j in c.judgments.values():
        table.add_row(*map(line, (
            j.criterion, j.status, "" if j.passed is None else str(j.passed),
            "" if j.score is None else f"{j.score:g}", str(j.attempts),
            "" if j.latency_ms is None else f"{j.latency_ms:.1f} ms", usage_text(j.usage),
            "yes" if j.from_cache else "no", j.reason or "",
        )))
    parts.append(table)
    if run.trials > 1:
        parts.append(_trials_table(others))
    return Blocks(parts)


def failures_table(run_id: str, rows: Sequence[FailureRow], failed: int, total: int) -> Table:
    """``inspect --failures``: each failed case, with its failed or missing judgments."""
    table = Table(line(f"Failures in {run_id}: {failed} of {total} cases"), _columns(
        "Case", "Execution", "Attempts", "Criterion", "Status", "Reason"))
    for r in rows:
        table.add_row(*map(line, (one_line(r.case_id), r.execution, r.attempts, r.criterion, r.state,
                                  r.reason)))
    return table


def flaky_view(run: RunRecord, flaky: Sequence[FlakyCase], cases: int) -> Line | Blocks:
    """``inspect --flaky``: the cases whose trials disagree, per criterion."""
    if run.trials < 2:
        return line(
            f"Run {run.id} made one trial per case: no case can be flaky. Run with"
            " --trials K (or trials: K in oloproof.yaml) to see which cases are."
        )
    distinct = len({f.case_id for f in flaky})
    title = line(f"Flaky cases in {run.id}: {distinct} of {cases} cases, {run.trials} trials"
                 " each", "bold")
    if not flaky:
        return title
    table = Table(line(""), _columns("Case", "Criterion", "Passed", "Trials"))
    for f in flaky:
        shown = f"{f.passed} / {f.passed + f.failed}"
        if f.missing:
            shown += f" ({f.missing} missing)"
        table.add_row(*map(line, (one_line(f.case_id), f.criterion, shown, f.trials_text)))
    return Blocks([title, table])


def run_view(
    run: RunRecord, cases: Sequence[CaseRow], decisions: Sequence[Decision],
    summaries: Sequence[MetricSummary], sequential: str | None = None,
    notes: Sequence[str] = (),
) -> Blocks:
    """``inspect RUN``: what the run was, its decisions, metrics, cache and gate, with the
    gate's ``notes`` (analysis/stored.py ``stored_gate_notes``)."""
    parts: list[Line | Table] = [
        run_title(run.id, run.status, run.completeness),
        line(f"  project   {run.project}   system {system_label(run.system)}"
             f"   started {run.created_at}"),
        line(f"  cases     {len(cases)} of {run.cases_total} stored   "
             f"{sum(c.status != CaseStatus.OK for c in cases)} errors"
             f"   suite {run.suite_digest[:19]}…"),
    ]
    if run.stop_reason:
        parts.append(line(f"  stopped   {run.stop_reason}", "red"))
    patched = run.system.get("patched") if isinstance(run.system, dict) else None
    if patched and isinstance(patched, list):  # a run from Python with a test's fake in place
        parts.append(line(
            f"  patched   {', '.join(map(str, patched[:5]))}: not the project's files' code"
            " when it ran (a patch in this process); no output of it was cached", "yellow"))
    if sequential:
        parts.append(line(f"  {sequential}"))
    if decisions:
        parts.append(decisions_table(decisions))
    parts.append(metrics_table(summaries))
    parts.append(cache_line(run.cache))
    if run.gate:
        parts.append(line(f"Gate      {run.gate}   exit code {run.exit_code}"))
        parts.extend(line(f"  {one_line(note)}", "yellow") for note in notes)
    return Blocks(parts)
