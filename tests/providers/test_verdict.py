"""The judge's prompt and the reading of its verdict."""

from __future__ import annotations

import pytest

from oloproof.providers.verdict import (
    OUTPUT_CLOSE,
    OUTPUT_OPEN,
    Verdict,
    VerdictError,
    build_judge_prompt,
    parse_verdict,
    read_section,
)
from oloproof.transport.retry import PermanentFailure


def test_plain_object() -> None:
    assert parse_verdict('{"pass": true, "reason": "names the refund window"}') == Verdict(
        True, "names the refund window"
    )


def test_code_fence() -> None:
    text = '```json\n{\n  "pass": false,\n  "reason": "rude"\n}\n```'
    assert parse_verdict(text) == Verdict(False, "rude")


def test_prose_around_one_object() -> None:
    text = 'Let me think. The answer is polite.\n{"pass": true, "reason": "polite"}\nHope this helps {:'
    assert parse_verdict(text) == Verdict(True, "polite")


def test_two_agreeing_objects_are_fine() -> None:
    text = 'Draft: {"pass": false, "reason": "a"}\nFinal: {"pass": false, "reason": "b"}'
    assert parse_verdict(text) == Verdict(False, "a")


def test_nested_objects_count_once() -> None:
    text = '{"pass": true, "reason": "ok", "details": {"pass": false}}'
    assert parse_verdict(text).passed is True


def test_objects_without_pass_are_ignored_beside_a_verdict() -> None:
    text = 'The input was {"question": "x"}. Verdict: {"pass": true, "reason": "fine"}'
    assert parse_verdict(text).passed is True


def test_missing_reason_is_empty() -> None:
    assert parse_verdict('{"pass": true}') == Verdict(True, "")


def test_two_disagreeing_objects_are_an_error() -> None:
    with pytest.raises(VerdictError, match="disagree"):
        parse_verdict('{"pass": true, "reason": "a"} or maybe {"pass": false, "reason": "b"}')


@pytest.mark.parametrize("value", ['"true"', "1", "null", '"yes"'])
def test_pass_not_a_boolean_is_an_error(value: str) -> None:
    with pytest.raises(VerdictError, match="not true or false"):
        parse_verdict('{"pass": ' + value + ', "reason": "x"}')


@pytest.mark.parametrize(
    "text", ["", "I think it passes.", "pass: true", "{'pass': True}", '{"pass": true,}']
)
def test_no_json_object_is_an_error(text: str) -> None:
    with pytest.raises(VerdictError, match="no JSON object"):
        parse_verdict(text)


def test_object_without_pass_is_an_error() -> None:
    with pytest.raises(VerdictError, match='no "pass" field'):
        parse_verdict('{"verdict": "pass", "reason": "x"}')


def test_verdict_error_is_permanent() -> None:
    assert issubclass(VerdictError, PermanentFailure)


def test_prompt_shows_rubric_input_expected_and_output() -> None:
    system, user = build_judge_prompt(
        "Must name the refund window.",
        {"question": "Can I get a refund?"},
        {"label": "refund"},
        {"answer": "Yes, within 30 days."},
        boundary="0123abcd0123abcd",
    )
    assert '{"pass": true' in system and "JSON boolean" in system
    assert "Must name the refund window." in user
    assert '"question": "Can I get a refund?"' in user
    assert "<expected-0123abcd0123abcd>" in user and '"label": "refund"' in user
    output = read_section(user, "output")
    assert output is not None and '"answer": "Yes, within 30 days."' in output
    tags = [f"<{n}-0123abcd0123abcd>" for n in ("rubric", "input", "expected", "output")]
    assert [user.index(t) for t in tags] == sorted(user.index(t) for t in tags)
    # The verdict format is asked for after the data.
    assert user.rindex('"pass": true|false') > user.index("</output-0123abcd0123abcd>")


def test_prompt_without_expected_and_with_string_output() -> None:
    _, user = build_judge_prompt("R", "plain question", None, "plain answer", boundary="ab" * 8)
    assert "<expected-" not in user
    assert f"{OUTPUT_OPEN}{'ab' * 8}>\nplain answer\n{OUTPUT_CLOSE}{'ab' * 8}>" in user
    assert f"<input-{'ab' * 8}>\nplain question\n</input-{'ab' * 8}>" in user
