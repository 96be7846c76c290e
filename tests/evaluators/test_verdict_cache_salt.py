"""Built-in evaluators whose verdicts changed on some cases keep their identity (what
compare and merge match runs on) and cache their verdicts under a new key, so that a
verdict cached by the earlier rule is judged again, not reused (tests/trust/
test_allow_earned_data.py has the cases themselves)."""

from __future__ import annotations

from typing import Any

import pytest

from oloproof.engine.pipeline import _key_identity
from oloproof.evaluators.base import CaseView
from oloproof.evaluators.deterministic import (
    AbsoluteError,
    Contains,
    ExactMatch,
    JsonSchema,
    Regex,
    _config_identity,
    same_json,
)
from oloproof.project.config import (
    AbsoluteErrorEvaluator,
    ContainsEvaluator,
    ExactMatchEvaluator,
    JsonSchemaEvaluator,
    RegexEvaluator,
)


@pytest.mark.parametrize("evaluator", [
    Contains(ContainsEvaluator(criterion="c", field="a")),
    ExactMatch(ExactMatchEvaluator(criterion="e", field="a")),
    AbsoluteError(AbsoluteErrorEvaluator(criterion="d", field="a")),
])
def test_changed_evaluators_cache_under_a_new_key(evaluator: Any) -> None:
    assert evaluator.identity == _config_identity(evaluator.config)  # compare unchanged
    assert _key_identity(evaluator) != evaluator.identity


def test_json_schema_caches_under_a_new_key() -> None:
    """format is checked (it was read as a note)."""
    schema = JsonSchema(JsonSchemaEvaluator(criterion="j", field="a", schema_={"type": "object"}))
    assert schema.identity == _config_identity(schema.config)
    assert _key_identity(schema) != schema.identity


def test_regex_caches_under_a_new_key() -> None:
    """Under no_match, each text of a value that is not text is searched too."""
    regex = Regex(RegexEvaluator(criterion="r", field="a", pattern="x"))
    assert regex.identity == _config_identity(regex.config)
    assert _key_identity(regex) != regex.identity


@pytest.mark.parametrize(("a", "b", "same"), [
    (0, False, False), (1, True, False), (True, True, True), (False, False, True),
    (1, 1.0, True), ([0, 1], [False, True], False), ({"x": [1]}, {"x": [True]}, False),
    ({"x": [1.0, "a"]}, {"x": [1, "a"]}, True), ({"x": 1}, {"y": 1}, False), (None, None, True),
])
def test_same_json(a: Any, b: Any, same: bool) -> None:
    assert same_json(a, b) is same
    assert same_json(b, a) is same


def test_contains_excludes_an_empty_expected() -> None:
    contains = Contains(ContainsEvaluator(criterion="c", field="a", expected_field="k"))
    for empty in ("", [], ["", ""]):
        view = CaseView("q", {}, {"k": empty}, None)
        assert contains.evaluate(view, {"a": "anything"}).status == "EXCLUDED"
    view = CaseView("q", {}, {"k": ["", "refund"]}, None)
    assert contains.evaluate(view, {"a": "anything"}).passed is False


@pytest.mark.parametrize(("provider", "salted"), [
    ("openai_compatible", True), ("openai", False), ("anthropic", False),
])
def test_judges_that_may_send_thinking_cache_under_a_new_key(
    provider: str, salted: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A draft verdict in the thinking an openai_compatible server writes into the text was
    read as the verdict: such judges' cached verdicts are judged again; the identity stays."""
    from oloproof.evaluators.judge import RubricJudge
    from oloproof.project.config import RubricJudgeEvaluator

    monkeypatch.setenv("JUDGE_KEY", "k")
    config = {"type": "rubric_judge", "criterion": "helpful", "model": "m",
              "rubric_text": "Pass when the answer helps.", "api_key_env": "JUDGE_KEY",
              "provider": provider}
    if provider == "openai_compatible":
        config["base_url"] = "http://127.0.0.1:9/v1"
    judge = RubricJudge(RubricJudgeEvaluator.validate(config), None, field="evaluators[0]")
    assert (_key_identity(judge) != judge.identity) is salted
