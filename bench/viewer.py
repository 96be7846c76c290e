"""The viewer and the report on a large run, and many clients following a live one.

    python bench/viewer.py [--cases 50000] [--live-cases 3000] [--clients 100] [--repeat 3]

1. A run of 50,000 cases (two criteria, one case in ten failing with a reason) is stored
   once. ``oloproof view`` serves it; each figure is the wall time of one HTTP request seen
   by a client on the same machine (keep-alive, the token as a bearer token):
   - a case page (30 cases drawn at random);
   - the run page, cold (the first request after the viewer starts: it sorts every case by
     outcome and decides the run from its store), over ``--repeat`` fresh viewers;
   - the run page, warm (another page of its cases, once the run's summary is kept), and
     the run page filtered by outcome, and searched for a text.
   Targets (issue 29): a case page ≤ 100 ms, the run page ≤ 1 s.
2. ``oloproof report`` of that run: wall time, peak memory and size of the file, with the
   default cap (1,000 cases) and with ``--cases all`` (what every report was before); and
   the report of a comparison of the run with a rerun of it.
3. A live run of 3,000 cases (20 ms each at ``system: 4``) followed by 100 clients of the
   event stream, from another process: the viewer's CPU time (its threads' time on a CPU,
   from /proc) per second of wall time while they follow it. Target: ≤ 0.1 CPU-s/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    OLOPROOF,
    bench_env,
    compile_sources,
    load_average,
    machine,
    measure,
    record,
    seconds,
    spread,
    write_section,
)

TOKEN = "bench-viewer-token-0123456789abcdef"

BIG_APP = """from oloproof import system

@system(name="bench-view", version="1")
def answer(case_input):
    n = case_input["n"]
    return {"label": "ok" if n % 10 else "refund",
            "answer": "Thank you for asking about order %d; here is what we found." % n}
"""

LIVE_APP = """import time
from oloproof import system

@system(name="bench-live", version="1")
def answer(case_input):
    time.sleep(0.02)
    return {"label": "ok" if case_input["n"] % 10 else "refund"}
"""

EVALUATORS = """  - type: exact_match
    criterion: exact_label
    field: label
"""


def write_project(root: Path, n: int, app: str, system: int, evaluators: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.py").write_text(app)
    (root / "data").mkdir(exist_ok=True)
    with (root / "data" / "cases.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({
                "id": f"q{i:06d}",
                "input": {"n": i, "question": f"Where is my order {i}? It was due last week."},
                "expected": {"label": "ok"}, "metadata": {"lang": "en"},
            }) + "\n")
    (root / "oloproof.yaml").write_text(
        "version: 1\nproject: bench-view\ndataset: data/cases.jsonl\n"
        "system:\n  name: bench-view\n  version: '1'\n  callable: app:answer\n"
        f"concurrency:\n  system: {system}\n  judge: 4\nevaluators:\n{evaluators}"
    )
    (root / "release.yaml").write_text(
        "version: 1\nrules:\n  - id: label-floor\n    metric: exact_label\n    min: 0.85\n")
    return root


class Viewer:
    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [*OLOPROOF, "view", "--no-open"], cwd=root, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True,
            env=bench_env({"OLOPROOF_VIEW_TOKEN": TOKEN}),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            self.proc.kill()
            raise SystemExit(f"oloproof view printed {line!r}")
        self.base = match.group()
        import httpx

        self.client = httpx.Client(base_url=self.base, timeout=300,
                                   headers={"Authorization": f"Bearer {TOKEN}"})
        self.cpus: list[float] = []

    def get(self, path: str) -> float:
        """The wall time of one request; its CPU time in the viewer goes to :attr:`cpus`."""
        cpu = self.cpu()
        start = time.perf_counter()
        response = self.client.get(path)
        wall = time.perf_counter() - start
        self.cpus.append(self.cpu() - cpu)
        if response.status_code != 200:
            raise SystemExit(f"GET {path}: {response.status_code} {response.text[:300]}")
        return wall

    def cpu(self) -> float:
        """CPU seconds of the viewer process so far: the time on a CPU of each of its threads
        (/proc/PID/task/*/schedstat, nanoseconds), else user + system in clock ticks."""
        tasks = Path(f"/proc/{self.proc.pid}/task")
        try:
            return sum(int((t / "schedstat").read_text().split()[0])
                       for t in tasks.iterdir()) / 1e9
        except (OSError, ValueError, IndexError):
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def latest_run(root: Path) -> dict[str, Any]:
    out = subprocess.run([*OLOPROOF, "runs", "--json"], cwd=root, capture_output=True,
                         text=True, check=True, env=bench_env()).stdout
    return dict(json.loads(out)[0])


# The clients of the event stream, in a process of their own (their CPU is not the
# viewer's): N connections, each reading its stream to the end; prints "connected" once
# every one has its answer's headers, then one line of JSON when all are done.
CLIENTS = r"""
import asyncio, json, sys
host, port, path, n, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]

async def follow(ready):
    reader, writer = await asyncio.open_connection(host, port)
    writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                  f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    ready.append(head.split(b" ")[1])
    counts = {"bytes": 0, "case_executed": 0, "run_finished": 0}
    tail = b""
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        counts["bytes"] += len(chunk)
        text = tail + chunk
        counts["case_executed"] += text.count(b"event: case_executed\n") - tail.count(b"event: case_executed\n")
        if b"event: run_finished" in text:
            counts["run_finished"] = 1
        tail = text[-64:]
    writer.close()
    return counts

async def main():
    ready = []
    tasks = [asyncio.ensure_future(follow(ready)) for _ in range(n)]
    while len(ready) < n:
        await asyncio.sleep(0.01)
    print("connected", ready.count(b"200"), flush=True)
    results = await asyncio.gather(*tasks)
    print(json.dumps(results), flush=True)

asyncio.run(main())
"""


def bench_big(root: Path, cases: int, repeat: int) -> tuple[list[str], list[dict[str, Any]]]:
    start = time.perf_counter()
    subprocess.run([*OLOPROOF, "run"], cwd=root, check=False, env=bench_env(),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_wall = time.perf_counter() - start
    run_id = latest_run(root)["id"]
    store_mb = (root / ".oloproof" / "store.sqlite").stat().st_size / 1e6
    cold: list[float] = []
    cold_cpu: list[float] = []
    for _ in range(repeat):
        viewer = Viewer(root)
        try:
            cold.append(viewer.get(f"runs/{run_id}"))
            cold_cpu.append(viewer.cpus[-1])
        finally:
            viewer.close()
    viewer = Viewer(root)
    try:
        viewer.get(f"runs/{run_id}/case?id=q000001")  # the imports, once

        def timed(paths: list[str]) -> tuple[list[float], list[float]]:
            walls = [viewer.get(p) for p in paths]
            return walls, viewer.cpus[-len(paths):]

        rng = random.Random(7)
        case, case_cpu = timed([f"runs/{run_id}/case?id=q{rng.randrange(cases):06d}"
                                for _ in range(30)])
        first = viewer.get(f"runs/{run_id}")
        warm, warm_cpu = timed([f"runs/{run_id}?page={p}" for p in (2, 17, 250, 400, 499)])
        failed, failed_cpu = timed([f"runs/{run_id}?outcome=failed&page={p}" for p in (1, 30)])
        searched, searched_cpu = timed([f"runs/{run_id}?q=order+4242"] * 2)
        index, index_cpu = timed([""] * 5)
    finally:
        viewer.close()
    del first
    target_case, target_run = 0.1, 1.0
    med_case, max_case = statistics.median(case), max(case)
    med_cold = statistics.median(cold)
    lines = [
        f"### {cases:,} cases: pages of `oloproof view`",
        "",
        (f"The run (one `exact_match` criterion; one case in ten fails, with its reason) took "
         f"{seconds(run_wall)} to store; the store is {store_mb:.0f} MB. Each figure is one HTTP "
         "request's wall time, seen by a client on the same machine. Targets: a case page "
         "≤ 100 ms, the run page ≤ 1 s."),
        "",
        ("The viewer's CPU time for the request (its threads' time on a CPU, from /proc) is "
         "beside it: on a machine shared with other jobs the wall time is longer than the work, "
         "not the CPU time."),
        "",
        "| page | median | max | viewer CPU (median) | target | all (s) |",
        "|---|---:|---:|---:|---|---|",
        (f"| a case page (30 cases at random) | {seconds(med_case)} | {seconds(max_case)} | "
         f"{seconds(statistics.median(case_cpu))} | "
         f"≤ 100 ms{' ✓' if max_case <= target_case else ' ✗'} | "
         f"{spread(case, '{:.3f}')} |"),
        (f"| the run page, cold (first request of a fresh viewer, {repeat} viewers) | "
         f"{seconds(med_cold)} | {seconds(max(cold))} | {seconds(statistics.median(cold_cpu))} | "
         f"≤ 1 s{' ✓' if med_cold <= target_run else ' ✗'} | {spread(cold)} |"),
        (f"| the run page, warm (pages 2, 17, 250, 400, 499) | {seconds(statistics.median(warm))} "
         f"| {seconds(max(warm))} | {seconds(statistics.median(warm_cpu))} | "
         f"≤ 1 s{' ✓' if max(warm) <= target_run else ' ✗'} | {spread(warm)} |"),
        (f"| the failed cases (pages 1 and 30) | {seconds(statistics.median(failed))} | "
         f"{seconds(max(failed))} | {seconds(statistics.median(failed_cpu))} | | "
         f"{spread(failed)} |"),
        (f"| a search of every case's text | {seconds(statistics.median(searched))} | "
         f"{seconds(max(searched))} | {seconds(statistics.median(searched_cpu))} | | "
         f"{spread(searched)} |"),
        (f"| the runs list | {seconds(statistics.median(index))} | {seconds(max(index))} | "
         f"{seconds(statistics.median(index_cpu))} | | {spread(index, '{:.3f}')} |"),
    ]
    figures = [
        {"name": f"viewer, a case page of a {cases:,}-case run", "value": med_case, "unit": "s",
         "target": "≤ 100 ms", "met": max_case <= target_case},
        {"name": f"viewer, the run page of a {cases:,}-case run (cold)", "value": med_cold,
         "unit": "s", "target": "≤ 1 s", "met": med_cold <= target_run},
        {"name": f"viewer, the run page of a {cases:,}-case run (cold), the viewer's CPU time",
         "value": statistics.median(cold_cpu), "unit": "s", "target": "", "met": None},
        {"name": "viewer, another page of the run's cases (warm)",
         "value": statistics.median(warm), "unit": "s", "target": "≤ 1 s",
         "met": max(warm) <= target_run},
    ]
    out = root / "report.html"
    reports = [measure([*OLOPROOF, "report", "latest", "-o", str(out)], root)
               for _ in range(repeat)]
    capped_mb = out.stat().st_size / 1e6
    whole = measure([*OLOPROOF, "report", "latest", "--cases", "all", "-o", str(out)], root)
    whole_mb = out.stat().st_size / 1e6
    med_report = statistics.median(m.wall for m in reports)
    lines += [
        "",
        f"### {cases:,} cases: `oloproof report`",
        "",
        ("Whole processes. By default the file carries 1,000 cases, the failed and missing ones "
         "first, and says what it left out; `--cases all` writes every case, as every report did "
         "before the cap."),
        "",
        "| report | wall time | all runs (s) | max RSS | file |",
        "|---|---:|---|---:|---:|",
        (f"| default (`--cases 1000`) | {seconds(med_report)} | "
         f"{spread([m.wall for m in reports])} | {max(m.max_rss_mb for m in reports):.0f} MB | "
         f"{capped_mb:.1f} MB |"),
        (f"| `--cases all` | {seconds(whole.wall)} | {whole.wall:.2f} | {whole.max_rss_mb:.0f} MB "
         f"| {whole_mb:.0f} MB |"),
    ]
    figures.append({"name": f"report of a {cases:,}-case run (default cap)", "value": med_report,
                    "unit": "s", "target": "", "met": None})
    # A comparison of that run with a rerun of it (all cache), and its report.
    subprocess.run([*OLOPROOF, "run"], cwd=root, check=False, env=bench_env(),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rerun = latest_run(root)["id"]
    made = subprocess.run([*OLOPROOF, "compare", rerun, run_id, "--json"], cwd=root,
                          capture_output=True, text=True, check=False, env=bench_env())
    cmp_id = json.loads(made.stdout)["comparison_id"]
    cmp_reports = [measure([*OLOPROOF, "report", cmp_id, "-o", str(out)], root)
                   for _ in range(repeat)]
    lines += [
        (f"| a comparison of it with its rerun | "
         f"{seconds(statistics.median(m.wall for m in cmp_reports))} | "
         f"{spread([m.wall for m in cmp_reports])} | "
         f"{max(m.max_rss_mb for m in cmp_reports):.0f} MB | {out.stat().st_size / 1e6:.2f} MB |"),
    ]
    return lines, figures


def bench_live(root: Path, n: int, clients: int) -> tuple[list[str], list[dict[str, Any]]]:
    env = bench_env()
    subprocess.run([*OLOPROOF, "run", "--limit", "1"], cwd=root, check=False, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the store
    viewer = Viewer(root)
    run = subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=root, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            latest = latest_run(root)
            if latest["status"] == "RUNNING":
                break
            if run.poll() is not None:
                raise SystemExit("the live run ended before it could be followed")
            time.sleep(0.05)
        time.sleep(1.0)  # a few hundred cases in
        port = int(viewer.base.rsplit(":", 1)[1].strip("/"))
        followers = subprocess.Popen(
            [sys.executable, "-c", CLIENTS, "127.0.0.1", str(port),
             f"/runs/{latest['id']}/events", str(clients), TOKEN],
            stdout=subprocess.PIPE, text=True,
        )
        assert followers.stdout is not None
        connected = followers.stdout.readline().split()
        cpu0, t0 = viewer.cpu(), time.perf_counter()
        while run.poll() is None:
            time.sleep(0.1)
        cpu1, t1 = viewer.cpu(), time.perf_counter()
        results = json.loads(followers.stdout.readline())
        followers.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
        viewer.close()
    rate = (cpu1 - cpu0) / (t1 - t0)
    events = [r["case_executed"] for r in results]
    finished = sum(r["run_finished"] for r in results)
    lines = [
        "",
        f"### {clients} clients following a live run of {n:,} cases",
        "",
        ("Cases of 20 ms at `system: 4`. The clients (another process) connect a second into the "
         "run and read their streams to the end; the figure is the viewer's CPU time (its "
         "threads' time on a CPU, from /proc) over the wall time from when every client had its "
         "answer to the end of the run. Target: ≤ 0.1 CPU-s/s."),
        "",
        "| clients | connected | window | viewer CPU | CPU-s/s | target | case events per client | saw run_finished |",
        "|---:|---:|---:|---:|---:|---|---|---:|",
        (f"| {clients} | {connected[1] if len(connected) > 1 else '?'} | {t1 - t0:.1f} s | "
         f"{cpu1 - cpu0:.2f} s | {rate:.3f} | ≤ 0.1{' ✓' if rate <= 0.1 else ' ✗'} | "
         f"{min(events)}–{max(events)} | {finished} |"),
    ]
    return lines, [{"name": f"viewer, {clients} clients of a live run's event stream",
                    "value": rate, "unit": "CPU-s/s", "target": "≤ 0.1 CPU-s/s",
                    "met": rate <= 0.1}]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=50_000)
    ap.add_argument("--live-cases", type=int, default=3_000)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    compile_sources()
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        big = write_project(Path(tmp) / "big", args.cases, BIG_APP, 8, EVALUATORS)
        lines, figures = bench_big(big, args.cases, args.repeat)
        live = write_project(Path(tmp) / f"live-{args.live_cases}", args.live_cases, LIVE_APP, 4,
                             EVALUATORS)
        more, live_figures = bench_live(live, args.live_cases, args.clients)
    body = "\n".join([
        "## The viewer and the report at scale",
        "",
        (f"Machine: {machine()}. `python bench/viewer.py`. Load average (1 / 5 / 15 min) "
         f"{load_before} before, {load_average()} after."),
        "",
        *lines, *more,
    ])
    print(body)
    write_section("viewer", body)
    record("viewer", figures + live_figures)


if __name__ == "__main__":
    main()
