"""Rules on a judge's metric: judge_validation (MANUAL_REVIEW) and estimate: corrected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oloproof.enums import MetricKind
from oloproof.errors import ConfigError
from oloproof.evidence import CriterionEvidence, LabelledVerdicts
from oloproof.policy.decide import decide_run, gate
from oloproof.project.labels import load_labels
from oloproof.project.models import ReleasePolicy
from oloproof.stats.agreement import labels_to_settle
from oloproof.stats.ppi import ppi_mean


def _run(verdicts: list[bool | None], labels: dict[int, bool]) -> tuple[
        dict[str, CriterionEvidence], dict[str, LabelledVerdicts]]:
    ev = CriterionEvidence("helpful", MetricKind.BINARY)
    for v in verdicts:
        ev.add("OK" if v is not None else "ERROR", v, None)
    by_id = {f"c{i}": v for i, v in enumerate(verdicts)}
    lv = LabelledVerdicts("helpful", by_id, {f"c{i}": p for i, p in labels.items()})
    return {"helpful": ev}, {"helpful": lv}


def _policy(rule: dict[str, Any], **extra: Any) -> ReleasePolicy:
    return ReleasePolicy.model_validate(
        {"version": 1, "rules": [{"id": "r", "metric": "helpful", **rule}], **extra},
        context={"metrics": {"helpful": "BINARY"}, "judges": ["helpful"]},
    )


VALIDATED = {"min": 0.5, "judge_validation": {"min_labels": 30, "min_agreement": 0.85}}


def test_too_few_labels_is_manual_review_and_says_how_many_more() -> None:
    evidence, labelled = _run([True] * 100, {i: True for i in range(12)})
    [d], _ = decide_run(evidence, _policy(VALIDATED), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_labels_too_few")
    assert "label 18 more" in d.detail and "the rule alone: PASS" in d.detail
    assert gate([d]) == ("BLOCK", 4)
    # Without labels at all, the same.
    [d], _ = decide_run(evidence, _policy(VALIDATED))
    assert d.state == "MANUAL_REVIEW" and "no human labels" in d.detail


def test_agreement_shown_above_the_floor_lets_the_rule_decide() -> None:
    evidence, labelled = _run([True] * 100, {i: True for i in range(60)})
    [d], _ = decide_run(evidence, _policy(VALIDATED), labelled)
    assert d.state == "PASS"


def test_agreement_not_yet_shown_says_how_many_more_labels_would_settle_it() -> None:
    # 27 of 30 labels agree: 90%, CP lower 73.5% < 85%.
    verdicts: list[bool | None] = [True] * 100
    labels = {i: True for i in range(27)} | {i: False for i in range(27, 30)}
    evidence, labelled = _run(verdicts, labels)
    [d], _ = decide_run(evidence, _policy(VALIDATED), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_agreement_unproven")
    more = labels_to_settle(27, 30, 0.85, 0.95)
    assert more is not None and f"about {more - 30} more labels" in d.detail


def test_agreement_at_or_under_the_floor_is_said_plainly() -> None:
    labels = {i: True for i in range(24)} | {i: False for i in range(24, 40)}  # 60% agree
    evidence, labelled = _run([True] * 100, labels)
    [d], _ = decide_run(evidence, _policy(VALIDATED), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_agreement_below_floor")
    assert "review the rubric or the judge" in d.detail


def test_precedence_with_the_other_states() -> None:
    evidence, labelled = _run([True] * 100, {})
    policy = ReleasePolicy.model_validate(
        {"version": 1, "rules": [
            {"id": "v", "metric": "helpful", **VALIDATED},
            {"id": "f", "metric": "helpful", "max": 0.5},
        ]}, context={"metrics": {"helpful": "BINARY"}, "judges": ["helpful"]})
    decisions, _ = decide_run(evidence, policy, labelled)
    assert [d.state for d in decisions] == ["MANUAL_REVIEW", "FAIL"]
    assert gate(decisions) == ("BLOCK", 1)  # FAIL before MANUAL_REVIEW
    warn = _policy(VALIDATED, block_on=["FAIL"], warn_on=["MANUAL_REVIEW"])
    decisions, _ = decide_run(evidence, warn, labelled)
    assert gate(decisions) == ("WARN", 0)


def test_the_corrected_estimate_decides_on_the_ppi_interval() -> None:
    verdicts: list[bool | None] = [True] * 70 + [False] * 30
    labels = {i: (i % 7 != 0) for i in range(0, 100, 2)}
    evidence, labelled = _run(verdicts, labels)
    [d], summaries = decide_run(evidence, _policy({"min": 0.5, "estimate": "corrected"}),
                                labelled)
    ids = list(labels)
    ref = ppi_mean([float(labels[i]) for i in ids], [float(verdicts[i]) for i in ids],
                   [float(v) for i, v in enumerate(verdicts) if i not in labels])  # type: ignore[arg-type]
    assert (d.estimate, d.lower, d.upper) == (ref.estimate, ref.interval.lower,
                                              ref.interval.upper)
    assert "% PPI [" in d.detail and d.basis == "corrected"
    assert summaries["helpful"].estimate == 0.7  # the metric itself stays the judge's


def test_missing_verdicts_widen_the_corrected_interval_to_both_completions() -> None:
    verdicts: list[bool | None] = [True] * 60 + [False] * 30 + [None] * 10
    labels = {i: i % 5 != 0 for i in range(0, 100, 3)}
    evidence, labelled = _run(verdicts, labels)
    [d], _ = decide_run(evidence, _policy({"min": 0.5, "estimate": "corrected"}), labelled)
    for fill in (0.0, 1.0):
        filled = [fill if v is None else float(v) for v in verdicts]
        iv = ppi_mean([float(p) for p in labels.values()], [filled[i] for i in labels],
                      [x for i, x in enumerate(filled) if i not in labels]).interval
        assert d.lower is not None and d.upper is not None
        assert d.lower <= iv.lower and d.upper >= iv.upper


def test_corrected_without_labels_is_manual_review() -> None:
    evidence, labelled = _run([True] * 10, {})
    [d], _ = decide_run(evidence, _policy({"min": 0.5, "estimate": "corrected"}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "corrected_estimate_needs_labels")


def test_judge_settings_on_a_metric_that_is_not_a_judge_are_refused() -> None:
    from pydantic import ValidationError

    for rule in (VALIDATED, {"min": 0.5, "estimate": "corrected"}):
        with pytest.raises(ValidationError, match="rubric_judge"):
            ReleasePolicy.model_validate(
                {"version": 1, "rules": [{"id": "r", "metric": "exact", **rule}]},
                context={"metrics": {"exact": "BINARY"}, "judges": []})


GOOD = {"id": "a", "criterion": "helpful", "pass": True}


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ("{not json", None, "not a JSON object"),
        ("[1, 2]", None, "not a JSON object"),
        (json.dumps({**GOOD, "passed": True}), "passed", "did you mean 'pass'"),
        (json.dumps({"id": "a", "criterion": "helpful"}), "pass", "required field"),
        (json.dumps({**GOOD, "pass": "yes"}), "pass", "expected true or false"),
        (json.dumps({**GOOD, "criterion": "helpfull"}), "criterion", "did you mean 'helpful'"),
        (json.dumps({**GOOD, "id": ""}), "id", "non-empty string"),
        (json.dumps({**GOOD, "note": 3}), "note", "expected a string"),
        (json.dumps(GOOD), "id", "a second label for case 'a'"),
    ],
)
def test_a_bad_label_line_is_one_error_naming_file_line_and_field(
    tmp_path: Path, line: str, field: str | None, words: str
) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    with pytest.raises(ConfigError) as info:
        load_labels(path, "data/labels.jsonl", ["helpful"])
    message = str(info.value)
    assert message.startswith("data/labels.jsonl:3") and words in message
    if field is not None:
        assert field in message
    assert "\n" not in message


def test_the_labels_digest_changes_with_any_label(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    first = load_labels(path, "l", ["helpful"])
    path.write_text(json.dumps({**GOOD, "pass": False}) + "\n")
    second = load_labels(path, "l", ["helpful"])
    assert first.digest.startswith("sha256:") and first.digest != second.digest
