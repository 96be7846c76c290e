"""The seed's concurrency table: 120 cases of 0.1 s at system 1 and 16, and reruns.

    python bench/seed_table.py [--repeat N]

Each figure is the median wall time of the whole `oloproof run` process, beside
its ideal: ceil(120 / c) x 0.1 s for a fresh run (`--no-cache`). A rerun takes
everything from the cache; its ideal is what no tool can avoid: starting
Python, importing oloproof and reading the run's rows from the store (a
ten-line script, `READ_STORE` below, timed the same way).
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
    PY,
    compile_sources,
    load_average,
    machine,
    med_wall,
    record,
    repeat,
    seconds,
    set_concurrency,
    spread,
    write_project,
    write_section,
)

APP = """import time
from oloproof import system

@system(name="sleepy", version="1")
def answer(case_input):
    time.sleep(0.1)
    return {"label": "ok"}
"""

# The floor of a rerun: the interpreter, `import oloproof`, and the run's rows.
READ_STORE = """import json, sqlite3
import oloproof
conn = sqlite3.connect(".oloproof/store.sqlite")
(run_id,) = conn.execute("SELECT id FROM runs ORDER BY created_at DESC LIMIT 1").fetchone()
cases = [(r[0], json.loads(r[1])) for r in conn.execute(
    "SELECT case_id, output_json FROM run_cases WHERE run_id = ?", (run_id,))]
judged = conn.execute(
    "SELECT criterion, status, passed FROM run_judgments WHERE run_id = ?", (run_id,)).fetchall()
assert len(cases) == 120 and len(judged) == 120
"""

SEED = {"system: 1": "13.4 s", "system: 16": "1.7 s", "unchanged rerun": "0.4 s"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="runs of system: 1 (others run more)")
    args = ap.parse_args()
    compile_sources()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = write_project(Path(tmp) / "p", n=120, app=APP, system=16)
        repeat(1, [*OLOPROOF, "run", "--no-cache"], root)  # warm the file cache
        for c, n in ((1, args.repeat), (16, max(5, args.repeat))):
            set_concurrency(root, c)
            runs = repeat(n, [*OLOPROOF, "run", "--no-cache"], root)
            ideal = math.ceil(120 / c) * 0.1
            target = 1.03 if c == 1 else 1.15
            rows.append((f"system: {c}", f"120 × 0.1 s at `system: {c}`, fresh", runs, ideal,
                         f"≤ {target:.2f}× ideal", med_wall(runs) <= target * ideal))
        set_concurrency(root, 16)
        (root / "read_store.py").write_text(READ_STORE)
        repeat(1, [*OLOPROOF, "run"], root)
        rerun = repeat(9, [*OLOPROOF, "run"], root)
        floor = repeat(9, [PY, "read_store.py"], root)
        ideal = med_wall(floor)
        rows.append(("unchanged rerun", "unchanged rerun (all cache)", rerun, ideal,
                     "≤ 0.30 s", med_wall(rerun) <= 0.30))
        set_concurrency(root, 4)
        changed = repeat(7, [*OLOPROOF, "run"], root)
        rows.append(("concurrency changed", "rerun, only concurrency changed (all cache)",
                     changed, ideal, "", None))
    lines = [
        "## The seed table: 120 cases × 0.1 s",
        "",
        (f"Machine: {machine()}; load average after the runs {load_average()}. "
        "`python bench/seed_table.py`: median wall time of the whole `oloproof run` process "
        f"({args.repeat} runs at `system: 1`, 5 or more at `system: 16`, 9 reruns). "
        "A fresh run is `--no-cache`; its ideal is ceil(120 / c) × 0.1 s. A rerun's ideal is "
        "starting Python, `import oloproof` and reading the run's 240 rows from the store "
        "(bench/seed_table.py `READ_STORE`)."),
        "",
        "| run | wall time | ideal | ratio | target | seed page | all runs (s) | max RSS |",
        "|---|---:|---:|---:|---|---:|---|---:|",
    ]
    figures = []
    for key, name, runs, ideal, target, met in rows:
        t = med_wall(runs)
        verdict = "" if met is None else (" ✓" if met else " ✗")
        rss = max(m.max_rss_mb for m in runs)
        lines.append(
            f"| {name} | {seconds(t)} | {seconds(ideal)} | {t / ideal:.2f}× | {target}{verdict} "
            f"| {SEED.get(key, '')} | {spread([m.wall for m in runs])} | {rss:.0f} MB |"
        )
        figures.append({"name": name, "value": t, "unit": "s", "ideal": ideal,
                         "target": target, "met": met})
    body = "\n".join(lines)
    print(body)
    write_section("seed-table", body)
    record("seed_table", figures)


if __name__ == "__main__":
    main()
