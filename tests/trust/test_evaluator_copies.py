"""A custom evaluator gets its own copy of the case and the output.

Custom evaluators are user code, and run one after another (or side by side) on the same
case. One that normalises in place (``output["label"] = output["label"].lower()``) used to
change what the next one saw: here the second check passed on every case, although the
system's label never equals the expected one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.trust._support import cli, project

CHECKS = """
def lower(output, case):
    output["label"] = output["label"].lower()  # normalising in place, carelessly
    case.expected["label"] = output["label"]
    return True


def same(output, case):
    return output["label"] == case.expected["label"]
"""
EVALUATORS = (
    "  - type: custom\n    criterion: lowered\n    function: checks:lower\n"
    "  - type: custom\n    criterion: same_label\n    function: checks:same\n"
)
RELEASE = "version: 1\nrules:\n  - id: same\n    metric: same_label\n    min: 0.5\n"


def test_what_one_custom_evaluator_changes_reaches_no_other(tmp_path: Path) -> None:
    cases = [{"id": f"q{i}", "input": {"n": i}, "expected": {"label": "ok"}} for i in range(30)]
    root = project(
        tmp_path / "p", "def answer(inp):\n    return {'label': 'OK'}\n", cases=cases,
        evaluators=EVALUATORS, release=RELEASE, files={"checks.py": CHECKS},
        extra="  evaluator: 1\n",  # one at a time, in the order declared
    )
    result = cli(root, "run", "--json")
    assert result.code == 1, result.text  # "OK" is not "ok": the rule FAILs
    finished = json.loads(result.out.splitlines()[-1])
    assert finished["type"] == "run_finished"
    [decision] = finished["decisions"]
    assert (decision["state"], decision["estimate"]) == ("FAIL", 0.0), decision
