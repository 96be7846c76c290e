"""The events of a run: what the engine emits and every sink consumes.

The store writer, the live view and the ``--json`` writer all read the same
events (ARCHITECTURE.md). Each event has a public JSON form (SPEC §6); some
carry more than that form (the output, the cache key) for the store's sake,
and ``to_json`` leaves those out.

The JSON Schema of the public form is generated from the classes below
(:func:`event_schema`): each declares its public fields in ``fields_schema``
and describes itself in the first paragraph of its docstring. The shipped
``schemas/events.schema.json`` (and ``docs/events.schema.json``) is that
output, regenerated with ``python -m oloproof.events --schema``; a test fails
when the committed files and the classes drift apart.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from enum import StrEnum

from oloproof._records import dataclass, field
from oloproof.enums import (
    JUDGMENT_MISSING,
    CaseStatus,
    Completeness,
    GateAction,
    JudgmentStatus,
    RuleState,
    RunStatus,
)
from oloproof.usage import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

SCHEMA_ID = "https://oloproof.dev/schemas/events-v1.json"
SCHEMA_FILE = "schemas/events.schema.json"

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


class RunPhase(StrEnum):
    """The phase a run is in, as ``run_phase_changed`` announces it."""

    EXECUTING = "EXECUTING"
    ANALYZING = "ANALYZING"


_NULLABLE_NUMBER: dict[str, Any] = {"type": ["number", "null"]}
_PROBABILITY: dict[str, Any] = {"type": ["number", "null"], "minimum": 0, "maximum": 1}


def _enum(values: Sequence[str]) -> dict[str, Any]:
    return {"enum": [str(v) for v in values]}


_TRIAL_SCHEMA: dict[str, dict[str, Any]] = {
    "trial": {
        "type": "integer",
        "minimum": 0,
        "description": "Which trial of the case (0 to trials - 1); only in a run with trials > 1.",
    },
}


@dataclass(slots=True)
class Event:
    """The base of every run event: which run, when, and what kind.

    ``to_json`` is the public form (SPEC §6), the one ``--json`` streams and the
    schema describes; fields an event carries for the store only never appear in it.
    """

    run_id: str
    timestamp: str = field(default_factory=utc_timestamp, kw_only=True)

    type: ClassVar[str] = "event"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {}
    #: Public fields that only some runs carry (listed in the schema, not required).
    optional_schema: ClassVar[dict[str, dict[str, Any]]] = {}

    def public(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        data = {"run_id": self.run_id, "timestamp": self.timestamp, "type": self.type}
        data.update(self.public())
        return data

    def to_line(self) -> str:
        """One strict-JSON line (no NaN, no lone surrogate): see ``oloproof.textsafe``."""
        from oloproof.textsafe import dumps

        return dumps(self.to_json(), indent=None)


@dataclass(slots=True)
class RunStarted(Event):
    """First event of a run.

    Carries the digest of the suite as read and the number of its cases.
    """

    suite_digest: str
    cases: int
    type: ClassVar[str] = "run_started"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "suite_digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "cases": {"type": "integer", "minimum": 0},
    }

    def public(self) -> dict[str, Any]:
        return {"suite_digest": self.suite_digest, "cases": self.cases}


@dataclass(slots=True)
class RunPhaseChanged(Event):
    """EXECUTING after run_started; ANALYZING once every case is finished, before the decision.

    A stopped run never announces ANALYZING.
    """

    phase: RunPhase | str
    type: ClassVar[str] = "run_phase_changed"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {"phase": _enum(list(RunPhase))}

    def public(self) -> dict[str, Any]:
        return {"phase": self.phase}


@dataclass(slots=True)
class CaseExecuted(Event):
    """One per case. latency_ms is the latency of the call that produced the output (for a cached case, the original call).

    Emitted once the call has ended, however it ended: ``error`` says why a
    case that is not ``OK`` has no output. ``index``, ``exec_key``, ``output``
    and ``usage`` are for the store, never streamed.
    """

    scenario_id: str
    status: CaseStatus | str
    from_cache: bool
    latency_ms: float | None
    attempts: int
    error: str | None
    # For the store, not the stream:
    index: int = 0
    exec_key: str = ""
    output: Any = None
    usage: Usage | None = None
    #: Streamed only in a run with trials > 1 (None otherwise: the event is unchanged).
    trial: int | None = None
    type: ClassVar[str] = "case_executed"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "scenario_id": {"type": "string", "minLength": 1},
        "status": _enum(list(CaseStatus)),
        "from_cache": {"type": "boolean"},
        "latency_ms": _NULLABLE_NUMBER,
        "attempts": {"type": "integer", "minimum": 1},
        "error": {"type": ["string", "null"]},
    }
    optional_schema: ClassVar[dict[str, dict[str, Any]]] = _TRIAL_SCHEMA

    def public(self) -> dict[str, Any]:
        data = {
            "scenario_id": self.scenario_id,
            "status": self.status,
            "from_cache": self.from_cache,
            "latency_ms": self.latency_ms,
            "attempts": self.attempts,
            "error": self.error,
        }
        if self.trial is not None:
            data["trial"] = self.trial
        return data


@dataclass(slots=True)
class CaseJudged(Event):
    """One per case per criterion. OK: observed; EXCLUDED: the evaluator does not apply; ERROR: the evaluator or judge failed (missing); MISSING: the system gave no output (missing).

    How an outcome counts is decided in one place, ``oloproof.evidence``.
    ``reason``, ``judge_key``, ``latency_ms``, ``attempts`` and ``usage`` are
    for the store, never streamed.
    """

    scenario_id: str
    criterion: str
    status: JudgmentStatus | str
    passed: bool | None
    score: float | None
    from_cache: bool
    # For the store, not the stream:
    reason: str | None = None
    judge_key: str = ""
    latency_ms: float | None = None
    attempts: int = 0
    usage: Usage | None = None
    #: Streamed only in a run with trials > 1 (None otherwise: the event is unchanged).
    trial: int | None = None
    type: ClassVar[str] = "case_judged"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "scenario_id": {"type": "string", "minLength": 1},
        "criterion": {"type": "string"},
        "status": _enum([*JudgmentStatus, JUDGMENT_MISSING]),
        "passed": {"type": ["boolean", "null"]},
        "score": _NULLABLE_NUMBER,
        "from_cache": {"type": "boolean"},
    }
    optional_schema: ClassVar[dict[str, dict[str, Any]]] = _TRIAL_SCHEMA

    def public(self) -> dict[str, Any]:
        data = {
            "scenario_id": self.scenario_id,
            "criterion": self.criterion,
            "status": self.status,
            "passed": self.passed,
            "score": self.score,
            "from_cache": self.from_cache,
        }
        if self.trial is not None:
            data["trial"] = self.trial
        return data


@dataclass(slots=True)
class ProvisionalMetric:
    """One BINARY metric's provisional figures inside a ``provisional_metrics`` event."""

    metric: str
    estimate: float | None
    wilson_lower: float | None
    wilson_upper: float | None
    n_observed: int
    n_missing: int

    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "metric": {"type": "string"},
        "estimate": _PROBABILITY,
        "wilson_lower": _PROBABILITY,
        "wilson_upper": _PROBABILITY,
        "n_observed": {"type": "integer", "minimum": 0},
        "n_missing": {"type": "integer", "minimum": 0},
    }

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
    """After the first finished case, every ceil(total/10) cases, and after the last. Wilson score interval at 95% (z = 1.959963986120195) over finished cases, per BINARY metric. Never used to decide.

    ``cases_cached`` and ``cases_errored`` feed the live view; they are not streamed.
    """

    cases_done: int
    cases_total: int
    metrics: list[ProvisionalMetric]
    cases_cached: int = 0
    cases_errored: int = 0
    type: ClassVar[str] = "provisional_metrics"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "cases_done": {"type": "integer", "minimum": 1},
        "cases_total": {"type": "integer", "minimum": 1},
        "metrics": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": list(ProvisionalMetric.fields_schema),
                "properties": ProvisionalMetric.fields_schema,
            },
        },
    }

    def public(self) -> dict[str, Any]:
        return {
            "cases_done": self.cases_done,
            "cases_total": self.cases_total,
            "metrics": [m.to_json() for m in self.metrics],
        }


@dataclass(slots=True)
class ConcurrencyChanged(Event):
    """Adaptive concurrency moved a limit (only with concurrency.adaptive). limit_name: system or judge; previous is null at the start; reason: start, rate_limited (multiplicative decrease) or clean_window (increase).

    ``ceiling`` is the configured ``concurrency.system`` or ``concurrency.judge``,
    which the limit never passes. The store keeps every change with the run.
    """

    limit_name: str
    previous: int | None
    limit: int
    ceiling: int
    reason: str
    type: ClassVar[str] = "concurrency_changed"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "limit_name": _enum(["system", "judge"]),
        "previous": {"type": ["integer", "null"], "minimum": 1},
        "limit": {"type": "integer", "minimum": 1},
        "ceiling": {"type": "integer", "minimum": 1},
        "reason": _enum(["start", "rate_limited", "clean_window"]),
    }

    def public(self) -> dict[str, Any]:
        return {
            "limit_name": self.limit_name,
            "previous": self.previous,
            "limit": self.limit,
            "ceiling": self.ceiling,
            "reason": self.reason,
        }


@dataclass(slots=True)
class RuleDecided(Event):
    """A sequential run decided a rule (only with --sequential): n cases of the run's seeded order read, e_value the test's statistic against its threshold e_threshold (null for an observed_count rule, decided by its count).

    ``n_scope`` counts the cases of the rule's own scope (its group; excluded cases left
    out) among the ``n``; ``method`` names the test (docs/sequential-decisions.md). The
    run stops scheduling cases once every rule has its ``rule_decided``.
    """

    rule: str
    metric: str
    state: str
    n: int
    n_scope: int
    cases_total: int
    e_value: float | None
    e_threshold: float | None
    method: str
    type: ClassVar[str] = "rule_decided"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "rule": {"type": "string"},
        "metric": {"type": "string"},
        "state": _enum(["PASS", "FAIL"]),
        "n": {"type": "integer", "minimum": 1},
        "n_scope": {"type": "integer", "minimum": 0},
        "cases_total": {"type": "integer", "minimum": 1},
        "e_value": {"type": ["number", "null"], "minimum": 0},
        "e_threshold": {"type": ["number", "null"], "minimum": 1},
        "method": {"type": "string"},
    }

    def public(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "metric": self.metric,
            "state": self.state,
            "n": self.n,
            "n_scope": self.n_scope,
            "cases_total": self.cases_total,
            "e_value": self.e_value,
            "e_threshold": self.e_threshold,
            "method": self.method,
        }


_DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["rule", "metric", "kind", "state", "reason", "detail", "action"],
    "properties": {
        "rule": {"type": "string"},
        "metric": {"type": "string"},
        "kind": {"type": "string"},
        "state": _enum(list(RuleState)),
        "reason": {"type": "string"},
        "detail": {"type": "string"},
        "action": _enum(list(GateAction)),
        "threshold": _NULLABLE_NUMBER,
        "direction": {"enum": ["min", "max", None]},
        "estimate": _NULLABLE_NUMBER,
        "lower": _NULLABLE_NUMBER,
        "upper": _NULLABLE_NUMBER,
    },
}


@dataclass(slots=True)
class RunFinished(Event):
    """Last event. A PARTIAL run is not decided: decisions is empty and exit_code is 5.

    Emitted after the run's end is committed to the store, so a reader that
    sees it can read the same decisions back with ``oloproof inspect``.
    """

    status: RunStatus | str
    completeness: Completeness | str
    exit_code: int
    decisions: list[dict[str, Any]]
    #: What the terminal prints beside the gate (``gate --json``'s ``gate_notes``): rules
    #: over ``max_missing``, a shard's missing share, patched code. Only when there is one.
    gate_notes: list[str] = field(default_factory=list)
    type: ClassVar[str] = "run_finished"
    fields_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "status": _enum([RunStatus.DECIDED, RunStatus.RUN_ERROR]),
        "completeness": _enum(list(Completeness)),
        "exit_code": {"type": "integer", "minimum": 0, "maximum": 5},
        "decisions": {"type": "array", "items": _DECISION_SCHEMA},
    }
    optional_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "gate_notes": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    }

    def public(self) -> dict[str, Any]:
        data = {
            "status": self.status,
            "completeness": self.completeness,
            "exit_code": self.exit_code,
            "decisions": self.decisions,
        }
        if self.gate_notes:
            data["gate_notes"] = list(self.gate_notes)
        return data


EVENT_TYPES: tuple[type[Event], ...] = (
    RunStarted,
    RunPhaseChanged,
    CaseExecuted,
    CaseJudged,
    ProvisionalMetrics,
    ConcurrencyChanged,
    RuleDecided,
    RunFinished,
)

_COMMON_SCHEMA: dict[str, dict[str, Any]] = {
    "run_id": {"type": "string", "pattern": "^run_[0-9A-HJKMNP-TV-Z]{26}$"},
    "timestamp": {
        "type": "string",
        "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$",
    },
}


def _summary(cls: type[Event]) -> str:
    import inspect  # only to build the schema: `oloproof runs` and `gate` never import it

    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def event_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of every event's public form, built from the classes."""
    variants = []
    for cls in EVENT_TYPES:
        properties = {**_COMMON_SCHEMA, "type": {"const": cls.type}, **cls.fields_schema}
        required = list(properties)
        properties.update(cls.optional_schema)
        variants.append(
            {
                "title": cls.type,
                "description": _summary(cls),
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Oloproof run events (oloproof run --json), version 1",
        "description": (
            "One JSON object per line on standard output. Every event has run_id, timestamp"
            " (UTC, ISO 8601 with microseconds and Z) and type."
        ),
        "oneOf": variants,
    }


def event_schema_text() -> str:
    """:func:`event_schema` as the committed files hold it (2-space indent, final newline)."""
    return json.dumps(event_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m oloproof.events --schema``: print the generated event schema."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m oloproof.events")
    parser.add_argument("--schema", action="store_true", help="print the event JSON Schema")
    args = parser.parse_args(argv)
    if not args.schema:
        parser.print_help()
        return 2
    sys.stdout.write(event_schema_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
