"""``oloproof report RUN|CMP_ID``: one self-contained HTML file of a stored run or comparison.

Reads the store (read-only), builds the document (:mod:`oloproof.analysis.report`), draws it
with the templates the viewer uses (:mod:`oloproof.render.html`) and writes one file: inline
CSS and script, no request to anything, readable offline and attachable to a CI job.

Where it goes (``--output``): ``-`` is standard output. A path that exists and is not a
regular file (a terminal, a pipe, ``/dev/stdout``) is written into, never replaced by a
file, and nothing else is printed (it may be our own standard output); a symbolic link is
followed and its target is replaced, the link kept. Otherwise
the file is written whole or not at all (a temporary file beside it, then a rename). It
is readable by no more people than the store it was drawn from: its mode is the store's
(owner-only, 0600, as the store is made) within the umask.

The file carries at most ``--cases`` cases (1,000 by default; ``all`` for every one), the
failed and missing ones first, and says what it left out and how to see it.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from oloproof.analysis.report import comparison_report_document, run_document
from oloproof.cli._common import project_root, read_project_store, refuse_store_folder
from oloproof.errors import UsageError
from oloproof.render.html import READ_CHARS, render_comparison, render_run
from oloproof.render.out import write_text
from oloproof.store.db import has_table
from oloproof.store.location import PostgresLocation, StoreLocation, locate
from oloproof.textsafe import printable

if TYPE_CHECKING:
    import argparse

__all__ = ["command", "report_mode", "write_report"]

#: The mode of a report when the store's cannot be read: the store's own, as it is made.
PRIVATE = 0o600


def report_mode(store: StoreLocation) -> int:
    """The mode of a new report file: the store's read and write bits (never more), within
    the umask. A store made by Oloproof is 0600, so its report is too; a team store (no
    file of ours to follow) gives 0600."""
    umask = os.umask(0)
    os.umask(umask)
    try:
        if isinstance(store, PostgresLocation):
            raise FileNotFoundError(store)
        bits = stat.S_IMODE(os.stat(store).st_mode) & 0o666
    except OSError:
        bits = PRIVATE
    return bits & ~umask & 0o666 | stat.S_IRUSR | stat.S_IWUSR


def _replace(path: Path, data: bytes, mode: int) -> None:
    """``path`` replaced whole by ``data`` (a temporary file in its directory, then a
    rename), with ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".oloproof-report-", suffix=".html", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_report(path: Path, html: str, *, mode: int = PRIVATE) -> bool:
    """Write ``html`` to ``path`` (see the module's docstring for where it goes); True when
    ``path`` was a stream (a pipe, a terminal, a device) written into."""
    data = html.encode("utf-8")
    try:
        info = os.stat(path)  # follows a link
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(21, "Is a directory")
    if info is not None and not stat.S_ISREG(info.st_mode):
        # A terminal, a pipe, a device: written into, as `cat > /dev/stdout` would.
        with open(path, "wb") as fh:
            fh.write(data)
        return True
    if path.is_symlink():
        # Replace what the link points to, not the link.
        _replace(Path(os.path.realpath(path)), data, mode)
        return False
    _replace(path, data, mode)
    return False


def command(args: argparse.Namespace) -> int:
    if args.output and args.output != "-":
        refuse_store_folder("--output", args.output, args.config, "report.html")
    conn = read_project_store(args.config)
    limit = getattr(args, "cases", 1000)
    root = project_root(args.config)
    try:
        if args.ref.startswith("mx_"):
            from oloproof.render.html import render_matrix
            from oloproof.store.matrices import get_matrix

            matrix = get_matrix(conn, args.ref).document
            ident = str(matrix["matrix_id"])
            html = render_matrix(matrix)
        elif args.ref.startswith("cmp_"):
            if not has_table(conn, "comparisons"):
                raise UsageError(f"no comparison '{args.ref}' in this project's store")
            doc = comparison_report_document(conn, args.ref, limit=limit)
            ident = doc["comparison"]["comparison_id"]
            html = render_comparison(doc, project_root=root)
        else:
            doc = run_document(conn, args.ref, limit=limit, root=root, head=READ_CHARS,
                               config=args.config)
            ident = doc["run"]["id"]
            html = render_run(doc, project_root=root)
    finally:
        conn.close()
    if args.output == "-":
        try:
            sys.stdout.flush()
            sys.stdout.buffer.write(html.encode("utf-8"))
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise  # its reader went away (| head): as every command
        except OSError as exc:  # a full disk: the report was asked for and is not there
            raise UsageError(f"-: cannot write the report ({exc.strerror or exc})") from None
        return 0
    path = Path(args.output) if args.output else Path(f"oloproof-report-{ident}.html")
    try:
        stream = write_report(path, html, mode=report_mode(locate(args.config)))
    except OSError as exc:
        raise UsageError(
            f"{printable(args.output or str(path))}: cannot write the report"
            f" ({exc.strerror or exc})"
        ) from None
    if not stream:  # written into a pipe or a device (maybe our own stdout): say nothing
        write_text(sys.stdout, f"Report written to {printable(str(path))}\n")
    return 0
