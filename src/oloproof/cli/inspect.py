"""``oloproof inspect``: a stored run, one of its cases, its failures, its judges or its
flaky cases. Parse, read (``analysis/``), print (``render/inspect.py``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oloproof.analysis.cases import case_json, failure_rows, failures, run_json, trial_json
from oloproof.analysis.stored import (
    decide_stored,
    judge_reports,
    sequential_reading,
    stored_gate_notes,
    stored_labels,
    stored_policy,
)
from oloproof.cli._common import project_root, read_project_store
from oloproof.errors import UsageError
from oloproof.policy.decide import Decision
from oloproof.render.console import print_to
from oloproof.render.inspect import case_view, failures_table, flaky_view, run_view
from oloproof.render.out import write_text
from oloproof.render.tables import judge_tables
from oloproof.store.db import StoreUnreadable, has_table
from oloproof.store.reader import (
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

    from oloproof.store.dbapi import Connection
    from oloproof.store.reader import RunRecord


def _json(doc: Any) -> int:
    write_text(sys.stdout, dumps(doc) + "\n")
    return 0


def _case(conn: Connection, run: RunRecord, case_id: str, as_json: bool) -> int:
    cases = load_cases(conn, run.id, case_id)
    if not cases:
        raise UsageError(f"run {run.id} has no case '{case_id}'")
    c = cases[0]
    others = load_trial_cases(conn, run.id, c.case_id).get(c.case_id, [])
    if not as_json:
        print_to(sys.stdout, case_view(run, c, others))
        return 0
    doc = case_json(c)
    if run.trials > 1:
        doc["trial"] = 0
        doc["trials"] = [trial_json(t) for t in others]
    return _json(doc)


def _judges(conn: Connection, run: RunRecord, root: str, as_json: bool) -> int:
    reports = judge_reports(conn, run.id, float(stored_policy(run, root).confidence_level))
    if as_json:
        panels = panels_json(panel_splits(conn, run.id))
        return _json({"run_id": run.id, "judges": [r.to_json() for r in reports],
                      "panels": panels})
    if not reports:
        print_to(sys.stdout, f"Run {run.id} has no human labels on a judge's criterion"
                             " (human_labels in oloproof.yaml).")
    for shown in judge_tables(reports):
        print_to(sys.stdout, shown)
    return 0


def _flaky(conn: Connection, run: RunRecord, cases: int, as_json: bool) -> int:
    from oloproof.analysis.trials import flaky_cases, flaky_json

    flaky = flaky_cases(conn, run)
    if as_json:
        return _json(flaky_json(run, flaky, cases))
    print_to(sys.stdout, flaky_view(run, flaky, cases))
    return 0


def command(args: argparse.Namespace) -> int:
    conn = read_project_store(args.config)
    if args.run_id.startswith("cmp_"):
        from oloproof.cli.compare import inspect_comparison

        if not has_table(conn, "comparisons"):  # a store older than comparisons, read as it is
            raise UsageError(f"no comparison '{args.run_id}' in this project's store")
        return inspect_comparison(conn, args.run_id, as_json=args.json)
    if args.run_id.startswith("mx_"):
        from oloproof.render.matrix import matrix_report
        from oloproof.store.matrices import get_matrix

        doc = get_matrix(conn, args.run_id).document
        if args.json:
            return _json(doc)
        print_to(sys.stdout, matrix_report(doc, config_arg=args.config))
        return 0
    run = get_run(conn, args.run_id)
    if args.case is not None:
        return _case(conn, run, args.case, args.json)
    if args.judges:
        return _judges(conn, run, project_root(args.config), args.json)
    cases = load_cases(conn, run.id)
    if getattr(args, "flaky", False):
        return _flaky(conn, run, len(cases), args.json)
    if args.failures:
        failed = failures(cases)
        if args.json:
            return _json([case_json(c) for c in failed])
        print_to(sys.stdout, failures_table(run.id, failure_rows(failed), len(failed), len(cases)))
        return 0
    decisions = load_decisions(conn, run.id)
    root = project_root(args.config)
    policy = stored_policy(run, root)
    _, summaries = decide_stored(conn, run.id, policy)  # metrics at the run's own level
    sequential = sequential_reading(conn, run.id, policy)
    try:
        shown = [Decision(**d) for d in decisions]
    except TypeError as exc:
        raise StoreUnreadable(f"run {run.id}: its stored decisions are damaged ({exc})") from exc
    # What `gate` says beside the same verdict: incomplete evidence, a shard, patched code,
    # the policy, labels, suite or code changed since the run.
    notes = stored_gate_notes(run, policy, stored_labels(conn, run), shown, root, args.config)
    if args.json:
        judges = judge_reports(conn, run.id, float(policy.confidence_level))
        doc = run_json(run, cases, decisions, list(summaries.values()), judges)
        doc["gate_notes"] = notes
        if sequential is not None:
            doc["sequential"] = sequential[0]
        return _json(doc)
    print_to(sys.stdout, run_view(run, cases, shown, list(summaries.values()),
                                  sequential[1] if sequential is not None else None, notes))
    return 0
