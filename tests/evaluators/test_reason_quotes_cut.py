"""A built-in evaluator's reason quotes at most the first 200 characters of a value, with
its length: exact_match quoted the whole output ('expected 3, got ' + a 5 MB answer), so
each failed case stored its output three times (the output, the run's verdict, the cache:
an 800 MB store for 200 MB of answers) and inspect --failures printed 250 MB."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"label": "x" * 1_000_000, "n": "y" * 1_000_000}
"""

EVALUATORS = r"""
  - type: exact_match
    criterion: exact_label
    field: label
  - type: contains
    criterion: has
    field: label
    expected_field: label
  - type: regex
    criterion: clean
    field: n
    pattern: 'y+'
    pass_if: no_match
  - type: json_schema
    criterion: short
    field: label
    schema: {type: integer}
  - type: absolute_error
    criterion: err
    field: label
    expected_field: label
"""


def test_reasons_quote_a_long_value_cut(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", app=APP, cases=labelled_cases(4),
                            evaluators=EVALUATORS)
    result = run_cli("run", cwd=project)
    assert result.code in (0, 5), result.out + result.err
    with sqlite3.connect(project / ".oloproof" / "store.sqlite") as db:
        rows = db.execute("SELECT criterion, reason FROM run_judgments").fetchall()
        cached = db.execute("SELECT max(length(reason)) FROM judge_cache").fetchone()[0]
    assert {criterion for criterion, _ in rows} == {"exact_label", "has", "clean", "short", "err"}
    for criterion, reason in rows:
        assert reason is not None and len(reason) < 1000, (criterion, len(reason or ""))
        if criterion != "has":  # contains quotes the expected text, 'ok'
            assert "characters)" in reason, (criterion, reason[:300])
    assert cached < 1000
    shown = run_cli("inspect", "latest", "--failures", cwd=project)
    assert shown.code == 0 and len(shown.out) < 50_000
