"""How many cases a sequential run needs for a MEAN or an ``observed_count`` rule (what
``plan`` says of them, issue 26): stats/sequential.py ``mean_stopping`` (simulated, seeded,
pure Python) against a numpy simulation of the betting test written here from its
definition, and ``count_stopping`` (exact) against scipy's binomial and a numpy
simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from oloproof.stats.betting import TRUNCATION, Bets
from oloproof.stats.sequential import count_stopping, mean_stopping


def _numpy_mean_stopping(
    t: float, direction: str, value_range: tuple[float, float], pool: list[float],
    level: float, bets_horizon: int, horizon: int, runs: int, seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The betting test from its definition: per constant bet lam, the log capital
    sum log(1 + lam (x - m)) on the side that shows the mean above m and sum
    log(1 - lam (x - m)) on the other, each side's capital the mean over the bets, a
    decision once either reaches 2 / (1 - level). Returns each run's count of cases
    (horizon + 1 when undecided) and whether it passed."""
    lo, hi = value_range
    m = (t - lo) / (hi - lo)
    bets = np.array(Bets(bets_horizon, level).values)
    up_bets = np.minimum(bets, TRUNCATION / m)
    down_bets = np.minimum(bets, TRUNCATION / (1.0 - m))
    bar = math.log(2.0 / (1.0 - level))
    rng = np.random.default_rng(seed)
    values = (np.array(pool) - lo) / (hi - lo)
    up = np.zeros((runs, bets.size))
    down = np.zeros((runs, bets.size))
    count = np.full(runs, horizon + 1)
    passed = np.zeros(runs, dtype=bool)
    alive = np.ones(runs, dtype=bool)
    for n in range(1, horizon + 1):
        x = values[rng.integers(0, values.size, runs)][:, None]
        up += np.log1p(up_bets * (x - m))
        down += np.log1p(-down_bets * (x - m))
        e_up = np.log(np.mean(np.exp(up), axis=1))
        e_down = np.log(np.mean(np.exp(down), axis=1))
        hit_up = alive & (e_up >= bar)
        hit_down = alive & ~hit_up & (e_down >= bar)
        count[hit_up | hit_down] = n
        passed[hit_up] = direction == "min"
        passed[hit_down] = direction == "max"
        alive &= ~(hit_up | hit_down)
        if not alive.any():
            break
    return count, passed


@pytest.mark.slow  # two simulations of a few thousand runs: seconds
@pytest.mark.parametrize(("t", "direction", "pool"), [
    (2.0, "max", [0.0, 1.0, 2.0]),  # mean 1.0 under a budget of 2.0: PASS
    (1.3, "max", [0.0, 1.0, 2.0, 3.0]),  # mean 1.5 over a budget of 1.3: FAIL
    (7.0, "min", [6.0, 7.0, 8.0, 9.0, 10.0]),  # mean 8.0 over a floor of 7.0: PASS
])
def test_mean_stopping_agrees_with_a_numpy_simulation_of_the_betting_test(
    t: float, direction: str, pool: list[float]
) -> None:
    value_range, level, bets_horizon, horizon = (0.0, 10.0), 0.95, 2000, 3000
    ours = mean_stopping(t, direction, value_range, pool, level, bets_horizon, horizon,
                         runs=2000, seed=3)
    count, passed = _numpy_mean_stopping(t, direction, value_range, pool, level,
                                         bets_horizon, horizon, runs=4000, seed=11)
    assert ours.decided == 1.0 and (count <= horizon).all()
    reference_mean = float(np.mean(count))
    # Two independent simulations: their means differ by the Monte Carlo error only.
    se = float(np.std(count)) * math.sqrt(1 / 2000 + 1 / 4000)
    assert abs(ours.mean - reference_mean) <= 4 * se + 0.5, (ours, reference_mean, se)
    reference_median = float(np.median(count))
    assert ours.median is not None
    assert abs(ours.median - reference_median) <= 0.1 * reference_median + 2
    assert abs(ours.pass_share - float(np.mean(passed))) <= 0.03
    # Seeded: the same answer every time it is asked.
    assert mean_stopping(t, direction, value_range, pool, level, bets_horizon, horizon,
                         runs=2000, seed=3) == ours


def test_mean_stopping_says_when_most_runs_do_not_decide() -> None:
    """Scores exactly at the threshold: the test decides rarely (at most its error), so
    the median is beyond the horizon and says so (None), never a made-up figure."""
    found = mean_stopping(5.0, "max", (0.0, 10.0), [4.0, 6.0], 0.95, 500, 300, runs=60)
    assert found.median is None and found.decided < 0.5
    assert found.mean <= 300


@pytest.mark.parametrize(("budget", "rate", "horizon"), [
    (0, 0.02, 400), (3, 0.01, 600), (5, 0.05, 300), (10, 0.5, 1000), (2, 0.0, 250),
])
def test_count_stopping_is_exact_against_scipy(budget: int, rate: float, horizon: int) -> None:
    found = count_stopping(budget, rate, horizon)
    # P(count > n) = P(Binomial(n, rate) <= budget) for n < horizon; the count is never
    # more than the suite, and a PASS needs every one of its cases.
    expected_mean = math.fsum(float(stats.binom.cdf(budget, n, rate)) for n in range(horizon))
    assert found.mean == pytest.approx(expected_mean, rel=1e-9, abs=1e-9)
    assert found.pass_share == pytest.approx(float(stats.binom.cdf(budget, horizon, rate)),
                                             abs=1e-9)
    cdf = [1.0 - float(stats.binom.cdf(budget, n, rate)) for n in range(horizon)]
    median = next((n for n, p in enumerate(cdf) if p >= 0.5), horizon)
    assert found.median == median


@pytest.mark.slow  # 20,000 simulated runs
def test_count_stopping_agrees_with_a_numpy_simulation() -> None:
    budget, rate, horizon = 4, 0.03, 500
    rng = np.random.default_rng(5)
    fails = rng.random((20_000, horizon)) < rate
    over = np.cumsum(fails, axis=1) > budget
    count = np.where(over.any(axis=1), over.argmax(axis=1) + 1, horizon)
    found = count_stopping(budget, rate, horizon)
    se = float(np.std(count)) / math.sqrt(count.size)
    assert abs(found.mean - float(np.mean(count))) <= 4 * se
    assert abs(found.pass_share - float(np.mean(~over.any(axis=1)))) <= 0.015
