"""Custom evaluators that burn CPU: worker threads against worker processes.

    python bench/evaluator_processes.py [--problems 164] [--repeat 5] [--work-ms 40]

The HumanEval-shaped problems of bench/humaneval.py, with two changes that make the
evaluator bound by the CPU of the process that runs it: the evaluator compiles and executes
the completion and its tests **in its own process** (`exec`, many rounds, about
`--work-ms` a call: what a pure-Python scorer or an in-process code runner does), and the
system is an **HTTP endpoint** (a server in another process that answers after 100 ms and
counts the requests in flight), at `concurrency.system: 8`, so that the system's calls and
the evaluations overlap.

Measured in one warm process, alternating (`oloproof.run(use_cache=False)` each time):

- `concurrency.evaluator: C` (worker threads: the GIL lets one evaluation run at a time);
- `concurrency.evaluator_processes: C` (worker processes);
- the same run without the CPU-bound evaluator (the system's calls alone);

beside two plain loops of the same function (no Oloproof): one after another in this process
(one core's worth), and `ProcessPoolExecutor(C)` (what this machine gives right now). C is the
number of cores.

Targets (issue 27): throughput with processes ≥ 0.8 × cores' worth (cores × the one-core
loop's); the system's HTTP concurrency unaffected (the mean number in flight at the server
while the system's calls go on, against the run without the evaluator).
Writes the `evaluator-processes` section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PY, bench_env, load_average, machine, median, record, spread, write_section
from humaneval import problems

SERVER = r'''
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LATENCY = float(sys.argv[1])
lock = threading.Lock()
state = {"now": 0, "first": None, "last": None, "area": 0.0, "mark": None, "requests": 0}


def moved(delta):
    t = time.monotonic()
    with lock:
        if state["mark"] is not None:
            state["area"] += state["now"] * (t - state["mark"])
        state["mark"] = t
        state["now"] += delta
        if delta > 0:
            state["requests"] += 1
            if state["first"] is None:
                state["first"] = t
        else:
            state["last"] = t


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with lock:
            span = (state["last"] or 0) - (state["first"] or 0)
            body = {"requests": state["requests"], "span": span,
                    "mean_in_flight": state["area"] / span if span > 0 else 0.0}
            if self.path == "/reset":
                state.update(now=0, first=None, last=None, area=0.0, mark=None, requests=0)
        self._send(body)

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        moved(+1)
        time.sleep(LATENCY)
        moved(-1)
        self._send({"completion": payload["reference"]})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
'''

HERE = '''
def passes_here(output, case, rounds=1):
    """Compile and execute the completion and its tests in this process, ``rounds`` times."""
    source = case.input["prompt"] + output["completion"] + "\\n" + case.expected["tests"]
    entry = case.input["entry_point"]
    for _ in range(rounds):
        namespace = {}
        exec(compile(source, "<completion>", "exec"), namespace)
        namespace["check"](namespace[entry])
    return True
'''

INPROCESS = '''
import json, sys, time
from concurrent.futures import ProcessPoolExecutor
from types import SimpleNamespace

import oloproof

sys.path.insert(0, ".")
from here import passes_here

cores, repeat, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cases = [json.loads(line) for line in open("data/problems.jsonl")]
views = [SimpleNamespace(id=c["id"], input=c["input"], expected=c["expected"], metadata=None)
         for c in cases]


def one(view):
    return passes_here({"completion": view.input["reference"]}, view, rounds=rounds)


def server(path):
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[4], path)) as r:
        return json.loads(r.read())


def run(config):
    server("/reset")
    t = time.perf_counter()
    result = oloproof.run(config, use_cache=False)
    wall = time.perf_counter() - t
    assert result.status == "DECIDED", result.stop_reason
    for m in result.metrics.values():
        assert m.passed == len(cases), (m.metric, m.passed)
    return wall, server("/stats")


# Warm: imports, the project's modules, the store.
for config in ("threads.yaml", "processes.yaml", "system_only.yaml"):
    run(config)
with ProcessPoolExecutor(cores) as pool:
    list(pool.map(one, views[:cores]))
out = {k: [] for k in ("threads", "processes", "system_only", "serial", "pool",
                       "threads_http", "processes_http", "system_only_http")}
for _ in range(repeat):
    for name in ("threads", "processes", "system_only"):
        wall, stats = run(name + ".yaml")
        out[name].append(wall)
        out[name + "_http"].append(stats)
    t = time.perf_counter()
    assert all(one(v) for v in views)
    out["serial"].append(time.perf_counter() - t)
    t = time.perf_counter()
    with ProcessPoolExecutor(cores) as pool:
        assert all(pool.map(one, views))
    out["pool"].append(time.perf_counter() - t)
print(json.dumps(out))
'''


def calibrate(root: Path, work_ms: float) -> tuple[int, float]:
    """The rounds that make one call take about ``work_ms`` in one process, and the time."""
    probe = textwrap.dedent('''
        import json, sys, time
        from types import SimpleNamespace
        sys.path.insert(0, ".")
        from here import passes_here
        cases = [json.loads(line) for line in open("data/problems.jsonl")][:16]
        views = [SimpleNamespace(id=c["id"], input=c["input"], expected=c["expected"])
                 for c in cases]
        best = []
        for _ in range(3):
            t = time.perf_counter()
            for v in views:
                passes_here({"completion": v.input["reference"]}, v, rounds=50)
            best.append((time.perf_counter() - t) / len(views) / 50)
        print(min(best))
    ''')
    per_round = float(subprocess.run([PY, "-c", probe], cwd=root, env=bench_env(),
                                     capture_output=True, text=True, check=True).stdout)
    rounds = max(1, round(work_ms / 1000 / per_round))
    return rounds, rounds * per_round


def make_project(root: Path, n: int, cores: int, port: int) -> None:
    (root / "data").mkdir(parents=True)
    with (root / "data" / "problems.jsonl").open("w") as fh:
        for p in problems(n):
            p["input"]["reference"] = p["expected"].pop("completion")  # type: ignore[index, union-attr]
            fh.write(json.dumps(p) + "\n")
    (root / "here.py").write_text(HERE)
    (root / "inprocess.py").write_text(INPROCESS)


def write_configs(root: Path, cores: int, port: int, rounds: int) -> None:
    head = textwrap.dedent(f"""\
        version: 1
        project: evaluator-processes
        dataset: data/problems.jsonl
        policy: none
        system:
          name: reference
          http:
            url: http://127.0.0.1:{port}/complete
            version: "1"
        """)
    evaluator = textwrap.dedent(f"""\
        evaluators:
          - type: custom
            criterion: tests_pass
            function: here:passes_here
            params: {{rounds: {rounds}}}
            timeout_s: 120
        """)
    system_only = textwrap.dedent("""\
        evaluators:
          - type: json_schema
            criterion: has_completion
            schema: {type: object, required: [completion]}
        """)
    (root / "threads.yaml").write_text(
        head + f"concurrency:\n  system: 8\n  evaluator: {cores}\n" + evaluator)
    (root / "processes.yaml").write_text(
        head + f"concurrency:\n  system: 8\n  evaluator_processes: {cores}\n" + evaluator)
    (root / "system_only.yaml").write_text(head + "concurrency:\n  system: 8\n" + system_only)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", type=int, default=164)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work-ms", type=float, default=40.0)
    ap.add_argument("--latency", type=float, default=0.1)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    load_before = load_average()
    server = subprocess.Popen([PY, "-c", SERVER, str(args.latency)], stdout=subprocess.PIPE,
                              text=True, env=bench_env())
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "ep"
            make_project(root, args.problems, cores, port)
            rounds, per_call = calibrate(root, args.work_ms)
            write_configs(root, cores, port, rounds)
            done = subprocess.run(
                [PY, "inprocess.py", str(cores), str(args.repeat), str(rounds), str(port)],
                cwd=root, env=bench_env(), capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            out = json.loads(done.stdout)
    finally:
        server.kill()
        server.wait()
    n = args.problems
    serial, pool = median(out["serial"]), median(out["pool"])
    threads, procs = median(out["threads"]), median(out["processes"])
    one_core = n / serial  # evaluations per second, one after another in one process
    ceiling = cores * one_core
    tput = {"threads": n / threads, "processes": n / procs, "pool": n / pool}
    share = tput["processes"] / ceiling
    met = share >= 0.8

    def http(name: str) -> tuple[float, float]:
        stats = out[name + "_http"]
        return (median([s["mean_in_flight"] for s in stats]), median([s["span"] for s in stats]))

    h_only, h_threads, h_procs = http("system_only"), http("threads"), http("processes")
    http_met = h_procs[0] >= 0.95 * h_only[0]
    body = "\n".join([
        "## Custom evaluators that burn CPU: threads or processes",
        "",
        (f"Machine: {machine()}; load average (1 / 5 / 15 min) {load_before} before,"
         f" {load_average()} after. `python bench/evaluator_processes.py --problems {n}"
         f" --repeat {args.repeat} --work-ms {args.work_ms:g}`: the {n} HumanEval-shaped"
         " problems of bench/humaneval.py; the evaluator compiles and executes each"
         f" completion and its tests in its own process, {rounds} times ({per_call * 1000:.0f} ms"
         " a call, calibrated), so it holds the GIL; the system is an HTTP endpoint in another"
         f" process that answers after {args.latency * 1000:.0f} ms, at `concurrency.system: 8`."
         f" In one warm process, alternating, {args.repeat} rounds; C = {cores} (the cores)."),
        "",
        "| | median | runs (s) | evaluations/s | × one core |",
        "|---|---:|---|---:|---:|",
        (f"| plain loop, one after another (one core's worth) | {serial:.2f} s"
         f" | {spread(out['serial'])} | {one_core:.1f} | 1.00 |"),
        (f"| plain `ProcessPoolExecutor({cores})` (this machine now) | {pool:.2f} s"
         f" | {spread(out['pool'])} | {tput['pool']:.1f} | {tput['pool'] / one_core:.2f} |"),
        (f"| `oloproof.run()`, `concurrency.evaluator: {cores}` (threads) | {threads:.2f} s"
         f" | {spread(out['threads'])} | {tput['threads']:.1f} | {tput['threads'] / one_core:.2f} |"),
        (f"| `oloproof.run()`, `concurrency.evaluator_processes: {cores}` | {procs:.2f} s"
         f" | {spread(out['processes'])} | {tput['processes']:.1f}"
         f" | {tput['processes'] / one_core:.2f} |"),
        "",
        (f"With processes: **{share:.2f} × cores' worth** of throughput ({cores} × the one-core"
         f" loop; target ≥ 0.80: {'met' if met else 'not met'}); the plain process pool gave"
         f" {tput['pool'] / ceiling:.2f} × on the same machine meanwhile. The whole run is timed"
         " (the system's calls, starting the worker processes, the store, the decision), the"
         " plain loops only the evaluations."),
        "",
        ("The system's calls meanwhile, as the server saw them (mean number in flight from its"
        " first request to its last answer, and that span):"),
        "",
        "| run | mean in flight (of 8) | span of the system's calls |",
        "|---|---:|---:|",
        f"| without the CPU-bound evaluator | {h_only[0]:.2f} | {h_only[1]:.2f} s |",
        f"| evaluator in threads | {h_threads[0]:.2f} | {h_threads[1]:.2f} s |",
        f"| evaluator in processes | {h_procs[0]:.2f} | {h_procs[1]:.2f} s |",
        "",
        (f"With processes the system keeps {h_procs[0] / h_only[0]:.0%} of its concurrency"
         f" (target ≥ 95%: {'met' if http_met else 'not met'}); with threads,"
         f" {h_threads[0] / h_only[0]:.0%}."),
    ])
    print(body)
    write_section("evaluator-processes", body)
    record("evaluator_processes", [
        {"name": f"CPU-bound evaluator, {n} calls, evaluator_processes: {cores}",
         "value": tput["processes"], "unit": "calls/s", "ideal": ceiling,
         "target": "≥ 0.8 × cores' worth", "met": met, "ratio_is_fraction": True},
        {"name": "HTTP concurrency while evaluators burn CPU (processes)",
         "value": h_procs[0], "unit": "in flight", "ideal": h_only[0],
         "target": "≥ 95% of the run without them", "met": http_met},
    ])
    return 0


if __name__ == "__main__":
    sys.exit(main())
