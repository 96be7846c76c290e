"""``oloproof gate``: re-decide a stored run under a policy, calling nothing.

Parse, call :func:`oloproof.api.read_run`, render (tables or JSON), then write the CI
outputs that were asked for (``--junit-xml``, ``--github-annotations``, the step summary).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oloproof.api import read_run
from oloproof.cli._ci import check_outputs, ci_run, wants_outputs, write_outputs
from oloproof.cli._common import project_root
from oloproof.render.console import print_to
from oloproof.render.out import write_text
from oloproof.render.tables import gate_note, result_report
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
        write_text(sys.stdout, dumps(
            {key: doc[key] for key in keys}
            | ({"subset": doc["subset"]} if result.subset is not None else {}),
        ) + "\n")
    else:
        note = gate_note(result, args.policy)
        print_to(sys.stdout, result_report(result, note, policy_arg=args.policy,
                                           config_arg=args.config))
    if not wants_outputs(args):
        return result.exit_code
    return write_outputs(ci_run(result), args, "gate")
