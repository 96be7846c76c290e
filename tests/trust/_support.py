"""Helpers of the run-path trust tests: a project on disk, the CLI, the stored state."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.conftest import Result, run_cli

RELEASE = """\
version: 1
rules:
  - id: label-floor
    metric: exact_label
    min: 0.5
"""
# A floor that 3 cases can fail (a floor of 50% needs 6: ALLOW is earned, and a rule that
# no outcome of the suite could fail is refused).
SMALL_RELEASE = RELEASE.replace("min: 0.5", "min: 0.8")


def project(
    root: Path,
    app: str,
    *,
    cases: list[dict[str, Any]] | None = None,
    n: int = 6,
    evaluators: str | None = None,
    system: str = "  callable: app:answer\n",
    extra: str = "",
    release: str = RELEASE,
    files: dict[str, str] | None = None,
    concurrency: int = 2,
) -> Path:
    """A real project: app.py, oloproof.yaml, release.yaml, data/cases.jsonl."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "app.py").write_text(textwrap.dedent(app))
    (root / "data").mkdir(exist_ok=True)
    if cases is None:
        cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(n)]
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    if evaluators is None:
        evaluators = "  - type: exact_match\n    criterion: exact_label\n    field: label\n"
    (root / "oloproof.yaml").write_text(
        "version: 1\nproject: trust\ndataset: data/cases.jsonl\n"
        f"system:\n  name: sys\n  version: \"1\"\n{system}"
        f"concurrency:\n  system: {concurrency}\n  judge: 2\n"
        f"{extra}evaluators:\n{evaluators}"
    )
    (root / "release.yaml").write_text(release)
    for name, content in (files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(content))
    return root


def custom_check_project(root: Path, checks: str, *, n: int, timeout_s: float) -> Path:
    """A system that always answers "ok", judged by checks.py's ``check`` (criterion
    ``custom_ok``, under ``timeout_s``) against a floor of 50%."""
    evaluators = (
        "  - type: custom\n    criterion: custom_ok\n    function: checks:check\n"
        f"    timeout_s: {timeout_s:g}\n"
    )
    release = "version: 1\nrules:\n  - id: floor\n    metric: custom_ok\n    min: 0.5\n"
    return project(
        root, "def answer(inp):\n    return {'label': 'ok'}\n", n=n,
        evaluators=evaluators, release=release, files={"checks.py": checks},
    )


def cli(root: Path, *args: str, timeout: float = 90) -> Result:
    return run_cli(*args, cwd=root, timeout=timeout)


def runs(root: Path) -> list[dict[str, Any]]:
    result = cli(root, "runs", "--json")
    assert result.code == 0, result.text
    data = json.loads(result.out)
    assert isinstance(data, list)
    return data


def inspect(root: Path, run: str = "latest") -> dict[str, Any]:
    result = cli(root, "inspect", run, "--json")
    assert result.code in (0, 5), result.text
    data = json.loads(result.out)
    assert isinstance(data, dict)
    return data


def cases_by_id(root: Path, run: str = "latest") -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in inspect(root, run)["cases"]}


def integrity_ok(root: Path) -> bool:
    conn = sqlite3.connect(str(root / ".oloproof" / "store.sqlite"))
    try:
        return bool(conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok")
    finally:
        conn.close()


def no_traceback(result: Result) -> None:
    assert "Traceback" not in result.text, result.text


def send_body(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200) -> None:
    """Answer the request ``handler`` holds with a JSON ``body`` and ``status``."""
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering with ``handler``, in a thread, for the
    block: its base URL (``http://127.0.0.1:PORT``)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
