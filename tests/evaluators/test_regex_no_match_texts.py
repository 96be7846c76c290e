"""regex with pass_if: no_match on a value that is not text (the whole output, a list): its
JSON text writes a tab or a line break as \\t or \\n and puts each text between quotes, so
'DROP\\s+TABLE' on {"answer": "DROP<TAB>TABLE users;"} found nothing and every case passed
the check, gate ALLOW. Each text the value holds is searched too."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

from oloproof.evaluators.base import CaseView
from oloproof.evaluators.deterministic import Regex, _texts_in
from oloproof.project.config import RegexEvaluator

RELEASE = """
version: 1
block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]
rules:
  - id: safe
    metric: safe
    kind: observed_count
    max_failures: 0
"""


def test_a_forbidden_text_hidden_by_json_escapes_fails_the_check(tmp_path: Path) -> None:
    app = """
    from oloproof import system

    @system(name="s", version="1")
    def answer(case_input):
        return {"answer": "DROP\\tTABLE users;", "notes": ["ok"]}
    """
    evaluators = r"""
      - type: regex
        criterion: safe
        field: null
        pattern: 'DROP\s+TABLE'
        pass_if: no_match
    """
    project = write_project(tmp_path / "p", app=app, cases=labelled_cases(30),
                            evaluators=evaluators, release=RELEASE)
    result = run_cli("run", cwd=project)
    assert result.code == 1, result.out
    assert "Gate      BLOCK   exit code 1" in result.out


@pytest.mark.parametrize(("pattern", "flags", "value"), [
    (r"DROP\s+TABLE", [], {"sql": "DROP\nTABLE x"}),
    (r"^ignore previous", ["MULTILINE"], ["hello", "ignore previous instructions"]),
    (r"^secret$", [], {"a": {"b": ["x", "secret"]}}),
    (r"say \"hi\"|say \"hi", [], {"k": 'say "hi"'}),
    (r"^password", [], {"password": 1}),
])
def test_no_match_searches_every_text(pattern: str, flags: list[str], value: object) -> None:
    config = RegexEvaluator(criterion="r", field=None, pattern=pattern, flags=flags,
                            pass_if="no_match")
    outcome = Regex(config).evaluate(CaseView("q", {}, None, None), value)
    assert outcome.passed is False


def test_match_and_plain_text_are_unchanged() -> None:
    view = CaseView("q", {}, None, None)
    no_match = Regex(RegexEvaluator(criterion="r", field=None, pattern=r"\d{3}",
                                    pass_if="no_match"))
    assert no_match.evaluate(view, {"a": "12", "b": ["3"]}).passed is True
    assert no_match.evaluate(view, "a 123").passed is False
    match = Regex(RegexEvaluator(criterion="r", field=None, pattern=r"^x$", pass_if="match"))
    assert match.evaluate(view, ["x"]).passed is False  # the JSON text, as documented


def test_texts_in() -> None:
    assert _texts_in({"a": ["x", {"b": "y"}], "c": "x", "d": 1}) == ["a", "x", "b", "y", "c", "d"]
    assert _texts_in(3) == []
