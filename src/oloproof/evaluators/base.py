"""What every evaluator gives back, and how it is found in the output."""

from __future__ import annotations

import json
import math

from oloproof._records import dataclass, replace
from oloproof.enums import JudgmentStatus
from oloproof.paths import MISSING, is_missing, lookup
from oloproof.usage import Usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

__all__ = [
    "MISSING",
    "CaseView",
    "Outcome",
    "Verdict",
    "as_text",
    "enforce_range",
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
    #: An ERROR that another attempt could have fixed (a judge's retries ran out on 429,
    #: 5xx, a dropped connection or a timeout): a run of them is an outage (the engine
    #: stops the run after ``limits.max_consecutive_failures`` in a row).
    outage: bool = False


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


# Structural, for the type checker only (typing's Protocol stays off the run path).
if TYPE_CHECKING:

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
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# Read for every outcome (enforce_range): a module constant, as an enum class's attribute
# costs some 900 instructions on Python 3.11 (evidence.py, _STATUS_OK).
_STATUS_OK = JudgmentStatus.OK


def enforce_range(outcome: Outcome, value_range: tuple[float, float] | None) -> Outcome:
    """A MEAN score outside the evaluator's declared range becomes a per-case error.

    A score outside ``range`` means the range was declared wrong or the evaluator is wrong;
    either way the score cannot be trusted, and clipping it into the range would let the
    evidence say something it does not (absolute errors 44, 45, 46 clipped into [0, 30] read
    as "at most 30"). So the case is counted as missing for this criterion, with a reason
    naming the score and the range, and bounded like any missing case. Every outcome of
    every evaluator (built-in, custom, judge, cached) passes through here once.
    """
    score = outcome.score
    if outcome.status != _STATUS_OK or score is None:
        return outcome
    if not math.isfinite(score):
        # Never an infinity or NaN in the evidence (an absolute error of 1.7e308 from
        # -1.7e308 is beyond the largest float): no interval could be computed with it.
        return replace(outcome, status=JudgmentStatus.ERROR, score=None, passed=None,
                       reason=f"score {score} is not a finite number; counted as missing")
    if value_range is None:
        return outcome
    low, high = value_range
    if low <= score <= high:
        return outcome
    return replace(
        outcome,
        status=JudgmentStatus.ERROR,
        score=None,
        passed=None,
        reason=(
            f"score {score:g} is outside the declared range [{low:g}, {high:g}]: either the"
            " range is declared wrong or the evaluator is; counted as missing, not clipped"
        ),
    )
