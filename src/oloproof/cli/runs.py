"""``oloproof runs``: stored runs, newest first."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oloproof.api import RunInfo, list_comparisons, list_runs
from oloproof.cli._common import project_root
from oloproof.render.out import write_text
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
        "exit_code": r.exit_code, "cases": r.cases_total, "cases_stored": r.cases_stored,
        "system": r.system, "suite_digest": r.suite_digest,
        "stop_reason": r.stop_reason,
    }


def command(args: argparse.Namespace) -> int:
    project_root(args.config)
    runs = list_runs(args.config, limit=args.limit)
    if args.json:
        write_text(sys.stdout, dumps([run_json(r) for r in runs]) + "\n")
        return 0
    # The tables only when printing them; outside a terminal they are written without rich.
    from oloproof.render.console import print_to
    from oloproof.render.runs import comparisons_table, runs_table

    if not runs:
        print_to(sys.stdout, "No runs stored yet.")
        return 0
    store = locate(args.config)
    title = "Runs" if not isinstance(store, PostgresLocation) else (
        f"Runs of {store.project} in the team store {store.display}"  # never the password
    )
    print_to(sys.stdout, runs_table(runs, title=title))
    comparisons = list_comparisons(args.config, limit=args.limit)
    if comparisons:
        print_to(sys.stdout, comparisons_table(comparisons))
    return 0
