"""Concurrency under load, counted where the calls land: the fake provider's own counters
over real HTTP, the run's stored rows, real worker threads (the fourth round of attacks)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.acceptance.test_http_and_judges import judge_yaml, questions, write_http_project
from tests.conftest import run_cli, write_project
from tests.fakes.provider import FakeServer

ANTHROPIC = "/v1/messages"


def test_a_panel_s_calls_stay_within_concurrency_judge(tmp_path: Path) -> None:
    """A panel calls its judges at once: with `judge: 2` and three judges, the provider saw
    6 calls in flight (the engine bounded the judgments, not the calls). concurrency.judge
    bounds the calls of every judge together, as docs/llm-judges.md says."""
    with FakeServer() as srv:
        # Slow answers, and requests held until two are in flight: the bound is used.
        srv.configure(ANTHROPIC, delay_s=0.2, hold_until_peak=2)
        judge = (judge_yaml("helpful", srv)
                 + "  panel:\n    - {}\n    - model: fake-judge-2\n    - model: fake-judge-3\n")
        project = write_http_project(
            tmp_path / "panel", srv, questions(10), judges=[judge], concurrency=(8, 2),
        )
        result = run_cli("run", "--json", cwd=project, env={"JUDGE_KEY": "k-0123456789ab"})
        assert result.code == 0, result.text
        assert srv.peak_in_flight(ANTHROPIC) == 2
        assert srv.total_calls(ANTHROPIC) == 30
    judged = [json.loads(line) for line in result.out.splitlines()]
    helpful = [e for e in judged if e["type"] == "case_judged" and e["criterion"] == "helpful"]
    assert len(helpful) == 10 and {e["status"] for e in helpful} == {"OK"}


# A sync system whose latency is random and whose output names its input; inputs listed in
# HANG never return (a socket read with no timeout).
HANGING_APP = """
import random, threading, time
from oloproof import current_case

HANG = {hang}

def answer(inp):
    if inp["n"] in HANG:
        threading.Event().wait()
    time.sleep(random.random() * 0.01)
    return {{"label": "ok", "echo": inp["n"], "case": current_case().case_id}}
"""


def _hanging_project(root: Path, hang: set[int], n: int = 400) -> Path:
    cases = [{"id": f"c{i:04d}", "input": {"n": i}, "expected": {"label": "ok"}}
             for i in range(n)]
    return write_project(root, app=HANGING_APP.format(hang=sorted(hang) or "set()"),
                         cases=cases, concurrency=(50, 4), system_extra="timeout_s: 1")


def _stored(root: Path) -> list[tuple[str, int, str, str | None]]:
    conn = sqlite3.connect(str(root / ".oloproof" / "store.sqlite"))
    try:
        return conn.execute(
            "SELECT case_id, json_extract(input_json, '$.n'), status, output_json"
            " FROM run_cases").fetchall()
    finally:
        conn.close()


def test_calls_hung_on_a_few_inputs_are_timeouts_not_an_outage(tmp_path: Path) -> None:
    """10 of 400 inputs hang, at `system: 50`: every other call is over long before the
    hung ones reach timeout_s, so their ten TIMEOUTs came last, one after another, and
    were read as 8 failures in a row: RUN_ERROR/PARTIAL ("failed 8 calls in a row"),
    exit 5, cases never called. The calls started between them succeeded: no outage."""
    hang = set(range(5, 400, 40))
    root = _hanging_project(tmp_path / "p", hang)
    result = run_cli("run", cwd=root, timeout=60)
    assert result.code == 0, result.text
    assert "[DECIDED/COMPLETE]" in result.out
    rows = _stored(root)
    assert len(rows) == 400
    assert {n for _, n, status, _ in rows if status == "TIMEOUT"} == hang
    for case_id, n, status, output in rows:
        if status == "OK":  # each output is its own case's, however the calls interleaved
            assert output is not None and json.loads(output)["echo"] == n, (case_id, output)
            assert json.loads(output)["case"] == case_id


def test_an_outage_after_successes_still_stops_the_run(tmp_path: Path) -> None:
    """The other side of the rule: every call from the 101st on hangs (the backend went
    away after 100 answers). Those calls started after every success, so they are an
    outage: the run stops after 8 of them, without calling the rest of the suite."""
    root = _hanging_project(tmp_path / "p", set(range(100, 400)))
    result = run_cli("run", cwd=root, timeout=60)
    assert result.code == 5, result.text
    assert "failed 8 calls in a row" in result.out, result.out
    rows = _stored(root)
    assert sum(status == "OK" for _, _, status, _ in rows) == 100
    assert len(rows) < 400
