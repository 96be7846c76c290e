"""Issue 4 end to end: HTTP systems and LLM judges through the real CLI.

Every run here is ``oloproof run`` in a subprocess, talking real HTTP on
127.0.0.1 to :class:`FakeServer` (a thread of this test process), whose own
counters and clock are the evidence: calls in flight, attempts per case, the
time between two attempts.
"""

from __future__ import annotations

import json
import re
import secrets
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Result, events, run_cli
from tests.fakes.provider import FakeServer

SYSTEM = "/system"
ANTHROPIC = "/v1/messages"
OPENAI = "/v1/chat/completions"


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def judge_yaml(
    criterion: str, srv: FakeServer, provider: str = "anthropic", key_env: str = "JUDGE_KEY"
) -> str:
    base_url = srv.anthropic_base_url if provider == "anthropic" else srv.openai_base_url
    return textwrap.dedent(
        f"""\
        - type: rubric_judge
          criterion: {criterion}
          provider: {provider}
          model: fake-judge-1
          base_url: {base_url}
          api_key_env: {key_env}
          rubric_text: "Pass when the answer repeats the customer's question."
          timeout_s: 5
        """
    )


def write_http_project(
    root: Path,
    srv: FakeServer,
    cases: list[dict[str, Any]],
    *,
    judges: Sequence[str] = (),
    concurrency: tuple[int, int] = (8, 4),
    headers: dict[str, str] | None = None,
    timeout_s: float = 5,
    output_path: str | None = "answer",
    max_retry_wait_s: float = 60,
    version: str = "v1",
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    http: dict[str, Any] = {
        "url": srv.system_url,
        "version": version,
        "usage_path": "usage",
        "timeout_s": timeout_s,
    }
    if output_path is not None:
        http["output_path"] = output_path
    if headers:
        http["headers"] = headers
    evaluators = "\n".join(
        [
            "- type: contains\n  criterion: echoed\n  field: null\n  expected_field: echo",
            *judges,
        ]
    )
    config = "\n".join(
        [
            "version: 1",
            "project: http-acceptance",
            "dataset: data/cases.jsonl",
            "system:",
            "  name: fake-endpoint",
            "  http: " + json.dumps(http),
            "concurrency:",
            f"  system: {concurrency[0]}",
            f"  judge: {concurrency[1]}",
            "retry:",
            f"  max_retry_wait_s: {max_retry_wait_s}",
            "evaluators:",
            textwrap.indent(evaluators, "  "),
        ]
    )
    if not (root / "release.yaml").exists():
        config += "\npolicy: none"  # no rules, on purpose (a release.yaml without any is refused)
    (root / "oloproof.yaml").write_text(config + "\n")
    return root


def questions(n: int, prefix: str = "c") -> list[dict[str, Any]]:
    """Cases with distinct inputs (the fake server counts attempts per input)."""
    return [
        {
            "id": f"{prefix}{i:03d}",
            "input": {"question": f"question {prefix} {i}"},
            "expected": {"echo": f"question {prefix} {i}"},
        }
        for i in range(n)
    ]


def metric_row(out: str, metric: str) -> str:
    for line in out.splitlines():
        if line.startswith(f"│ {metric} ") and "observed" in line:
            return line
    raise AssertionError(f"no metric row for {metric} in:\n{out}")


def inspect_case(project: Path, case_id: str) -> dict[str, Any]:
    shown = run_cli("inspect", "latest", "--case", case_id, "--json", cwd=project)
    assert shown.code == 0, shown.text
    data: dict[str, Any] = json.loads(shown.out)
    return data


def inspect_all(project: Path) -> dict[str, Any]:
    shown = run_cli("inspect", "latest", "--json", cwd=project)
    assert shown.code == 0, shown.text
    data: dict[str, Any] = json.loads(shown.out)
    return data


def by_key_attempts(srv: FakeServer, path: str = SYSTEM) -> list[list[Any]]:
    return [calls for calls in srv.calls_by_key(path).values()]


# --------------------------------------------------------------------------- #
# 1. Two independent limits, under load
# --------------------------------------------------------------------------- #


def test_system_and_judge_limits_hold_under_load(tmp_path: Path, srv: FakeServer) -> None:
    # Slow answers, and each path holds its first requests until the limit is
    # reached: the peak is then exactly the limit, or the limit was not used.
    srv.configure(SYSTEM, delay_s=0.2, hold_until_peak=8)
    srv.configure(ANTHROPIC, delay_s=0.05, hold_until_peak=3)
    project = write_http_project(
        tmp_path / "load", srv, questions(200), judges=[judge_yaml("helpful", srv)],
        concurrency=(8, 3),
    )
    result = run_cli("run", cwd=project, env={"JUDGE_KEY": "k-" + secrets.token_hex(8)})
    assert result.code == 0, result.text
    assert srv.peak_in_flight(SYSTEM) == 8
    assert srv.peak_in_flight(ANTHROPIC) == 3
    assert srv.total_calls(SYSTEM) == 200 and srv.total_calls(ANTHROPIC) == 200
    assert "200 / 200 observed · 0 missing" in metric_row(result.out, "helpful")
    assert "200 / 200 observed · 0 missing" in metric_row(result.out, "echoed")


# --------------------------------------------------------------------------- #
# 2. Retries, by the server's own clock and counters
# --------------------------------------------------------------------------- #


def test_retry_after_is_honoured_by_the_server_clock(tmp_path: Path, srv: FakeServer) -> None:
    srv.configure(SYSTEM, fail_first_n=1, fail_status=429, retry_after="1")
    project = write_http_project(tmp_path / "p", srv, questions(6))
    result = run_cli("run", cwd=project)
    assert result.code == 0, result.text
    assert "6 / 6 observed · 0 missing" in metric_row(result.out, "echoed")
    groups = by_key_attempts(srv)
    assert len(groups) == 6
    for calls in groups:
        assert [c.status for c in calls] == [429, 200]
        assert calls[1].t - calls[0].t >= 1.0, calls
    case = inspect_case(project, "c003")
    assert case["status"] == "OK" and case["attempts"] == 2


def test_retry_after_as_an_http_date(tmp_path: Path, srv: FakeServer) -> None:
    srv.configure(SYSTEM, fail_first_n=1, fail_status=503, retry_after_date_in_s=2)
    project = write_http_project(tmp_path / "p", srv, questions(3))
    result = run_cli("run", cwd=project)
    assert result.code == 0, result.text
    for calls in by_key_attempts(srv):
        assert [c.status for c in calls] == [503, 200]
        # An HTTP date has whole seconds: "2 s from now" is at least 1 s away.
        assert calls[1].t - calls[0].t >= 0.95, calls


@pytest.mark.parametrize(
    ("behaviour", "observed", "attempts", "statuses", "error"),
    [
        pytest.param({"fail_first_n": 3, "fail_status": 503}, True, 4, [503, 503, 503, 200], None,
                     id="503x3-then-200"),
        pytest.param({"fail_first_n": 4, "fail_status": 503}, False, 4, [503] * 4, "HTTP 503",
                     id="503x4"),
        pytest.param({"fail_always": 400}, False, 1, [400], "HTTP 400", id="400"),
        pytest.param({"drop_first_n": 1}, True, 2, ["drop", 200], None, id="dropped"),
        pytest.param({"timeout_first_n": 1, "timeout_sleep_s": 3}, True, 2, ["timeout", 200], None,
                     id="timeout"),
        pytest.param({"fail_always": 429, "retry_after": "30"}, False, 1, [429],
                     "gave up: Retry-After 30s exceeds max_retry_wait_s 5s", id="retry-after-too-long"),
    ],
)
def test_retry_policy_per_failure(
    tmp_path: Path,
    srv: FakeServer,
    behaviour: dict[str, Any],
    observed: bool,
    attempts: int,
    statuses: list[Any],
    error: str | None,
) -> None:
    srv.configure(SYSTEM, **behaviour)
    project = write_http_project(
        tmp_path / "p", srv, questions(2), timeout_s=0.5, max_retry_wait_s=5
    )
    result = run_cli("run", cwd=project)
    assert "Traceback" not in result.text
    row = metric_row(result.out, "echoed")
    if observed:
        assert result.code == 0, result.text
        assert "2 / 2 observed · 0 missing" in row
    else:
        assert "0 / 0 observed · 2 missing" in row
    for calls in by_key_attempts(srv):
        assert [c.status for c in calls] == statuses
    case = inspect_case(project, "c001")
    assert case["attempts"] == attempts
    if error is None:
        assert case["status"] == "OK" and case["error"] is None
    else:
        assert case["status"] == "ERROR"
        assert error in case["error"]
        shown = run_cli("inspect", "latest", "--case", "c001", cwd=project)
        assert f"attempts {attempts}" in shown.out and error in shown.out


def test_non_json_and_malformed_responses_are_case_errors(tmp_path: Path, srv: FakeServer) -> None:
    cases = [
        *questions(1),
        {"id": "html", "input": {"respond_raw": "<html><body>Bad   gateway\n page</body></html>"},
         "expected": {"echo": "x"}},
        {"id": "shape", "input": {"respond": {"result": "no answer field here"}},
         "expected": {"echo": "x"}},
    ]
    project = write_http_project(tmp_path / "p", srv, cases)
    result = run_cli("run", cwd=project)
    assert "1 / 1 observed · 2 missing" in metric_row(result.out, "echoed")
    html = inspect_case(project, "html")
    assert html["status"] == "ERROR" and html["attempts"] == 1
    assert "response is not JSON: <html><body>Bad gateway page</body></html>" in html["error"]
    shape = inspect_case(project, "shape")
    assert "output_path 'answer' not found in the response" in shape["error"]
    failures = run_cli("inspect", "latest", "--failures", cwd=project)
    assert "response is not JSON" in failures.out and "output_path 'answer'" in failures.out


# --------------------------------------------------------------------------- #
# 3. Judges: a garbled verdict, a failing provider, retries, usage, the cache
# --------------------------------------------------------------------------- #


def test_judge_errors_leave_cases_missing_with_the_reason_shown(
    tmp_path: Path, srv: FakeServer
) -> None:
    srv.configure(ANTHROPIC, garbage_always=True)
    srv.configure(OPENAI, fail_first_n=4, fail_status=503)
    project = write_http_project(
        tmp_path / "p", srv, questions(3),
        judges=[judge_yaml("garbled", srv), judge_yaml("unavailable", srv, "openai_compatible")],
    )
    env = {"JUDGE_KEY": "k-" + secrets.token_hex(8)}
    result = run_cli("run", cwd=project, env=env)
    assert "Traceback" not in result.text
    assert "0 / 0 observed · 3 missing" in metric_row(result.out, "garbled")
    assert "0 / 0 observed · 3 missing" in metric_row(result.out, "unavailable")
    assert "3 / 3 observed · 0 missing" in metric_row(result.out, "echoed")

    case = inspect_case(project, "c000")
    garbled = case["judgments"]["garbled"]
    assert garbled["status"] == "ERROR" and garbled["attempts"] == 1
    assert garbled["reason"].startswith("judge answer not understood: judge reply holds no JSON")
    assert garbled["usage"]["input_tokens"] > 0  # the provider answered: its tokens count
    unavailable = case["judgments"]["unavailable"]
    assert unavailable["status"] == "ERROR" and unavailable["attempts"] == 4
    assert "judge call failed: openai_compatible judge (fake-judge-1): HTTP 503" in (
        unavailable["reason"]
    )
    shown = run_cli("inspect", "latest", "--case", "c000", cwd=project)
    garbled_row = next(line for line in shown.out.splitlines() if "│ garbled " in line)
    assert "ERROR" in garbled_row and "judge answer not understood" in garbled_row
    unavailable_row = next(line for line in shown.out.splitlines() if "│ unavailable " in line)
    assert re.search(r"│ 4 +│", unavailable_row) and "HTTP 503" in unavailable_row

    # Judge errors are not cached: the next run asks again, and now gets verdicts.
    srv.reset()
    srv.configure(OPENAI, fail_first_n=1, fail_status=429, retry_after="0")
    again = run_cli("run", "--json", cwd=project, env=env)
    assert again.code == 0, again.text
    assert "3 / 3 observed · 0 missing" in metric_row(again.err, "garbled")
    assert "3 / 3 observed · 0 missing" in metric_row(again.err, "unavailable")
    judged = [e for e in events(again.out) if e["type"] == "case_judged"]
    assert {(e["criterion"], e["from_cache"]) for e in judged} == {
        ("echoed", True), ("garbled", False), ("unavailable", False)
    }
    case = inspect_case(project, "c000")
    assert case["judgments"]["unavailable"]["attempts"] == 2
    assert case["judgments"]["garbled"]["status"] == "OK"
    usage = case["judgments"]["garbled"]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0


# --------------------------------------------------------------------------- #
# 4. Secrets reach neither the store nor any output
# --------------------------------------------------------------------------- #


def test_secrets_never_reach_the_store_or_any_output(tmp_path: Path, srv: FakeServer) -> None:
    header_secret = "hdr-" + secrets.token_hex(16)
    judge_key = "jk-" + secrets.token_hex(16)
    srv.configure(SYSTEM, require_headers={"Authorization": f"Bearer {header_secret}"})
    # The anthropic judge takes the key; the openai one refuses it, quoting it
    # back (as some APIs do): that error text must have it masked.
    srv.configure(ANTHROPIC, expected_api_key=judge_key)
    srv.configure(OPENAI, expected_api_key="another-key")
    cases = [
        *questions(3),
        # A careless endpoint echoing the Authorization header in its output.
        {"id": "echo", "input": {"echo_header": "Authorization"}, "expected": {"echo": "x"}},
    ]
    def write(judges: list[str]) -> Path:
        return write_http_project(
            tmp_path / "p", srv, cases, judges=judges,
            headers={"Authorization": "Bearer ${INTAKE_TOKEN}"},
        )

    project = write([judge_yaml("helpful", srv)])
    env = {"INTAKE_TOKEN": header_secret, "JUDGE_KEY": judge_key}
    outputs: list[Result] = [run_cli("run", cwd=project, env=env)]
    assert "4 / 4 observed" in metric_row(outputs[0].out, "helpful")
    # output_path is "answer": the output is the echoed text, masked.
    assert inspect_case(project, "echo")["output"] == "your Authorization header was Bearer ***"

    # A judge refusing the key with a 401 (quoting it) stops the run early: the
    # stop reason and the stored judgments have it masked.
    write([judge_yaml("helpful", srv), judge_yaml("refused", srv, "openai")])
    outputs.append(run_cli("run", cwd=project, env=env))
    assert outputs[-1].code == 5, outputs[-1].text
    stop_reason = json.loads(run_cli("runs", "--json", cwd=project).out)[0]["stop_reason"]
    assert "HTTP 401" in stop_reason and "***" in stop_reason
    refused = [
        c["judgments"]["refused"]["reason"]
        for c in json.loads(run_cli("inspect", "latest", "--json", cwd=project).out)["cases"]
        if c["judgments"].get("refused", {}).get("status") == "ERROR"
    ]
    assert refused and all("HTTP 401" in r and "***" in r for r in refused)

    # Now the endpoint refuses the header, quoting it back: a failing case's error
    # (a 401 again: the run stops early, with what it got stored).
    write([judge_yaml("helpful", srv)])
    srv.configure(SYSTEM, require_headers={"Authorization": "Bearer something-else"})
    outputs.append(run_cli("run", "--json", "--no-cache", cwd=project, env=env))
    assert outputs[-1].code == 5, outputs[-1].text
    stored = json.loads(run_cli("inspect", "latest", "--json", cwd=project).out)["cases"]
    failed = [c for c in stored if c["status"] == "ERROR"]
    assert failed and all("HTTP 401" in c["error"] and "Bearer ***" in c["error"] for c in failed)

    for args in (
        ("inspect", "latest", "--json"),
        ("inspect", "latest"),
        ("inspect", "latest", "--failures"),
        ("inspect", "latest", "--failures", "--json"),
        ("inspect", "latest", "--case", failed[0]["id"]),
        ("runs", "--json"),
        ("runs",),
    ):
        outputs.append(run_cli(*args, cwd=project, env=env))
    for result in outputs:
        for secret in (header_secret, judge_key):
            assert secret not in result.out and secret not in result.err
    store_files = [p for p in (project / ".oloproof").rglob("*") if p.is_file()]
    assert any(p.name == "store.sqlite" for p in store_files)
    for path in store_files:
        data = path.read_bytes()
        for secret in (header_secret, judge_key):
            assert secret.encode() not in data, path


# --------------------------------------------------------------------------- #
# Configuration errors stop the run before any call
# --------------------------------------------------------------------------- #


def test_missing_header_variable_stops_before_any_call(tmp_path: Path, srv: FakeServer) -> None:
    project = write_http_project(
        tmp_path / "p", srv, questions(3),
        headers={"Authorization": "Bearer ${OLOPROOF_TEST_UNSET_TOKEN}"},
    )
    result = run_cli("run", cwd=project)
    assert result.code == 2, result.text
    # The field with its line (issue 30).
    assert "oloproof.yaml:6: system.http.headers.Authorization" in result.err
    assert "OLOPROOF_TEST_UNSET_TOKEN is not set" in result.err
    assert srv.total_calls(SYSTEM) == 0 and srv.stats()["calls"] == []


def test_missing_judge_key_stops_before_any_call(tmp_path: Path, srv: FakeServer) -> None:
    project = write_http_project(
        tmp_path / "p", srv, questions(3),
        judges=[judge_yaml("helpful", srv, key_env="NO_SUCH_JUDGE_KEY")],
    )
    result = run_cli("run", cwd=project)
    assert result.code == 2, result.text
    # The field with its line (issue 30).
    assert "oloproof.yaml:22: evaluators[1].api_key_env" in result.err
    assert "NO_SUCH_JUDGE_KEY is not set" in result.err
    assert srv.stats()["calls"] == []
    runs = run_cli("runs", "--json", cwd=project)
    assert "run_" not in runs.out


# --------------------------------------------------------------------------- #
# 5. The shipped examples, as a user runs them
# --------------------------------------------------------------------------- #


def _point_at(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old} not in {path}"
    path.write_text(text.replace(old, new))


def test_judge_example_runs_offline_and_an_unchanged_rerun_calls_nothing(
    tmp_path: Path, srv: FakeServer
) -> None:
    project = tmp_path / "judged"
    init = run_cli("init", str(project), "--example", "judge", cwd=tmp_path)
    assert init.code == 0, init.text
    assert (project / "README.md").exists() and (project / "rubrics" / "helpful.md").exists()
    # The example points at port 8787; this test's fake server listens elsewhere.
    _point_at(project / "oloproof.yaml", "http://127.0.0.1:8787", srv.anthropic_base_url)
    env = {"FAKE_PROVIDER_KEY": "dummy-key-for-the-fake"}

    first = run_cli("run", cwd=project, env=env)
    # The example's validated rule waits for 30 human labels: MANUAL_REVIEW, exit 4.
    assert first.code == 4, first.text
    assert "10 / 12 observed · 0 missing" in metric_row(first.out, "helpful")
    assert "12 observed · 0 missing" in metric_row(first.out, "quality")  # the scored judge
    assert "executions 0 hits · 12 misses   judgments 0 hits · 24 misses" in first.out
    assert srv.total_calls(ANTHROPIC) == 24
    usage = inspect_case(project, "q01")
    assert usage["usage"]["input_tokens"] > 0 and usage["usage"]["cost_usd"] > 0
    assert usage["judgments"]["helpful"]["usage"]["input_tokens"] > 0

    second = run_cli("run", cwd=project, env=env)
    assert second.code == 4, second.text
    assert "executions 12 hits · 0 misses   judgments 24 hits · 0 misses" in second.out
    assert srv.total_calls(ANTHROPIC) == 24  # the judges were not called again
    assert metric_row(second.out, "helpful") == metric_row(first.out, "helpful")


def test_http_example_runs_as_written(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    project = tmp_path / "triage"
    init = run_cli("init", str(project), "--example", "http", cwd=tmp_path)
    assert init.code == 0, init.text
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _point_at(project / "oloproof.yaml", "http://127.0.0.1:8765/", f"http://127.0.0.1:{port}/")
    service = subprocess.Popen(
        [sys.executable, "service.py", "--port", str(port)], cwd=project,
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert service.stdout is not None
        assert "triage service on" in service.stdout.readline()
        result = run_cli("run", cwd=project, env={"INTAKE_TOKEN": "demo-token"})
        assert result.code == 0, result.text
        assert "12 / 16 observed · 0 missing" in metric_row(result.out, "exact_label")
        case = inspect_case(project, "t01")
        assert case["output"] == {"label": "billing", "priority": "normal"}
        assert case["usage"]["input_tokens"] == 9
        wrong = run_cli("run", "--no-cache", cwd=project, env={"INTAKE_TOKEN": "wrong"})
        # A 401 stops the run early (issue 10): exit 5, the error in one line.
        assert wrong.code == 5, wrong.text
        assert "stopped early" in wrong.out and "HTTP 401" in wrong.out
        latest = json.loads(run_cli("inspect", "latest", "--json", cwd=project).out)
        assert latest["run"]["status"] == "RUN_ERROR"
        assert all("HTTP 401" in c["error"] for c in latest["cases"])
    finally:
        service.terminate()
        service.wait(timeout=10)
