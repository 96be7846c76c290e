"""Plan sizes against brute force for every rule kind x margin x direction, and with
missing cases held missing. The references here are written independently: scipy's beta
quantiles for Clopper-Pearson, a direct transcription of Newcombe's method 10, and a loop
over every size."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import TYPE_CHECKING

import pytest
from scipy import stats

from oloproof.policy.rules import (
    comparison_judge,
    on_comparison_bar,
    threshold_judge,
)
from oloproof.stats import binary_rule_size, paired_binary_rule_size

if TYPE_CHECKING:
    from oloproof.policy.rules import ComparisonKind, Direction


def _cp(k: int, n: int, level: float) -> tuple[float, float]:
    half = (1 - level) / 2
    lower = 0.0 if k == 0 else float(stats.beta.ppf(half, k, n - k + 1))
    upper = 1.0 if k == n else float(stats.beta.ppf(1 - half, k + 1, n - k))
    return lower, upper


def _state_min_max(lower: float, upper: float, t: float, direction: str) -> str | None:
    if direction == "min":
        return "PASS" if lower >= t else "FAIL" if upper < t else None
    return "PASS" if upper <= t else "FAIL" if lower > t else None


def _brute_binary_missing(
    k: int, n: int, m: int, t: float, direction: str, level: float, cap: int
) -> tuple[int, str] | None:
    for total in range(n + m + 1, cap + 1):
        seen = total - m
        kk = round(Fraction(k * seen, n))
        lower = _cp(kk, total, level)[0]  # every missing case failed
        upper = _cp(kk + m, total, level)[1]  # every missing case passed
        state = _state_min_max(lower, upper, t, direction)
        if state is not None:
            return total, state
    return None


@pytest.mark.parametrize(
    ("k", "n", "m", "t", "direction"),
    [
        (25, 27, 3, 0.80, "min"),
        (13, 18, 2, 0.60, "min"),
        (2, 30, 4, 0.20, "max"),
        (5, 40, 1, 0.05, "max"),
        (9, 10, 5, 0.70, "min"),
    ],
)
def test_binary_size_with_missing_held_equals_brute_force(
    k: int, n: int, m: int, t: float, direction: Direction
) -> None:
    cap = 2500
    result = binary_rule_size(k, n, t, threshold_judge(t, direction), 0.95, missing=m,
                              limit=cap)
    brute = _brute_binary_missing(k, n, m, t, direction, 0.95, cap)
    found = (result.total, result.state_at_total) if result.status == "sized" else None
    assert found == brute


def test_the_issue_example_25_of_27_with_3_missing() -> None:
    # decided at 72 observed with the 3 still missing
    result = binary_rule_size(25, 27, 0.80, threshold_judge(0.80, "min"), 0.95, missing=3)
    assert result.status == "sized"
    assert result.total == 75 and result.more == 45 and result.state_at_total == "PASS"


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _newcombe(a: int, b: int, c: int, d: int, z: float) -> tuple[float, float]:
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _wilson(a + b, n, z)
    l2, u2 = _wilson(a + c, n, z)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    num = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
    phi = 0.0 if denom == 0 else num / math.sqrt(denom)
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return max(-1.0, (b - c) / n - dl), min(1.0, (b - c) / n + du)


def _scale(cells: tuple[int, ...], total: int) -> tuple[int, int, int, int]:
    n = sum(cells)
    shares = [Fraction(x * total, n) for x in cells]
    floors = [math.floor(x) for x in shares]
    order = sorted(range(4), key=lambda i: (-(shares[i] - floors[i]), (0, 3, 2, 1).index(i)))
    for i in order[: total - sum(floors)]:
        floors[i] += 1
    return floors[0], floors[1], floors[2], floors[3]


def _rule(lower: float, upper: float, kind: str, m: float) -> str | None:
    if kind == "superiority":
        return "PASS" if lower > m else "FAIL" if upper <= m else None
    if kind == "non_inferiority":
        return "PASS" if lower > -m else "FAIL" if upper <= -m else None
    if -m < lower and upper < m:
        return "PASS"
    return "FAIL" if upper <= -m or lower >= m else None


TABLES = [(40, 12, 4, 44), (40, 4, 12, 44), (30, 6, 5, 29), (20, 9, 1, 10)]
KINDS: list[tuple[ComparisonKind, float]] = [
    ("superiority", 0.0),
    ("superiority", 0.03),
    ("superiority", 0.1),
    ("non_inferiority", 0.02),
    ("non_inferiority", 0.1),
    ("equivalence", 0.05),
    ("equivalence", 0.15),
]


@pytest.mark.parametrize(("cells", "rule"), list(itertools.product(TABLES, KINDS)))
def test_paired_size_every_kind_and_margin_equals_brute_force(
    cells: tuple[int, int, int, int], rule: tuple[ComparisonKind, float]
) -> None:
    kind, margin = rule
    cap = 2500
    n = sum(cells)
    on_bar = on_comparison_bar((cells[1] - cells[2]) / n, kind, margin)
    result = paired_binary_rule_size(
        *cells, comparison_judge(kind, margin), on_bar, 0.95, limit=cap
    )
    z = float(stats.norm.ppf(0.975))
    if result.status == "already_decided":
        assert _rule(*_newcombe(*cells, z), kind, margin) == result.state_at_total
        return
    brute = None
    for size in range(n + 1, cap + 1):
        state = _rule(*_newcombe(*_scale(cells, size), z), kind, margin)
        if state is not None:
            brute = (size, state)
            break
    found = (result.total, result.state_at_total) if result.status == "sized" else None
    assert found == brute, (cells, kind, margin, result)
