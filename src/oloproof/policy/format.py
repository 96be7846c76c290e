"""How numbers behind a decision are printed: one copy for runs, comparisons and plans.

Three promises, each checked by tests/policy/test_format.py:

- a threshold, margin or confidence level is printed exactly as the user wrote it
  (0.762 is ``76.2%``, 0.7625 is ``76.25%``, a level of 0.999 is ``99.9%``): the shortest
  decimal that reads back as the same float (Python's ``repr``) is scaled, never rounded;
- interval bounds are rounded outward (the lower bound down, the upper bound up), so the
  printed interval contains the computed one;
- when a decision is printed beside an interval, the bounds get as many digits as it takes
  for the printed comparison to be true of the printed numbers (``[76.24%, 99.9%]: lower ≥
  76.2%`` and never ``[76.2%, …]: lower ≥ 76.25%``).

Bounds are converted through ``repr`` too, so a bound that is the float 0.7 prints as
``70.0%`` and not ``69.9%``: the decimal of ``repr`` lies within half a unit in the last
place of the float and orders floats exactly, so comparing these decimals gives the same
answer as comparing the floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

from oloproof.enums import MetricKind

__all__ = [
    "Agrees",
    "as_decimal",
    "difference_interval_text",
    "difference_text",
    "estimate_text",
    "interval_text",
    "level_text",
    "percent_text",
    "value_text",
]

#: Given the printed bounds (in the metric's own units), whether the printed comparison
#: says what the computed one says.
Agrees = Callable[[Decimal, Decimal], bool]

_HUNDRED = Decimal(100)
_MAX_EXTRA_DIGITS = 15


def as_decimal(x: float) -> Decimal:
    """The shortest decimal that reads back as ``x`` (what the user wrote, for a config value)."""
    return Decimal(repr(float(x)))


def _plain(d: Decimal, min_decimals: int = 0) -> str:
    """A decimal without exponent or trailing zeros, with at least ``min_decimals`` decimals."""
    text = format(d.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    decimals = len(text.split(".")[1]) if "." in text else 0
    if decimals < min_decimals:
        text += ("." if decimals == 0 else "") + "0" * (min_decimals - decimals)
    return "0" if text in ("-0", "") else text


def level_text(level: float) -> str:
    """A confidence level as written: 0.95 is ``95%``, 0.975 ``97.5%``, 0.999 ``99.9%``,
    0.9999999999 ``99.99999999%``.

    A level computed rather than written (a multiplicity adjustment: 1 - 0.05/3) has more
    digits than anyone reads; it is shown rounded down (so the level printed is never more
    than the one used) to three decimals of a percent, or more when its distance to 100%
    needs them to keep three significant digits: 1 - 0.05/3 is ``98.333%``, 1 - 0.001/7
    ``99.9857%``. Never ``99.999%`` for a level of 0.9999999999 (issue 33).
    """
    exact = as_decimal(level) * _HUNDRED
    decimals = -exact.normalize().as_tuple().exponent  # type: ignore[operator]
    if decimals <= 4:
        return f"{_plain(exact)}%"
    rest = _HUNDRED - exact  # what the level leaves out, in percent
    places = 3
    if 0 < rest < 1:
        # the position of its first significant digit, and two more
        places = max(places, -rest.adjusted() + 2)
    shown = _round(exact, -min(places, decimals), ROUND_FLOOR)
    return f"{_plain(shown)}%"


def percent_text(x: float, *, signed: bool = False) -> str:
    """A rate the user wrote (a threshold), exactly, with at least one decimal: ``76.25%``."""
    text = _plain(as_decimal(x) * _HUNDRED, 1)
    if signed and not text.startswith("-"):
        text = "+" + text
    return f"{text}%"


def value_text(x: float, kind: MetricKind | str) -> str:
    """A threshold as the user wrote it: ``76.2%`` on a rate, ``35`` or ``0.125`` on a mean."""
    if kind == MetricKind.BINARY:
        return percent_text(x)
    return _plain(as_decimal(x))


def estimate_text(x: float | None, kind: MetricKind | str) -> str:
    """An estimate (compared with nothing), to nearest: ``72.2%`` or 4 significant digits."""
    if x is None:
        return ""
    if kind == MetricKind.BINARY:
        return f"{100.0 * x:.1f}%"
    return f"{x:.4g}"


def difference_text(x: float | None, kind: MetricKind | str) -> str:
    """A difference: ``+22.2 pts`` for rates, ``-0.125`` for means (to nearest)."""
    if x is None:
        return ""
    if kind == MetricKind.BINARY:
        return f"{100.0 * x:+.1f} pts"
    return f"{x:+.4g}"


def _round(d: Decimal, exponent: int, rounding: str) -> Decimal:
    return d.quantize(Decimal(1).scaleb(exponent), rounding=rounding)


def _mean_exponent(lower: float, upper: float) -> int:
    """The exponent of the last of 4 significant digits of the larger bound."""
    biggest = max(abs(lower), abs(upper))
    if biggest == 0.0 or not math.isfinite(biggest):
        return -4
    return math.floor(math.log10(biggest)) - 3


def outward(
    lower: float, upper: float, exponent: int, agrees: Agrees | None = None
) -> tuple[Decimal, Decimal]:
    """The bounds rounded outward to 10**exponent, with more digits until ``agrees``."""
    lo, hi = as_decimal(lower), as_decimal(upper)
    for step in range(_MAX_EXTRA_DIGITS + 1):
        e = exponent - step
        out_lo, out_hi = _round(lo, e, ROUND_FLOOR), _round(hi, e, ROUND_CEILING)
        if agrees is None or agrees(out_lo, out_hi):
            return out_lo, out_hi
    return lo, hi


def _fixed(d: Decimal, signed: bool = False) -> str:
    """``d`` in fixed point; in exponent notation (``1.000e+308``, its digits kept) when
    that would take more than 16 digits before or 16 zeros after the point."""
    text = format(d, "e" if d and not -16 <= d.adjusted() < 16 else "f")
    if text.startswith("-") and d == 0:
        text = text[1:]
    if signed and not text.startswith("-"):
        text = "+" + text
    return text


def interval_text(
    lower: float | None,
    upper: float | None,
    kind: MetricKind | str,
    agrees: Agrees | None = None,
) -> str:
    """An interval rounded outward: ``[46.5%, 90.4%]`` on a rate (one decimal, more when the
    decision needs them), 4 significant digits (or more) on a mean."""
    if lower is None or upper is None:
        return ""
    if kind == MetricKind.BINARY:
        # one decimal of a percent is 10**-3 of the rate
        lo, hi = outward(lower, upper, -3, agrees)
        return f"[{_plain(lo * _HUNDRED, 1)}%, {_plain(hi * _HUNDRED, 1)}%]"
    exponent = _mean_exponent(lower, upper)
    lo, hi = outward(lower, upper, exponent, agrees)
    return f"[{_fixed(lo)}, {_fixed(hi)}]"


def difference_interval_text(
    lower: float | None,
    upper: float | None,
    kind: MetricKind | str,
    agrees: Agrees | None = None,
) -> str:
    """An interval on a difference, rounded outward: ``[-1.6, +45.3] pts`` or ``[-0.2, +0.05]``."""
    if lower is None or upper is None:
        return ""
    if kind == MetricKind.BINARY:
        lo, hi = outward(lower, upper, -3, agrees)
        lo_text = _plain(lo * _HUNDRED, 1)
        hi_text = _plain(hi * _HUNDRED, 1)
        return f"[{_sign(lo_text)}, {_sign(hi_text)}] pts"
    exponent = _mean_exponent(lower, upper)
    lo, hi = outward(lower, upper, exponent, agrees)
    return f"[{_fixed(lo, True)}, {_fixed(hi, True)}]"


def _sign(text: str) -> str:
    return text if text.startswith("-") else "+" + text


def nearest_percent(x: float, decimals: int = 1) -> str:
    """A percentage rounded to nearest (for shares that decide nothing)."""
    d = _round(as_decimal(x) * _HUNDRED, -decimals, ROUND_HALF_EVEN)
    return f"{_plain(d, decimals)}%"
