"""``oloproof gate``: re-decide a stored run under a policy, calling nothing.

Parse, call :func:`oloproof.api.read_run`, render (tables or JSON), then write the CI
outputs that were asked for (``--junit-xml``, ``--github-annotations``, the step summary).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oloproof.api import RunResult, read_run
from oloproof.cli._ci import check_outputs, wants_outputs, write_outputs
from oloproof.cli._common import project_root
from oloproof.project._project import NO_RULES_NOTE
from oloproof.render.console import print_to
from oloproof.render.tables import panel_lines, run_report
from oloproof.textsafe import dumps

if TYPE_CHECKING:
    import argparse


def command(args: argparse.Namespace) -> int:
    check_outputs(args)
    project_root(args.config)
    result = read_run(
        args.run_id, args.config, policy=args.policy, group_by=args.group_by,
        labels=args.labels,
    )
    if args.json:
        doc = result.to_dict()
        keys = ("run_id", "status", "completeness", "gate", "exit_code", "decisions",
                "metrics", "judges", "panels", "gate_notes", "declaration",
                *(("sequential",) if result.sequential is not None else ()))
        sys.stdout.write(
            dumps(
                {key: doc[key] for key in keys}
                | ({"subset": doc["subset"]} if result.subset is not None else {}),
            )
            + "\n"
        )
    else:
        print_to(
            sys.stdout,
            run_report(
                run_id=result.run_id, status=result.status, completeness=result.completeness,
                decisions=result.decisions, summaries=list(result.metrics.values()),
                cache=result.cache, gate=result.gate, exit_code=result.exit_code,
                policy_arg=args.policy, config_arg=args.config, note=_note(result, args.policy),
                judges=result.judges, declaration=result.declaration,
            ),
        )
    if not wants_outputs(args):
        return result.exit_code
    from oloproof.render.ci import CiRun

    ci_run = CiRun(
        run_id=result.run_id, project=result.project, status=result.status,
        completeness=result.completeness, gate=result.gate, exit_code=result.exit_code,
        decisions=result.decisions, summaries=list(result.metrics.values()),
        rule_ids=result.rule_ids, stop_reason=result.stop_reason,
    )
    return write_outputs(ci_run, args, "gate")


def _note(result: RunResult, policy_arg: str | None) -> str | None:
    lines = panel_lines(result.panels)
    if result.sequential_note:
        lines.append(result.sequential_note)
    if result.stop_reason:
        lines.append(f"Stopped: {result.stop_reason}")
    elif result.subset is not None:
        lines.append(
            f"Subset: {result.subset.describe()}; decided on these cases only, it never"
            " allows a release."
        )
    elif not result.decisions and policy_arg is None and result.policy_path is None:
        # A run is stored without a policy file only when its project says `policy: none`.
        lines.append(NO_RULES_NOTE)
    lines.extend(result.gate_notes)
    return "\n".join(lines) or None
