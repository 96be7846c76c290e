"""Sequential decisions (issue 26): validity, savings, and the 2,000-case example:
``python bench/sequential.py`` (numpy and scipy, from the test extras, for the simulation and
the fixed-n design sizes; the run-time statistics are Oloproof's own).

1. Validity: the share of simulated runs a rule ``min: t`` PASSes when the true rate is at or
   below t, looking after every case (20,000 runs of 1,000 cases per cell), beside the exact
   probability (dynamic programming) and beside Clopper-Pearson looked at after every case.
2. Savings: the median number of cases to a decision (exact stopping distribution), against
   the fixed-n design: the smallest n whose Clopper-Pearson decision passes 80% of the time
   at the design alternative t + 0.05.
3. The 2,000-case example (``oloproof init --example sequential``, 97% right against a floor
   of 0.80): the cases it read and the calls it made, whole processes, beside a fixed run.

Writes the section ``bench:sequential`` of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import OLOPROOF, bench_env, compile_sources, machine, record, write_section

from oloproof.stats.intervals import clopper_pearson
from oloproof.stats.sequential import binary_cuts, binary_prior, stopping_distribution

LEVEL = 0.95


def _false_pass(t: float, rate: float, horizon: int, runs: int, seed: int) -> tuple[float, float]:
    """(sequential, Clopper-Pearson peeking): shares of runs that PASS with a look after
    every case."""
    up = np.array(binary_cuts(binary_prior(t, +1, LEVEL), horizon, LEVEL))
    down = np.array(binary_cuts(binary_prior(t, -1, LEVEL), horizon, LEVEL))
    cp = np.full(horizon + 1, horizon + 1)
    k = 0
    for n in range(1, horizon + 1):
        k = max(k, int(t * n))
        while k <= n and clopper_pearson(k, n, LEVEL).lower < t:
            k += 1
        cp[n] = k
    rng = np.random.default_rng(seed)
    seq = peek = 0
    done = 0
    while done < runs:
        chunk = min(2000, runs - done)
        counts = np.cumsum(rng.random((chunk, horizon)) < rate, axis=1)
        hit_up = counts >= up[1:]
        hit_down = counts <= down[1:]
        first_up = np.where(hit_up.any(axis=1), hit_up.argmax(axis=1), horizon)
        first_down = np.where(hit_down.any(axis=1), hit_down.argmax(axis=1), horizon)
        seq += int((first_up < first_down).sum())
        peek += int((counts >= cp[1:]).any(axis=1).sum())
        done += chunk
    return seq / runs, peek / runs


def _fixed_size(t: float, alternative: float, power: float) -> int:
    for n in range(10, 50_000):
        k = np.arange(n + 1)
        low = np.where(k > 0, stats.beta.ppf(0.025, np.maximum(k, 1), n - k + 1), 0.0)
        ok = k[low >= t]
        if ok.size and stats.binom.sf(ok[0] - 1, n, alternative) >= power:
            return n
    raise RuntimeError("no size")


def _run(args: list[str], cwd: Path) -> tuple[float, list[dict[str, object]]]:
    start = time.perf_counter()
    done = subprocess.run([*OLOPROOF, *args], cwd=cwd, env=bench_env(), capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1, 3):
        raise RuntimeError(done.stderr)
    return wall, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20_000)
    args = parser.parse_args()
    compile_sources()
    figures = []
    lines = [
        "## Sequential decisions (`bench/sequential.py`)",
        "",
        machine(),
        "",
        (f"**Validity** (issue 26): the share of runs a rule `min: t` PASSes at {LEVEL:.0%} when"
        " the true rate is at or below t, looking after every case, up to 1,000 cases;"
        f" {args.runs:,} simulated runs per cell, beside the exact probability (dynamic"
        " programming over the passes) and beside Clopper-Pearson looked at after every case."
        " Each side of the test is allowed 2.5%."),
        "",
        "| t | true rate | sequential, simulated | sequential, exact | Clopper-Pearson peeking |",
        "|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for t in (0.5, 0.7, 0.8, 0.9):
        for gap in (0.0, 0.01, 0.02, 0.05):
            rate = t - gap
            seq, peek = _false_pass(t, rate, 1000, args.runs, seed=int(1000 * t + 100 * gap))
            exact = stopping_distribution(t, "min", rate, 1000, LEVEL).pass_probability
            worst = max(worst, seq)
            lines.append(f"| {t:.2f} | {rate:.2f} | {seq:.4f} | {exact:.4f} | {peek:.4f} |")
    se = math.sqrt(0.025 * 0.975 / args.runs)
    figures.append({"name": "largest simulated false PASS (target <= 0.025)", "value": worst,
                    "unit": "", "target": f"<= 0.025 (+ {2 * se:.4f} simulation error)",
                    "met": worst <= 0.025 + 2 * se})
    lines += [
        "",
        ("**Savings**: the median number of cases a sequential run reads before it decides"
        " (its exact stopping distribution), against the fixed-n design: the smallest n whose"
        " Clopper-Pearson decision passes with 80% power at the design alternative t + 0.05"
        " (the margin the test is tuned to). Targets: at most 0.40× at t + 0.15, at most 0.90×"
        " at t + 0.05."),
        "",
        ("| t | fixed n (80% at t + 0.05) | median at t + 0.05 | ratio | median at t + 0.15 |"
        " ratio | P(PASS) at t + 0.05 |"),
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in (0.5, 0.7, 0.8, 0.9):
        fixed = _fixed_size(t, t + 0.05, 0.8)
        near = stopping_distribution(t, "min", t + 0.05, 3 * fixed, LEVEL)
        far = stopping_distribution(t, "min", min(t + 0.15, 0.999), 3 * fixed, LEVEL)
        assert near.median is not None and far.median is not None
        lines.append(
            f"| {t:.2f} | {fixed:,} | {near.median:,} | {near.median / fixed:.2f}× |"
            f" {far.median:,} | {far.median / fixed:.2f}× | {near.pass_probability:.3f} |"
        )
        figures.append({"name": f"median cases at t+0.05 / fixed n, t={t}",
                        "value": near.median / fixed, "unit": "×", "target": "<= 0.90",
                        "met": near.median / fixed <= 0.90})
        figures.append({"name": f"median cases at t+0.15 / fixed n, t={t}",
                        "value": far.median / fixed, "unit": "×", "target": "<= 0.40",
                        "met": far.median / fixed <= 0.40})
    example = stopping_distribution(0.8, "min", 0.97, 2000, LEVEL)
    nine = next(n for n, p in enumerate(example.decided_by) if p >= 0.99)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ex"
        subprocess.run([*OLOPROOF, "init", str(root), "--example", "sequential"], check=True,
                       capture_output=True, env=bench_env())
        seq_wall, seq_events = _run(["run", "--json", "--no-cache"], root)
        decided = next(e for e in seq_events if e["type"] == "rule_decided")
        calls = sum(1 for e in seq_events if e["type"] == "case_executed")
        rerun_wall, rerun_events = _run(["run", "--json"], root)
        rerun_calls = sum(1 for e in rerun_events
                          if e["type"] == "case_executed" and not e["from_cache"])
        config = root / "oloproof.yaml"
        config.write_text(config.read_text().replace("sequential:\n  seed: 0\n", ""))
        fixed_wall, fixed_events = _run(["run", "--json", "--no-cache"], root)
        fixed_end = fixed_events[-1]
    lines += [
        "",
        ("**The 2,000-case example** (`oloproof init --example sequential`: 97% right against"
        " `min: 0.80`, 5 ms per call, `system: 8`):"),
        "",
        (f"- decided PASS after **{decided['n']} of 2,000 cases** ({decided['n'] / 2000:.1%}"
        f" of the calls; target at most 40%), {calls} calls made in all (those in flight"
        f" when it decided finish and are stored), {seq_wall:.2f} s for the whole process;"),
        (f"- exactly, at a true rate of 0.97 the test decides after a median of"
        f" {example.median} cases, and within {nine} cases 99% of the time;"),
        f"- an unchanged rerun: {rerun_calls} calls, {rerun_wall:.2f} s;",
        (f"- the same project without `sequential:`: 2,000 calls, {fixed_wall:.2f} s"
        f" ({fixed_end['decisions'][0]['state']})."),
    ]
    figures.append({"name": "2,000-case example: share of calls before PASS",
                    "value": decided["n"] / 2000, "unit": "×", "target": "<= 0.40",
                    "met": decided["n"] / 2000 <= 0.40})
    body = "\n".join(lines)
    print(body)
    write_section("sequential", body)
    record("sequential", figures)


if __name__ == "__main__":
    main()
