"""release.yaml and compare.yaml: the spec's examples load; every mistake is one ConfigError."""

from __future__ import annotations

from pathlib import Path

import pytest
from project_helpers import Writer, check, config_error, line_of

from oloproof.errors import ConfigError
from oloproof.project import (
    ComparePolicy,
    IntervalRule,
    MetricKind,
    ObservedCountRule,
    ReleasePolicy,
    default_compare_policy,
    default_release_policy,
    load_compare_policy,
    load_release_policy,
)

METRICS: dict[str, MetricKind] = {
    "exact_label": "BINARY",
    "pii_free": "BINARY",
    "format_valid": "BINARY",
    "days_error": "MEAN",
}
STATES = "FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW"

RELEASE_EXAMPLE = """\
version: 1
confidence_level: 0.95
block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]   # the default
warn_on: []
rules:
  - id: exact-label-floor         # interval_threshold (implied by min or max)
    metric: exact_label
    min: 0.70
  - id: valid-format
    metric: format_valid
    kind: observed_count
    max_failures: 0
  - id: error-budget               # a rule on a MEAN metric
    metric: days_error
    max: 1.5
"""

COMPARE_EXAMPLE = """\
version: 1
confidence_level: 0.95
block_on: [FAIL, INSUFFICIENT_EVIDENCE, MANUAL_REVIEW]
rules:
  - id: label-no-regression
    kind: non_inferiority          # superiority | non_inferiority | equivalence
    metric: exact_label
    margin: 0.10                   # required for non_inferiority and equivalence
"""


def _release(write: Writer, text: str) -> ReleasePolicy:
    write("release.yaml", text)
    return load_release_policy("release.yaml", METRICS)


def _release_error(write: Writer, text: str) -> ConfigError:
    write("release.yaml", text)
    return config_error(lambda: load_release_policy("release.yaml", METRICS))


def _compare_error(write: Writer, text: str) -> ConfigError:
    write("compare.yaml", text)
    return config_error(lambda: load_compare_policy("compare.yaml", METRICS))


def _rules(body: str, head: str = "version: 1\n") -> str:
    return head + "rules:\n" + "".join("  " + line + "\n" for line in body.splitlines())


# -- release.yaml -------------------------------------------------------------------------------


def test_release_example_loads(write: Writer) -> None:
    policy = _release(write, RELEASE_EXAMPLE)
    assert policy.confidence_level == 0.95
    assert policy.block_on == ["FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW"]
    assert policy.warn_on == []
    floor, count, budget = policy.rules
    assert floor == IntervalRule(id="exact-label-floor", metric="exact_label", min=0.7)
    assert floor.kind == "interval_threshold" and floor.max is None
    assert isinstance(count, ObservedCountRule) and count.max_failures == 0
    assert isinstance(budget, IntervalRule) and budget.max == 1.5


def test_release_defaults_and_inferred_kind(write: Writer) -> None:
    policy = _release(write, _rules("- {id: r, metric: pii_free, max_failures: 2}"))
    assert policy.confidence_level == 0.95
    assert policy.block_on == ["FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW"]
    assert policy.rules == [
        ObservedCountRule(id="r", metric="pii_free", kind="observed_count", max_failures=2)
    ]


def test_default_policies() -> None:
    assert default_release_policy() == ReleasePolicy(version=1)
    assert default_release_policy().rules == []
    assert default_compare_policy().rules == []
    assert default_compare_policy().block_on == ["FAIL", "INSUFFICIENT_EVIDENCE", "MANUAL_REVIEW"]


def test_missing_policy_file(project_dir: Path) -> None:
    err = config_error(lambda: load_release_policy("release.yaml", METRICS))
    check(err, file="release.yaml", field=None, line=None, contains=("file not found",))
    default = default_release_policy()
    assert load_release_policy("release.yaml", METRICS, default=default) is default
    err = config_error(lambda: load_compare_policy("policies/compare.yaml", METRICS))
    check(err, file="policies/compare.yaml", field=None, line=None, contains=("file not found",))
    compare_default = default_compare_policy()
    assert load_compare_policy("compare.yaml", METRICS, compare_default) is compare_default


def test_unknown_metric_lists_the_known_ones(write: Writer) -> None:
    text = (
        "version: 1\n\n# floors\n\nconfidence_level: 0.95\n\nrules:\n"
        "  - id: label-floor\n    metric: exact_lable\n    min: 0.7\n"
    )
    write("release.yaml", text)
    metrics: dict[str, MetricKind] = {
        "pii_free": "BINARY",
        "exact_label": "BINARY",
        "format_valid": "BINARY",
    }
    err = config_error(lambda: load_release_policy("release.yaml", metrics))
    message = check(err, file="release.yaml", field="rules[0].metric", line=9)
    assert message.startswith("release.yaml:9: rules[0].metric: unknown metric 'exact_lable'")
    assert "(known metrics: exact_label, format_valid, pii_free)" in message
    assert "did you mean 'exact_label'?" in message


def test_rule_with_both_min_and_max(write: Writer) -> None:
    text = _rules("- id: band\n  metric: exact_label\n  min: 0.5\n  max: 0.9")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[0].max",
        line=line_of(text, "max: 0.9"),
        contains=("min or max, not both",),
    )


def test_rule_with_neither_min_nor_max(write: Writer) -> None:
    text = _rules("- id: floor\n  metric: exact_label")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[0].min",
        line=line_of(text, "- id: floor"),
        contains=("declare min", "or max"),
    )


@pytest.mark.parametrize(("bound", "value"), [("min", "70"), ("max", "-0.1")])
def test_binary_bounds_must_lie_in_0_1(write: Writer, bound: str, value: str) -> None:
    text = _rules(f"- id: floor\n  metric: exact_label\n  {bound}: {value}")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field=f"rules[0].{bound}",
        line=line_of(text, f"{bound}:"),
        contains=("outside [0, 1]", "BINARY metric", "0.7 for 70%"),
    )


def test_mean_bounds_take_any_number(write: Writer) -> None:
    policy = _release(
        write,
        _rules("- {id: a, metric: days_error, max: 45}\n- {id: b, metric: days_error, min: -3}"),
    )
    assert [r.id for r in policy.rules] == ["a", "b"]


def test_observed_count_without_max_failures(write: Writer) -> None:
    text = _rules("- id: fmt\n  metric: format_valid\n  kind: observed_count")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[0].max_failures",
        line=line_of(text, "- id: fmt"),
        contains=("required field is missing",),
    )


def test_observed_count_negative(write: Writer) -> None:
    text = _rules("- id: fmt\n  metric: format_valid\n  kind: observed_count\n  max_failures: -1")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[0].max_failures",
        line=line_of(text, "max_failures"),
        contains=("must be at least 0, got -1",),
    )


def test_observed_count_on_a_mean_metric(write: Writer) -> None:
    text = _rules("- id: d\n  metric: days_error\n  kind: observed_count\n  max_failures: 1")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[0].kind",
        line=line_of(text, "kind:"),
        contains=("MEAN metric",),
    )


def test_max_failures_on_an_interval_rule_is_explained(write: Writer) -> None:
    text = _rules("- id: fmt\n  metric: format_valid\n  min: 0.9\n  max_failures: 1")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[0].max_failures",
        line=line_of(text, "max_failures"),
        contains=("unknown key 'max_failures'", "kind: observed_count", "accepted: id, metric"),
    )


def test_unknown_release_rule_kind(write: Writer) -> None:
    text = _rules("- id: fmt\n  metric: format_valid\n  kind: observed\n  max_failures: 1")
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[0].kind",
        line=line_of(text, "kind:"),
        contains=(
            "unknown rule kind 'observed'",
            "accepted: interval_threshold, observed_count",
            "did you mean 'observed_count'?",
        ),
    )


@pytest.mark.parametrize("value", ["0", "1", "95", "-0.5"])
def test_confidence_level_outside_0_1(write: Writer, value: str) -> None:
    text = f"version: 1\nconfidence_level: {value}\n"
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="confidence_level",
        line=2,
        contains=("strictly between 0 and 1",),
    )


def test_confidence_level_not_a_number(write: Writer) -> None:
    err = _release_error(write, "version: 1\nconfidence_level: high\n")
    check(
        err,
        file="release.yaml",
        field="confidence_level",
        line=2,
        contains=("expected a number, got 'high'",),
    )


@pytest.mark.parametrize(("key", "index"), [("block_on", 1), ("warn_on", 0)])
def test_block_on_and_warn_on_states(write: Writer, key: str, index: int) -> None:
    values = "[FAIL, PASS]" if key == "block_on" else "[fail]"
    text = f"version: 1\n{key}: {values}\n"
    err = _release_error(write, text)
    message = check(
        err,
        file="release.yaml",
        field=f"{key}[{index}]",
        line=2,
        contains=(f"accepted: {STATES}",),
    )
    if key == "warn_on":
        assert "did you mean 'FAIL'?" in message


def test_duplicate_rule_ids(write: Writer) -> None:
    text = _rules(
        "- id: floor\n  metric: exact_label\n  min: 0.7\n"
        "- id: floor\n  metric: pii_free\n  min: 0.9"
    )
    err = _release_error(write, text)
    check(
        err,
        file="release.yaml",
        field="rules[1].id",
        line=line_of(text, "- id: floor", 2),
        contains=("duplicate rule id 'floor'", "rules[0]"),
    )


def test_release_unknown_key_and_version(write: Writer) -> None:
    err = _release_error(write, "version: 1\nrule: []\n")
    check(
        err,
        file="release.yaml",
        field="rule",
        line=2,
        contains=("unknown key 'rule'", "did you mean 'rules'?", "confidence_level, block_on"),
    )
    err = _release_error(write, "version: '2'\nrules: []\n")
    check(
        err,
        file="release.yaml",
        field="version",
        line=1,
        contains=("unsupported version '2'", "accepted: 1"),
    )


def test_release_top_level_not_a_mapping(write: Writer) -> None:
    err = _release_error(write, "- id: floor\n")
    check(
        err,
        file="release.yaml",
        field=None,
        line=1,
        contains=("expected a mapping", "got a list"),
    )


# -- compare.yaml -------------------------------------------------------------------------------


def test_compare_example_loads(write: Writer) -> None:
    write("compare.yaml", COMPARE_EXAMPLE)
    policy = load_compare_policy("compare.yaml", METRICS)
    assert isinstance(policy, ComparePolicy)
    (rule,) = policy.rules
    assert (rule.id, rule.kind, rule.metric, rule.margin) == (
        "label-no-regression",
        "non_inferiority",
        "exact_label",
        0.10,
    )


def test_superiority_margin_defaults_to_zero(write: Writer) -> None:
    write("compare.yaml", _rules("- {id: up, kind: superiority, metric: exact_label}"))
    (rule,) = load_compare_policy("compare.yaml", METRICS).rules
    assert rule.margin == 0.0


def test_unknown_compare_rule_kind(write: Writer) -> None:
    text = _rules("- id: up\n  kind: noninferiority\n  metric: exact_label\n  margin: 0.1")
    err = _compare_error(write, text)
    check(
        err,
        file="compare.yaml",
        field="rules[0].kind",
        line=line_of(text, "kind:"),
        contains=(
            "got 'noninferiority'",
            "accepted: superiority, non_inferiority, equivalence",
            "did you mean 'non_inferiority'?",
        ),
    )


@pytest.mark.parametrize("kind", ["non_inferiority", "equivalence"])
def test_margin_required(write: Writer, kind: str) -> None:
    text = _rules(f"- id: r\n  kind: {kind}\n  metric: exact_label")
    err = _compare_error(write, text)
    check(
        err,
        file="compare.yaml",
        field="rules[0].margin",
        line=line_of(text, "- id: r"),
        contains=(f"required for kind {kind}",),
    )


@pytest.mark.parametrize("margin", ["0", "-0.05"])
def test_margin_not_positive(write: Writer, margin: str) -> None:
    text = _rules(f"- id: r\n  kind: equivalence\n  metric: days_error\n  margin: {margin}")
    err = _compare_error(write, text)
    check(
        err,
        file="compare.yaml",
        field="rules[0].margin",
        line=line_of(text, "margin:"),
        contains=("must be greater than 0",),
    )


def test_binary_margin_must_be_a_rate(write: Writer) -> None:
    text = _rules("- id: r\n  kind: non_inferiority\n  metric: exact_label\n  margin: 10")
    err = _compare_error(write, text)
    check(
        err,
        file="compare.yaml",
        field="rules[0].margin",
        line=line_of(text, "margin:"),
        contains=("BINARY metric",),
    )


def test_compare_unknown_metric_and_duplicate_ids(write: Writer) -> None:
    text = _rules("- id: r\n  kind: superiority\n  metric: label")
    err = _compare_error(write, text)
    check(
        err,
        file="compare.yaml",
        field="rules[0].metric",
        line=line_of(text, "metric:"),
        contains=("unknown metric 'label'", "known metrics: days_error, exact_label"),
    )
    text = _rules(
        "- {id: r, kind: superiority, metric: exact_label}\n"
        "- {id: r, kind: superiority, metric: pii_free}"
    )
    err = _compare_error(write, text)
    check(
        err,
        file="compare.yaml",
        field="rules[1].id",
        line=line_of(text, "pii_free"),
        contains=("duplicate rule id 'r'",),
    )
