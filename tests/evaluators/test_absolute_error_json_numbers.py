"""absolute_error scores JSON numbers only, as docs/configuration.md says (a value that is
not a number makes the case missing) and as exact_match compares: float() read a text
output '3', ' 3 ', '1_000' or '٣' (Arabic-Indic three) as a number and scored it; and two
integers are subtracted exactly (as floats, 9007199254740993 and 9007199254740992 were 0
apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import run_cli, write_project

from oloproof.evaluators.base import CaseView
from oloproof.evaluators.deterministic import AbsoluteError
from oloproof.project.config import AbsoluteErrorEvaluator

EVALUATOR = AbsoluteError(AbsoluteErrorEvaluator(criterion="d", field="v"))


def _judge(actual: Any, expected: Any) -> Any:
    return EVALUATOR.evaluate(CaseView("q", {}, {"v": expected}, None), {"v": actual})


@pytest.mark.parametrize(("actual", "expected"), [
    ("3", 3), (" 3 ", 3), ("1_000", 1000), ("\u0663", 3), (3, "3"), ("nan", 1), (None, 1),
    ([3], 3), ({"x": 3}, 3),
])
def test_a_value_that_is_not_a_json_number_is_missing(actual: Any, expected: Any) -> None:
    outcome = _judge(actual, expected)
    assert outcome.status == "ERROR" and outcome.reason.startswith("not a number")


@pytest.mark.parametrize(("actual", "expected", "error"), [
    (9007199254740993, 9007199254740992, 1.0), (3, 3.0, 0.0), (-0.0, 0, 0.0), (2.5, 1, 1.5),
])
def test_numbers_are_scored_and_integers_exactly(actual: Any, expected: Any, error: float) -> None:
    outcome = _judge(actual, expected)
    assert outcome.status == "OK" and outcome.score == error


def test_a_huge_difference_is_missing() -> None:
    outcome = _judge(10**400, 0)
    assert outcome.status == "ERROR" and "beyond the largest float" in outcome.reason


def test_text_answers_make_the_run_incomplete_not_scored(tmp_path: Path) -> None:
    app = """
    from oloproof import system

    @system(name="s", version="1")
    def answer(case_input):
        return {"v": " 3 "}
    """
    evaluators = """
      - type: absolute_error
        criterion: err
        field: v
        range: [0, 10]
    """
    release = """
    version: 1
    rules:
      - id: close
        metric: err
        max: 5
    """
    cases = [{"id": f"q{i:03d}", "input": {"n": i}, "expected": {"v": 3}} for i in range(40)]
    project = write_project(tmp_path / "p", app=app, cases=cases, evaluators=evaluators,
                            release=release)
    result = run_cli("run", cwd=project)
    assert result.code == 5, result.out
    assert "not a number: output ' 3 ', expected 3" in result.out
