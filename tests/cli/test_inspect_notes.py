"""`oloproof inspect RUN` says what `oloproof gate RUN` says beside the same verdict.

It printed `Gate ALLOW exit code 0` of a run whose app.py had since been edited to answer
every case wrongly, where `gate latest` adds ``code the run called has changed since it
started …``; and `Gate BLOCK exit code 5` of a run over ``max_missing`` without the
"Incomplete evidence" line that says why."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
def answer(inp):
    if inp["n"] % 10 == 0 and inp["n"] < {failing}:
        raise RuntimeError("upstream down")
    return {{"label": "ok"}}
"""

FLOOR = "version: 1\nmax_missing: 0.05\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n"


def _notes(root: Path, command: str) -> list[str]:
    result = run_cli(command, "latest", "--json", cwd=root)
    assert "Traceback" not in result.text
    notes: list[str] = json.loads(result.out)["gate_notes"]
    return notes


def test_inspect_names_code_edited_since_the_run(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP.format(failing=0), cases=labelled_cases(40),
                         release=FLOOR)
    assert run_cli("run", cwd=root).code == 0
    assert _notes(root, "inspect") == []
    app = root / "app.py"
    app.write_text("def answer(inp):\n    return {'label': 'no'}\n")
    later = time.time() + 5
    os.utime(app, (later, later))
    shown = run_cli("inspect", "latest", cwd=root)
    assert shown.code == 0, shown.text
    assert "Gate      ALLOW   exit code 0" in shown.out
    assert "The code the run called has changed since it started" in shown.out
    notes = _notes(root, "gate")
    assert len(notes) == 1 and "app.py" in notes[0]
    assert _notes(root, "inspect") == notes


def test_inspect_says_why_a_run_over_max_missing_blocks(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", app=APP.format(failing=40), cases=labelled_cases(40),
                         release=FLOOR)
    assert run_cli("run", cwd=root).code == 5  # 4 of 40 missing, over 5%
    shown = run_cli("inspect", "latest", cwd=root)
    assert "Gate      BLOCK   exit code 5" in shown.out
    assert "Incomplete evidence: floor (10% missing)" in shown.out
    assert _notes(root, "inspect") == _notes(root, "gate")
