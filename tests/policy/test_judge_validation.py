"""Rules on a judge's metric: judge_validation (MANUAL_REVIEW) and estimate: corrected."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from oloproof.enums import MetricKind
from oloproof.errors import ConfigError
from oloproof.evidence import CriterionEvidence, LabelledScores, LabelledVerdicts
from oloproof.policy.decide import decide_run, gate
from oloproof.project.config import ReleasePolicy
from oloproof.project.labels import labels_from_json, load_labels
from oloproof.stats.agreement import labels_to_settle, mean_abs_diff
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
    return ReleasePolicy.validate(
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


def test_sensitivity_and_specificity_shown_above_their_floors_let_the_rule_decide() -> None:
    # The judge passes 70 and fails 30 cases; a person labels 30 of each alike.
    verdicts: list[bool | None] = [True] * 70 + [False] * 30
    labels = {i: True for i in range(30)} | {i: False for i in range(70, 100)}
    evidence, labelled = _run(verdicts, labels)
    [d], _ = decide_run(evidence, _policy(VALIDATED), labelled)
    assert d.state == "PASS", d.detail  # 30/30 each way: CP lower 88.4% >= 85%


@pytest.mark.parametrize("validation", [
    {"min_labels": 30, "min_agreement": 0.85},  # an earlier policy's form, still read
    {"min_labels": 30, "min_sensitivity": 0.85, "min_specificity": 0.85},
    {"min_labels": 30},
])
def test_a_judge_that_passes_everything_is_never_validated(validation: dict[str, Any]) -> None:
    """At 90% prevalence, 1000 labels: agreement 90.0%, CP lower 88.0% >= 85% (what the
    old check validated on), but specificity 0 of 100."""
    verdicts: list[bool | None] = [True] * 1000
    labels = {i: i % 10 != 0 for i in range(1000)}
    evidence, labelled = _run(verdicts, labels)
    [d], _ = decide_run(evidence, _policy({"min": 0.5, "judge_validation": validation}),
                        labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_specificity_below_floor"), d.detail
    assert "specificity 0/100 = 0.0%" in d.detail and "sensitivity 900/900" in d.detail
    assert "no number of labels shows it at or above 85.0%" in d.detail
    assert "the rule alone: PASS" in d.detail


def test_sensitivity_not_yet_shown_says_how_many_labels_would_show_it() -> None:
    # Of 40 labels, 30 the person passes (the judge passes 27 of them) and 10 she fails
    # (the judge fails all 10): sensitivity 90%, CP lower 73.5% < 85%.
    verdicts: list[bool | None] = [True] * 27 + [False] * 3 + [False] * 10 + [True] * 60
    labels = {i: True for i in range(30)} | {i: False for i in range(30, 40)}
    evidence, labelled = _run(verdicts, labels)
    policy = _policy({"min": 0.5, "judge_validation": {
        "min_labels": 30, "min_sensitivity": 0.85, "min_specificity": 0.6}})
    [d], _ = decide_run(evidence, policy, labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_sensitivity_unproven"), d.detail
    positives = labels_to_settle(27, 30, 0.85, 0.95)
    assert positives is not None
    total = -(-positives * 40 // 30)  # that many cases a person passes, at 30 of 40
    assert f"{total} labels in all would validate it at the observed rates" in d.detail
    assert f"({total - 40} more)" in d.detail
    assert "specificity 10/10" in d.detail  # shown (CP lower 74.1% >= 60%)


def test_labels_that_only_pass_leave_specificity_unmeasured() -> None:
    evidence, labelled = _run([True] * 100, {i: True for i in range(60)})
    [d], _ = decide_run(evidence, _policy(VALIDATED), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_specificity_unproven"), d.detail
    assert "specificity not measured: no labelled case the person fails" in d.detail


def test_min_agreement_is_still_a_floor_on_agreement_beside_the_other_two() -> None:
    verdicts: list[bool | None] = [True] * 70 + [False] * 30
    labels = {i: True for i in range(30)} | {i: False for i in range(70, 100)}
    evidence, labelled = _run(verdicts, labels)
    policy = _policy({"min": 0.5, "judge_validation": {
        "min_labels": 30, "min_sensitivity": 0.8, "min_specificity": 0.8,
        "min_agreement": 0.95}})
    [d], _ = decide_run(evidence, policy, labelled)
    # 60/60 agree: CP lower 94.0% < 95%; sensitivity and specificity are shown at 80%.
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_agreement_unproven"), d.detail
    assert "agreement 60/60 = 100.0%" in d.detail


def test_precedence_with_the_other_states() -> None:
    evidence, labelled = _run([True] * 100, {})
    policy = ReleasePolicy.validate(
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


def test_missing_verdicts_filled_in_opposite_ways_can_no_longer_pass_a_floor() -> None:
    """The audit's case: 32 labels, 8 of them without a verdict (the person passes 5, fails
    3), and 109 other cases, 24 without. Every missing verdict a fail gave [62.9%, 100%],
    every one a pass [64.3%, 98.9%], and min: 0.5 PASSed (gate ALLOW); passes on the 8
    labelled ones and fails on the 24 others take the lower bound to 40.7%."""
    verdicts: list[bool | None] = ([True] * 22 + [False] * 2 + [None] * 8
                                   + [True] * 78 + [False] * 7 + [None] * 24)
    labels = {i: i != 21 for i in range(24)} | {i: i < 29 for i in range(24, 32)}
    labels[22] = labels[23] = False
    evidence, labelled = _run(verdicts, labels)
    [d], _ = decide_run(evidence, _policy({"min": 0.5, "estimate": "corrected"}), labelled)
    assert d.lower is not None and round(d.lower, 3) == 0.407, d.detail
    assert (d.state, d.reason) == ("INSUFFICIENT_EVIDENCE", "interval_contains_threshold")


def test_a_corrected_interval_wholly_outside_the_rates_decides_nothing() -> None:
    """The judge passes all 109 unlabelled cases and 20 of the 30 labelled ones, which the
    person passes all: the PPI interval is [110.7%, 153.7%]. Clipped end by end it was
    [110.7%, 100%], inverted, and min: 0.9 PASSed (gate ALLOW) on labels that contradict the
    judge's other verdicts; a max: 0.05 on the mirror case ([0%, -10.7%]) likewise. Now no
    rate is in it, and the rule is MANUAL_REVIEW, saying why."""
    verdicts: list[bool | None] = [True] * 20 + [False] * 10 + [True] * 109
    evidence, labelled = _run(verdicts, {i: True for i in range(30)})
    [d], _ = decide_run(evidence, _policy({"min": 0.9, "estimate": "corrected"}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "corrected_estimate_out_of_range")
    assert "[110.7%, 153.7%] lies wholly above 100%" in d.detail, d.detail
    assert "66.7% of the 30 labelled cases and 100.0% of the 109 others" in d.detail
    assert gate([d]) == ("BLOCK", 4)
    mirror: list[bool | None] = [False] * 20 + [True] * 10 + [False] * 109
    evidence, labelled = _run(mirror, {i: False for i in range(30)})
    [d], _ = decide_run(evidence, _policy({"max": 0.05, "estimate": "corrected"}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "corrected_estimate_out_of_range")
    assert "lies wholly below 0%" in d.detail


def test_a_corrected_estimate_above_one_is_cut_to_its_interval() -> None:
    """Estimate 120% (the judge passes all 50 others, 6 of 10 labelled, the person 8):
    the interval [71.4%, 100%] and the estimate 100%, not 120% beside it."""
    verdicts: list[bool | None] = [True] * 6 + [False] * 4 + [True] * 50
    evidence, labelled = _run(verdicts, {i: i < 8 for i in range(10)})
    [d], _ = decide_run(evidence, _policy({"min": 0.5, "estimate": "corrected"}), labelled)
    assert d.upper == 1.0 and d.estimate == 1.0 and d.lower is not None
    assert round(d.lower, 3) == 0.714


def test_corrected_without_labels_is_manual_review() -> None:
    evidence, labelled = _run([True] * 10, {})
    [d], _ = decide_run(evidence, _policy({"min": 0.5, "estimate": "corrected"}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "corrected_estimate_needs_labels")


def test_judge_settings_on_a_metric_that_is_not_a_judge_are_refused() -> None:
    from pydantic import ValidationError

    for rule in (VALIDATED, {"min": 0.5, "estimate": "corrected"}):
        with pytest.raises(ValidationError, match="rubric_judge"):
            ReleasePolicy.validate(
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


# -- scored judges -----------------------------------------------------------------------

SCORED_CONTEXT = {"metrics": {"quality": "MEAN"}, "judges": ["quality"]}


def _scored(judge: list[float | None], person: dict[int, float]) -> tuple[
        dict[str, CriterionEvidence], dict[str, LabelledScores]]:
    ev = CriterionEvidence("quality", MetricKind.MEAN, value_range=(1.0, 5.0))
    for v in judge:
        ev.add("OK" if v is not None else "ERROR", None, v)
    by_id = {f"c{i}": v for i, v in enumerate(judge)}
    lv = LabelledScores("quality", (1.0, 5.0), by_id, {f"c{i}": p for i, p in person.items()})
    return {"quality": ev}, {"quality": lv}


def _scored_policy(validation: dict[str, Any]) -> ReleasePolicy:
    return ReleasePolicy.validate(
        {"version": 1, "rules": [{"id": "q", "metric": "quality", "min": 2.0,
                                  "judge_validation": {"min_labels": 30, **validation}}]},
        context=SCORED_CONTEXT,
    )


def _close_scores(n: int) -> tuple[list[float | None], dict[int, float]]:
    """A judge one point off a person on every fifth case, across the whole scale."""
    person = {i: float(1 + i % 5) for i in range(n)}
    judge: list[float | None] = [p if i % 5 else min(5.0, p + 1) for i, p in person.items()]
    return judge, person


def test_a_scored_judge_close_to_the_person_is_validated() -> None:
    judge, person = _close_scores(400)
    evidence, labelled = _scored(judge, person)
    [d], _ = decide_run(evidence, _scored_policy(
        {"max_mean_abs_diff": 0.5, "min_weighted_kappa": 0.8}), labelled)
    # MAD 0.2, Hoeffding upper 0.47; kappa about 0.97.
    assert d.state == "PASS", d.detail


def test_a_scored_judge_too_far_from_the_person_is_said_plainly() -> None:
    person = {i: float(1 + i % 5) for i in range(60)}
    judge: list[float | None] = [6.0 - p for p in person.values()]  # reversed: 5 for 1
    evidence, labelled = _scored(judge, person)
    [d], _ = decide_run(evidence, _scored_policy({"max_mean_abs_diff": 1.0}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_mean_abs_diff_above_ceiling"), d.detail
    assert "mean absolute difference 2.4 points" in d.detail
    assert "no number of labels shows it at or under 1" in d.detail
    [d], _ = decide_run(evidence, _scored_policy({"min_weighted_kappa": 0.4}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_weighted_kappa_below_floor"), d.detail
    assert "weighted kappa -1.00" in d.detail


def test_a_scored_judge_not_yet_shown_says_about_how_many_labels() -> None:
    judge, person = _close_scores(40)
    evidence, labelled = _scored(judge, person)
    [d], _ = decide_run(evidence, _scored_policy({"max_mean_abs_diff": 0.5}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_mean_abs_diff_unproven"), d.detail
    # Hoeffding's half-width 4 sqrt(ln 40 / 80) at 40 labels, under 0.5 - 0.2 at N labels.
    half = 4 * math.sqrt(math.log(40) / 80)
    total = math.ceil(40 * (half / 0.3) ** 2)
    assert f"about {total} labels in all would validate it" in d.detail


def test_too_few_scored_labels_and_a_judge_without_scores_are_manual_review() -> None:
    judge, person = _close_scores(12)
    judge[0] = None  # the judge failed on a labelled case: not a pair
    evidence, labelled = _scored(judge, person)
    [d], _ = decide_run(evidence, _scored_policy({"min_weighted_kappa": 0.6}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_labels_too_few"), d.detail
    assert d.detail.startswith("11 labelled cases with a score; judge_validation needs 30:"
                               " label 19 more")


def test_a_perfect_judge_has_no_kappa_interval_and_is_not_validated_on_kappa() -> None:
    person = {i: float(1 + i % 5) for i in range(50)}
    evidence, labelled = _scored(list(person.values()), person)
    [d], _ = decide_run(evidence, _scored_policy({"min_weighted_kappa": 0.6}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_weighted_kappa_unproven"), d.detail
    assert "no interval" in d.detail
    [d], _ = decide_run(evidence, _scored_policy({"max_mean_abs_diff": 0.9}), labelled)
    assert d.state == "PASS", d.detail  # MAD 0, Hoeffding upper 0.77


SCORED_GOOD = {"id": "a", "criterion": "quality", "score": 4}


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        (json.dumps({**SCORED_GOOD, "score": 7}), "score", "7 is outside the scale [1, 5]"),
        (json.dumps({**SCORED_GOOD, "score": 0}), "score", "outside the scale [1, 5]"),
        (json.dumps({**SCORED_GOOD, "score": 3.5}), "score", "3.5 is not a whole number"),
        (json.dumps({**SCORED_GOOD, "score": "4"}), "score",
         'expected a whole number from 1 to 5, got "4"'),
        (json.dumps({**SCORED_GOOD, "score": True}), "score", "got true"),
        (json.dumps({**SCORED_GOOD, "score": None}), "score", "got null"),
        (json.dumps({"id": "a", "criterion": "quality", "pass": True}), "pass",
         "'quality' is a scored judge (scale [1, 5]): its labels give a score, not pass"),
        (json.dumps({"id": "a", "criterion": "quality"}), "score",
         "required field is missing ('quality' is a scored judge"),
        (json.dumps({"id": "a", "criterion": "helpful", "score": 4}), "score",
         "'helpful' is a pass/fail judge: its labels say pass, not score"),
        (json.dumps({**SCORED_GOOD, "scor": 4}), "scor", "did you mean 'score'"),
        (json.dumps(SCORED_GOOD), "id", "a second label for case 'a' and criterion 'quality'"),
    ],
)
def test_a_bad_scored_label_line_is_one_error_naming_file_line_and_field(
    tmp_path: Path, line: str, field: str, words: str
) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(SCORED_GOOD) + "\n\n" + line + "\n")
    with pytest.raises(ConfigError) as info:
        load_labels(path, "data/labels.jsonl", {"quality": (1, 5), "helpful": None})
    message = str(info.value)
    assert message.startswith("data/labels.jsonl:3") and words in message, message
    assert field in message and "\n" not in message


def test_scored_labels_load_beside_pass_fail_ones_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({**SCORED_GOOD, "score": 5.0}) + "\n"
                    + json.dumps(GOOD) + "\n")
    labels = load_labels(path, "l", {"quality": (1, 5), "helpful": None})
    assert labels.scores_for("quality") == {"a": 5.0}
    assert labels.for_criterion("helpful") == {"a": True}
    assert labels.for_criterion("quality") == {}
    stored = [lab.to_json() for lab in labels.labels]
    assert stored[0] == {"id": "a", "criterion": "quality", "score": 5}
    again = labels_from_json(stored, "l")
    assert again == labels and again.digest == labels.digest


def test_labelled_cases_without_a_score_count_at_their_worst_difference() -> None:
    """400 pairs one point apart on every fifth (mean absolute difference 0.2, Hoeffding
    upper 0.47 <= 0.5: validated), and 20 labelled cases the judge gave no score. Earlier
    versions left the 20 out and validated the judge; each now counts at the largest
    difference it could have had (the judge at the far end of the scale)."""
    judge, person = _close_scores(420)
    for i in range(400, 420):
        judge[i] = None
    evidence, labelled = _scored(judge, person)
    [d], _ = decide_run(evidence, _scored_policy({"max_mean_abs_diff": 0.5}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_mean_abs_diff_unproven"), d.detail
    # The bound is the largest over every score the 20 could have had: Hoeffding's upper
    # bound grows with the mean, each case's largest difference is to the scale's far end.
    pairs = [(j, person[i]) for i, j in enumerate(judge) if j is not None]
    worst = [(1.0 if p - 1 >= 5 - p else 5.0, p) for p in (person[i] for i in range(400, 420))]
    mad, iv = mean_abs_diff([j for j, _ in pairs + worst], [p for _, p in pairs + worst], 4.0)
    assert mad is not None and iv is not None and iv.upper > 0.5
    assert f"mean absolute difference {mad:.4f} points (20 without a score" in d.detail, d.detail
    assert "rerun to get the judge's scores on them" in d.detail
    # Kappa is not shown while scores are missing; with them, the judge is validated.
    [d], _ = decide_run(evidence, _scored_policy({"min_weighted_kappa": 0.6}), labelled)
    assert (d.state, d.reason) == ("MANUAL_REVIEW", "judge_weighted_kappa_unproven"), d.detail
    assert "not shown while 20 others have none" in d.detail
    evidence, labelled = _scored(judge[:400], {i: person[i] for i in range(400)})
    for validation in ({"max_mean_abs_diff": 0.5}, {"min_weighted_kappa": 0.6}):
        [d], _ = decide_run(evidence, _scored_policy(validation), labelled)
        assert d.state == "PASS", d.detail


def test_the_worst_difference_is_the_largest_bound_over_every_completion() -> None:
    from itertools import product

    from oloproof.stats.agreement import mean_abs_diff_worst

    judge, person = [3.0, 4.0, 2.0, 5.0], [3.0, 3.0, 2.0, 4.0]
    missing = [1.0, 3.0, 4.0]
    mad, _ = mean_abs_diff(judge, person, 4.0)
    worst, bound = mean_abs_diff_worst(mad, 4, missing, (1.0, 5.0))
    highest = max(
        mean_abs_diff(judge + list(fill), person + missing, 4.0)[1].upper  # type: ignore[union-attr]
        for fill in product([1.0, 2.0, 3.0, 4.0, 5.0], repeat=3))
    assert bound.upper == pytest.approx(highest, abs=1e-12)
    assert worst == pytest.approx((0 + 1 + 0 + 1 + 4 + 2 + 3) / 7)
