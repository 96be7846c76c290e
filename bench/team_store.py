"""The team store on PostgreSQL beside the SQLite store, in the same run of the benchmark.

    python bench/team_store.py [--repeat N]

Starts a PostgreSQL server of its own (tests/pgserver.py: initdb and pg_ctl in a temporary
directory, PostgreSQL's default settings for writing to disk, over its Unix socket), then
times the same commands on the same project with each store, alternately, so that a busy
neighbour slows both alike:

1. 10,000 cases of 20 ms at ``system: 200``, fresh (``--no-cache``). Target: PostgreSQL
   within 1.3× of SQLite.
   The same on PostgreSQL with the writer's committer thread switched off (bench/_off,
   ``pg-committer``): what the thread buys.
2. ``gate latest`` on the stored run of (1). Target: within 2× of SQLite. Read through the
   wire client (store/pgwire.py), and through psycopg (``OLOPROOF_PG_DRIVER=psycopg``) for
   the record of what it buys; ``runs`` too.
3. An unchanged rerun of the same 10,000 cases (all cache), for the record.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    OLOPROOF,
    compile_sources,
    load_average,
    machine,
    measure,
    median,
    record,
    seconds,
    spread,
    write_project,
    write_section,
)
from tests import pgserver

OFF = Path(__file__).resolve().parent / "_off"

SYNC_20MS = """import time
from oloproof import system

@system(name="sleepy", version="1")
def answer(case_input):
    time.sleep(0.02)
    return {"label": "ok"}
"""


def _alternate(args: list[str], root: Path, envs: list[dict[str, str]], n: int) -> list[list[float]]:
    """``n`` runs of ``args`` in each environment, alternating; wall times (s)."""
    times: list[list[float]] = [[] for _ in envs]
    for _ in range(n):
        for env, out in zip(envs, times, strict=True):
            out.append(measure(args, root, env).wall)
    return times


def _pair(args: list[str], root: Path, env_pg: dict[str, str], n: int) -> tuple[list[float], list[float]]:
    """``n`` runs of ``args`` on each store, alternating; wall times (s)."""
    a, b = _alternate(args, root, [{"OLOPROOF_STORE": "sqlite"}, env_pg], n)
    return a, b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gate-repeat", type=int, default=11)
    args = ap.parse_args()
    compile_sources()
    server = pgserver.start(durable=True)
    try:
        database = server.create_database()
        env_pg = {"OLOPROOF_STORE": server.url(database)}
        with tempfile.TemporaryDirectory() as tmp:
            root = write_project(Path(tmp) / "scale", n=10_000, app=SYNC_20MS, system=200)
            fresh = [*OLOPROOF, "run", "--no-cache"]
            for env in ({"OLOPROOF_STORE": "sqlite"}, env_pg):  # the stores, and a warm cache
                measure(fresh, root, env)
            # The third: the writer's commits on the event loop's own thread (bench/_off),
            # to say what the committer thread buys.
            env_off = env_pg | {
                "PYTHONPATH": os.pathsep.join(filter(None, [str(OFF), os.environ.get("PYTHONPATH")])),
                "OLOPROOF_BENCH_OFF": "pg-committer",
            }
            load_before = load_average()
            run_sqlite, run_pg, run_off = _alternate(
                fresh, root, [{"OLOPROOF_STORE": "sqlite"}, env_pg, env_off], args.repeat
            )
            gate = [*OLOPROOF, "gate", "latest"]
            # The reading commands read through the wire client (store/pgwire.py); the
            # third series reads through psycopg, what they did before (and the way out).
            gate_sqlite, gate_pg, gate_psycopg = _alternate(
                gate, root, [{"OLOPROOF_STORE": "sqlite"}, env_pg,
                             env_pg | {"OLOPROOF_PG_DRIVER": "psycopg"}], args.gate_repeat
            )
            runs = [*OLOPROOF, "runs"]
            runs_sqlite, runs_pg = _pair(runs, root, env_pg, args.gate_repeat)
            rerun = [*OLOPROOF, "run"]
            rerun_sqlite, rerun_pg = _pair(rerun, root, env_pg, args.repeat)
    finally:
        server.stop()
    rows = []
    figures = []
    for label, sq, pg, target in (
        ("10,000 × 20 ms at `system: 200`, fresh (`--no-cache`)", run_sqlite, run_pg, 1.3),
        ("the same, the writer committing on the event loop's thread (no committer thread)",
         run_sqlite, run_off, None),
        ("`gate latest` on that run", gate_sqlite, gate_pg, 2.0),
        ("the same through psycopg (`OLOPROOF_PG_DRIVER=psycopg`)", gate_sqlite, gate_psycopg,
         None),
        ("`runs`", runs_sqlite, runs_pg, None),
        ("unchanged rerun of the 10,000 cases (all cache)", rerun_sqlite, rerun_pg, None),
    ):
        ratio = median(pg) / median(sq)
        met = None if target is None else ratio <= target
        mark = "" if target is None else f"≤ {target:.1f}×{' ✓' if met else ' ✗'}"
        rows.append(
            f"| {label} | {seconds(median(sq))} | {seconds(median(pg))} | {ratio:.2f}× | {mark} "
            f"| {spread(sq)} | {spread(pg)} |"
        )
        figures.append({"name": f"PostgreSQL store: {label} (PostgreSQL / SQLite)",
                        "value": ratio, "unit": "×", "ideal": 1.0,
                        "target": "" if target is None else f"≤ {target:.1f}×", "met": met})
    lines = [
        "## The team store (PostgreSQL) beside SQLite",
        "",
        (f"Machine: {machine()}. `python bench/team_store.py`: the same project and commands on "
         "each store, alternately; median wall time of the whole process. PostgreSQL 15 runs "
         "on the same machine (its own process, over a Unix socket) with its default settings "
         "for writing to disk; the writer's session commits without waiting for the disk "
         "(`synchronous_commit = off`), as SQLite's store does (`synchronous = NORMAL`)."),
        "",
        "| command | SQLite | PostgreSQL | ratio | target | SQLite runs (s) | PostgreSQL runs (s) |",
        "|---|---:|---:|---:|---|---|---|",
        *rows,
        "",
        f"Load average before the runs: {load_before}; after them: {load_average()}.",
    ]
    body = "\n".join(lines)
    print(body)
    write_section("team-store", body)
    record("team_store", figures)


if __name__ == "__main__":
    main()
