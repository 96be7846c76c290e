"""Metrics grouped by a metadata key (issue 13): each group with its own exact interval;
rules on one group or on every group. In-process runs on real projects."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import run_cli, write_project

import oloproof
from oloproof.stats.intervals import clopper_pearson_bounded

APP = """
from oloproof import system

@system(name="t", version="1")
def answer(case_input):
    # French answers are right 1 time in 2; the others 9 times in 10.
    wrong = case_input["n"] % 2 == 0 if case_input["lang"] == "fr" else case_input["n"] % 10 == 0
    return {"label": "no" if wrong else "ok"}
"""


def _cases() -> list[dict[str, object]]:
    cases: list[dict[str, object]] = []
    for i in range(60):
        lang = "fr" if i % 3 == 0 else "en"
        meta: dict[str, object] = {"lang": lang, "difficulty": "hard" if i < 20 else "easy"}
        if i == 59:
            del meta["difficulty"]
        cases.append({"id": f"c{i:02d}", "input": {"n": i // 3, "lang": lang},
                      "expected": {"label": "ok"}, "metadata": meta})
    return cases


EVALUATORS = """
- type: exact_match
  criterion: exact_label
  field: label
  group_by: [lang]
"""

RELEASE = """
version: 1
rules:
  - id: overall
    metric: exact_label
    min: 0.5
  - id: french
    metric: exact_label
    min: 0.8
    group: {lang: fr}
  - id: every-lang
    metric: exact_label
    max_failures: 5
    each_group: true
"""


def test_groups_have_their_own_intervals_and_rules(project_dir: Path) -> None:
    write_project(project_dir, app=APP, cases=_cases(), evaluators=EVALUATORS, release=RELEASE)
    result = oloproof.run(project_dir)
    assert list(result.metrics) == ["exact_label", "exact_label[lang=en]", "exact_label[lang=fr]"]
    fr = result.metrics["exact_label[lang=fr]"]
    en = result.metrics["exact_label[lang=en]"]
    assert (fr.passed, fr.observed, en.passed, en.observed) == (10, 20, 36, 40)
    exact = clopper_pearson_bounded(10, 20, 0, 0.95)
    assert (fr.lower, fr.upper) == (exact.lower, exact.upper)
    decisions = {d.rule: (d.metric, d.state) for d in result.decisions}
    assert decisions == {
        "overall": ("exact_label", "PASS"),
        "french": ("exact_label[lang=fr]", "FAIL"),
        "every-lang[lang=en]": ("exact_label[lang=en]", "PASS"),
        "every-lang[lang=fr]": ("exact_label[lang=fr]", "FAIL"),
    }
    assert result.exit_code == 1
    # Read back and re-decided: the same groups; and any metadata key can be grouped afterwards.
    back = oloproof.read_run(result.run_id, project_dir)
    assert [d.to_json() for d in back.decisions] == [d.to_json() for d in result.decisions]
    # Grouped afterwards by another key: each_group would then cover the group difficulty =
    # null, whose one case could never exceed a budget of 5 failures: refused (ALLOW is
    # earned); a policy without that rule regroups.
    with pytest.raises(oloproof.ConfigError, match=r"rules\[2\]\.max_failures: rule every-lang:"
                       r" max_failures: 5 .*\(1 case in the group difficulty = null\)"):
        oloproof.read_run(result.run_id, project_dir, group_by="difficulty")
    floors = project_dir / "floors.yaml"
    floors.write_text(RELEASE.split("  - id: every-lang")[0])
    regrouped = oloproof.read_run(result.run_id, project_dir, group_by="difficulty",
                                  policy=floors)
    assert "exact_label[difficulty=hard]" in regrouped.metrics
    assert regrouped.metrics["exact_label[difficulty=null]"].observed == 1
    plan = oloproof.plan(result, project=project_dir)
    assert [r.rule for r in plan.rules] == [d.rule for d in result.decisions]


def test_group_by_from_the_api_and_a_rule_on_an_ungrouped_metric(project_dir: Path) -> None:
    plain = "- {type: exact_match, criterion: exact_label, field: label}\n"
    write_project(project_dir, app=APP, cases=_cases(), evaluators=plain, release=RELEASE)
    with pytest.raises(oloproof.ConfigError, match=r"release.yaml:10: rules\[1\].group: rule french targets groups of metric exact_label, which is not grouped by lang"):
        oloproof.run(project_dir)
    assert not (project_dir / ".oloproof" / "store.sqlite").exists()
    # every-lang now covers the difficulty groups too, and the group difficulty = null has
    # one case: a budget of 5 failures could not be exceeded there (refused); 0 can.
    with pytest.raises(oloproof.ConfigError, match=r"difficulty = null"):
        oloproof.run(project_dir, group_by=["lang", "difficulty"])
    (project_dir / "release.yaml").write_text(RELEASE.replace("max_failures: 5", "max_failures: 0"))
    result = oloproof.run(project_dir, group_by=["lang", "difficulty"])
    assert list(result.metrics)[1:] == [
        "exact_label[lang=en]", "exact_label[lang=fr]",
        "exact_label[difficulty=easy]", "exact_label[difficulty=hard]",
        "exact_label[difficulty=null]",
    ]
    assert len(result.decisions) == 2 + 5  # overall, french, and every-lang on 5 groups


@pytest.mark.parametrize(("rule", "field"), [
    ("each_group: true", "each_group"), ("group: {lang: fr}", "group")])
def test_gate_and_plan_name_the_policy_file_line_of_a_rule_on_ungrouped_groups(
    project_dir: Path, rule: str, field: str
) -> None:
    plain = "- {type: exact_match, criterion: exact_label, field: label}\n"
    write_project(project_dir, app=APP, cases=_cases(), evaluators=plain)
    assert run_cli("run", cwd=project_dir).code == 0
    (project_dir / "v2.yaml").write_text(
        f"version: 1\nrules:\n  - id: r\n    metric: exact_label\n    min: 0.5\n    {rule}\n")
    key = "lang" if field == "group" else "KEY"
    what = "group_by: [lang]" if field == "group" else "group_by"
    for command in (["gate", "latest"], ["plan", "latest", "--run"]):
        result = run_cli(*command, "--policy", "v2.yaml", cwd=project_dir)
        assert (result.code, result.out) == (2, ""), result.text
        assert result.err == (
            f"oloproof {command[0]}: error: v2.yaml:6: rules[0].{field}: rule r targets groups"
            f" of metric exact_label, which has no {what}: declare it on the evaluator in"
            f" oloproof.yaml or pass --group-by {key}\n")


def test_group_and_each_group_together_are_refused(project_dir: Path) -> None:
    release = "version: 1\nrules:\n  - {id: x, metric: exact_label, min: 0.5, each_group: true, group: {lang: fr}}\n"
    write_project(project_dir, app=APP, cases=_cases(), evaluators=EVALUATORS, release=release)
    with pytest.raises(oloproof.ConfigError, match="declare group .* or each_group: true .*, not both"):
        oloproof.run(project_dir)


def test_each_group_in_a_family_shares_its_error(project_dir: Path) -> None:
    release = """
version: 1
families:
  langs: {multiplicity: bonferroni}
rules:
  - {id: floor, metric: exact_label, min: 0.4, each_group: true, family: langs}
"""
    write_project(project_dir, app=APP, cases=_cases(), evaluators=EVALUATORS, release=release)
    result = oloproof.run(project_dir)
    levels = {d.rule: d.confidence_level for d in result.decisions}
    # Two groups in a Bonferroni family at 95%: each decided at 97.5%.
    assert levels == {"floor[lang=en]": pytest.approx(0.975), "floor[lang=fr]": pytest.approx(0.975)}
    fr = next(d for d in result.decisions if d.rule == "floor[lang=fr]")
    exact = clopper_pearson_bounded(10, 20, 0, 0.975)
    assert (fr.lower, fr.upper) == (exact.lower, exact.upper)
