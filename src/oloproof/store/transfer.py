"""Copying a run from one store to another: what ``oloproof store push`` does, run by run.

:func:`copy_run` is a store-level operation on two connections of either backend (the
seam of store/dbapi.py), so that other ways of bringing runs together (merging shards)
can use it too. A run is copied whole, in one transaction of the destination: its row,
its cases and judgments (every trial), its decisions, its labels, subset and concurrency
history, and the cache entries its calls made, so that the destination's next run can
take them from the cache. What the destination already holds is never changed:

* a run whose id is already there is not copied again (nothing is written): pushing
  twice writes nothing new;
* a cache entry already there is kept (``ON CONFLICT DO NOTHING``): it is as good, and
  may be newer.

A run is copied as the source reads it: a ``RUNNING`` run whose process is gone is copied
as ``RUN_ERROR/PARTIAL`` with the reason; a run still running is not copied (push it
when it has ended). Its project is the destination's project key (store/location.py),
so that the project's ``runs`` lists it there.

A matrix (``run --matrix``, store/matrices.py) is copied by :func:`copy_matrix`: its
variants' runs first, each as above, then its row and document, under the destination's
project key, so that ``inspect``, ``plan``, ``report`` and ``view`` read it on the team
store as they did on the local one. Pushing it again writes nothing new.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oloproof.enums import RunStatus
from oloproof.store.db import begin_write, has_table
from oloproof.store.dbapi import is_sqlite
from oloproof.store.pgshared import check_keys
from oloproof.store.reader import RunRecord, get_run

if TYPE_CHECKING:
    from typing import Any

    from oloproof.store.dbapi import Connection

__all__ = ["COPIED", "PRESENT", "RUNNING", "copy_matrix", "copy_run", "matrix_ids", "run_ids"]

COPIED = "copied"
PRESENT = "already there"
RUNNING = "still running"

# The tables that hold a run's rows (keyed by run_id), in an order that suits foreign
# readers (the run's row first is written separately).
_RUN_TABLES = (
    "run_cases", "run_judgments", "decisions", "run_trials", "trial_cases", "trial_judgments",
    "run_subsets", "run_sequential", "run_labels", "run_concurrency", "run_merges",
    "run_sources",
)


def _rows(conn: Connection, sql: str, params: tuple[Any, ...]) -> tuple[list[str], list[Any]]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return names, [tuple(r) for r in cur.fetchall()]


def _insert(dst: Connection, table: str, names: list[str], rows: list[Any]) -> int:
    if not rows:
        return 0
    marks = ", ".join("?" * len(names))
    dst.executemany(
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks}) ON CONFLICT DO NOTHING", rows
    )
    return len(rows)


def _run_row(src: Connection, record: RunRecord, project: str | None) -> tuple[list[str], Any]:
    names, rows = _rows(src, "SELECT * FROM runs WHERE id = ?", (record.id,))
    row = dict(zip(names, rows[0], strict=True))
    # As the source reads it (a dead RUNNING run has ended), under the destination's key.
    row.update(
        status=str(record.status), completeness=str(record.completeness),
        exit_code=record.exit_code, gate=None if record.gate is None else str(record.gate),
        stop_reason=record.stop_reason,
    )
    if project is not None:
        row["project"] = project
    return list(row), tuple(row.values())


def _cache_keys(src: Connection, run_id: str) -> tuple[list[str], list[str]]:
    """The cache keys of the run's results (those it took from the cache too: the source
    holds their entries, and the destination's runs can use them)."""
    execs = [r[0] for r in src.execute(
        "SELECT exec_key FROM run_cases WHERE run_id = ? AND status = 'OK'",
        (run_id,),
    )]
    judges = [r[0] for r in src.execute(
        "SELECT judge_key FROM run_judgments WHERE run_id = ?"
        " AND status IN ('OK', 'EXCLUDED') AND judge_key <> ''",
        (run_id,),
    )]
    if has_table(src, "trial_cases"):
        execs += [r[0] for r in src.execute(
            "SELECT exec_key FROM trial_cases WHERE run_id = ? AND status = 'OK'",
            (run_id,),
        )]
        judges += [r[0] for r in src.execute(
            "SELECT judge_key FROM trial_judgments WHERE run_id = ?"
            " AND status IN ('OK', 'EXCLUDED') AND judge_key <> ''", (run_id,),
        )]
    return execs, judges


def _cache_rows(src: Connection, table: str, keys: list[str]) -> tuple[list[str], list[Any]]:
    names: list[str] = []
    rows: list[Any] = []
    for key in sorted(set(keys)):  # key order: two pushes at once never wait in a cycle
        found_names, found = _rows(src, f"SELECT * FROM {table} WHERE key = ?", (key,))
        names = names or found_names
        rows += found
    return names, rows


def _column(tables: list[tuple[str, list[str], list[Any]]], table: str, column: str) -> list[Any]:
    return [row[names.index(column)] for name, names, rows in tables if name == table
            for row in rows]


def _check_keys(dst: Connection, run_id: str, project: str,
                tables: list[tuple[str, list[str], list[Any]]]) -> None:
    """Refuse a run whose case ids or rule ids a team store cannot hold apart (two ids
    that differ only by a NUL and a U+FFFD, an id too long for its index:
    store/pgshared.py): ``ON CONFLICT DO NOTHING`` kept one case of two and said
    "copied"."""
    criteria = sorted({str(c) for c in (*_column(tables, "run_judgments", "criterion"),
                                        *_column(tables, "trial_judgments", "criterion"))})
    check_keys(
        dst.location, project=project,  # type: ignore[attr-defined]
        case_ids=[str(c) for c in _column(tables, "run_cases", "case_id")],
        criteria=criteria, rule_ids=[str(r) for r in _column(tables, "decisions", "rule_id")],
        refused=f"the run {run_id} was not pushed", instead="keep it on the SQLite store",
    )


def copy_run(src: Connection, dst: Connection, ref: str) -> tuple[str, str]:
    """Copy the run ``ref`` names in ``src`` (an id, a unique prefix, ``latest``) to ``dst``
    (migrated to this version's schema); ``(run id, what happened)``: :data:`COPIED`,
    :data:`PRESENT` (nothing written) or :data:`RUNNING` (not copied)."""
    record = get_run(src, ref)
    if record.status == RunStatus.RUNNING:
        return record.id, RUNNING
    if dst.execute("SELECT 1 FROM runs WHERE id = ?", (record.id,)).fetchone() is not None:
        return record.id, PRESENT
    run_names, run_row = _run_row(src, record, getattr(dst, "project", None))
    tables = [
        (table, *_rows(src, f"SELECT * FROM {table} WHERE run_id = ?", (record.id,)))
        for table in _RUN_TABLES if has_table(src, table)
    ]
    if not is_sqlite(dst):
        _check_keys(dst, record.id, run_row[run_names.index("project")], tables)
    execs, judges = _cache_keys(src, record.id)
    caches = [("exec_cache", *_cache_rows(src, "exec_cache", execs)),
              ("judge_cache", *_cache_rows(src, "judge_cache", judges))]
    begin_write(dst)
    try:
        # Another push of the same run may have won the race since the look above.
        if dst.execute("SELECT 1 FROM runs WHERE id = ?", (record.id,)).fetchone() is not None:
            dst.execute("ROLLBACK")
            return record.id, PRESENT
        _insert(dst, "runs", run_names, [run_row])
        for table, names, rows in (*tables, *caches):
            _insert(dst, table, names, rows)
        dst.execute("COMMIT")
    except BaseException:
        if dst.in_transaction:
            dst.execute("ROLLBACK")
        raise
    return record.id, COPIED


def run_ids(src: Connection) -> list[str]:
    """Every run of ``src``'s project, oldest first (the order they are pushed in)."""
    from oloproof.store.reader import project_scope

    where, scope = project_scope(src)
    return [str(r[0]) for r in src.execute(
        f"SELECT id FROM runs WHERE {where} ORDER BY created_at, id", scope
    ).fetchall()]


def copy_matrix(src: Connection, dst: Connection, ref: str) -> tuple[str, str, list[tuple[str, str]]]:
    """Copy the matrix ``ref`` names in ``src`` (``mx_…`` or ``latest``) to ``dst``, its
    variants' runs first (:func:`copy_run`); ``(matrix id, what happened, [(run id, what
    happened)])``. A matrix one of whose runs is still running is not copied (:data:`RUNNING`)."""
    import json

    from oloproof.store.matrices import get_matrix

    record = get_matrix(src, ref)
    runs = [copy_run(src, dst, str(v["run_id"])) for v in record.document.get("variants", [])]
    if any(what == RUNNING for _, what in runs):
        return record.id, RUNNING, runs
    project = getattr(dst, "project", None) or record.project
    begin_write(dst)
    try:
        if dst.execute("SELECT 1 FROM matrices WHERE id = ?", (record.id,)).fetchone():
            dst.execute("ROLLBACK")
            return record.id, PRESENT, runs
        dst.execute(
            "INSERT INTO matrices(id, project, created_at, baseline_run, document_json)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (record.id, project, record.created_at, record.baseline_run,
             json.dumps(record.document, separators=(",", ":"), ensure_ascii=False)),
        )
        dst.execute("COMMIT")
    except BaseException:
        if dst.in_transaction:
            dst.execute("ROLLBACK")
        raise
    return record.id, COPIED, runs


def matrix_ids(src: Connection) -> list[str]:
    """Every matrix of ``src``'s project, oldest first (the order they are pushed in)."""
    from oloproof.store.matrices import list_matrices

    return [m.id for m in reversed(list_matrices(src))]
