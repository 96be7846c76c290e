"""Sample sizes against brute-force searches."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import pytest
from scipy import stats

from oloproof.policy.rules import (
    comparison_judge,
    on_comparison_bar,
    threshold_judge,
)
from oloproof.stats import (
    binary_rule_size,
    mean_rule_size,
    paired_binary_rule_size,
    paired_mean_rule_size,
)
from oloproof.stats.sample_size import SizeResult, apportion, round_half_even

if TYPE_CHECKING:
    from oloproof.policy.rules import ComparisonKind, Direction


def _binary(
    k: int, n: int, t: float, direction: Direction, level: float = 0.95, **kw: int
) -> SizeResult:
    return binary_rule_size(k, n, t, threshold_judge(t, direction), level, **kw)


def _paired(
    a: int, b: int, c: int, d: int, kind: ComparisonKind, margin: float = 0.0,
    level: float = 0.95, limit: int = 10_000_000,
) -> SizeResult:
    n = a + b + c + d
    on_bar = bool(n) and on_comparison_bar((b - c) / n, kind, margin)
    return paired_binary_rule_size(
        a, b, c, d, comparison_judge(kind, margin), on_bar, level, limit=limit
    )


def _mean(
    mean: float, sd: float | None, n: int, t: float, direction: Direction,
    level: float = 0.95, limit: int = 10_000_000, missing: int = 0,
    value_range: tuple[float, float] | None = None,
) -> SizeResult:
    return mean_rule_size(
        mean, sd, n, threshold_judge(t, direction), mean == t, level, missing=missing,
        value_range=value_range, limit=limit,
    )


def _pmean(mean: float, sd: float | None, n: int, kind: ComparisonKind, margin: float = 0.0
           ) -> SizeResult:
    return paired_mean_rule_size(
        mean, sd, n, comparison_judge(kind, margin), on_comparison_bar(mean, kind, margin)
    )

# ------------------------------------------------------------------ binary run rules


def exact_round(k: int, n: int, total: int) -> int:
    """round(k/n * total) on the exact rational value, halves to even (Python's round)."""
    return round(Fraction(k * total, n))


def _cp_states(
    k: int, n: int, sizes: np.ndarray, t: float, direction: str, level: float
) -> list[str | None]:
    num = k * sizes
    floor, rem = num // n, num % n
    twice = 2 * rem
    passes = np.where((twice > n) | ((twice == n) & (floor % 2 == 1)), floor + 1, floor)
    half = (1 - level) / 2
    with np.errstate(all="ignore"):
        lower = np.where(passes == 0, 0.0, stats.beta.ppf(half, passes, sizes - passes + 1))
        upper = np.where(passes == sizes, 1.0, stats.beta.ppf(1 - half, passes + 1, sizes - passes))
    if direction == "min":
        return ["PASS" if lo >= t else "FAIL" if up < t else None for lo, up in zip(lower, upper)]
    return ["PASS" if up <= t else "FAIL" if lo > t else None for lo, up in zip(lower, upper)]


def _brute_binary(
    k: int, n: int, t: float, direction: str, level: float, cap: int
) -> tuple[int, str] | None:
    """The smallest N in (n, cap] whose projected count is decided, by checking every N."""
    for start in range(n + 1, cap + 1, 4000):
        sizes = np.arange(start, min(start + 4000, cap + 1), dtype=np.int64)
        for size, state in zip(sizes, _cp_states(k, n, sizes, t, direction, level)):
            if state is not None:
                return int(size), state
    return None


def test_the_support_bot_example() -> None:
    result = _binary(13, 18, 0.70, "min", 0.95)
    assert result.status == "sized"
    assert (result.total, result.more, result.state_at_total) == (1632, 1614, "PASS")
    # the figure depends on rounding halves to even: at 1629, 13/18 * 1629 = 1176.5 -> 1176
    assert Fraction(13 * 1629, 18) == Fraction(2353, 2)
    assert exact_round(13, 18, 1629) == 1176
    states = _cp_states(13, 18, np.arange(1620, 1633), 0.70, "min", 0.95)
    assert states[-1] == "PASS" and all(s is None for s in states[:-1])
    assert _brute_binary(13, 18, 0.70, "min", 0.95, 2000) == (1632, "PASS")


BINARY_GRID = [
    (13, 18, 0.70, "min", 0.95),
    (13, 18, 0.70, "max", 0.95),
    (13, 18, 0.60, "min", 0.90),
    (7, 10, 0.70, "min", 0.95),  # on the bar
    (7, 10, 0.70, "max", 0.99),  # on the bar
    (1, 3, 0.5, "max", 0.95),
    (0, 12, 0.1, "min", 0.95),
    (0, 12, 0.1, "max", 0.95),
    (5, 5, 0.8, "min", 0.95),
    (5, 5, 0.9, "max", 0.8),
    (9, 10, 0.95, "min", 0.999),
    (45, 50, 0.93, "max", 0.9),
    (30, 40, 0.70, "min", 0.8),
    (17, 20, 0.9, "min", 0.99),
    (2, 25, 0.05, "max", 0.95),
    (1, 1, 0.5, "min", 0.95),
    (40, 41, 0.99, "max", 0.95),
    (3, 1000, 0.001, "max", 0.95),
]


@pytest.mark.parametrize(("k", "n", "t", "direction", "level"), BINARY_GRID)
def test_binary_size_equals_brute_force(
    k: int, n: int, t: float, direction: str, level: float
) -> None:
    cap = 12_000
    result = _binary(k, n, t, direction, level, limit=cap)  # type: ignore[arg-type]
    brute = _brute_binary(k, n, t, direction, level, cap)
    if k / n == t:
        assert result.status == "on_the_bar"
        assert brute is None
        return
    assert result.status in ("sized", "beyond_limit")
    if brute is None:
        assert result.status == "beyond_limit"
    else:
        assert (result.total, result.state_at_total) == brute
        assert result.more == brute[0] - n


def test_binary_size_random_grid_equals_brute_force() -> None:
    rng = random.Random(3)
    for _ in range(25):
        n = rng.randint(1, 40)
        k = rng.randint(0, n)
        t = rng.choice([0.5, 0.75, 0.9, 0.95, round(rng.random(), 2) or 0.5])
        direction = rng.choice(["min", "max"])
        level = rng.choice([0.8, 0.9, 0.95, 0.99])
        result = _binary(k, n, t, direction, level, limit=5000)  # type: ignore[arg-type]
        if result.status in ("already_decided", "on_the_bar"):
            continue
        brute = _brute_binary(k, n, t, direction, level, 5000)
        found = (result.total, result.state_at_total) if result.status == "sized" else None
        assert found == brute, (k, n, t, direction, level)


def test_large_binary_answer_has_nothing_deciding_just_below() -> None:
    result = _binary(701, 1000, 0.70, "min", 0.95)
    assert result.status == "sized" and result.state_at_total == "PASS"
    assert result.total is not None and result.total > 100_000
    below = np.arange(result.total - 20_000, result.total + 1, dtype=np.int64)
    states = _cp_states(701, 1000, below, 0.70, "min", 0.95)
    assert states[-1] == "PASS" and all(s is None for s in states[:-1])


def test_binary_size_statuses() -> None:
    decided = _binary(30, 30, 0.8, "min")
    assert (decided.status, decided.total, decided.more, decided.state_at_total) == (
        "already_decided",
        30,
        0,
        "PASS",
    )
    assert _binary(0, 0, 0.8, "min").status == "not_computable"
    assert _binary(7, 10, 0.7, "min").status == "on_the_bar"
    far = _binary(7001, 10000, 0.70, "min", limit=1_000_000)
    assert far.status == "beyond_limit" and far.total is None
    assert _binary(5, 10, 0.0, "min").status == "already_decided"
    assert _binary(10, 10, 1.0, "min").status == "on_the_bar"
    with pytest.raises(ValueError):
        _binary(3, 2, 0.5, "min")
    with pytest.raises(ValueError):
        _binary(1, 2, 0.5, "above")  # type: ignore[arg-type]


def test_round_half_even_is_pythons_round_on_the_exact_value() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        n = rng.randint(1, 60)
        k = rng.randint(0, n)
        total = rng.randint(1, 5000)
        assert round_half_even(k * total, n) == round(Fraction(k * total, n))


# ---------------------------------------------------------------- paired binary rules


def _apportion_reference(cells: tuple[int, ...], total: int) -> list[int]:
    n = sum(cells)
    shares = [Fraction(c * total, n) for c in cells]
    out = [math.floor(s) for s in shares]
    tie = {0: 0, 3: 1, 2: 2, 1: 3}  # both_pass, both_fail, base_only, cand_only
    order = sorted(range(4), key=lambda i: (-(shares[i] - out[i]), tie[i]))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def _newcombe_reference(a: int, b: int, c: int, d: int, z: float) -> tuple[float, float]:
    n = a + b + c + d

    def wilson(x: int) -> tuple[float, float]:
        centre = (2 * x + z * z) / (2 * (n + z * z))
        half = z * math.sqrt(z * z + 4 * x * (1 - x / n)) / (2 * (n + z * z))
        return centre - half, centre + half

    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b)
    l2, u2 = wilson(a + c)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    phi = 0.0
    if margins:
        phi = (cross - n / 2 if cross > n / 2 else min(cross, 0)) / math.sqrt(margins)
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return (b - c) / n - dl, (b - c) / n + du


def _comparison(lower: float, upper: float, kind: str, m: float) -> str | None:
    if kind == "superiority":
        return "PASS" if lower > m else "FAIL" if upper <= m else None
    if kind == "non_inferiority":
        return "PASS" if lower > -m else "FAIL" if upper <= -m else None
    if lower > -m and upper < m:
        return "PASS"
    return "FAIL" if upper <= -m or lower >= m else None


def _brute_paired(
    cells: tuple[int, int, int, int], kind: str, m: float, level: float, cap: int
) -> tuple[int, str] | None:
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    for size in range(sum(cells) + 1, cap + 1):
        state = _comparison(*_newcombe_reference(*_apportion_reference(cells, size), z), kind, m)
        if state is not None:
            return size, state
    return None


def test_apportion_matches_the_largest_remainder_reference() -> None:
    rng = random.Random(9)
    for _ in range(500):
        cells = tuple(rng.randint(0, 30) for _ in range(4))
        if sum(cells) == 0:
            continue
        total = rng.randint(1, 3000)
        scaled = apportion(cells, total)  # type: ignore[arg-type]
        assert list(scaled) == _apportion_reference(cells, total)
        assert sum(scaled) == total
        for cell, share in zip(cells, scaled):
            assert abs(share - Fraction(cell * total, sum(cells))) < 1


PAIRED_GRID = [
    ((40, 10, 5, 45), "superiority", 0.0, 0.95),
    ((40, 5, 10, 45), "superiority", 0.0, 0.95),
    ((80, 6, 4, 10), "non_inferiority", 0.02, 0.95),
    ((20, 3, 6, 11), "non_inferiority", 0.05, 0.9),
    ((45, 2, 3, 50), "equivalence", 0.05, 0.95),
    ((11, 14, 15, 2), "superiority", 0.0, 0.95),
    ((30, 2, 2, 30), "superiority", 0.0, 0.95),  # on the bar
    ((30, 0, 0, 30), "non_inferiority", 0.01, 0.95),
    ((6, 13, 10, 8), "equivalence", 0.1, 0.9),
    ((0, 3, 0, 0), "superiority", 0.0, 0.95),
]


@pytest.mark.parametrize(("cells", "kind", "margin", "level"), PAIRED_GRID)
def test_paired_size_equals_brute_force(
    cells: tuple[int, int, int, int], kind: str, margin: float, level: float
) -> None:
    cap = 6000
    result = _paired(*cells, kind, margin, level, limit=cap)  # type: ignore[arg-type]
    if result.status in ("already_decided", "on_the_bar"):
        if result.status == "on_the_bar":
            assert _brute_paired(cells, kind, margin, level, cap) is None
        return
    brute = _brute_paired(cells, kind, margin, level, cap)
    found = (result.total, result.state_at_total) if result.status == "sized" else None
    assert found == brute


def test_paired_size_random_grid_equals_brute_force() -> None:
    rng = random.Random(4)
    checked = 0
    while checked < 15:
        cells = tuple(rng.randint(0, 20) for _ in range(4))
        if sum(cells) == 0:
            continue
        kind = rng.choice(["superiority", "non_inferiority", "equivalence"])
        margin = rng.choice([0.0, 0.02, 0.05, 0.1, 0.2])
        if kind != "superiority" and margin == 0.0:
            margin = 0.05
        result = _paired(*cells, kind, margin, 0.95, limit=3000)  # type: ignore[arg-type]
        if result.status in ("already_decided", "on_the_bar"):
            continue
        brute = _brute_paired(cells, kind, margin, 0.95, 3000)  # type: ignore[arg-type]
        found = (result.total, result.state_at_total) if result.status == "sized" else None
        assert found == brute, (cells, kind, margin)
        checked += 1


def test_paired_size_statuses() -> None:
    assert _paired(0, 0, 0, 0, "superiority").status == "not_computable"
    assert _paired(30, 2, 2, 30, "superiority").status == "on_the_bar"
    decided = _paired(10, 30, 0, 10, "superiority")
    assert decided.status == "already_decided" and decided.state_at_total == "PASS"
    big = _paired(400, 31, 29, 540, "superiority")
    assert big.status == "sized" and big.total is not None and big.total > 10_000


# ------------------------------------------------------------------ approximate MEANs


def _brute_mean(
    mean: float, sd: float, n: int, judge: object, level: float, cap: int
) -> int | None:
    for size in range(n + 1, cap + 1):
        half = stats.t.ppf(1 - (1 - level) / 2, size - 1) * sd / math.sqrt(size)
        if judge(mean - half, mean + half) is not None:  # type: ignore[operator]
            return size
    return None


@pytest.mark.parametrize(
    ("mean", "sd", "n", "t", "direction"),
    [(0.75, 0.2, 20, 0.7, "min"), (0.66, 0.3, 12, 0.7, "min"), (0.2, 0.15, 8, 0.25, "max")],
)
def test_mean_size_equals_brute_force(
    mean: float, sd: float, n: int, t: float, direction: str
) -> None:
    result = _mean(mean, sd, n, t, direction)  # type: ignore[arg-type]
    assert result.approximate and result.status == "sized"

    def judge(lower: float, upper: float) -> str | None:
        if direction == "min":
            return "PASS" if lower >= t else "FAIL" if upper < t else None
        return "PASS" if upper <= t else "FAIL" if lower > t else None

    assert result.total == _brute_mean(mean, sd, n, judge, 0.95, 5000)


def test_mean_size_statuses() -> None:
    assert _mean(0.7, 0.2, 20, 0.7, "min").status == "on_the_bar"
    assert _mean(0.7, None, 1, 0.6, "min").status == "not_computable"
    assert _mean(0.9, 0.0, 3, 0.6, "min").status == "already_decided"
    assert _mean(0.7001, 0.3, 20, 0.7, "min", limit=10_000).status == "beyond_limit"
    # nothing is clipped: the t interval above the range's end still has to clear the bar
    not_clipped = _mean(0.98, 0.05, 3, 1.0, "max", value_range=(0.0, 1.0))
    assert not_clipped.status == "sized" and not_clipped.state_at_total == "PASS"


def test_paired_mean_size() -> None:
    result = _pmean(0.03, 0.1, 30, "superiority")
    assert result.status == "sized" and result.approximate

    def superiority(lower: float, upper: float) -> str | None:
        return "PASS" if lower > 0 else "FAIL" if upper <= 0 else None

    assert result.total == _brute_mean(0.03, 0.1, 30, superiority, 0.95, 5000)
    assert _pmean(0.0, 0.1, 30, "superiority").status == "on_the_bar"
    eq = _pmean(0.0, 0.1, 30, "equivalence", 0.02)
    assert eq.status == "sized" and eq.state_at_total == "PASS"
    ni = _pmean(-0.05, 0.1, 30, "non_inferiority", 0.05)
    assert ni.status == "on_the_bar"
