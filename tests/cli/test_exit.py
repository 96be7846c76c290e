"""The read-only commands end as every Python program does (issue 31: no quick exit through
``os._exit``): their output, exit code, the process's ``atexit`` handlers and what the
interpreter's teardown flushes all come out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

# A sitecustomize that registers an atexit handler, as coverage tools do: the handler must
# still run, and what it writes must reach its file. It also imports a module that leaves a
# buffered file open, as a user's logging set-up may: the interpreter's teardown flushes it
# when it clears that module (an os._exit would lose it).
SITECUSTOMIZE = """
import atexit, os, sys
import left_open

def _mark():
    with open(os.environ["EXIT_MARK"], "a") as fh:
        fh.write(" ".join(sys.argv[1:3]) + "\\n")

atexit.register(_mark)
"""
LEFT_OPEN = """
import os
log = open(os.environ["EXIT_MARK"] + ".log", "a", buffering=1 << 16)
log.write("pid %d\\n" % os.getpid())
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


def test_read_only_commands_keep_their_output_exit_code_atexit_handlers_and_teardown(
    project: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (site / "left_open.py").write_text(LEFT_OPEN)
    mark = tmp_path / "exit-marks.txt"
    env = {"PYTHONPATH": str(site), "EXIT_MARK": str(mark)}
    gate = run_cli("gate", "latest", "--json", cwd=project, env=env)
    assert gate.code == 0, gate.err
    assert json.loads(gate.out)["gate"] == "ALLOW"  # the whole document came out
    runs = run_cli("runs", "--json", cwd=project, env=env)
    assert runs.code == 0 and len(json.loads(runs.out)) == 1
    assert run_cli("inspect", "nope", cwd=project, env=env).code == 2  # an error's code too
    assert run_cli("gate", "latest", "--policy", "missing.yaml", cwd=project, env=env).code == 2
    assert run_cli("plan", "latest", "--run", cwd=project, env=env).code == 0
    # Each of the five processes ran its atexit handler, and its write reached the file.
    expected = ["gate latest", "runs --json", "inspect nope", "gate latest", "plan latest"]
    assert mark.read_text().splitlines() == expected
    # And each one's teardown flushed the file left open.
    assert len(Path(f"{mark}.log").read_text().splitlines()) == len(expected)


# -- os._exit in the code under test (it ends Oloproof's own process) -------------------

_CUT_SHORT = ("oloproof: the code under test called os._exit(0) in Oloproof's own process:"
              " the run cannot finish, so the command ends with exit 5 (incomplete), never a"
              " pass")
_FORKS = """
import os

def answer(case_input):
    # A child forked from Oloproof's process (as multiprocessing's fork does) exits as asked.
    pid = os.fork()
    if pid == 0:
        os._exit(0 if case_input["n"] % 2 else 3)
    _, status = os.waitpid(pid, 0)
    return {"label": "ok" if os.waitstatus_to_exitcode(status) == (0 if case_input["n"] % 2 else 3) else "no"}
"""


@pytest.mark.parametrize("app", [
    "import os\nos._exit(0)\n\ndef answer(case_input):\n    return {'label': 'ok'}\n",
    ("import os\n\ndef answer(case_input):\n    if case_input['n'] == 3:\n        os._exit(0)\n"
     "    return {'label': 'ok'}\n"),
], ids=["at-import", "in-a-case"])
def test_os_exit_0_in_the_code_under_test_never_exits_0(tmp_path: Path, app: str) -> None:
    """`os._exit(0)` at import or in one case used to end `run` with exit 0 and no output,
    under `policy: none` (no rule could block): CI read it as a pass."""
    root = tmp_path / "p"
    write_project(root, app=app, cases=labelled_cases(6), concurrency=(1, 1))
    result = run_cli("run", cwd=root)
    assert result.code == 5, result.text
    assert result.err.strip().splitlines()[-1] == _CUT_SHORT, result.err
    assert "Gate      ALLOW" not in result.out


def test_a_child_forked_by_the_code_under_test_exits_as_it_asks(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_project(root, app=_FORKS, cases=labelled_cases(4), concurrency=(1, 1))
    result = run_cli("run", "--json", cwd=root)
    assert result.code == 0, result.text
    assert "os._exit" not in result.err
    final = json.loads(result.out.splitlines()[-1])
    assert (final["type"], final["exit_code"]) == ("run_finished", 0), final
    cases = json.loads(run_cli("inspect", "latest", "--json", cwd=root).out)["cases"]
    assert [c["output"] for c in cases] == [{"label": "ok"}] * 4
