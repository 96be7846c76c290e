"""``oloproof run --sequential`` as a user runs it (issue 26): a real HTTP system on
127.0.0.1 whose failures are slow, the CLI in a subprocess, the decision identical at
``concurrency.system`` 1 and 64, ``gate`` re-deciding the stored run the same way, every
event valid against the shipped schema, the cache, and the refusals."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests.conftest import run_cli, write_project
from tests.progress._support import checked_events

TOTAL = 300
SLOW_S = 0.15


def _kind(i: int) -> str:
    """80% answer at once and right; 15% answer wrong and slowly; 5% fail (HTTP 400)
    slowly: the failures always arrive late."""
    r = i % 20
    return "wrong" if r < 3 else "error" if r == 3 else "right"


class _Handler(BaseHTTPRequestHandler):
    calls: ClassVar[list[int]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        n = int(body["n"])
        type(self).calls.append(n)
        kind = _kind(n)
        if kind != "right":
            time.sleep(SLOW_S)
        if kind == "error":
            self._send(400, b'{"error": "cannot answer"}')
        else:
            self._send(200, json.dumps({"label": "ok" if kind == "right" else "no"}).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"calls": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/answer", handler
    finally:
        httpd.shutdown()


def _http_project(root: Path, url: str, concurrency: int, extra: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"c{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}) + "\n"
        for i in range(TOTAL)
    ))
    (root / "oloproof.yaml").write_text(
        "version: 1\nproject: seq-http\ndataset: data/cases.jsonl\nsystem:\n  name: svc\n"
        f"  http:\n    url: {url}\n    version: \"1\"\n    timeout_s: 20\n"
        f"concurrency:\n  system: {concurrency}\n"
        "evaluators:\n  - type: exact_match\n    criterion: exact_label\n    field: label\n"
        f"sequential: true\n{extra}"
    )
    (root / "release.yaml").write_text(
        "version: 1\nrules:\n  - id: label-floor\n    metric: exact_label\n    min: 0.6\n"
    )
    return root


def _stored(root: Path) -> int:
    conn = sqlite3.connect(root / ".oloproof" / "store.sqlite")
    try:
        return int(conn.execute("SELECT count(*) FROM run_cases").fetchone()[0])
    finally:
        conn.close()


def _decision_view(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(d["rule"], d["state"], d["detail"], d["estimate"], d["lower"], d["upper"])
            for d in doc["decisions"]]


def test_the_decision_is_the_same_at_concurrency_1_and_64_with_slow_failures(
    tmp_path: Path, server: tuple[str, type[_Handler]]
) -> None:
    url, _handler = server
    ends = {}
    decided_at = {}
    for concurrency in (1, 64):
        root = _http_project(tmp_path / f"c{concurrency}", url, concurrency)
        done = run_cli("run", "--json", cwd=root, timeout=300)
        assert done.code == 0, done.text
        events = checked_events(done.out)
        end = events[-1]
        assert end["type"] == "run_finished" and end["completeness"] == "SEQUENTIAL"
        decided = [e for e in events if e["type"] == "rule_decided"]
        assert len(decided) == 1 and decided[0]["state"] == "PASS"
        n = decided[0]["n"]
        assert decided[0]["cases_total"] == TOTAL and decided[0]["e_value"] >= 40.0
        assert f"decided after {n} of {TOTAL} cases" in end["decisions"][0]["detail"]
        # The decision reads the first n cases of the order, never more, whatever else ran.
        stored = _stored(root)
        executed = [e for e in events if e["type"] == "case_executed"]
        assert stored == len(executed) >= n
        if concurrency == 1:
            assert stored == n  # one call at a time: nothing runs past the decision
        # gate re-decides the stored run the same way, and says so.
        gate = run_cli("gate", "latest", "--json", cwd=root)
        assert gate.code == 0, gate.text
        doc = json.loads(gate.out)
        assert _decision_view(doc) == _decision_view(end)
        assert doc["sequential"]["read"] == n and doc["sequential"]["stored"] == stored
        assert doc["sequential"]["beyond"] == stored - n
        text = run_cli("gate", "latest", cwd=root)
        assert f"every rule decided after {n} of {TOTAL} cases" in text.out
        ends[concurrency] = end
        decided_at[concurrency] = (n, stored)
    assert _decision_view(ends[1]) == _decision_view(ends[64])
    assert decided_at[1][0] == decided_at[64][0] < TOTAL
    # At 64, cases that answer fast finished far beyond the decision point: a test fed in
    # arrival order would have read them first.
    assert decided_at[64][1] > decided_at[64][0]


def test_missing_cases_count_against_a_pass(
    tmp_path: Path, server: tuple[str, type[_Handler]]
) -> None:
    """Every case here fails as 'error' or passes; with a floor between the rate of passes
    among the observed cases and the rate counting missing cases as failures, the run must
    not pass on the observed cases alone."""
    url, _handler = server
    root = _http_project(tmp_path / "p", url, 16)
    # Observed rate 80/95 = 84%; with the 5% missing as failures 80%. A floor of 0.82 is
    # above the worst case: the run never passes it.
    (root / "release.yaml").write_text(
        "version: 1\nrules:\n  - id: label-floor\n    metric: exact_label\n    min: 0.82\n"
    )
    done = run_cli("run", "--json", cwd=root, timeout=300)
    end = checked_events(done.out)[-1]
    assert end["decisions"][0]["state"] != "PASS", end
    assert done.code in (1, 3)


def test_a_rerun_calls_nothing_and_a_fixed_run_reuses_what_was_called(tmp_path: Path) -> None:
    made = run_cli("init", str(tmp_path / "ex"), "--example", "sequential", cwd=tmp_path)
    assert made.code == 0, made.text
    root = tmp_path / "ex"
    first = run_cli("run", "--json", cwd=root, timeout=300)
    assert first.code == 0, first.text
    events = checked_events(first.out)
    n = next(e["n"] for e in events if e["type"] == "rule_decided")
    assert n <= 800  # 40% of the 2,000 calls (it decides after a few dozen)
    assert "decided after" in events[-1]["decisions"][0]["detail"]
    stored = _stored(root)
    again = run_cli("run", "--json", cwd=root, timeout=300)
    again_events = checked_events(again.out)
    fresh = [e for e in again_events if e["type"] == "case_executed" and not e["from_cache"]]
    assert fresh == []  # a sequential rerun of a cached run calls nothing
    assert _decision_view(again_events[-1]) == _decision_view(events[-1])
    # Without sequential: every case runs, and those already called come from the cache.
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("sequential:\n  seed: 0\n", ""))
    fixed = run_cli("run", "--json", cwd=root, timeout=300)
    fixed_events = checked_events(fixed.out)
    assert fixed_events[-1]["completeness"] == "COMPLETE"
    executed = [e for e in fixed_events if e["type"] == "case_executed"]
    assert len(executed) == 2000
    assert sum(e["from_cache"] for e in executed) == stored
    # and --sequential turns it on again from the command line, from the cache
    back = run_cli("run", "--sequential", "--json", cwd=root, timeout=300)
    back_events = checked_events(back.out)
    assert back_events[-1]["completeness"] == "SEQUENTIAL"
    assert not [e for e in back_events if e["type"] == "case_executed" and not e["from_cache"]]


APP = """
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    return {"label": "ok", "days": 1}
"""


@pytest.mark.parametrize(("extra", "release", "args", "expected"), [
    ("trials: 2\n", None, (), "repeated trials"),
    ("", None, ("--limit", "5"), "cannot be combined with --shard, --limit"),
    ("", ("version: 1\nrules:\n  - id: f\n    metric: exact_label\n    min: 0.5\n"
         "    each_group: true\n"), ("--group-by", "lang"), "each_group"),
    ("", "version: 1\nrules:\n  - id: e\n    metric: days_error\n    max: 1.5\n",
     (), "MEAN without a declared range"),
    # 12 cases: Clopper-Pearson could fail min 0.5 on them, the sequential test could not.
    ("", None, (), "could not FAIL it within the 12 cases"),
])
def test_what_cannot_run_sequentially_is_refused_with_one_line(
    tmp_path: Path, extra: str, release: str | None, args: tuple[str, ...], expected: str
) -> None:
    evaluators = """
      - type: exact_match
        criterion: exact_label
        field: label
      - type: absolute_error
        criterion: days_error
        field: days
    """
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok", "days": 1},
              "metadata": {"lang": "en" if i % 2 else "fr"}} for i in range(12)]
    root = write_project(
        tmp_path / "p", app=APP, cases=cases, evaluators=evaluators,
        release=release or "version: 1\nrules:\n  - id: f\n    metric: exact_label\n    min: 0.5\n",
    )
    if extra:
        config = root / "oloproof.yaml"
        config.write_text(config.read_text() + extra)
    done = run_cli("run", "--sequential", *args, cwd=root)
    assert done.code == 2, done.text
    assert expected in done.err and "Traceback" not in done.err
    assert len(done.err.strip().splitlines()) <= 2
    assert not (root / ".oloproof" / "store.sqlite").exists() or _stored(root) == 0


def test_a_subset_of_a_project_sequential_by_its_file_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    """``sequential:`` in oloproof.yaml and ``run --limit 5``: the refusal said "--sequential
    cannot be combined with ...", an option the user had not written."""
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(12)]
    root = write_project(tmp_path / "p", app=APP, cases=cases)
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "sequential:\n  seed: 0\n")
    done = run_cli("run", "--limit", "5", cwd=root)
    assert done.code == 2, done.text
    assert done.err.startswith(
        "oloproof run: error: oloproof.yaml: sequential: this project is decided sequentially,"
        " which cannot be combined with --shard, --limit, --sample, --case or --where"), done.err
    assert "sequential: false" in done.err and "--sequential cannot" not in done.err


@pytest.mark.parametrize(("turned_on", "args", "off"), [
    ("sequential: true\n", (), "turn sequential decisions off (sequential: false in oloproof.yaml)"),
    ("", ("--sequential",), "run without --sequential"),
])
def test_a_rule_the_sequential_test_cannot_fail_is_refused_at_its_line(
    tmp_path: Path, turned_on: str, args: tuple[str, ...], off: str
) -> None:
    """Named by file, line and field, and turned off the way it was turned on (it said
    "run without --sequential" to a project that turned it on in oloproof.yaml)."""
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(12)]
    root = write_project(tmp_path / "p", app=APP, cases=cases, release=(
        "version: 1\nrules:\n  - id: budget\n    kind: observed_count\n"
        "    metric: exact_label\n    max_failures: 0\n"
        "  - id: f\n    metric: exact_label\n    min: 0.5\n"))
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + turned_on)
    done = run_cli("run", *args, cwd=root)
    assert done.code == 2, done.text
    assert done.err == (
        "oloproof run: error: release.yaml:9: rules[1].min: rule f: the sequential test could"
        " not FAIL it within the 12 cases of its scope even if every one failed, so it could"
        f" only pass or stay undecided: add cases, or {off}\n")


def test_compare_decides_a_sequential_candidate_by_paired_tests_in_its_order(
    tmp_path: Path,
) -> None:
    """A fixed baseline right 70% of the time, a sequential candidate right 97%: the
    superiority rule is decided by the sequential paired test over the pairs in the
    candidate's order, the same way every time compare is asked."""
    assert run_cli("init", str(tmp_path / "ex"), "--example", "sequential", cwd=tmp_path).code == 0
    root = tmp_path / "ex"
    app = root / "app.py"
    original = app.read_text()
    config = root / "oloproof.yaml"
    config.write_text(config.read_text().replace("sequential:\n  seed: 0\n", ""))
    app.write_text(original.replace('version="1"', 'version="weak"').replace(
        '    if text.endswith("?!"):', '    if text.endswith("?!") or number % 10 < 3:'))
    base = run_cli("run", "--json", "--policy", "release.yaml", cwd=root, timeout=300)
    baseline = checked_events(base.out)[-1]["run_id"]
    app.write_text(original)
    cand = run_cli("run", "--sequential", "--json", cwd=root, timeout=300)
    assert cand.code == 0, cand.text
    (root / "compare.yaml").write_text(
        "version: 1\nrules:\n  - id: better\n    kind: superiority\n    metric: correct\n"
    )
    first = run_cli("compare", "latest", baseline, "--json", cwd=root)
    doc = json.loads(first.out)
    decision = doc["decisions"][0]
    assert decision["reason"].startswith("sequential_"), decision
    assert "pairs in the candidate's order" in decision["detail"]
    assert any("is sequential: its rules are decided by sequential paired tests" in w
               for w in doc["warnings"])
    second = json.loads(run_cli("compare", "latest", baseline, "--json", cwd=root).out)
    assert second["decisions"][0]["detail"] == decision["detail"]
    assert second["exit_code"] == doc["exit_code"] == first.code


def test_a_tiny_margin_does_not_pass_a_system_far_below_its_floor(tmp_path: Path) -> None:
    """sequential: {margin: 1e-9} (accepted: the margin lies in (0, 0.5)) tuned the prior
    so tightly that the e-value lost every digit: a system right on every other case
    PASSed a floor of 0.8 after 17 cases, gate ALLOW exit 0. Now the prior is as tight as
    the e-value can be computed for, and a test tuned that close to the floor cannot FAIL
    the rule within 300 cases: refused before anything runs, as any such rule is."""
    root = write_project(
        tmp_path / "p",
        app="""
        def answer(case_input):
            return {"label": "ok" if case_input["n"] % 2 else "no"}
        """,
        cases=[{"id": f"c{i:03d}", "input": {"n": i}, "expected": {"label": "ok"}}
               for i in range(300)],
        release="version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.8\n",
    )
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "sequential:\n  seed: 0\n  margin: 1e-9\n")
    done = run_cli("run", cwd=root, timeout=300)
    assert done.code == 2, done.text
    assert "release.yaml:5: rules[0].min" in done.err
    assert "the sequential test could not FAIL it within the 300 cases" in done.err
