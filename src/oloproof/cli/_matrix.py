"""``oloproof run --matrix``: every variant of the project as its own run, then the matrix
that compares them with the baseline variant (api/_matrix.py, docs/compare-a-change.md).

Imported by cli/run.py only for ``--matrix``; it stops and streams events as a run does.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from oloproof.cli import _process
from oloproof.cli._ci import check_outputs, ci_run, wants_outputs, write_matrix_outputs
from oloproof.cli.run import hard_stop, stop_and_sinks
from oloproof.render.console import print_to

if TYPE_CHECKING:
    import argparse
    from typing import IO

    from oloproof.api import PreparedRun


def matrix_command(args: argparse.Namespace, events_out: IO[str]) -> int:
    """``run --matrix``: every variant as its own run, then the matrix (api/_matrix.py)."""
    from oloproof.api._matrix import load_matrix, run_matrix
    from oloproof.errors import UsageError
    from oloproof.render.matrix import matrix_report

    if args.shard or args.sample:
        raise UsageError("--matrix runs every variant on the same cases: it cannot be combined"
                         " with --shard or --sample")
    check_outputs(args)  # a --junit-xml that cannot be written is refused before anything runs
    started = time.monotonic()
    loaded, baseline = load_matrix(
        args.config, policy=args.policy, group_by=args.group_by, trials=args.trials,
        limit=args.limit, cases=args.case, where=args.where, variants=args.variant,
        sequential=args.sequential, executor=args.executor, ray_address=args.ray_address,
    )
    table_stream = sys.stderr if args.json else sys.stdout
    stop, sinks, writer = stop_and_sinks(args.json, events_out)
    total = len(loaded)
    count = [0]

    def on_variant(run: PreparedRun) -> None:
        count[0] += 1
        sys.stderr.write(f"oloproof run --matrix: variant {count[0]}/{total}:"
                         f" {run.prepared.variant} ({run.cases_total} cases)\n")
        sys.stderr.flush()

    stop.on_second = hard_stop(stop)
    with stop.signals(keep_after_stop=True):
        try:
            result = run_matrix(loaded, baseline, use_cache=not args.no_cache, sinks=sinks,
                                stop=stop, on_variant=on_variant)
        finally:
            if writer is not None:
                writer.flush()
        print_to(table_stream, matrix_report(result.document, config_arg=args.config))
        exit_code = result.exit_code
        if wants_outputs(args):
            exit_code = write_matrix_outputs(
                [(v.name, ci_run(v.result)) for v in result.variants],
                result.document, args, time.monotonic() - started,
            )
    if _process.OURS and (stop.count or _process.threads_left()):
        _process.exit_now(exit_code)
    return exit_code
