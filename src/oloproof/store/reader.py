"""Reading stored runs: the one path by which run, gate, inspect, compare and plan see evidence."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from oloproof.errors import UsageError


@dataclass
class RunRecord:
    id: str
    project: str
    created_at: str
    finished_at: str | None
    status: str
    completeness: str
    exit_code: int | None
    gate: str | None
    suite_digest: str
    dataset: str
    cases_total: int
    system_identity: str
    system: dict[str, Any]
    metrics: list[dict[str, Any]]
    policy: dict[str, Any] | None
    policy_path: str | None
    stop_reason: str | None
    pid: int | None
    cache: dict[str, int] | None

    @property
    def state(self) -> str:
        return f"{self.status}/{self.completeness}"


_RUN_COLUMNS = (
    "id, project, created_at, finished_at, status, completeness, exit_code, gate,"
    " suite_digest, dataset, cases_total, system_identity, system_json, metrics_json,"
    " policy_json, policy_path, stop_reason, pid, cache_json"
)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _record(row: tuple[Any, ...]) -> RunRecord:
    rec = RunRecord(
        id=row[0],
        project=row[1],
        created_at=row[2],
        finished_at=row[3],
        status=row[4],
        completeness=row[5],
        exit_code=row[6],
        gate=row[7],
        suite_digest=row[8],
        dataset=row[9],
        cases_total=row[10],
        system_identity=row[11],
        system=json.loads(row[12]),
        metrics=json.loads(row[13]),
        policy=json.loads(row[14]) if row[14] else None,
        policy_path=row[15],
        stop_reason=row[16],
        pid=row[17],
        cache=json.loads(row[18]) if row[18] else None,
    )
    if rec.status == "RUNNING" and not _pid_alive(rec.pid):
        # The process that ran it died without recording an end (killed, power lost):
        # what it stored is all there is.
        rec.status, rec.completeness, rec.exit_code = "RUN_ERROR", "PARTIAL", 5
        rec.stop_reason = rec.stop_reason or "the process running it ended without finishing"
    return rec


def list_runs(conn: sqlite3.Connection, limit: int | None = None) -> list[RunRecord]:
    sql = f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id DESC"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [_record(r) for r in conn.execute(sql)]


def resolve_run_id(conn: sqlite3.Connection, ref: str) -> str:
    if ref == "latest":
        row = conn.execute("SELECT id FROM runs ORDER BY created_at DESC, id DESC LIMIT 1").fetchone()
        if row is None:
            raise UsageError("no runs are stored in this project yet (run `oloproof run` first)")
        return str(row[0])
    if not ref.startswith("run_"):
        raise UsageError(f"'{ref}' is not a run id (run ids look like run_01J…; or use 'latest')")
    row = conn.execute("SELECT id FROM runs WHERE id = ?", (ref,)).fetchone()
    if row is None:
        rows = conn.execute(
            "SELECT id FROM runs WHERE id LIKE ? LIMIT 2", (ref + "%",)
        ).fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
        raise UsageError(f"no run '{ref}' in this project's store (`oloproof runs` lists them)")
    return str(row[0])


def get_run(conn: sqlite3.Connection, ref: str) -> RunRecord:
    run_id = resolve_run_id(conn, ref)
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return _record(row)


@dataclass
class CaseRow:
    case_id: str
    idx: int
    input: Any
    expected: Any
    metadata: Any
    status: str
    output: Any
    error: str | None
    attempts: int
    latency_ms: float | None
    usage: dict[str, Any] | None
    from_cache: bool
    judgments: dict[str, JudgmentRow] = field(default_factory=dict)


@dataclass
class JudgmentRow:
    criterion: str
    status: str
    passed: bool | None
    score: float | None
    reason: str | None
    from_cache: bool
    latency_ms: float | None
    attempts: int
    usage: dict[str, Any] | None


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def load_cases(
    conn: sqlite3.Connection, run_id: str, case_id: str | None = None
) -> list[CaseRow]:
    """The stored cases of a run in suite order, each with its judgments."""
    where, params = "run_id = ?", [run_id]
    if case_id is not None:
        where += " AND case_id = ?"
        params.append(case_id)
    cases: dict[str, CaseRow] = {}
    for r in conn.execute(
        "SELECT case_id, idx, input_json, expected_json, metadata_json, status, output_json,"
        f" error, attempts, latency_ms, usage_json, from_cache FROM run_cases WHERE {where}"
        " ORDER BY idx",
        params,
    ):
        cases[r[0]] = CaseRow(
            r[0], r[1], _loads(r[2]), _loads(r[3]), _loads(r[4]), r[5], _loads(r[6]), r[7],
            r[8], r[9], _loads(r[10]), bool(r[11]),
        )
    for j in conn.execute(
        "SELECT case_id, criterion, status, passed, score, reason, from_cache, latency_ms,"
        f" attempts, usage_json FROM run_judgments WHERE {where}",
        params,
    ):
        row = cases.get(j[0])
        if row is not None:
            row.judgments[j[1]] = JudgmentRow(
                j[1], j[2], None if j[3] is None else bool(j[3]), j[4], j[5], bool(j[6]), j[7],
                j[8], _loads(j[9]),
            )
    return list(cases.values())


@dataclass
class CriterionEvidence:
    """What a run stored for one criterion: the inputs of its metric."""

    criterion: str
    kind: str  # BINARY | MEAN
    value_range: tuple[float, float] | None
    passed: int = 0
    failed: int = 0
    scores: list[float] = field(default_factory=list)
    missing: int = 0
    excluded: int = 0

    @property
    def observed(self) -> int:
        return self.passed + self.failed if self.kind == "BINARY" else len(self.scores)


def load_evidence(conn: sqlite3.Connection, run: RunRecord) -> dict[str, CriterionEvidence]:
    """Per criterion, the counts (BINARY) or scores (MEAN) of a stored run.

    A case whose execution failed is missing for every criterion; so is a
    case whose evaluator failed, for that criterion.
    """
    evidence: dict[str, CriterionEvidence] = {}
    for m in run.metrics:
        rng = m.get("range")
        evidence[m["criterion"]] = CriterionEvidence(
            m["criterion"], m["kind"], (float(rng[0]), float(rng[1])) if rng else None
        )
    for criterion, status, passed, score in conn.execute(
        "SELECT criterion, status, passed, score FROM run_judgments WHERE run_id = ?",
        (run.id,),
    ):
        ev = evidence.get(criterion)
        if ev is None:
            continue
        if status == "OK":
            if ev.kind == "BINARY":
                if passed:
                    ev.passed += 1
                else:
                    ev.failed += 1
            elif score is not None:
                ev.scores.append(float(score))
            else:
                ev.missing += 1
        elif status == "EXCLUDED":
            ev.excluded += 1
        else:
            ev.missing += 1
    return evidence


def load_decisions(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    return [
        json.loads(r[0])
        for r in conn.execute(
            "SELECT decision_json FROM decisions WHERE run_id = ? ORDER BY idx", (run_id,)
        )
    ]
