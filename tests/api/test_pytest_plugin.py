"""The pytest plugin (entry point pytest11): `oloproof_run(path).assert_allowed()` in a
real pytest session, in a subprocess, on real projects."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import labelled_cases, write_project

APP = """
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 10 else "no"}
"""


def test_a_release_gate_as_a_pytest_test(tmp_path: Path) -> None:
    write_project(tmp_path / "good", app=APP, cases=labelled_cases(60),
                  release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.6}\n")
    write_project(tmp_path / "bad", app=APP, cases=labelled_cases(60),
                  release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.99}\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_gates.py").write_text(textwrap.dedent("""
        def test_good(oloproof_run):
            result = oloproof_run("../good").assert_allowed()
            assert result.completeness == "COMPLETE"

        def test_bad(oloproof_run):
            oloproof_run("../bad").assert_allowed()
    """))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
    )
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out
    assert "GateNotAllowed: Run run_" in out and "[DECIDED/COMPLETE]: gate BLOCK (exit 1)" in out
    assert "floor (exact_label): FAIL [BLOCK]" in out
