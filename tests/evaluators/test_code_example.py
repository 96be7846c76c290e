"""The `code` example (issue 13): generated code run against its tests in a limited child
process, and why "exit code 0 == pass" is wrong."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import oloproof
from oloproof.cli.init import examples_root

pytestmark = pytest.mark.slow  # the example waits out one 2 s timeout


@pytest.fixture
def checks(tmp_path: Path):  # type: ignore[no-untyped-def]
    project = tmp_path / "code"
    shutil.copytree(examples_root() / "code", project)
    sys.path.insert(0, str(project))
    sys.modules.pop("checks", None)
    try:
        import checks as module  # type: ignore[import-not-found]

        yield project, module
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("checks", None)


def test_exit_code_zero_is_not_a_pass(checks) -> None:  # type: ignore[no-untyped-def]
    _, module = checks
    code, out, _ = module.run_program("import sys\nsys.exit(0)\nassert False\n",
                                      timeout_s=5, memory_mb=256)
    assert code == 0 and out == ""  # what a checker trusting exit codes would call a pass
    case = type("Case", (), {"input": {"prompt": "def f():\n", "entry_point": "f"},
                             "expected": {"tests": "def check(c):\n    assert c() == 1\n"}})()
    verdict = module.passes({"completion": "    import os\n    os._exit(0)\n"}, case)
    assert verdict.passed is False and "before the tests finished" in verdict.reason
    assert module.passes({"completion": "    return 1\n"}, case).passed is True


def test_memory_and_time_are_limited(checks) -> None:  # type: ignore[no-untyped-def]
    _, module = checks
    code, _, err = module.run_program("x = bytearray(1 << 30)\n", timeout_s=5, memory_mb=128)
    assert code != 0 and "MemoryError" in err
    code, _, _ = module.run_program("while True:\n    pass\n", timeout_s=0.5, memory_mb=128)
    assert code is None


def test_the_example_runs_with_one_failure_of_each_kind(checks) -> None:  # type: ignore[no-untyped-def]
    project, _ = checks
    result = oloproof.run(project)
    m = result.metrics["tests_pass"]
    assert (m.passed, m.observed, m.missing) == (9, 12, 0)
    reasons = {c.id: c.judgments["tests_pass"].reason for c in result.cases()
               if not c.judgments["tests_pass"].passed}
    assert reasons == {
        "code_04_count_vowels": "exit code 1: AssertionError",
        "code_06_fib": "timed out after 2s",
        "code_11_gcd": "exited 0 before the tests finished (sys.exit?)",
    }
