"""A scored judge in oloproof.yaml (``scale:``) and judge_validation in release.yaml:
what loads, and every mistake as one error naming file, line and field."""

from __future__ import annotations

import itertools
import statistics

import pytest
from project_helpers import Writer, check, config_error, line_of, project_yaml

from oloproof.evaluators.judge import PanelJudge
from oloproof.project import load_project, load_release_policy
from oloproof.project.config import RubricJudgeEvaluator

JUDGE = """\
- type: rubric_judge
  criterion: quality
  provider: anthropic
  model: m
  rubric_text: Score how helpful the answer is.
  scale: {scale}
"""
PASS_FAIL = """\
- type: rubric_judge
  criterion: helpful
  provider: anthropic
  model: m
  rubric_text: Pass when the answer helps.
"""


def test_a_scored_judge_is_a_mean_metric_with_its_scale_as_range(write: Writer) -> None:
    write("oloproof.yaml", project_yaml(evaluators=JUDGE.format(scale="[1, 5]") + PASS_FAIL))
    config = load_project("oloproof.yaml").config
    assert config.metrics() == {"quality": "MEAN", "helpful": "BINARY"}
    assert config.judge_scales() == {"quality": (1, 5), "helpful": None}
    assert config.judge_criteria() == ["quality", "helpful"]
    judge = config.evaluators[0]
    assert judge.scale == (1, 5) and judge.value_range == (1.0, 5.0)


@pytest.mark.parametrize(
    ("scale", "words"),
    [
        ("[1.5, 5]", "expected two whole numbers [low, high], for example [1, 5], got [1.5, 5]"),
        ("[1, 5.0]", "got [1, 5.0]"),
        ("[5, 1]", "low < high, got [5, 1]"),
        ("[3, 3]", "low < high"),
        ("[1, 2, 3]", "two whole numbers"),
        ("five", "got 'five'"),
        ("[true, 5]", "got [true, 5]"),
        ("[0, 101]", "at most 100 points above its low"),
    ],
)
def test_a_scale_that_is_not_two_whole_numbers_is_refused(
    write: Writer, scale: str, words: str
) -> None:
    text = project_yaml(evaluators=JUDGE.format(scale=scale))
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="evaluators[0].scale",
          line=line_of(text, "scale:"), contains=(words,))


@pytest.mark.parametrize(
    ("scale", "rule", "words"),
    [
        ("[1, 5]", "majority", ("panel_rule majority combines pass/fail verdicts, and this"
                                " judge gives scores (scale [1, 5]): write panel_rule: median")),
        ("[1, 5]", "unanimous", "combines pass/fail verdicts"),
        (None, "median", ("panel_rule median combines scores, and this judge answers pass"
                          " or fail")),
        (None, "mean", "combines scores"),
    ],
)
def test_a_panel_rule_that_does_not_fit_the_judge_is_refused(
    write: Writer, scale: str | None, rule: str, words: str
) -> None:
    judge = JUDGE.format(scale=scale) if scale else PASS_FAIL
    text = project_yaml(evaluators=judge + f"  panel_rule: {rule}\n  panel:\n    - {{}}\n"
                        "    - {model: m2}\n")
    write("oloproof.yaml", text)
    err = config_error(lambda: load_project("oloproof.yaml"))
    check(err, file="oloproof.yaml", field="evaluators[0].panel_rule",
          line=line_of(text, "panel_rule:"), contains=(words,))


def test_a_scored_panel_combines_by_the_median_unless_told(write: Writer) -> None:
    panel = "  panel:\n    - {}\n    - {model: m2}\n"
    write("oloproof.yaml", project_yaml(evaluators=JUDGE.format(scale="[1, 5]") + panel))
    judge = load_project("oloproof.yaml").config.evaluators[0]
    assert judge.panel_rule == "median"
    assert [m.scale for m in judge.members()] == [(1, 5), (1, 5)]  # members keep the scale
    write("oloproof.yaml", project_yaml(
        evaluators=JUDGE.format(scale="[1, 5]") + "  panel_rule: mean\n" + panel))
    assert load_project("oloproof.yaml").config.evaluators[0].panel_rule == "mean"


def _panel(rule: str, n: int, scale: tuple[int, int]) -> PanelJudge:
    panel = PanelJudge.__new__(PanelJudge)
    panel.rule, panel.scale = rule, scale
    return panel


@pytest.mark.parametrize("rule", ["median", "mean"])
@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_missing_score_is_never_guessed(rule: str, n: int) -> None:
    """A scored panel's score stands only when every completion of the missing scores
    (each anywhere on the scale) gives the same one."""
    scale = (1, 3)
    panel = _panel(rule, n, scale)
    points = [1.0, 2.0, 3.0]

    def combine(full: list[float]) -> float:
        return statistics.median(full) if rule == "median" else statistics.fmean(full)

    for scores in itertools.product([*points, None], repeat=n):
        gaps = [i for i, v in enumerate(scores) if v is None]
        outcomes = set()
        for fill in itertools.product(points, repeat=len(gaps)):
            full = list(scores)
            for i, value in zip(gaps, fill, strict=True):
                full[i] = value
            outcomes.add(combine([float(v) for v in full if v is not None]))
        expected = outcomes.pop() if len(outcomes) == 1 else None
        got = panel.combine_scores(list(scores))
        assert got == (pytest.approx(expected) if expected is not None else None), scores


POLICY_CONTEXT = {"quality": "MEAN", "helpful": "BINARY"}


@pytest.mark.parametrize(
    ("metric", "validation", "field", "words"),
    [
        ("quality", "{min_labels: 30, min_sensitivity: 0.9}",
         "rules[0].judge_validation.min_sensitivity",
         "min_sensitivity measures a pass/fail judge, and 'quality' is a scored judge"),
        ("quality", "{min_agreement: 0.9}", "rules[0].judge_validation.min_agreement",
         "validate it with max_mean_abs_diff"),
        ("quality", "{min_labels: 30}", "rules[0].judge_validation",
         "'quality' is a scored judge: say what validates it with max_mean_abs_diff"),
        ("helpful", "{max_mean_abs_diff: 0.5}", "rules[0].judge_validation.max_mean_abs_diff",
         "max_mean_abs_diff measures a scored judge, and 'helpful' answers pass or fail"),
        ("helpful", "{min_weighted_kappa: 0.6}", "rules[0].judge_validation.min_weighted_kappa",
         "validate it with min_sensitivity and min_specificity"),
        ("quality", "{min_weighted_kappa: -1}", "rules[0].judge_validation.min_weighted_kappa",
         "greater than -1"),
        ("helpful", "{min_specificity: 0}", "rules[0].judge_validation.min_specificity",
         "greater than 0"),
    ],
)
def test_judge_validation_keys_must_fit_the_judge(
    write: Writer, metric: str, validation: str, field: str, words: str
) -> None:
    text = (f"version: 1\nrules:\n  - id: r\n    metric: {metric}\n    min: 0.5\n"
            f"    judge_validation: {validation}\n")
    write("release.yaml", text)
    err = config_error(lambda: load_release_policy(
        "release.yaml", POLICY_CONTEXT, judges=["quality", "helpful"]))
    check(err, file="release.yaml", field=field, line=line_of(text, "judge_validation"),
          contains=(words,))


def test_estimate_corrected_is_refused_on_a_scored_judge(write: Writer) -> None:
    text = "version: 1\nrules:\n  - id: r\n    metric: quality\n    min: 3\n    estimate: corrected\n"
    write("release.yaml", text)
    err = config_error(lambda: load_release_policy(
        "release.yaml", POLICY_CONTEXT, judges=["quality", "helpful"]))
    check(err, file="release.yaml", field="rules[0].estimate", line=line_of(text, "estimate"),
          contains=("estimate: corrected estimates a pass rate, and 'quality' is a scored judge",))


def test_old_and_new_validation_keys_load_with_their_floors(write: Writer) -> None:
    write("release.yaml", """\
        version: 1
        rules:
          - {id: old, metric: helpful, min: 0.5, judge_validation: {min_labels: 30, min_agreement: 0.8}}
          - {id: new, metric: helpful, min: 0.5, judge_validation: {min_sensitivity: 0.9, min_specificity: 0.7}}
          - {id: default, metric: helpful, min: 0.5, judge_validation: {}}
          - {id: scored, metric: quality, min: 3, judge_validation: {max_mean_abs_diff: 0.5, min_weighted_kappa: 0.6}}
        """)
    policy = load_release_policy("release.yaml", POLICY_CONTEXT, judges=["quality", "helpful"])
    floors = [(r.judge_validation.sensitivity_floor, r.judge_validation.specificity_floor)
              for r in policy.rules[:3]]
    assert floors == [(0.8, 0.8), (0.9, 0.7), (0.85, 0.85)]
    scored = policy.rules[3].judge_validation
    assert (scored.max_mean_abs_diff, scored.min_weighted_kappa) == (0.5, 0.6)


def test_a_panel_member_cannot_set_its_own_scale() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="scale"):
        RubricJudgeEvaluator.validate({
            "type": "rubric_judge", "criterion": "q", "provider": "anthropic", "model": "m",
            "rubric_text": "r", "scale": [1, 5], "panel": [{}, {"scale": [0, 10]}],
        })
