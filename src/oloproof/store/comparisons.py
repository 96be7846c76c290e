"""Comparisons in the store: written once by ``oloproof compare``, read by ``inspect`` and ``plan``.

A comparison row keeps the two run ids, the policy it was decided under and the whole
document ``compare --json`` printed; ``comparison_metrics`` and ``comparison_decisions``
hold the same figures as rows, for tools that query the store with SQL. The evidence itself
stays in the two runs: ``plan`` pairs them again through the same functions ``compare`` used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from oloproof._json import loads_bounded
from oloproof._records import dataclass
from oloproof.errors import UsageError
from oloproof.ids import new_comparison_id
from oloproof.store.db import StoreUnreadable, begin_write, has_table
from oloproof.store.reader import project_scope

if TYPE_CHECKING:  # imported for its type only: `oloproof runs` lists comparisons without it
    from typing import Any

    from oloproof.policy.compare import PairedMetric
    from oloproof.store.dbapi import Connection

__all__ = [
    "ComparisonRecord",
    "get_comparison",
    "list_comparisons",
    "new_comparison_id",
    "resolve_comparison_id",
    "write_comparison",
]


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass
class ComparisonRecord:
    id: str
    project: str
    created_at: str
    candidate_run: str
    baseline_run: str
    confidence_level: float
    policy: dict[str, Any]
    policy_path: str | None
    gate: str
    exit_code: int
    document: dict[str, Any]
    decisions: list[dict[str, Any]]


def write_comparison(
    conn: Connection,
    *,
    cmp_id: str,
    project: str,
    candidate_run: str,
    baseline_run: str,
    confidence_level: float,
    policy: dict[str, Any],
    policy_path: str | None,
    gate: str,
    exit_code: int,
    metrics: Sequence[PairedMetric],
    decisions: Sequence[dict[str, Any]],
    document: dict[str, Any],
    created_at: str | None = None,
) -> None:
    """Store one comparison, all of it in one transaction."""
    from oloproof.events import utc_timestamp  # a comparison is being stored

    begin_write(conn)
    try:
        conn.execute(
            "INSERT INTO comparisons(id, project, created_at, candidate_run, baseline_run,"
            " confidence_level, policy_json, policy_path, gate, exit_code, document_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cmp_id, project, created_at or utc_timestamp(), candidate_run, baseline_run,
                confidence_level, _dump(policy), policy_path, gate, exit_code, _dump(document),
            ),
        )
        conn.executemany(
            "INSERT INTO comparison_metrics(cmp_id, idx, metric, kind, pairs, both_pass,"
            " cand_only, base_only, both_fail, dropped_missing, dropped_excluded, estimate,"
            " lower, upper, sd, method) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    cmp_id, i, m.metric, m.kind, m.pairs, m.both_pass, m.cand_only, m.base_only,
                    m.both_fail, m.dropped_missing, m.dropped_excluded, m.estimate, m.lower,
                    m.upper, m.sd, m.method,
                )
                for i, m in enumerate(metrics)
            ],
        )
        conn.executemany(
            "INSERT INTO comparison_decisions(cmp_id, idx, rule_id, decision_json)"
            " VALUES (?, ?, ?, ?)",
            [(cmp_id, i, d["rule"], _dump(d)) for i, d in enumerate(decisions)],
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


_COLUMNS = (
    "id, project, created_at, candidate_run, baseline_run, confidence_level, policy_json,"
    " policy_path, gate, exit_code, document_json"
)


def _loads(cmp_id: str, column: str, text: str) -> Any:
    try:
        return loads_bounded(text)
    except ValueError as exc:
        raise StoreUnreadable(
            f"comparison {cmp_id}: its stored {column} cannot be read ({exc}); the store is"
            " damaged"
        ) from exc


def _record(conn: Connection, row: tuple[Any, ...]) -> ComparisonRecord:
    decisions = [
        _loads(row[0], "decision", r[0])
        for r in conn.execute(
            "SELECT decision_json FROM comparison_decisions WHERE cmp_id = ? ORDER BY idx",
            (row[0],),
        )
    ]
    return ComparisonRecord(
        id=row[0], project=row[1], created_at=row[2], candidate_run=row[3],
        baseline_run=row[4], confidence_level=float(row[5]), policy=_loads(row[0], "policy", row[6]),
        policy_path=row[7], gate=row[8], exit_code=int(row[9]), document=_loads(row[0], "document", row[10]),
        decisions=decisions,
    )


def resolve_comparison_id(conn: Connection, ref: str) -> str:
    """A full comparison id from an id or a unique prefix of one."""
    if not ref.startswith("cmp_"):
        raise UsageError(f"'{ref}' is not a comparison id (comparison ids look like cmp_01J…)")
    if not has_table(conn, "comparisons"):
        rows = []  # a store older than comparisons, or one a run is creating right now
    else:
        where, scope = project_scope(conn)
        row = conn.execute(
            f"SELECT id FROM comparisons WHERE id = ? AND {where}", (ref, *scope)
        ).fetchone()
        if row is not None:
            return str(row[0])
        # substr, not LIKE: '_' and '%' in a prefix are characters, not wildcards.
        rows = conn.execute(
            f"SELECT id FROM comparisons WHERE substr(id, 1, ?) = ? AND {where} LIMIT 2",
            (len(ref), ref, *scope),
        ).fetchall()
    if len(rows) == 1:
        return str(rows[0][0])
    raise UsageError(
        f"no comparison '{ref}' in this project's store"
        " (`oloproof compare CANDIDATE BASELINE` makes one and prints its id)"
    )


def get_comparison(conn: Connection, ref: str) -> ComparisonRecord:
    cmp_id = resolve_comparison_id(conn, ref)
    row = conn.execute(f"SELECT {_COLUMNS} FROM comparisons WHERE id = ?", (cmp_id,)).fetchone()
    return _record(conn, row)


def list_comparisons(conn: Connection, limit: int | None = None) -> list[ComparisonRecord]:
    """Stored comparisons of the project, newest first."""
    where, scope = project_scope(conn)
    sql = f"SELECT {_COLUMNS} FROM comparisons WHERE {where} ORDER BY created_at DESC, id DESC"
    if limit is not None:
        # Within the databases' integers: a larger limit is simply "all of them".
        sql += f" LIMIT {max(0, min(int(limit), 2**63 - 1))}"
    return [_record(conn, r) for r in conn.execute(sql, scope).fetchall()]
