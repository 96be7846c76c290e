"""``oloproof runs``: stored runs, newest first."""

from __future__ import annotations

import argparse
import json
import sys

from rich.table import Table

from oloproof.cli._common import open_project_store
from oloproof.render.console import print_to
from oloproof.store.comparisons import list_comparisons
from oloproof.store.reader import list_runs


def command(args: argparse.Namespace) -> int:
    conn = open_project_store(args.config)
    runs = list_runs(conn, limit=args.limit)
    if args.json:
        sys.stdout.write(
            json.dumps(
                [
                    {
                        "id": r.id, "created_at": r.created_at, "finished_at": r.finished_at,
                        "status": r.status, "completeness": r.completeness, "gate": r.gate,
                        "exit_code": r.exit_code, "cases": r.cases_total,
                        "system": r.system, "suite_digest": r.suite_digest,
                        "stop_reason": r.stop_reason,
                    }
                    for r in runs
                ],
                indent=2,
            )
            + "\n"
        )
        return 0
    if not runs:
        print_to(sys.stdout, "No runs stored yet.")
        return 0
    table = Table(title="Runs", title_justify="left")
    stopped = any(r.stop_reason for r in runs)
    columns = ["Run", "Started (UTC)", "State", "Gate", "Cases", "System"]
    for col in [*columns, *(["Stopped because"] if stopped else [])]:
        table.add_column(col, no_wrap=True)
    for r in runs:
        gate = f"{r.gate} (exit {r.exit_code})" if r.gate else ""
        system = f"{r.system.get('name', '')} {r.system.get('version', '')}".strip()
        cells = [r.id, r.created_at[:19].replace("T", " "), r.state, gate, str(r.cases_total), system]
        table.add_row(*cells, *([r.stop_reason or ""] if stopped else []))
    print_to(sys.stdout, table)
    comparisons = list_comparisons(conn, limit=args.limit)
    if comparisons:
        ctable = Table(title="Comparisons", title_justify="left")
        for col in ("Comparison", "Created (UTC)", "Candidate", "Baseline", "Gate"):
            ctable.add_column(col, no_wrap=True)
        for c in comparisons:
            ctable.add_row(c.id, c.created_at[:19].replace("T", " "), c.candidate_run,
                           c.baseline_run, f"{c.gate} (exit {c.exit_code})")
        print_to(sys.stdout, ctable)
    return 0
