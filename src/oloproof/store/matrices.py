"""Matrices in the store: written once by ``run --matrix``, read by ``inspect``, ``plan``,
the report and the viewer.

Each variant of a matrix is a run of its own (its rows, its decisions); a matrix row keeps
the variants' run ids and the document the matrix concluded from them (the table, the
comparisons against the baseline under Holm), which ``plan`` and the pages read again.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from oloproof._json import loads_bounded
from oloproof._records import dataclass
from oloproof.errors import UsageError
from oloproof.store.db import StoreUnreadable, begin_write, has_table
from oloproof.store.reader import project_scope

if TYPE_CHECKING:
    from typing import Any

    from oloproof.store.dbapi import Connection

__all__ = ["MatrixRecord", "get_matrix", "list_matrices", "write_matrix"]


@dataclass
class MatrixRecord:
    id: str
    project: str
    created_at: str
    baseline_run: str | None
    document: dict[str, Any]


def write_matrix(conn: Connection, document: dict[str, Any]) -> None:
    """Store one matrix document (its ``matrix_id``, ``project``, ``created_at``)."""
    baseline = next(
        (v.get("run_id") for v in document.get("variants", []) if v.get("baseline")), None
    )
    begin_write(conn)
    try:
        conn.execute(
            "INSERT INTO matrices(id, project, created_at, baseline_run, document_json)"
            " VALUES (?, ?, ?, ?, ?)",
            (document["matrix_id"], document["project"], document["created_at"], baseline,
             json.dumps(document, separators=(",", ":"), ensure_ascii=False)),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _record(row: tuple[Any, ...]) -> MatrixRecord:
    try:
        document = loads_bounded(row[4])
    except ValueError as exc:
        raise StoreUnreadable(f"matrix {row[0]}: its stored document is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise StoreUnreadable(f"matrix {row[0]}: its stored document is not an object")
    return MatrixRecord(row[0], row[1], row[2], row[3], document)


def list_matrices(conn: Connection, limit: int | None = None) -> list[MatrixRecord]:
    """The project's matrices, newest first."""
    if not has_table(conn, "matrices"):
        return []
    scope, params = project_scope(conn)
    sql = (f"SELECT id, project, created_at, baseline_run, document_json FROM matrices"
           f" WHERE {scope} ORDER BY created_at DESC, id DESC")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [_record(tuple(r)) for r in conn.execute(sql, params).fetchall()]


def get_matrix(conn: Connection, ref: str) -> MatrixRecord:
    """The matrix ``ref`` (``mx_…``, or ``latest``), or a usage error."""
    if ref == "latest":
        found = list_matrices(conn, 1)
        if not found:
            raise UsageError("no matrix is stored yet (oloproof run --matrix makes one)")
        return found[0]
    if not has_table(conn, "matrices"):
        raise UsageError(f"no matrix {ref} in this store (oloproof run --matrix makes one)")
    row = conn.execute(
        "SELECT id, project, created_at, baseline_run, document_json FROM matrices"
        " WHERE id = ?", (ref,),
    ).fetchone()
    if row is None:
        raise UsageError(f"no matrix {ref} in this store (oloproof run --matrix makes one)")
    return _record(tuple(row))
