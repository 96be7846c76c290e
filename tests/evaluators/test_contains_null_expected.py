"""contains: an expected null (what a blank cell becomes in many exports: pandas writes NaN
as null) asks for no text, as "" does: it was looked for as the text 'null', which any
output holding a null field contains, so a suite whose keywords were all lost passed 40
of 40 answers that said nothing (gate ALLOW, exit 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import run_cli, write_project

from oloproof.evaluators.base import CaseView
from oloproof.evaluators.deterministic import Contains
from oloproof.project.config import ContainsEvaluator

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"answer": "I cannot help", "source": None}
"""

EVALUATORS = """
  - type: contains
    criterion: has
    field: null
    expected_field: kw
"""

RELEASE = """
version: 1
rules:
  - id: floor
    metric: has
    min: 0.8
"""


def _cases(kw: Any, real: int = 0) -> list[dict[str, Any]]:
    return [{"id": f"q{i:03d}", "input": {"n": i},
             "expected": {"kw": "refund" if i < real else kw}} for i in range(40)]


def test_a_suite_whose_keywords_are_all_null_is_refused(tmp_path: Path) -> None:
    for name, kw in (("null", None), ("list", [None])):
        project = write_project(tmp_path / name, app=APP, cases=_cases(kw),
                                evaluators=EVALUATORS, release=RELEASE)
        result = run_cli("run", cwd=project)
        assert result.code == 2, result.out + result.err
        assert "holds an empty value" in result.err and "null" in result.err


def test_null_keywords_exclude_their_cases(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", app=APP, cases=_cases(None, real=10),
                            evaluators=EVALUATORS, release=RELEASE)
    result = run_cli("run", cwd=project, env={"COLUMNS": "200"})
    assert result.code == 1, result.out  # the 10 real keywords are missed: FAIL
    assert "0 / 10 observed · 0 missing · 30 excluded" in result.out


def test_a_null_among_texts_is_not_the_text_null() -> None:
    contains = Contains(ContainsEvaluator(criterion="c", field=None, expected_field="k"))
    view = CaseView("q", {}, {"k": [None, "refund"]}, None)
    assert contains.evaluate(view, {"a": None}).passed is False
    assert contains.evaluate(view, {"a": "refund"}).passed is True
    assert contains.evaluate(CaseView("q", {}, {"k": None}, None), {"a": None}).status == "EXCLUDED"
