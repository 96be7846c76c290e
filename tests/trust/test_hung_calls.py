"""Calls that hang for ever never hang the run (transport/threads.py, WorkersHeld).

A hung sync call keeps its thread (Python cannot stop one); another thread takes its
place, up to a bounded number. Once every thread a pool may have is held by a hung call,
a call that cannot start fails once the threads have been held for its timeout, as a
TIMEOUT (the system's) or an evaluator error, so the outage stop and the gate apply. Each
run here is the real CLI under a hard timeout: a hang fails the test, it never waits."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import events
from tests.trust._support import (
    cases_by_id,
    cli,
    custom_check_project,
    no_traceback,
    project,
    runs,
)

HELD = "the call never started: all"


def test_a_system_whose_every_call_hangs_ends_as_an_outage(tmp_path: Path) -> None:
    app = """
        import threading

        def answer(inp):
            threading.Event().wait()  # a socket read with no timeout
    """
    root = project(tmp_path / "p", app, n=10, system="  callable: app:answer\n  timeout_s: 1\n")
    result = cli(root, "run", "--json", timeout=60)
    no_traceback(result)
    assert result.code == 5, result.text
    kinds = [e["type"] for e in events(result.out)]
    assert kinds.count("case_executed") == 10 and kinds[-1] == "run_finished", kinds
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["gate"]) == ("RUN_ERROR", "PARTIAL", "BLOCK")
    assert "failed 8 calls in a row" in run["stop_reason"]
    cases = cases_by_id(root)
    assert {c["status"] for c in cases.values()} == {"TIMEOUT"}
    # Concurrency 2 and 4 spare threads: six calls hung in their threads, and the calls
    # after them never started.
    never = [c for c in cases.values() if HELD in (c["error"] or "")]
    assert len(never) == 4, [c["error"] for c in cases.values()]
    assert "all 6 worker threads are held" in never[0]["error"]


def test_every_fifth_call_hanging_still_ends_with_every_case_stored(tmp_path: Path) -> None:
    app = """
        import time

        def answer(inp):
            if inp["n"] % 5 == 0:
                while True:  # this input sends the system into an endless loop
                    time.sleep(1)
            return {"label": "ok"}
    """
    root = project(
        tmp_path / "p", app, n=100, concurrency=8,
        system="  callable: app:answer\n  timeout_s: 1\n",
        # No outage stop: every case must be run, stored and counted.
        extra="limits:\n  max_consecutive_failures: 1000000\n",
    )
    result = cli(root, "run", "--json", timeout=90)
    no_traceback(result)
    finished = [e for e in events(result.out) if e["type"] == "run_finished"]
    assert len(finished) == 1, result.text
    # 20 hung calls hold the 12 threads (8 + 4 spare): the cases left are missing, more
    # than release.yaml's default max_missing allows, so the gate cannot allow (exit 5).
    assert result.code == 5, result.text
    [run] = runs(root)
    assert run["status"] == "DECIDED" and run["gate"] == "BLOCK" and run["exit_code"] == 5
    cases = cases_by_id(root)
    assert len(cases) == 100
    timed_out = {i for i, c in cases.items() if c["status"] == "TIMEOUT"}
    assert {f"q{n}" for n in range(0, 100, 5)} <= timed_out
    assert all(c["status"] == "OK" for i, c in cases.items() if i not in timed_out)
    assert sum(HELD in (c["error"] or "") for c in cases.values()) >= 1


def test_a_custom_evaluator_that_hangs_on_some_cases_never_hangs_the_run(tmp_path: Path) -> None:
    checks = """
        import threading

        def check(output, case):
            if case.input["n"] % 5 == 0:
                threading.Event().wait()
            return output["label"] == "ok"
    """
    root = custom_check_project(tmp_path / "p", checks, n=60, timeout_s=1)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("  judge: 2\n", "  judge: 2\n  evaluator: 2\n"))
    result = cli(root, "run", timeout=90)
    no_traceback(result)
    assert result.code == 5, result.text
    [run] = runs(root)
    assert run["status"] == "DECIDED" and run["exit_code"] == 5
    judged = {i: c["judgments"]["custom_ok"] for i, c in cases_by_id(root).items()}
    assert len(judged) == 60
    assert all(judged[f"q{n}"]["status"] == "ERROR" for n in range(0, 60, 5))
    held = [j for j in judged.values() if HELD in (j["reason"] or "")]
    assert held and all(j["status"] == "ERROR" for j in held), json.dumps(judged)[:2000]
    assert "within timeout_s = 1s" in held[0]["reason"]
