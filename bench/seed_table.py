"""The seed's concurrency table: 120 cases of 0.1 s at system 1 and 16, and reruns.

    python bench/seed_table.py [--repeat N]

Each figure is the median wall time of the whole `oloproof run` process over N
runs (default 3), beside its ideal: ceil(120 / c) x 0.1 s for a fresh run. The
reruns take everything from the cache; their ideal is the start-up of the
process plus reading the store, so they are shown beside `python -c "import
oloproof"`.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import OLOPROOF, machine, median, set_concurrency, timed, write_project, write_section  # noqa: E402

APP = """import time
from oloproof import system

@system(name="sleepy", version="1")
def answer(case_input):
    time.sleep(0.1)
    return {"label": "ok"}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = write_project(Path(tmp) / "p", n=120, app=APP, system=16)
        for c in (1, 16):
            set_concurrency(root, c)
            t = median([timed([*OLOPROOF, "run", "--no-cache"], root) for _ in range(args.repeat)])
            ideal = math.ceil(120 / c) * 0.1
            rows.append((f"`system: {c}`, fresh", t, ideal))
        set_concurrency(root, 16)
        timed([*OLOPROOF, "run"], root)
        rerun = median([timed([*OLOPROOF, "run"], root) for _ in range(max(5, args.repeat))])
        imp = median([timed([sys.executable, "-c", "import oloproof"], root) for _ in range(5)])
        rows.append(("unchanged rerun (all cache)", rerun, imp))
        set_concurrency(root, 4)
        changed = median([timed([*OLOPROOF, "run"], root) for _ in range(max(5, args.repeat))])
        rows.append(("rerun, only concurrency changed (all cache)", changed, imp))
    lines = [
        "## The seed table: 120 cases × 0.1 s",
        "",
        f"Machine: {machine()}. Median of {args.repeat}+ runs of the whole process "
        "(`python bench/seed_table.py`). For reruns the ideal is `python -c \"import oloproof\"`.",
        "",
        "| run | wall time | ideal | ratio | seed page |",
        "|---|---:|---:|---:|---:|",
    ]
    seed = {"`system: 1`, fresh": "13.4 s", "`system: 16`, fresh": "1.7 s",
            "unchanged rerun (all cache)": "0.4 s"}
    for name, t, ideal in rows:
        lines.append(f"| {name} | {t:.2f} s | {ideal:.2f} s | {t / ideal:.2f}× | {seed.get(name, '')} |")
    body = "\n".join(lines)
    print(body)
    write_section("seed-table", body)


if __name__ == "__main__":
    main()
