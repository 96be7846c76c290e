"""Interval plots: where an interval, its estimate and the rule's bars fall on a small axis.

Pure geometry for the templates (which draw it as inline SVG): numbers in, pixel
positions and labels out. No text supplied by a user or a model passes through here.
"""

from __future__ import annotations

from typing import Any

from oloproof._records import dataclass, field
from oloproof.enums import MetricKind
from oloproof.policy.format import difference_text, estimate_text, value_text

__all__ = ["Bar", "IntervalPlot", "comparison_plot", "rule_plot"]

WIDTH = 300.0
PAD = 14.0


@dataclass
class Bar:
    """A vertical line on the axis: a rule's threshold or margin."""

    x: float
    label: str


@dataclass
class IntervalPlot:
    x_lower: float
    x_upper: float
    x_estimate: float | None
    bars: list[Bar]
    axis_min: str
    axis_max: str
    width: float = WIDTH
    ticks: list[Bar] = field(default_factory=list)


def _scale(lo: float, hi: float) -> Any:
    span = hi - lo or 1.0

    def x(v: float) -> float:
        return round(PAD + (v - lo) / span * (WIDTH - 2 * PAD), 2)

    return x


def rule_plot(decision: dict[str, Any], kind: str) -> IntervalPlot | None:
    """A run rule's interval against its threshold (``min``/``max``), or None without one."""
    lower, upper, t = decision.get("lower"), decision.get("upper"), decision.get("threshold")
    if lower is None or upper is None or t is None or decision.get("direction") is None:
        return None
    est = decision.get("estimate")
    if kind == MetricKind.BINARY:
        lo, hi = 0.0, 1.0
    else:
        values = [v for v in (lower, upper, t, est) if v is not None]
        lo, hi = min(values), max(values)
        pad = (hi - lo) * 0.15 or abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    x = _scale(lo, hi)
    word = "min" if decision["direction"] == "min" else "max"
    return IntervalPlot(
        x(lower), x(upper), None if est is None else x(est),
        [Bar(x(t), f"{word} {value_text(t, kind)}")],
        estimate_text(lo, kind), estimate_text(hi, kind),
    )


def comparison_plot(decision: dict[str, Any], kind: str) -> IntervalPlot | None:
    """A comparison rule's interval on candidate − baseline against 0 and its margins."""
    lower, upper = decision.get("lower"), decision.get("upper")
    if lower is None or upper is None:
        return None
    margin = float(decision.get("threshold") or 0.0)
    rule_kind = decision.get("kind")
    est = decision.get("estimate")
    reach = max(abs(lower), abs(upper), margin, 1e-9) * 1.15
    x = _scale(-reach, reach)
    bars = [Bar(x(0.0), "0")]
    if margin and rule_kind in ("non_inferiority", "equivalence"):
        bars.append(Bar(x(-margin), difference_text(-margin, kind)))
    if margin and rule_kind == "equivalence":
        bars.append(Bar(x(margin), difference_text(margin, kind)))
    if margin and rule_kind == "superiority":
        bars.append(Bar(x(margin), difference_text(margin, kind)))
    return IntervalPlot(
        x(lower), x(upper), None if est is None else x(est), bars,
        difference_text(-reach, kind), difference_text(reach, kind),
    )
