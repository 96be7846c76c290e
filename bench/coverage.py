"""Coverage of Oloproof's intervals, measured: ``python bench/coverage.py``.

Computes exact coverage where the outcomes can be enumerated (binomial, small multinomial)
and seeded simulations elsewhere, then writes the tables into docs/statistics.md between the
markers below (the section is owned by this script; the rest of the file is prose).

Run from the repository root; it takes well under two minutes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from oloproof.stats import (
    Z95,
    clopper_pearson,
    clopper_pearson_bounded,
    paired_proportion_difference,
    wilson,
)
from oloproof.stats._special import t_isf

DOC = ROOT / "docs" / "statistics.md"
BEGIN = "<!-- coverage:begin (written by bench/coverage.py; edits here are overwritten) -->"
END = "<!-- coverage:end -->"
SEED = 20240601
REPS = 20_000
P_GRID = [0.001, 0.01, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
          0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 0.99, 0.999]  # fmt: skip


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def binomial_exact_coverage(bounds: list[tuple[float, float]], n: int, p: float) -> float:
    ks = np.arange(n + 1)
    lower = np.array([b[0] for b in bounds])
    upper = np.array([b[1] for b in bounds])
    pmf = stats.binom.pmf(ks, n, p)
    return float(pmf[(lower <= p) & (p <= upper)].sum())


def binomial_simulated_coverage(
    bounds: list[tuple[float, float]], n: int, p: float, rng: np.random.Generator
) -> float:
    lower = np.array([b[0] for b in bounds])
    upper = np.array([b[1] for b in bounds])
    draws = rng.binomial(n, p, size=REPS)
    return float(np.mean((lower[draws] <= p) & (p <= upper[draws])))


def clopper_pearson_table(rng: np.random.Generator) -> list[str]:
    rows = [
        "| level | n | exact: min over p | exact: mean over p | simulated: min | simulated: mean |",
        "|---|---|---|---|---|---|",
    ]
    for level in (0.9, 0.95, 0.99):
        for n in (10, 30, 100):
            bounds = [
                (ci.lower, ci.upper) for ci in (clopper_pearson(k, n, level) for k in range(n + 1))
            ]
            exact = [binomial_exact_coverage(bounds, n, p) for p in P_GRID]
            sim = [binomial_simulated_coverage(bounds, n, p, rng) for p in P_GRID]
            rows.append(
                f"| {level:g} | {n} | {pct(min(exact))} | {pct(float(np.mean(exact)))} "
                f"| {pct(min(sim))} | {pct(float(np.mean(sim)))} |"
            )
    return rows


def bounded_table(rng: np.random.Generator) -> list[str]:
    """Missing cases hidden at random or, worst case, exactly the failures, of n + m cases."""
    rows = [
        "| n observed + m missing | missing cases are | min over p | mean over p |",
        "|---|---|---|---|",
    ]
    for n, m in ((27, 3), (90, 10), (20, 10)):
        total = n + m
        for mode in ("a random subset", "the failures first"):
            coverages = []
            for p in P_GRID:
                passes = rng.binomial(total, p, size=REPS)
                if mode == "a random subset":
                    hidden_passes = rng.hypergeometric(passes, total - passes, m)
                else:
                    hidden_passes = np.maximum(0, m - (total - passes))
                observed = passes - hidden_passes
                cache: dict[int, tuple[float, float]] = {}
                hits = 0
                for k in observed.tolist():
                    if k not in cache:
                        ci = clopper_pearson_bounded(k, n, m, 0.95)
                        cache[k] = (ci.lower, ci.upper)
                    lo, up = cache[k]
                    hits += lo <= p <= up
                coverages.append(hits / REPS)
            rows.append(
                f"| {n} + {m} | {mode} | {pct(min(coverages))} | {pct(float(np.mean(coverages)))} |"
            )
    return rows


def wilson_table() -> list[str]:
    rows = [
        "| n | exact: min over p | exact: mean over p | p where the minimum falls |",
        "|---|---|---|---|",
    ]
    for n in (10, 30, 49, 100, 120):
        bounds = []
        for k in range(n + 1):
            ci = wilson(k, n, Z95)
            assert ci is not None
            bounds.append((ci.lower, ci.upper))
        exact = [binomial_exact_coverage(bounds, n, p) for p in P_GRID]
        worst = int(np.argmin(exact))
        rows.append(
            f"| {n} | {pct(min(exact))} | {pct(float(np.mean(exact)))} | {P_GRID[worst]:g} |"
        )
    return rows


Sampler = Callable[[np.random.Generator, tuple[int, int]], np.ndarray]

T_DISTRIBUTIONS: list[tuple[str, float, Sampler]] = [
    ("Bernoulli(0.5) pass/fail scores", 0.5, lambda g, s: g.binomial(1, 0.5, s).astype(float)),
    ("Bernoulli(0.9) pass/fail scores", 0.9, lambda g, s: g.binomial(1, 0.9, s).astype(float)),
    ("Uniform(0, 1)", 0.5, lambda g, s: g.uniform(0.0, 1.0, s)),
    ("Beta(2, 5)", 2 / 7, lambda g, s: g.beta(2.0, 5.0, s)),
    ("Beta(0.5, 0.5) (U-shaped)", 0.5, lambda g, s: g.beta(0.5, 0.5, s)),
    ("Beta(8, 1) (piled up near 1)", 8 / 9, lambda g, s: g.beta(8.0, 1.0, s)),
]


def student_t_table(rng: np.random.Generator) -> list[str]:
    sizes = (5, 10, 30, 100)
    rows = [
        "| scores | " + " | ".join(f"n = {n}" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for name, true_mean, sample in T_DISTRIBUTIONS:
        cells = []
        for n in sizes:
            x = sample(rng, (REPS, n))
            mean = x.mean(axis=1)
            sd = x.std(axis=1, ddof=1)
            half = t_isf(0.025, n - 1) * sd / np.sqrt(n)
            cells.append(pct(float(np.mean(np.abs(mean - true_mean) <= half))))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


BETTING_DISTRIBUTIONS = [
    *T_DISTRIBUTIONS,
    ("a judge's 1-5 scale (2, 3, 10, 35, 50%)", (0.03 + 0.2 + 1.05 + 2.0) / 4.0,
     lambda g, s: g.choice(5, size=s, p=[0.02, 0.03, 0.1, 0.35, 0.5]) / 4.0),
]
BETTING_REPS = 4000
BETTING_WIDTH_SUITES = 300


def betting_table(rng: np.random.Generator) -> list[str]:
    """The betting interval of a MEAN with a declared range (here [0, 1]), through the numpy
    reference that tests/stats/test_stats_betting.py holds the runtime code to: how often
    each bound falls beyond the true mean (each may at most 2.5%), and its mean width
    beside Student t's on the same samples."""
    sys.path.insert(0, str(ROOT))
    from tests.stats import _betting_reference as reference

    sizes = (2, 5, 10, 30, 50, 100)
    rows = [
        "| scores | " + " | ".join(f"n = {n}" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for name, true_mean, sample in BETTING_DISTRIBUTIONS:
        cells = []
        for n in sizes:
            x = sample(rng, (BETTING_REPS, n))
            at = np.full(BETTING_REPS, true_mean)
            low = float(np.mean(reference.rejects_batch(x, at, +1, 0.95)))
            high = float(np.mean(reference.rejects_batch(x, at, -1, 0.95)))
            lower, upper = reference.batch_bounds(x[:BETTING_WIDTH_SUITES], 0.95)
            some = x[:BETTING_WIDTH_SUITES]
            t_width = 2 * t_isf(0.025, n - 1) * some.std(axis=1, ddof=1) / np.sqrt(n)
            ratio = float(np.mean(upper - lower)) / float(np.mean(t_width))
            cells.append(f"{pct(low)} / {pct(high)}, {ratio:.2f}× t")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


PAIRED_CONFIGS = [
    (0.4, 0.1, 0.1, 0.4),
    (0.7, 0.1, 0.05, 0.15),
    (0.85, 0.05, 0.02, 0.08),
    (0.3, 0.2, 0.1, 0.4),
    (0.5, 0.05, 0.05, 0.4),
    (0.1, 0.3, 0.3, 0.3),
    (0.6, 0.15, 0.0, 0.25),
    (0.9, 0.04, 0.04, 0.02),
]


def paired_table(rng: np.random.Generator) -> list[str]:
    n_exact, n_sim = 30, 100
    tables = np.array(
        [
            (a, b, c, n_exact - a - b - c)
            for a in range(n_exact + 1)
            for b in range(n_exact + 1 - a)
            for c in range(n_exact + 1 - a - b)
        ]
    )
    exact_bounds = []
    for t in tables:
        ci = paired_proportion_difference(*(int(v) for v in t)).interval
        assert ci is not None
        exact_bounds.append((ci.lower, ci.upper))
    lower = np.array([b[0] for b in exact_bounds])
    upper = np.array([b[1] for b in exact_bounds])
    rows = [
        (
            "| cells (both pass, candidate only, baseline only, both fail) | true difference "
            f"| exact, n = {n_exact} | simulated, n = {n_sim} |"
        ),
        "|---|---|---|---|",
    ]
    cache: dict[tuple[int, ...], tuple[float, float]] = {}
    for cells in PAIRED_CONFIGS:
        theta = cells[1] - cells[2]
        pmf = stats.multinomial.pmf(tables, n_exact, cells)
        exact = float(pmf[(lower <= theta) & (theta <= upper)].sum())
        draws = rng.multinomial(n_sim, cells, size=REPS)
        hits = 0
        for row in map(tuple, draws.tolist()):
            if row not in cache:
                ci = paired_proportion_difference(*row).interval
                assert ci is not None
                cache[row] = (ci.lower, ci.upper)
            lo, up = cache[row]
            hits += lo <= theta <= up
        rows.append(
            f"| {', '.join(f'{c:g}' for c in cells)} | {theta:+.2f} | {pct(exact)} "
            f"| {pct(hits / REPS)} |"
        )
    return rows


def render(elapsed: float, parts: dict[str, list[str]]) -> str:
    lines = [
        BEGIN,
        "",
        (
            f"Seeded with {SEED}; {REPS} simulated samples per cell; nominal level 95% unless a "
            "column says otherwise. Exact figures sum the binomial (or multinomial) probability "
            "of every outcome whose interval covers the truth, over a grid of "
            f"{len(P_GRID)} true rates from {P_GRID[0]:g} to {P_GRID[-1]:g}. Produced by "
            f"`python bench/coverage.py` in {elapsed:.0f} s."
        ),
        "",
    ]
    for title, rows in parts.items():
        lines += [f"#### {title}", "", *rows, ""]
    lines.append(END)
    return "\n".join(lines) + "\n"


def write(section: str) -> None:
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Statistics\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + section.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n## Coverage, measured\n\n" + section
    DOC.write_text(text, encoding="utf-8")


def main() -> None:
    started = time.perf_counter()
    rng = np.random.default_rng(SEED)
    parts = {
        "Clopper–Pearson (what decides BINARY rules)": clopper_pearson_table(rng),
        "Clopper–Pearson bounded for missing cases, 95%, covering the rate of all n + m cases": (
            bounded_table(rng)
        ),
        "Wilson with Acklam's z (the provisional figures; never used to decide)": wilson_table(),
        "Betting, 95%, simulated (what decides MEAN rules with a declared range): lower bound"
        " above the mean / upper bound below it (each at most 2.5% by design), and the mean"
        " width beside Student t's": betting_table(rng),
        "Student t, 95%, simulated (what decides MEAN rules without a range: approximate)": (
            student_t_table(rng)
        ),
        "Newcombe hybrid score, paired, 95% (what decides BINARY comparison rules)": (
            paired_table(rng)
        ),
    }
    elapsed = time.perf_counter() - started
    write(render(elapsed, parts))
    print(f"wrote {DOC.relative_to(ROOT)} in {elapsed:.1f} s")


if __name__ == "__main__":
    main()
