"""Prediction-powered estimates of a person's pass rate.

Checked three ways: against an independent numpy implementation written here from the
PPI++ paper's formulas (the reference package ``ppi-python`` is not a test dependency:
its wheel installs a top-level ``tests`` package that shadows this repository's; the last
test compares with it when it can be imported, e.g. with it on PYTHONPATH); by the
identities lam = 0 (the labels alone) and lam = 1 (plain PPI); and by simulation: over a
grid of judge error rates the interval covers the true rate at least level - 3 Monte
Carlo standard errors of the time.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from oloproof.stats.ppi import ppi_mean, ppi_power_lambda


def _reference(y: np.ndarray, f: np.ndarray, fu: np.ndarray, level: float,
               lam: float | None = None) -> tuple[float, float, float, float]:
    """PPI++ for a mean, from Angelopoulos, Duchi and Zrnic (2023), eq. for the mean."""
    n, big_n = len(y), len(fu)
    if lam is None:
        cov = np.mean((y - y.mean()) * (f - f.mean()))
        var = np.var(np.concatenate([f, fu]), ddof=1)
        lam = 0.0 if var == 0 else float(np.clip(cov / ((1 + n / big_n) * var), 0, 1))
    theta = lam * fu.mean() + (y - lam * f).mean()
    se = math.sqrt(np.var(lam * fu) / big_n + np.var(y - lam * f) / n)
    z = norm.ppf(1 - (1 - level) / 2)
    return theta, max(0.0, theta - z * se), min(1.0, theta + z * se), lam


def _sample(rng: random.Random, p: float, sens: float, spec: float, n: int, big_n: int
            ) -> tuple[list[float], list[float], list[float]]:
    def one() -> tuple[float, float]:
        y = rng.random() < p
        f = rng.random() < (sens if y else 1 - spec)
        return float(y), float(f)

    labelled = [one() for _ in range(n)]
    unlabelled = [one()[1] for _ in range(big_n)]
    return [y for y, _ in labelled], [f for _, f in labelled], unlabelled


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_matches_an_independent_implementation(seed: int, level: float) -> None:
    rng = random.Random(seed)
    y, f, fu = _sample(rng, 0.3 + 0.08 * seed, 0.9, 0.8, 20 + 7 * seed, 150 + 31 * seed)
    got = ppi_mean(y, f, fu, level, small_sample=False)
    theta, lo, hi, lam = _reference(np.array(y), np.array(f), np.array(fu), level)
    assert got.lam == pytest.approx(lam, abs=1e-12)
    assert got.estimate == pytest.approx(theta, abs=1e-12)
    assert got.interval.lower == pytest.approx(lo, abs=1e-10)
    assert got.interval.upper == pytest.approx(hi, abs=1e-10)


def test_lambda_zero_is_the_labels_alone_and_one_is_plain_ppi() -> None:
    rng = random.Random(5)
    y, f, fu = _sample(rng, 0.6, 0.85, 0.9, 60, 300)
    alone = ppi_mean(y, f, fu, 0.95, lam=0.0, small_sample=False)
    assert alone.estimate == pytest.approx(sum(y) / len(y), abs=1e-12)
    plain = ppi_mean(y, f, fu, 0.95, lam=1.0)
    expected = sum(fu) / len(fu) + (sum(y) - sum(f)) / len(y)
    assert plain.estimate == pytest.approx(expected, abs=1e-12)


def test_a_judge_that_never_varies_carries_no_weight() -> None:
    assert ppi_power_lambda([1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [1.0] * 10) == 0.0


def test_refuses_what_it_cannot_estimate() -> None:
    with pytest.raises(ValueError):
        ppi_mean([], [], [1.0])
    with pytest.raises(ValueError):
        ppi_mean([1.0], [1.0], [])
    with pytest.raises(ValueError):
        ppi_mean([1.0], [1.0, 0.0], [1.0])


def test_the_small_sample_interval_keeps_the_estimate_and_contains_the_reference() -> None:
    rng = random.Random(9)
    for _ in range(30):
        y, f, fu = _sample(rng, 0.8, 0.95, 0.9, 30, 200)
        wide, plain = ppi_mean(y, f, fu), ppi_mean(y, f, fu, small_sample=False)
        assert wide.estimate == plain.estimate and wide.lam == plain.lam
        assert wide.interval.lower <= plain.interval.lower
        assert wide.interval.upper >= plain.interval.upper


# Judge error rates: (sensitivity, specificity), crossed with true rates and label counts.
GRID = [(sens, spec) for sens in (0.98, 0.9, 0.7) for spec in (0.98, 0.85, 0.6)]
REPS = 1500


def _coverage(rng: random.Random, p: float, sens: float, spec: float, n: int,
              small_sample: bool, level: float = 0.95) -> float:
    covered = 0
    for _ in range(REPS):
        y, f, fu = _sample(rng, p, sens, spec, n, 300)
        interval = ppi_mean(y, f, fu, level, small_sample=small_sample).interval
        covered += interval.lower <= p <= interval.upper
    return covered / REPS


@pytest.mark.slow
@pytest.mark.parametrize("n", [30, 100])
@pytest.mark.parametrize("p", [0.5, 0.85])
def test_coverage_over_a_grid_of_judge_error_rates(p: float, n: int) -> None:
    level = 0.95
    rng = random.Random(20231101 + n)
    mc_error = math.sqrt(level * (1 - level) / REPS)
    report = []
    for sens, spec in GRID:
        coverage = _coverage(rng, p, sens, spec, n, small_sample=True, level=level)
        report.append((sens, spec, coverage))
    print(f"\nn={n} p={p}: " + ", ".join(f"({a}, {b}) {c:.3f}" for a, b, c in report))
    for sens, spec, coverage in report:
        assert coverage >= level - 3 * mc_error, (sens, spec, coverage)


@pytest.mark.slow
def test_the_reference_interval_undercovers_with_few_labels() -> None:
    # Why the default is widened: 30 labels, a good judge, a rate of 85%.
    coverage = _coverage(random.Random(3), 0.85, 0.98, 0.98, 30, small_sample=False)
    assert coverage < 0.93


def _ppi_python() -> Any:
    """The reference package, from the folder `make test` installs it in (kept apart from
    site-packages: its wheel ships a top-level `tests` package that would shadow ours)."""
    folder = Path(sys.prefix) / "ppi-reference"
    if str(folder) not in sys.path and folder.is_dir():
        sys.path.append(str(folder))
    import ppi_py

    return ppi_py


@pytest.mark.slow  # measured: 4.2 s in-process on the shared machine (issue 31 tiers)
def test_matches_ppi_python() -> None:
    ppi_py = _ppi_python()
    for seed in range(5):
        rng = random.Random(100 + seed)
        y, f, fu = _sample(rng, 0.7, 0.9, 0.75, 40 + 10 * seed, 400)
        got = ppi_mean(y, f, fu, 0.95, small_sample=False)
        lo, hi = ppi_py.ppi_mean_ci(np.array(y), np.array(f), np.array(fu), alpha=0.05)
        point = ppi_py.ppi_mean_pointestimate(np.array(y), np.array(f), np.array(fu))
        assert got.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-10)
        assert got.interval.lower == pytest.approx(max(0.0, float(np.ravel(lo)[0])), abs=1e-10)
        assert got.interval.upper == pytest.approx(min(1.0, float(np.ravel(hi)[0])), abs=1e-10)
