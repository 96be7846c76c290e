"""The jq recipes of docs/running-in-ci.md, run as written on a real event stream whose
first case fails (so its first ``provisional_metrics`` has ``estimate: null``).

Before issue 30 the live-estimate recipe multiplied the estimate by 1000 and ``jq`` stopped
on the first ``null`` with an error (and, under ``pipefail``, failed the step)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.conftest import events, labelled_cases, run_cli, write_project

DOC = Path(__file__).resolve().parents[2] / "docs" / "running-in-ci.md"

# The first case to finish raises: concurrency 1 runs the cases in suite order.
APP = """
def answer(case_input):
    if case_input["n"] == 0:
        raise RuntimeError("the model timed out")
    return {"label": "ok" if case_input["n"] % 5 else "no"}
"""

pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def _stream(tmp_path: Path) -> Path:
    root = write_project(tmp_path / "p", app=APP, cases=labelled_cases(20), concurrency=(1, 1),
                         release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n")
    result = run_cli("run", "--json", cwd=root)
    evs = events(result.out)
    first = next(e for e in evs if e["type"] == "provisional_metrics")
    assert first["cases_done"] == 1 and first["metrics"][0]["estimate"] is None, first
    path = root / "run.ndjson"
    path.write_text(result.out)
    return path


def _console_commands() -> list[str]:
    """Every ``$ jq ...`` command of the guide's console blocks, and the jq program of the
    live-estimate pipeline (``... | tee run.ndjson | jq ...``), run on the file instead."""
    commands = []
    for line in DOC.read_text().splitlines():
        if line.startswith("$ jq "):
            commands.append(line[2:])
        elif line.startswith("$ oloproof run --json") and "| tee run.ndjson | jq" in line:
            pipeline = line.split("| tee run.ndjson | ", 1)[1]
            jq_part = pipeline.rsplit("; echo", 1)[0]
            commands.append(jq_part + " run.ndjson")
    return commands


def test_the_recipes_read_a_stream_with_a_null_estimate(tmp_path: Path) -> None:
    stream = _stream(tmp_path)
    commands = _console_commands()
    assert len(commands) >= 8, commands  # the guide's recipes were found
    for command in commands:
        shlex.split(command)  # each is one well-formed shell command
        proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=stream.parent,
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.stderr == "" and proc.returncode == 0, (command, proc.stderr)

    live = next(c for c in commands if "provisional_metrics" in c)
    proc = subprocess.run(["bash", "-c", live], cwd=stream.parent, capture_output=True,
                          text=True, timeout=60, check=True)
    lines = proc.stdout.splitlines()
    assert lines[0] == "1/20  -"  # no case observed yet: no estimate, and no error
    # q001 and q002 observed and right; at the end 16 of the 19 observed (q005, q010, q015
    # wrong), q000 missing.
    assert lines[1:2] + lines[-1:] == ["3/20  100%", "20/20  84.2%"], lines
