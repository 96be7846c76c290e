"""The pass/fail semantics of every rule, defined once (SPEC §5).

Each function takes an interval (lower, upper) and a rule's parameters and returns
``RuleState.PASS``, ``RuleState.FAIL`` or None (the interval does not decide it). The run
decisions (:mod:`oloproof.policy.decide`), the comparison decisions
(:mod:`oloproof.policy.compare`), the multiplicity procedures and the sample-size searches
(:mod:`oloproof.stats.sample_size`, which receives these as a ``judge``) all use them.

- run rule ``min: t``: PASS if lower >= t, FAIL if upper < t;
  ``max: t``: PASS if upper <= t, FAIL if lower > t;
- comparison rules on the difference candidate - baseline, margin m >= 0:
  ``superiority``: PASS if lower > m, FAIL if upper <= m (m = 0 by default);
  ``non_inferiority``: PASS if lower > -m, FAIL if upper <= -m;
  ``equivalence``: PASS if -m < lower and upper < m, FAIL if upper <= -m or lower >= m.

Every PASS condition and every FAIL condition is monotone in the interval: narrowing an
interval never undoes a decision, and a decision possible for some interval with
lower <= L and upper >= U is made by (L, U) itself. The sample-size searches rely on that.
"""

from __future__ import annotations

from collections.abc import Callable

from oloproof.enums import RuleState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

__all__ = [
    "Judge",
    "comparison_bar",
    "comparison_judge",
    "decide_comparison_interval",
    "decide_threshold",
    "on_comparison_bar",
    "threshold_judge",
]

# The type checker's only: typing stays off the run path.
if TYPE_CHECKING:
    Direction = Literal["min", "max"]
    ComparisonKind = Literal["superiority", "non_inferiority", "equivalence"]

#: An interval (lower, upper) to a decision, or None when it does not decide.
Judge = Callable[[float, float], RuleState | None]


def decide_threshold(
    lower: float, upper: float, threshold: float, direction: Direction
) -> RuleState | None:
    """The state of a ``min``/``max`` run rule on an interval (None: not decided)."""
    if direction == "min":
        if lower >= threshold:
            return RuleState.PASS
        if upper < threshold:
            return RuleState.FAIL
        return None
    if direction == "max":
        if upper <= threshold:
            return RuleState.PASS
        if lower > threshold:
            return RuleState.FAIL
        return None
    raise ValueError(f"direction must be 'min' or 'max', got {direction!r}")


def decide_comparison_interval(
    lower: float, upper: float, kind: ComparisonKind, margin: float
) -> RuleState | None:
    """The state of a comparison rule on an interval for candidate - baseline."""
    if kind == "superiority":
        if lower > margin:
            return RuleState.PASS
        if upper <= margin:
            return RuleState.FAIL
        return None
    if kind == "non_inferiority":
        if lower > -margin:
            return RuleState.PASS
        if upper <= -margin:
            return RuleState.FAIL
        return None
    if kind == "equivalence":
        if lower > -margin and upper < margin:
            return RuleState.PASS
        if upper <= -margin or lower >= margin:
            return RuleState.FAIL
        return None
    raise ValueError(
        f"kind must be 'superiority', 'non_inferiority' or 'equivalence', got {kind!r}"
    )


def comparison_bar(kind: ComparisonKind, margin: float) -> float:
    """The value a one-sided comparison rule compares the interval with."""
    return margin if kind == "superiority" else -margin


def on_comparison_bar(estimate: float, kind: ComparisonKind, margin: float) -> bool:
    """True when the estimate sits exactly where no size can decide the rule."""
    if kind == "equivalence":
        return abs(estimate) == margin
    return estimate == comparison_bar(kind, margin)


def threshold_judge(threshold: float, direction: Direction) -> Judge:
    """:func:`decide_threshold` with the rule's parameters bound."""
    if direction not in ("min", "max"):
        raise ValueError(f"direction must be 'min' or 'max', got {direction!r}")

    def judge(lower: float, upper: float) -> RuleState | None:
        return decide_threshold(lower, upper, threshold, direction)

    return judge


def comparison_judge(kind: ComparisonKind, margin: float) -> Judge:
    """:func:`decide_comparison_interval` with the rule's parameters bound."""
    if kind not in ("superiority", "non_inferiority", "equivalence"):
        raise ValueError(
            f"kind must be 'superiority', 'non_inferiority' or 'equivalence', got {kind!r}"
        )

    def judge(lower: float, upper: float) -> RuleState | None:
        return decide_comparison_interval(lower, upper, kind, margin)

    return judge
