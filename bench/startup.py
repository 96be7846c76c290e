"""Start-up: `oloproof --help`, and `oloproof runs` on a store of 1,000 runs.

    python bench/startup.py [--repeat N] [--runs N]

`--help` is held against `python -c "import oloproof"` (the interpreter and
the public API, which any command needs). `oloproof runs` lists the newest 50
of 1,000 stored runs; its ideal is the interpreter, `import oloproof` and
reading those 50 rows with sqlite3. The store is made by one real run, copied
to 1,000 runs (with their cases and judgments) in SQL.
"""

from __future__ import annotations

import argparse
import sqlite3
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
    spread,
    write_project,
    write_section,
)

APP = """from oloproof import system

@system(name="instant", version="1")
def answer(case_input):
    return {"label": "ok"}
"""

READ_RUNS = """import json, sqlite3
import oloproof
conn = sqlite3.connect(".oloproof/store.sqlite")
rows = conn.execute("SELECT id, created_at, status, completeness, gate, exit_code, cases_total,"
                    " system_json FROM runs ORDER BY created_at DESC, id DESC LIMIT 50").fetchall()
systems = [json.loads(r[7]) for r in rows]
assert len(rows) == 50
"""


def copy_runs(store: Path, total: int) -> None:
    """Make ``total`` runs out of the one stored, each with its own id and start time."""
    conn = sqlite3.connect(store)
    (run_id, created) = conn.execute("SELECT id, created_at FROM runs").fetchone()
    cols = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")]
            for t in ("runs", "run_cases", "run_judgments", "decisions")}
    with conn:
        for i in range(1, total):
            new = f"{run_id[:-6]}{i:06d}"
            stamp = f"{created[:11]}{i // 3600:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.000000Z"
            for table, names in cols.items():
                key = "id" if table == "runs" else "run_id"
                subst = {key: new, **({"created_at": stamp} if table == "runs" else {})}
                select = ", ".join("?" if c in subst else c for c in names)
                params = [subst[c] for c in names if c in subst]
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(names)}) SELECT {select} FROM {table}"
                    f" WHERE {key} = ?", (*params, run_id),
                )
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--runs", type=int, default=1000)
    args = ap.parse_args()
    compile_sources()
    with tempfile.TemporaryDirectory() as tmp:
        root = write_project(Path(tmp) / "p", n=10, app=APP)
        repeat(1, [*OLOPROOF, "run"], root)
        copy_runs(root / ".oloproof" / "store.sqlite", args.runs)
        (root / "read_runs.py").write_text(READ_RUNS)
        repeat(1, [*OLOPROOF, "runs"], root)  # warm up
        helps = repeat(args.repeat, [*OLOPROOF, "--help"], root)
        imports = repeat(args.repeat, [PY, "-c", "import oloproof"], root)
        runs = repeat(args.repeat, [*OLOPROOF, "runs"], root)
        floor = repeat(args.repeat, [PY, "read_runs.py"], root)
    t_help, t_imp = med_wall(helps), med_wall(imports)
    t_runs, t_floor = med_wall(runs), med_wall(floor)
    body = "\n".join([
        "## Start-up",
        "",
        (f"Machine: {machine()}; load average after the runs {load_average()}. "
        f"`python bench/startup.py`: median wall time of the whole process over {args.repeat} "
        "runs."),
        "",
        "| command | wall time | ideal | ratio | target | all runs (s) | max RSS |",
        "|---|---:|---:|---:|---|---|---:|",
        (f"| `oloproof --help` | {seconds(t_help)} | {seconds(t_imp)} (`python -c \"import "
        f"oloproof\"`) | {t_help / t_imp:.2f}× | ≤ 0.15 s{' ✓' if t_help <= 0.15 else ' ✗'} "
        f"| {spread([m.wall for m in helps], '{:.3f}')} | {max(m.max_rss_mb for m in helps):.0f} MB |"),
        (f"| `oloproof runs` ({args.runs:,} runs stored, 50 listed) | {seconds(t_runs)} | "
        f"{seconds(t_floor)} (import, read 50 rows) | {t_runs / t_floor:.2f}× | "
        f"| {spread([m.wall for m in runs], '{:.3f}')} | {max(m.max_rss_mb for m in runs):.0f} MB |"),
    ])
    print(body)
    write_section("startup", body)
    record("startup", [
        {"name": "`oloproof --help`", "value": t_help, "unit": "s", "ideal": t_imp,
         "target": "≤ 0.15 s", "met": t_help <= 0.15},
        {"name": f"`oloproof runs` on {args.runs:,} stored runs", "value": t_runs, "unit": "s",
         "ideal": t_floor, "target": "", "met": None},
    ])


if __name__ == "__main__":
    main()
