"""``oloproof store push [RUN...]``: copy runs of the project's local store (``.oloproof/``)
to its team store (``store:`` in oloproof.yaml, or ``OLOPROOF_STORE``).

Each run is copied whole, in one transaction, or not at all (store/transfer.py); a run the
team store already holds is left as it is, so pushing again writes nothing new. Without
``RUN``, every run of the local store is pushed, oldest first, then every matrix. A matrix
id (``mx_…``) pushes the matrix: its variants' runs, then its document.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from oloproof.cli._common import project_root
from oloproof.enums import ExitCode
from oloproof.errors import UsageError
from oloproof.render.out import write_text
from oloproof.store.db import open_store, open_store_readonly
from oloproof.store.location import PostgresLocation, locate, store_path
from oloproof.textsafe import dumps, printable

if TYPE_CHECKING:
    import argparse

__all__ = ["command"]


def command(args: argparse.Namespace) -> int:
    from oloproof.store.transfer import (
        COPIED,
        PRESENT,
        RUNNING,
        copy_matrix,
        copy_run,
        matrix_ids,
        run_ids,
    )

    root = project_root(args.config)
    team = locate(args.config)
    if not isinstance(team, PostgresLocation):
        raise UsageError(
            "store push copies runs to a team store, and this project has none: set"
            " store: postgresql://... in oloproof.yaml, or OLOPROOF_STORE (docs/team-store.md)"
        )
    local = store_path(root)
    if not os.path.exists(local):
        raise UsageError(f"no local store at {local}: nothing to push")
    src = open_store_readonly(local)
    try:
        refs = list(args.runs)
        matrices = [r for r in refs if r.startswith("mx_")]
        if not refs:
            refs, matrices = run_ids(src), matrix_ids(src)
        done: list[tuple[str, str]] = []
        pushed: list[tuple[str, str]] = []
        dst = open_store(team)
        try:
            for ref in refs:
                if not ref.startswith("mx_"):
                    done.append(copy_run(src, dst, ref))
            for ref in matrices:
                matrix_id, what, runs = copy_matrix(src, dst, ref)
                done += [r for r in runs if r[0] not in {d[0] for d in done}]
                pushed.append((matrix_id, what))
        except KeyboardInterrupt:
            # Each run is copied in one transaction: those before are there, whole, and
            # the one on its way is not. Said, so that nobody reads 130 as "nothing".
            copied = sum(1 for _, what in done if what == COPIED)
            raise KeyboardInterrupt(
                f"{copied} run{'' if copied == 1 else 's'} pushed before it, each whole;"
                " the run being copied and those after it were not (push again to copy them)"
            ) from None
        finally:
            dst.close()
    finally:
        src.close()
    copied = sum(1 for _, what in done if what == COPIED)
    present = sum(1 for _, what in done if what == PRESENT)
    mx_copied = sum(1 for _, what in pushed if what == COPIED)
    # A run named on the command line and still running was not pushed: a script that
    # asked for it must not read the push as done (exit 5). Without RUN, pushing what
    # has finished is the whole request.
    held = [ref for ref, what in (*done, *pushed) if what == RUNNING] if args.runs else []
    code = int(ExitCode.INCOMPLETE) if held else 0
    if held:
        sys.stderr.write(printable(
            f"oloproof store push: not pushed, still running: {', '.join(held)}; push"
            " again once it has finished (exit 5)") + "\n")
    if args.json:
        write_text(sys.stdout, dumps({
            "store": team.display, "project": team.project,
            "runs": [{"id": run_id, "result": what} for run_id, what in done],
            "copied": copied, "already_there": present,
            "matrices": [{"id": mx, "result": what} for mx, what in pushed],
            "matrices_copied": mx_copied,
        }) + "\n")
        return code
    for run_id, what in (*done, *pushed):
        write_text(sys.stdout, f"{run_id}  {what}\n")
    matrices_said = (f" and {mx_copied} matri{'x' if mx_copied == 1 else 'ces'}"
                     if pushed else "")
    mx_present = sum(1 for _, what in pushed if what == PRESENT)
    there = f"{present} already there"
    if mx_present:
        there = (f"{present} run{'' if present == 1 else 's'} and {mx_present}"
                 f" matri{'x' if mx_present == 1 else 'ces'} already there")
    write_text(sys.stdout, printable(
        f"Pushed {copied} run{'' if copied == 1 else 's'}{matrices_said} of project"
        f" {team.project!r} to {team.display}"
        + (f" ({there})" if present or mx_present else "") + "\n"
    ))
    return code
