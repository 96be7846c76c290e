"""The store writer: a sink of run events, and the run's own row.

Rows are buffered and committed together once per turn of the event loop (or
when the buffer grows large), so a burst of finished cases costs one
transaction, and what finished is on disk before the next batch of work
starts. A process killed mid-run therefore loses only its calls in flight.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from oloproof.events import CaseExecuted, CaseJudged, Event, utc_timestamp
from oloproof.usage import Usage

_FLUSH_ROWS = 2000


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _usage(usage: Usage | None) -> str | None:
    return None if usage is None else _dump(usage.to_json())


class StoreWriter:
    def __init__(self, conn: sqlite3.Connection, run_id: str) -> None:
        self.conn = conn
        self.run_id = run_id
        self._cases: list[tuple[Any, ...]] = []
        self._exec_cache: list[tuple[Any, ...]] = []
        self._judgments: list[tuple[Any, ...]] = []
        self._judge_cache: list[tuple[Any, ...]] = []
        self._suite: Sequence[Any] = ()
        self._schedule: Callable[[Callable[[], None]], object] | None = None
        self._scheduled = False

    # -- the run's row -------------------------------------------------
    def create_run(
        self,
        *,
        project: str,
        suite_digest: str,
        dataset: str,
        cases_total: int,
        system_identity: str,
        system: dict[str, Any],
        metrics: list[dict[str, Any]],
        policy: dict[str, Any] | None,
        policy_path: str | None,
    ) -> None:
        self.conn.execute(
            "INSERT INTO runs(id, project, created_at, status, completeness, suite_digest,"
            " dataset, cases_total, system_identity, system_json, metrics_json, policy_json,"
            " policy_path, pid) VALUES (?, ?, ?, 'RUNNING', 'PARTIAL', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.run_id,
                project,
                utc_timestamp(),
                suite_digest,
                dataset,
                cases_total,
                system_identity,
                _dump(system),
                _dump(metrics),
                None if policy is None else _dump(policy),
                policy_path,
                os.getpid(),
            ),
        )

    def set_cases(self, cases: Sequence[Any]) -> None:
        """The suite's cases (with ``input``, ``expected``, ``metadata``), by event index."""
        self._suite = cases

    def finish_run(
        self,
        *,
        status: str,
        completeness: str,
        exit_code: int,
        gate: str,
        cache: dict[str, int],
        decisions: list[dict[str, Any]],
        stop_reason: str | None = None,
    ) -> None:
        self.flush()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute("DELETE FROM decisions WHERE run_id = ?", (self.run_id,))
            self.conn.executemany(
                "INSERT INTO decisions(run_id, idx, rule_id, decision_json) VALUES (?, ?, ?, ?)",
                [(self.run_id, i, d["rule"], _dump(d)) for i, d in enumerate(decisions)],
            )
            self.conn.execute(
                "UPDATE runs SET status = ?, completeness = ?, exit_code = ?, gate = ?,"
                " cache_json = ?, finished_at = ?, stop_reason = ? WHERE id = ?",
                (
                    status,
                    completeness,
                    exit_code,
                    gate,
                    _dump(cache),
                    utc_timestamp(),
                    stop_reason,
                    self.run_id,
                ),
            )
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    # -- events ----------------------------------------------------------
    def bind(self, schedule: Callable[[Callable[[], None]], object]) -> None:
        """Flush through ``schedule`` (e.g. ``loop.call_soon``) once per burst of events."""
        self._schedule = schedule

    def handle(self, event: Event) -> None:
        if isinstance(event, CaseExecuted):
            case = self._suite[event.index]
            output_json = None if event.status != "OK" else _dump(event.output)
            usage_json = _usage(event.usage)
            self._cases.append(
                (
                    self.run_id,
                    event.scenario_id,
                    event.index,
                    _dump(case.input),
                    None if case.expected is None else _dump(case.expected),
                    None if case.metadata is None else _dump(case.metadata),
                    event.status,
                    output_json,
                    event.error,
                    event.attempts,
                    event.latency_ms,
                    usage_json,
                    int(event.from_cache),
                    event.exec_key,
                    event.timestamp,
                )
            )
            if event.status == "OK" and not event.from_cache:
                self._exec_cache.append(
                    (
                        event.exec_key,
                        output_json,
                        event.latency_ms,
                        usage_json,
                        event.attempts,
                        event.timestamp,
                    )
                )
        elif isinstance(event, CaseJudged):
            passed = None if event.passed is None else int(event.passed)
            usage_json = _usage(event.usage)
            self._judgments.append(
                (
                    self.run_id,
                    event.scenario_id,
                    event.criterion,
                    event.status,
                    passed,
                    event.score,
                    event.reason,
                    int(event.from_cache),
                    event.judge_key,
                    event.latency_ms,
                    event.attempts,
                    usage_json,
                )
            )
            if event.status in ("OK", "EXCLUDED") and not event.from_cache and event.judge_key:
                self._judge_cache.append(
                    (
                        event.judge_key,
                        event.status,
                        passed,
                        event.score,
                        event.reason,
                        event.latency_ms,
                        event.attempts,
                        usage_json,
                        event.timestamp,
                    )
                )
        else:
            return
        pending = len(self._cases) + len(self._judgments)
        if pending >= _FLUSH_ROWS or self._schedule is None:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._schedule(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if not (self._cases or self._judgments):
            return
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self._cases:
                conn.executemany(
                    "INSERT OR REPLACE INTO run_cases VALUES"
                    " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    self._cases,
                )
            if self._exec_cache:
                conn.executemany(
                    "INSERT OR REPLACE INTO exec_cache VALUES (?, ?, ?, ?, ?, ?)",
                    self._exec_cache,
                )
            if self._judgments:
                conn.executemany(
                    "INSERT OR REPLACE INTO run_judgments VALUES"
                    " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    self._judgments,
                )
            if self._judge_cache:
                conn.executemany(
                    "INSERT OR REPLACE INTO judge_cache VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    self._judge_cache,
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._cases.clear()
        self._exec_cache.clear()
        self._judgments.clear()
        self._judge_cache.clear()
