"""``oloproof gate``: re-decide a stored run under a policy, calling nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from oloproof.analysis.stored import STORED, decide_stored, judge_reports, stored_policy
from oloproof.cli._ci import check_outputs, write_outputs
from oloproof.cli._common import read_project_store
from oloproof.enums import Completeness
from oloproof.policy.decide import Decision, gate
from oloproof.project import load_release_policy
from oloproof.project.labels import load_labels
from oloproof.project.loader import NO_RULES_NOTE
from oloproof.render.ci import CiRun
from oloproof.render.console import print_to
from oloproof.render.tables import panel_lines, run_report
from oloproof.store.reader import RunRecord, get_run, panel_splits
from oloproof.textsafe import dumps


def command(args: argparse.Namespace) -> int:
    check_outputs(args)
    conn = read_project_store(args.config)
    run = get_run(conn, args.run_id)
    metrics = {m["criterion"]: m["kind"] for m in run.metrics}
    if args.policy:
        policy = load_release_policy(args.policy, metrics)
    else:
        policy = stored_policy(run)
    labels: Any = STORED
    if args.labels:
        judges = [m["criterion"] for m in run.metrics if m.get("judge")]
        labels = load_labels(Path(args.labels), args.labels, judges)
    incomplete = run.completeness != Completeness.COMPLETE
    decisions, summaries = decide_stored(conn, run.id, policy, labels)
    reports = judge_reports(conn, run.id, float(policy.confidence_level), labels)
    if incomplete:
        decisions = []
    label, code = gate(decisions, incomplete=incomplete)
    if args.json:
        sys.stdout.write(
            dumps(
                {
                    "run_id": run.id, "status": run.status, "completeness": run.completeness,
                    "gate": label, "exit_code": code,
                    "decisions": [d.to_json() for d in decisions],
                    "metrics": [s.to_json() for s in summaries.values()],
                    "judges": [r.to_json() for r in reports],
                    "panels": {c: {"split": sp, "judged": n} for c, (sp, n) in panel_splits(conn, run.id).items()},
                },
            )
            + "\n"
        )
    else:
        print_to(
            sys.stdout,
            run_report(
                run_id=run.id, status=run.status, completeness=run.completeness,
                decisions=decisions, summaries=list(summaries.values()), cache=run.cache,
                gate=label, exit_code=code, policy_arg=args.policy, config_arg=args.config,
                note=_note(run, decisions, args.policy, panel_lines(panel_splits(conn, run.id))),
                judges=reports,
            )
        )
    ci_run = CiRun(
        run_id=run.id, project=run.project, status=run.status, completeness=run.completeness,
        gate=label, exit_code=code, decisions=decisions, summaries=list(summaries.values()),
        rule_ids=[r.id for r in policy.rules], stop_reason=run.stop_reason,
    )
    return write_outputs(ci_run, args, "gate")


def _note(run: RunRecord, decisions: list[Decision], policy_arg: str | None,
          panels: list[str] | None = None) -> str | None:
    if panels:
        rest = _note(run, decisions, policy_arg)
        return "\n".join([*panels, *([rest] if rest else [])])
    if run.stop_reason:
        return f"Stopped: {run.stop_reason}"
    if not decisions and policy_arg is None and run.policy_path is None:
        # A run is stored without a policy file only when its project says `policy: none`.
        return NO_RULES_NOTE
    return None
