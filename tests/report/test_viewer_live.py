"""A run in progress, followed by many clients (issue 29): one poller per run, shared by all
of them, reading only what is new; every client gets every event once from the moment it
joined. The viewer's app runs in a real HTTP server on 127.0.0.1 in this process (so its
pollers can be counted), the run in a real ``oloproof run`` process beside it.
(What it costs is measured by bench/viewer.py.)"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from tests.conftest import OLOPROOF, run_cli, write_project

from oloproof.render.html import viewer as viewer_module
from oloproof.render.html.viewer import ViewerAccess, create_app
from oloproof.store.db import store_path

pytestmark = pytest.mark.slow

TOKEN = "live-test-token-0123456789abcdef"
CASES = 40
# Past its first 10 cases (or OLOPROOF_TEST_HOLD_FROM), the run waits for the test to let it
# go on (the file named by OLOPROOF_TEST_GATE): every client has joined by then, however
# loaded the machine.
APP = """
import os
import time
from oloproof import system

HOLD_FROM = int(os.environ.get("OLOPROOF_TEST_HOLD_FROM", "10"))

@system(name="slow", version="1")
def answer(case_input):
    while case_input["n"] >= HOLD_FROM and not os.path.exists(os.environ["OLOPROOF_TEST_GATE"]):
        time.sleep(0.02)
    time.sleep(0.02)
    if case_input["n"] % 13 == 5:
        raise RuntimeError("no answer")
    return {"label": "yes" if case_input["n"] % 4 else "no"}
"""


@pytest.fixture
def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Path, Any, str, list[str], Path]]:
    root = write_project(
        tmp_path / "live", app=APP, concurrency=(2, 2),
        cases=[{"id": f"c{n:02d}", "input": {"n": n}, "expected": {"label": "yes"}}
               for n in range(CASES)],
    )
    gate = tmp_path / "go"
    gate.touch()
    assert run_cli("run", cwd=root, env={"OLOPROOF_TEST_GATE": str(gate)}).code == 0
    gate.unlink()  # the next run stops after 10 cases until the test says
    # Every statement the viewer's pollers run (their connections, traced).
    statements: list[str] = []
    opened = viewer_module.open_store_readonly

    def traced(path: Path) -> sqlite3.Connection:
        conn = opened(path)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(viewer_module, "open_store_readonly", traced)
    app = create_app(store_path(root), "live", ViewerAccess(TOKEN, "c"))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield root, app, f"http://127.0.0.1:{port}", statements, gate
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _events(body: str) -> list[dict[str, Any]]:
    out = []
    for block in body.split("\n\n"):
        data = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        if data:
            out.append(json.loads("".join(data)))
    return out


def _follow(url: str, bodies: list[str], index: int) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(timeout=120, headers=auth) as client, client.stream("GET", url) as response:
        assert response.status_code == 200
        bodies[index] = "".join(response.iter_text())


def _running(root: Path, run: subprocess.Popen[bytes], deadline: float) -> dict[str, Any]:
    """The run ``run`` is making, once the store says it is RUNNING."""
    while True:
        latest: dict[str, Any] = json.loads(run_cli("runs", "--json", cwd=root).out)[0]
        if latest["status"] == "RUNNING":
            return latest
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.05)


def test_one_poller_per_run_shared_by_its_clients(
    served: tuple[Path, Any, str, list[str], Path],
) -> None:
    root, app, base, statements, gate = served
    env = {**os.environ, "OLOPROOF_TEST_GATE": str(gate)}
    run = subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=root, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        latest = _running(root, run, deadline)
        url = f"{base}/runs/{latest['id']}/events"
        bodies = [""] * 6
        threads = [threading.Thread(target=_follow, args=(url, bodies, i)) for i in range(5)]
        for t in threads:
            t.start()
        followers = app.state.followers
        while not (followers.running and len(next(iter(followers.running.values())).clients) == 5):
            assert time.monotonic() < deadline, followers.running
            time.sleep(0.02)
        # A sixth client, later: it starts from the latest figures, at once.
        (follower,) = followers.running.values()
        # (Once a case has finished, however slowly a loaded machine starts the run.)
        while follower.polls < 3 or _events(follower.snapshot.decode())[0]["cases_done"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        late = threading.Thread(target=_follow, args=(url, bodies, 5))
        late.start()
        while len(follower.clients) < 6:
            assert time.monotonic() < deadline and not follower.ended
            time.sleep(0.02)
        gate.touch()  # now the run may finish
        for t in [*threads, late]:
            t.join(timeout=120)
        assert run.wait(timeout=60) == 0
    finally:
        if run.poll() is None:
            run.kill()
    assert followers.started == 1  # one poller, for six clients
    assert followers.running == {}  # gone with the run
    stored = json.loads(run_cli("inspect", latest["id"], "--json", cwd=root).out)
    final_counts = {m["metric"]: m for m in stored["metrics"]}
    for body in bodies:
        events = _events(body)
        assert events[0]["type"] == "progress" and events[1]["type"] == "provisional_metrics"
        assert events[-1]["type"] == "run_finished"
        executed = [e["scenario_id"] for e in events if e["type"] == "case_executed"]
        judged = [(e["scenario_id"], e["criterion"]) for e in events if e["type"] == "case_judged"]
        assert len(executed) == len(set(executed))  # each case once
        assert len(judged) == len(set(judged))
        assert set(judged) <= {(c, "exact_label") for c in executed} | {
            (f"c{n:02d}", "exact_label") for n in range(CASES)}
        last = [e for e in events if e["type"] == "provisional_metrics"][-1]
        assert last["cases_done"] == CASES
        (metric,) = last["metrics"]
        assert metric["n_observed"] == final_counts["exact_label"]["observed"]
        assert metric["n_missing"] == final_counts["exact_label"]["missing"]
        progress = [e for e in events if e["type"] == "progress"][-1]
        assert progress["cases_errored"] == sum(1 for n in range(CASES) if n % 13 == 5)
    # Every client saw the one stream of events, from the moment it joined: the cases
    # each saw finish are the last ones the longest stream saw, in the same order.
    seen = [[e["scenario_id"] for e in _events(b) if e["type"] == "case_executed"]
            for b in bodies]
    longest = max(seen, key=len)
    for one in seen:
        assert one == longest[len(longest) - len(one):]
    # The late client started from the figures of the moment it joined.
    late_first = _events(bodies[5])[0]
    assert late_first["type"] == "progress" and late_first["cases_done"] >= 1
    # After its first look, a poller reads only what is new: cases finished since its last
    # look, judgments of the cases still being judged; never the whole run again.
    row_reads = [s for s in statements if "FROM run_cases" in s or "FROM run_judgments" in s]
    rereads = [s for s in row_reads if "count(*)" not in s and "finished_at >=" not in s
               and "case_id IN" not in s]
    assert len(rereads) <= 1, rereads  # the first look's read of the judgments so far


def test_a_stream_opened_before_any_case_finished_starts_with_the_figures(
    served: tuple[Path, Any, str, list[str], Path],
) -> None:
    root, app, base, _, gate = served
    env = {**os.environ, "OLOPROOF_TEST_GATE": str(gate), "OLOPROOF_TEST_HOLD_FROM": "0"}
    run = subprocess.Popen([*OLOPROOF, "run", "--no-cache"], cwd=root, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bodies = [""]
    try:
        deadline = time.monotonic() + 60
        latest = _running(root, run, deadline)
        client = threading.Thread(
            target=_follow, args=(f"{base}/runs/{latest['id']}/events", bodies, 0))
        client.start()
        followers = app.state.followers
        while not (followers.running and next(iter(followers.running.values())).polls >= 1):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        gate.touch()
        client.join(timeout=120)
        assert run.wait(timeout=60) == 0
    finally:
        if run.poll() is None:
            run.kill()
    events = _events(bodies[0])
    assert [e["type"] for e in events[:2]] == ["progress", "provisional_metrics"]
    assert events[0]["cases_done"] == 0 and events[0]["cases_total"] == CASES
    (metric,) = events[1]["metrics"]
    assert metric["estimate"] is None and metric["n_observed"] == 0
    assert events[-1]["type"] == "run_finished"
    assert len([e for e in events if e["type"] == "case_executed"]) == CASES
