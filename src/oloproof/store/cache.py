"""Cache look-ups: finished executions and judgments, by key.

Only successes are ever written (store/writer.py), so a failure is never
replayed: the next run calls again.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from oloproof._records import dataclass
from oloproof.usage import Usage

if TYPE_CHECKING:
    from typing import Any


@dataclass(slots=True)
class CachedExecution:
    output: Any
    latency_ms: float | None
    usage: Usage | None
    attempts: int


@dataclass(slots=True)
class CachedJudgment:
    status: str
    passed: bool | None
    score: float | None
    reason: str | None
    latency_ms: float | None
    attempts: int
    usage: Usage | None


class Cache:
    def __init__(self, conn: sqlite3.Connection, *, enabled: bool = True) -> None:
        self.conn = conn
        self.enabled = enabled
        # Hits kept in memory while :meth:`remember` is on (engine/pipeline.py looks a
        # run's keys up once to see whether everything is cached, then reads them here).
        self._held: dict[str, CachedExecution | CachedJudgment] | None = None

    def remember(self, on: bool) -> None:
        """Keep every hit in memory (``on``), or forget them all."""
        self._held = {} if on else None

    def execution(self, key: str) -> CachedExecution | None:
        if not self.enabled:
            return None
        held = self._held
        if held is not None:
            found = held.get(key)
            if isinstance(found, CachedExecution):
                return found
        row = self.conn.execute(
            "SELECT output_json, latency_ms, usage_json, attempts FROM exec_cache WHERE key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        usage = Usage.from_json(json.loads(row[2])) if row[2] else None
        hit = CachedExecution(json.loads(row[0]), row[1], usage, row[3])
        if held is not None:
            held[key] = hit
        return hit

    def judgment(self, key: str) -> CachedJudgment | None:
        if not self.enabled:
            return None
        held = self._held
        if held is not None:
            found = held.get(key)
            if isinstance(found, CachedJudgment):
                return found
        row = self.conn.execute(
            "SELECT status, passed, score, reason, latency_ms, attempts, usage_json"
            " FROM judge_cache WHERE key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        usage = Usage.from_json(json.loads(row[6])) if row[6] else None
        passed = None if row[1] is None else bool(row[1])
        hit = CachedJudgment(row[0], passed, row[2], row[3], row[4], row[5], usage)
        if held is not None:
            held[key] = hit
        return hit
