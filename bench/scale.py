"""Scale: many cases, many calls in flight, and what each case costs.

    python bench/scale.py [--repeat N] [--cases N]

1. 10,000 cases of 20 ms at `system: 200`, fresh (`--no-cache`): a sync
   callable (worker threads) and an async one (awaited on the loop). Ideal:
   ceil(10,000 / 200) x 20 ms = 1.0 s.
2. 100,000 instant cases (the callable returns at once) at the default
   `system: 8`, fresh and as an unchanged rerun (all cache). The per-case
   overhead is (T(100,000 cases) - T(1 case)) / 99,999, both fresh runs of the
   same project: everything Oloproof does per case (reading the suite, the
   call, the evaluator, the events, the store), without the start-up. Peak
   memory is the max RSS of the process, at 1,000, 10,000 and 100,000 cases,
   beside the size of the store on disk.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    OLOPROOF,
    compile_sources,
    load_average,
    machine,
    med_wall,
    median,
    record,
    repeat,
    seconds,
    spread,
    write_project,
    write_section,
)

SYNC_20MS = """import time
from oloproof import system

@system(name="sleepy", version="1")
def answer(case_input):
    time.sleep(0.02)
    return {"label": "ok"}
"""

ASYNC_20MS = """import asyncio
from oloproof import system

@system(name="sleepy-async", version="1")
async def answer(case_input):
    await asyncio.sleep(0.02)
    return {"label": "ok"}
"""

INSTANT = """from oloproof import system

@system(name="instant", version="1")
def answer(case_input):
    return {"label": "ok"}
"""


def store_mb(root: Path) -> float:
    d = root / ".oloproof"
    return sum(p.stat().st_size for p in d.glob("store.sqlite*")) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", type=int, default=100_000, help="instant cases")
    args = ap.parse_args()
    compile_sources()
    fresh = [*OLOPROOF, "run", "--no-cache"]
    figures = []
    lines = [
        "## Scale",
        "",
        (f"Machine: {machine()}. `python bench/scale.py`: median wall time of the whole "
        f"`oloproof run` process over {args.repeat} runs."),
        "",
        "### 10,000 cases × 20 ms at `system: 200`",
        "",
        ("Fresh runs (`--no-cache`), one `exact_match` criterion. Ideal: ceil(10,000 / 200) × "
        "20 ms = 1.00 s. Target: within 1.5× (≤ 1.50 s)."),
        "",
        "| system | wall time | ideal | ratio | target | all runs (s) | CPU time | max RSS |",
        "|---|---:|---:|---:|---|---|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for label, app in (("sync callable (worker threads)", SYNC_20MS),
                           ("async callable (awaited)", ASYNC_20MS)):
            root = write_project(Path(tmp) / label.split()[0], n=10_000, app=app, system=200)
            repeat(1, fresh, root)
            runs = repeat(args.repeat, fresh, root)
            t, ideal = med_wall(runs), math.ceil(10_000 / 200) * 0.02
            met = t <= 1.5 * ideal
            lines.append(
                f"| {label} | {seconds(t)} | {seconds(ideal)} | {t / ideal:.2f}× | ≤ 1.50×"
                f"{' ✓' if met else ' ✗'} | {spread([m.wall for m in runs])} "
                f"| {median([m.cpu for m in runs]):.2f} s | {max(m.max_rss_mb for m in runs):.0f} MB |"
            )
            figures.append({"name": f"10,000 × 20 ms at `system: 200`, {label}", "value": t,
                            "unit": "s", "ideal": ideal, "target": "≤ 1.50× ideal", "met": met})

        n = args.cases
        one = write_project(Path(tmp) / "one", n=1, app=INSTANT)
        repeat(1, fresh, one)
        base = repeat(max(5, args.repeat), fresh, one)
        t1 = med_wall(base)
        mem_rows = []
        for size in (1_000, 10_000):
            small = write_project(Path(tmp) / f"n{size}", n=size, app=INSTANT)
            m = repeat(1, fresh, small)[0]
            mem_rows.append((size, m.max_rss_mb, m.wall, store_mb(small)))
        big = write_project(Path(tmp) / "big", n=n, app=INSTANT)
        repeat(1, [*OLOPROOF, "run"], big)  # the store, and the cache for the reruns
        runs = repeat(args.repeat, fresh, big)
        reruns = repeat(args.repeat, [*OLOPROOF, "run"], big)
        mem_rows.append((n, max(m.max_rss_mb for m in runs), med_wall(runs), store_mb(big)))
    t_fresh, t_rerun = med_wall(runs), med_wall(reruns)
    per_case = (t_fresh - t1) / (n - 1) * 1e6
    per_case_rerun = (t_rerun - t1) / (n - 1) * 1e6
    peak = max(m.max_rss_mb for m in runs)
    lines += [
        "",
        f"### {n:,} instant cases at `system: 8`",
        "",
        (f"The callable returns at once; one `exact_match` criterion. Per-case overhead = "
        f"(T({n:,} cases) − T(1 case)) / {n - 1:,}, T(1 case) = {seconds(t1)} "
        f"(median of {len(base)}). Ideal: 0. Target: ≤ 200 µs per case; peak memory ≤ 300 MB."),
        "",
        "| run | wall time | per case | target | all runs (s) | CPU time | max RSS |",
        "|---|---:|---:|---|---|---:|---:|",
        (f"| fresh (`--no-cache`) | {seconds(t_fresh)} | {per_case:.0f} µs | ≤ 200 µs"
        f"{' ✓' if per_case <= 200 else ' ✗'} | {spread([m.wall for m in runs])} "
        f"| {median([m.cpu for m in runs]):.2f} s | {peak:.0f} MB |"),
        (f"| unchanged rerun (all cache) | {seconds(t_rerun)} | {per_case_rerun:.0f} µs | "
        f"| {spread([m.wall for m in reruns])} | {median([m.cpu for m in reruns]):.2f} s "
        f"| {max(m.max_rss_mb for m in reruns):.0f} MB |"),
        "",
        ("Peak memory against the number of cases (fresh runs; the store is on disk, not in "
        "memory):"),
        "",
        "| cases | max RSS | wall time | store on disk |",
        "|---:|---:|---:|---:|",
        *(f"| {size:,} | {rss:.0f} MB | {seconds(w)} | {st:.0f} MB |"
          for size, rss, w, st in mem_rows),
        "",
        f"Load average after the runs: {load_average()}.",
    ]
    figures += [
        {"name": f"{n:,} instant cases, per-case overhead (fresh)", "value": per_case,
         "unit": "µs", "ideal": 0.0, "target": "≤ 200 µs", "met": per_case <= 200},
        {"name": f"{n:,} instant cases, per-case overhead (all cache)", "value": per_case_rerun,
         "unit": "µs", "ideal": 0.0, "target": "", "met": None},
        {"name": f"{n:,} instant cases, peak memory", "value": peak, "unit": "MB",
         "target": "≤ 300 MB", "met": peak <= 300},
    ]
    body = "\n".join(lines)
    print(body)
    write_section("scale", body)
    record("scale", figures)


if __name__ == "__main__":
    main()
