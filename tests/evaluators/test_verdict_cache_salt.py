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
    Contains,
    Regex,
    _config_identity,
)
from oloproof.project.config import (
    ContainsEvaluator,
    RegexEvaluator,
)


@pytest.mark.parametrize("evaluator", [
    Contains(ContainsEvaluator(criterion="c", field="a")),
])
def test_changed_evaluators_cache_under_a_new_key(evaluator: Any) -> None:
    assert evaluator.identity == _config_identity(evaluator.config)  # compare unchanged
    assert _key_identity(evaluator) != evaluator.identity


def test_other_evaluators_keep_their_cache() -> None:
    regex = Regex(RegexEvaluator(criterion="r", field="a", pattern="x"))
    assert _key_identity(regex) == regex.identity


def test_contains_excludes_an_empty_expected() -> None:
    contains = Contains(ContainsEvaluator(criterion="c", field="a", expected_field="k"))
    for empty in ("", [], ["", ""]):
        view = CaseView("q", {}, {"k": empty}, None)
        assert contains.evaluate(view, {"a": "anything"}).status == "EXCLUDED"
    view = CaseView("q", {}, {"k": ["", "refund"]}, None)
    assert contains.evaluate(view, {"a": "anything"}).passed is False
