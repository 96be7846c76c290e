"""The tables of ``oloproof runs``: the stored runs and comparisons, newest first.

Only :mod:`oloproof.render.doc` is imported: listing runs reads neither the statistics nor
the configuration's models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof.render.doc import Column, Table, line, system_label

if TYPE_CHECKING:
    from oloproof.api import RunInfo
    from oloproof.store.comparisons import ComparisonRecord

__all__ = ["comparisons_table", "runs_table"]


def _columns(*headers: str) -> tuple[Column, ...]:
    return tuple(Column(header, no_wrap=True) for header in headers)


def _time(stamp: str) -> str:
    return stamp[:19].replace("T", " ")


def runs_table(runs: Sequence[RunInfo], *, title: str = "Runs") -> Table:
    """One row per run; a "Stopped because" column when a run was stopped."""
    stopped = any(r.stop_reason for r in runs)
    table = Table(line(title), _columns(
        "Run", "Started (UTC)", "State", "Gate", "Cases", "System",
        *(["Stopped because"] if stopped else [])))
    for r in runs:
        gate = f"{r.gate} (exit {r.exit_code})" if r.gate else ""
        cells = [
            r.run_id, _time(r.created_at), r.state, gate, r.cases_text,
            system_label(r.system),
        ]
        table.add_row(*map(line, [*cells, *([r.stop_reason] if stopped else [])]))
    return table


def comparisons_table(comparisons: Sequence[ComparisonRecord]) -> Table:
    table = Table(line("Comparisons"), _columns(
        "Comparison", "Created (UTC)", "Candidate", "Baseline", "Gate"))
    for c in comparisons:
        table.add_row(*map(line, (c.id, _time(c.created_at), c.candidate_run, c.baseline_run,
                                  f"{c.gate} (exit {c.exit_code})")))
    return table
