"""Issue 25, the five principles of "ALLOW is earned", each on its own (in-process: real
projects on disk, real stores, the Python API; the CLI paths are in
tests/trust/test_allow_earned_cli.py).

1. Zero observed is never a PASS: ``no_observed_cases`` for every rule kind.
2. A rule that cannot fail is refused at load.
3. A policy that cannot block is refused.
4. An evaluator that matches nothing is refused at load.
5. An outage is not "too few cases": consecutive failures stop the run; ``max_missing``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import labelled_cases, write_project
from tests.engine._trials import flaky_cases, flaky_project

import oloproof
from oloproof.enums import GateAction, MetricKind, RuleState
from oloproof.evidence import CriterionEvidence
from oloproof.policy.compare import CaseOutcome, decide_comparison, pair_metric
from oloproof.policy.decide import CANNOT_FAIL, NO_OBSERVED, decide_run, gate
from oloproof.project.config import ComparePolicy, ReleasePolicy

INSUFFICIENT = RuleState.INSUFFICIENT_EVIDENCE


def _policy(rules: list[dict[str, Any]], **more: Any) -> ReleasePolicy:
    return ReleasePolicy.validate({"version": 1, "rules": rules, **more})


def _missing_only(name: str, kind: MetricKind = MetricKind.BINARY, missing: int = 30,
                  excluded: int = 0, value_range: tuple[float, float] | None = None,
                  ) -> CriterionEvidence:
    ev = CriterionEvidence(name, kind, value_range)
    for _ in range(missing):
        ev.add("ERROR", None, None)
    for _ in range(excluded):
        ev.add("EXCLUDED", None, None)
    return ev


# -- 1. zero observed is never a PASS ---------------------------------------------------


@pytest.mark.parametrize(("missing", "excluded"), [(30, 0), (0, 30), (12, 18)])
@pytest.mark.parametrize("rule", [
    {"id": "r", "metric": "m", "min": 0.01},
    {"id": "r", "metric": "m", "max": 0.99},
    {"id": "r", "metric": "m", "kind": "observed_count", "max_failures": 0},
    {"id": "r", "metric": "m", "kind": "observed_count", "max_failures": 29},
])
def test_a_rate_rule_with_nothing_observed_is_insufficient(
    rule: dict[str, Any], missing: int, excluded: int
) -> None:
    evidence = {"m": _missing_only("m", missing=missing, excluded=excluded)}
    [d], _ = decide_run(evidence, _policy([rule], max_missing=1.0))
    assert (d.state, d.reason) == (INSUFFICIENT, NO_OBSERVED), d.detail
    assert d.detail.startswith(f"no observed case: 0 observed, {missing} missing, {excluded}"
                               " excluded"), d.detail


@pytest.mark.parametrize("rule", [
    {"id": "r", "metric": "days", "max": 5},
    {"id": "r", "metric": "days", "min": 1},
])
def test_a_mean_rule_with_nothing_observed_is_insufficient(rule: dict[str, Any]) -> None:
    for value_range in ((0.0, 30.0), None):
        evidence = {"days": _missing_only("days", MetricKind.MEAN, value_range=value_range)}
        [d], _ = decide_run(evidence, _policy([rule], max_missing=1.0))
        assert (d.state, d.reason) == (INSUFFICIENT, NO_OBSERVED)


def test_rules_in_a_family_with_nothing_observed_are_insufficient() -> None:
    seen = CriterionEvidence("a", MetricKind.BINARY)
    for i in range(100):
        seen.add("OK", True, None)
    evidence = {"a": seen, "b": _missing_only("b")}
    for method in ("holm", "bonferroni"):
        policy = _policy(
            [{"id": "ra", "metric": "a", "min": 0.5, "family": "f"},
             {"id": "rb", "metric": "b", "min": 0.01, "family": "f"}],
            families={"f": {"multiplicity": method}}, max_missing=1.0,
        )
        ra, rb = decide_run(evidence, policy)[0]
        assert ra.state == RuleState.PASS
        assert (rb.state, rb.reason) == (INSUFFICIENT, NO_OBSERVED), method


def test_trials_with_no_observed_trial_are_insufficient() -> None:
    ev = CriterionEvidence("m", MetricKind.BINARY, trials=3)
    for case in range(10):
        ev.add_case(f"c{case}", [("ERROR", None, None)] * 3)
    policy = _policy([
        {"id": "mean", "metric": "m", "min": 0.1},
        {"id": "any", "metric": "m", "min": 0.1, "aggregate": "pass_at_k"},
        {"id": "all", "metric": "m", "max": 0.9, "aggregate": "pass_all_k"},
        {"id": "count", "metric": "m", "kind": "observed_count", "max_failures": 5},
    ], max_missing=1.0)
    decisions = decide_run({"m": ev}, policy)[0]
    assert [(d.state, d.reason) for d in decisions] == [(INSUFFICIENT, NO_OBSERVED)] * 4
    assert "trials" in decisions[0].detail and "trials" in decisions[3].detail


def test_a_mean_over_trials_with_no_whole_case_is_insufficient() -> None:
    """Each case lost a trial: some trials are observed, but no case has a mean."""
    ev = CriterionEvidence("days", MetricKind.MEAN, (0.0, 30.0), trials=2)
    for case in range(10):
        ev.add_case(f"c{case}", [("OK", None, 1.0), ("ERROR", None, None)])
    [d], _ = decide_run({"days": ev}, _policy([{"id": "r", "metric": "days", "max": 5}],
                                              max_missing=1.0))
    assert (d.state, d.reason) == (INSUFFICIENT, NO_OBSERVED)


def test_an_unlisted_state_with_nothing_observed_warns_instead_of_allowing() -> None:
    evidence = {"m": _missing_only("m", missing=0, excluded=10)}
    policy = _policy([{"id": "r", "metric": "m", "min": 0.5}], block_on=["FAIL"])
    [d], _ = decide_run(evidence, policy)
    assert (d.state, d.action) == (INSUFFICIENT, GateAction.WARN)
    # The same state on observed evidence is the policy's to allow.
    seen = CriterionEvidence("m", MetricKind.BINARY)
    for i in range(4):
        seen.add("OK", i % 2 == 0, None)
    [d], _ = decide_run({"m": seen}, policy)
    assert (d.state, d.action) == (INSUFFICIENT, GateAction.ALLOW)


def test_a_comparison_rule_with_no_pair_is_insufficient() -> None:
    shared = [f"c{i}" for i in range(10)]
    candidate = {c: CaseOutcome("MISSING") for c in shared}
    baseline = {c: CaseOutcome("OBSERVED", True) for c in shared}
    pm = pair_metric("m", "BINARY", shared, candidate, baseline, 0.95)
    for kind, margin in (("superiority", 0.0), ("non_inferiority", 0.1), ("equivalence", 0.1)):
        policy = ComparePolicy.validate({
            "version": 1, "max_missing": 1.0,
            "rules": [{"id": "r", "kind": kind, "metric": "m", "margin": margin}],
        })
        [d] = decide_comparison({"m": pm}, policy)
        assert (d.state, d.reason) == (INSUFFICIENT, NO_OBSERVED), kind
        assert "10 pairs dropped as missing" in d.detail


def test_a_corrected_estimate_of_a_judge_with_no_verdict_is_insufficient() -> None:
    """A rule on the prediction-powered estimate, when the judge gave no verdict at all."""
    policy = _policy([{"id": "c", "metric": "m", "min": 0.5, "estimate": "corrected"}],
                     max_missing=1.0)
    [d], _ = decide_run({"m": _missing_only("m")}, policy, labelled={})
    assert (d.state, d.reason, d.basis) == (INSUFFICIENT, NO_OBSERVED, "corrected")


def test_groups_with_nothing_observed(project_dir: Path) -> None:
    """Through a real run: a group whose every case failed is never a PASS, one group rule
    or each group's."""
    app = ('from oloproof import system\n\n@system(name="t", version="1")\n'
           'def answer(inp):\n    if inp["lang"] == "fr":\n        raise RuntimeError("no")\n'
           '    return {"label": "ok"}\n')
    cases = [{"id": f"c{i:02d}", "input": {"n": i, "lang": "fr" if i % 5 == 0 else "en"},
              "expected": {"label": "ok"}, "metadata": {"lang": "fr" if i % 5 == 0 else "en"}}
             for i in range(40)]
    release = ("version: 1\nmax_missing: 1\nrules:\n"
               "  - {id: fr, metric: exact_label, min: 0.9, group: {lang: fr}}\n"
               "  - {id: each, metric: exact_label, max_failures: 0, each_group: true}\n")
    evaluators = "- {type: exact_match, criterion: exact_label, field: label, group_by: [lang]}\n"
    write_project(project_dir, app=app, cases=cases, evaluators=evaluators, release=release)
    result = oloproof.run(project_dir)
    decisions = {d.rule: d for d in result.decisions}
    assert (decisions["fr"].state, decisions["fr"].reason) == (INSUFFICIENT, NO_OBSERVED)
    assert (decisions["each[lang=fr]"].state, decisions["each[lang=fr]"].reason) == (
        INSUFFICIENT, NO_OBSERVED)
    assert decisions["each[lang=en]"].state == RuleState.PASS
    assert result.exit_code == 3


# -- 2. a rule that cannot fail is refused at load ------------------------------------

APP_OK = ('from oloproof import system\n\n@system(name="t", version="1")\n'
          'def answer(inp):\n    return {"label": "ok", "days": inp["n"] % 5}\n')
MEAN_EV = ("- {type: exact_match, criterion: exact_label, field: label}\n"
           "- {type: absolute_error, criterion: days, field: days, range: [0, 30]}\n")


def _days_cases(n: int, lang: str | None = None) -> list[dict[str, Any]]:
    return [{"id": f"c{i:03d}", "input": {"n": i}, "expected": {"label": "ok", "days": 2},
             "metadata": {"lang": lang or ("fr" if i % 4 == 0 else "en")}} for i in range(n)]


def _refused(root: Path, release: str, *needles: str, **run: Any) -> str:
    (root / "release.yaml").write_text(release)
    with pytest.raises(oloproof.ConfigError) as caught:
        oloproof.run(root, **run)
    message = str(caught.value)
    for needle in needles:
        assert needle in message, (needle, message)
    return message


@pytest.mark.parametrize(("rule", "needle"), [
    ("{id: r, metric: exact_label, min: 0}", "rules[0].min: rule r: min: 0 on a rate cannot fail"),
    ("{id: r, metric: exact_label, min: 0.0}", "rules[0].min: rule r: min: 0 on a rate cannot fail"),
    ("{id: r, metric: exact_label, max: 1}", "rules[0].max: rule r: max: 1 on a rate cannot fail"),
    ("{id: r, metric: exact_label, max: 1, aggregate: pass_at_k}", "rules[0].max: rule r: max: 1 on a rate"),
    ("{id: r, metric: days, max: 30}", "rules[0].max: rule r: max: 30 is at or above the top of days's declared range [0, 30]"),
    ("{id: r, metric: days, max: 31}", "rules[0].max: rule r: max: 31 is at or above the top"),
    ("{id: r, metric: days, min: 0}", "rules[0].min: rule r: min: 0 is at or below the bottom of days's declared range [0, 30]"),
    ("{id: r, metric: days, min: -5}", "rules[0].min: rule r: min: -5 is at or below the bottom"),
])
def test_a_threshold_at_or_beyond_its_edge_is_refused(
    project_dir: Path, rule: str, needle: str
) -> None:
    write_project(project_dir, app=APP_OK, cases=_days_cases(20), evaluators=MEAN_EV,
                  release="version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.5}\n")
    _refused(project_dir, f"version: 1\nrules:\n  - {rule}\n", "release.yaml:3: " + needle)
    assert not (project_dir / ".oloproof" / "store.sqlite").exists()


def test_a_refused_threshold_is_quoted_as_written(project_dir: Path) -> None:
    """The refusal quoted a threshold with %g: max: 0.9999999999999999 read 'max: 1', a rule
    the user did not write (and min: 0.1234567 'min: 0.123457')."""
    write_project(project_dir, app=APP_OK, cases=_days_cases(20), evaluators=MEAN_EV,
                  release="version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.5}\n")
    for written in ("max: 0.9999999999999999", "min: 0.0001234567"):
        _refused(project_dir, f"version: 1\nrules:\n  - {{id: r, metric: exact_label, {written}}}\n",
                 f"release.yaml:3: rules[0].{written[:3]}: rule r: {written} cannot fail on the 20"
                 " cases")


def test_thresholds_that_the_suite_can_fail_run(project_dir: Path) -> None:
    # 20 scores all at the top of [0, 30] have a betting interval of [23.62, 30] (issue 33),
    # all at the bottom [0, 6.38]: a ceiling under 23.6 and a floor over 6.4 can fail.
    release = ("version: 1\nrules:\n  - {id: a, metric: exact_label, min: 0.2}\n"
               "  - {id: b, metric: exact_label, max: 0.8}\n"
               "  - {id: c, metric: days, max: 20}\n  - {id: d, metric: days, min: 10}\n")
    write_project(project_dir, app=APP_OK, cases=_days_cases(20), evaluators=MEAN_EV,
                  release=release)
    assert len(oloproof.run(project_dir).decisions) == 4


@pytest.mark.parametrize(("bound", "level"), [
    ("min: 0.5", 0.95), ("min: 0.1", 0.95), ("min: 0.05", 0.95), ("max: 0.9", 0.95),
    ("max: 0.7", 0.99), ("min: 0.3", 0.9),
])
def test_a_rate_rule_the_suite_cannot_fail_is_refused_until_it_can(
    project_dir: Path, bound: str, level: float
) -> None:
    """Inside the edges, a rate can still be beyond what the suite can show: 0 of n
    failing a floor t still has a Clopper-Pearson upper bound of 1 - (a/2)^(1/n) >= t.
    The fewest cases that can fail it, from scipy, is named; with them the rule runs."""
    from scipy.stats import beta

    side, value = bound.split(": ")
    t = float(value)
    alpha = 1 - level

    def can_fail(n: int) -> bool:
        if side == "min":
            return bool(beta.ppf(1 - alpha / 2, 1, n) < t)  # all failing: upper < t
        return bool(beta.ppf(alpha / 2, n, 1) > t)  # all passing: lower > t

    needed = next(n for n in range(1, 100_000) if can_fail(n))
    assert not can_fail(needed - 1)
    release = f"version: 1\nconfidence_level: {level}\nrules:\n  - {{id: r, metric: exact_label, {bound}}}\n"
    write_project(project_dir, app=APP_OK, cases=labelled_cases(needed - 1), release=release)
    message = _refused(project_dir, release, f"rules[0].{side}: rule r: {side}: {value} cannot"
                       f" fail on the {needed - 1} cases of")
    assert f"it takes at least {needed} cases" in message
    write_project(project_dir, app=APP_OK, cases=labelled_cases(needed), release=release)
    assert len(oloproof.run(project_dir).decisions) == 1


def test_a_budget_is_checked_against_its_own_scope(project_dir: Path) -> None:
    """The whole suite; one group (its cases only); each group; failed trials (cases ×
    trials); an aggregate over trials (one outcome per case)."""
    write_project(project_dir, app=APP_OK, cases=_days_cases(20),
                  evaluators="- {type: exact_match, criterion: exact_label, field: label,"
                             " group_by: [lang]}\n",
                  release="version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.5}\n")
    head = "version: 1\nrules:\n  - "
    _refused(project_dir, head + "{id: r, metric: exact_label, max_failures: 20}\n",
             "max_failures: 20 allows as many failures as there can be (20 cases in",
             "(accepted: a whole number from 0 to 19)")
    _refused(project_dir, head + "{id: r, metric: exact_label, max_failures: 5, group: {lang: fr}}\n",
             "(5 cases in the group lang = 'fr')")
    _refused(project_dir, head + "{id: r, metric: exact_label, max_failures: 5, each_group: true}\n",
             "(5 cases in the group lang = fr)")
    _refused(project_dir, head + "{id: r, metric: exact_label, max_failures: 60}\n",
             "(20 cases × 3 trials = 60 trials in", "counts failed trials", trials=3)
    _refused(project_dir, head + "{id: r, metric: exact_label, max_failures: 20,"
             " aggregate: pass_at_k}\n", "(20 cases in", trials=3)
    # One fewer than the scope: each of these can fail, and runs.
    (project_dir / "release.yaml").write_text(
        head + "{id: a, metric: exact_label, max_failures: 19}\n"
        "  - {id: b, metric: exact_label, max_failures: 4, group: {lang: fr}}\n"
        "  - {id: c, metric: exact_label, max_failures: 4, each_group: true}\n"
        "  - {id: d, metric: exact_label, max_failures: 59}\n"
        "  - {id: e, metric: exact_label, max_failures: 19, aggregate: pass_at_k}\n")
    result = oloproof.run(project_dir, trials=3)
    assert result.exit_code == 0, result.summary()


def test_a_group_no_case_has_is_refused_with_the_values_it_has(project_dir: Path) -> None:
    write_project(project_dir, app=APP_OK, cases=_days_cases(20),
                  evaluators="- {type: exact_match, criterion: exact_label, field: label,"
                             " group_by: [lang]}\n",
                  release="version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.5}\n")
    _refused(project_dir, "version: 1\nrules:\n  - {id: r, metric: exact_label, min: 0.5,"
             " group: {lang: eng}}\n", "rules[0].group.lang: rule r: no case of",
             "has lang = 'eng'", "(accepted: en, fr; did you mean 'en'?)")
    (project_dir / "release.yaml").write_text(
        "version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.5}\n")
    # A stored run checks a --policy against its own cases the same way.
    result = oloproof.run(project_dir)
    other = project_dir / "other.yaml"
    other.write_text("version: 1\nrules:\n  - {id: r, metric: exact_label, min: 0.5,"
                     " group: {lang: de}}\n")
    with pytest.raises(oloproof.ConfigError, match=rf"other.yaml:3: rules\[0\].group.lang:"
                       rf" rule r: no case of run {result.run_id} has lang = 'de'"):
        oloproof.read_run(result.run_id, project_dir, policy=other)
    other.write_text("version: 1\nrules:\n  - {id: r, metric: exact_label, max_failures: 20}\n")
    with pytest.raises(oloproof.ConfigError, match=rf"\(20 cases in run {result.run_id}\)"):
        oloproof.read_run(result.run_id, project_dir, policy=other)


def test_a_stored_policy_that_cannot_fail_is_refused_by_gate(project_dir: Path) -> None:
    """A run stored by an earlier version under a policy refused today: `gate` does not
    re-decide it as if it could fail, and says how to decide it under another policy."""
    write_project(project_dir, app=APP_OK, cases=_days_cases(20),
                  release="version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.5}\n")
    result = oloproof.run(project_dir)
    store = project_dir / ".oloproof" / "store.sqlite"
    conn = sqlite3.connect(store)
    try:
        stored = {"version": 1, "rules": [{"id": "ok", "metric": "exact_label",
                                           "kind": "observed_count", "max_failures": 100}]}
        conn.execute("UPDATE runs SET policy_json = ? WHERE id = ?",
                     (json.dumps(stored), result.run_id))
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(oloproof.ConfigError, match=rf"the policy stored with {result.run_id}"
                       r" \(.*release.yaml\): rules\[0\].max_failures: .*--policy FILE"):
        oloproof.read_run(result.run_id, project_dir)


def test_a_comparison_margin_beyond_a_mean_range_is_refused(project_dir: Path) -> None:
    write_project(project_dir, app=APP_OK, cases=_days_cases(20), evaluators=MEAN_EV,
                  release="version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.5}\n")
    a = oloproof.run(project_dir)
    b = oloproof.run(project_dir, use_cache=False)
    policy = project_dir / "cmp.yaml"
    policy.write_text("version: 1\nrules:\n  - {id: r, kind: equivalence, metric: days,"
                      " margin: 30}\n")
    with pytest.raises(oloproof.ConfigError, match=r"cmp.yaml:3: rules\[0\].margin: rule r:"
                       r" margin 30 is at or beyond the widest difference days can show"):
        oloproof.compare(a, b, project=project_dir, policy=policy)
    policy.write_text("version: 1\nrules:\n  - {id: r, kind: equivalence, metric: days,"
                      " margin: 3}\n")
    assert oloproof.compare(a, b, project=project_dir, policy=policy).decisions


# -- 3. a policy that cannot block is refused ------------------------------------------


def test_a_release_policy_without_rules_is_refused(project_dir: Path) -> None:
    write_project(project_dir, app=APP_OK, cases=labelled_cases(5), release="version: 1\n")
    _refused(project_dir, "version: 1\n", "release.yaml:1: rules: the release policy declares"
             " no rules", "policy: none")
    _refused(project_dir, "version: 1\nrules: []\n", "release.yaml:2: rules:")


def test_block_on_must_hold_fail_unless_fail_is_declared_in_warn_on(project_dir: Path) -> None:
    write_project(project_dir, app=APP_OK, cases=labelled_cases(6), release="version: 1\n")
    rule = "rules:\n  - {id: r, metric: exact_label, min: 0.5}\n"
    for block_on in ("[]", "[INSUFFICIENT_EVIDENCE]", "[MANUAL_REVIEW, INSUFFICIENT_EVIDENCE]"):
        _refused(project_dir, f"version: 1\nblock_on: {block_on}\n{rule}",
                 "release.yaml:2: block_on: FAIL is not in block_on")
    (project_dir / "release.yaml").write_text(f"version: 1\nblock_on: []\nwarn_on: [FAIL]\n{rule}")
    result = oloproof.run(project_dir)
    assert result.declaration is not None and "FAIL does not block, by declaration" in result.declaration


def test_a_comparison_policy_that_cannot_block_is_refused(project_dir: Path) -> None:
    write_project(project_dir, app=APP_OK, cases=labelled_cases(5),
                  release="version: 1\nrules:\n  - {id: ok, metric: exact_label, min: 0.9}\n")
    a = oloproof.run(project_dir)
    b = oloproof.run(project_dir, use_cache=False)
    policy = project_dir / "cmp.yaml"
    policy.write_text("version: 1\nrules: []\n")
    with pytest.raises(oloproof.ConfigError, match=r"cmp.yaml:2: rules: the comparison policy"
                       r" declares no rules"):
        oloproof.compare(a, b, project=project_dir, policy=policy)
    policy.write_text("version: 1\nblock_on: [INSUFFICIENT_EVIDENCE]\nrules:\n"
                      "  - {id: r, kind: superiority, metric: exact_label}\n")
    with pytest.raises(oloproof.ConfigError, match=r"cmp.yaml:2: block_on: FAIL is not in"):
        oloproof.compare(a, b, project=project_dir, policy=policy)


# -- 4. an evaluator that matches nothing is refused at load -----------------------------


@pytest.mark.parametrize(("evaluator", "needle"), [
    ("{type: exact_match, criterion: c, field: lable}", "evaluators[0].field: no case of"),
    ("{type: contains, criterion: c, field: null, expected_field: answr}",
     "evaluators[0].expected_field: no case of"),
    ("{type: absolute_error, criterion: c, field: day}", "evaluators[0].field: no case of"),
    ("{type: exact_match, criterion: c, field: label, expected_field: gold.labl}",
     "has expected.gold.labl"),
])
def test_an_evaluator_field_no_case_holds_is_refused(
    project_dir: Path, evaluator: str, needle: str
) -> None:
    cases = [{"id": f"c{i}", "input": {"n": i},
              "expected": {"label": "ok", "answer": "x", "days": 1, "gold": {"label": "ok"}}}
             for i in range(5)]
    write_project(project_dir, app=APP_OK, cases=cases, evaluators=f"- {evaluator}\n")
    with pytest.raises(oloproof.ConfigError) as caught:
        oloproof.run(project_dir)
    assert needle in str(caught.value), str(caught.value)
    assert "(accepted: a key of the cases' expected: answer, days, gold, label)" in str(caught.value)


def test_an_evaluator_fed_by_some_cases_runs(project_dir: Path) -> None:
    cases = [{"id": f"c{i}", "input": {"n": i}, **({"expected": {"label": "ok"}} if i < 2 else {})}
             for i in range(6)]
    write_project(project_dir, app=APP_OK, cases=cases,
                  release="version: 1\nrules:\n  - {id: r, metric: exact_label, max_failures: 1}\n")
    result = oloproof.run(project_dir)
    assert result.metrics["exact_label"].excluded == 4 and result.exit_code == 0


def test_an_evaluator_without_any_expected_is_refused(project_dir: Path) -> None:
    cases = [{"id": f"c{i}", "input": {"n": i}} for i in range(5)]
    write_project(project_dir, app=APP_OK, cases=cases)
    with pytest.raises(oloproof.ConfigError, match=r"oloproof.yaml:\d+: evaluators\[0\]:"
                       r" exact_match \(exact_label\) compares .* no case of .* has an expected"):
        oloproof.run(project_dir)


# -- 5. an outage is not "too few cases" ------------------------------------------------

FLAKY = ('from oloproof import system\n\n@system(name="t", version="1")\n'
         'def answer(inp):\n    if inp["n"] % {every} == 0:\n'
         '        raise RuntimeError("lost")\n    return {{"label": "ok"}}\n')


def test_consecutive_failures_stop_the_run_naming_the_callable(project_dir: Path) -> None:
    """A system whose every call times out (its backend hangs): an outage. (A call that
    fails by an exception of its own is the case's: it neither counts nor breaks the row.)"""
    app = ('import time\nfrom oloproof import system\n\n@system(name="t", version="1")\n'
           'def answer(inp):\n    time.sleep(1)\n')
    write_project(project_dir, app=app, cases=labelled_cases(50), concurrency=(1, 1),
                  system_extra="timeout_s: 0.1",
                  release="version: 1\nwarn_on: [INSUFFICIENT_EVIDENCE]\n"
                  "block_on: [FAIL]\nrules:\n  - {id: r, metric: exact_label, min: 0.5}\n")
    config = project_dir / "oloproof.yaml"
    config.write_text(config.read_text() + "limits:\n  max_consecutive_failures: 3\n")
    result = oloproof.run(project_dir)
    assert (result.status, result.completeness, result.exit_code) == ("RUN_ERROR", "PARTIAL", 5)
    assert result.stop_reason is not None
    assert result.stop_reason.startswith(
        "stopped early: system test-system (callable app:answer) failed 3 calls in a row")
    assert "first error: no answer within timeout_s = 0.1s" in result.stop_reason
    assert len(list(result.cases())) == 3


def test_errors_of_the_system_s_own_are_not_an_outage(project_dir: Path) -> None:
    """Every call raises an error of its own (not retryable): the run goes to its end (no
    outage), and then, no call of the system having succeeded, it is incomplete (SPEC §5:
    RUN_ERROR/PARTIAL, exit 5), naming the callable."""
    app = ('from oloproof import system\n\n@system(name="t", version="1")\n'
           'def answer(inp):\n    raise ValueError("bad input")\n')
    write_project(project_dir, app=app, cases=labelled_cases(20), concurrency=(1, 1),
                  release="version: 1\nrules:\n  - {id: r, metric: exact_label, min: 0.5}\n")
    result = oloproof.run(project_dir)
    assert (result.status, result.completeness, result.exit_code) == ("RUN_ERROR", "PARTIAL", 5)
    assert len(list(result.cases())) == 20 and not result.decisions
    assert result.stop_reason == (
        "incomplete: system test-system (callable app:answer) failed on every call (all 20"
        " calls), so the run holds no result of it; first error: ValueError: bad input")


def test_failures_between_successes_are_not_an_outage(project_dir: Path) -> None:
    """Every third call fails (a third missing): never 8 in a row, but more than
    max_missing: incomplete evidence, whatever warn_on says."""
    write_project(project_dir, app=FLAKY.format(every=3), cases=labelled_cases(30),
                  concurrency=(1, 1),
                  release="version: 1\nwarn_on: [INSUFFICIENT_EVIDENCE]\nblock_on: [FAIL]\n"
                  "rules:\n  - {id: r, metric: exact_label, min: 0.5}\n")
    result = oloproof.run(project_dir)
    assert (result.status, result.completeness) == ("DECIDED", "COMPLETE")
    [d] = result.decisions
    assert d.incomplete and d.action == GateAction.BLOCK
    assert d.missing_share == pytest.approx(10 / 30)
    assert "33.3% of the cases missing, over max_missing 20%: incomplete evidence" in d.detail
    assert result.exit_code == 5
    assert result.gate_notes and result.gate_notes[0].startswith(
        "Incomplete evidence: r (33.3% missing): more than max_missing 20%")
    # gate re-decides the stored run identically, and under another policy by its own limit.
    back = oloproof.read_run(result.run_id, project_dir)
    assert [x.to_json() for x in back.decisions] == [x.to_json() for x in result.decisions]
    assert back.exit_code == 5
    looser = project_dir / "looser.yaml"
    looser.write_text((project_dir / "release.yaml").read_text() + "max_missing: 0.4\n")
    relaxed = oloproof.read_run(result.run_id, project_dir, policy=looser)
    assert relaxed.exit_code == 0 and not relaxed.decisions[0].incomplete
    assert (relaxed.gate, relaxed.decisions[0].state) == (GateAction.WARN, INSUFFICIENT)


@pytest.mark.parametrize(("every", "incomplete"), [(5, False), (4, True)])
def test_max_missing_may_be_reached_not_passed(
    project_dir: Path, every: int, incomplete: bool
) -> None:
    """20 cases, every 5th missing: exactly 20%, allowed; every 4th: 25%, incomplete."""
    write_project(project_dir, app=FLAKY.format(every=every), cases=labelled_cases(20),
                  concurrency=(1, 1),
                  release="version: 1\nrules:\n  - {id: r, metric: exact_label, max_failures: 5}\n")
    result = oloproof.run(project_dir)
    [d] = result.decisions
    assert d.incomplete is incomplete
    assert result.exit_code == (5 if incomplete else 0), result.summary()


def test_max_missing_over_trials_counts_trials(tmp_path: Path) -> None:
    # 20 cases, 3 trials; 10 cases lose their trial 2: 10 of 60 trials missing (16.7%).
    cases = flaky_cases(20, 0, 0, **{f"c{i:03d}": {"fail_on": [2]} for i in range(0, 20, 2)})
    root = flaky_project(tmp_path / "p", cases, trials=3, release=(
        "version: 1\nmax_missing: 0.1\nrules:\n  - {id: r, metric: exact_label, min: 0.5}\n"))
    result = oloproof.run(root)
    [d] = result.decisions
    assert d.missing_share == pytest.approx(10 / 60) and d.incomplete
    assert "16.7% of the trials missing, over max_missing 10%" in d.detail
    assert result.exit_code == 5


def test_gate_blocks_an_incomplete_rule_unless_a_fail_blocks() -> None:
    ev = CriterionEvidence("m", MetricKind.BINARY)
    for i in range(20):
        ev.add("OK", False, None) if i < 15 else ev.add("ERROR", None, None)
    policy = _policy([{"id": "r", "metric": "m", "min": 0.9}])
    [d], _ = decide_run({"m": ev}, policy)
    assert d.state == RuleState.FAIL and d.incomplete  # 25% missing, and a visible FAIL
    assert gate([d]) == (GateAction.BLOCK, 1)
    warned = _policy([{"id": "r", "metric": "m", "min": 0.9}], block_on=[], warn_on=["FAIL"])
    [d], _ = decide_run({"m": ev}, warned)
    # FAIL is declared not to block: the rule warns, and the gate is incomplete all the same.
    assert d.action == GateAction.WARN and gate([d]) == (GateAction.BLOCK, 5)


def test_a_comparison_with_a_failed_candidate_is_incomplete(project_dir: Path) -> None:
    """A candidate whose cases failed but one (q001), against a good baseline, with warn_on:
    [INSUFFICIENT_EVIDENCE]: incomplete (exit 5), never an ALLOW. A candidate whose every
    case failed is itself stopped (SPEC §5), and a comparison with it blocks (exit 5)."""
    # 6 cases: fewer than the 8 failures in a row that would stop the candidate's run.
    write_project(project_dir, app=FLAKY.format(every=1000), cases=labelled_cases(6),
                  concurrency=(1, 1), policy="none")
    base = oloproof.run(project_dir)
    (project_dir / "app.py").write_text(FLAKY.format(every=1))
    stopped = oloproof.run(project_dir)
    assert (stopped.status, stopped.exit_code) == ("RUN_ERROR", 5)
    policy = project_dir / "cmp.yaml"
    policy.write_text("version: 1\nblock_on: [FAIL]\nwarn_on: [INSUFFICIENT_EVIDENCE]\nrules:\n"
                      "  - {id: r, kind: non_inferiority, metric: exact_label, margin: 0.1}\n")
    cmp = oloproof.compare(stopped, base, project=project_dir, policy=policy)
    assert (cmp.decisions, cmp.gate, cmp.exit_code) == ([], GateAction.BLOCK, 5)
    (project_dir / "app.py").write_text(FLAKY.format(every=1).replace("% 1 == 0", "!= 1"))
    cand = oloproof.run(project_dir)
    cmp = oloproof.compare(cand, base, project=project_dir, policy=policy)
    [d] = cmp.decisions
    assert (d.state, d.incomplete) == (INSUFFICIENT, True)
    assert cmp.exit_code == 5
    assert cmp.document["gate_notes"][0].startswith("Incomplete evidence: r (83.3% missing)")


def test_limits_max_consecutive_failures_is_checked(project_dir: Path) -> None:
    write_project(project_dir, app=APP_OK, cases=labelled_cases(5))
    config = project_dir / "oloproof.yaml"
    config.write_text(config.read_text() + "limits:\n  max_consecutive_failures: 0\n")
    with pytest.raises(oloproof.ConfigError, match=r"limits.max_consecutive_failures: must be at"
                       r" least 1, got 0"):
        oloproof.run(project_dir)


def test_a_share_just_over_max_missing_never_prints_as_the_bar() -> None:
    ev = CriterionEvidence("m", MetricKind.BINARY)
    for i in range(2500):
        ev.add("ERROR", None, None) if i < 501 else ev.add("OK", True, None)
    [d], _ = decide_run({"m": ev}, _policy([{"id": "r", "metric": "m", "min": 0.5}]))
    assert d.incomplete and d.missing_share == pytest.approx(501 / 2500)
    assert "20.04% of the cases missing, over max_missing 20%" in d.detail, d.detail
    # Reaching the bar exactly is allowed: 2 of 10.
    exact = CriterionEvidence("m", MetricKind.BINARY)
    for i in range(10):
        exact.add("ERROR", None, None) if i < 2 else exact.add("OK", True, None)
    [d], _ = decide_run({"m": exact}, _policy([{"id": "r", "metric": "m", "min": 0.5}]))
    assert d.missing_share == pytest.approx(0.2) and not d.incomplete


# -- 6. what only the run shows: evidence that could not have failed ------------------
# The load checks size a rule's scope from the suite; the cases an evaluator excludes (a
# typo in some cases' expected, a custom evaluator that applies to few) are known only
# once the run is made. A rule whose observed cases could not have made it FAIL, whatever
# their outcomes, is INSUFFICIENT_EVIDENCE (evidence_cannot_fail), never a PASS.


def _seen(observed: int, passed: int, excluded: int, trials: int = 1) -> CriterionEvidence:
    """``observed`` cases (``passed`` of them right) and ``excluded`` more."""
    ev = CriterionEvidence("m", MetricKind.BINARY, trials=trials)
    for i in range(observed + excluded):
        if trials > 1:
            outcome = ("EXCLUDED", None, None) if i >= observed else ("OK", i < passed, None)
            ev.add_case(f"c{i:03d}", [outcome] * trials)
        elif i >= observed:
            ev.add("EXCLUDED", None, None)
        else:
            ev.add("OK", i < passed, None)
    return ev


def test_a_budget_over_the_observed_cases_cannot_pass() -> None:
    """The finding: 40 cases, 39 excluded by a typo, max_failures: 5: PASS on 1 case."""
    policy = _policy([{"id": "few", "metric": "m", "max_failures": 5}])
    [d], _ = decide_run({"m": _seen(1, 0, 39)}, policy)
    assert (d.state, d.reason) == (INSUFFICIENT, CANNOT_FAIL)
    assert d.detail.startswith("1 case in scope after 39 excluded: no outcome of it could"
                               " fail `max_failures: 5`; the rule alone: PASS (1 failed"), d.detail
    assert gate([d]) == (GateAction.BLOCK, 3)
    # 5 observed cases cannot exceed 5 failures either; 6 can, and are decided as before.
    [d], _ = decide_run({"m": _seen(5, 5, 35)}, policy)
    assert (d.state, d.reason) == (INSUFFICIENT, CANNOT_FAIL)
    assert d.detail.startswith("5 cases in scope after 35 excluded: no outcome of those 5")
    [d], _ = decide_run({"m": _seen(6, 1, 34)}, policy)
    assert (d.state, d.reason) == (RuleState.PASS, "failures_within_budget")
    [d], _ = decide_run({"m": _seen(6, 0, 34)}, policy)
    assert d.state == RuleState.FAIL
    # Over trials the rule counts failed trials: 2 cases × 3 trials can exceed 5 failures.
    [d], _ = decide_run({"m": _seen(1, 0, 39, trials=3)}, policy)
    assert (d.state, d.reason) == (INSUFFICIENT, CANNOT_FAIL)
    assert d.detail.startswith("3 trials in scope after 117 excluded"), d.detail
    [d], _ = decide_run({"m": _seen(2, 2, 38, trials=3)}, policy)
    assert d.state == RuleState.PASS


def _smallest_n(fails: Any) -> int:
    return next(n for n in range(1, 10_000) if fails(n))


@pytest.mark.parametrize(("rule", "level", "family"), [
    ({"min": 0.02}, 0.95, None),
    ({"max": 0.7}, 0.95, None),
    ({"min": 0.1}, 0.9, None),
    # Bonferroni over two rules decides each at 97.5%: the boundary moves with it.
    ({"min": 0.02}, 0.975, "bonferroni"),
])
def test_a_rate_rule_is_decided_from_the_smallest_n_at_which_it_can_fail(
    rule: dict[str, float], level: float, family: str | None
) -> None:
    """The boundary, from scipy's Clopper–Pearson interval: below the smallest n at which
    the worst outcome FAILs, even the best outcome is not a PASS; from it on, the rule is
    decided as the interval says."""
    from scipy.stats import binomtest

    def ci(k: int, n: int) -> Any:
        return binomtest(k, n).proportion_ci(level, method="exact")

    floor = "min" in rule
    t = rule.get("min", rule.get("max"))
    assert t is not None
    n0 = _smallest_n((lambda n: ci(0, n).high < t) if floor else (lambda n: ci(n, n).low > t))
    rules = [{"id": "r", "metric": "m", **rule}]
    more: dict[str, Any] = {"confidence_level": 0.95 if family else level}
    if family:
        rules = [{**rules[0], "family": "f"}, {"id": "other", "metric": "m", "max": 0.99,
                                               "family": "f"}]
        more["families"] = {"f": {"multiplicity": family}}
    policy = _policy(rules, **more)
    best = (lambda n: n) if floor else (lambda n: 0)
    worst = (lambda n: 0) if floor else (lambda n: n)
    below = decide_run({"m": _seen(n0 - 1, best(n0 - 1), 400 - n0)}, policy)[0][0]
    # The best outcome would have passed on its own...
    alone = ci(best(n0 - 1), n0 - 1)
    assert (alone.low >= t) if floor else (alone.high <= t)
    # ...and is not a PASS, since no outcome of n0 - 1 cases could have failed.
    assert (below.state, below.reason) == (INSUFFICIENT, CANNOT_FAIL), below.detail
    assert below.detail.startswith(f"{n0 - 1} cases in scope after {400 - n0} excluded:")
    assert f"could fail `{'min' if floor else 'max'}: {t:g}`: even if every case" in below.detail
    at = decide_run({"m": _seen(n0, best(n0), 400 - n0)}, policy)[0][0]
    assert at.state == RuleState.PASS, at.detail
    failed = decide_run({"m": _seen(n0, worst(n0), 400 - n0)}, policy)[0][0]
    assert failed.state == RuleState.FAIL, failed.detail


def test_a_rule_passes_only_where_the_opposite_outcome_would_fail() -> None:
    """Over trials (betting on case pass fractions) and on a MEAN with a range (betting),
    with the rest of the suite excluded: at every number of observed cases, the best outcome
    is a PASS exactly when the worst outcome at the same number is a FAIL."""
    def rate(cases: int, right: bool) -> CriterionEvidence:
        return _seen(cases, cases if right else 0, 60 - cases, trials=3)

    def mean(cases: int, right: bool) -> CriterionEvidence:
        ev = CriterionEvidence("m", MetricKind.MEAN, (0.0, 10.0))
        for i in range(60):
            if i < cases:
                ev.add("OK", None, 0.0 if right else 10.0, case_id=f"c{i:02d}")
            else:
                ev.add("EXCLUDED", None, None, case_id=f"c{i:02d}")
        return ev

    for make, rule in ((rate, {"min": 0.2}), (mean, {"max": 8})):
        policy = _policy([{"id": "r", "metric": "m", **rule}])
        seen = set()
        for cases in range(1, 40):
            [best], _ = decide_run({"m": make(cases, True)}, policy)
            [worst], _ = decide_run({"m": make(cases, False)}, policy)
            assert (best.state == RuleState.PASS) == (worst.state == RuleState.FAIL), cases
            assert best.state in (RuleState.PASS, INSUFFICIENT)
            seen.add(best.reason)
        # Some numbers of cases gave a PASS alone that could not have failed, and more passed.
        assert CANNOT_FAIL in seen and len(seen - {CANNOT_FAIL, "interval_contains_threshold"})


def test_missing_cases_are_in_the_scope_excluded_ones_are_not() -> None:
    """A missing case is in the rule's scope (it could have failed: the rule's interval and
    max_missing bound it); an excluded one is not. 5 cases in scope, max_failures: 5 (with
    max_missing: 1 so that the share does not block first): cannot fail; 6 can."""
    policy = _policy([{"id": "r", "metric": "m", "max_failures": 5}], max_missing=1.0)
    for missing, state in ((4, INSUFFICIENT), (5, RuleState.PASS)):
        ev = _seen(1, 1, 10)
        for _ in range(missing):
            ev.add("ERROR", None, None)
        [d], _ = decide_run({"m": ev}, policy)
        assert d.state == state, d.detail
    ev = _seen(1, 1, 10)
    for _ in range(4):
        ev.add("ERROR", None, None)
    [d], _ = decide_run({"m": ev}, policy)
    assert d.reason == CANNOT_FAIL
    assert d.detail.startswith("5 cases in scope (4 missing, 10 excluded): no outcome of those"
                               " 5 cases could fail `max_failures: 5`"), d.detail


def test_pass_at_k_counts_missing_trials_for_max_missing(tmp_path: Path) -> None:
    """30 cases × 5 trials, each case right on its first call and failing after: pass@5
    passes every case, and 120 of the 150 trials are missing (80% > max_missing 20%)."""
    cases = flaky_cases(30, 0, 0, **{f"c{i:03d}": {"fail_on": [1, 2, 3, 4]} for i in range(30)})
    root = flaky_project(tmp_path / "p", cases, trials=5, release=(
        "version: 1\nrules:\n  - {id: solvable, metric: exact_label, aggregate: pass_at_k,"
        " min: 0.8}\n"))
    result = oloproof.run(root)
    [d] = result.decisions
    assert d.missing_share == pytest.approx(120 / 150) and d.incomplete, d.detail
    assert "80% of the trials missing, over max_missing 20%" in d.detail
    assert result.exit_code == 5


def _pairs(n: int, candidate: bool, baseline: bool) -> Any:
    shared = [f"c{i:02d}" for i in range(n)]
    return pair_metric("m", "BINARY", shared,
                       {c: CaseOutcome("OBSERVED", candidate) for c in shared},
                       {c: CaseOutcome("OBSERVED", baseline) for c in shared}, 0.95)


@pytest.mark.parametrize(("kind", "margin"), [
    ("non_inferiority", 0.1), ("non_inferiority", 0.5), ("equivalence", 0.3),
])
def test_a_comparison_passes_only_where_the_opposite_pairs_would_fail(
    kind: str, margin: float
) -> None:
    """The finding: two runs sharing 2 case ids, non_inferiority margin 0.10: [+6.9, +100.0]
    pts read PASS ALLOW, while no outcome of 2 pairs could have failed it. At every number of
    pairs, the candidate's best is a PASS only when its worst (failing every case the
    baseline passes) at the same number is a FAIL; a PASS alone that could not have failed
    is evidence_cannot_fail."""
    policy = ComparePolicy.validate({
        "version": 1, "rules": [{"id": "r", "kind": kind, "metric": "m", "margin": margin}]})
    reasons = []
    for n in range(1, 60):
        # Equivalence passes on equal runs; non-inferiority on a candidate that is better.
        [d] = decide_comparison({"m": _pairs(n, True, kind == "equivalence")}, policy)
        [worst] = decide_comparison({"m": _pairs(n, False, True)}, policy)
        if d.state == RuleState.PASS:
            assert worst.state == RuleState.FAIL, (n, d.detail)
        if d.reason == CANNOT_FAIL:
            assert worst.state != RuleState.FAIL, (n, worst.detail)
            assert d.detail.startswith(f"{n} pair{'s' if n > 1 else ''}: no paired outcome"), d
        reasons.append(d.reason)
    assert reasons[-1] in ("candidate_not_worse", "interval_inside_margins"), reasons
    if kind == "non_inferiority":
        assert CANNOT_FAIL in reasons
    [d] = decide_comparison({"m": _pairs(2, True, False)}, ComparePolicy.validate({
        "version": 1, "rules": [{"id": "r", "kind": "non_inferiority", "metric": "m",
                                 "margin": 0.1}]}))
    assert d.detail.startswith(
        "2 pairs: no paired outcome of them could fail `non_inferiority, margin: 0.1`: even if"
        " the candidate failed every case the baseline passed, the 95% Newcombe interval"
        " [-100.0, -6.9] pts would not lie at or below -10.0 pts; the rule alone: PASS"), d.detail
