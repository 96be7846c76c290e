"""``oloproof runs``: stored runs, newest first."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oloproof.api import RunInfo, list_comparisons, list_runs
from oloproof.cli._common import project_root
from oloproof.store.location import PostgresLocation, locate
from oloproof.textsafe import dumps

if TYPE_CHECKING:
    import argparse
    from typing import Any


def run_json(r: RunInfo) -> dict[str, Any]:
    """One run as ``runs --json`` lists it."""
    return {
        "id": r.run_id, "created_at": r.created_at, "finished_at": r.finished_at,
        "status": r.status, "completeness": r.completeness, "gate": r.gate,
        "exit_code": r.exit_code, "cases": r.cases_total,
        "system": r.system, "suite_digest": r.suite_digest,
        "stop_reason": r.stop_reason,
    }


def command(args: argparse.Namespace) -> int:
    project_root(args.config)
    runs = list_runs(args.config, limit=args.limit)
    if args.json:
        sys.stdout.write(dumps([run_json(r) for r in runs]) + "\n")
        return 0
    # The tables only when printing them; outside a terminal they are written without rich.
    from oloproof.render.console import print_to
    from oloproof.render.doc import Column, Table, line

    if not runs:
        print_to(sys.stdout, "No runs stored yet.")
        return 0
    stopped = any(r.stop_reason for r in runs)
    columns = ["Run", "Started (UTC)", "State", "Gate", "Cases", "System"]
    store = locate(args.config)
    title = "Runs" if not isinstance(store, PostgresLocation) else (
        f"Runs of {store.project} in the team store {store.display}"  # never the password
    )
    table = Table(
        title=line(title),
        columns=tuple(Column(col, no_wrap=True)
                      for col in [*columns, *(["Stopped because"] if stopped else [])]),
    )
    for r in runs:
        gate = f"{r.gate} (exit {r.exit_code})" if r.gate else ""
        system = f"{r.system.get('name', '')} {r.system.get('version', '')}".strip()
        cells = [r.run_id, r.created_at[:19].replace("T", " "), r.state, gate, str(r.cases_total), system]
        table.add_row(*map(line, cells), *([line(r.stop_reason)] if stopped else []))
    print_to(sys.stdout, table)
    comparisons = list_comparisons(args.config, limit=args.limit)
    if comparisons:
        ctable = Table(
            title=line("Comparisons"),
            columns=tuple(Column(col, no_wrap=True) for col in (
                "Comparison", "Created (UTC)", "Candidate", "Baseline", "Gate")),
        )
        for c in comparisons:
            ctable.add_row(*map(line, (c.id, c.created_at[:19].replace("T", " "), c.candidate_run,
                           c.baseline_run, f"{c.gate} (exit {c.exit_code})")))
        print_to(sys.stdout, ctable)
    return 0
