"""The deterministic evaluators, on real config models."""

from __future__ import annotations

from typing import Any

import pytest

from oloproof.evaluators.base import CaseView
from oloproof.evaluators.deterministic import AbsoluteError, Contains, ExactMatch, JsonSchema, Regex
from oloproof.project.config import (
    AbsoluteErrorEvaluator,
    ContainsEvaluator,
    ExactMatchEvaluator,
    JsonSchemaEvaluator,
    RegexEvaluator,
)


def case(expected: dict[str, Any] | None) -> CaseView:
    return CaseView("c1", {"q": "?"}, expected, None)


def test_exact_match_strips_and_folds() -> None:
    ev = ExactMatch(ExactMatchEvaluator(type="exact_match", criterion="l", field="label", casefold=True))
    assert ev.evaluate(case({"label": "Refund"}), {"label": " refund\n"}).passed is True
    out = ev.evaluate(case({"label": "refund"}), {"label": "billing"})
    assert (out.status, out.passed) == ("OK", False)
    assert out.reason == "expected 'refund', got 'billing'"


def test_exact_match_excludes_without_expected_and_fails_without_field() -> None:
    ev = ExactMatch(ExactMatchEvaluator(type="exact_match", criterion="l", field="label"))
    assert ev.evaluate(case(None), {"label": "x"}).status == "EXCLUDED"
    assert ev.evaluate(case({"other": 1}), {"label": "x"}).status == "EXCLUDED"
    absent = ev.evaluate(case({"label": "x"}), {"answer": "x"})
    assert (absent.status, absent.passed) == ("OK", False)
    assert "no field 'label'" in (absent.reason or "")


def test_exact_match_expected_field_and_dotted_paths() -> None:
    ev = ExactMatch(ExactMatchEvaluator(
        type="exact_match", criterion="l", field="result.items.0", expected_field="first"
    ))
    assert ev.evaluate(case({"first": "a"}), {"result": {"items": ["a", "b"]}}).passed is True
    assert ev.evaluate(case({"first": "b"}), {"result": {"items": ["a", "b"]}}).passed is False


def test_contains_text_and_lists() -> None:
    ev = Contains(ContainsEvaluator(type="contains", criterion="c", field="answer", casefold=True))
    assert ev.evaluate(case({"answer": "30 DAYS"}), {"answer": "within 30 days"}).passed is True
    assert ev.evaluate(case({"answer": ["30", "refund"]}), {"answer": "30 days"}).passed is False
    assert ev.evaluate(case({"answer": ["30", "days"]}), {"answer": "30 days"}).passed is True


@pytest.mark.parametrize(
    "pass_if, text, passed",
    [("no_match", "call 555-12-3456", False), ("no_match", "no number", True),
     ("match", "order #123", True), ("match", "no order", False)],
)
def test_regex(pass_if: str, text: str, passed: bool) -> None:
    pattern = r"\b\d{3}-\d{2}-\d{4}\b" if pass_if == "no_match" else r"#\d+"
    ev = Regex(RegexEvaluator(type="regex", criterion="r", field="a", pattern=pattern, pass_if=pass_if))
    assert ev.evaluate(case(None), {"a": text}).passed is passed


def test_json_schema_reports_where() -> None:
    ev = JsonSchema(JsonSchemaEvaluator.validate(
        {"type": "json_schema", "criterion": "f", "schema": {"type": "object", "required": ["label"],
                                                             "properties": {"n": {"type": "integer"}}}}
    ))
    assert ev.evaluate(case(None), {"label": "x", "n": 2}).passed is True
    bad = ev.evaluate(case(None), {"label": "x", "n": "two"})
    assert bad.passed is False and (bad.reason or "").startswith("n:")
    assert "label" in (ev.evaluate(case(None), {}).reason or "")


def test_absolute_error_scores_excludes_and_misses() -> None:
    ev = AbsoluteError(AbsoluteErrorEvaluator(
        type="absolute_error", criterion="d", field="days", range=(0, 30)
    ))
    assert ev.metric_kind == "MEAN" and ev.value_range == (0.0, 30.0)
    assert ev.evaluate(case({"days": 10}), {"days": 7.5}).score == 2.5
    assert ev.evaluate(case({}), {"days": 7}).status == "EXCLUDED"
    assert ev.evaluate(case({"days": 3}), {"other": 7}).status == "ERROR"
    assert ev.evaluate(case({"days": 3}), {"days": "soon"}).status == "ERROR"
    assert ev.evaluate(case({"days": 3}), {"days": True}).status == "ERROR"
