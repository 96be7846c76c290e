"""Issue 10, classes 4 and 7 over real HTTP (127.0.0.1): size and nesting limits, a gzip
bomb, numbers that overflow, all calls failed said in one line, a 401 stopping early."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from tests.trust._support import cases_by_id, cli, integrity_ok, no_traceback, project, runs

# The decompressed bomb: 50 MB of zeros, 50 KB on the wire.
BOMB = gzip.compress(b"0" * (50 * 1024 * 1024), compresslevel=9)


class _Handler(BaseHTTPRequestHandler):
    calls: ClassVar[list[int]] = []
    mode = "hostile"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        n = body["n"]
        type(self).calls.append(n)
        if self.mode == "401":
            self._send(401, b'{"error": "bad key"}')
        elif self.mode == "400":
            self._send(400, b'{"error": "nope"}')
        elif n == 1:
            self._send(200, b'{"label": "' + b"x" * (200 * 1024) + b'"}')  # past 64 KB
        elif n == 2:
            self._send(200, BOMB, gzip_body=True)
        elif n == 3:
            self._send(200, b'{"label": ' + b"[" * 5000 + b"]" * 5000 + b"}")
        elif n == 4:
            self._send(200, b'{"label": NaN}')
        elif n == 5:
            self._send(200, b'{"label": 1e400}')
        elif n == 6:
            self._send(200, b'{"label": ' + b"9" * 5000 + b"}")
        elif n == 7:
            self._send(200, b'{"label": "ok", "label": "ok"}')
        else:
            self._send(200, b'{"label": "ok"}')

    def _send(self, status: int, body: bytes, gzip_body: bool = False) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        if gzip_body:
            self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"calls": [], "mode": "hostile"})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/answer", handler
    finally:
        httpd.shutdown()


def _http_project(root: Path, url: str, n: int, extra: str = "") -> Path:
    system = f"  http:\n    url: {url}\n    version: \"1\"\n    timeout_s: 20\n"
    return project(root, "", n=n, system=system, extra=extra, concurrency=1)


def test_hostile_bodies_are_per_case_errors(
    tmp_path: Path, server: tuple[str, type[_Handler]]
) -> None:
    url, _ = server
    root = _http_project(tmp_path / "p", url, 9,
                         extra="limits:\n  max_response_bytes: 65536\n  max_json_depth: 32\n")
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text  # 7 of 9 missing: incomplete evidence
    cases = cases_by_id(root)
    assert len(cases) == 9
    expected = {
        "q1": "65536 bytes", "q2": "65536 bytes", "q3": "nested deeper",
        "q4": "NaN", "q5": "overflows", "q6": "digits", "q7": "twice",
    }
    for cid, words in expected.items():
        assert cases[cid]["status"] == "ERROR", cases[cid]
        assert words in cases[cid]["error"], cases[cid]["error"]
    assert cases["q0"]["status"] == cases["q8"]["status"] == "OK"
    [run] = runs(root)
    assert run["status"] == "DECIDED" and run["exit_code"] == 5
    assert integrity_ok(root)


def test_all_calls_failed_is_said_in_one_line_above_the_tables(
    tmp_path: Path, server: tuple[str, type[_Handler]]
) -> None:
    url, handler = server
    handler.mode = "400"
    root = _http_project(tmp_path / "p", url, 6)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text  # nothing observed: incomplete, never an ALLOW
    lines = result.out.splitlines()
    notice = [i for i, line in enumerate(lines) if line.startswith("Failed calls:")]
    assert notice, result.out
    assert "all 6 calls of the system failed" in lines[notice[0]]
    assert "HTTP 400" in lines[notice[0]]
    assert notice[0] < next(i for i, line in enumerate(lines) if line.startswith("Metrics"))
    assert "0 / 0 observed · 6 missing" in result.out
    # Every call failed: the run is stopped there (SPEC §5), naming the URL, not decided.
    assert f"Stopped: incomplete: system sys (POST {url}) failed on every call" in result.out
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["gate"]) == ("RUN_ERROR", "PARTIAL", "BLOCK")
    assert all(c["status"] == "ERROR" for c in cases_by_id(root).values())
    gate = json.loads(cli(root, "gate", "latest", "--json").out)
    assert (gate["decisions"], gate["exit_code"]) == ([], 5)
    # plan refuses to size a run that was not decided (exit 5: the run is incomplete).
    plan = cli(root, "plan", "latest", "--run")
    no_traceback(plan)
    assert plan.code == 5, plan.text
    assert "RUN_ERROR/PARTIAL" in plan.text, plan.text


def test_failure_threshold_says_so_before_all_failed(tmp_path: Path) -> None:
    app = """
        def answer(inp):
            if inp["n"] % 2:
                raise RuntimeError("half of them fail")
            return {"label": "ok"}
    """
    root = project(tmp_path / "p", app, n=8, extra="limits:\n  failure_threshold: 0.25\n")
    result = cli(root, "run")
    no_traceback(result)
    assert "Failed calls: 4 of 8 calls of the system failed" in result.out, result.out
    assert "half of them fail" in result.out
    quiet = project(tmp_path / "q", app, n=8)
    assert "Failed calls" not in cli(quiet, "run").out


def test_a_401_stops_the_run_early(tmp_path: Path, server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.mode = "401"
    root = _http_project(tmp_path / "p", url, 30)
    result = cli(root, "run")
    no_traceback(result)
    assert result.code == 5, result.text
    assert "stopped early" in result.out and "HTTP 401" in result.out
    assert len(handler.calls) < 5  # not the whole suite
    [run] = runs(root)
    assert (run["status"], run["completeness"], run["exit_code"]) == ("RUN_ERROR", "PARTIAL", 5)
    assert "HTTP 401" in run["stop_reason"]
    stored = cases_by_id(root)
    assert 1 <= len(stored) < 30
    assert all("HTTP 401" in c["error"] for c in stored.values())
