"""``oloproof compare CANDIDATE BASELINE``: two stored runs, paired by case id.

Parse, call :func:`oloproof.api.compare` (which pairs, decides and stores), render. The exit code is the gate's, as for runs (SPEC §5).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oloproof.analysis.compare import run_ref
from oloproof.api import compare
from oloproof.cli._common import project_root
from oloproof.render.compare import comparison_report
from oloproof.render.console import print_to
from oloproof.render.out import write_text
from oloproof.store.comparisons import get_comparison
from oloproof.textsafe import dumps, printable

if TYPE_CHECKING:
    import argparse

    from oloproof.store.dbapi import Connection

__all__ = ["command", "inspect_comparison"]


def command(args: argparse.Namespace) -> int:
    run_ref(args.candidate, "CANDIDATE")
    run_ref(args.baseline, "BASELINE")
    project_root(args.config)
    try:
        outcome = compare(args.candidate, args.baseline, project=args.config, policy=args.policy)
    except KeyboardInterrupt:
        # The comparison is stored in one transaction, its lock waited for in slices
        # (store.db begin_write): a Ctrl-C before it commits leaves nothing (exit 130).
        raise KeyboardInterrupt("no comparison was stored") from None
    if args.json:
        for warning in outcome.warnings:
            # A warning may quote a case id (a shared id whose input differs): shown, not
            # sent to the terminal, as the tables show it.
            sys.stderr.write(f"oloproof compare: warning: {printable(warning)}\n")
        write_text(sys.stdout, dumps(outcome.document) + "\n")
        return outcome.exit_code
    print_to(sys.stdout, comparison_report(outcome.document, config_arg=args.config))
    return outcome.exit_code


def inspect_comparison(conn: Connection, cmp_id: str, *, as_json: bool = False) -> int:
    """``oloproof inspect CMP_ID``: the comparison as it was stored."""
    record = get_comparison(conn, cmp_id)
    if as_json:
        write_text(sys.stdout, dumps(record.document) + "\n")
        return 0
    print_to(sys.stdout, comparison_report(record.document))
    return 0
