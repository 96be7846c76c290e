"""``oloproof gate``: re-decide a stored run under a policy, calling nothing.

Parse, call :func:`oloproof.api.read_run`, render.
"""

from __future__ import annotations

import argparse
import sys

from oloproof.api import RunResult, read_run
from oloproof.cli._common import project_root
from oloproof.project.loader import NO_RULES_NOTE
from oloproof.render.console import print_to
from oloproof.render.tables import run_report
from oloproof.textsafe import dumps


def command(args: argparse.Namespace) -> int:
    project_root(args.config)
    result = read_run(args.run_id, args.config, policy=args.policy, group_by=args.group_by)
    if args.json:
        doc = result.to_dict()
        sys.stdout.write(
            dumps(
                {
                    key: doc[key] for key in (
                        "run_id", "status", "completeness", "gate", "exit_code", "decisions",
                        "metrics",
                    )
                } | ({"subset": doc["subset"]} if result.subset is not None else {}),
            )
            + "\n"
        )
        return result.exit_code
    print_to(
        sys.stdout,
        run_report(
            run_id=result.run_id, status=result.status, completeness=result.completeness,
            decisions=result.decisions, summaries=list(result.metrics.values()),
            cache=result.cache, gate=result.gate, exit_code=result.exit_code,
            policy_arg=args.policy, config_arg=args.config, note=_note(result, args.policy),
        )
    )
    return result.exit_code


def _note(result: RunResult, policy_arg: str | None) -> str | None:
    if result.stop_reason:
        return f"Stopped: {result.stop_reason}"
    if result.subset is not None:
        return (
            f"Subset: {result.subset.describe()}; decided on these cases only, it never"
            " allows a release."
        )
    if not result.decisions and policy_arg is None and result.policy_path is None:
        # A run is stored without a policy file only when its project says `policy: none`.
        return NO_RULES_NOTE
    return None
