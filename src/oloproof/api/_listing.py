"""Where a project is, and its stored runs and comparisons, listed.

Kept apart from reading and deciding a run (``_stored``) and from running one
(``_run``): ``oloproof runs`` needs only this, the store and nothing of the
configuration's models or the statistics.
"""

from __future__ import annotations

import os

from oloproof.api._args import count, path
from oloproof.api._results import RunInfo
from oloproof.errors import UsageError
from oloproof.store.db import has_table, open_store_readonly
from oloproof.store.location import locate
from oloproof.store.reader import ConcurrencyChange, get_run, load_concurrency
from oloproof.store.reader import list_runs as _list_runs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from oloproof.store.comparisons import ComparisonRecord
    from oloproof.store.dbapi import Connection

PathLike = str | os.PathLike[str]


def config_file(project: str | os.PathLike[str]) -> str:
    """``project`` as the path of its oloproof.yaml: a directory, or the file itself."""
    path = os.fspath(project)
    if os.path.isdir(path):
        inside = os.path.join(path, "oloproof.yaml")
        if not os.path.exists(inside) and path.rstrip("/\\").endswith((".yaml", ".yml")):
            from oloproof._fs import absent  # only on the way to an error

            if absent(inside):
                # A folder where the project file was meant to be (`mkdir oloproof.yaml`):
                # "oloproof.yaml/oloproof.yaml: no such file" named a path nobody typed.
                raise UsageError(f"{path}: is a directory, expected the project's file")
        path = inside

    if not os.path.exists(path):
        # Not there, or behind a folder that may not be searched (then reading it says so).
        from oloproof._fs import absent, missing  # only on the way to an error

        if absent(path):
            raise UsageError(
                f"{path}: {missing(path, 'no such file')}; pass a project directory or its"
                " oloproof.yaml (`oloproof init` creates a project)"
            )
    return path


def _read(project: PathLike) -> Connection:
    conn: Connection = open_store_readonly(locate(config_file(project)))
    return conn


def list_runs(project: PathLike = ".", *, limit: int | None = None) -> list[RunInfo]:
    """The project's stored runs, newest first (at most ``limit``)."""
    path(project, "project", "list_runs")
    limit = count(limit, "limit", "list_runs")
    conn = _read(project)
    try:
        return [RunInfo.from_record(r) for r in _list_runs(conn, limit=limit)]
    finally:
        conn.close()


def list_comparisons(project: PathLike = ".", *, limit: int | None = None) -> list[ComparisonRecord]:
    """The project's stored comparisons, newest first (at most ``limit``)."""
    from oloproof.store.comparisons import list_comparisons as _list_comparisons

    path(project, "project", "list_comparisons")
    limit = count(limit, "limit", "list_comparisons")
    conn = _read(project)
    try:
        # A store read as it is (never migrated by a reader) may predate comparisons.
        if not has_table(conn, "comparisons"):
            return []
        return _list_comparisons(conn, limit=limit)
    finally:
        conn.close()


def concurrency_history(
    run_id: str = "latest", project: PathLike = "."
) -> list[ConcurrencyChange]:
    """Every move of a stored run's adaptive limits (``concurrency.adaptive``), in order:
    the starting limit first (``reason`` ``start``, ``previous`` None), then each
    ``rate_limited`` decrease and ``clean_window`` increase. Empty for a run without
    adaptive concurrency."""
    path(project, "project", "concurrency_history")
    conn = _read(project)
    try:
        return load_concurrency(conn, get_run(conn, run_id).id)
    finally:
        conn.close()
