"""json_schema checks format: jsonschema reads it as a note unless given a format checker,
so {type: string, format: email} let 'not an email at all' through on 40 of 40 cases (gate
ALLOW), and {format: date-time} alone, which passed the 'checks nothing' refusal, validated
every output. A format this installation has no checker for is refused at load."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

from oloproof.evaluators.base import CaseView
from oloproof.evaluators.deterministic import JsonSchema
from oloproof.project.config import JsonSchemaEvaluator

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"v": "not an email at all"}
"""

RELEASE = """
version: 1
rules:
  - id: valid
    metric: valid
    min: 0.9
"""


def _project(root: Path, schema: str) -> Path:
    evaluators = f"""
      - type: json_schema
        criterion: valid
        field: v
        schema: {schema}
    """
    return write_project(root, app=APP, cases=labelled_cases(40), evaluators=evaluators,
                         release=RELEASE)


@pytest.mark.parametrize("schema", [
    "{type: string, format: email}",
    "{type: string, format: ipv4}",
    "{type: string, pattern: '[a-z]', format: email}",  # checked in the guarded child
])
def test_a_format_is_checked(tmp_path: Path, schema: str) -> None:
    result = run_cli("run", cwd=_project(tmp_path / "p", schema), env={"COLUMNS": "200"})
    assert result.code == 1, result.out
    assert "0 / 40 observed" in result.out


def test_a_format_that_cannot_be_checked_is_refused(tmp_path: Path) -> None:
    import jsonschema

    if "date-time" in jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers:
        pytest.skip("this installation checks date-time")
    result = run_cli("run", cwd=_project(tmp_path / "p", "{format: date-time}"))
    assert result.code == 2, result.out + result.err
    assert "evaluators[0].schema.format: format 'date-time' cannot be checked here" in result.err
    assert "(accepted: date, email," in result.err


def test_a_property_named_format_is_no_format() -> None:
    config = JsonSchemaEvaluator(criterion="j", field=None, schema_={
        "type": "object", "properties": {"format": {"type": "string"}},
        "enum": [{"format": "anything"}]})
    assert JsonSchema(config).evaluate(CaseView("q", {}, None, None),
                                       {"format": "anything"}).passed is True


def test_formats_are_found_only_where_they_are_keywords() -> None:
    from oloproof.project.models import _formats

    schema = {"properties": {"format": {"type": "string", "format": "email"}},
              "enum": [{"format": "x"}], "items": [{"format": "uuid"}]}
    assert list(_formats(schema)) == [(("properties", "format", "format"), "email"),
                                      (("items", 0, "format"), "uuid")]
