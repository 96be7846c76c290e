"""The events of a run: what the engine emits and every sink consumes.

The store writer, the live view and the ``--json`` writer all read the same
events (ARCHITECTURE.md). Each event has a public JSON form (SPEC §6, and the
schema in ``schemas/events.schema.json``); some carry more than that form
(the output, the cache key) for the store's sake, and ``to_json`` leaves
those out.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from oloproof.usage import Usage

# The seconds part of the last timestamp made: every event carries a timestamp,
# and formatting a date costs more than the rest of a small event.
_last_second: tuple[int, str] = (-1, "")


def utc_timestamp() -> str:
    """UTC, ISO 8601 with microseconds and a ``Z``: ``2026-09-25T11:07:37.782628Z``."""
    global _last_second
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    second, text = _last_second
    if second != seconds:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _last_second = (seconds, text)
    return f"{text}.{micros:06d}Z"


@dataclass(slots=True)
class Event:
    run_id: str
    timestamp: str = field(default_factory=utc_timestamp, kw_only=True)

    type = "event"

    def public(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        data = {"run_id": self.run_id, "timestamp": self.timestamp, "type": self.type}
        data.update(self.public())
        return data

    def to_line(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False)


@dataclass(slots=True)
class RunStarted(Event):
    suite_digest: str
    cases: int
    type = "run_started"

    def public(self) -> dict[str, Any]:
        return {"suite_digest": self.suite_digest, "cases": self.cases}


@dataclass(slots=True)
class RunPhaseChanged(Event):
    phase: str  # EXECUTING | ANALYZING
    type = "run_phase_changed"

    def public(self) -> dict[str, Any]:
        return {"phase": self.phase}


@dataclass(slots=True)
class CaseExecuted(Event):
    scenario_id: str
    status: str  # OK | ERROR | TIMEOUT
    from_cache: bool
    latency_ms: float | None
    attempts: int
    error: str | None
    # For the store, not the stream:
    index: int = 0
    exec_key: str = ""
    output: Any = None
    usage: Usage | None = None
    type = "case_executed"

    def public(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "status": self.status,
            "from_cache": self.from_cache,
            "latency_ms": self.latency_ms,
            "attempts": self.attempts,
            "error": self.error,
        }


@dataclass(slots=True)
class CaseJudged(Event):
    scenario_id: str
    criterion: str
    status: str  # OK | EXCLUDED | ERROR (the evaluator failed) | MISSING (no output to judge)
    passed: bool | None
    score: float | None
    from_cache: bool
    # For the store, not the stream:
    reason: str | None = None
    judge_key: str = ""
    latency_ms: float | None = None
    attempts: int = 0
    usage: Usage | None = None
    type = "case_judged"

    def public(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "criterion": self.criterion,
            "status": self.status,
            "passed": self.passed,
            "score": self.score,
            "from_cache": self.from_cache,
        }


@dataclass(slots=True)
class ProvisionalMetric:
    metric: str
    estimate: float | None
    wilson_lower: float | None
    wilson_upper: float | None
    n_observed: int
    n_missing: int

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "estimate": self.estimate,
            "wilson_lower": self.wilson_lower,
            "wilson_upper": self.wilson_upper,
            "n_observed": self.n_observed,
            "n_missing": self.n_missing,
        }


@dataclass(slots=True)
class ProvisionalMetrics(Event):
    cases_done: int
    cases_total: int
    metrics: list[ProvisionalMetric]
    cases_cached: int = 0
    cases_errored: int = 0
    type = "provisional_metrics"

    def public(self) -> dict[str, Any]:
        return {
            "cases_done": self.cases_done,
            "cases_total": self.cases_total,
            "metrics": [m.to_json() for m in self.metrics],
        }


@dataclass(slots=True)
class RunFinished(Event):
    status: str  # DECIDED | RUN_ERROR
    completeness: str  # COMPLETE | PARTIAL
    exit_code: int
    decisions: list[dict[str, Any]]
    type = "run_finished"

    def public(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "completeness": self.completeness,
            "exit_code": self.exit_code,
            "decisions": self.decisions,
        }
