"""Adaptive concurrency end to end: `oloproof run` in a subprocess against a fake server on
127.0.0.1 that answers at most N requests at once and refuses the others with a 429.

The server's own counters are the evidence: how many requests it refused, how many it
had in flight. Wall time is not compared here (the machine is shared and noisy):
bench/adaptive.py measures it.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import OLOPROOF, Result, run_cli
from tests.fakes.provider import FakeServer
from tests.progress._support import checked_events

from oloproof.api import concurrency_history, read_run

SYSTEM = "/system"
ANTHROPIC = "/v1/messages"
CAPACITY = 6
CEILING = 32
CASES = 120
# The bound on the 429s of the adaptive run (120 cases, capacity 6, ceiling 32): slow
# start overshoots once (4 -> 8 -> 16 while the server takes 6: at most 10 refused in that
# round, and a few more while the limit comes down 16 -> 12 -> 9 -> 7), then one refusal
# every few windows at the top of the sawtooth. A third of the cases leaves room for a
# slow machine; a fixed limit of 32 gets several times that (asserted below).
MAX_ADAPTIVE_429 = CASES // 3
# How long the servers take per call. The server must be the bottleneck: with 0.05 s (and
# 0.03 s for the judge), a client on a loaded machine (two busy loops beside the test)
# could not put more calls in flight than the server answers, got no 429 at all, and its
# limit climbed to the ceiling untested.
SYSTEM_DELAY_S = 0.2
JUDGE_DELAY_S = 0.25


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def write_http_project(
    root: Path, srv: FakeServer, *, system: int, adaptive: str, extra: str = ""
) -> Path:
    (root / "data").mkdir(parents=True, exist_ok=True)
    cases = [{"id": f"c{i:03d}", "input": {"text": f"q{i}"}, "expected": {"label": f"q{i}"}}
             for i in range(CASES)]
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (root / "oloproof.yaml").write_text(textwrap.dedent(f"""\
        version: 1
        project: adaptive
        dataset: data/cases.jsonl
        policy: none
        system:
          name: capacity-bound
          http:
            url: {srv.system_url}
            version: v1
            output_path: label
            timeout_s: 10
        concurrency:
          system: {system}
          adaptive: {adaptive}
        evaluators:
          - type: exact_match
            criterion: exact_label
            field: null
            expected_field: label
        """) + extra)
    return root


def _run(root: Path) -> tuple[Result, list[dict[str, Any]]]:
    result = run_cli("run", "--json", "--no-cache", cwd=root, timeout=180)
    assert result.code == 0, result.err
    return result, checked_events(result.out)


def _changes(evs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["type"] == "concurrency_changed" and e["limit_name"] == name]


def test_adaptive_converges_near_the_capacity_with_few_429s(srv: FakeServer, tmp_path: Path) -> None:
    srv.configure(SYSTEM, capacity=CAPACITY, delay_s=SYSTEM_DELAY_S, capacity_retry_after_ms=50)
    root = write_http_project(tmp_path / "adaptive", srv, system=CEILING, adaptive="true")
    _, evs = _run(root)
    adaptive_429 = srv.capacity_stats(SYSTEM)["rejected"]  # type: ignore[index]

    # Every case observed: the refused calls were retried.
    executed = [e for e in evs if e["type"] == "case_executed"]
    assert len(executed) == CASES and {e["status"] for e in executed} == {"OK"}
    judged = [e for e in evs if e["type"] == "case_judged"]
    assert len(judged) == CASES and all(e["passed"] for e in judged)
    retried = sum(e["attempts"] - 1 for e in executed)
    assert retried == adaptive_429  # each 429 cost one more attempt, nothing else failed

    changes = _changes(evs, "system")
    first = changes[0]
    assert (first["previous"], first["limit"], first["ceiling"], first["reason"]) == (
        None, 4, CEILING, "start")
    assert all(1 <= c["limit"] <= CEILING for c in changes)
    assert {c["reason"] for c in changes[1:]} == {"rate_limited", "clean_window"}
    for before, after in itertools.pairwise(changes):
        assert after["previous"] == before["limit"]
        if after["reason"] == "rate_limited":
            assert after["limit"] == max(1, int(before["limit"] * 0.8))
        else:
            assert after["limit"] > before["limit"]
    settled = statistics.median(c["limit"] for c in changes[len(changes) // 2:])
    assert CAPACITY / 2 <= settled <= 2 * CAPACITY, [c["limit"] for c in changes]
    assert adaptive_429 <= MAX_ADAPTIVE_429, adaptive_429
    assert srv.capacity_stats(SYSTEM)["peak"] == CAPACITY  # type: ignore[index]

    # The stored record keeps the history, as the events said it.
    history = concurrency_history("latest", root)
    assert [(h.limit_name, h.previous, h.limit, h.ceiling, h.reason) for h in history] == [
        (c["limit_name"], c["previous"], c["limit"], c["ceiling"], c["reason"])
        for c in evs if c["type"] == "concurrency_changed"
    ]
    assert [h.at for h in history] == [c["timestamp"] for c in changes]
    assert read_run("latest", root).gate == "ALLOW"

    # The same project with the ceiling as a fixed limit (adaptive off, as before issue 15).
    srv.reset()
    srv.configure(SYSTEM, capacity=CAPACITY, delay_s=SYSTEM_DELAY_S, capacity_retry_after_ms=50)
    # 32 calls at once against a capacity of 6: a call may use up its four attempts (SPEC
    # section 3) on 429s, and eight such calls in a row stop a run as an outage (limits.
    # max_consecutive_failures). It happened in a clean-clone CI run; the comparison needs
    # the whole run, so this one may not stop: its failed calls count all their attempts.
    fixed = write_http_project(tmp_path / "fixed", srv, system=CEILING, adaptive="false",
                               extra="limits:\n  max_consecutive_failures: 1000000\n")
    _, fixed_evs = _run(fixed)
    fixed_429 = srv.capacity_stats(SYSTEM)["rejected"]  # type: ignore[index]
    assert not [e for e in fixed_evs if e["type"] == "concurrency_changed"]
    assert concurrency_history("latest", fixed) == []
    fixed_attempts = sum(e["attempts"] for e in fixed_evs if e["type"] == "case_executed")
    adaptive_attempts = sum(e["attempts"] for e in executed)
    # A limit set too high pays for it in 429s and retries; adaptive does not.
    assert fixed_429 > 2 * adaptive_429, (fixed_429, adaptive_429)
    assert fixed_attempts > adaptive_attempts
    # Which run finishes sooner is a matter of wall time, which this module does not compare
    # (its docstring): bench/adaptive.py measures it. An assertion that the fixed run's
    # execution phase was longer failed in a clean-clone CI run (4.79 s against 4.96 s).


def _judged_project(root: Path, srv: FakeServer, cases: int) -> Path:
    """A project whose one judge calls an Anthropic-shaped server that answers 3 calls at
    once (JUDGE_DELAY_S each) and refuses the others with a 429 asking for 30 ms."""
    srv.configure(ANTHROPIC, capacity=3, delay_s=JUDGE_DELAY_S, capacity_retry_after_ms=30)
    (root / "data").mkdir(parents=True)
    (root / "data" / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"c{i:03d}", "input": {"text": f"q{i}"}}) + "\n"
                for i in range(cases))
    )
    (root / "app.py").write_text("def answer(case_input):\n    return {'answer': 'fine'}\n")
    (root / "oloproof.yaml").write_text(textwrap.dedent(f"""\
        version: 1
        project: adaptive-judges
        dataset: data/cases.jsonl
        policy: none
        system: {{name: instant, version: "1", callable: "app:answer"}}
        concurrency:
          system: 8
          judge: 16
          adaptive: {{judge: true}}
        evaluators:
          - type: rubric_judge
            criterion: helpful
            provider: anthropic
            model: fake-judge-1
            base_url: {srv.anthropic_base_url}
            api_key_env: JUDGE_KEY
            rubric_text: "Pass when the answer is fine."
            timeout_s: 5
        """))
    return root


def _attempts(root: Path) -> dict[int, int]:
    """How many judgments took 1, 2, ... attempts, from the store."""
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        rows = conn.execute("SELECT attempts, count(*) FROM run_judgments GROUP BY attempts")
        return dict(rows.fetchall())
    finally:
        conn.close()


def test_adaptive_judges_follow_the_providers_capacity(srv: FakeServer, tmp_path: Path) -> None:
    root = _judged_project(tmp_path / "judged", srv, 60)
    result = run_cli("run", "--json", "--no-cache", cwd=root, env={"JUDGE_KEY": "k-123"},
                     timeout=180)
    assert result.code == 0, result.err
    evs = checked_events(result.out)
    judged = [e for e in evs if e["type"] == "case_judged"]
    assert len(judged) == 60 and {e["status"] for e in judged} == {"OK"}, _unjudged(root, srv)
    assert not _changes(evs, "system")  # only the judges adapt
    changes = _changes(evs, "judge")
    assert changes[0]["reason"] == "start" and changes[0]["ceiling"] == 16
    assert "rate_limited" in {c["reason"] for c in changes}
    assert max(c["limit"] for c in changes) <= 16
    stats = srv.capacity_stats(ANTHROPIC)
    assert stats is not None and stats["peak"] == 3 and stats["admitted"] == 60
    assert stats["rejected"] <= 20, stats
    # A call refused once is never refused again: its retry is not the probe.
    assert set(_attempts(root)) <= {1, 2}, _attempts(root)
    assert [h.limit_name for h in concurrency_history("latest", root)] == ["judge"] * len(changes)


def test_a_refused_call_is_not_refused_again_when_the_client_stalls(
    srv: FakeServer, tmp_path: Path
) -> None:
    """A loaded machine, made on purpose: the run is stopped (SIGSTOP) for up to 0.6 s
    every 20-200 ms. Calls then reach the server in another order than they got their
    slots; before a retry kept the top slot free while in flight, some calls were refused
    two or three times (12 of 1,200 in six such runs), and a case can lose all four."""
    root = _judged_project(tmp_path / "stalled", srv, 200)
    env = {k: v for k, v in os.environ.items() if k not in ("OLOPROOF_DEBUG", "COLUMNS")}
    env["JUDGE_KEY"] = "k-123"
    out = root / "run.ndjson"
    with out.open("wb") as sink:
        proc = subprocess.Popen([*OLOPROOF, "run", "--json", "--no-cache"], cwd=root, env=env,
                                stdout=sink, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    rng = random.Random(11)
    deadline = time.monotonic() + 180
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.02, 0.2))
            try:
                os.kill(proc.pid, signal.SIGSTOP)
                time.sleep(rng.uniform(0.005, 0.6))
            finally:
                os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    judged = [e for e in checked_events(out.read_text()) if e["type"] == "case_judged"]
    assert len(judged) == 200 and {e["status"] for e in judged} == {"OK"}, _unjudged(root, srv)
    attempts = _attempts(root)
    assert attempts.get(2, 0) > 0, attempts  # the server did refuse calls...
    assert set(attempts) == {1, 2}, attempts  # ...and none twice
    stats = srv.capacity_stats(ANTHROPIC)
    assert stats is not None and stats["rejected"] == attempts[2], (stats, attempts)


def _unjudged(root: Path, srv: FakeServer) -> str:
    """Why judgments were not OK (the store's reasons and attempts, the server's
    count of refusals): a failure here says what went wrong, not only that it did."""
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        rows = conn.execute(
            "SELECT case_id, status, attempts, latency_ms, reason FROM run_judgments"
            " WHERE status != 'OK'"
        ).fetchall()
    finally:
        conn.close()
    return f"{rows!r}; server: {srv.capacity_stats(ANTHROPIC)!r}"


APP_429 = """
from oloproof import current_case

class RateLimitError(Exception):
    # The shape of the OpenAI and Anthropic SDKs' RateLimitError: a status_code of 429.
    status_code = 429

def answer(case_input):
    if current_case().attempt == 1 and case_input["n"] % 4 == 0:
        raise RateLimitError("429 Too Many Requests")
    return {"label": "ok"}
"""


@pytest.mark.parametrize("adaptive", ["true", "false"])
def test_a_callable_raising_a_429_is_a_rate_limit_when_adaptive(
    tmp_path: Path, adaptive: str
) -> None:
    root = tmp_path / "callable"
    (root / "data").mkdir(parents=True)
    (root / "data" / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"c{i:02d}", "input": {"n": i}, "expected": {"label": "ok"}})
                + "\n" for i in range(20))
    )
    (root / "app.py").write_text(APP_429)
    (root / "oloproof.yaml").write_text(textwrap.dedent(f"""\
        version: 1
        project: callable-429
        dataset: data/cases.jsonl
        policy: none
        system: {{name: sdk-user, version: "1", callable: "app:answer"}}
        retry: {{max_retry_wait_s: 5}}
        concurrency: {{system: 8, adaptive: {adaptive}}}
        evaluators:
          - {{type: exact_match, criterion: exact_label, field: label}}
        """))
    result = run_cli("run", "--json", "--no-cache", cwd=root, timeout=120)
    evs = checked_events(result.out)
    executed = {e["scenario_id"]: e for e in evs if e["type"] == "case_executed"}
    refused = [f"c{i:02d}" for i in range(0, 20, 4)]
    if adaptive == "true":
        assert result.code == 0, result.err
        assert all(executed[c]["status"] == "OK" and executed[c]["attempts"] == 2 for c in refused)
        assert "rate_limited" in {c["reason"] for c in _changes(evs, "system")}
    else:
        # Without adaptive, nothing changed: an error like any other, recorded on the case.
        assert all(executed[c]["status"] == "ERROR" and executed[c]["attempts"] == 1
                   for c in refused)
        assert "RateLimitError: 429 Too Many Requests" in executed[refused[0]]["error"]
        assert not [e for e in evs if e["type"] == "concurrency_changed"]
