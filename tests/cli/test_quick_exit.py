"""The read-only commands end without the interpreter's teardown (cli/main.py, _quick_exit):
their output, exit code and the process's atexit handlers are as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

# A sitecustomize that registers an atexit handler, as coverage tools do: the handler must
# still run, and what it writes must reach its file.
SITECUSTOMIZE = """
import atexit, os, sys

def _mark():
    with open(os.environ["EXIT_MARK"], "a") as fh:
        fh.write(" ".join(sys.argv[1:3]) + "\\n")

atexit.register(_mark)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    write_project(
        root, app="def answer(case_input):\n    return {'label': 'ok'}\n",
        cases=labelled_cases(30),
        release="version: 1\nrules:\n  - id: floor\n    metric: exact_label\n    min: 0.5\n",
    )
    assert run_cli("run", cwd=root).code in (0, 3)
    return root


def test_read_only_commands_keep_their_output_exit_code_and_atexit_handlers(
    project: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    mark = tmp_path / "exit-marks.txt"
    env = {"PYTHONPATH": str(site), "EXIT_MARK": str(mark)}
    gate = run_cli("gate", "latest", "--json", cwd=project, env=env)
    assert gate.code == 0, gate.err
    assert json.loads(gate.out)["gate"] == "ALLOW"  # the whole document came out
    runs = run_cli("runs", "--json", cwd=project, env=env)
    assert runs.code == 0 and len(json.loads(runs.out)) == 1
    assert run_cli("inspect", "nope", cwd=project, env=env).code == 2  # an error's code too
    assert run_cli("gate", "latest", "--policy", "missing.yaml", cwd=project, env=env).code == 2
    # Each of the four processes ran its atexit handler, and its write reached the file.
    assert mark.read_text().splitlines() == [
        "gate latest", "runs --json", "inspect nope", "gate latest"
    ]
