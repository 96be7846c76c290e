"""Every benchmark, then the summary table: `make bench`.

    python bench/run_all.py [--only NAME ...]

Runs each script of bench/ in its own process (each writes its own section of
docs/performance.md), then writes the summary section: every headline figure
beside its ideal, the ratio, and the target it is held to. Takes about ten
minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PY, load_average, machine, write_section

BENCH = Path(__file__).resolve().parent
# In the order the summary lists them. json_overhead.py belongs to the event stream's owner.
SCRIPTS = [
    "seed_table", "scale", "judging", "startup", "startup_parts", "mechanisms", "json_overhead",
    "encoders",
    "humaneval", "imports", "trials", "adaptive", "team_store", "stats_speed", "viewer",
    "evaluator_processes", "ray_executor", "sequential",
]


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"
    if unit == "×":
        return f"{value:.2f}×"
    if unit == "calls/s":
        return f"{value:,.0f} calls/s"
    if unit == "CPU-s/s":
        return f"{value:.3f} CPU-s/s"
    return f"{value:,.0f} {unit}"


def summary(results: list[dict], started: float, load_before: str) -> str:
    lines = [
        "## Summary",
        "",
        (f"Machine: {machine()}. `make bench` took {(time.time() - started) / 60:.1f} min; load "
        f"average (1 / 5 / 15 min) {load_before} before, {load_average()} after. "
        "Medians of whole processes; the sections below give every run."),
        "",
        "| figure | median | ideal | ratio | target |",
        "|---|---:|---:|---:|---|",
    ]
    for result in results:
        for f in result["figures"]:
            ideal = f.get("ideal")
            if ideal is None:
                ideal_s, ratio = "", ""
            elif f.get("ratio_is_fraction"):
                ideal_s, ratio = _fmt(ideal, f["unit"]) + " (server ceiling)", f"{f['value'] / ideal:.0%}"
            elif ideal == 0:
                ideal_s, ratio = _fmt(0, f["unit"]), ""
            else:
                ideal_s, ratio = _fmt(ideal, f["unit"]), f"{f['value'] / ideal:.2f}×"
            met = f.get("met")
            verdict = "" if met is None else (" — met" if met else " — **not met**")
            target = f.get("target") or ("reported" if met is None else "")
            lines.append(f"| {f['name']} | {_fmt(f['value'], f['unit'])} | {ideal_s} | {ratio} "
                         f"| {target}{verdict} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", choices=SCRIPTS, help="run only these scripts")
    args = ap.parse_args()
    started, load_before = time.time(), load_average()
    failed = []
    with tempfile.TemporaryDirectory() as out:
        env = {**__import__("os").environ, "OLOPROOF_BENCH_RESULTS": out}
        for name in args.only or SCRIPTS:
            script = BENCH / f"{name}.py"
            if not script.exists():
                continue
            print(f"== bench/{name}.py", flush=True)
            t = time.time()
            if subprocess.run([PY, str(script)], env=env, check=False).returncode != 0:
                failed.append(name)
            print(f"== bench/{name}.py: {time.time() - t:.0f} s\n", flush=True)
        results = [json.loads(p.read_text()) for name in SCRIPTS
                   if (p := Path(out) / f"{name}.json").exists()]
    if not args.only:
        body = summary(results, started, load_before)
        print(body)
        write_section("summary", body)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
