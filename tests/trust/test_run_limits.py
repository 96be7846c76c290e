"""Issue 10, class 7: unbounded work is bounded: evaluator time limits, a blocking async
system that still honours the first SIGTERM, numbers that overflow, JSON nesting."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import OLOPROOF
from tests.trust._support import cases_by_id, cli, integrity_ok, no_traceback, project, runs


def test_catastrophic_regex_is_a_per_case_error_within_the_limit(tmp_path: Path) -> None:
    app = """
        def answer(inp):
            if inp["n"] % 2:
                return {"label": "a" * 40 + "!"}  # (a+)+$ backtracks for ages on this
            return {"label": "aaaa"}
    """
    evaluators = (
        "  - type: regex\n    criterion: exact_label\n    field: label\n"
        "    pattern: '^(a+)+$'\n"
    )
    root = project(tmp_path / "p", app, n=6, evaluators=evaluators,
                   extra="limits:\n  evaluator_timeout_s: 0.5\n")
    started = time.monotonic()
    result = cli(root, "run", timeout=60)
    elapsed = time.monotonic() - started
    no_traceback(result)
    assert result.code == 5, result.text  # 3 of 6 missing: incomplete evidence
    assert elapsed < 20, elapsed
    cases = cases_by_id(root)
    assert len(cases) == 6
    for cid in ("q1", "q3"):
        judgment = cases[cid]["judgments"]["exact_label"]
        assert judgment["status"] == "ERROR" and "timeout_s" in judgment["reason"]
    for cid in ("q0", "q2"):
        assert cases[cid]["judgments"]["exact_label"]["passed"] is True
    [run] = runs(root)
    assert run["status"] == "DECIDED"


def test_blocking_async_system_still_stops_on_the_first_sigterm(tmp_path: Path) -> None:
    app = """
        import time


        async def answer(inp):
            if inp["n"] >= 3:
                time.sleep(60)  # blocks its event loop: the run's must not care
            return {"label": "ok"}
    """
    root = project(tmp_path / "p", app, n=10, concurrency=1,
                   system="  callable: app:answer\n  timeout_s: 120\n")
    env = {k: v for k, v in os.environ.items() if k != "OLOPROOF_DEBUG"}
    proc = subprocess.Popen(
        [*OLOPROOF, "run", "--json"], cwd=root, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    assert proc.stdout is not None
    # Wait until three cases finished: the fourth call is now blocking.
    executed = 0
    lines = []
    while executed < 3:
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        lines.append(line)
        executed += json.loads(line)["type"] == "case_executed"
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert proc.returncode == 5, err
    assert took < 5, took  # the first SIGTERM, honoured promptly
    assert "Traceback" not in err
    events = [json.loads(line) for line in [*lines, *out.splitlines()]]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "RUN_ERROR"
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["exit_code"]) == ("RUN_ERROR", "PARTIAL", 5)
    assert "SIGTERM" in run["stop_reason"]
    cases = cases_by_id(root)
    assert {"q0", "q1", "q2"} <= set(cases)  # no finished case lost
    assert all(cases[c]["status"] == "OK" for c in ("q0", "q1", "q2"))
    assert integrity_ok(root)


def test_numbers_that_overflow_and_deep_nesting_are_per_case_errors(tmp_path: Path) -> None:
    app = """
        def answer(inp):
            n = inp["n"]
            if n == 1:
                return {"label": float("nan")}
            if n == 2:
                return {"label": float("inf")}
            if n == 3:
                return {"label": 10 ** 5000}
            if n == 4:
                deep = "ok"
                for _ in range(100000):
                    deep = [deep]
                return {"label": deep}
            if n == 5:
                loop = {}
                loop["self"] = loop
                return loop
            return {"label": "ok"}
    """
    root = project(tmp_path / "p", app, n=7)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text  # 5 of 7 missing: incomplete evidence
    cases = cases_by_id(root)
    assert len(cases) == 7
    for cid in ("q1", "q2", "q3", "q4", "q5"):
        assert cases[cid]["status"] == "ERROR", cases[cid]
        assert "JSON" in cases[cid]["error"] or "json" in cases[cid]["error"], cases[cid]
    assert cases["q0"]["status"] == cases["q6"]["status"] == "OK"
    [run] = runs(root)
    assert run["status"] == "DECIDED"
    assert integrity_ok(root)
