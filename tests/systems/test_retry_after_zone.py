"""A ``Retry-After`` HTTP date is in UTC, whatever the zone of the machine that reads it.

An HTTP date is always UTC (RFC 9110 section 5.6.7), including the two forms that name no
zone: the obsolete asctime form (``Sun Nov  6 08:49:37 1994``), which recipients must
accept, and ``-0000`` (what Python's ``email.utils.formatdate()`` writes by default).
Those two used to be read in the local time zone: on a machine five hours behind UTC a
wait of 3 s read as 5 hours, past ``max_retry_wait_s``, and the case was given up at once
(missing, exit 5); ahead of UTC it read as a date in the past, and the retry came early.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.conftest import run_cli

WAIT_S = 3.0

FORMATS: dict[str, Callable[[float], str]] = {
    "asctime": lambda t: time.asctime(time.gmtime(t)),
    "minus-zero": lambda t: email.utils.formatdate(t),
}


class _Server:
    def __init__(self, form: Callable[[float], str]) -> None:
        self.form = form
        self.seen: dict[str, list[float]] = {}
        self.asked: dict[str, float] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                now = time.time()
                calls = owner.seen.setdefault(str(body["n"]), [])
                calls.append(now)
                if len(calls) == 1:
                    # A whole second ahead: the date has a resolution of one second.
                    until = float(int(now + WAIT_S) + 1)
                    owner.asked[str(body["n"])] = until
                    data, status = b"{}", 503
                    headers = [("Retry-After", owner.form(until))]
                else:
                    data, status, headers = json.dumps({"result": {"label": "ok"}}).encode(), 200, []
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[_Server]:
    srv = _Server(FORMATS[request.param])
    thread = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def _project(root: Path, port: int) -> None:
    (root / "data").mkdir(parents=True)
    (root / "data" / "cases.jsonl").write_text(
        json.dumps({"id": "q0", "input": {"n": 0}, "expected": {"label": "ok"}}) + "\n"
    )
    (root / "oloproof.yaml").write_text(
        "version: 1\nproject: zone\ndataset: data/cases.jsonl\npolicy: none\n"
        "system:\n  name: s\n  http:\n"
        f"    url: http://127.0.0.1:{port}/x\n    version: '1'\n    output_path: result\n"
        "evaluators:\n  - type: exact_match\n    criterion: exact_label\n    field: label\n"
    )


# Behind UTC (the wait read as hours: given up) and ahead of it (read as past: too early).
@pytest.mark.parametrize(
    ("server", "zone"), [("asctime", "EST5"), ("minus-zero", "JST-9")], indirect=["server"]
)
def test_a_retry_after_date_without_a_zone_is_utc(
    tmp_path: Path, server: _Server, zone: str
) -> None:
    _project(tmp_path, server.port)
    result = run_cli("run", cwd=tmp_path, env={"TZ": zone})
    assert result.code == 0, result.text
    shown = json.loads(run_cli("inspect", "latest", "--case", "q0", "--json", cwd=tmp_path).out)
    assert shown["status"] == "OK" and shown["attempts"] == 2, shown
    first, second = server.seen["0"]
    # Never sooner than the date asked (by the server's own clock; a little slack for the
    # clock's reading within the second), and not held for hours either.
    assert second >= server.asked["0"] - 0.05, (first, second, server.asked)
