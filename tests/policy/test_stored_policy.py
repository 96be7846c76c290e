"""One copy of "load the policy stored with a run": a damaged one is one line and exit 5
from gate, inspect and plan alike (the evidence cannot be read)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "ok" if case_input["n"] % 4 else "no"}
"""


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    project = write_project(
        tmp_path / "p", app=APP, cases=labelled_cases(12),
        release="version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.9}\n",
    )
    assert run_cli("run", cwd=project).code in (1, 3)
    conn = sqlite3.connect(project / ".oloproof" / "store.sqlite")
    with conn:
        conn.execute("""UPDATE runs SET policy_json = '{"version": 7, "rules": 3}'""")
    conn.close()
    return project


@pytest.mark.parametrize(
    "args", [("gate", "latest"), ("inspect", "latest"), ("plan", "latest", "--run")]
)
def test_a_damaged_stored_policy_exits_5_in_one_line(damaged: Path, args: tuple[str, ...]) -> None:
    result = run_cli(*args, cwd=damaged)
    assert result.code == 5, result.text
    assert "the policy stored with run_" in result.err and "cannot be read" in result.err
    assert "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_a_policy_passed_with_the_command_still_decides(damaged: Path) -> None:
    (damaged / "other.yaml").write_text(
        "version: 1\nrules:\n  - {id: floor, metric: exact_label, min: 0.5}\n"
    )
    result = run_cli("gate", "latest", "--policy", "other.yaml", cwd=damaged)
    assert result.code in (0, 3), result.text
