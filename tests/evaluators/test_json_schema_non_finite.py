"""json_schema: a schema holding YAML's .nan or .inf (or 1.0e999, which overflows to .inf)
is refused at load, at its line: JSON has no such numbers, and jsonschema compares with
them, so {type: number, maximum: .nan} (or .inf) validated every number: an output of 5000
passed a bound meant to refuse it, and the gate allowed (exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import labelled_cases, run_cli, write_project

APP = """
from oloproof import system

@system(name="s", version="1")
def answer(case_input):
    return {"v": 5000}
"""

RELEASE = """
version: 1
rules:
  - id: bounded
    metric: bounded
    min: 0.9
"""


@pytest.mark.parametrize(("schema", "shown"), [
    ("{type: number, maximum: .nan}", "evaluators[0].schema.maximum: .nan is not a JSON number"),
    ("{maximum: .NaN}", "evaluators[0].schema.maximum: .nan is not a JSON number"),
    ("{type: number, maximum: 1.0e999}", "evaluators[0].schema.maximum: .inf is not a JSON number"),
    ("{type: object, properties: {v: {exclusiveMinimum: -.inf}}}",
     "evaluators[0].schema.properties.v.exclusiveMinimum: -.inf is not a JSON number"),
    ("{enum: [1, .nan]}", "evaluators[0].schema.enum[1]: .nan is not a JSON number"),
])
def test_a_schema_with_nan_or_infinity_is_refused(
    tmp_path: Path, schema: str, shown: str
) -> None:
    evaluators = f"""
      - type: json_schema
        criterion: bounded
        field: {"v" if "properties" not in schema else "null"}
        schema: {schema}
    """
    project = write_project(tmp_path / "p", app=APP, cases=labelled_cases(40),
                            evaluators=evaluators, release=RELEASE)
    result = run_cli("run", cwd=project)
    assert result.code == 2, result.out + result.err
    assert "oloproof.yaml:" in result.err and shown in result.err, result.err
    assert "Traceback" not in result.err
    assert not (project / ".oloproof").exists() or "Gate" not in result.out
