"""Every example ``oloproof init --example`` ships, end to end through the real CLI: copied,
run (its services started as its README says, the judge's provider faked over HTTP), run
again from the cache, re-decided by ``gate``, listed, inspected and written as a report.

CI runs this file on every Python the package claims (.ci/run, docs/running-in-ci.md):
whatever a version changes in the standard library, a user's first commands must work.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import Result, run_cli
from tests.fakes.provider import FakeServer

# Each example's gate, as its README and docs say: (exit code of `run`, the gate).
EXPECTED = {
    "starter": (3, "BLOCK"),  # 3 cases cannot clear a 90% floor
    "support_bot": (3, "BLOCK"),  # 13 of 18 against 70%: INSUFFICIENT_EVIDENCE
    "code": (3, "BLOCK"),
    "compare": (0, "ALLOW"),  # the candidate, keywords-v2
    "judge": (4, "BLOCK"),  # the validated judge waits for human labels: MANUAL_REVIEW
    "http": (0, "ALLOW"),
    "prompts": (0, "ALLOW"),  # the baseline prompt and model, 59 of 80 against 55%
    "sequential": (0, "ALLOW"),  # 97% right against 0.80: decided after 57 of 2,000 cases
}


def _listed() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "oloproof.cli.main", "init", "--example", "list"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def test_every_shipped_example_is_checked_here() -> None:
    assert sorted(_listed()) == sorted(EXPECTED)


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_example_runs_end_to_end(name: str, tmp_path: Path, provider: FakeServer) -> None:
    root = tmp_path / name
    assert run_cli("init", str(root), "--example", name, cwd=tmp_path).code == 0
    env: dict[str, str] = {}
    service = None
    if name == "judge":
        _replace(root / "oloproof.yaml", "http://127.0.0.1:8787", provider.anthropic_base_url)
        env["FAKE_PROVIDER_KEY"] = "dummy-key-for-the-fake"
    elif name == "prompts":
        _replace(root / "oloproof.yaml", "http://127.0.0.1:8787/v1", provider.openai_base_url)
        env["FAKE_PROVIDER_KEY"] = "dummy-key-for-the-fake"
    elif name == "http":
        port = _free_port()
        _replace(root / "oloproof.yaml", "http://127.0.0.1:8765/", f"http://127.0.0.1:{port}/")
        env["INTAKE_TOKEN"] = "demo-token"
        service = subprocess.Popen([sys.executable, "service.py", "--port", str(port)], cwd=root,
                                   stdout=subprocess.PIPE, text=True)
        assert service.stdout is not None and "triage service on" in service.stdout.readline()
    try:
        code, gate = EXPECTED[name]
        first = run_cli("run", cwd=root, env=env)
        assert first.code == code, first.text
        assert f"Gate      {gate}   exit code {code}" in first.out, first.out
        again = run_cli("run", cwd=root, env=env)  # everything from the cache
        assert again.code == code and " 0 misses   judgments " in again.out, again.text
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=30)
    _check_stored(root, code, gate, env)


def _check_stored(root: Path, code: int, gate: str, env: dict[str, str]) -> None:
    decided = run_cli("gate", "latest", "--json", cwd=root, env=env)
    assert decided.code == code and json.loads(decided.out)["gate"] == gate, decided.text
    runs = json.loads(_ok(run_cli("runs", "--json", cwd=root)).out)
    assert len(runs) == 2 and {r["status"] for r in runs} == {"DECIDED"}
    shown = json.loads(_ok(run_cli("inspect", "latest", "--json", cwd=root)).out)
    assert shown["run"]["id"] == runs[0]["id"] and shown["cases"]
    first_case = shown["cases"][0]["id"]
    assert first_case in _ok(run_cli("inspect", "latest", "--case", first_case, cwd=root)).out
    assert _ok(run_cli("inspect", "latest", "--failures", cwd=root)).out
    plan = run_cli("plan", "latest", "--run", cwd=root)
    assert plan.code in (0, 2), plan.text
    report = _ok(run_cli("report", "latest", cwd=root))
    written = root / report.out.strip().removeprefix("Report written to ")
    assert written.read_text().lower().startswith("<!doctype html>")


def _ok(result: Result) -> Result:
    assert result.code == 0, result.text
    return result
