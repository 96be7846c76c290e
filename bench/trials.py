"""Repeated trials: what k trials per case cost, what the cache saves, how well the interval
covers. ``python bench/trials.py [--repeat N] [--cases N] [--reps N]``

1. Cost: a system that sleeps 100 ms per call, N cases (default 40) at ``system: 8``, run
   fresh (``--no-cache``) at k = 1, 2, 4, 8 trials. The system appends a line to a file per
   call, so the calls are counted, not inferred. Ideal wall time: ceil(N·k / 8) × 100 ms
   plus the start-up of a one-trial run of one case; calls: exactly N·k.
2. Cache: a fresh store run at k = 4, then k = 8 (exactly 4·N new calls expected), then the
   same k = 8 again (0 calls expected).
3. Coverage of the interval over trials (the betting interval on the case pass fractions,
   beside Korn–Graubard, which decided before issue 33), simulated on beta-binomial suites;
   written into docs/repeated-trials.md between its markers (``--coverage-only``: this alone).

Sections 1 and 2 go to docs/performance.md (``bench:trials``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    OLOPROOF,
    ROOT,
    compile_sources,
    load_average,
    machine,
    measure,
    med_wall,
    record,
    repeat,
    seconds,
    spread,
    write_project,
    write_section,
)

SLEEPY = """import os, time
from oloproof import system

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")

@system(name="sleepy", version="1")
def answer(case_input):
    time.sleep(0.1)
    with open(LOG, "a") as fh:
        fh.write(f"{case_input['n']}\\n")
    return {"label": "ok"}
"""

GUIDE = ROOT / "docs" / "repeated-trials.md"
BEGIN = "<!-- trials-coverage:begin (written by bench/trials.py; edits here are overwritten) -->"
END = "<!-- trials-coverage:end -->"


def calls(root: Path) -> int:
    log = root / "calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def cost_and_cache(n: int, reps: int) -> tuple[list[str], list[dict[str, object]]]:
    concurrency, sleep = 8, 0.1
    lines = [
        "## Repeated trials",
        "",
        (f"Machine: {machine()}; load average {load_average()} at the start. "
         f"`python bench/trials.py`: {n} cases, a system that sleeps {sleep * 1000:.0f} ms per "
         f"call, `system: {concurrency}`, one `exact_match` criterion; median wall time of the "
         f"whole `oloproof run` process over {reps} runs. The system appends a line to a file "
         "per call: the calls are counted, not inferred."),
        "",
        "### Cost grows linearly in k",
        "",
        (f"Fresh runs (`--no-cache --trials k`). Ideal: ceil({n}·k / {concurrency}) × "
         f"{sleep * 1000:.0f} ms, plus the start-up (T of one case, one trial, below). "
         "Ratio to k = 1 beside the ideal ratio."),
        "",
        "| k | calls (counted) | wall time | ideal | ratio to k = 1 | ideal ratio | all runs (s) |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    figures: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        one = write_project(Path(tmp) / "one", n=1, app=SLEEPY, system=concurrency)
        repeat(1, [*OLOPROOF, "run", "--no-cache"], one)
        start_up = med_wall(repeat(reps, [*OLOPROOF, "run", "--no-cache"], one)) - sleep
        root = write_project(Path(tmp) / "cost", n=n, app=SLEEPY, system=concurrency)
        base_wall = None
        for k in (1, 2, 4, 8):
            args = [*OLOPROOF, "run", "--no-cache", "--trials", str(k)]
            before = calls(root)
            runs = repeat(reps, args, root)
            made = (calls(root) - before) / reps
            wall = med_wall(runs)
            ideal = math.ceil(n * k / concurrency) * sleep + start_up
            base_wall = base_wall or wall
            base_ideal = math.ceil(n / concurrency) * sleep + start_up
            lines.append(
                f"| {k} | {made:.0f} (expected {n * k}) | {seconds(wall)} | {seconds(ideal)} "
                f"| {wall / base_wall:.2f}× | {ideal / base_ideal:.2f}× "
                f"| {spread([m.wall for m in runs])} |"
            )
            figures.append({"name": f"trials: {n} cases × 100 ms at k = {k}, fresh",
                            "value": wall, "unit": "s", "ideal": ideal,
                            "target": "calls = N·k, time linear in k",
                            "met": made == n * k})
        lines += [
            "",
            (f"Start-up (one case, one trial, minus its {sleep * 1000:.0f} ms call): "
             f"{seconds(start_up)}."),
            "",
            "### The cache: raising k runs only the new trials",
            "",
            ("One store: a run at k = 4, then k = 8, then k = 8 again, unchanged. Trial t of a "
             "case has its own cache entry (trial 0's key is a one-trial run's key), so "
             "raising k from 4 to 8 calls the system for trials 4 to 7 only."),
            "",
            "| run | new calls (counted) | expected | wall time | executions from cache |",
            "|---|---:|---:|---:|---:|",
        ]
        cache_root = write_project(Path(tmp) / "cache", n=n, app=SLEEPY, system=concurrency)
        exact = True
        for label, k, expected in (("k = 4, empty store", 4, 4 * n),
                                   ("k = 8 after k = 4", 8, 4 * n),
                                   ("k = 8 again, unchanged", 8, 0)):
            before = calls(cache_root)
            out = Path(tmp) / "out.txt"
            with out.open("w") as fh:
                m = measure([*OLOPROOF, "run", "--trials", str(k)], cache_root, stdout=fh)
            made = calls(cache_root) - before
            hits = re.search(r"executions (\d+) hits", out.read_text())
            exact = exact and made == expected
            lines.append(f"| {label} | {made} | {expected} | {seconds(m.wall)} "
                         f"| {hits.group(1) if hits else '?'} |")
            figures.append({"name": f"trials cache: {label}", "value": float(made),
                            "unit": "calls", "ideal": float(expected),
                            "target": "exactly the new trials", "met": made == expected})
        lines += ["", f"Cache reuse exact: {'yes' if exact else '**no**'}."]
    return lines, figures


def coverage_table(reps: int) -> str:
    import numpy as np

    # One simulation for the docs' table and for the tests' assertions.
    sys.path.insert(0, str(ROOT))
    from tests.stats._trials_coverage import coverage, korn_graubard_coverage

    started = time.time()
    rng = np.random.default_rng(20261201)
    rows = [
        ("| cases n | trials k | rate | ICC | coverage | lower > rate | upper < rate | mean width"
        " | KG coverage | KG width |"),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    worst_side = 0.0
    for n in (5, 10, 20, 50):
        for k in (2, 5, 10):
            for mu in (0.5, 0.8, 0.95):
                for rho in (0.0, 0.2, 0.6):
                    seed = int(rng.integers(2**31))
                    cov, low, high, width = coverage(n, k, mu, rho, reps, seed)
                    kg_cov, kg_width = korn_graubard_coverage(n, k, mu, rho, reps, seed)
                    worst_side = max(worst_side, low, high)
                    rows.append(
                        f"| {n} | {k} | {mu:g} | {rho:g} | {cov:.3f} | {low:.3f} "
                        f"| {high:.3f} | {width:.3f} | {kg_cov:.3f} | {kg_width:.3f} |"
                    )
    head = (
        f"Seeded with 20261201; {reps} simulated suites per cell (the same suites for both"
        " intervals); nominal 95%. Case pass probabilities drawn from a Beta of mean *rate*"
        " and intra-class correlation *ICC* (0: every case alike), then k trials of each. The"
        " first columns are the betting interval on the case pass fractions, which decides;"
        " the last two, Korn–Graubard with its case-level fallback, which decided before"
        " (mean widths over the first 300 suites of a cell for the betting interval). Worst"
        f" one-sided miss of the betting interval: {worst_side:.3f} (its share is 0.025; one"
        f" Monte Carlo standard error is {math.sqrt(0.025 * 0.975 / reps):.3f}). Produced by"
        f" `python bench/trials.py` in {time.time() - started:.0f} s."
    )
    return head + "\n\n" + "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--reps", type=int, default=4000, help="simulated suites per coverage cell")
    ap.add_argument("--coverage-only", action="store_true",
                    help="only the coverage table of docs/repeated-trials.md")
    args = ap.parse_args()
    if not args.coverage_only:
        compile_sources()
        lines, figures = cost_and_cache(args.cases, args.repeat)
        body = "\n".join(lines)
        print(body)
        write_section("trials", body)
        record("trials", figures)
    table = coverage_table(args.reps)
    print(table)
    text = GUIDE.read_text()
    if BEGIN in text and END in text:
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        GUIDE.write_text(text[:start] + "\n" + table + "\n" + text[end:])


if __name__ == "__main__":
    main()
