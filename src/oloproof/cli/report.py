"""``oloproof report RUN|CMP_ID``: one self-contained HTML file of a stored run or comparison.

Reads the store (read-only), builds the document (:mod:`oloproof.analysis.report`), draws it
with the templates the viewer uses (:mod:`oloproof.render.html`) and writes one file: inline
CSS and script, no request to anything, readable offline and attachable to a CI job.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.analysis.report import comparison_report_document, run_document
from oloproof.cli._common import read_project_store
from oloproof.errors import UsageError
from oloproof.render.html import render_comparison, render_run
from oloproof.store.db import has_table
from oloproof.textsafe import printable

if TYPE_CHECKING:
    import argparse

__all__ = ["command", "write_report"]


def write_report(path: Path, html: str) -> None:
    """Write ``html`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".oloproof-report-", suffix=".html", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(html)
        # mkstemp makes the file private; a report is an ordinary file (the umask decides).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def command(args: argparse.Namespace) -> int:
    conn = read_project_store(args.config)
    try:
        if args.ref.startswith("cmp_"):
            if not has_table(conn, "comparisons"):
                raise UsageError(f"no comparison '{args.ref}' in this project's store")
            doc = comparison_report_document(conn, args.ref)
            ident = doc["comparison"]["comparison_id"]
            html = render_comparison(doc)
        else:
            doc = run_document(conn, args.ref)
            ident = doc["run"]["id"]
            html = render_run(doc)
    finally:
        conn.close()
    path = Path(args.output) if args.output else Path(f"oloproof-report-{ident}.html")
    try:
        write_report(path, html)
    except OSError as exc:
        raise UsageError(f"{args.output or path}: cannot write the report ({exc.strerror or exc})") from None
    sys.stdout.write(f"Report written to {printable(str(path))}\n")
    return 0
