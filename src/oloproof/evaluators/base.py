"""What every evaluator gives back, and how it is found in the output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from oloproof.paths import MISSING, is_missing, lookup
from oloproof.usage import Usage

__all__ = [
    "MISSING",
    "CaseView",
    "Evaluator",
    "InlineEvaluator",
    "JudgeEvaluator",
    "Outcome",
    "Verdict",
    "as_text",
    "get_field",
    "is_missing",
]


@dataclass(slots=True)
class Outcome:
    """One case judged on one criterion.

    ``status``: ``OK`` (observed: ``passed`` for BINARY, ``score`` for MEAN),
    ``EXCLUDED`` (the evaluator does not apply to this case) or ``ERROR`` (the
    evaluator could not judge it: the case is missing for this criterion).
    """

    status: str
    passed: bool | None = None
    score: float | None = None
    reason: str | None = None
    usage: Usage | None = None
    attempts: int = 1
    latency_ms: float | None = None
    from_cache: bool = False


@dataclass(frozen=True)
class Verdict:
    """What a custom evaluator may return instead of a bool or a number:
    ``Verdict(passed=True, reason=...)``, ``Verdict(score=0.8)`` or
    ``Verdict(excluded=True, reason="not applicable")``."""

    passed: bool | None = None
    score: float | None = None
    excluded: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class CaseView:
    """The case as an evaluator sees it."""

    id: str
    input: Any
    expected: dict[str, Any] | None
    metadata: dict[str, Any] | None


class Evaluator(Protocol):
    criterion: str
    metric_kind: str  # a MetricKind (a StrEnum, so a str)
    value_range: tuple[float, float] | None
    identity: str
    is_judge: bool


class InlineEvaluator(Evaluator, Protocol):
    def evaluate(self, case: CaseView, output: Any) -> Outcome: ...


class JudgeEvaluator(Evaluator, Protocol):
    async def evaluate(self, case: CaseView, output: Any) -> Outcome: ...


def get_field(value: Any, path: str | None) -> Any:
    """The value at the dotted ``path`` (``items.-1.label``); ``MISSING`` where it is
    absent. The same rules as an HTTP system's ``output_path``: :func:`oloproof.paths.lookup`."""
    return lookup(value, path)


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)
