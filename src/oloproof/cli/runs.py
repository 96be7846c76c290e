"""``oloproof runs``: stored runs, newest first."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from oloproof.api import RunInfo, list_comparisons, list_runs
from oloproof.cli._common import project_root
from oloproof.textsafe import dumps


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
    # The tables (and rich, a third of this command's start-up) only when printing them.
    from rich.table import Table

    from oloproof.render.console import print_to, text
    from oloproof.render.fit import fit

    if not runs:
        print_to(sys.stdout, "No runs stored yet.")
        return 0
    table = Table(title=text("Runs"), title_justify="left")
    stopped = any(r.stop_reason for r in runs)
    columns = ["Run", "Started (UTC)", "State", "Gate", "Cases", "System"]
    for col in [*columns, *(["Stopped because"] if stopped else [])]:
        table.add_column(col, no_wrap=True)
    for r in runs:
        gate = f"{r.gate} (exit {r.exit_code})" if r.gate else ""
        system = f"{r.system.get('name', '')} {r.system.get('version', '')}".strip()
        cells = [r.run_id, r.created_at[:19].replace("T", " "), r.state, gate, str(r.cases_total), system]
        table.add_row(*map(text, cells), *([text(r.stop_reason)] if stopped else []))
    print_to(sys.stdout, fit(table))
    comparisons = list_comparisons(args.config, limit=args.limit)
    if comparisons:
        ctable = Table(title=text("Comparisons"), title_justify="left")
        for col in ("Comparison", "Created (UTC)", "Candidate", "Baseline", "Gate"):
            ctable.add_column(col, no_wrap=True)
        for c in comparisons:
            ctable.add_row(*map(text, (c.id, c.created_at[:19].replace("T", " "), c.candidate_run,
                           c.baseline_run, f"{c.gate} (exit {c.exit_code})")))
        print_to(sys.stdout, fit(ctable))
    return 0
