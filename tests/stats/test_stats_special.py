"""The pure-Python special functions against scipy."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import special, stats

import oloproof
from oloproof.stats import _special
from oloproof.stats.intervals import beta_ppf, t_ppf
from oloproof.stats.normal import Z95, acklam_ppf

SMALL_AND_LARGE = [0.05, 0.3, 0.5, 1.0, 2.0, 5.0, 13.0, 37.5, 100.0, 1000.0, 2000.0, 20000.0]
T_PROBS = [1e-8, 5e-4, 0.005, 0.025, 0.05, 0.1, 0.25, 0.4, 0.5, 0.6, 0.9, 0.95, 0.975, 0.9995]
PROBS = [1e-12, 1e-6, 5e-4, 0.005, 0.025, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.995]


def test_acklam_gives_the_specified_z() -> None:
    assert acklam_ppf(0.975) == 1.959963986120195
    assert Z95 == 1.959963986120195
    # it is an approximation: the exact value differs in the ninth digit
    assert abs(Z95 - 1.959963984540054) > 1e-9


def test_acklam_is_within_its_published_error() -> None:
    for p in [1e-10, 1e-4, 0.01, 0.02425, 0.1, 0.5, 0.8, 0.97575, 0.999, 1 - 1e-9]:
        exact = stats.norm.ppf(p)
        assert abs(acklam_ppf(p) - exact) <= 1.2e-9 * abs(exact) + 1e-15


def test_betainc_matches_scipy() -> None:
    for a in SMALL_AND_LARGE:
        for b in SMALL_AND_LARGE:
            for x in [1e-8, 1e-4, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, a / (a + b)]:
                ours = _special.betainc(a, b, x)
                ref = special.betainc(a, b, x)
                # scipy itself loses digits near the underflow threshold (e.g. at
                # (2000, 13, 0.7), where the exact value is 7.5261534565563e-286)
                assert ours == pytest.approx(ref, rel=1e-10, abs=1e-250), (a, b, x)


def test_betainc_tails_keep_relative_accuracy() -> None:
    # the smaller tail is not obtained as 1 - (something close to 1)
    lower, upper = _special._betainc_pair(30.0, 3000.0, 0.03, 0.97)
    assert upper == pytest.approx(special.betaincc(30.0, 3000.0, 0.03), rel=1e-11)
    lower, upper = _special._betainc_pair(5.0, 500.0, 1e-4, 1 - 1e-4)
    assert lower == pytest.approx(special.betainc(5.0, 500.0, 1e-4), rel=1e-11)


# boost's root finder warns about (q=1e-12, a=0.5, b=2) although its answer agrees with ours
@pytest.mark.filterwarnings("ignore:Error in function boost:RuntimeWarning")
def test_beta_ppf_matches_scipy_on_a_grid() -> None:
    for a in SMALL_AND_LARGE:
        for b in SMALL_AND_LARGE:
            for q in PROBS:
                ours = beta_ppf(q, a, b)
                ref = stats.beta.ppf(q, a, b)
                assert abs(ours - ref) <= 1e-10 * max(1.0, ref), (q, a, b, ours, ref)


@pytest.mark.parametrize(
    ("a", "b"),
    [(0.5, 5e6), (1.0, 1e6), (1000.0, 1e6), (5e5, 5e5), (3e6, 2.0), (0.1, 0.1), (1e-3, 5.0)],
)
def test_beta_ppf_round_trips_for_extreme_parameters(a: float, b: float) -> None:
    # scipy's own beta.ppf gives up on some of these, so check I_x(a, b) = q instead, allowing
    # for the spacing of doubles around x (near 1 a tail can be steeper than that spacing).
    for q in [1e-9, 0.0005, 0.025, 0.5, 0.975, 0.9995]:
        x = beta_ppf(q, a, b)
        if x == 0.0:
            # the true quantile is below the smallest double
            assert special.betainc(a, b, 5e-324) >= q
            continue
        spacing = 4 * math.ulp(x) * stats.beta.pdf(x, a, b)
        if q <= 0.5:
            assert abs(special.betainc(a, b, x) - q) <= 1e-8 * q + spacing
        else:
            assert abs(special.betaincc(a, b, x) - (1 - q)) <= 1e-8 * (1 - q) + spacing


def test_beta_ppf_edges() -> None:
    assert beta_ppf(0.0, 2.0, 3.0) == 0.0
    assert beta_ppf(1.0, 2.0, 3.0) == 1.0
    with pytest.raises(ValueError):
        beta_ppf(1.5, 2.0, 3.0)
    with pytest.raises(ValueError):
        beta_ppf(0.5, 0.0, 3.0)


def test_t_ppf_matches_scipy() -> None:
    dfs = [1, 2, 3, 4, 5, 7, 10, 17, 29, 50, 99, 250, 999, 1999, 2.5, 0.7]
    for df in dfs:
        for q in T_PROBS:
            ours = t_ppf(q, df)
            ref = stats.t.ppf(q, df)
            assert abs(ours - ref) <= 1e-10 * max(1.0, abs(ref)), (q, df, ours, ref)
    assert t_ppf(0.5, 12) == 0.0
    assert t_ppf(0.0, 3) == -math.inf
    assert t_ppf(1.0, 3) == math.inf
    assert _special.t_isf(0.025, 10) == pytest.approx(stats.t.isf(0.025, 10), rel=1e-13)


def test_binomial_helpers_match_scipy() -> None:
    for n, k, p in [
        (10, 3, 0.3),
        (1000, 700, 0.7),
        (2000, 1, 0.001),
        (50, 49, 0.99),
        (10**6, 3000, 0.003),
    ]:
        assert _special.binom_pmf(k, n, p) == pytest.approx(stats.binom.pmf(k, n, p), rel=1e-9)
        cdf, sf = _special.binom_tails(k, n, p)
        assert cdf == pytest.approx(stats.binom.cdf(k, n, p), rel=1e-9)
        assert sf == pytest.approx(stats.binom.sf(k, n, p), rel=1e-9)


def test_runtime_imports_neither_scipy_nor_numpy() -> None:
    code = (
        "import sys, oloproof.stats, oloproof.stats.sample_size;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'numpy', 'statistics')))"
    )
    src = str(Path(oloproof.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"
