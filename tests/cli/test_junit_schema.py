"""--junit-xml against the JUnit schema that pytest validates its own reports against.

tests/fixtures/junit-10.xsd is the Jenkins xUnit plugin's JUnit 10 schema (MIT licence,
Copyright (c) 2014 Gregory Boissinot; the notice is in the file), as vendored in pytest's
testing/example_scripts. Strict readers (Jenkins' xUnit plugin) refuse a whole report that
does not validate; before issue 30 every report did, for a ``skipped`` attribute on
``<testsuites>``. The CLI's own reports are validated in test_ci_reports.py too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import xmlschema

from oloproof.enums import GateAction, RuleState
from oloproof.policy.decide import Decision
from oloproof.render.ci import CiRun, UndecidedAs, junit_xml

XSD = Path(__file__).resolve().parents[1] / "fixtures" / "junit-10.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def assert_valid_junit(schema: xmlschema.XMLSchema, text: str) -> None:
    errors = [str(e.reason) for e in schema.iter_errors(text)]
    assert not errors, errors


def _decision(rule: str, state: RuleState, action: GateAction) -> Decision:
    return Decision(rule=rule, metric="exact_label", kind="interval_threshold", state=state,
                    reason="r", detail=f"95% CP [58.8%, 87.4%] {rule} <&> \x1b[31m",
                    action=action)


def _run(completeness: str, duration: float | None, notes: tuple[str, ...] = ()) -> CiRun:
    decisions = [
        _decision("passes", RuleState.PASS, GateAction.ALLOW),
        _decision("fails", RuleState.FAIL, GateAction.BLOCK),
        _decision("undecided-warns", RuleState.INSUFFICIENT_EVIDENCE, GateAction.WARN),
        _decision("undecided-blocks", RuleState.MANUAL_REVIEW, GateAction.BLOCK),
    ]
    status = "DECIDED" if completeness in ("COMPLETE", "SUBSET") else "RUN_ERROR"
    return CiRun(run_id="run_X", project="ticket <triage>", status=status,
                 completeness=completeness, gate="BLOCK", exit_code=1, decisions=decisions,
                 summaries=[], rule_ids=[d.rule for d in decisions],
                 stop_reason="terminated (SIGTERM)", duration_s=duration, notes=list(notes))


@pytest.mark.parametrize("undecided", ["auto", "skipped", "failure"])
@pytest.mark.parametrize("completeness", ["COMPLETE", "SUBSET", "PARTIAL"])
@pytest.mark.parametrize("duration", [None, 1234.5678])
@pytest.mark.parametrize("notes", [(), ("Incomplete evidence: <&> ]]> \x1b[31m", "app.py\n")])
def test_every_report_validates(
    schema: xmlschema.XMLSchema, completeness: str, undecided: UndecidedAs,
    duration: float | None, notes: tuple[str, ...],
) -> None:
    text = junit_xml(_run(completeness, duration, notes), undecided=undecided)
    assert_valid_junit(schema, text)


def test_the_totals_stay_on_the_suite_and_skipped_only_there(
    schema: xmlschema.XMLSchema,
) -> None:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(junit_xml(_run("COMPLETE", 0.5), undecided="skipped"))
    [suite] = root
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "4", "failures": "1", "errors": "0", "skipped": "2"}
    assert root.get("skipped") is None
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "time")} == {
        "tests": "4", "failures": "1", "errors": "0", "time": "0.500"}


def test_the_schema_refuses_what_it_should(schema: xmlschema.XMLSchema) -> None:
    """The check can fail: the report as written before issue 30 does not validate."""
    text = junit_xml(_run("COMPLETE", 0.5))
    before = text.replace('<testsuites name="oloproof"', '<testsuites name="oloproof" skipped="1"')
    assert before != text
    assert not schema.is_valid(before)
