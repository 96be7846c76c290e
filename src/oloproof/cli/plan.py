"""``oloproof plan``: how many more cases would decide a rule left undecided (SPEC §7).

``oloproof plan RUN_ID --run`` sizes a run's rules, ``oloproof plan CMP_ID`` a comparison's;
``--assurance P`` adds, for rates (a run's or a comparison's), the size that decides with
probability P. Parse, call :func:`oloproof.api.plan`, render. Exit code: 0 when a plan was
printed, 2 for usage errors and for the refusal of a rule that cannot be sized when it is
all there is to say, 5 for a partial run or unreadable stored evidence.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from oloproof.analysis.plan import plan_exit_code
from oloproof.api import plan
from oloproof.cli._common import project_root
from oloproof.errors import UsageError
from oloproof.render.out import write_text
from oloproof.render.plan import plan_text
from oloproof.textsafe import dumps, printable

if TYPE_CHECKING:
    import argparse

__all__ = ["command"]


def printable_lines(text: str) -> str:
    """``text`` with nothing in it that acts on a terminal; its line breaks kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def _print(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        write_text(sys.stdout, dumps(doc) + "\n")
    else:
        write_text(sys.stdout, printable_lines(plan_text(doc)))  # rule ids are user text


def _assurance(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        p = float(value)
    except ValueError:
        p = math.nan
    if not 0.0 < p < 1.0:
        raise UsageError(
            f"--assurance: expected a probability strictly between 0 and 1 (for example 0.8),"
            f" got '{value}'"
        )
    return p


def command(args: argparse.Namespace) -> int:
    ref: str = args.ref
    assurance = _assurance(getattr(args, "assurance", None))
    if ref.startswith("cmp_"):
        if args.run:
            raise UsageError(f"'{ref}' is a comparison id: drop --run (oloproof plan {ref})")
        project_root(args.config)
        cmp_plan = plan(ref, project=args.config, policy=args.policy, assurance=assurance)
        _print(cmp_plan.to_json(), args.json)
        return plan_exit_code(cmp_plan.rules)
    if ref.startswith("mx_"):
        return _plan_matrix(args, ref)
    if ref.startswith("run_") or ref == "latest":
        if not args.run:
            raise UsageError(
                f"'{ref}' names a run: add --run to size its rules (oloproof plan {ref} --run)"
            )
        project_root(args.config)
        run_plan = plan(ref, project=args.config, policy=args.policy, assurance=assurance)
        _print(run_plan.to_json(), args.json)
        return plan_exit_code(run_plan.rules)
    raise UsageError(
        f"'{ref}' is neither a run id (run_…, with --run; or 'latest' --run), a comparison"
        " id (cmp_…) nor a matrix id (mx_…)"
    )


def _plan_matrix(args: argparse.Namespace, ref: str) -> int:
    """``plan MX_ID``: how many more cases would separate the top two variants."""
    from oloproof.analysis.matrix import plan_matrix, plan_text
    from oloproof.cli._common import read_project_store
    from oloproof.store.matrices import get_matrix

    if args.run:
        raise UsageError(f"'{ref}' is a matrix id: drop --run (oloproof plan {ref})")
    conn = read_project_store(args.config)
    try:
        doc = plan_matrix(conn, get_matrix(conn, ref).document)
    finally:
        conn.close()
    if args.json:
        write_text(sys.stdout, dumps(doc) + "\n")
    else:
        write_text(sys.stdout, printable_lines(plan_text(doc)))
    return 0
