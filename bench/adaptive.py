"""Adaptive concurrency against a server that takes N requests at once.

    python bench/adaptive.py [--repeat N] [--cases N] [--capacity N] [--delay S]

The fake provider (`python -m oloproof.testing.fake_provider --capacity 8`, its own
process) answers the HTTP system's requests after `--delay` seconds, at most
`--capacity` at once; a request beyond that gets an immediate 429 with
`retry-after-ms` (the delay) and `Retry-After`. The project is an HTTP system with
one `exact_match` criterion; each run is `oloproof run --no-cache`. Measured, in
turn (so a noisy neighbour hurts every setting alike): fixed limits 2, 4, 8, 16
and 32, and `adaptive: true` with ceiling 32.

Figures per setting, medians over the repetitions: the execution phase (from the
run's creation to its last stored case), the whole process, throughput over the
execution phase, the 429s the server sent (its own counter), the cases that ended
in an error, and, for adaptive, the limit it settled on (the median of the limits
it set in the second half of its changes). The target (issue 15): adaptive's
throughput within 15% of the best fixed limit's.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    OLOPROOF,
    PY,
    bench_env,
    compile_sources,
    load_average,
    machine,
    measure,
    median,
    record,
    spread,
    write_section,
)

FIXED = (2, 4, 8, 16, 32)
CEILING = 32


def write_project(root: Path, url: str, n: int) -> Path:
    (root / "data").mkdir(parents=True, exist_ok=True)
    with (root / "data" / "cases.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i:05d}", "input": {"text": f"q{i}"},
                                "expected": {"label": f"q{i}"}}) + "\n")
    return root


def configure(root: Path, url: str, system: int, adaptive: bool) -> None:
    (root / "oloproof.yaml").write_text(
        "version: 1\nproject: bench-adaptive\ndataset: data/cases.jsonl\npolicy: none\n"
        "system:\n  name: capacity-bound\n  http:\n"
        f"    url: {url}/system\n    version: v1\n    output_path: label\n    timeout_s: 30\n"
        f"concurrency:\n  system: {system}\n  adaptive: {'true' if adaptive else 'false'}\n"
        "evaluators:\n  - type: exact_match\n    criterion: exact_label\n    field: null\n"
        "    expected_field: label\n"
    )


def _ts(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def newest_run(store: Path) -> tuple[float, int, int, int, list[int]]:
    """Execution phase (s), cases OK, cases not OK, attempts, limits set (adaptive)."""
    conn = sqlite3.connect(store)
    try:
        run_id, created = conn.execute(
            "SELECT id, created_at FROM runs ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
        ok, bad, attempts, last = conn.execute(
            "SELECT sum(status = 'OK'), sum(status != 'OK'), sum(attempts), max(finished_at)"
            " FROM run_cases WHERE run_id = ?", (run_id,),
        ).fetchone()
        limits = [r[0] for r in conn.execute(
            "SELECT limit_value FROM run_concurrency WHERE run_id = ? AND limit_name = 'system'"
            " ORDER BY seq", (run_id,),
        )]
    finally:
        conn.close()
    return _ts(last) - _ts(created), int(ok), int(bad), int(attempts), limits


def rejected(url: str) -> int:
    with urllib.request.urlopen(url + "/_capacity", timeout=10) as reply:
        return int(json.loads(reply.read())["rejected"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--capacity", type=int, default=8)
    ap.add_argument("--delay", type=float, default=0.05)
    args = ap.parse_args()
    compile_sources()
    n, cap, delay = args.cases, args.capacity, args.delay
    server = subprocess.Popen(
        [PY, "-m", "oloproof.testing.fake_provider", "--port", "0", "--capacity", str(cap),
         "--delay", str(delay), "--retry-after-ms", str(round(delay * 1000))],
        stdout=subprocess.PIPE, text=True, env=bench_env(),
    )
    settings = [(f"fixed {k}", k, False) for k in FIXED] + [(f"adaptive (ceiling {CEILING})",
                                                             CEILING, True)]
    results: dict[str, dict[str, list[float]]] = {
        name: {"phase": [], "wall": [], "429": [], "errors": [], "settled": []}
        for name, _, _ in settings
    }
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            root = write_project(Path(tmp) / "p", url, n)
            store = root / ".oloproof" / "store.sqlite"
            configure(root, url, cap, False)
            measure([*OLOPROOF, "run", "--no-cache"], root)  # warm up client and server
            for _ in range(args.repeat):
                for name, system, adaptive in settings:
                    configure(root, url, system, adaptive)
                    before = rejected(url)
                    m = measure([*OLOPROOF, "run", "--no-cache"], root)
                    phase, ok, bad, _, limits = newest_run(store)
                    assert ok + bad == n, f"{name}: {ok + bad} cases stored, expected {n}"
                    r = results[name]
                    r["phase"].append(phase)
                    r["wall"].append(m.wall)
                    r["429"].append(rejected(url) - before)
                    r["errors"].append(bad)
                    if limits:
                        r["settled"].append(statistics.median(limits[len(limits) // 2:]))
    finally:
        server.terminate()
        server.wait(10)

    def rate(name: str) -> float:
        return n / median(results[name]["phase"])

    fixed_names = [name for name, _, adaptive in settings if not adaptive]
    best = max(fixed_names, key=rate)
    adaptive_name = settings[-1][0]
    ratio = rate(adaptive_name) / rate(best)
    met = ratio >= 0.85
    ideal = n * delay / cap
    rows = []
    for name, _, _ in settings:
        r = results[name]
        settled = f"{median(r['settled']):g}" if r["settled"] else ""
        rows.append(
            f"| {name} | {median(r['phase']):.2f} s | {rate(name):.0f} | "
            f"{rate(name) / rate(best):.0%} | {median(r['429']):.0f} | {median(r['errors']):.0f} | "
            f"{settled} | {median(r['wall']):.2f} s | {spread(r['phase'])} |"
        )
    body = "\n".join([
        f"## Adaptive concurrency: {n} cases against a server that takes {cap} at once",
        "",
        (f"Machine: {machine()}; load average after the runs {load_average()}. "
         f"`python bench/adaptive.py`: an HTTP system served by the fake provider in its own "
         f"process (`--capacity {cap} --delay {delay:g}`: each answer takes {delay * 1000:.0f} ms, "
         f"at most {cap} at once, any request beyond that an immediate 429 with "
         f"`retry-after-ms: {round(delay * 1000)}`), one `exact_match` criterion, "
         f"`oloproof run --no-cache`, median of {args.repeat} runs per setting, settings in "
         f"turn. The execution phase runs from the run's creation to its last stored case; "
         f"the server's floor for it is {n} × {delay:g} s / {cap} = {ideal:.2f} s. 429s are "
         "the server's own count; errors are cases that ran out of attempts (4)."),
        "",
        ("| setting | execution phase | cases/s | of best fixed | 429s | errors | settled limit "
        "| whole process | all runs (phase, s) |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        (f"Adaptive with ceiling {CEILING} runs at **{ratio:.0%} of the best fixed limit's "
         f"throughput** ({best}); target: at least 85% — {'met' if met else 'not met'}."),
    ])
    print(body)
    write_section("adaptive", body)
    record("adaptive", [
        {"name": f"adaptive concurrency, {n} cases at capacity {cap}, cases/s (execution phase)",
         "value": rate(adaptive_name), "unit": "calls/s", "ideal": rate(best),
         "target": "≥ 85% of the best fixed limit", "met": met},
    ])


if __name__ == "__main__":
    main()
