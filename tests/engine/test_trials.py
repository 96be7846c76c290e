"""Repeated trials, in-process: real projects, real SQLite stores, a system that counts its
calls in a file (tests/engine/_trials.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from tests.engine._trials import calls, flaky_cases, flaky_project

import oloproof
from oloproof.errors import ConfigError
from oloproof.events import Event, event_schema

FLOOR = """
version: 1
rules:
  - id: floor
    metric: exact_label
    min: 0.5
"""


def _db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / ".oloproof" / "store.sqlite")


def test_trial_0_reuses_what_a_run_of_one_trial_stored(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(6, 3, 1), release=FLOOR)
    one = oloproof.run(root)
    assert calls(root) == 10
    assert one.trials == 1 and one.flaky == []
    three = oloproof.run(root, trials=3)
    # Trial 0 of every case came from the cache of the one-trial run; trials 1 and 2 ran.
    assert calls(root) == 10 + 20
    assert three.cache == {"execution_hits": 10, "execution_misses": 20,
                           "judgment_hits": 10, "judgment_misses": 20}
    conn = _db(root)
    try:
        keys = {
            run_id: dict(conn.execute(
                "SELECT case_id, exec_key FROM run_cases WHERE run_id = ?", (run_id,)
            ).fetchall())
            for run_id in (one.run_id, three.run_id)
        }
        assert keys[one.run_id] == keys[three.run_id]
        trial_keys = {r[0] for r in conn.execute(
            "SELECT exec_key FROM trial_cases WHERE run_id = ?", (three.run_id,))}
        assert len(trial_keys) == 20 and not trial_keys & set(keys[one.run_id].values())
    finally:
        conn.close()


def test_raising_k_runs_only_the_new_trials_and_a_rerun_calls_nothing(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(5, 5, 2), release=FLOOR, trials=4)
    oloproof.run(root)
    assert calls(root) == 12 * 4
    again = oloproof.run(root)
    assert calls(root) == 48 and again.cache["execution_misses"] == 0  # type: ignore[index]
    eight = oloproof.run(root, trials=8)
    assert calls(root) == 48 + 12 * 4
    assert eight.cache["execution_hits"] == 48  # type: ignore[index]
    assert eight.cache["execution_misses"] == 48  # type: ignore[index]


def test_a_run_of_one_trial_is_stored_as_before(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(6, 0, 0), release=FLOOR)
    seen: list[Event] = []
    result = oloproof.run(root, on_event=seen.append)
    conn = _db(root)
    try:
        assert conn.execute("SELECT count(*) FROM run_trials").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM trial_cases").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM trial_judgments").fetchone() == (0,)
        (policy,) = conn.execute("SELECT policy_json FROM runs").fetchone()
        assert "aggregate" not in policy
    finally:
        conn.close()
    for event in seen:
        assert "trial" not in event.to_json()
    assert "trials" not in result.to_dict()
    assert all("trials" not in m.to_json() for m in result.metrics.values())


def test_events_of_a_trial_run(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(8, 4, 0), release=FLOOR, trials=3)
    seen: list[Event] = []
    oloproof.run(root, on_event=seen.append)
    lines = [e.to_json() for e in seen]
    validator = Draft202012Validator(event_schema())
    for line in lines:
        assert not list(validator.iter_errors(line)), line
    executed = [e for e in lines if e["type"] == "case_executed"]
    judged = [e for e in lines if e["type"] == "case_judged"]
    assert len(executed) == 36 and len(judged) == 36
    assert sorted({(e["scenario_id"], e["trial"]) for e in executed}) == sorted(
        (f"c{i:03d}", t) for i in range(12) for t in range(3)
    )
    started = next(e for e in lines if e["type"] == "run_started")
    assert started["cases"] == 12
    provisional = [e for e in lines if e["type"] == "provisional_metrics"]
    # counted in cases (a case is done with its last trial), over trial 0 only
    assert provisional[-1]["cases_done"] == provisional[-1]["cases_total"] == 12
    assert provisional[-1]["metrics"][0]["n_observed"] == 12
    assert provisional[-1]["metrics"][0]["estimate"] == 1.0  # flaky cases pass trial 0


def test_the_metric_is_the_mean_of_per_case_fractions(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(10, 10, 5), release=FLOOR, trials=4)
    result = oloproof.run(root)
    m = result.metrics["exact_label"]
    assert m.trials == 4 and m.cases == 25
    assert m.estimate == pytest.approx((10 * 1.0 + 10 * 0.5 + 5 * 0.0) / 25)
    assert (m.passed, m.observed, m.missing) == (60, 100, 0)
    # Decided by the betting interval on the 25 cases' pass fractions (issue 33), in the
    # canonical order of the case ids: checked against the numpy reference.
    assert m.interval_method == "case_means_betting"
    assert "25 cases × 4 trials" in m.cases_text()
    assert result.decisions[0].detail.startswith("95% case betting [")
    from tests.stats import _betting_reference as betting_reference

    fractions = {f"c{i:03d}": 1.0 if i < 10 else 0.5 if i < 20 else 0.0 for i in range(25)}
    lower, upper = betting_reference.mean_interval(dict(fractions), 0.0, 1.0)
    assert m.lower == pytest.approx(lower, abs=3e-10) and m.upper == pytest.approx(upper, abs=3e-10)
    assert [f.case_id for f in result.flaky] == [f"c{i:03d}" for i in range(10, 20)]
    assert result.flaky[0].verdicts == (True, False, True, False)
    case = next(c for c in result.cases() if c.id == "c010")
    assert [t.trial for t in case.trials] == [1, 2, 3]
    assert [t.judgments["exact_label"].passed for t in case.trials] == [False, True, False]
    records = result.to_trial_records()
    assert len(records) == 100 and {r["trial"] for r in records} == {0, 1, 2, 3}


def _run_with(tmp_path: Path, release: str, **kw: Any) -> oloproof.RunResult:
    cases = flaky_cases(12, 4, 4, c012={"fail_on": [2]}, c000={"fail_on": [1, 2]})
    root = flaky_project(tmp_path / "p", cases, release=release, trials=3)
    return oloproof.run(root, **kw)


AGGREGATES = """
version: 1
rules:
  - id: any
    metric: exact_label
    aggregate: pass_at_k
    min: 0.5
  - id: all
    metric: exact_label
    aggregate: pass_all_k
    min: 0.5
  - id: flaky
    metric: exact_label
    aggregate: flaky_share
    max: 0.5
  - id: fails
    metric: exact_label
    kind: observed_count
    max_failures: 5
"""


def test_missing_trials_are_never_passes(tmp_path: Path) -> None:
    result = _run_with(tmp_path, AGGREGATES)
    m = result.metrics["exact_label"]
    assert m.missing == 3  # c000 lost trials 1 and 2, c012 (flaky) lost trial 2
    any_k = result.metrics["exact_label[pass@3]"]
    all_k = result.metrics["exact_label[pass^3]"]
    flaky = result.metrics["exact_label[flaky]"]
    # pass@3: 16 cases passed a trial (c000 on trial 0), 4 wrong ones failed all three.
    assert (any_k.passed, any_k.observed, any_k.missing) == (16, 20, 0)
    # pass^3: c000 has no failure and two missing trials: missing, never a pass; c012
    # (flaky) failed trial 1, so it fails whatever trial 2 was.
    assert (all_k.passed, all_k.observed, all_k.missing) == (11, 19, 1)
    # flaky: c012 disagreed on its two observed trials; c000 (one observed trial) could be.
    assert (flaky.passed, flaky.observed, flaky.missing) == (4, 19, 1)
    decisions = {d.rule: d for d in result.decisions}
    assert decisions["any"].metric == "exact_label[pass@3]"
    assert decisions["fails"].detail.startswith(  # failed trials, counted
        "57 observed, 16 failed, 3 missing trials of 3 per case")
    # the interval holds for every completion of the missing trials
    assert m.lower is not None and m.upper is not None and m.lower < m.estimate < m.upper  # type: ignore[operator]


def test_pass_at_k_with_one_trial_is_the_metric_itself(tmp_path: Path) -> None:
    rules = AGGREGATES.split("  - id: flaky")[0]
    root = flaky_project(tmp_path / "p", flaky_cases(7, 0, 3), release=rules)
    result = oloproof.run(root)
    base, any_k = result.metrics["exact_label"], result.metrics["exact_label[pass@1]"]
    assert (any_k.estimate, any_k.lower, any_k.upper) == (base.estimate, base.lower, base.upper)


def test_a_flaky_share_rule_needs_trials(tmp_path: Path) -> None:
    # 6 cases: the fewest on which a floor of 50% could fail (ALLOW is earned).
    root = flaky_project(tmp_path / "p", flaky_cases(6, 0, 0), release=AGGREGATES)
    with pytest.raises(ConfigError, match=r"rules\[2\]\.aggregate.*one trial per case"):
        oloproof.run(root)
    assert not (root / ".oloproof" / "store.sqlite").exists() or _db(root).execute(
        "SELECT count(*) FROM runs").fetchone() == (0,)
    # the stored run of 3 trials is fine; re-read under the same policy
    result = oloproof.run(root, trials=3)
    again = oloproof.read_run(result.run_id, root)
    assert [d.state for d in again.decisions] == [d.state for d in result.decisions]
    assert again.trials == 3 and again.flaky == result.flaky


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("metric: days\n    aggregate: pass_at_k\n    max: 3",
         "aggregate: pass_at_k needs a pass or fail per trial"),
        ("metric: exact_label\n    kind: observed_count\n    aggregate: mean\n    max_failures: 1",
         "aggregate: mean has no failures to count"),
        ("metric: exact_label\n    aggregate: best_of_k\n    min: 0.5", "aggregate"),
    ],
)
def test_bad_aggregates_are_configuration_errors(tmp_path: Path, rule: str, message: str) -> None:
    evaluators = """
      - type: exact_match
        criterion: exact_label
        field: label
      - type: absolute_error
        criterion: days
        field: n
        range: [0, 100]
    """
    from tests.conftest import write_project
    from tests.engine._trials import FLAKY_APP

    release = f"version: 1\nrules:\n  - id: r\n    {rule}\n"
    root = write_project(tmp_path / "p", app=FLAKY_APP, cases=flaky_cases(3, 0, 0),
                         evaluators=evaluators, release=release)
    with pytest.raises(ConfigError, match=message):
        oloproof.run(root)


def test_a_mean_metric_over_trials_is_a_mean_of_case_means(tmp_path: Path) -> None:
    from tests.conftest import write_project
    from tests.engine._trials import FLAKY_APP

    evaluators = """
      - type: absolute_error
        criterion: err
        field: label_len
        range: [0, 10]
    """
    app = FLAKY_APP.replace('return {"label": "ok" if right else "no"}',
                            'return {"label_len": 1 if right else 3}')
    cases = [
        {"id": c["id"], "input": c["input"], "expected": {"label_len": 1}}
        for c in flaky_cases(4, 4, 0)
    ]
    root = write_project(tmp_path / "p", app=app, cases=cases, evaluators=evaluators,
                         release="version: 1\nrules:\n  - id: r\n    metric: err\n    max: 2\n",
                         concurrency=(1, 1))
    result = oloproof.run(root, trials=2)
    m = result.metrics["err"]
    # steady cases: error 0 on both trials; flaky: 0 then 2, a case mean of 1
    assert m.estimate == pytest.approx(0.5)
    assert m.cases == 8 and m.observed == 16
    # The range is declared: the betting interval over the case means, in the canonical
    # order of the case ids (issue 33), never Student t.
    assert m.interval_method == "case_means_betting"
    assert m.guarantee == "valid at every n"
    from tests.stats import _betting_reference as betting_reference

    means = {c["id"]: (1.0 if c["input"]["kind"] == "flaky" else 0.0) for c in cases}
    assert len({c["id"] for c in cases}) == 8 and sum(means.values()) == 4.0
    lower, upper = betting_reference.mean_interval(dict(means), 0.0, 10.0)
    assert m.lower == pytest.approx(lower, abs=3e-9) and m.upper == pytest.approx(upper, abs=3e-9)


def test_trials_out_of_range_are_refused(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(3, 0, 0), release=FLOOR)
    for bad in (0, 101, 2.5, True):
        with pytest.raises(oloproof.UsageError, match="trials must be a whole number"):
            oloproof.run(root, trials=bad)  # type: ignore[arg-type]
    config = root / "oloproof.yaml"
    config.write_text(config.read_text() + "trials: 0\n")
    with pytest.raises(ConfigError, match="trials"):
        oloproof.run(root)


def test_compare_pairs_trial_0_and_says_so(tmp_path: Path) -> None:
    root = flaky_project(tmp_path / "p", flaky_cases(6, 4, 0), release=FLOOR)
    one = oloproof.run(root)
    three = oloproof.run(root, trials=3)
    cmp = oloproof.compare(three, one, project=root)
    warnings = cmp.warnings
    assert f"{three.run_id} made 3 trials per case: the comparison pairs trial 0 of each" \
        " case only" in warnings
    assert not any(one.run_id in w and "trials" in w for w in warnings)


def test_groups_of_a_trial_run_hold_whole_cases(tmp_path: Path) -> None:
    cases = flaky_cases(6, 6, 0)
    for i, case in enumerate(cases):
        case["metadata"] = {"lang": "fr" if i % 2 else "en"}
    rules = """
version: 1
rules:
  - id: floor
    metric: exact_label
    each_group: true
    min: 0.9
  - id: fr-reliable
    metric: exact_label
    group: {lang: fr}
    aggregate: pass_all_k
    min: 0.9
"""
    root = flaky_project(tmp_path / "p", cases, release=rules, trials=2)
    result = oloproof.run(root, group_by="lang")
    fr, en = result.metrics["exact_label[lang=fr]"], result.metrics["exact_label[lang=en]"]
    assert (fr.cases, fr.trials, fr.observed) == (6, 2, 12)
    assert (en.cases, en.observed) == (6, 12)
    # c001, c003, c005 steady (fraction 1); c007, c009, c011 flaky (fraction 1/2)
    assert fr.estimate == pytest.approx(0.75)
    reliable = result.metrics["exact_label[lang=fr][pass^2]"]
    assert (reliable.passed, reliable.observed) == (3, 6)
    assert {d.rule for d in result.decisions} == {"floor[lang=en]", "floor[lang=fr]",
                                                  "fr-reliable"}
    again = oloproof.read_run(result.run_id, root)
    assert again.metrics["exact_label[lang=fr]"].estimate == fr.estimate
