"""``oloproof merge [PATH...]``: join the K shards of a suite (``oloproof run --shard I/K``)
into one run of the whole suite, decided as a single run is; the exit code is its gate's.

Parse, call :func:`oloproof.api._merge.merge_with_details`, render the run as ``gate``
does (tables or one JSON document), with a line naming the shards it was made of.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from oloproof.api._merge import merge_with_details
from oloproof.cli._common import project_root
from oloproof.render.console import print_to
from oloproof.render.out import write_text
from oloproof.render.tables import run_report
from oloproof.textsafe import dumps, printable

if TYPE_CHECKING:
    import argparse

__all__ = ["command"]


def command(args: argparse.Namespace) -> int:
    root = project_root(args.config)
    result, merged = merge_with_details(args.paths, args.config)
    made = (f"{'Already merged' if merged.existed else 'Merged'} from {len(merged.shards)}"
            f" shard{'' if len(merged.shards) == 1 else 's'}: "
            + ", ".join(f"{where} {run_id}" for where, run_id, _ in merged.shards)
            + (f"; {merged.copied} copied into this project's store" if merged.copied else ""))
    if args.json:
        doc = result.to_dict()
        keys = ("run_id", "status", "completeness", "gate", "exit_code", "decisions",
                "metrics", "judges", "panels")
        write_text(sys.stdout, dumps(
            {key: doc[key] for key in keys}
            | {"merged_from": [{"shard": where, "run_id": run_id, "source": source}
                               for where, run_id, source in merged.shards],
               "copied": merged.copied, "already_merged": merged.existed}
        ) + "\n")
        return result.exit_code
    del root
    print_to(
        sys.stdout,
        run_report(
            run_id=result.run_id, status=result.status, completeness=result.completeness,
            decisions=result.decisions, summaries=list(result.metrics.values()),
            cache=result.cache, gate=result.gate, exit_code=result.exit_code,
            policy_arg=None, config_arg=args.config,
            note=printable(made + (f"\nStopped: {result.stop_reason}" if result.stop_reason
                                   else "")),
            judges=result.judges,
        ),
    )
    return result.exit_code
