"""Judging: 2,000 rubric-judge calls at `judge: 32` against the fake provider.

    python bench/judging.py [--repeat N] [--cases N]

The fake provider (`python -m oloproof.testing.fake_provider`, a threaded
HTTP server in its own process) answers in the Anthropic Messages format. The
project has one `rubric_judge` criterion, provider `anthropic`, `base_url` on
the fake server and a dummy key; the system under test answers at once, so
the run is all judging. Each run is `oloproof run --no-cache`: every case is
judged afresh. The judging phase is read from the store: from the run's
creation (just before its first call) to the last judgment it stored (a
fresh judgment's cache entry is stamped with the time it was judged).

The ceiling is the server's own: a tight httpx async loop in a process of its
own, 32 requests in flight, sending the same requests (the same prompt as the
judge builds), timed around the loop only. The ratio is Oloproof's calls per
second over the judging phase against that ceiling.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
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
    seconds,
    spread,
    write_project,
    write_section,
)

APP = """from oloproof import system

@system(name="instant", version="1")
def answer(case_input):
    return {"answer": f"The answer to {case_input['n']} is 42."}
"""

RUBRIC = "Pass if the answer states a number. Fail otherwise."

EVALUATORS = f"""  - type: rubric_judge
    criterion: helpful
    provider: anthropic
    model: fake-judge-1
    base_url: {{url}}
    api_key_env: BENCH_FAKE_KEY
    rubric_text: "{RUBRIC}"
    max_tokens: 256
"""

# The server's ceiling: the judge's own requests, from a tight loop.
CEILING = f"""import asyncio, json, sys, time
import httpx
from oloproof.providers.verdict import build_judge_prompt

url, n, inflight = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
RUBRIC = {RUBRIC!r}

def body(i):
    system, user = build_judge_prompt(RUBRIC, {{"n": i}}, {{"label": "ok"}},
                                      {{"answer": f"The answer to {{i}} is 42."}})
    return {{"model": "fake-judge-1", "max_tokens": 256, "temperature": 0.0, "system": system,
            "messages": [{{"role": "user", "content": user}}]}}

async def main():
    limits = httpx.Limits(max_connections=inflight, max_keepalive_connections=inflight)
    headers = {{"x-api-key": "dummy-key", "anthropic-version": "2023-06-01"}}
    async with httpx.AsyncClient(limits=limits, headers=headers) as client:
        todo = iter(range(n))
        async def worker():
            for i in todo:
                r = await client.post(url + "/v1/messages", json=body(i), timeout=60)
                r.raise_for_status()
                r.json()
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(inflight)))
        print(json.dumps({{"seconds": time.perf_counter() - start}}))

asyncio.run(main())
"""


def _ts(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def judging_phase(store: Path) -> tuple[float, int]:
    """Seconds from the newest run's creation to its last judgment, and its judgments."""
    conn = sqlite3.connect(store)
    try:
        run_id, created = conn.execute(
            "SELECT id, created_at FROM runs ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
        judged, last = conn.execute(
            "SELECT count(*), max(c.created_at) FROM run_judgments j"
            " JOIN judge_cache c ON c.key = j.judge_key WHERE j.run_id = ? AND j.status = 'OK'",
            (run_id,),
        ).fetchone()
    finally:
        conn.close()
    return _ts(last) - _ts(created), int(judged)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--judge", type=int, default=32)
    args = ap.parse_args()
    compile_sources()
    n, inflight = args.cases, args.judge
    server = subprocess.Popen([PY, "-m", "oloproof.testing.fake_provider", "--port", "0"],
                              stdout=subprocess.PIPE, text=True, env=bench_env())
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            root = write_project(Path(tmp) / "p", n=n, app=APP, system=8, judge=inflight,
                                 evaluators=EVALUATORS.format(url=url))
            (root / "ceiling.py").write_text(CEILING)
            env = {"BENCH_FAKE_KEY": "dummy-key"}
            store = root / ".oloproof" / "store.sqlite"
            runs, phases = [], []
            ceiling_s = []
            measure([PY, "ceiling.py", url, str(n), str(inflight)], root)  # warm up both
            measure([*OLOPROOF, "run", "--no-cache"], root, env)
            for _ in range(args.repeat):
                # Alternate, so that a noisy neighbour hurts both alike.
                proc = subprocess.run([PY, "ceiling.py", url, str(n), str(inflight)], cwd=root,
                                      env=bench_env(), capture_output=True, text=True, check=True)
                ceiling_s.append(json.loads(proc.stdout)["seconds"])
                runs.append(measure([*OLOPROOF, "run", "--no-cache"], root, env))
                phase, judged = judging_phase(store)
                assert judged == n, f"{judged} judgments, expected {n}"
                phases.append(phase)
    finally:
        server.terminate()
        server.wait(10)
    ceiling = n / median(ceiling_s)
    rate = n / median(phases)
    whole = n / median([m.wall for m in runs])
    ratio = rate / ceiling
    body = "\n".join([
        f"## Judging: {n:,} judge calls at `judge: {inflight}`",
        "",
        (f"Machine: {machine()}; load average after the runs {load_average()}. "
        "`python bench/judging.py`: one `rubric_judge` criterion (provider `anthropic`) against "
        "the fake provider (`oloproof.testing.fake_provider`, its own process), "
        f"`oloproof run --no-cache`, median of {args.repeat} runs. The ceiling is the "
        f"server's: a tight httpx async loop, {inflight} in flight, sending the judge's own "
        "requests, run alternately with Oloproof. Client and server share the machine's 2 cores."),
        "",
        "| measure | calls per second | time for all calls | all runs (s) |",
        "|---|---:|---:|---|",
        (f"| server ceiling (httpx loop, {inflight} in flight) | {ceiling:.0f} | "
        f"{seconds(median(ceiling_s))} | {spread(ceiling_s)} |"),
        (f"| Oloproof, judging phase (run created → last judgment stored) | {rate:.0f} | "
        f"{seconds(median(phases))} | {spread(phases)} |"),
        (f"| Oloproof, whole process (start-up and decision included) | {whole:.0f} | "
        f"{seconds(median([m.wall for m in runs]))} | {spread([m.wall for m in runs])} |"),
        "",
        (f"Oloproof judges at **{ratio:.0%} of the server's ceiling** over the judging phase "
        f"({whole / ceiling:.0%} counting start-up)."),
    ])
    print(body)
    write_section("judging", body)
    record("judging", [
        {"name": f"{n:,} judge calls at `judge: {inflight}`, calls/s (judging phase)",
         "value": rate, "unit": "calls/s", "ideal": ceiling, "target": "", "met": None,
         "ratio_is_fraction": True},
    ])


if __name__ == "__main__":
    main()
